import PropertyBased
import Testing
@testable import BufferQueue

/// Offline render of linear PCM with nothing to convert takes frames straight from the enqueued
/// buffers while the ring is empty, and through the ring otherwise. Whatever mix of the two a
/// sequence of render calls makes, the output is the same frames: trims, schedule gaps and
/// per-buffer volumes fall exactly where they would through the ring.
@Suite struct StraightRenderTests {
    /// One enqueued buffer: its length, trims, volume and pan (nil: none given) and gap before it.
    struct Piece: Sendable, CustomStringConvertible {
        let frames: Int
        let trimStart: Int
        let trimEnd: Int
        let volume: Float?
        var pan: Float? = nil
        let gap: Int
        var description: String {
            "\(frames)f trim \(trimStart)/\(trimEnd) vol \(volume.map { "\($0)" } ?? "-") pan \(pan.map { "\($0)" } ?? "-") gap \(gap)"
        }
    }

    static let pieces = zip(Gen.int(in: 1...5000), Gen.int(in: 0...400), Gen.int(in: 0...400), Gen.int(in: 0...3), Gen.int(in: 0...3),
                            Gen.int(in: 0...3))
        .map { frames, start, end, volume, gap, pan in
            Piece(frames: frames, trimStart: min(start, frames / 3), trimEnd: min(end, frames / 3),
                  volume: [nil, 0.5, 1, 0.25][volume], pan: [nil, nil, -0.5, 0.3][pan], gap: gap == 3 ? frames % 700 + 1 : 0)
        }
        .array(of: 1...10)

    /// The stereo frames of `pieces` as the queue must render them: kept frames times the volume
    /// and pan in force (a buffer's volume or pan stays until another buffer sets one), zeros for
    /// the gaps.
    static func expected(_ pieces: [Piece], sources: [[Float]], volume initialVolume: Float, pan initialPan: Float) -> [Float] {
        var output: [Float] = []
        var volume = initialVolume, pan = initialPan
        for (piece, source) in zip(pieces, sources) {
            output += [Float](repeating: 0, count: piece.gap * 2)
            if let given = piece.volume { volume = given }
            if let given = piece.pan { pan = given }
            let left = volume * (pan > 0 ? 1 - pan : 1), right = volume * (pan < 0 ? 1 + pan : 1)
            for index in (piece.trimStart * 2)..<((piece.frames - piece.trimEnd) * 2) {
                output.append(source[index] * (index % 2 == 0 ? left : right))
            }
        }
        return output
    }

    /// How the pieces are enqueued: float32 or 16-bit linear PCM (converted straight from the
    /// buffer), or 16-bit coded as Apple Lossless (decoded frames, staged before they go straight
    /// or through the ring).
    enum Encoding: CaseIterable, Sendable { case float32, int16, alac }

    /// Enqueues `pieces` in `encoding` on a queue whose volume and pan are set first, renders
    /// them `chunk` frames per call and returns the output, what was expected, and how many
    /// frames went past the ring.
    static func render(_ pieces: [Piece], chunk: Int, _ encoding: Encoding, volume: Float = 1,
                       pan: Float = 0) throws -> (output: [Float], expected: [Float], straight: Int) {
        let channels = 2
        let encoder = encoding == .alac ? try ALACEncoder(format: .init(sampleRate: 44100, formatID: .appleLossless, bytesPerPacket: 0, framesPerPacket: 4096,
                                                                        bytesPerFrame: 0, channelsPerFrame: channels, bitsPerChannel: 16)) : nil
        let pcm: AudioStreamDescription = encoding == .float32 ? .float32(sampleRate: 44100, channels: channels)
            : .linearPCM(sampleRate: 44100, channels: channels, bitsPerChannel: 16)
        let queue = try AudioQueue(format: encoder?.outputFormat ?? pcm, configuration: .init(decodeBufferFrames: 1024))
        defer { queue.dispose(immediately: true) }
        if let cookie = encoder?.magicCookie { try queue.setMagicCookie(cookie) }
        try queue.setParameters(.init(volume: volume, pan: pan))
        var sources: [[Float]] = []
        var timeline = 0
        for (index, piece) in pieces.enumerated() {
            let buffer: AudioQueueBuffer
            var descriptions: [AudioPacketDescription] = []
            if encoding == .float32 {
                let samples = ramp(frames: piece.frames, channels: channels, offset: index * 5000 + 1)
                sources.append(samples)
                buffer = try queue.makeBuffer(samples)
            } else {
                let samples = (0..<(piece.frames * channels)).map { Int16(truncatingIfNeeded: (index * 7919 + $0 * 13) % 60000 - 30000) }
                sources.append(samples.map { Float($0) / 32768 })
                if let encoder {
                    // Each piece coded on its own: its packets decode to exactly its frames.
                    let coder = try ALACEncoder(format: encoder.outputFormat)
                    let packets = EncodedPackets()
                    try samples.withUnsafeBytes { try coder.encode($0, into: packets) }
                    try coder.finish(into: packets)
                    buffer = try queue.allocateBuffer(capacity: packets.byteCount, packetDescriptionCapacity: packets.count)
                    try buffer.setData(packets.allBytes)
                    descriptions = packets.descriptions(variableFrames: true)
                } else {
                    buffer = try queue.allocateBuffer(capacity: samples.count * 2)
                    try samples.withUnsafeBytes { try buffer.setData($0) }
                }
            }
            timeline += piece.gap
            try queue.enqueue(buffer, packetDescriptions: descriptions, trimFramesAtStart: piece.trimStart, trimFramesAtEnd: piece.trimEnd,
                              parameters: .init(volume: piece.volume, pan: piece.pan), startTime: piece.gap > 0 ? Int64(timeline) : nil)
            timeline += piece.frames - piece.trimStart - piece.trimEnd
        }
        try queue.flush()
        try queue.setOfflineRenderFormat(.float32(sampleRate: 44100, channels: channels))
        let output = try queue.renderRest(channels: channels, chunk: chunk)
        let straight = queue.pipeline.withLock { $0.framesRenderedStraight }
        return (output, expected(pieces, sources: sources, volume: volume, pan: pan), straight)
    }

    /// The first sample where `output` differs from `expected` (nil: none, within both).
    static func firstDifference(_ output: [Float], _ expected: [Float]) -> Int? {
        output.indices.first { $0 < expected.count && output[$0] != expected[$0] }
    }

    /// Whatever mix of straight and ring frames the render sizes, trims, gaps, volumes and pans
    /// make — linear PCM converted from the buffer, or decoded frames (Apple Lossless) from the
    /// staging block — the output is the same frames.
    @Test(.timeLimit(.minutes(1)), arguments: [[Encoding.float32, .int16], [.alac]])
    func everyMixOfStraightAndRingFramesRendersTheSame(_ encodings: [Encoding]) async {
        await propertyCheck(count: 35, input: Self.pieces, Gen.int(in: 1...9000), Gen.int(in: 0...(encodings.count - 1))) { pieces, chunk, which in
            let encoding = encodings[which]
            let result = await onOwnThread { () -> Result<(output: [Float], expected: [Float], straight: Int), any Error> in
                Result { try Self.render(pieces, chunk: chunk, encoding) }
            }
            switch result {
            case .failure(let error):
                Issue.record("render of \(pieces) failed: \(error)")
            case .success(let rendered):
                #expect(rendered.output.count == rendered.expected.count, "\(encoding) \(pieces), chunk \(chunk)")
                let difference = Self.firstDifference(rendered.output, rendered.expected)
                #expect(difference == nil, "\(encoding) \(pieces), chunk \(chunk): first difference at sample \(difference ?? -1)")
            }
        }
    }

    /// A long run of plain buffers read in large calls goes almost entirely past the ring (only
    /// the frames the first buffer's start trim shares a staging chunk with take the ring; for a
    /// decoded format, the first packets), with the queue's volume and pan applied as they are
    /// copied.
    @Test(.timeLimit(.minutes(1)), arguments: [(Encoding.float32, 4096), (.alac, 8192)])
    func plainBuffersGoPastTheRing(_ encoding: Encoding, _ throughRing: Int) async throws {
        let pieces = (0..<8).map { Piece(frames: 16384, trimStart: $0 == 0 ? 2112 : 0, trimEnd: $0 == 7 ? 970 : 0, volume: nil, gap: 0) }
        let rendered = try await onOwnThread { try Self.render(pieces, chunk: 8192, encoding, volume: 0.8, pan: -0.25) }
        #expect(rendered.output.count == rendered.expected.count)
        #expect(Self.firstDifference(rendered.output, rendered.expected) == nil)
        let total = rendered.expected.count / 2
        #expect(rendered.straight > total - throughRing, "\(rendered.straight) of \(total) frames went past the ring")
    }
}
