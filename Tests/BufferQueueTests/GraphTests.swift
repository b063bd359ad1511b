import Dispatch
import Foundation
import Synchronization
import Testing
@testable import BufferQueue
import TestSupport

/// The render graph: mixing exact against the sum it is defined as, the errors that keep a graph
/// sound, and changes made while it renders.
@Suite struct GraphTests {
    /// A deterministic signal: two sines and a little noise, different per seed.
    static func signal(frames: Int, channels: Int, seed: UInt64) -> [Float] {
        var random = SplitMix(seed: seed)
        let f1 = Double(200 + random.int(0...800)), f2 = Double(1000 + random.int(0...4000))
        return (0..<(frames * channels)).map { index in
            let frame = Double(index / channels), channel = Double(index % channels)
            let noise = Float(random.int(0...2000) - 1000) / 100_000
            return Float(0.2 * sin(2 * .pi * f1 * frame / 44_100 + channel) + 0.1 * sin(2 * .pi * f2 * frame / 44_100)) + noise
        }
    }

    /// Renders the graph to its end in blocks of `block` frames.
    static func renderAll(_ graph: AudioGraph, block: Int = 777, limit: Int = 10_000_000) throws -> [Float] {
        let channels = graph.outputFormat.channelsPerFrame
        var out: [Float] = []
        var scratch = [Float](repeating: .nan, count: block * channels)
        while out.count < limit {
            let n = try scratch.withUnsafeMutableBufferPointer { try graph.render(into: $0.baseAddress!, frames: block) }
            if n == 0 { break }
            out += scratch[0..<(n * channels)]
        }
        return out
    }

    /// What the mix is defined as: in connection order, each input's frames times its gains added
    /// at its offset, in float32.
    static func expectedMix(_ inputs: [(samples: [Float], gains: [Float], offset: Int)], channels: Int) -> [Float] {
        let frames = inputs.map { $0.offset + $0.samples.count / channels }.max() ?? 0
        var out = [Float](repeating: 0, count: frames * channels)
        for input in inputs {
            for index in 0..<input.samples.count {
                out[input.offset * channels + index] += input.samples[index] * input.gains[index % channels]
            }
        }
        return out
    }

    @Test(arguments: [3, 8])
    func theMixIsTheSumOfItsInputsScaledAndOffset(_ count: Int) throws {
        let graph = try AudioGraph(sampleRate: 44_100, channels: 2, rampSeconds: 0)
        var inputs: [(samples: [Float], gains: [Float], offset: Int)] = []
        for i in 0..<count {
            let frames = 3_000 + 1_237 * i
            let samples = Self.signal(frames: frames, channels: 2, seed: UInt64(i + 1))
            let volume = Float(0.25 + 0.1 * Double(i)), pan = i % 3 == 1 ? Float(-0.5) : i % 3 == 2 ? 0.25 : 0
            let offset = 311 * i
            let node = try AudioBufferSourceNode(name: "input \(i)", samples: samples, sampleRate: 44_100, channels: 2)
            let bus = try graph.connect(node, to: graph.mainMixer, volume: volume, pan: pan, offsetFrames: offset)
            #expect(bus.volume == volume && bus.pan == pan && bus.startFrame == Int64(offset))
            inputs.append((samples, [volume * RenderStage.panGain(pan, channel: 0), volume * RenderStage.panGain(pan, channel: 1)], offset))
        }
        let mixed = try Self.renderAll(graph)
        let expected = Self.expectedMix(inputs, channels: 2)
        #expect(mixed.count == expected.count, "the mix is as long as its longest input's offset and length")
        #expect(difference(mixed, expected) == nil)
        #expect(try Self.renderAll(graph).isEmpty, "an ended mix stays ended")
    }

    /// A pull source that gives `frames` frames of a ramp, then fails.
    final class FailingSource: AudioNodePullSource {
        let outputFormat = AudioStreamDescription.float32(sampleRate: 44_100, channels: 1)
        let frames: Int
        var given = 0
        init(frames: Int) { self.frames = frames }
        func render(into destination: UnsafeMutableBufferPointer<Float>, frames wanted: Int) throws -> Int {
            guard given < frames else { throw AudioQueueError(.decoderError, "packet 12 is damaged") }
            let n = min(wanted, frames - given, 100)
            for i in 0..<n { destination[i] = Float(given + i) / 10_000 }
            given += n
            return n
        }
    }

    /// An input that fails mid-mix ends there: the frames it gave stay, the others play on, and
    /// the failure is an event naming it.
    /// The table a crossfade takes its gains from is the curve's own numbers, bit for bit, at
    /// lengths around the rotation's re-anchoring and at a five-second crossfade's.
    @Test(arguments: [1, 2, 63, 64, 65, 1_000, 220_500])
    func aFadesGainTableIsTheCurveBitForBit(_ length: Int) {
        for curve in AudioFadeCurve.allCases {
            let table = curve.gainTable(length)
            #expect(table.count == 2 * length)
            let mismatch = (0..<length).first { i in
                table[2 * i] != curve.gain(.out, frame: i, of: length) || table[2 * i + 1] != curve.gain(.in, frame: i, of: length)
            }
            #expect(mismatch == nil, "\(curve) of \(length) frames differs at frame \(mismatch ?? -1)")
        }
    }

    @Test func anInputThatFailsEndsAndTheOthersGoOn() throws {
        let events = Lock<[String]>([])
        let graph = try AudioGraph(sampleRate: 44_100, channels: 1, rampSeconds: 0) { event in events.withLock { $0.append("\(event)") } }
        let other = Self.signal(frames: 6_000, channels: 1, seed: 4)
        try graph.connect(try AudioPullSourceNode(name: "broken.mp3", source: FailingSource(frames: 2_345)), to: graph.mainMixer)
        try graph.connect(try AudioBufferSourceNode(name: "fine.wav", samples: other, sampleRate: 44_100, channels: 1), to: graph.mainMixer)
        let mixed = try Self.renderAll(graph, block: 1_000)
        let broken = (0..<2_345).map { Float($0) / 10_000 }
        #expect(difference(mixed, Self.expectedMix([(broken, [1], 0), (other, [1], 0)], channels: 1)) == nil)
        #expect(events.withLock { $0 } == ["broken.mp3 failed: packet 12 is damaged"], "reported once")
    }

    @Test func aMonoInputIsConvertedToTheMixersChannels() throws {
        let graph = try AudioGraph(sampleRate: 44_100, channels: 2, rampSeconds: 0)
        let mono = Self.signal(frames: 5_000, channels: 1, seed: 9)
        try graph.connect(try AudioBufferSourceNode(samples: mono, sampleRate: 44_100, channels: 1), to: graph.mainMixer, volume: 0.5)
        let mixed = try Self.renderAll(graph, block: 1024)
        #expect(mixed.count == 10_000)
        #expect(difference(mixed, mono.flatMap { [$0 * 0.5, $0 * 0.5] }) == nil)
    }

    @Test func effectsChainAfterTheMixerAndTheOutputPullsTheLast() throws {
        let graph = try AudioGraph(sampleRate: 44_100, channels: 1, rampSeconds: 0)
        let samples = Self.signal(frames: 4_000, channels: 1, seed: 3)
        try graph.connect(try AudioBufferSourceNode(samples: samples, sampleRate: 44_100, channels: 1), to: graph.mainMixer)
        let band = AudioEQBand(.lowPass, frequency: 2_000, q: 0.7071)
        let eq = try AudioEQNode(bands: [band], sampleRate: 44_100, channels: 1)
        try graph.connect(graph.mainMixer, to: eq)
        try graph.connectOutput(eq)
        let out = try Self.renderAll(graph)
        var expected = samples
        let alone = AudioEqualizer(bands: [band])
        alone.process(&expected, frames: 4_000, channels: 1, sampleRate: 44_100)
        #expect(difference(out, expected) == nil, "the graph's EQ is the equaliser on the mix")
    }

    @Test func badGraphsAreRefusedWithTheirNodesNamed() throws {
        let graph = try AudioGraph(sampleRate: 48_000, channels: 2)
        let a = try AudioMixerNode(name: "submix A", sampleRate: 48_000, channels: 2)
        let b = try AudioMixerNode(name: "submix B", sampleRate: 48_000, channels: 2)
        try graph.connect(a, to: b)
        #expect { try graph.connect(b, to: a) } throws: { "\($0)".contains("cycle") && "\($0)".contains("submix A") && "\($0)".contains("submix B") }
        #expect { try graph.connect(a, to: a) } throws: { "\($0)".contains("itself") }
        let source = try AudioBufferSourceNode(name: "voice", samples: [0, 0], sampleRate: 48_000, channels: 2)
        try graph.connect(source, to: a)
        #expect { try graph.connect(source, to: b) } throws: { "\($0)".contains("voice already feeds submix A") }
        let eq = try AudioEQNode(name: "tone", bands: [], sampleRate: 48_000, channels: 2)
        try graph.connect(b, to: eq)
        #expect { try graph.connect(try AudioMixerNode(name: "third", sampleRate: 48_000, channels: 2), to: eq) } throws: {
            "\($0)".contains("tone takes one input")
        }
        let narrow = try AudioEQNode(name: "mono eq", bands: [], sampleRate: 44_100, channels: 1)
        #expect { try graph.connect(try AudioMixerNode(name: "wide", sampleRate: 48_000, channels: 2), to: narrow) } throws: {
            "\($0)".contains("mono eq") && "\($0)".contains("mixer between")
        }
        #expect { try graph.connectOutput(narrow) } throws: { "\($0)".contains("cannot feed the output") }
        let other = try AudioGraph(sampleRate: 48_000, channels: 2)
        #expect { try other.connect(source, to: other.mainMixer) } throws: { "\($0)".contains("another graph") }
        // A rate conversion with no resampler registered names both ends.
        let bare = try AudioGraph(sampleRate: 48_000, channels: 2, resamplers: AudioResamplerRegistry())
        let cd = try AudioBufferSourceNode(name: "cd", samples: [0, 0], sampleRate: 44_100, channels: 2)
        #expect { try bare.connect(cd, to: bare.mainMixer) } throws: { error in
            (error as? AudioQueueError)?.code == .codecNotFound && "\(error)".contains("cd (2 ch, 44100.0 Hz) cannot be converted to main mixer")
        }
    }

    @Test func equaliserBandsAreChecked() throws {
        #expect { try AudioEQNode(bands: [.init(.parametric, frequency: 24_000, gain: 3)], sampleRate: 48_000, channels: 2) } throws: {
            "\($0)".contains("band 0") && "\($0)".contains("below half the sample rate")
        }
        #expect { try AudioEQNode(bands: [.init(.lowPass, frequency: 1_000), .init(.notch, frequency: 50, q: 0)], sampleRate: 48_000, channels: 2) } throws: {
            "\($0)".contains("band 1") && "\($0)".contains("Q must be above 0")
        }
        let eq = try AudioEQNode(bands: [.init(.highPass, frequency: 80)], sampleRate: 48_000, channels: 2)
        #expect { try eq.setBand(0, to: .init(.highPass, frequency: -1)) } throws: { "\($0)".contains("above 0") }
        #expect { try eq.setBand(1, to: .init(.highPass, frequency: 100)) } throws: { "\($0)".contains("no band 1") }
        #expect(eq.bands == [.init(.highPass, frequency: 80)], "a refused change leaves the band as it was")
    }

    /// A change of a band while audio plays glides in: no step between samples larger than the
    /// signal's own largest, where switching at once makes one.
    @Test func anEQChangeWhilePlayingMakesNoStep() throws {
        let rate = 44_100.0
        let tone = (0..<44_100).map { Float(0.2 * sin(2 * .pi * 3_000 * Double($0) / rate)) }
        func run(ramp: Double) -> [Float] {
            let eq = AudioEqualizer(bands: [.init(.highShelf, frequency: 1_000, gain: 0, q: 0.7)], rampSeconds: ramp)
            var out = tone
            out.withUnsafeMutableBufferPointer { buffer in
                for start in stride(from: 0, to: buffer.count, by: 512) {
                    if start == 22_016 { try? eq.setBand(0, to: .init(.highShelf, frequency: 1_000, gain: 12, q: 0.7)) }
                    eq.process(buffer.baseAddress! + start, frames: min(512, buffer.count - start), channels: 1, sampleRate: rate)
                }
            }
            return out
        }
        func largestStep(_ s: ArraySlice<Float>) -> Float { zip(s.dropFirst(), s).map { abs($0 - $1) }.max() ?? 0 }
        let glided = run(ramp: 0.01), switched = run(ramp: 0)
        // After the change the tone is 12 dB louder: its own largest step there is the bound.
        let own = largestStep(glided[30_000..<44_100])
        #expect(own > 4 * largestStep(glided[1_000..<22_000]) * 0.9, "the shelf raised the tone by about 12 dB")
        #expect(largestStep(glided[21_000..<30_000]) <= own * 1.01, "the glide stays within the signal's own steps")
        // (Measured: the glide's largest step is the tone's own, 0.33; switching at once, 0.37.)
        #expect(largestStep(switched[21_000..<30_000]) > own * 1.05, "switching at once overshoots (the test can see a click)")
    }

    @Test func aVolumeChangeWhilePlayingGlides() throws {
        let graph = try AudioGraph(sampleRate: 44_100, channels: 1, rampSeconds: 0.01)
        let ones = [Float](repeating: 1, count: 10_000)
        let bus = try graph.connect(try AudioBufferSourceNode(samples: ones, sampleRate: 44_100, channels: 1), to: graph.mainMixer)
        var out = [Float](repeating: 0, count: 10_000)
        let counts = try out.withUnsafeMutableBufferPointer { buffer in
            let first = try graph.render(into: buffer.baseAddress!, frames: 1_000)
            bus.volume = 0
            return (first, try graph.render(into: buffer.baseAddress! + 1_000, frames: 9_000))
        }
        #expect(counts == (1_000, 9_000))
        #expect(out[0..<1_000].allSatisfy { $0 == 1 })
        let ramp = Array(out[1_000..<1_441])
        #expect(zip(ramp.dropFirst(), ramp).allSatisfy { $0 < $1 }, "it falls over 441 frames (10 ms)")
        #expect(out[1_441..<10_000].allSatisfy { $0 == 0 })
    }

    /// Connections and parameters change on one thread while another renders: every render sees
    /// a whole graph (ThreadSanitizer checks the publication), and what was taken out stays out.
    @Test func theGraphChangesWhileItRenders() async throws {
        let graph = try AudioGraph(sampleRate: 44_100, channels: 2)
        let eq = try AudioEQNode(bands: [.init(.parametric, frequency: 1_000, gain: 0)], sampleRate: 44_100, channels: 2)
        try graph.connect(graph.mainMixer, to: eq)
        try graph.connectOutput(eq)
        let long = Self.signal(frames: 2_000_000, channels: 2, seed: 5)
        let keep = try AudioBufferSourceNode(name: "keep", samples: long, sampleRate: 44_100, channels: 2)
        try graph.connect(keep, to: graph.mainMixer)
        let stop = Atomic<Bool>(false)
        let firstRender = DispatchSemaphore(value: 0)
        // (renders, renders that did not give every frame asked for)
        async let rendering: (Int, Int) = onOwnThread {
            var block = [Float](repeating: 0, count: 512 * 2)
            var renders = 0, short = 0
            // Within the kept source's 2 000 000 frames, so that every render is whole.
            while !stop.load(ordering: .relaxed) && renders < 3_800 {
                let n = block.withUnsafeMutableBufferPointer { (try? graph.render(into: $0.baseAddress!, frames: 512)) ?? -1 }
                if n != 512 { short += 1 }
                renders += 1
                if renders == 1 { firstRender.signal() }
            }
            return (renders, short)
        }
        let changed: Result<Void, any Error> = await onOwnThread {
            firstRender.wait()
            defer { stop.store(true, ordering: .relaxed) }
            return Result {
                for i in 0..<120 {
                    let node = try AudioBufferSourceNode(name: "blip \(i)", samples: Self.signal(frames: 300, channels: 2, seed: UInt64(i)),
                                                         sampleRate: 44_100, channels: 2)
                    let bus = try graph.connect(node, to: graph.mainMixer, volume: 0.5)
                    bus.pan = Float(i % 5) / 5
                    try eq.setBand(0, to: .init(.parametric, frequency: 500 + Double(i), gain: Double(i % 7)))
                    if i % 2 == 0 { graph.disconnect(node) } else { graph.detach(node) }
                }
            }
        }
        let (renders, short) = await rendering
        try changed.get()
        #expect(renders >= 1 && short == 0, "\(renders) renders, \(short) short")
        #expect(graph.inputs(of: graph.mainMixer).map(\.source.name) == ["keep"])
    }
}

/// A graph playing live through a sink, its sources queues: what the sink is given is the mix,
/// frame for frame.
@Suite struct GraphLiveTests {
    /// A queue of float32 frames into `node`, everything enqueued and primed.
    static func queue(playing samples: [Float], into node: AudioQueueSourceNode) throws -> (AudioQueue, [AudioQueueBuffer]) {
        let queue = try AudioQueue(format: .float32(sampleRate: 44_100, channels: 2),
                                   configuration: .init(sink: node, sinkFormat: node.sinkFormat))
        var buffers: [AudioQueueBuffer] = []
        for start in stride(from: 0, to: samples.count, by: 8_192) {
            let part = samples[start..<min(start + 8_192, samples.count)]
            let buffer = try queue.allocateBuffer(capacity: part.count * 4)
            try part.withUnsafeBytes { try buffer.setData($0) }
            try queue.enqueue(buffer)
            buffers.append(buffer)
        }
        _ = try queue.prime()
        return (queue, buffers)
    }

    @Test func twoQueuesMixIntoTheSinkFrameForFrame() async throws {
        let a = GraphTests.signal(frames: 44_100, channels: 2, seed: 11), b = GraphTests.signal(frames: 22_050, channels: 2, seed: 12)
        let nodeA = try AudioQueueSourceNode(name: "A", sampleRate: 44_100, channels: 2)
        let nodeB = try AudioQueueSourceNode(name: "B", sampleRate: 44_100, channels: 2)
        let (queueA, buffersA) = try Self.queue(playing: a, into: nodeA)
        let (queueB, buffersB) = try Self.queue(playing: b, into: nodeB)
        defer {
            queueA.dispose(immediately: true)
            queueB.dispose(immediately: true)
            withExtendedLifetime((buffersA, buffersB)) {}
        }
        let graph = try AudioGraph(sampleRate: 44_100, channels: 2)
        try graph.connect(nodeA, to: graph.mainMixer)
        try graph.connect(nodeB, to: graph.mainMixer)
        try queueA.start()
        try queueB.start()
        let sink = NullSink(pacing: .realTime, capturing: true)
        try graph.start(sink: sink)
        #expect(graph.isRunning)
        #expect { _ = try graph.render(into: UnsafeMutablePointer<Float>.allocate(capacity: 2), frames: 1) } throws: {
            "\($0)".contains("plays through a sink")
        }
        #expect(await sink.waitForFrames(44_100 + 4_410, timeout: .seconds(20)), "the sink pulled 1.1 s")
        graph.stop()
        #expect(!graph.isRunning)
        let heard = sink.capturedSamples()
        let expected = a.indices.map { $0 < b.count ? a[$0] + b[$0] : a[$0] }
        #expect(heard.count >= expected.count)
        #expect(difference(Array(heard.prefix(expected.count)), expected) == nil)
        #expect(heard.dropFirst(expected.count).allSatisfy { $0 == 0 }, "after the queues, silence")
    }

    @Test func aQueueOpeningTheNodeInAnotherFormatIsRefused() throws {
        let node = try AudioQueueSourceNode(name: "strict", sampleRate: 48_000, channels: 2)
        let source = AudioRenderSource(graph: try AudioGraph(sampleRate: 44_100, channels: 2)) { _ in }
        #expect { try node.open(format: .float32(sampleRate: 44_100, channels: 2), source: source) } throws: {
            "\($0)".contains("strict takes 2 ch at 48000.0 Hz") && "\($0)".contains("sinkFormat")
        }
    }
}
