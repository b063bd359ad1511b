import Foundation
import Testing
import TestSupport
@testable import BufferQueue

/// A second-order low-pass section (RBJ cookbook), per channel, as an equaliser band would be.
final class Biquad: @unchecked Sendable {
    private let b0, b1, b2, a1, a2: Float
    private var z1: [Float], z2: [Float]
    init(lowPass frequency: Double, q: Double = 0.7071, rate: Double, channels: Int) {
        let w = 2 * Double.pi * frequency / rate, alpha = sin(w) / (2 * q), a0 = 1 + alpha
        b0 = Float((1 - cos(w)) / 2 / a0); b1 = Float((1 - cos(w)) / a0); b2 = b0
        a1 = Float(-2 * cos(w) / a0); a2 = Float((1 - alpha) / a0)
        z1 = [Float](repeating: 0, count: channels); z2 = z1
    }
    func reset() { for c in z1.indices { z1[c] = 0; z2[c] = 0 } }
    func process(_ samples: UnsafeMutablePointer<Float>, frames: Int) {
        let ch = z1.count
        for i in 0..<frames {
            for c in 0..<ch {
                let x = samples[i * ch + c]
                let y = b0 * x + z1[c]
                z1[c] = b1 * x - a1 * y + z2[c]
                z2[c] = b2 * x - a2 * y
                samples[i * ch + c] = y
            }
        }
    }
}

@Suite struct ProcessingTapTests {
    func offlineQueue(channels: Int = 2) throws -> AudioQueue {
        try AudioQueue(format: .float32(sampleRate: 44100, channels: channels))
    }

    func render(_ queue: AudioQueue, channels: Int) throws -> [Float] {
        try queue.setOfflineRenderFormat(.float32(sampleRate: 44100, channels: channels))
        return try queue.renderRest(channels: channels, chunk: 700)
    }

    /// A tap that pulls two frames for each frame it returns (their average) halves the output.
    @Test func aTapThatPullsTwoFramesPerFrameReturned() throws {
        let queue = try offlineQueue(channels: 1)
        let tap = try queue.installProcessingTap(.preEffects) { tap, frames, output, _ in
            var pair = [Float](repeating: 0, count: 2)
            var made = 0
            while made < frames {
                let got = pair.withUnsafeMutableBufferPointer { tap.getSourceAudio(frames: 2, into: $0.baseAddress!) }
                if got.frames < 2 { break }
                output[made] = (pair[0] + pair[1]) / 2
                made += 1
            }
            return made
        }
        #expect(tap.maximumFrames >= 512)
        #expect(tap.processingFormat == .float32(sampleRate: 44100, channels: 1))
        let input = ramp(frames: 10000, channels: 1, offset: 1)
        try queue.enqueue(try queue.makeBuffer(input))
        try queue.flush()
        let output = try render(queue, channels: 1)
        #expect(output.count == 5000)
        let averages: [Float] = (0..<5000).map { (i: Int) -> Float in
            let a: Float = input[2 * i], b: Float = input[2 * i + 1]
            return (a + b) / 2
        }
        #expect(difference(output, averages) == nil)
        #expect(queue.offlineRenderPosition == 5000)
        #expect(queue.currentTime().sampleTime == 10000)
    }

    /// A siphon sees every frame that goes out once, in order, after volume — and changes nothing.
    @Test func aSiphonSeesEveryFrameOnce() throws {
        let queue = try offlineQueue()
        let seen = Locked<[Float]>([])
        let starts = Locked(0)
        try queue.installProcessingTap(.siphon) { _, frames, output, flags in
            if flags.contains(.startOfStream) { starts.withLock { $0 += 1 } }
            seen.withLock { $0 += UnsafeBufferPointer(start: output, count: frames * 2) }
            output[0] = 99   // ignored
            return 0
        }
        try queue.setParameters(.init(volume: 0.5))
        let input = ramp(frames: 12345, channels: 2, offset: 3)
        try queue.enqueue(try queue.makeBuffer(input))
        try queue.flush()
        let output = try render(queue, channels: 2)
        #expect(output.count == input.count)
        #expect(difference(seen.value, output) == nil)
        #expect(output[0] == input[0] * 0.5)
        #expect(starts.value == 1)
    }

    /// The same through a sink: the siphon's frames are the frames the sink played.
    @Test func aSiphonSeesWhatTheSinkPlays() async throws {
        let sink = NullSink(pacing: .unpaced, capturing: true)
        let queue = try AudioQueue(format: .float32(sampleRate: 44100, channels: 2), configuration: .init(sink: sink))
        let seen = Locked<[Float]>([])
        try queue.installProcessingTap(.siphon) { _, frames, output, _ in
            seen.withLock { $0 += UnsafeBufferPointer(start: output, count: frames * 2) }
            return 0
        }
        let input = ramp(frames: 30000, channels: 2, offset: 9)
        try queue.enqueue(try queue.makeBuffer(input))
        let events = EventLog(queue)
        try queue.start()
        try queue.stop(immediately: false)
        #expect(await events.waitForRunning([true, false]))
        #expect(difference(seen.value, input) == nil)
        #expect(difference(trimSilence(sink.capturedSamples(), channels: 2), input) == nil)
    }

    /// A post-effects tap sees the audio after volume and changes what goes out; start and end of
    /// the stream reach it, and a tail it holds comes out at the end.
    @Test func aPostEffectsTapWithATail() throws {
        let queue = try offlineQueue(channels: 1)
        let delay = 100
        final class State: @unchecked Sendable {
            var held = [Float](repeating: 0, count: 100)
            var ended = false
            var starts = 0
        }
        let state = State()
        try queue.installProcessingTap(.postEffects) { tap, frames, output, flags in
            if flags.contains(.startOfStream) { state.starts += 1; state.held = [Float](repeating: 0, count: delay); state.ended = false }
            if state.ended {
                // The tail: what the delay line still holds.
                let n = min(frames, state.held.count)
                for i in 0..<n { output[i] = -state.held[i] }
                state.held.removeFirst(n)
                return n
            }
            let got = tap.getSourceAudio(frames: frames, into: output)
            if got.flags.contains(.endOfStream) { state.ended = true }
            // Delay by `delay` frames and invert.
            var line = state.held + UnsafeBufferPointer(start: output, count: got.frames)
            for i in 0..<got.frames { output[i] = -line[i] }
            line.removeFirst(got.frames)
            state.held = line
            if got.frames == 0 && state.ended {
                let n = min(frames, state.held.count)
                for i in 0..<n { output[i] = -state.held[i] }
                state.held.removeFirst(n)
                return n
            }
            return got.frames
        }
        try queue.setParameters(.init(volume: 0.5))
        let input = ramp(frames: 3000, channels: 1, offset: 1)
        try queue.enqueue(try queue.makeBuffer(input))
        try queue.flush()
        let output = try render(queue, channels: 1)
        #expect(output.count == 3000 + delay)
        #expect(output.prefix(delay).allSatisfy { $0 == 0 })
        let expected: [Float] = input.map { (v: Float) -> Float in -v * 0.5 }
        #expect(difference(Array(output.dropFirst(delay)), expected) == nil)
        // The first call, and the first after the segment ended at the flush.
        #expect(state.starts == 2)
    }

    /// An equaliser band as a tap: a low-pass at 1 kHz keeps 100 Hz and takes 10 kHz down.
    @Test func aBiquadTapFilters() throws {
        let queue = try offlineQueue(channels: 2)
        let band = Biquad(lowPass: 1000, rate: 44100, channels: 2)
        try queue.installProcessingTap(.preEffects) { tap, frames, output, flags in
            if flags.contains(.startOfStream) { band.reset() }
            let got = tap.getSourceAudio(frames: frames, into: output)
            band.process(output, frames: got.frames)
            return got.frames
        }
        let low = sineWave(100, rate: 44100, frames: 44100, channels: 2)
        let high = sineWave(10000, rate: 44100, frames: 44100, channels: 2)
        try queue.enqueue(try queue.makeBuffer(low))
        try queue.flush()
        try queue.enqueue(try queue.makeBuffer(high))
        try queue.flush()
        let output = try render(queue, channels: 2)
        #expect(output.count == 2 * 44100 * 2)
        func rms(_ s: ArraySlice<Float>) -> Double {
            var sum = 0.0
            for v in s { sum += Double(v) * Double(v) }
            return (sum / Double(s.count)).squareRoot()
        }
        let lowGain = 20 * log10(rms(output[20000..<80000]) / rms(low[20000..<80000]))
        let highGain = 20 * log10(rms(output[(88200 + 20000)..<(88200 + 80000)]) / rms(high[20000..<80000]))
        #expect(abs(lowGain) < 0.2, "100 Hz: \(lowGain) dB")
        #expect(highGain < -35, "10 kHz: \(highGain) dB")
    }

    @Test func oneTapAtATimeAndOnlyWhileNotRunning() async throws {
        let sink = NullSink(pacing: .realTime)
        let queue = try AudioQueue(format: .float32(sampleRate: 44100, channels: 2), configuration: .init(sink: sink))
        let tap = try queue.installProcessingTap(.siphon) { _, _, _, _ in 0 }
        expectError(.invalidPropertyValue) { try queue.installProcessingTap(.preEffects) { _, _, _, _ in 0 } }
        try queue.enqueue(try queue.makeBuffer(sineWave(440, rate: 44100, frames: 44100, channels: 2)))
        try queue.start()
        #expect(await sink.waitForFrames(1000))
        expectError(.invalidRunState) { try queue.removeProcessingTap(tap) }
        try queue.pause()
        try queue.removeProcessingTap(tap)
        expectError(.invalidParameter) { try queue.removeProcessingTap(tap) }
        queue.dispose(immediately: true)
    }
}

/// An item's gain (``AudioQueueParameters/gain``) belongs to its frames: it applies exactly from
/// the first frame of the buffer that sets it whatever taps sit on the path, and every tap sees
/// the frames with it — an equaliser before or after never sees one item's frames at another's gain.
@Suite struct ItemGainTests {
    /// Two buffers with their own gains, rendered in large pulls through a tap at `position`.
    @Test(arguments: [AudioQueueProcessingTapPosition.preEffects, .postEffects, .siphon])
    func aGainAppliesAtItsBuffersFirstFrameThroughATap(_ position: AudioQueueProcessingTapPosition) throws {
        let queue = try AudioQueue(format: .float32(sampleRate: 44100, channels: 2))
        let seen = Locked<[Float]>([])
        try queue.installProcessingTap(position) { tap, frames, output, _ in
            if position == .siphon {
                seen.withLock { $0 += UnsafeBufferPointer(start: output, count: frames * 2) }
                return frames
            }
            let got = tap.getSourceAudio(frames: frames, into: output)
            seen.withLock { $0 += UnsafeBufferPointer(start: output, count: got.frames * 2) }
            return got.frames
        }
        let a = ramp(frames: 3_001, channels: 2, offset: 1), b = ramp(frames: 2_500, channels: 2, offset: 5)
        try queue.enqueue(try queue.makeBuffer(a), parameters: AudioQueueParameters(gain: 0.5))
        try queue.enqueue(try queue.makeBuffer(b), parameters: AudioQueueParameters(gain: 2))
        try queue.flush()
        try queue.setOfflineRenderFormat(.float32(sampleRate: 44100, channels: 2))
        let output = try queue.renderRest(channels: 2, chunk: 4096)
        let expected = a.map { $0 * 0.5 } + b.map { $0 * 2 }
        #expect(difference(output, expected) == nil)
        #expect(difference(seen.value, expected) == nil, "the tap sees the frames at their item's gain")
    }
}

/// Taps beside each other (a layer built on the queue: an equaliser, a meter and the caller's
/// taps): each position's taps run in the order added, each pre- and post-effects tap pulling the
/// one added before it, every siphon seeing what goes out.
@Suite struct TapChainTests {
    /// A tap that pulls its source and maps each sample with `f`.
    static func mapping(_ f: @escaping @Sendable (Float) -> Float) -> AudioQueueProcessingTapCallback {
        { tap, frames, output, _ in
            let got = tap.getSourceAudio(frames: frames, into: output)
            for i in 0..<(got.frames * tap.processingFormat.channelsPerFrame) { output[i] = f(output[i]) }
            return got.frames
        }
    }

    @Test func tapsAtEachPositionRunInTheOrderAdded() throws {
        let queue = try AudioQueue(format: .float32(sampleRate: 44100, channels: 2))
        let first = Locked<[Float]>([]), second = Locked<[Float]>([])
        try queue.addProcessingTap(.postEffects, callback: Self.mapping { $0 - 0.25 })
        try queue.addProcessingTap(.preEffects, callback: Self.mapping { $0 * 2 })
        try queue.addProcessingTap(.siphon) { tap, frames, output, _ in
            first.withLock { $0 += UnsafeBufferPointer(start: output, count: frames * 2) }
            return frames
        }
        try queue.addProcessingTap(.preEffects, callback: Self.mapping { $0 + 1 })
        let last = try queue.addProcessingTap(.postEffects, callback: Self.mapping { $0 * 3 })
        try queue.addProcessingTap(.siphon) { tap, frames, output, _ in
            second.withLock { $0 += UnsafeBufferPointer(start: output, count: frames * 2) }
            return frames
        }
        // The one-tap API of Apple's refuses a tap beside others.
        #expect(throws: AudioQueueError.self) { try queue.installProcessingTap(.siphon) { _, frames, _, _ in frames } }
        try queue.setParameters(.init(volume: 0.5))
        let input = ramp(frames: 5_000, channels: 2, offset: 7)
        try queue.enqueue(try queue.makeBuffer(input))
        try queue.flush()
        try queue.setOfflineRenderFormat(.float32(sampleRate: 44100, channels: 2))
        let output = try queue.renderRest(channels: 2, chunk: 1_500)
        // ((x · 2 + 1) · volume − 0.25) · 3, in the render's float operations.
        let expected = input.map { (($0 * 2 + 1) * 0.5 - 0.25) * 3 }
        #expect(difference(output, expected) == nil)
        #expect(difference(first.value, expected) == nil && difference(second.value, expected) == nil)
        // Taken out, the chain closes over the gap.
        try queue.removeProcessingTap(last)
        try queue.enqueue(try queue.makeBuffer(input))
        try queue.flush()
        let again = try queue.renderRest(channels: 2, chunk: 1_500)
        #expect(difference(again, input.map { ($0 * 2 + 1) * 0.5 - 0.25 }) == nil)
    }
}
