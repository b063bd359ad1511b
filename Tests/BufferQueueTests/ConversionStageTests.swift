import Testing
@testable import BufferQueue

/// A stand-in resampler for these unit tests: doubles the rate by repeating each frame, and like
/// a real filter holds the last `hold` input frames back until it is drained.
final class HoldingDoubler: AudioResampler {
    let channels: Int
    let hold: Int
    /// A broken resampler: the held frames are lost instead of drained.
    let losesTail: Bool
    private var held: [Float] = []
    private var ready: [Float] = []
    private(set) var resets = 0

    init(channels: Int, hold: Int, losesTail: Bool = false) {
        self.channels = channels
        self.hold = hold
        self.losesTail = losesTail
    }

    var leadingFrames: Int { 0 }

    func process(_ input: UnsafePointer<Float>, frames: Int, into output: UnsafeMutablePointer<Float>,
                 capacity: Int) throws -> (consumed: Int, produced: Int) {
        held += UnsafeBufferPointer(start: input, count: frames * channels)
        let release = max(held.count / channels - hold, 0)
        double(release)
        return (frames, emit(into: output, capacity: capacity))
    }

    func drain(into output: UnsafeMutablePointer<Float>, capacity: Int) throws -> Int {
        if losesTail { held = [] }
        double(held.count / channels)
        return emit(into: output, capacity: capacity)
    }

    func reset() {
        held = []
        ready = []
        resets += 1
    }

    private func double(_ frames: Int) {
        for f in 0..<frames {
            let frame = held[(f * channels)..<((f + 1) * channels)]
            ready += frame
            ready += frame
        }
        held.removeFirst(frames * channels)
    }

    private func emit(into output: UnsafeMutablePointer<Float>, capacity: Int) -> Int {
        let frames = min(capacity, ready.count / channels)
        for i in 0..<(frames * channels) { output[i] = ready[i] }
        ready.removeFirst(frames * channels)
        return frames
    }
}

func doublingRegistry(hold: Int, losesTail: Bool = false) -> AudioResamplerRegistry {
    let registry = AudioResamplerRegistry()
    registry.register(AudioResamplerFactory(name: "doubler") { input, output, channels, _ in
        guard output == input * 2 else { throw AudioQueueError(.invalidPropertyValue, "the doubler only doubles") }
        return HoldingDoubler(channels: channels, hold: hold, losesTail: losesTail)
    })
    return registry
}

/// The queue's converter on the render path, driven by offline render.
@Suite struct ConversionStageTests {
    func doubled(_ samples: [Float]) -> [Float] { samples.flatMap { [$0, $0] } }

    /// What a resampler holds comes out at a flush and not before; the run rounds once, the
    /// timeline counts source frames and the render position output frames.
    @Test func aFlushDrainsTheConverter() throws {
        let queue = try AudioQueue(format: .float32(sampleRate: 1000, channels: 1),
                                   configuration: .init(resamplerRegistry: doublingRegistry(hold: 3)))
        try queue.setOfflineRenderFormat(.float32(sampleRate: 2000, channels: 1))
        let first = ramp(frames: 100, channels: 1, offset: 1)
        try queue.enqueue(try queue.makeBuffer(first))
        let early = try queue.renderRest(channels: 1, chunk: 333)
        #expect(early == doubled(Array(first[0..<97])))         // three frames still in the filter
        try queue.flush()
        let rest = try queue.renderRest(channels: 1, chunk: 333)
        #expect(early + rest == doubled(first))
        let second = ramp(frames: 50, channels: 1, offset: 500)
        try queue.enqueue(try queue.makeBuffer(second))
        try queue.flush()
        #expect(try queue.renderRest(channels: 1, chunk: 333) == doubled(second))
        #expect(queue.offlineRenderPosition == 300)
        #expect(queue.currentTime().sampleTime == 150)
    }

    /// A stop (asynchronous) ends the stream the same way: everything enqueued renders. The sink
    /// renders only when the test pulls (it never does): with the default real-time null sink,
    /// start() let the sink take the frames before the offline render could (a CI run caught it).
    @Test func anAsynchronousStopDrainsTheConverter() throws {
        let queue = try AudioQueue(format: .float32(sampleRate: 1000, channels: 2),
                                   configuration: .init(sink: ScriptedSink(), resamplerRegistry: doublingRegistry(hold: 5)))
        try queue.setOfflineRenderFormat(.float32(sampleRate: 2000, channels: 1))
        let input = ramp(frames: 64, channels: 2, offset: 3)
        try queue.enqueue(try queue.makeBuffer(input))
        try queue.start()
        try queue.stop(immediately: false)
        let mono: [Float] = (0..<64).map { (i: Int) -> Float in
            let left: Float = input[2 * i], right: Float = input[2 * i + 1]
            return (left + right) * 0.5
        }
        #expect(try queue.renderRest(channels: 1, chunk: 333) == doubled(mono))
    }

    /// The worker the render wakes races the rendering thread to act on the end (the timeline
    /// restarts at 0); a render that passed the end returns only once that is done, so the next
    /// render at `offlineRenderPosition` is never refused. (Failed within 0.1 s of repeats when
    /// the render returned while the worker was still restarting the timeline.)
    @Test func theEndIsActedOnBeforeTheRenderReturns() throws {
        for _ in 0..<500 { try anAsynchronousStopDrainsTheConverter() }
    }

    /// A reset throws away what the converter holds: the next frames start clean.
    @Test func aResetEmptiesTheConverter() throws {
        let queue = try AudioQueue(format: .float32(sampleRate: 1000, channels: 1),
                                   configuration: .init(resamplerRegistry: doublingRegistry(hold: 4)))
        try queue.setOfflineRenderFormat(.float32(sampleRate: 2000, channels: 1))
        try queue.enqueue(try queue.makeBuffer(ramp(frames: 40, channels: 1, offset: 1)))
        #expect(try queue.renderRest(channels: 1, chunk: 333).count == 72)
        try queue.reset()
        let next = ramp(frames: 30, channels: 1, offset: 900)
        try queue.enqueue(try queue.makeBuffer(next))
        try queue.flush()
        #expect(try queue.renderRest(channels: 1, chunk: 333) == doubled(next))
    }

    /// Channel conversion alone needs no resampler and is exact: mono to the first two channels.
    @Test func monoToFourChannelsWithoutAResampler() throws {
        let queue = try AudioQueue(format: .float32(sampleRate: 8000, channels: 1),
                                   configuration: .init(resamplerRegistry: AudioResamplerRegistry()))
        try queue.setOfflineRenderFormat(.float32(sampleRate: 8000, channels: 4))
        let input = ramp(frames: 2000, channels: 1, offset: 7)
        try queue.enqueue(try queue.makeBuffer(input))
        #expect(try queue.renderRest(channels: 4, chunk: 333) == input.flatMap { (v: Float) -> [Float] in [v, v, 0, 0] })
    }

    /// Per-buffer volume applies after conversion, at the block its buffer's first frame reaches.
    @Test func perBufferVolumeAppliesToConvertedFrames() throws {
        let queue = try AudioQueue(format: .float32(sampleRate: 1000, channels: 1),
                                   configuration: .init(resamplerRegistry: doublingRegistry(hold: 0)))
        try queue.setOfflineRenderFormat(.float32(sampleRate: 2000, channels: 1))
        try queue.enqueue(try queue.makeBuffer([Float](repeating: 0.5, count: 2048)), parameters: .init(volume: 0.5))
        try queue.flush()
        let output = try queue.renderRest(channels: 1, chunk: 333)
        #expect(output.count == 4096)
        #expect(output.allSatisfy { $0 == 0.25 })
    }

    /// A resampler that loses frames: the length stays exact (silence stands in) and the queue
    /// says so — as the last converter error and as an error event — never silently.
    @Test func aResamplerShortfallIsReported() async throws {
        let queue = try AudioQueue(format: .float32(sampleRate: 1000, channels: 1),
                                   configuration: .init(resamplerRegistry: doublingRegistry(hold: 5, losesTail: true)))
        let log = EventLog(queue)
        try queue.setOfflineRenderFormat(.float32(sampleRate: 2000, channels: 1))
        let input = ramp(frames: 100, channels: 1, offset: 1)
        try queue.enqueue(try queue.makeBuffer(input))
        try queue.flush()
        let output = try queue.renderRest(channels: 1, chunk: 333)
        #expect(output.count == 200)
        #expect(difference(Array(output[0..<190]), doubled(Array(input[0..<95]))) == nil)
        #expect(output[190...].allSatisfy { $0 == 0 })
        #expect(queue.lastConverterError?.code == .decoderError)
        #expect(queue.lastConverterError?.message.contains("10 frames fewer") == true)
        #expect(await log.wait { $0.contains { if case .error(let e) = $0 { return e.code == .decoderError } else { return false } } })
    }

    // MARK: several streams through one queue

    /// Streams of another codec and channel count follow each other in one queue: each decoder
    /// is drained, nothing is flushed on the render path, and a sink that keeps its format gets
    /// the mono stream converted, in one pull, without being reopened.
    @Test func streamsOfOtherFormatsJoinWithoutAGap() throws {
        let sink = ScriptedSink()
        let queue = try AudioQueue(format: .linearPCM(sampleRate: 1000, channels: 2, bitsPerChannel: 16),
                                   configuration: .init(sink: sink, resamplerRegistry: AudioResamplerRegistry(), sinkFormat: .keepFirst))
        let first: [Int16] = (0..<300).map { Int16($0 * 50) }   // 150 stereo frames
        let buffer = try queue.allocateBuffer(capacity: 600)
        try first.withUnsafeBytes { try buffer.setData($0) }
        try queue.enqueue(buffer)
        try queue.beginStream(format: .float32(sampleRate: 1000, channels: 1))
        #expect(queue.currentStreamDescription == .float32(sampleRate: 1000, channels: 1))
        let second = ramp(frames: 70, channels: 1, offset: 11)
        try queue.enqueue(try queue.makeBuffer(second))
        try queue.prime()
        try queue.start()
        let heard = sink.pullSamples(frames: 220)
        let expected = first.map { Float($0) / 32768 } + second.flatMap { (v: Float) -> [Float] in [v, v] }
        #expect(difference(heard, expected) == nil)
        #expect(sink.calls.current.opens == 1)
        #expect(sink.calls.current.formats == [.float32(sampleRate: 1000, channels: 2)])
        try queue.stop(immediately: true)
    }

    /// A stereo stream after an odd number of mono frames starts on an odd sample of the ring, so
    /// the ring's wrap falls inside a stereo frame: every frame keeps its channels there (the
    /// copy that applies the gain once took the second piece's first sample for a left one).
    @Test(arguments: [nil, 0.5] as [Float?])
    func stereoAfterAnOddMonoStretchKeepsItsChannelsAcrossTheWrap(_ volume: Float?) throws {
        let queue = try AudioQueue(format: .float32(sampleRate: 1000, channels: 2),
                                   configuration: .init(resamplerRegistry: AudioResamplerRegistry()))
        if let volume { try queue.setParameters(.init(volume: volume)) }
        try queue.setOfflineRenderFormat(.float32(sampleRate: 1000, channels: 2))
        let first = ramp(frames: 1_001, channels: 2, offset: 1)
        try queue.enqueue(try queue.makeBuffer(first))
        try queue.beginStream(format: .float32(sampleRate: 1000, channels: 1))
        let mono = ramp(frames: 12_347, channels: 1, offset: 5)
        try queue.enqueue(try queue.makeBuffer(mono))
        try queue.beginStream(format: .float32(sampleRate: 1000, channels: 2))
        // Enough stereo frames to pass the ring's wrap several times.
        let last = ramp(frames: 150_001, channels: 2, offset: 7)
        for start in stride(from: 0, to: last.count, by: 20_000) {
            try queue.enqueue(try queue.makeBuffer(Array(last[start..<min(start + 20_000, last.count)])))
        }
        try queue.flush()
        let output = try queue.renderRest(channels: 2, chunk: 777)
        let gain = volume ?? 1
        let expected = (first + mono.flatMap { [$0, $0] } + last).map { $0 * gain }
        #expect(output.count == expected.count)
        #expect(difference(output, expected) == nil)
    }

    /// The rate changes from one stream to the next: the converter made ahead on the worker
    /// takes over at the first frame of the new stream (the doubler: each frame twice), exactly.
    @Test func aStreamAtAnotherRateIsConvertedToTheSinkFormat() throws {
        let sink = ScriptedSink()
        let queue = try AudioQueue(format: .float32(sampleRate: 2000, channels: 1),
                                   configuration: .init(sink: sink, resamplerRegistry: doublingRegistry(hold: 3),
                                                        sinkFormat: .fixed(sampleRate: 2000, channels: 1)))
        let first = ramp(frames: 100, channels: 1, offset: 1)
        try queue.enqueue(try queue.makeBuffer(first))
        try queue.beginStream(format: .float32(sampleRate: 1000, channels: 1))
        let second = ramp(frames: 40, channels: 1, offset: 300)
        try queue.enqueue(try queue.makeBuffer(second))
        try queue.beginStream(format: .float32(sampleRate: 2000, channels: 1))
        let third = ramp(frames: 30, channels: 1, offset: 700)
        try queue.enqueue(try queue.makeBuffer(third))
        try queue.prime()
        try queue.start()
        let heard = sink.pullSamples(frames: 210)
        #expect(difference(heard, first + doubled(second) + third) == nil)
        #expect(sink.calls.current.opens == 1)
        try queue.stop(immediately: true)
    }

    /// By default the sink follows the decoded format (bit-perfect): it is reopened at the change.
    @Test func followingTheDecodedFormatReopensTheSink() async throws {
        let sink = ScriptedSink()
        let queue = try AudioQueue(format: .float32(sampleRate: 1000, channels: 1), configuration: .init(sink: sink))
        try queue.enqueue(try queue.makeBuffer(ramp(frames: 50, channels: 1)))
        try queue.beginStream(format: .float32(sampleRate: 1500, channels: 1))
        try queue.enqueue(try queue.makeBuffer(ramp(frames: 50, channels: 1, offset: 50)))
        try queue.prime()
        try queue.start()
        #expect(sink.pullSamples(frames: 60).count == 60)
        #expect(await sink.calls.wait { (c: ScriptedSink.Calls) -> Bool in c.opens == 2 })
        #expect(sink.calls.current.formats.last == .float32(sampleRate: 1500, channels: 1))
        try queue.stop(immediately: true)
    }

    /// A reset drops the buffers but keeps the stream switch: what is enqueued next is decoded
    /// as the new format.
    @Test func aResetKeepsTheStreamSwitch() throws {
        let queue = try AudioQueue(format: .linearPCM(sampleRate: 1000, channels: 1, bitsPerChannel: 16))
        let buffer = try queue.allocateBuffer(capacity: 64)
        try [Int16](repeating: 1000, count: 32).withUnsafeBytes { try buffer.setData($0) }
        try queue.enqueue(buffer)
        try queue.beginStream(format: .float32(sampleRate: 1000, channels: 1))
        try queue.reset()
        let next = ramp(frames: 25, channels: 1, offset: 4)
        try queue.enqueue(try queue.makeBuffer(next))
        try queue.flush()
        try queue.setOfflineRenderFormat(.float32(sampleRate: 1000, channels: 1))
        #expect(try queue.renderRest(channels: 1, chunk: 10) == next)
    }
}

