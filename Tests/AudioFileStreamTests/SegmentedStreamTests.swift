import Foundation
import Testing
@testable import AudioFileStream
import BufferQueue
import TestSupport

/// The segmented mode HLS uses: one stream over a run of segments, each segment's first
/// timestamp and its timed metadata reported as events before its packets.
@Suite struct SegmentedStreamTests {
    /// Top-level boxes of an MP4: (type, bytes).
    static func boxes(_ bytes: [UInt8]) -> [(String, [UInt8])] {
        var out: [(String, [UInt8])] = []
        var i = 0
        while i + 8 <= bytes.count {
            let size = Int(bytes[i..<(i + 4)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
            guard size >= 8, i + size <= bytes.count else { break }
            out.append((String(decoding: bytes[(i + 4)..<(i + 8)], as: UTF8.self), Array(bytes[i..<(i + size)])))
            i += size
        }
        return out
    }

    /// An ID3v2.4 tag with a title and, optionally, the HLS packed-audio timestamp.
    static func id3(title: String, pts: UInt64? = nil) -> [UInt8] {
        var frames: [UInt8] = []
        let text = [3] + Array(title.utf8)   // UTF-8
        frames += Array("TIT2".utf8) + [0, 0, 0, UInt8(text.count), 0, 0] + text
        if let pts {
            let body = Array("com.apple.streaming.transportStreamTimestamp".utf8) + [0] + (0..<8).map { UInt8(truncatingIfNeeded: pts >> (56 - 8 * UInt64($0))) }
            frames += Array("PRIV".utf8) + [0, 0, 0, UInt8(body.count), 0, 0] + body
        }
        return Array("ID3".utf8) + [4, 0, 0, 0, 0, 0, UInt8(frames.count)] + frames
    }

    /// An `emsg` (version 1) carrying `message` in the AOM ID3 scheme.
    static func emsg(_ message: [UInt8]) -> [UInt8] {
        var body: [UInt8] = [1, 0, 0, 0]
        body += [0, 0, 0xBB, 0x80] + [UInt8](repeating: 0, count: 8) + [0, 0, 0, 0] + [0, 0, 0, 1]   // timescale, time, duration, id
        body += Array("https://aomedia.org/emsg/ID3".utf8) + [0] + [0]                              // scheme, value ""
        body += message
        let size = UInt32(body.count + 8)
        return (0..<4).map { UInt8(truncatingIfNeeded: size >> (24 - 8 * UInt32($0))) } + Array("emsg".utf8) + body
    }

    /// Parses segments in segmented mode; the events in order.
    static func run(_ segments: [[UInt8]], initSection: [UInt8]? = nil) throws -> [AudioFileStreamEvent] {
        let stream = AudioFileStream()
        var events: [AudioFileStreamEvent] = []
        for (index, segment) in segments.enumerated() {
            events += try stream.beginSegment(initializationSection: index == 0 ? initSection : nil)
            var at = 0
            while at < segment.count {   // in pieces, as they arrive
                let end = min(at + 1000, segment.count)
                events += try stream.parse(segment[at..<end])
                at = end
            }
        }
        events += try stream.finish()
        return events
    }

    static func timestamps(_ events: [AudioFileStreamEvent]) -> [AudioStreamTimestamp] {
        events.compactMap { if case .segmentTimestamp(let t) = $0 { return t } else { return nil } }
    }

    static func titles(_ events: [AudioFileStreamEvent]) -> [String] {
        events.compactMap { if case .timedMetadata(let m) = $0 { return m.title } else { return nil } }
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/ffmpeg"), "ffmpeg is missing"))
    func fragmentsGiveTheirTfdtAndEmsgID3() async throws {
        let path = NSTemporaryDirectory() + "frag-\(UUID().uuidString).mp4"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let made = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=f=440:d=2:r=48000", "-c:a", "aac",
                                                         "-f", "mp4", "-movflags", "frag_keyframe+empty_moov+default_base_moof",
                                                         "-frag_duration", "500000", path])
        #expect(made.status == 0)
        let all = Self.boxes(Array(try Data(contentsOf: URL(fileURLWithPath: path))))
        let initSection = all.prefix { $0.0 != "moof" }.flatMap(\.1)
        let fragments = all.drop { $0.0 != "moof" }
        // Each segment: a moof and its mdat; the second carries an emsg with an ID3 title first.
        var segments: [[UInt8]] = []
        var current: [UInt8] = []
        for (type, bytes) in fragments {
            if type == "moof", !current.isEmpty { segments.append(current); current = [] }
            current += bytes
        }
        segments.append(current)
        try #require(segments.count >= 3, "ffmpeg made \(segments.count) fragments")
        segments[1] = Self.emsg(Self.id3(title: "Chapter 2")) + segments[1]
        let events = try Self.run(segments, initSection: initSection)
        let times = Self.timestamps(events)
        let ticks: [Int64] = times.map(\.ticks)
        let allTfdt = times.allSatisfy { $0.source == .tfdt && $0.perSecond == 48000 }
        #expect(times.count == segments.count && allTfdt)
        let rising = ticks == ticks.sorted() && Set(ticks).count == ticks.count
        #expect(ticks.first == 0 && rising, "\(ticks)")
        #expect(Self.titles(events) == ["Chapter 2"])
        // The timestamp of each segment comes before its packets, the metadata before the second's.
        let order = events.compactMap { event -> String? in
            switch event {
            case .segmentTimestamp: return "t"
            case .timedMetadata: return "m"
            case .packets: return "p"
            default: return nil
            }
        }
        let metadataAt = try #require(order.firstIndex(of: "m"))
        let timestampsBefore = order[..<metadataAt].filter { $0 == "t" }.count
        #expect(order.first == "t" && timestampsBefore == 1, "\(order)")
    }

    @Test func packedAudioGivesItsID3TimestampAndTitle() throws {
        // Three ADTS frames (AAC-LC, 44.1 kHz, stereo, 16-byte payloads) a segment.
        let frame: [UInt8] = [0xFF, 0xF1, 0x50, 0x80, 0x02, 0xFF, 0xFC] + [UInt8](repeating: 0x21, count: 16)
        let second = UInt64(900_000 + 3 * 1024 * 90_000 / 44_100)
        let segments: [[UInt8]] = [Self.id3(title: "One", pts: 900_000) + frame + frame + frame,
                                   Self.id3(title: "Two", pts: second) + frame + frame + frame]
        let events = try Self.run(segments)
        let times = Self.timestamps(events)
        let expected: [Int64] = [900_000, 900_000 + 3 * 1024 * 90_000 / 44_100]
        #expect(times.map(\.ticks) == expected)
        #expect(times.allSatisfy { $0.source == .id3 && $0.perSecond == 90_000 })
        #expect(Self.titles(events) == ["One", "Two"])
        let packets = events.reduce(0) { if case .packets(let p) = $1 { return $0 + p.descriptions.count } else { return $0 } }
        #expect(packets == 6)
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/ffmpeg"), "ffmpeg is missing"))
    func transportStreamSegmentsGiveTheirFirstPTS() async throws {
        let path = NSTemporaryDirectory() + "seg-\(UUID().uuidString).ts"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let made = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=f=440:d=2", "-c:a", "aac", "-f", "mpegts", path])
        #expect(made.status == 0)
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        // Cut in two at a packet boundary: the second segment's first PES starts later.
        let half = bytes.count / 188 / 2 * 188
        let events = try Self.run([Array(bytes[..<half]), Array(bytes[half...])])
        let times = Self.timestamps(events)
        #expect(times.count == 2 && times.allSatisfy { $0.source == .pesPTS && $0.perSecond == 90_000 })
        #expect(times.count == 2 && times[1].ticks > times[0].ticks, "\(times)")
    }
}
