import Foundation
import Testing
@testable import AudioStreaming
import TestSupport

/// The HLS playlist parser (RFC 8216): master and media playlists as ffmpeg's HLS muxer and
/// packagers write them, and malformed ones, which name their line.
@Suite struct HLSPlaylistTests {
    let base = URL(string: "https://radio.example/live/index.m3u8")!

    func media(_ text: String) throws -> HLSMediaPlaylist {
        guard case .media(let playlist) = try HLSPlaylist.parse(text, url: base) else {
            Issue.record("not a media playlist")
            throw HLSPlaylistError(line: 0, message: "test", url: base)
        }
        return playlist
    }

    @Test func serverControlSaysWhetherReloadsBlock() throws {
        let blocking = try media("#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXT-X-SERVER-CONTROL:CAN-SKIP-UNTIL=24.0,CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK=1.0\n#EXTINF:4,\na.ts\n")
        #expect(blocking.canBlockReload)
        let no = try media("#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=NO\n#EXTINF:4,\na.ts\n")
        #expect(!no.canBlockReload)
        let classic = try media("#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXTINF:4,\na.ts\n")
        #expect(!classic.canBlockReload)
    }

    @Test func masterPlaylistListsVariantsAndAudioRenditions() throws {
        let text = """
        #EXTM3U
        #EXT-X-VERSION:6
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aac",NAME="English",LANGUAGE="en",DEFAULT=YES,URI="audio/en.m3u8"
        #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",NAME="English",URI="subs.m3u8"
        #EXT-X-STREAM-INF:BANDWIDTH=64000,AVERAGE-BANDWIDTH=60000,CODECS="mp4a.40.5",AUDIO="aac"
        low/index.m3u8
        #EXT-X-STREAM-INF:CODECS="mp4a.40.2, mp4a.40.34",BANDWIDTH=128000
        https://cdn.example/high.m3u8
        """
        guard case .master(let master) = try HLSPlaylist.parse(text, url: base) else { Issue.record("not a master playlist"); return }
        #expect(master.variants.map(\.bandwidth) == [64000, 128000])
        #expect(master.variants[0].url.absoluteString == "https://radio.example/live/low/index.m3u8")
        #expect(master.variants[0].averageBandwidth == 60000)
        #expect(master.variants[0].codecs == ["mp4a.40.5"] && master.variants[0].audioGroup == "aac")
        #expect(master.variants[1].codecs == ["mp4a.40.2", "mp4a.40.34"])
        #expect(master.variants[1].url.absoluteString == "https://cdn.example/high.m3u8")
        #expect(master.audioRenditions.count == 1)   // the subtitles are not audio
        #expect(master.audioRenditions.first?.url?.absoluteString == "https://radio.example/live/audio/en.m3u8")
        #expect(master.audioRenditions.first?.isDefault == true && master.audioRenditions.first?.language == "en")
    }

    @Test func mediaPlaylistGivesSegmentsWithSequenceKeyMapAndRanges() throws {
        let playlist = try media("""
        #EXTM3U
        #EXT-X-VERSION:7
        #EXT-X-TARGETDURATION:4
        #EXT-X-MEDIA-SEQUENCE:17
        #EXT-X-DISCONTINUITY-SEQUENCE:3
        #EXT-X-MAP:URI="init.mp4",BYTERANGE="720@0"
        #EXT-X-KEY:METHOD=AES-128,URI="key.bin",IV=0x000102030405060708090a0b0c0d0e0f
        #EXT-X-PROGRAM-DATE-TIME:2026-11-24T10:00:00.000Z
        #EXTINF:3.989,First
        #EXT-X-BYTERANGE:1000@720
        all.mp4
        #EXTINF:4.011,
        #EXT-X-BYTERANGE:1200
        all.mp4
        #EXT-X-DISCONTINUITY
        #EXT-X-KEY:METHOD=NONE
        #EXTINF:2.5
        /other/seg3.ts
        #EXT-X-ENDLIST
        """)
        #expect(playlist.targetDuration == 4 && playlist.mediaSequence == 17 && !playlist.isLive)
        #expect(playlist.segments.map(\.sequence) == [17, 18, 19])
        #expect(playlist.segments.map(\.discontinuitySequence) == [3, 3, 4])
        #expect(playlist.segments.map(\.discontinuity) == [false, false, true])
        #expect(playlist.segments.map(\.duration) == [3.989, 4.011, 2.5])
        #expect(playlist.segments.map(\.title) == ["First", nil, nil])
        #expect(playlist.segments[0].byteRange == HLSByteRange(length: 1000, offset: 720))
        #expect(playlist.segments[1].byteRange == HLSByteRange(length: 1200, offset: 1720))   // after the previous range
        #expect(playlist.segments[2].byteRange == nil)
        #expect(playlist.segments[2].url.absoluteString == "https://radio.example/other/seg3.ts")
        #expect(playlist.segments[0].map == HLSMap(url: URL(string: "https://radio.example/live/init.mp4")!, byteRange: HLSByteRange(length: 720, offset: 0)))
        #expect(playlist.segments[0].key?.method == .aes128 && playlist.segments[0].key?.iv == Array(0...15))
        #expect(playlist.segments[1].key == playlist.segments[0].key)
        #expect(playlist.segments[2].key == nil)
        #expect(playlist.segments[0].programDateTime == "2026-11-24T10:00:00.000Z" && playlist.segments[1].programDateTime == nil)
        #expect(abs(playlist.duration - 10.5) < 1e-9)
    }

    @Test func aLivePlaylistHasNoEndList() throws {
        let playlist = try media("#EXTM3U\r\n#EXT-X-TARGETDURATION:2\r\n#EXT-X-MEDIA-SEQUENCE:120\r\n#EXTINF:2.0,\r\nlive120.ts\r\n#EXTINF:2.0,\r\nlive121.ts\r\n")
        #expect(playlist.isLive)
        #expect(playlist.segments.map(\.url.lastPathComponent) == ["live120.ts", "live121.ts"])
        #expect(playlist.segments.map(\.sequence) == [120, 121])
    }

    @Test(arguments: [
        ("<html>not found</html>", 1, "does not start with #EXTM3U"),
        ("#EXTM3U\n#EXTINF:2,\n", 0, "without EXT-X-TARGETDURATION"),
        ("#EXTM3U\n#EXT-X-TARGETDURATION:2\nseg.ts\n", 3, "not preceded by EXTINF"),
        ("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:soon,\nseg.ts\n", 3, "does not start with a duration"),
        ("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-KEY:METHOD=AES-128\n", 3, "has no URI"),
        ("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\",IV=0x12\n", 3, "16 hexadecimal bytes"),
        ("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\n#EXT-X-BYTERANGE:100\nseg.ts\n", 4, "has no offset"),
        ("#EXTM3U\n#EXT-X-STREAM-INF:CODECS=\"mp4a.40.2\"\nlow.m3u8\n", 2, "no decimal BANDWIDTH"),
        ("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1000\n", 2, "not followed by a URI"),
        ("#EXTM3U\n#EXT-X-MEDIA:TYPE=AUDIO,NAME=\"x\n", 2, "unterminated quoted string"),
    ])
    func malformedPlaylistsNameTheLine(text: String, line: Int, message: String) {
        #expect {
            try HLSPlaylist.parse(text, url: base)
        } throws: { error in
            guard let error = error as? HLSPlaylistError else { return false }
            return error.line == line && error.message.contains(message)
        }
    }

    /// What ffmpeg's HLS muxer writes for a fixture: as many segments as it wrote files, and their
    /// durations add up to the file's.
    @Test func ffmpegsPlaylistsParse() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hls-playlist-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        for type in ["mpegts", "fmp4"] {
            let playlistURL = directory.appendingPathComponent("\(type).m3u8")
            let result = try await runTool("/usr/bin/ffmpeg", ["-nostdin", "-loglevel", "error", "-i", TestPaths.fixture("demo-melody.m4a"),
                "-c:a", "copy", "-f", "hls", "-hls_time", "1", "-hls_playlist_type", "vod", "-hls_segment_type", type,
                "-hls_segment_filename", directory.appendingPathComponent("\(type)-%03d.\(type == "fmp4" ? "m4s" : "ts")").path,
                "-hls_fmp4_init_filename", "\(type)-init.mp4", playlistURL.path])
            try #require(result.status == 0, "ffmpeg -f hls (\(type)) failed")
            let text = try String(contentsOf: playlistURL, encoding: .utf8)
            guard case .media(let playlist) = try HLSPlaylist.parse(text, url: playlistURL) else { Issue.record("not a media playlist"); continue }
            let written = try FileManager.default.contentsOfDirectory(atPath: directory.path)
                .filter { $0.hasPrefix("\(type)-") && ($0.hasSuffix(".ts") || $0.hasSuffix(".m4s")) }
            #expect(playlist.segments.count == written.count && written.count >= 3)
            #expect(playlist.segments.allSatisfy { FileManager.default.fileExists(atPath: $0.url.path) })
            #expect(playlist.playlistType == "VOD" && !playlist.isLive)
            #expect(abs(playlist.duration - 4.0) < 0.1, "\(playlist.duration) s")   // demo-melody.m4a is 4 s
            #expect(playlist.segments.allSatisfy { ($0.map != nil) == (type == "fmp4") })
        }
    }

    /// What the fuzz target found: numbering tags after the first segment, and a signed BANDWIDTH.
    @Test func misplacedSequenceTagsAndSignedBandwidthAreErrors() throws {
        let url = try #require(URL(string: "http://example.com/a/index.m3u8"))
        let late = "#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXTINF:4,\ns0.ts\n#EXT-X-MEDIA-SEQUENCE:42\n#EXTINF:4,\ns1.ts\n"
        #expect(throws: HLSPlaylistError.self) { try HLSPlaylist.parse(late, url: url) }
        do { _ = try HLSPlaylist.parse(late, url: url) } catch let error as HLSPlaylistError {
            #expect(error.line == 5 && error.message.contains("after the first segment"), "\(error)")
        }
        let signed = "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=-30000\nlow.m3u8\n"
        #expect(throws: HLSPlaylistError.self) { try HLSPlaylist.parse(signed, url: url) }
    }
}
