import Foundation
import Testing
import AudioFileStream
import AudioPlayback
import BufferQueue
import CodecTestSupport
import TestSupport

/// The Swift decoders for the rest of Apple's format list, against ffmpeg's decoders and the
/// sources the fixture script encoded.
@Suite(.enabled(if: Where.tool("ffmpeg") != nil, "ffmpeg is missing (make deps installs it): G.711/IMA/ALAC reference tests skipped"))
struct AppleFormatTests {
    /// Each fixture with the frames it must render: the source's length where the file keeps it
    /// (G.711, ALAC, a WAV `fact` count), otherwise nil: every coded frame, as ffmpeg decodes them.
    static let files: [(String, Int?)] = [
        ("ulaw-8k-mono.wav", 10400), ("alaw-8k-mono.wav", 10400), ("ulaw-8k-mono.caf", 10400), ("alaw-8k-mono.caf", 10400),
        ("ulaw-8k-mono.aifc", 10400), ("alaw-8k-mono.aifc", 10400),
        ("ima4-22k-mono.caf", nil), ("ima4-22k-mono.aifc", nil), ("ima-adpcm-48k-stereo-ffmpeg.wav", nil),
        ("ima-adpcm-22k-mono-sox-fact.wav", 24255),
        ("alac-44k-stereo.m4a", 48510), ("alac-44k-stereo-pakt-after-data.caf", 48510), ("alac-s24-48k-5.1.m4a", 12000),
        ("alac-22k-mono-noise.caf", 5513),
    ]

    /// ffmpeg's float decode, in our channel order (ALAC's 5.1 comes out of ffmpeg as
    /// L R C LFE Ls Rs; ALAC's own order, which we keep, is C L R Ls Rs LFE).
    static func ffmpegDecode(_ path: String, channels: Int) async throws -> [Float] {
        let samples = try await ffmpegFloats(path)
        guard channels == 6 else { return samples }
        let order = [2, 0, 1, 4, 5, 3]
        var reordered = samples
        for frame in 0..<(samples.count / 6) {
            for channel in 0..<6 { reordered[frame * 6 + channel] = samples[frame * 6 + order[channel]] }
        }
        return reordered
    }

    @Test(arguments: files.map(\.0))
    func exactLengthAndBitIdenticalToFFmpeg(_ name: String) async throws {
        let expected = try #require(Self.files.first { $0.0 == name }?.1 as Int??)
        let (ours, format, _) = try await rendered(Where.fixture(name))
        let channels = format.channelsPerFrame
        let reference = try await Self.ffmpegDecode(Where.fixture(name), channels: channels)
        // ffmpeg ignores the fact chunk (it plays the last block's padding); everything else it keeps.
        let frames = expected ?? reference.count / channels
        #expect(ours.count == frames * channels, "\(ours.count / channels) frames rendered, \(frames) expected")
        #expect(reference.count >= ours.count)
        let compared = min(ours.count, reference.count)
        let differing = zip(ours[0..<compared], reference[0..<compared]).filter { $0 != $1 }.count
        #expect(differing == 0, "\(differing) of \(compared) samples differ from ffmpeg's decode")
    }

    /// Lossless means the source's own samples: the fixture script's sources, made again by the
    /// same ffmpeg generators, as integers.
    @Test(arguments: [
        ("alac-44k-stereo.m4a", "aevalsrc=0.4*sin(2*PI*440*t)+0.1*sin(2*PI*3000*t)|0.4*sin(2*PI*660*t)+0.1*sin(2*PI*5000*t):s=44100:d=1.1", 16),
        ("alac-22k-mono-noise.caf", "anoisesrc=d=0.25:c=white:r=22050:a=0.9:s=7", 16),
        ("alac-s24-48k-5.1.m4a", "aevalsrc=0.3*sin(2*PI*300*t)|0.25*sin(2*PI*450*t)|0.2*sin(2*PI*600*t)|0.1*sin(2*PI*80*t)|0.15*sin(2*PI*750*t)|0.15*sin(2*PI*900*t):s=48000:d=0.25:c=5.1", 24),
    ])
    func appleLosslessIsTheSourcePCM(_ name: String, _ source: String, _ bits: Int) async throws {
        let (ours, format, _) = try await rendered(Where.fixture(name))
        let pcm = try await run(try #require(Where.tool("ffmpeg")), ["-v", "error", "-f", "lavfi", "-i", source,
                                                                     "-f", bits == 16 ? "s16le" : "s24le", "-acodec", bits == 16 ? "pcm_s16le" : "pcm_s24le", "-"])
        var integers: [Int32] = []
        pcm.withUnsafeBytes { raw in
            let bytes = raw.bindMemory(to: UInt8.self)
            let width = bits / 8
            for index in stride(from: 0, to: bytes.count - width + 1, by: width) {
                var value: Int32 = 0
                for byte in 0..<width { value |= Int32(bytes[index + byte]) << Int32(8 * byte) }
                integers.append((value << Int32(32 - bits)) >> Int32(32 - bits))
            }
        }
        let channels = format.channelsPerFrame
        if channels == 6 {   // the source is in ffmpeg's 5.1 order: L R C LFE Ls Rs
            let order = [2, 0, 1, 4, 5, 3]
            let copy = integers
            for frame in 0..<(copy.count / 6) { for channel in 0..<6 { integers[frame * 6 + channel] = copy[frame * 6 + order[channel]] } }
        }
        #expect(ours.count == integers.count)
        let scale = Float(1 << (bits - 1))
        let differing = zip(ours, integers).filter { Int32(($0 * scale).rounded()) != $1 || ($0 * scale).rounded() != $0 * scale }.count
        #expect(differing == 0, "\(differing) of \(integers.count) samples are not the source's")
    }

    @Test(.enabled(if: Where.shared != nil, "the shared fixtures are absent: ima4-pakt.caf skipped"))
    func sharedIMA4WithAPacketTableRendersItsValidFrames() async throws {
        let path = try #require(Where.shared).appendingPathComponent("ima4-pakt.caf").path
        let (ours, format, _) = try await rendered(path)
        #expect(format.channelsPerFrame == 1)
        #expect(ours.count == 44100)
        // ffmpeg ignores the pakt's remainder (it plays 44 160 frames); the frames kept are its first.
        let reference = try await Self.ffmpegDecode(path, channels: 1)
        #expect(reference.count == 690 * 64)
        #expect(Array(reference.prefix(ours.count)) == ours)
    }

    /// A damaged ALAC packet is silence of its length with an error; the packets around it decode.
    @Test func damagedAppleLosslessPacketsBecomeSilenceOfTheirLength() async throws {
        let file = try AudioFile(path: Where.fixture("alac-44k-stereo.m4a"))
        let packets = try file.readPackets(from: 0, count: Int(file.packetCount))
        let decoder = try ALACDecoder(format: file.dataFormat, magicCookie: file.magicCookie)
        let clean = DecodedAudio(format: decoder.outputFormat), damaged = DecodedAudio(format: decoder.outputFormat)
        for (index, description) in packets.descriptions.enumerated() {
            var bytes = Array(packets.data[description.startOffset..<(description.startOffset + description.dataByteSize)])
            let frames = file.frames(ofPacket: Int64(index))
            try bytes.withUnsafeBytes { try decoder.decode(packet: $0, frames: frames, into: clean) }
            if index == 3 { for position in stride(from: 2, to: bytes.count, by: 7) { bytes[position] ^= 0xA5 } }
            if index == 5 { bytes = Array(bytes.prefix(40)) }
            try bytes.withUnsafeBytes { try decoder.decode(packet: $0, frames: frames, into: damaged) }
        }
        #expect(clean.errors.isEmpty)
        #expect(damaged.errors.count == 2)
        #expect(damaged.frameCount == clean.frameCount)
        let perPacket = 4096 * 2
        clean.withUnsafeSamples { clean in
            damaged.withUnsafeSamples { damaged in
                #expect(Array(damaged[(3 * perPacket)..<(4 * perPacket)]).allSatisfy { $0 == 0 })
                #expect(Array(damaged[(5 * perPacket)..<(6 * perPacket)]).allSatisfy { $0 == 0 })
                #expect(Array(damaged[(4 * perPacket)..<(5 * perPacket)]) == Array(clean[(4 * perPacket)..<(5 * perPacket)]))
                #expect(Array(damaged[(6 * perPacket)...]) == Array(clean[(6 * perPacket)...]))
            }
        }
    }
}

/// AMR through opencore-amr: the 3GPP reference decoder, as sox also uses it.
@Suite(.enabled(if: Where.tool("sox") != nil && Where.tool("ffmpeg") != nil, "sox or ffmpeg is missing (make deps installs them): AMR reference tests skipped"))
struct AMRDecodingTests {
    static let files: [(String, Int)] = [
        ("amr-nb-8k-mono.amr", 10400), ("amr-nb-8k-mono.caf", 10400), ("amr-nb-8k-mono.3gp", 10400),
        ("amr-wb-16k-mono.awb", 20800), ("amr-wb-16k-mono.3gp", 20800),
    ]

    /// Every container gives 160 (NB) or 320 (WB) frames per 20 ms frame, decoded exactly as sox
    /// decodes the raw file (sox links the same reference decoder).
    @Test(arguments: files.map(\.0))
    func exactLengthAndBitIdenticalToTheReferenceDecoder(_ name: String) async throws {
        let expected = try #require(Self.files.first { $0.0 == name }?.1)
        let (ours, format, _) = try await rendered(Where.fixture(name))
        #expect(format.channelsPerFrame == 1 && format.sampleRate == (expected == 10400 ? 8000 : 16000))
        #expect(ours.count == expected)
        let raw = Where.fixture(expected == 10400 ? "amr-nb-8k-mono.amr" : "amr-wb-16k-mono.awb")
        let sox = try await run(try #require(Where.tool("sox")), [raw, "-t", "f32", "-"])
        let reference = sox.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
        #expect(reference.count == ours.count)
        let differing = zip(ours, reference).filter { $0 != $1 }.count
        #expect(differing == 0, "\(differing) of \(ours.count) samples differ from sox's decode")
    }

    /// ffmpeg's own AMR decoders are independent floating-point implementations, not the
    /// reference: the same signal, aligned to the sample, within a dB and a half in level.
    @Test(arguments: ["amr-nb-8k-mono.amr", "amr-wb-16k-mono.awb"])
    func closeToFFmpegsIndependentDecoder(_ name: String) async throws {
        let (ours, _, _) = try await rendered(Where.fixture(name))
        let data = try await run(try #require(Where.tool("ffmpeg")), ["-v", "error", "-i", Where.fixture(name), "-f", "f32le", "-acodec", "pcm_f32le", "-"])
        let reference = data.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
        #expect(reference.count == ours.count)
        func energy(_ samples: ArraySlice<Float>) -> Double { samples.reduce(0) { $0 + Double($1) * Double($1) } }
        let level = 10 * log10(energy(ours[...]) / energy(reference[...]))
        #expect(abs(level) < 1.5, "levels differ by \(level) dB")
        let aligned = snr(reference[...], ours[...])
        let shifted = snr(reference.dropFirst(), ours.dropLast())
        #expect(aligned >= 10, "SNR \(aligned) dB")
        #expect(aligned > shifted + 5, "not aligned: \(aligned) dB at lag 0, \(shifted) dB at lag 1")
    }
}
