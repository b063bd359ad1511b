import Foundation
import Testing
import AudioFileStream
import AudioPlayback
import BufferQueue
import MPG123Decoder
import TestSupport

/// The layers above the decoders know no codec: the packet feeder's pre-roll and start, and the
/// parallel renderer's split, follow the traits of the decoder the registry would choose.
@Suite struct DecoderTraitsTests {
    /// Counts the packets a decoder was given; passes them on to libmpg123.
    final class CountingDecoder: AudioDecoder {
        let inner: any AudioDecoder
        let counter: Counter
        init(_ inner: any AudioDecoder, _ counter: Counter) {
            self.inner = inner
            self.counter = counter
        }
        var outputFormat: AudioStreamDescription { inner.outputFormat }
        func decode(packet: UnsafeRawBufferPointer, frames: Int, into output: DecodedAudio) throws {
            counter.add()
            try inner.decode(packet: packet, frames: frames, into: output)
        }
        func finish(into output: DecodedAudio) throws { try inner.finish(into: output) }
        func reset() { inner.reset() }
    }

    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var count = 0
        func add() { lock.withLock { count += 1 } }
        var value: Int { lock.withLock { count } }
    }

    static let mp3 = TestPaths.fixture("lame-vbr-v2-44k-stereo.mp3")

    /// A registry with libmpg123 and, above it, a decoder of MP3 with `traits` that counts packets.
    static func registry(_ traits: AudioDecoderTraits, counter: Counter) -> AudioDecoderRegistry {
        let registry = AudioDecoderRegistry()
        MPG123Decoder.register(in: registry)
        registry.register(AudioDecoderFactory(name: "counting MP3", formats: [.mpegLayer3], priority: 20, traits: traits) { format, cookie in
            CountingDecoder(try MPG123Decoder(format: format), counter)
        })
        return registry
    }

    /// Renders the file from valid frame `start` and returns the frames rendered.
    static func render(_ file: AudioFile, from start: Int64, registry: AudioDecoderRegistry) throws -> Int {
        let renderer = try AudioFileRenderer(file: file, startFrame: start, registry: registry)
        var total = 0
        var scratch = [Float](repeating: 0, count: 4096 * renderer.outputFormat.channelsPerFrame)
        while true {
            let count = try scratch.withUnsafeMutableBufferPointer { try renderer.render(into: $0, frames: 4096) }
            if count == 0 { return total }
            total += count
        }
    }

    @Test func theFeederStartsWhereTheChosenDecoderSays() throws {
        let file = try AudioFile(path: Self.mp3)
        let source = FilePacketSource(file: file)
        let priming = Int64(try #require(file.packetTableInfo).primingFrames)
        let valid = try #require(file.packetTableInfo).validFrames
        // libmpg123's own traits: 10 packets, then its synthesis phase picks the start.
        let plain = AudioDecoderRegistry()
        MPG123Decoder.register(in: plain)
        #expect(PacketFeeder.preRollPackets(for: source.format, registry: plain) == 10)
        #expect(PacketFeeder.preRollPackets(for: source.format, rollDistance: -12, registry: plain) == 12)
        let phase = try #require(PacketFeeder.decodeStart(before: 30, preRoll: 10, source: source, registry: plain))
        #expect(phase <= 20 && phase >= 20 - 16, "the synthesis phase chose packet \(phase)")

        // A decoder registered above it with three packets and no start hook of its own.
        let counter = Counter()
        let three = Self.registry(AudioDecoderTraits(preRollPackets: { _ in 3 }, parallelRefusal: { _ in nil }), counter: counter)
        #expect(PacketFeeder.preRollPackets(for: source.format, registry: three) == 3)
        #expect(PacketFeeder.decodeStart(before: 30, preRoll: 3, source: source, registry: three) == 27)
        // The feeder follows it: a render from inside packet 30 decodes from packet 27 to the end,
        // and still gives exactly the frames from the start position on.
        let start = try #require(source.frame(forPacket: 30)) - priming + 5
        let rendered = try Self.render(file, from: start, registry: three)
        #expect(Int64(rendered) == valid - start)
        #expect(counter.value == Int(file.packetCount) - 27, "\(counter.value) packets decoded of \(file.packetCount)")
    }

    @Test func theParallelRendererSplitsOnlyWhatTheDecoderAllows() throws {
        let file = try AudioFile(path: Self.mp3)
        let counter = Counter()
        // libmpg123 alone: MP3 is split.
        let plain = AudioDecoderRegistry()
        MPG123Decoder.register(in: plain)
        let split = try ConcurrentFileRenderer(file: file, jobs: 2, chunkFrames: 10000, registry: plain)
        #expect(split.sequentialReason == nil && split.chunks.count > 1)
        // A decoder above it that refuses pieces: one thread, with its reason.
        let refusing = Self.registry(AudioDecoderTraits(preRollPackets: { _ in 3 }, parallelRefusal: { _ in "the counting decoder keeps state" }),
                                     counter: counter)
        let whole = try ConcurrentFileRenderer(file: file, jobs: 2, chunkFrames: 10000, registry: refusing)
        #expect(whole.sequentialReason == "the counting decoder keeps state" && whole.jobs == 1)
        // One that allows pieces but finds no start for them: one thread too.
        let lost = Self.registry(AudioDecoderTraits(preRollPackets: { _ in 3 }, decodeStart: { _, _, _, _ in nil }, parallelRefusal: { _ in nil }),
                                 counter: counter)
        let unstarted = try ConcurrentFileRenderer(file: file, jobs: 2, chunkFrames: 10000, registry: lost)
        #expect(unstarted.sequentialReason?.contains("no packet to start") == true, "\(unstarted.sequentialReason ?? "split")")
        // No traits at all (a decoder that says nothing): not split.
        let silent = AudioDecoderRegistry()
        silent.register(AudioDecoderFactory(name: "silent MP3", formats: [.mpegLayer3]) { format, _ in try MPG123Decoder(format: format) })
        #expect(ConcurrentFileRenderer.splitRefusal(for: file, registry: silent) != nil)
    }
}
