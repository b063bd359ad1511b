import Dispatch
import Foundation
import Testing
import TestSupport
@testable import BufferQueue

/// What an input queue handed back, in order.
final class CaptureLog: Sendable {
    struct Filled: Sendable {
        let bufferID: Int
        let start: Int64
        let frames: Int
        let bytes: [UInt8]
    }

    struct State: Sendable {
        var filled: [Filled] = []
        var returned: [Int] = []
        var overruns: [(lost: Int, at: Int64)] = []
        var running: [Bool] = []
        var errors: [String] = []
        var frames: Int { filled.reduce(0) { $0 + $1.frames } }
    }

    let state = Watched(State())

    /// Records events of `queue`. With `fromCallback` the filled buffers are recorded by
    /// ``record(_:_:)`` from the input callback (a callback that enqueues the buffer again reuses it
    /// before the event stream is read).
    init(_ queue: AudioInputQueue, fromCallback: Bool = false) {
        let stream = queue.events()
        let state = self.state
        Task {
            for await event in stream {
                switch event {
                case .bufferFilled(let buffer, let frames):
                    if fromCallback { continue }
                    let bytes = buffer.withUnsafeBytes { Array($0) }
                    state.update { $0.filled.append(Filled(bufferID: buffer.id, start: frames.startSampleTime, frames: frames.frameCount, bytes: bytes)) }
                case .bufferReturned(let buffer): state.update { $0.returned.append(buffer.id) }
                case .overrun(let lost, let at): state.update { $0.overruns.append((lost, at)) }
                case .runningChanged(let running): state.update { $0.running.append(running) }
                case .error(let error): state.update { $0.errors.append("\(error)") }
                }
            }
        }
    }

    /// Records a filled buffer (from the input callback).
    func record(_ buffer: AudioQueueBuffer, _ frames: AudioCapturedFrames) {
        let bytes = buffer.withUnsafeBytes { Array($0) }
        state.update { $0.filled.append(Filled(bufferID: buffer.id, start: frames.startSampleTime, frames: frames.frameCount, bytes: bytes)) }
    }

    func wait(_ condition: @escaping @Sendable (State) -> Bool) async -> Bool {
        await state.wait(timeout: .seconds(10), until: condition)
    }

    /// Every filled buffer's bytes as float32 samples, in order.
    var floats: [Float] {
        state.current.filled.flatMap { filled in
            filled.bytes.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
        }
    }
}

final class LogHolder: @unchecked Sendable {
    var log: CaptureLog?
}

/// Interleaved frames whose every sample is the frame's index (exact in float32 below 2^24).
private func indexRamp(from start: Int, frames: Int, channels: Int) -> [Float] {
    (start..<(start + frames)).flatMap { Array(repeating: Float($0), count: channels) }
}

@Suite struct InputQueueTests {
    let format = AudioStreamDescription.float32(sampleRate: 48000, channels: 2)

    /// A queue that puts every filled buffer back at once, with `count` buffers of `frames` frames.
    private func recirculatingQueue(_ source: NullSource, format: AudioStreamDescription, frames: Int, count: Int,
                                    captureFrames: Int? = nil) throws -> (AudioInputQueue, CaptureLog) {
        let holder = LogHolder()
        let queue = try AudioInputQueue(format: format, configuration: .init(source: source, captureBufferFrames: captureFrames)) { queue, buffer, frames in
            holder.log?.record(buffer, frames)
            try? queue.enqueue(buffer)
        }
        let log = CaptureLog(queue, fromCallback: true)
        holder.log = log
        for _ in 0..<count { try queue.enqueue(queue.allocateBuffer(capacity: frames * format.bytesPerFrame)) }
        return (queue, log)
    }

    @Test func suppliedFramesComeBackExactlyInFullBuffersWithTheirStartTimes() async throws {
        let total = 10_000
        let source = NullSource(signal: .frames(indexRamp(from: 0, frames: total, channels: 2)), pacing: .unpaced)
        let (queue, log) = try recirculatingQueue(source, format: format, frames: 1024, count: 3)
        try queue.start()
        #expect(await log.wait { $0.running == [true, false] })
        let filled = log.state.current.filled
        // 9 full buffers, then the 784 left, each starting where the previous ended.
        #expect(filled.map(\.frames) == Array(repeating: 1024, count: 9) + [784])
        #expect(filled.map(\.start) == (0..<10).map { Int64($0 * 1024) })
        let matches = log.floats == indexRamp(from: 0, frames: total, channels: 2)
        #expect(matches)
        #expect(log.state.current.overruns.isEmpty)
        #expect(!queue.isRunning)
        queue.dispose(immediately: true)
    }

    @Test func aStalledCallbackLosesFramesAndTheTimelineJumpsByExactlyThatMany() async throws {
        let source = NullSource(pacing: .manual)
        let queue = try AudioInputQueue(format: format, configuration: .init(source: source, captureBufferFrames: 4096))
        let log = CaptureLog(queue)
        try queue.start()
        // No buffer is enqueued: the ring takes 4 096 frames, the next 3 000 are lost.
        #expect(source.push(indexRamp(from: 0, frames: 4096, channels: 2)))
        #expect(source.push(indexRamp(from: 4096, frames: 3000, channels: 2)))
        let buffers = try (0..<6).map { _ in try queue.allocateBuffer(capacity: 1024 * format.bytesPerFrame) }
        for buffer in buffers.prefix(4) { try queue.enqueue(buffer) }
        #expect(await log.wait { $0.frames == 4096 })
        // The ring has room again: the next frames are kept, after a gap of exactly 3 000.
        #expect(source.push(indexRamp(from: 7096, frames: 1500, channels: 2)))
        for buffer in buffers.suffix(2) { try queue.enqueue(buffer) }
        #expect(await log.wait { $0.frames == 4096 + 1024 && $0.overruns.count == 1 })
        let state = log.state.current
        #expect(state.overruns.first?.lost == 3000)
        #expect(state.overruns.first?.at == 4096)
        #expect(state.filled.map(\.start) == [0, 1024, 2048, 3072, 7096])
        #expect(state.filled.map(\.frames) == [1024, 1024, 1024, 1024, 1024])
        // Each buffer's samples are the timeline positions of its frames: nothing invented, nothing shifted.
        let consistent = state.filled.allSatisfy { filled in
            let samples = filled.bytes.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
            return samples == indexRamp(from: Int(filled.start), frames: filled.frames, channels: 2)
        }
        #expect(consistent)
        #expect(queue.currentTime().sampleTime == 4096 + 3000 + 1500)
        // Stopping now hands back the 476 frames held, short.
        try queue.stop(immediately: true)
        #expect(await log.wait { $0.frames == 4096 + 1500 && $0.running == [true, false] })
        #expect(log.state.current.filled.last?.start == 8120)
        queue.dispose(immediately: true)
    }

    @Test func stoppingAfterTheCurrentBuffersFillsEveryEnqueuedBufferThenStops() async throws {
        let source = NullSource(pacing: .manual)
        let queue = try AudioInputQueue(format: format, configuration: .init(source: source))
        let log = CaptureLog(queue)
        let buffers = try (0..<3).map { _ in try queue.allocateBuffer(capacity: 1000 * format.bytesPerFrame) }
        for buffer in buffers { try queue.enqueue(buffer) }
        try queue.start()
        #expect(source.push(indexRamp(from: 0, frames: 1500, channels: 2)))
        try queue.stop(immediately: false)
        #expect(queue.isStopping)
        let late = try queue.allocateBuffer(capacity: 8)
        #expect(throws: AudioQueueError.self) { try queue.enqueue(late) }
        #expect(source.push(indexRamp(from: 1500, frames: 2000, channels: 2)))
        #expect(await log.wait { $0.running == [true, false] })
        #expect(log.state.current.filled.map(\.frames) == [1000, 1000, 1000])
        let matches = log.floats == indexRamp(from: 0, frames: 3000, channels: 2)
        #expect(matches)
        #expect(!queue.isRunning)
        // A later push finds the source stopped.
        #expect(!source.push([0, 0]))
        queue.dispose(immediately: true)
    }

    @Test func disposingAfterTheCapturedFramesHandsThemBackFirst() async throws {
        let source = NullSource(pacing: .manual)
        let handed = Watched<[Float]>([])
        let callbackQueue = DispatchQueue(label: "test.callbacks")
        let queue = try AudioInputQueue(format: format, configuration: .init(source: source, callbackQueue: callbackQueue)) { _, buffer, _ in
            let samples = buffer.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
            handed.update { $0 += samples }
        }
        try queue.enqueue(queue.allocateBuffer(capacity: 1000 * format.bytesPerFrame))
        try queue.start()
        #expect(source.push(indexRamp(from: 0, frames: 500, channels: 2)))
        // The callback queue is held (at most 0.3 s) while dispose runs, so the short buffer's
        // delivery cannot win a race against dispose: it must be waited for.
        let held = DispatchSemaphore(value: 0)
        callbackQueue.async { _ = held.wait(timeout: .now() + .milliseconds(300)) }
        queue.dispose(immediately: false)
        held.signal()
        // dispose returned: the 500 frames already reached the callback, short buffer and all.
        let same = handed.current == indexRamp(from: 0, frames: 500, channels: 2)
        #expect(same)
    }

    @Test func resetReturnsEveryBufferEmptyAndDiscardsWhatWasCaptured() async throws {
        let source = NullSource(pacing: .manual)
        let queue = try AudioInputQueue(format: format, configuration: .init(source: source))
        let log = CaptureLog(queue)
        let buffers = try (0..<2).map { _ in try queue.allocateBuffer(capacity: 1000 * format.bytesPerFrame) }
        for buffer in buffers { try queue.enqueue(buffer) }
        try queue.start()
        #expect(source.push(indexRamp(from: 0, frames: 1200, channels: 2)))
        #expect(await log.wait { $0.filled.count == 1 })
        try queue.reset()
        #expect(await log.wait { $0.returned.count == 1 })
        #expect(log.state.current.returned == [buffers[1].id])
        #expect(!buffers[1].isInQueue)
        // Still running: a new buffer is filled from the next frames on, at their timeline place.
        try queue.enqueue(buffers[0])
        #expect(source.push(indexRamp(from: 1200, frames: 1000, channels: 2)))
        #expect(await log.wait { $0.filled.count == 2 })
        #expect(log.state.current.filled.last?.start == 1200)
        #expect(queue.currentTime().discontinuity)
        queue.dispose(immediately: true)
    }

    @Test func integerFormatsAreQuantisedAndMetered() async throws {
        let int16 = AudioStreamDescription.linearPCM(sampleRate: 44100, channels: 1, bitsPerChannel: 16)
        let frames = 4410
        let step = 2 * Double.pi * 1000 / 44100
        let samples: [Float] = (0..<frames).map { index -> Float in Float(0.5 * sin(step * Double(index))) }
        let source = NullSource(signal: .frames(samples), pacing: .unpaced)
        let (queue, log) = try recirculatingQueue(source, format: int16, frames: 441, count: 2)
        queue.setLevelMeteringEnabled(true)
        try queue.start()
        #expect(await log.wait { $0.running == [true, false] })
        let recorded = log.state.current.filled.flatMap { filled in filled.bytes.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) } }
        let expected = samples.map { Int16(($0 * 32768).rounded()) }
        let same = recorded == expected
        #expect(same)
        #expect(recorded.count == frames)
        let meter = try #require(queue.currentLevelMeters.first)
        #expect(abs(meter.peak - 0.5) < 0.01)
        #expect(abs(meter.average - 0.5 / 2.0.squareRoot().asFloat) < 0.01)
        queue.dispose(immediately: true)
    }

    @Test func aMonoSourceIsMixedToTheQueuesChannels() async throws {
        let source = NullSource(signal: .frames(indexRamp(from: 0, frames: 2048, channels: 1)), pacing: .unpaced, channels: 1)
        let (queue, log) = try recirculatingQueue(source, format: format, frames: 512, count: 2)
        try queue.start()
        #expect(await log.wait { $0.running == [true, false] })
        #expect(queue.sourceFormat?.channelsPerFrame == 1)
        let matches = log.floats == indexRamp(from: 0, frames: 2048, channels: 2)
        #expect(matches)
        queue.dispose(immediately: true)
    }

    @Test func aRealTimeSourceKeepsTime() async throws {
        let source = NullSource(signal: .sine(frequency: 440, amplitude: 0.25), pacing: .realTime)
        let (queue, log) = try recirculatingQueue(source, format: format, frames: 2400, count: 4)
        try queue.start()
        #expect(await log.wait { $0.frames >= 9600 })
        try queue.pause()
        let paused = queue.currentTime().sampleTime
        #expect(paused >= 9600)
        try queue.stop(immediately: true)
        // Everything captured before the pause is handed back by the stop.
        #expect(await log.wait { Int64($0.frames) == paused && $0.running == [true, false] })
        let state = log.state.current
        // Contiguous: each buffer starts where the previous one ended, and nothing was lost.
        #expect(state.overruns.isEmpty)
        #expect(zip(state.filled, state.filled.dropFirst()).allSatisfy { $0.start + Int64($0.frames) == $1.start })
        #expect(Int64(state.frames) == paused)
        queue.dispose(immediately: true)
    }

    @Test func badRequestsAreRefusedWithReasons() throws {
        #expect(throws: AudioQueueError.self) {
            _ = try AudioInputQueue(format: AudioStreamDescription(sampleRate: 44100, formatID: .mpegLayer3, bytesPerPacket: 0, framesPerPacket: 1152, bytesPerFrame: 0, channelsPerFrame: 2, bitsPerChannel: 0))
        }
        let queue = try AudioInputQueue(format: format)
        #expect(throws: AudioQueueError.self) { _ = try queue.allocateBuffer(capacity: 4) }
        let other = try AudioInputQueue(format: format)
        let foreign = try other.allocateBuffer(capacity: 64)
        #expect(throws: AudioQueueError.self) { try queue.enqueue(foreign) }
        let buffer = try queue.allocateBuffer(capacity: 64)
        try queue.enqueue(buffer)
        #expect(throws: AudioQueueError.self) { try queue.enqueue(buffer) }
        queue.dispose(immediately: true)
        #expect(throws: AudioQueueError.self) { try queue.start() }
        #expect(!buffer.isInQueue)
        other.dispose(immediately: true)
    }
}

private extension Double {
    var asFloat: Float { Float(self) }
}

/// Input queues that record compressed formats: buffers of whole packets with their descriptions,
/// an exact frame limit, and the encoder's cookie and gapless numbers.
@Suite struct CompressedInputQueueTests {
    /// Frames on the 16-bit grid (k / 32 768), so a 16-bit lossless encode is exact.
    static func gridSignal(frames: Int, channels: Int) -> [Float] {
        (0..<(frames * channels)).map { index in
            let frame = index / channels, channel = index % channels
            let value = 0.4 * sin(2 * Double.pi * Double(frame) * Double(300 + 200 * channel) / 44100)
            return Float((value * 32768).rounded()) / 32768
        }
    }

    struct Take: Sendable {
        var bytes: [UInt8] = []
        var descriptions: [AudioPacketDescription] = []
        var frames = 0
        var starts: [Int64] = []
        var running: [Bool] = []
    }

    /// Records `signal` from an unpaced null source into `format`, stopping by the frame limit.
    static func record(_ signal: [Float], channels: Int, format: AudioStreamDescription, limit: Int) async throws
        -> (take: Take, cookie: [UInt8]?, totals: AudioEncodingTotals?, queue: AudioInputQueue) {
        let source = NullSource(signal: .frames(signal), pacing: .unpaced, channels: channels)
        let take = Watched(Take())
        let queue = try AudioInputQueue(format: format, configuration: .init(source: source, frameLimit: limit)) { queue, buffer, frames in
            buffer.withUnsafeBytes { bytes in
                take.update { take in
                    let base = take.bytes.count
                    take.bytes += bytes
                    take.descriptions += frames.packetDescriptions.map {
                        AudioPacketDescription(startOffset: base + $0.startOffset, variableFramesInPacket: $0.variableFramesInPacket, dataByteSize: $0.dataByteSize)
                    }
                    take.frames += frames.frameCount
                    take.starts.append(frames.startSampleTime)
                }
            }
            try? queue.enqueue(buffer)
        }
        let events = queue.events()
        Task { for await event in events { if case .runningChanged(let running) = event { take.update { $0.running.append(running) } } } }
        #expect(throws: AudioQueueError.self) { _ = try queue.allocateBuffer(capacity: 16) }
        for _ in 0..<3 { try queue.enqueue(queue.allocateBuffer(capacity: max(queue.maximumPacketSize * 4, 8192))) }
        try queue.start()
        #expect(await take.wait(timeout: .seconds(20)) { $0.running == [true, false] })
        return (take.current, queue.magicCookie, queue.encodingTotals, queue)
    }

    @Test func appleLosslessRecordingDecodesToExactlyTheFramesCaptured() async throws {
        let limit = 44100 + 777
        let signal = Self.gridSignal(frames: 60_000, channels: 2)
        let format = AudioStreamDescription(sampleRate: 44100, formatID: .appleLossless, bytesPerPacket: 0, framesPerPacket: 0,
                                            bytesPerFrame: 0, channelsPerFrame: 2, bitsPerChannel: 16)
        let (take, cookie, totals, queue) = try await Self.record(signal, channels: 2, format: format, limit: limit)
        #expect(queue.streamDescription.formatID == .appleLossless && queue.streamDescription.framesPerPacket == 4096)
        #expect(totals == AudioEncodingTotals(validFrames: Int64(limit), primingFrames: 0, remainderFrames: 0))
        #expect(take.frames == limit)
        #expect(take.descriptions.map(\.variableFramesInPacket).reduce(0, +) == limit)
        // Each buffer starts where the packets before it ended.
        #expect(take.starts.first == 0)
        let decoder = try ALACDecoder(format: queue.streamDescription, magicCookie: cookie)
        let out = DecodedAudio(format: decoder.outputFormat)
        try take.bytes.withUnsafeBytes { bytes in
            for description in take.descriptions {
                try decoder.decode(packet: UnsafeRawBufferPointer(rebasing: bytes[description.startOffset..<(description.startOffset + description.dataByteSize)]),
                                   frames: description.variableFramesInPacket, into: out)
            }
        }
        let decoded = out.withUnsafeSamples { Array($0) }
        #expect(decoded == Array(signal[0..<(limit * 2)]))
        queue.dispose(immediately: true)
    }

    @Test func imaRecordingCountsItsPaddingAsRemainder() async throws {
        let limit = 10_000
        let signal = Self.gridSignal(frames: 20_000, channels: 1)
        let format = AudioStreamDescription(sampleRate: 22050, formatID: .appleIMA4, bytesPerPacket: 0, framesPerPacket: 0,
                                            bytesPerFrame: 0, channelsPerFrame: 1, bitsPerChannel: 0)
        let (take, _, totals, queue) = try await Self.record(signal, channels: 1, format: format, limit: limit)
        let packets = (limit + 63) / 64
        #expect(take.descriptions.count == packets)
        #expect(take.bytes.count == packets * 34)
        #expect(totals == AudioEncodingTotals(validFrames: Int64(limit), primingFrames: 0, remainderFrames: packets * 64 - limit))
        queue.dispose(immediately: true)
    }

    /// A second recording with the same queue is a new stream: its gapless numbers count only its
    /// own frames, and its packets decode to them.
    @Test func aSecondRecordingStartsANewStream() async throws {
        let limit = 5_000
        let signal = Self.gridSignal(frames: 30_000, channels: 1)
        let format = AudioStreamDescription(sampleRate: 44100, formatID: .appleLossless, bytesPerPacket: 0, framesPerPacket: 0,
                                            bytesPerFrame: 0, channelsPerFrame: 1, bitsPerChannel: 16)
        let source = NullSource(signal: .frames(signal), pacing: .unpaced, channels: 1)
        let take = Watched(Take())
        let queue = try AudioInputQueue(format: format, configuration: .init(source: source, frameLimit: limit)) { queue, buffer, frames in
            take.update { $0.frames += frames.frameCount }
            try? queue.enqueue(buffer)
        }
        let events = queue.events()
        Task { for await event in events { if case .runningChanged(let running) = event { take.update { $0.running.append(running) } } } }
        for _ in 0..<3 { try queue.enqueue(queue.allocateBuffer(capacity: queue.maximumPacketSize * 2)) }
        try queue.start()
        #expect(await take.wait(timeout: .seconds(20)) { $0.running == [true, false] })
        #expect(queue.encodingTotals?.validFrames == Int64(limit))
        try queue.start()
        #expect(await take.wait(timeout: .seconds(20)) { $0.running == [true, false, true, false] })
        #expect(queue.encodingTotals?.validFrames == Int64(limit), "the second recording's totals count both")
        #expect(take.current.frames == 2 * limit)
        queue.dispose(immediately: true)
    }

    /// Mono IMA4 at 44.1 kHz: 64-frame packets, so the packets of a 4096-frame chunk wait once a
    /// small buffer is full.
    static let monoIMA4 = AudioStreamDescription(sampleRate: 44100, formatID: .appleIMA4, bytesPerPacket: 0, framesPerPacket: 0,
                                                 bytesPerFrame: 0, channelsPerFrame: 1, bitsPerChannel: 0)

    /// An unpaced null source of `frames` mono frames on the 16-bit grid.
    static func unpacedMono(frames: Int) -> NullSource {
        NullSource(signal: .frames(gridSignal(frames: frames, channels: 1)), pacing: .unpaced, channels: 1)
    }

    /// An immediate stop with no buffer enqueued drops the packets the encoder still holds (an
    /// overrun): the totals then describe the packets handed back, so a file closed with them
    /// claims no frame it lacks (seen in CI: a SIGTERM'd FLAC recording said 34 338 frames and
    /// held 32 768).
    @Test func anImmediateStopWithoutABufferCountsOnlyThePacketsHandedBack() async throws {
        struct Held: Sendable {
            var frames = 0
            var packets = 0
            var lost = 0
            var running: [Bool] = []
        }
        let format = Self.monoIMA4
        let source = Self.unpacedMono(frames: 30_000)
        let held = Watched(Held())
        // The buffer is not enqueued again: after the first, the worker has none.
        let queue = try AudioInputQueue(format: format, configuration: .init(source: source)) { _, _, frames in
            held.update { $0.frames += frames.frameCount; $0.packets += frames.packetDescriptions.count }
        }
        let events = queue.events()
        Task {
            for await event in events {
                switch event {
                case .runningChanged(let running): held.update { $0.running.append(running) }
                case .overrun(let lost, _): held.update { $0.lost += lost }
                default: break
                }
            }
        }
        try queue.enqueue(queue.allocateBuffer(capacity: queue.maximumPacketSize * 2))
        try queue.start()
        #expect(await held.wait(timeout: .seconds(20)) { $0.frames > 0 })
        try queue.stop(immediately: true)
        #expect(await held.wait(timeout: .seconds(20)) { $0.running == [true, false] && $0.lost > 0 })
        let totals = try #require(queue.encodingTotals)
        let state = held.current
        #expect(state.packets == 2)
        #expect(totals == AudioEncodingTotals(validFrames: Int64(state.frames - totals.primingFrames), primingFrames: totals.primingFrames, remainderFrames: 0))
        queue.dispose(immediately: true)
    }

    /// A reset drops the packets waiting for a buffer, and the recording goes on after it: the
    /// hole takes valid frames from the totals, which still add up to the packets handed back.
    @Test func aResetsDroppedPacketsLeaveTheTotals() async throws {
        struct Held: Sendable {
            var frames = 0
            var requeue = false
            var running: [Bool] = []
        }
        let limit = 20_000
        let format = Self.monoIMA4
        let source = Self.unpacedMono(frames: 30_000)
        let held = Watched(Held())
        // A small capture ring: the reset discards what it holds and the timeline moves past it,
        // so it must not hold the whole recording.
        let queue = try AudioInputQueue(format: format, configuration: .init(source: source, captureBufferFrames: 4096, frameLimit: limit)) { queue, buffer, frames in
            let requeue = held.update { $0.frames += frames.frameCount; return $0.requeue }
            if requeue { try? queue.enqueue(buffer) }
        }
        let events = queue.events()
        Task { for await event in events { if case .runningChanged(let running) = event { held.update { $0.running.append(running) } } } }
        // One buffer of two packets: the rest of the first 4096 frames' packets wait for another.
        try queue.enqueue(queue.allocateBuffer(capacity: queue.maximumPacketSize * 2))
        try queue.start()
        #expect(await held.wait(timeout: .seconds(20)) { $0.frames > 0 })
        try queue.reset()
        held.update { $0.requeue = true }
        for _ in 0..<3 { try queue.enqueue(queue.allocateBuffer(capacity: queue.maximumPacketSize * 8)) }
        #expect(await held.wait(timeout: .seconds(20)) { $0.running == [true, false] })
        let totals = try #require(queue.encodingTotals)
        let handedBack = held.current.frames
        #expect(handedBack > 128, "the recording went on after the reset")
        #expect(totals.primingFrames + Int(totals.validFrames) + totals.remainderFrames == handedBack, "\(totals)")
        queue.dispose(immediately: true)
    }
}
