import Foundation
import Testing
@testable import AudioFileStream
import BufferQueue

/// Numbers from `../shared/fixtures/SOURCES.md` (reference decoders and the files' own headers).
struct SharedExpectation: CustomTestStringConvertible, Sendable {
    let file: String
    let type: AudioFileType
    let packets: Int64
    /// The best reading: output rate, channels, format.
    let rate: Double
    let channels: Int
    let format: AudioFormatID
    /// valid, priming, remainder; nil when the file carries no gapless numbers.
    let table: (Int64, Int, Int)?
    var testDescription: String { file }

    static let all: [SharedExpectation] = [
        .init(file: "mp3-cbr128-lame3.99-info-id3v24.mp3", type: .mp3, packets: 18, rate: 44100, channels: 2, format: .mpegLayer3, table: (19584, 1105, 47)),
        .init(file: "mp3-vbr-lame3.100-xing-id3v23-id3v1-sweep.mp3", type: .mp3, packets: 40, rate: 44100, channels: 2, format: .mpegLayer3, table: (44100, 1105, 875)),
        .init(file: "mp3-vbr-lame3.99-xing-mono-44k.mp3", type: .mp3, packets: 151, rate: 44100, channels: 1, format: .mpegLayer3, table: (172740, 1105, 107)),
        .init(file: "mp3-vbri-fraunhofer-5s.mp3", type: .mp3, packets: 193, rate: 44100, channels: 2, format: .mpegLayer3, table: nil),
        .init(file: "mp3-itunes-itunsmpb-comm-no-xing-mono.mp3", type: .mp3, packets: 41, rate: 44100, channels: 1, format: .mpegLayer3, table: (44100, 528, 2604)),
        .init(file: "mp3-bladeenc-cbr64-mono-notag.mp3", type: .mp3, packets: 136, rate: 44100, channels: 1, format: .mpegLayer3, table: nil),
        .init(file: "mp3-mpeg2-24k-stereo-lame3.97-info.mp3", type: .mp3, packets: 57, rate: 24000, channels: 2, format: .mpegLayer3, table: (31104, 1105, 623)),
        .init(file: "mp3-mpeg2-16k-stereo-lame3.100-xing-silence.mp3", type: .mp3, packets: 254, rate: 16000, channels: 2, format: .mpegLayer3, table: (144640, 1105, 559)),
        .init(file: "mp3-mpeg25-8k-mono-lame3.100-xing-silence.mp3", type: .mp3, packets: 128, rate: 8000, channels: 1, format: .mpegLayer3, table: (72320, 1105, 303)),
        .init(file: "mp3-mpeg25-12k-mono-16k-noxing.mp3", type: .mp3, packets: 293, rate: 12000, channels: 1, format: .mpegLayer3, table: nil),
        .init(file: "edge-mp3-xing-claims-0-frames.mp3", type: .mp3, packets: 3, rate: 44100, channels: 2, format: .mpegLayer3, table: nil),
        .init(file: "edge-mp3-samplerate-change-44k-to-48k.mp3", type: .mp3, packets: 560, rate: 48000, channels: 1, format: .mpegLayer3, table: nil),
        .init(file: "aac-lc-itunes-7.6.2-itunsmpb-mono-1s.m4a", type: .mp4, packets: 46, rate: 44100, channels: 1, format: .aacLC, table: (44100, 2112, 892)),
        .init(file: "aac-lc-itunes-7.4.3-itunsmpb-mono-14s.m4a", type: .mp4, packets: 609, rate: 44100, channels: 1, format: .aacLC, table: (620880, 2112, 624)),
        .init(file: "aac-lc-fdkaac-itunsmpb-mdat-before-moov.m4a", type: .mp4, packets: 13, rate: 44100, channels: 2, format: .aacLC, table: (11187, 2048, 77)),
        .init(file: "aac-lc-nero-1.5.4-itunsmpb-22k-mono.m4a", type: .mp4, packets: 10, rate: 22050, channels: 1, format: .aacLC, table: (7119, 2624, 497)),
        .init(file: "aac-lc-apple-voicememos-48k-mono.m4a", type: .mp4, packets: 48, rate: 48000, channels: 1, format: .aacLC, table: nil),
        .init(file: "aac-lc-faac-1.24-silence.m4a", type: .mp4, packets: 160, rate: 44100, channels: 2, format: .aacLC, table: (163520, 0, 320)),
        .init(file: "aac-he-v1-nero-explicit-bc-mono-mdat-size0.m4a", type: .mp4, packets: 24, rate: 44100, channels: 1, format: .heAAC, table: nil),
        .init(file: "aac-lc-afconvert-pakt.caf", type: .caf, packets: 188, rate: 44100, channels: 2, format: .aacLC, table: (189746, 2112, 654)),
        .init(file: "ima4-pakt.caf", type: .caf, packets: 690, rate: 44100, channels: 1, format: AudioFormatID("ima4"), table: (44100, 0, 60)),
        .init(file: "aac-lc-adts-mpeg2id-8k-mono.aac", type: .adts, packets: 36, rate: 8000, channels: 1, format: .aacLC, table: nil),
        .init(file: "aac-lc-adts-16k-mono-truncated-last-frame.aac", type: .adts, packets: 251, rate: 16000, channels: 1, format: .aacLC, table: nil),
        .init(file: "edge-adts-id3v2-junk-prefix-lavc.aac", type: .adts, packets: 2, rate: 44100, channels: 2, format: .aacLC, table: nil),
        .init(file: "gen-fdk-he-aac-v1-explicit-bc.m4a", type: .mp4, packets: 46, rate: 44100, channels: 2, format: .heAAC, table: nil),
        .init(file: "gen-fdk-he-aac-v1-explicit-hier.m4a", type: .mp4, packets: 46, rate: 44100, channels: 2, format: .heAAC, table: nil),
        .init(file: "gen-fdk-he-aac-v1-implicit.m4a", type: .mp4, packets: 46, rate: 44100, channels: 2, format: .heAAC, table: nil),
        .init(file: "gen-fdk-he-aac-v1-implicit-mono.aac", type: .adts, packets: 46, rate: 44100, channels: 1, format: .heAAC, table: nil),
        .init(file: "gen-fdk-he-aac-v1-implicit-stereo.aac", type: .adts, packets: 46, rate: 44100, channels: 2, format: .heAAC, table: nil),
        .init(file: "gen-fdk-he-aac-v2-explicit-bc.m4a", type: .mp4, packets: 47, rate: 44100, channels: 2, format: .heAACv2, table: nil),
        .init(file: "gen-fdk-he-aac-v2-explicit-hier.m4a", type: .mp4, packets: 47, rate: 44100, channels: 2, format: .heAACv2, table: nil),
        .init(file: "gen-fdk-he-aac-v2-implicit.m4a", type: .mp4, packets: 47, rate: 44100, channels: 2, format: .heAACv2, table: nil),
        .init(file: "gen-fdk-he-aac-v2-implicit.aac", type: .adts, packets: 47, rate: 44100, channels: 2, format: .heAACv2, table: nil),
    ]

    /// The broken files and the error each must give (none may crash or hang).
    static let broken: [(String, AudioFileStreamError.Code)] = [
        ("broken-mp3-empty-0-bytes.mp3", .unsupportedFileType),
        ("broken-mp3-3-random-bytes.mp3", .unsupportedFileType),
        ("broken-mp3-all-zero-816-bytes.mp3", .unsupportedFileType),
        ("broken-mp3-lone-frame-header-in-zeros.mp3", .noAudio),
        ("broken-mp3-cut-mid-frame-192B.mp3", .noAudio),
        ("broken-mp3-id3v2-size-exceeds-file.mp3", .truncated),
        ("broken-m4a-empty-0-bytes.m4a", .unsupportedFileType),
        ("broken-m4a-1-zero-byte.m4a", .unsupportedFileType),
        ("broken-m4a-box-size-zero-no-mdat.m4a", .noAudio),
        ("broken-m4a-truncated-64bit-box.m4a", .truncated),
        ("broken-m4a-itunes-corrupt-stsz-infloop.m4a", .invalidData),
        ("broken-adts-samplerate-index-15.aac", .invalidData),
    ]
}

@Suite(.enabled(if: !Paths.sharedFixturesMissing, "../shared/fixtures (or $AQ_FIXTURES) is absent: shared fixture tests skipped"))
struct SharedFixtureTests {
    @Test(arguments: SharedExpectation.all)
    func numbersMatchSources(_ expected: SharedExpectation) throws {
        let url = try #require(Paths.shared(expected.file))
        let file = try AudioFile(path: url.path)
        #expect(file.fileType == expected.type)
        #expect(file.packetCount == expected.packets)
        let best = try #require(file.formatList.first)
        #expect(best.sampleRate == expected.rate)
        #expect(best.channelsPerFrame == expected.channels)
        #expect(best.formatID == expected.format)
        if let (valid, priming, remainder) = expected.table {
            let table = try #require(file.packetTableInfo)
            #expect(table.validFrames == valid)
            #expect(table.primingFrames == priming)
            #expect(table.remainderFrames == remainder)
            #expect(valid + Int64(priming) + Int64(remainder) == file.totalFrames)
        } else {
            #expect(file.packetTableInfo == nil)
        }
        #expect(file.damage == nil)
    }

    @Test(arguments: SharedExpectation.broken.map(\.0))
    func brokenFilesGiveAClearError(_ name: String) throws {
        let url = try #require(Paths.shared(name))
        let expected = try #require(SharedExpectation.broken.first { $0.0 == name }?.1)
        let bytes = try load(url)
        let whole = trace(bytes, chunks: [bytes.count + 1])
        let error = try #require(whole.error, "\(name) parsed without an error")
        // The message names the container (or "stream" before one is known) and a byte offset.
        #expect(error.contains("at byte "))
        var code: AudioFileStreamError.Code?
        do { _ = try AudioFile(path: url.path) } catch let e as AudioFileStreamError { code = e.code }
        if code == nil {
            let file = try AudioFile(path: url.path)
            code = file.damage?.code
            #expect(file.packetCount > 0, "packets before the damage are kept")
        }
        #expect(code == expected)
    }

    @Test func mp3FormatChangeIsAnnouncedBeforeItsPackets() throws {
        let bytes = try load(try #require(Paths.shared("edge-mp3-samplerate-change-44k-to-48k.mp3")))
        let result = trace(bytes, chunks: [4096])
        let formats = result.items.enumerated().compactMap { index, item -> (Int, String)? in
            if case .property(let text) = item, text.hasPrefix("dataFormat=") { return (index, text) } else { return nil }
        }
        #expect(formats.count == 2)
        #expect(formats.first?.1.contains("44100 Hz") == true)
        #expect(formats.last?.1.contains("48000 Hz") == true)
        let packetsBefore = result.items[..<(formats.last?.0 ?? 0)].filter { if case .packet = $0 { return true } else { return false } }.count
        let changeOffset = result.packets[packetsBefore].offset
        #expect(changeOffset == 166661)   // where he_48khz.bit starts (SOURCES.md)
    }

    @Test func vbriFrameIsNotAudio() throws {
        let file = try AudioFile(path: try #require(Paths.shared("mp3-vbri-fraunhofer-5s.mp3")).path)
        // 194 frames in the file, the first is the VBRI header: 193 audio packets (ffmpeg decodes 222336 = 193 x 1152).
        #expect(file.packetCount == 193)
        #expect(file.totalFrames == 222336)
    }

    @Test func metadataFromID3AndMP4Tags() throws {
        let mp3 = try AudioFile(path: try #require(Paths.shared("mp3-cbr128-lame3.99-info-id3v24.mp3")).path)
        #expect(mp3.metadata == AudioFileMetadata(title: "I Can Walk On Water I Can Fly", artist: "Basshunter", album: "I Can Walk On Water I Can Fly"))
        let m4a = try AudioFile(path: try #require(Paths.shared("aac-lc-itunes-7.6.2-itunsmpb-mono-1s.m4a")).path)
        #expect(m4a.metadata.title == "full" && m4a.metadata.artist == "the artist" && m4a.metadata.album == "the album")
        // iTunes freeform (`----`) items come by their names.
        #expect(m4a.metadata.tags["MusicBrainz Track Id"] == "8b882575-08a5-4452-a7a7-cbb8a1531f9e", "\(m4a.metadata.tags)")
        #expect(m4a.metadata.tags["Label"] == "the label" && m4a.metadata.tags["iTunSMPB"] == nil)
        let nero = try AudioFile(path: try #require(Paths.shared("aac-he-v1-nero-explicit-bc-mono-mdat-size0.m4a")).path)
        #expect(nero.metadata.title == "Sine wave 440Hz")
    }

    @Test func heAACFormatListIsComplete() throws {
        let v2 = try AudioFile(path: try #require(Paths.shared("gen-fdk-he-aac-v2-explicit-hier.m4a")).path)
        #expect(v2.formatList.map(\.formatID) == [.heAACv2, .heAAC, .aacLC])
        #expect(v2.formatList.map(\.sampleRate) == [44100, 44100, 22050])
        #expect(v2.formatList.map(\.channelsPerFrame) == [2, 1, 1])
        #expect(v2.dataFormat.formatID == .aacLC)
        #expect(v2.totalFrames == 47 * 2048)
        let cookie = try #require(v2.magicCookie)
        let config = try #require(AudioSpecificConfig(cookie))
        #expect(config.signalling == "explicit hierarchical")
    }
}

@Suite struct GeneratedFixtureTests {
    @Test(arguments: ManifestEntry.all)
    func lengthsAreExactlyTheSource(_ entry: ManifestEntry) throws {
        let file = try AudioFile(path: Paths.projectFixtures.appendingPathComponent(entry.file).path)
        let best = try #require(file.formatList.first)
        #expect(best.sampleRate == entry.rate)
        #expect(best.channelsPerFrame == entry.channels)
        #expect(file.damage == nil)
        #expect(file.warnings.isEmpty)
        if entry.gapless {
            let table = try #require(file.packetTableInfo)
            #expect(table.validFrames == entry.sourceFrames)
            #expect(Int64(table.primingFrames) + table.validFrames + Int64(table.remainderFrames) == file.totalFrames)
        } else if entry.exact {
            // (ffmpeg's CAF muxer writes a pakt counting whole ALAC packets: more than there are.)
            let priming = Int64(file.packetTableInfo?.primingFrames ?? 0)
            #expect(file.totalFrames - priming == entry.sourceFrames)
            #expect((file.packetTableInfo?.validFrames ?? entry.sourceFrames) >= entry.sourceFrames)
        } else if best.isLinearPCM {
            #expect(file.packetCount == entry.sourceFrames)
        } else {
            // ADTS and IMA ADPCM without a frame count carry no gapless numbers: every decoded
            // frame plays, at least the source.
            #expect(file.totalFrames >= entry.sourceFrames)
            #expect(file.totalFrames - entry.sourceFrames < 3 * 1024)
        }
    }

    @Test func manifestListsEveryGeneratedFixture() {
        #expect(ManifestEntry.all.count == 40)
    }
}

/// Fragmented MP4: the samples of `moof`/`traf`/`trun` fragments, alone or after samples in `moov`.
@Suite struct FragmentedMP4Tests {
    static func packets(_ name: String) throws -> [[UInt8]] {
        let file = try AudioFile(path: Paths.projectFixtures.appendingPathComponent(name).path)
        #expect(file.damage == nil)
        let all = try file.readPackets(from: 0, count: Int(file.packetCount))
        return all.descriptions.map { Array(all.data[$0.startOffset..<($0.startOffset + $0.dataByteSize)]) }
    }

    /// ffmpeg repackaged the files with `-c copy`: every packet is the unfragmented file's, in order.
    @Test(arguments: [("aac-44k-fragmented.m4a", "ffmpeg-aac-44k-moov-first.m4a"),
                      ("aac-44k-fragmented-sidx.m4a", "ffmpeg-aac-44k-moov-first.m4a"),
                      ("aac-44k-fragmented-after-moov-samples.m4a", "ffmpeg-aac-44k-moov-first.m4a"),
                      ("alac-44k-stereo-fragmented.m4a", "alac-44k-stereo.m4a")])
    func fragmentsHoldTheSamePacketsAsTheWholeFile(_ fragmented: String, _ whole: String) throws {
        let ours = try Self.packets(fragmented), reference = try Self.packets(whole)
        #expect(ours.count == reference.count)
        #expect(ours == reference)
    }

    /// Fragments that list samples of no track the moov describes are not audio found: an error,
    /// never an empty success.
    @Test func fragmentsOfAnotherTrackAreNoAudio() throws {
        var bytes = try [UInt8](Data(contentsOf: Paths.projectFixtures.appendingPathComponent("aac-44k-fragmented.m4a")))
        var index = 0
        var patched = 0
        while index + 12 <= bytes.count {
            if bytes[index..<(index + 4)].elementsEqual("tfhd".utf8) { bytes[index + 11] = 7; patched += 1 }
            index += 1
        }
        #expect(patched > 1)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("frag-\(UUID()).m4a").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            let file = try AudioFile(path: path)
            Issue.record("opened with \(file.packetCount) packets")
        } catch let error as AudioFileStreamError {
            #expect(error.code == .noAudio)
            #expect(error.message.contains("fragment"))
        }
    }
}
