import Foundation
import Testing
import AudioFileStream
import AudioPlayback
import BufferQueue
import CodecTestSupport
import TestSupport

/// The graph against references: the equaliser against sox's cookbook biquads, and mixes of real
/// files against the sum of each file's own render.
@Suite(.enabled(if: Where.tool("sox") != nil, "sox is missing (make deps installs it): graph reference tests skipped"))
struct GraphReferenceTests {
    /// Noise and two tones, stereo, at 44.1 kHz: every band has something to shape.
    static let rate = 44_100
    static let input: [Float] = {
        var random = SplitMix(seed: 42)
        return (0..<(22_050 * 2)).map { index in
            let frame = Double(index / 2)
            let noise = Float(random.int(0...20_000) - 10_000) / 100_000
            return noise + Float(0.15 * sin(2 * .pi * 440 * frame / 44_100) + 0.1 * sin(2 * .pi * 6_000 * frame / 44_100 + Double(index % 2)))
        }
    }()

    /// Each band type, and the sox effect that is the same cookbook filter (Q given as `q` widths).
    static let cases: [(AudioEQBand, [String])] = [
        (.init(.parametric, frequency: 1_000, gain: 6, q: 1.5), ["equalizer", "1000", "1.5q", "6"]),
        (.init(.parametric, frequency: 3_000, gain: -9, q: 4), ["equalizer", "3000", "4q", "-9"]),
        (.init(.lowShelf, frequency: 200, gain: 5, q: 0.7071), ["bass", "5", "200", "0.7071q"]),
        (.init(.highShelf, frequency: 4_000, gain: -6, q: 0.9), ["treble", "-6", "4000", "0.9q"]),
        (.init(.lowPass, frequency: 2_500, q: 0.7071), ["lowpass", "-2", "2500", "0.7071q"]),
        (.init(.highPass, frequency: 60, q: 0.7071), ["highpass", "-2", "60", "0.7071q"]),
        (.init(.bandPass, frequency: 1_200, q: 2), ["bandpass", "1200", "2q"]),
        (.init(.notch, frequency: 440, q: 3), ["bandreject", "440", "3q"]),
    ]

    static func writeInput() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("eq-input-\(UUID()).wav").path
        let writer = try WAVFileWriter(path: path, sampleRate: rate, channels: 2)
        try input.withUnsafeBufferPointer { try writer.write($0) }
        try writer.close()
        return path
    }

    /// sox's output for `effects` on the input (32-bit float, no dither).
    static func sox(_ effects: [String], on source: String) async throws -> [Float] {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("eq-sox-\(UUID()).wav").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        _ = try await run(try #require(Where.tool("sox")), ["-D", source, "-e", "floating-point", "-b", "32", output] + effects)
        return floats(wav: try Data(contentsOf: URL(fileURLWithPath: output)))
    }

    @Test(arguments: 0..<8)
    func eachBandIsTheCookbookBiquadSoxRuns(_ index: Int) async throws {
        let (band, effect) = Self.cases[index]
        let source = try Self.writeInput()
        defer { try? FileManager.default.removeItem(atPath: source) }
        let reference = try await Self.sox(effect, on: source)
        var ours = Self.input
        let eq = try AudioEQNode(bands: [band], sampleRate: Double(Self.rate), channels: 2)
        eq.equalizer.process(&ours, frames: ours.count / 2, channels: 2, sampleRate: Double(Self.rate))
        #expect(reference.count == ours.count)
        let worst = zip(ours, reference).map { abs($0 - $1) }.max() ?? .infinity
        #expect(worst <= 2e-5, "\(band.type) against sox \(effect.joined(separator: " ")): largest difference \(worst)")
        #expect(difference(ours, Self.input) != nil, "the band changed the signal")
    }

    /// Several bands in series are the sox effects chained.
    @Test func bandsInSeriesAreTheEffectsChained() async throws {
        let picked = [0, 2, 3, 5].map { Self.cases[$0] }
        let source = try Self.writeInput()
        defer { try? FileManager.default.removeItem(atPath: source) }
        let reference = try await Self.sox(picked.flatMap(\.1), on: source)
        var ours = Self.input
        let eq = AudioEqualizer(bands: picked.map(\.0))
        eq.process(&ours, frames: ours.count / 2, channels: 2, sampleRate: Double(Self.rate))
        let worst = zip(ours, reference).map { abs($0 - $1) }.max() ?? .infinity
        #expect(reference.count == ours.count && worst <= 2e-5, "largest difference \(worst)")
    }
}

/// Real files mixed: the mix is each file's own render at the mixer's format (the queue's
/// converter, libsoxr), scaled and offset, summed in float32 — bit for bit.
@Suite(.enabled(if: ["sox", "flac"].allSatisfy { Where.tool($0) != nil }, "sox or flac is missing (make deps installs them)"))
struct GraphFileMixTests {
    /// WAV (22.05 kHz mono: converted), MP3, FLAC, ALAC and AAC in M4A.
    static func files() async throws -> [String] {
        let flac = try await XiphFiles.encode(try await XiphFiles.source(channels: 2, rate: 44_100), "flac", [], ext: "flac")
        return [Where.fixture("pcm-s16-22k-mono.wav"), Where.fixture("lame-vbr-v2-44k-stereo.mp3"), flac,
                Where.fixture("alac-44k-stereo.m4a"), Where.fixture("ffmpeg-aac-44k-moov-first.m4a")]
    }

    static func mix(_ paths: [String], gains: [Float], offsets: [Int]) throws -> [Float] {
        let graph = try AudioGraph(sampleRate: 44_100, channels: 2, rampSeconds: 0)
        for (index, path) in paths.enumerated() {
            let renderer = try AudioFileRenderer(file: try AudioFile(path: path), registry: AACDecoderChoice.current.registry)
            try graph.connect(try AudioPullSourceNode(name: path, source: renderer), to: graph.mainMixer,
                              volume: gains[index], offsetFrames: offsets[index])
        }
        var out: [Float] = []
        var block = [Float](repeating: 0, count: 4_096 * 2)
        while case let n = try block.withUnsafeMutableBufferPointer({ try graph.render(into: $0) }), n > 0 {
            out += block[0..<(n * 2)]
        }
        return out
    }

    func check(_ paths: [String]) async throws {
        let gains = paths.indices.map { Float(0.9 - 0.1 * Double($0)) }
        let offsets = paths.indices.map { 1_103 * $0 }
        var expected: [Float] = []
        for (index, path) in paths.enumerated() {
            let own = try await rendered(path, sampleRate: 44_100, channels: 2).samples
            let end = (offsets[index]) * 2 + own.count
            if expected.count < end { expected += [Float](repeating: 0, count: end - expected.count) }
            for i in own.indices { expected[offsets[index] * 2 + i] += own[i] * gains[index] }
        }
        // (The renders above registered every decoder and libsoxr.)
        let mixed = try await withCheckedThrowingContinuation { continuation in
            decodingWork.async { continuation.resume(with: Result { try Self.mix(paths, gains: gains, offsets: offsets) }) }
        }
        #expect(mixed.count == expected.count, "the mix is as long as its longest input's offset and length")
        #expect(difference(mixed, expected) == nil)
    }

    @Test func wavMP3FLACAndM4AMixExactly() async throws {
        try await check(try await Self.files())
    }

    @Test func eightFilesMixExactly() async throws {
        let files = try await Self.files()
        try await check((0..<8).map { files[$0 % files.count] })
    }

    /// A crossfade of D frames as the issue defines it: the outgoing file's frames up to its last
    /// D, then D frames of the outgoing times the falling curve plus the incoming times the rising
    /// one, then the rest of the incoming file — lenA + lenB − D frames. The incoming file is 48 kHz
    /// AAC converted to the mixer's 44.1 kHz. D = 0 is the plain gapless join, bit for bit.
    @Test(arguments: [(AudioFadeCurve.linear, 0.5), (.equalPower, 0.5), (.linear, 0), (.equalPower, 0.0173)])
    func twoFilesCrossfadeAsDefined(_ curve: AudioFadeCurve, _ seconds: Double) async throws {
        let a = Where.fixture("lame-vbr-v2-44k-stereo.mp3"), b = Where.fixture("ffmpeg-aac-48k.aac")
        let ownA = try await rendered(a, sampleRate: 44_100, channels: 2).samples
        let ownB = try await rendered(b, sampleRate: 44_100, channels: 2).samples
        let lenA = ownA.count / 2, lenB = ownB.count / 2
        let d = Int((seconds * 44_100).rounded())
        let mixed: [Float] = try await withCheckedThrowingContinuation { continuation in
            decodingWork.async {
                continuation.resume(with: Result {
                    let graph = try AudioGraph(sampleRate: 44_100, channels: 2, rampSeconds: 0)
                    let registry = AACDecoderChoice.current.registry
                    let first = try graph.connect(try AudioPullSourceNode(name: "A", source: AudioFileRenderer(file: AudioFile(path: a), registry: registry)),
                                                  to: graph.mainMixer)
                    first.fade(.out, curve: curve, at: Int64(lenA - d), frames: d)
                    let second = try graph.connect(try AudioPullSourceNode(name: "B", source: AudioFileRenderer(file: AudioFile(path: b), registry: registry)),
                                                   to: graph.mainMixer, startFrame: Int64(lenA - d))
                    second.fade(.in, curve: curve, at: Int64(lenA - d), frames: d)
                    var out: [Float] = []
                    var block = [Float](repeating: 0, count: 1_000 * 2)
                    while case let n = try block.withUnsafeMutableBufferPointer({ try graph.render(into: $0) }), n > 0 { out += block[0..<(n * 2)] }
                    return out
                })
            }
        }
        var expected = Array(ownA[0..<((lenA - d) * 2)])
        for i in 0..<d {
            let gOut = curve.gain(.out, frame: i, of: d), gIn = curve.gain(.in, frame: i, of: d)
            for c in 0..<2 {
                var sample: Float = 0
                sample += ownA[(lenA - d + i) * 2 + c] * gOut
                sample += ownB[i * 2 + c] * gIn
                expected.append(sample)
            }
        }
        expected += ownB[(d * 2)...]
        #expect(mixed.count == (lenA + lenB - d) * 2, "lenA + lenB − D = \(lenA) + \(lenB) − \(d)")
        #expect(difference(mixed, expected) == nil)
        if d == 0 { #expect(difference(mixed, ownA + ownB) == nil, "no crossfade is the gapless join") }
    }
}
