import Foundation
import Testing
import AVCodecAAC
import AudioFileStream
import AudioPlayback
import BufferQueue
import FAADDecoder
import OpenCoreAMRDecoder
import MPG123Decoder
import SoxrConverter
import CodecTestSupport
import TestSupport

let manifest: [(file: String, frames: Int, rate: Double, channels: Int)] = [
    ("lame-cbr128-44k-stereo.mp3", 48510, 44100, 2), ("lame-vbr-v2-44k-stereo.mp3", 48510, 44100, 2),
    ("lame-cbr64-22k-mono-mpeg2.mp3", 24255, 22050, 1), ("lame-cbr32-8k-mono-mpeg25.mp3", 10400, 8000, 1),
    ("lame-freeformat-400k-44k-stereo.mp3", 48510, 44100, 2),
]

@Suite(.enabled(if: Where.tool("mpg123") != nil, "mpg123 is missing (make deps installs it): MP3 reference tests skipped"))
struct MP3DecodingTests {
    @Test(arguments: manifest.map(\.file))
    func exactLengthAndSameSamplesAsMpg123(_ name: String) async throws {
        let expected = try #require(manifest.first { $0.file == name })
        let (ours, format, _) = try await rendered(Where.fixture(name))
        #expect(format.sampleRate == expected.rate && format.channelsPerFrame == expected.channels)
        #expect(ours.count == expected.frames * expected.channels)
        // mpg123's own gapless float decode of the same file.
        let temporary = FileManager.default.temporaryDirectory.appendingPathComponent("ref-\(UUID()).wav").path
        defer { try? FileManager.default.removeItem(atPath: temporary) }
        _ = try await run(try #require(Where.tool("mpg123")), ["-q", "-e", "f32", "-w", temporary, Where.fixture(name)])
        let reference = floats(wav: try Data(contentsOf: URL(fileURLWithPath: temporary)))
        #expect(reference.count == ours.count)
        let worst = zip(ours, reference).map { abs($0 - $1) }.max() ?? 1
        #expect(worst <= 1e-6, "largest difference \(worst)")
    }
}

@Suite(.enabled(if: Where.tool("ffmpeg") != nil && Where.tool("faad") != nil, "ffmpeg or faad is missing (make deps installs them): AAC reference tests skipped"),
       .bothAACDecoders)
struct AACDecodingTests {
    @Test(arguments: ["ffmpeg-aac-44k-moov-first.m4a", "ffmpeg-aac-44k-moov-last.m4a"])
    func exactLengthAndCloseToTheReferences(_ name: String) async throws {
        let (ours, format, _) = try await rendered(Where.fixture(name))
        #expect(format.sampleRate == 44100 && format.channelsPerFrame == 2)
        #expect(ours.count == 48510 * 2)   // ffmpeg's own decode keeps ~640 frames of padding; we do not
        // ffmpeg applies the edit list's start: same alignment. Its decoder and libfaad2 differ on the
        // final (short-window) packet, so that packet is left out of this comparison.
        let ffmpeg = try await run(try #require(Where.tool("ffmpeg")), ["-v", "error", "-i", Where.fixture(name), "-f", "f32le", "-acodec", "pcm_f32le", "-"])
        let reference = ffmpeg.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
        let body = 48 * 1024 - 1024
        #expect(snr(ours[0..<(body * 2)], reference[0..<(body * 2)]) >= 40)
        if AACDecoderChoice.current == .avcodec {
            // The same decoder as ffmpeg's: the same samples, the final packet aside.
            #expect(Array(ours[0..<(body * 2)]) == Array(reference[0..<(body * 2)]))
            return
        }
        // faad's command-line tool uses the same library: the whole file agrees to 16-bit precision.
        let temporary = FileManager.default.temporaryDirectory.appendingPathComponent("faad-\(UUID()).wav").path
        defer { try? FileManager.default.removeItem(atPath: temporary) }
        _ = try await run(try #require(Where.tool("faad")), ["-q", "-o", temporary, Where.fixture(name)])
        let data = try Data(contentsOf: URL(fileURLWithPath: temporary))
        let range = try #require(data.range(of: Data("data".utf8)))
        let pcm = data[(range.upperBound + 4)...].withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }.map { Float($0) / 32768 }
        #expect(pcm.count >= ours.count)
        #expect(snr(ours[...], pcm[0..<ours.count]) >= 85)
    }
}

@Suite(.bothAACDecoders) struct GaplessLoopTests {
    @Test(arguments: ["lame-vbr-v2-44k-stereo.mp3", "ffmpeg-aac-44k-moov-first.m4a"])
    func threeLoopsAreThreeCopiesWithAnExactSeam(_ name: String) async throws {
        let (single, _, _) = try await rendered(Where.fixture(name))
        let (looped, _, renderer) = try await rendered(Where.fixture(name), loops: 3)
        #expect(renderer.expectedFrames == Int64(48510 * 3))
        #expect(looped.count == single.count * 3)
        // The seam is the file's end followed by its start: every loop is the same frames.
        #expect(Array(looped[single.count..<(2 * single.count)]) == single)
        #expect(Array(looped[(2 * single.count)...]) == single)
    }
}

@Suite(.enabled(if: Where.shared != nil, "../shared/fixtures (or $AQ_FIXTURES) is absent: shared decoding tests skipped"))
struct SharedDecodingTests {
    /// Output rate, channels and frames: SOURCES.md's packet tables, and for files without one every
    /// decoded frame. Mono stays mono unless PS makes it stereo; plain low-rate AAC-LC is not doubled.
    static let expectations: [(String, Double, Int, Int)] = [
        ("aac-lc-itunes-7.6.2-itunsmpb-mono-1s.m4a", 44100, 1, 44100),
        ("aac-lc-itunes-7.4.3-itunsmpb-mono-14s.m4a", 44100, 1, 620880),
        ("aac-lc-nero-1.5.4-itunsmpb-22k-mono.m4a", 22050, 1, 7119),
        ("aac-lc-fdkaac-itunsmpb-mdat-before-moov.m4a", 44100, 2, 11187),
        ("aac-lc-afconvert-pakt.caf", 44100, 2, 189746),
        ("aac-lc-apple-voicememos-48k-mono.m4a", 48000, 1, 49152),
        ("aac-lc-adts-mpeg2id-8k-mono.aac", 8000, 1, 36 * 1024),
        ("aac-he-v1-nero-explicit-bc-mono-mdat-size0.m4a", 44100, 1, 24 * 2048),
        ("gen-fdk-he-aac-v1-explicit-bc.m4a", 44100, 2, 46 * 2048),
        ("gen-fdk-he-aac-v1-explicit-hier.m4a", 44100, 2, 46 * 2048),
        ("gen-fdk-he-aac-v1-implicit.m4a", 44100, 2, 46 * 2048),
        ("gen-fdk-he-aac-v1-implicit-stereo.aac", 44100, 2, 46 * 2048),
        ("gen-fdk-he-aac-v1-implicit-mono.aac", 44100, 1, 46 * 2048),
        ("gen-fdk-he-aac-v2-explicit-bc.m4a", 44100, 2, 47 * 2048),
        ("gen-fdk-he-aac-v2-explicit-hier.m4a", 44100, 2, 47 * 2048),
        ("gen-fdk-he-aac-v2-implicit.m4a", 44100, 2, 47 * 2048),
        ("gen-fdk-he-aac-v2-implicit.aac", 44100, 2, 47 * 2048),
        ("mp3-cbr128-lame3.99-info-id3v24.mp3", 44100, 2, 19584),
        ("mp3-vbr-lame3.100-xing-id3v23-id3v1-sweep.mp3", 44100, 2, 44100),
        ("mp3-mpeg2-24k-stereo-lame3.97-info.mp3", 24000, 2, 31104),
        ("mp3-mpeg25-8k-mono-lame3.100-xing-silence.mp3", 8000, 1, 72320),
        ("mp3-itunes-itunsmpb-comm-no-xing-mono.mp3", 44100, 1, 44100),
        ("mp3-vbri-fraunhofer-5s.mp3", 44100, 2, 193 * 1152),
    ]

    @Test(.bothAACDecoders, arguments: expectations.map(\.0))
    func rateChannelsAndLength(_ name: String) async throws {
        let expected = try #require(Self.expectations.first { $0.0 == name })
        let url = try #require(Where.shared).appendingPathComponent(name)
        let (samples, format, renderer) = try await rendered(url.path)
        #expect(format.sampleRate == expected.1)
        #expect(format.channelsPerFrame == expected.2)
        #expect(samples.count == expected.3 * expected.2)
        #expect(renderer.lastConverterError == nil)
        #expect(samples.contains { $0 != 0 } || name.contains("silence") || name.contains("itunsmpb-mono-1s"))
    }

    @Test func unsupportedCodecIsAClearError() async throws {
        // A CAF of QDesign Music 2 ('QDM2'), a codec of Apple's list no decoder here handles.
        func be<T: FixedWidthInteger>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value.bigEndian, Array.init) }
        var bytes = Array("caff".utf8) + be(UInt16(1)) + be(UInt16(0))
        bytes += Array("desc".utf8) + be(Int64(32)) + be((44100.0).bitPattern) + Array("QDM2".utf8) + be(UInt32(0))
        bytes += be(UInt32(64)) + be(UInt32(2048)) + be(UInt32(1)) + be(UInt32(0))
        bytes += Array("data".utf8) + be(Int64(4 + 640)) + be(UInt32(0)) + [UInt8](repeating: 0x5A, count: 640)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("qdm2-\(UUID()).caf").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            _ = try await rendered(path)
            Issue.record("QDM2 rendered")
        } catch let error as AudioQueueError {
            #expect(error.code == .codecNotFound)
            #expect(error.message.contains("'QDM2'"))
        }
    }

    @Test func truncatedFilesKeepWhatCameBeforeTheDamage() async throws {
        let url = try #require(Where.shared).appendingPathComponent("broken-mp3-xing-9572-frames-truncated-2kB.mp3")
        let (samples, format, renderer) = try await rendered(url.path)
        // The Xing tag claims 9 572 frames; the file holds 6 and a bit: those play, with a warning.
        #expect(renderer.file.damage == nil)
        #expect(renderer.file.warnings.contains { $0.code == .truncated && $0.message.contains("promises 9572 frames") })
        // 6 whole frames of 576 minus the 1105 priming frames.
        #expect(samples.count == (6 * 576 - 1105) * format.channelsPerFrame)
    }
}

@Suite struct DecoderBehaviourTests {
    @Test(.bothAACDecoders) func corruptAACPacketsBecomeSilenceOfTheirLength() async throws {
        let damaged = try copyWithPacketOverwritten(Where.fixture("ffmpeg-aac-44k-moov-first.m4a"), packet: 20)
        defer { try? FileManager.default.removeItem(at: damaged) }
        let (samples, _, renderer) = try await rendered(damaged.path)
        #expect(samples.count == 48510 * 2)   // time stays exact
        #expect(renderer.lastConverterError?.code == .decoderError)
        // Packet 20 is output frames 20*1024-1024 ..< 21*1024-1024 after the priming trim: silence.
        let start = (20 * 1024 - 1024) * 2
        #expect(samples[start..<(start + 2048)].allSatisfy { $0 == 0 })
    }

    /// Without a cookie, AAC decodes from what its description implies (as on a Mac); a
    /// description that implies no AudioSpecificConfig (a rate with no frequency index, nine
    /// channels) is refused, as are a bad cookie and a format the decoder does not take.
    @Test func missingCookieAndWrongFormatsAreRefused() throws {
        let aac = AudioStreamDescription(sampleRate: 44100, formatID: .aacLC, bytesPerPacket: 0, framesPerPacket: 1024, bytesPerFrame: 0, channelsPerFrame: 2, bitsPerChannel: 0)
        _ = try FAADDecoder(format: aac, magicCookie: nil)
        _ = try AVCodecAACDecoder(format: aac, magicCookie: nil)
        #expect(AACConfig.implied(by: aac) == [0x12, 0x10])
        var odd = aac
        odd.sampleRate = 44_000
        #expect(throws: AudioQueueError.self) { _ = try FAADDecoder(format: odd, magicCookie: nil) }
        #expect(throws: AudioQueueError.self) { _ = try AVCodecAACDecoder(format: odd, magicCookie: nil) }
        var wide = aac
        wide.channelsPerFrame = 9
        #expect(throws: AudioQueueError.self) { _ = try AVCodecAACDecoder(format: wide, magicCookie: nil) }
        #expect(throws: AudioQueueError.self) { _ = try AVCodecAACDecoder(format: aac, magicCookie: [0xFF, 0xFF]) }
        #expect(throws: AudioQueueError.self) { _ = try MPG123Decoder(format: aac) }
    }

    @Test(.timeLimit(.minutes(1)), .bothAACDecoders)
    func independentDecodersRunInParallel() async throws {
        let names = ["lame-vbr-v2-44k-stereo.mp3", "ffmpeg-aac-44k-moov-first.m4a", "lame-cbr128-44k-stereo.mp3", "ffmpeg-aac-44k-moov-last.m4a"]
        var sequential: [[Float]] = []
        for name in names { sequential.append(try await rendered(Where.fixture(name)).samples) }
        let parallel = try await withThrowingTaskGroup(of: (Int, [Float]).self) { group in
            for (index, name) in names.enumerated() {
                group.addTask { (index, try render(Where.fixture(name)).samples) }
            }
            var results = [[Float]](repeating: [], count: names.count)
            for try await (index, samples) in group { results[index] = samples }
            return results
        }
        #expect(parallel == sequential)
    }
}
