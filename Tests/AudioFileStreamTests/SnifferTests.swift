import Foundation
import Testing
@testable import AudioFileStream
import BufferQueue
import TestSupport

/// The one sniffer: what bytes are, decided before any parser guesses. Formats nothing here
/// decodes end in an error naming them — never in MPEG audio found by chance in their bytes.
@Suite struct SnifferTests {
    static let ffmpeg = "/usr/bin/ffmpeg"
    static var ffmpegMissing: Bool { !FileManager.default.isExecutableFile(atPath: ffmpeg) }
    static let aqinfo = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        .appendingPathComponent("aqinfo").path

    /// Parses `bytes` in 4 KiB pieces to the end; the error, if any, and the packets parsed.
    static func parse(_ bytes: [UInt8], hint: AudioFileType? = nil) -> (error: (any Error)?, packets: Int, type: AudioFileType?) {
        let stream = AudioFileStream(fileTypeHint: hint)
        var packets = 0
        func count(_ events: [AudioFileStreamEvent]) {
            for case .packets(let p) in events { packets += p.descriptions.isEmpty ? p.packetCount : p.descriptions.count }
        }
        do {
            var offset = 0
            while offset < bytes.count {
                let end = min(offset + 4096, bytes.count)
                count(try stream.parse(bytes[offset..<end]))
                offset = end
            }
            count(try stream.finish())
            return (nil, packets, stream.fileType)
        } catch {
            return (error, packets, stream.fileType)
        }
    }

    /// A temporary folder, removed by the caller.
    static func folder() throws -> String {
        let path = NSTemporaryDirectory() + "sniffer-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// One second of a stereo (or 5.1) tone encoded by ffmpeg with `codec` into `format`.
    static func encode(_ codec: String, _ format: String, in folder: String, name: String, extra: [String] = []) async throws -> [UInt8] {
        let path = folder + "/" + name
        let result = try await runTool(ffmpeg, ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=f=440:d=1:r=48000", "-ac", "2"]
                                       + extra + ["-c:a", codec, "-f", format, path])
        #expect(result.status == 0, "ffmpeg could not write \(name): \(result.errorText)")
        return Array(try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    @Test(.enabled(if: !ffmpegMissing, "ffmpeg is missing"))
    func dolbyAudioIsRefusedByName() async throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let cases: [(codec: String, format: String, name: String, extra: [String], expected: String)] = [
            ("ac3", "ac3", "a.ac3", [], "AC-3"),
            ("eac3", "eac3", "a.eac3", [], "E-AC-3"),
            ("ac3", "mpegts", "ac3.ts", [], "AC-3"),                                     // stream type 0x81
            ("eac3", "mpegts", "eac3.ts", [], "E-AC-3"),                                 // stream type 0x87
            ("ac3", "mpegts", "ac3-system-b.ts", ["-mpegts_flags", "system_b"], "AC-3"),  // 0x06 with an AC-3 descriptor
            ("eac3", "mpegts", "eac3-system-b.ts", ["-mpegts_flags", "system_b"], "E-AC-3"),
        ]
        for item in cases {
            let bytes = try await Self.encode(item.codec, item.format, in: dir, name: item.name, extra: item.extra)
            let (error, packets, _) = Self.parse(bytes)
            let text = "\(error.map { "\($0)" } ?? "no error")"
            #expect(error != nil && packets == 0, "\(item.name): \(packets) packets, \(text)")
            #expect(text.contains(item.expected), "\(item.name): \(text)")
            #expect(!text.contains("MPEG audio") || item.format == "mpegts", "\(item.name): \(text)")
            #expect(!text.contains("ADTS") && text.contains("no decoder"), "\(item.name): \(text)")
        }
        // aqinfo as a user runs it: exit status 1 and the codec's name.
        if FileManager.default.isExecutableFile(atPath: Self.aqinfo) {
            for (name, codec) in [("a.eac3", "E-AC-3"), ("eac3.ts", "E-AC-3"), ("a.ac3", "AC-3")] {
                let result = try await runTool(Self.aqinfo, [dir + "/" + name])
                #expect(result.status == 1 && result.errorText.contains(codec), "aqinfo \(name): \(result.status) \(result.errorText)")
            }
        }
    }

    /// Packed audio as an HLS segment carries it: an ID3 tag (with the segment's timestamp), then
    /// the raw E-AC-3 frames. The tag is read, then the frames are named.
    @Test(.enabled(if: !ffmpegMissing, "ffmpeg is missing"))
    func packedDolbyAfterAnID3TagIsRefusedByName() async throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let raw = try await Self.encode("eac3", "eac3", in: dir, name: "a.eac3")
        let owner = Array("com.apple.streaming.transportStreamTimestamp".utf8) + [0]
        let frame = Array("PRIV".utf8) + [0, 0, 0, UInt8(owner.count + 8), 0, 0] + owner + [0, 0, 0, 0, 0, 0, 0x23, 0x28]
        let tag = Array("ID3".utf8) + [4, 0, 0, 0, 0, 0, UInt8(frame.count)] + frame
        let (error, packets, _) = Self.parse(tag + raw)
        #expect(packets == 0 && "\(error.map { "\($0)" } ?? "none")".contains("E-AC-3"), "\(String(describing: error))")
    }

    /// Ogg with a played codec and native FLAC are read (an Ogg Opus 5.1 file was once taken for
    /// MPEG Layer I); an Ogg stream of a codec nothing here decodes is named.
    @Test(.enabled(if: !ffmpegMissing, "ffmpeg is missing"))
    func oggAndFLACAreReadAndOtherOggCodecsNamed() async throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let opus = try await Self.encode("libopus", "ogg", in: dir, name: "a.opus", extra: ["-af", "pan=5.1|c0=c0|c1=c1|c2=c0|c3=c1|c4=c0|c5=c1"])
        let (error, packets, type) = Self.parse(opus)
        #expect(error == nil && packets > 0 && type == .ogg, "\(String(describing: error))")
        #expect(AudioSniffer.kind(ofHead: opus.prefix(64)) == .audio(.ogg))
        let flac = try await Self.encode("flac", "flac", in: dir, name: "a.flac")
        #expect(AudioSniffer.kind(ofHead: flac.prefix(64)) == .audio(.flac))
        #expect(Self.parse(flac).type == .flac && Self.parse(flac).packets > 0)
        // A Speex stream's first page (the CRC does not matter to the sniffer).
        let speex = Array("OggS".utf8) + [0, 2] + [UInt8](repeating: 0, count: 20) + [1, 80] + Array("Speex   ".utf8) + [UInt8](repeating: 0, count: 72)
        #expect(AudioSniffer.kind(ofHead: speex) == .unsupported("Ogg Speex"))
    }

    /// MPEG-1 Layer III, 128 kbit/s, 44.1 kHz, stereo: 417-byte frames of zeros.
    static func mpegFrame(mono: Bool = false) -> [UInt8] {
        [0xFF, 0xFB, 0x90, mono ? 0xC0 : 0x00] + [UInt8](repeating: 0, count: 413)
    }

    /// Bytes that are not MPEG audio (no 0xFF byte at all).
    static let junk: [UInt8] = (0..<3000).map { UInt8(truncatingIfNeeded: $0 * 7 + 1) & 0x7F }

    @Test func mpegAudioNeedsThreeAgreeingFramesOrAnEnd() {
        // Two agreeing frames inside other bytes: chance, not MP3 (this was accepted before).
        let refused = Self.parse(Self.junk + Self.mpegFrame() + Self.mpegFrame() + Self.junk)
        #expect(refused.packets == 0 && refused.error != nil, "\(String(describing: refused.error))")
        // Three in a row are MP3, whatever surrounds them (the junk before is skipped with a warning).
        let three = Self.junk + Self.mpegFrame() + Self.mpegFrame() + Self.mpegFrame() + Self.junk
        let accepted = Self.parse(three)
        #expect(accepted.type == .mp3 && accepted.packets >= 2, "\(String(describing: accepted.error)), \(accepted.packets) packets")
        // A frame whose neighbour changes from stereo to mono does not agree with it.
        let mixed = Self.junk + Self.mpegFrame() + Self.mpegFrame(mono: true) + Self.mpegFrame() + Self.junk
        #expect(Self.parse(mixed).packets == 0)
        // Two frames then the end are a file; one frame is a file when a tag follows it. A lone
        // untagged frame is not (ffmpeg and mpg123 play nothing of one either).
        let two = Self.parse(Self.mpegFrame() + Self.mpegFrame())
        #expect(two.error == nil && two.packets == 2, "\(String(describing: two.error)) \(two.packets)")
        let cut = Self.parse(Self.mpegFrame() + Self.mpegFrame() + Self.mpegFrame().prefix(100))
        #expect(cut.type == .mp3 && cut.packets == 2, "\(String(describing: cut.error)) \(cut.packets)")
        let alone = Self.parse(Self.mpegFrame())
        #expect(alone.error != nil && alone.packets == 0, "\(String(describing: alone.error)) \(alone.packets)")
        let tagged = Self.parse(Self.mpegFrame() + Array("TAG".utf8) + [UInt8](repeating: 0x20, count: 125))
        #expect(tagged.error == nil && tagged.packets == 1, "\(String(describing: tagged.error))")
        let ape = Self.parse(Self.mpegFrame() + Array("APETAGEX".utf8) + [UInt8](repeating: 0, count: 24))
        #expect(ape.type == .mp3 && ape.packets == 1, "\(String(describing: ape.error)) \(ape.packets)")
    }

    @Test func mimeTypesAndExtensionsComeAfterTheBytes() {
        // The bytes win over what the server and the name say.
        let caf = Array("caff".utf8) + [0, 1, 0, 0] + [UInt8](repeating: 0, count: 8)
        #expect(AudioSniffer.identify(head: caf, contentType: "audio/mpeg", pathExtension: "mp3") == .audio(.caf))
        #expect(AudioSniffer.identify(head: [0x0B, 0x77], contentType: "audio/eac3") == .unsupported("E-AC-3"))
        #expect(AudioSniffer.identify(head: [], pathExtension: "ts") == .audio(.mpegTransportStream))
        for type in ["application/vnd.apple.mpegurl", "APPLICATION/X-MPEGURL", "audio/mpegurl", "audio/x-mpegURL; charset=UTF-8"] {
            #expect(AudioSniffer.kind(contentType: type) == .hlsPlaylist, "\(type)")
        }
        #expect(AudioSniffer.pathExtension(of: "http://h/a/b.M3U8?x=y.mp3#f") == "m3u8")
        #expect(AudioSniffer.pathExtension(of: "/music/track") == "")
        // An HLS playlist handed to the parser is named as one.
        let (error, _, _) = Self.parse(Array("#EXTM3U\n#EXT-X-VERSION:3\n".utf8))
        #expect("\(String(describing: error))".contains("HLS playlist"))
    }
}

extension ToolResult {
    var errorText: String { String(decoding: errorOutput, as: UTF8.self) }
}
