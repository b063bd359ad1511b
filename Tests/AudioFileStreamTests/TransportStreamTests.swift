import Foundation
import Testing
@testable import AudioFileStream
import BufferQueue
import TestSupport

/// MPEG-2 transport streams (HLS segments): what ffmpeg's muxer writes from the project's
/// fixtures with `-c:a copy` must give back exactly the packets of the source, in any chunking;
/// damage (lost packets, lost sync, a bad PAT) is reported and what survives is kept.
@Suite struct TransportStreamTests {
    /// `ffmpeg -c:a copy` of a fixture into a container; nil (with a message) without ffmpeg.
    static func remux(_ fixture: String, format: String, extra: [String] = []) async throws -> [UInt8]? {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/ffmpeg") else {
            print("ffmpeg is not installed: skipped")
            return nil
        }
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("ts-\(UUID().uuidString).\(format)")
        defer { try? FileManager.default.removeItem(at: out) }
        let result = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-i", TestPaths.fixture(fixture), "-vn", "-c:a", "copy"] + extra
                                        + ["-f", format, out.path])
        #expect(result.status == 0, "ffmpeg exited with \(result.status)")
        return try load(out)
    }

    /// The transport packets of `bytes` as (PID, packet) pairs.
    static func packets(_ bytes: [UInt8]) -> [(pid: Int, bytes: ArraySlice<UInt8>)] {
        stride(from: 0, to: bytes.count - 187, by: 188).map { at in
            (Int(bytes[at + 1] & 0x1F) << 8 | Int(bytes[at + 2]), bytes[at..<(at + 188)])
        }
    }

    @Test func adtsInTransportStreamGivesTheSourcePackets() async throws {
        guard let ts = try await Self.remux("demo-melody.m4a", format: "mpegts"),
              let adts = try await Self.remux("demo-melody.m4a", format: "adts") else { return }
        let expected = RealWorldVariantTests.frames(adts, adts: true).map { Array($0.dropFirst(7)) }
        #expect(expected.count == 174)
        for chunks in [[ts.count + 1], [1], [7, 300, 2], [188]] {
            let result = trace(ts, chunks: chunks)
            #expect(result.error == nil, "chunks \(chunks): \(result.error ?? "")")
            #expect(result.warnings.isEmpty, "chunks \(chunks): \(result.warnings)")
            let same = result.packets.map(\.bytes) == expected
            #expect(same, "chunks \(chunks): \(result.packets.count) packets, not the source's")
            #expect(result.items.contains(.property("fileFormat=Optional(mpegTransportStream)")))
            #expect(result.items.contains(.property("packets=Optional(174)")))
        }
    }

    @Test func mp3InTransportStreamGivesTheSourceFrames() async throws {
        guard let ts = try await Self.remux("lame-cbr128-44k-stereo.mp3", format: "mpegts") else { return }
        let mp3 = try RealWorldVariantTests.fixture("lame-cbr128-44k-stereo.mp3")
        // The source's frames after its 417-byte Info frame (ffmpeg does not copy the tag frame).
        let frames = RealWorldVariantTests.frames(Array(mp3.dropFirst(417)), adts: false)
        let result = trace(ts, chunks: [1000])
        #expect(result.error == nil)
        #expect(result.packets.count == 44)
        let same = result.packets.map(\.bytes) == Array(frames.prefix(44))
        #expect(same, "the packets are not the source's frames")
    }

    @Test func theDemuxerReportsEachPESWithItsTimestamp() async throws {
        guard let ts = try await Self.remux("demo-melody.m4a", format: "mpegts") else { return }
        let demuxer = MPEGTransportStreamDemuxer()
        var starts: [(Int64, Int64?)] = [], audioBytes = 0, programs = 0
        try demuxer.push(ts) { event in
            switch event {
            case .program(let audio, _):
                programs += 1
                #expect(audio.streamType == 0x0F)
            case .pesStart(let offset, let pts): starts.append((offset, pts))
            case .audio(let bytes): audioBytes += bytes.count
            case .discontinuity, .metadata: Issue.record("unexpected \(event)")
            }
        }
        try demuxer.finish { _ in }
        #expect(programs == 1)
        #expect(demuxer.audioFileType == .adts)
        #expect(Int64(audioBytes) == demuxer.esOffset)
        // ffmpeg starts at 1.4 s (126 000 at 90 kHz) and advances 1024/44100 s per frame; every
        // PES starts at a frame, so each timestamp is the start's frame count scaled.
        #expect(starts.first?.0 == 0)
        #expect(starts.first?.1 == 126_000)
        let adts = try #require(try await Self.remux("demo-melody.m4a", format: "adts"))
        var frameStarts: [Int64: Int] = [:], offset = 0
        for (index, frame) in RealWorldVariantTests.frames(adts, adts: true).enumerated() {
            frameStarts[Int64(offset)] = index
            offset += frame.count
        }
        for (esOffset, pts) in starts {
            let frame = try #require(frameStarts[esOffset], "PES at \(esOffset) does not start a frame")
            let expected = 126_000 + (Double(frame) * 1024 * 90_000 / 44_100).rounded(.down)
            #expect(abs(Double(pts ?? 0) - expected) <= 1, "PES at frame \(frame): pts \(pts ?? -1)")
        }
    }

    @Test func aLostPacketIsReportedAndTheRestIsKept() async throws {
        guard let ts = try await Self.remux("demo-melody.m4a", format: "mpegts"),
              let adts = try await Self.remux("demo-melody.m4a", format: "adts") else { return }
        let expected = RealWorldVariantTests.frames(adts, adts: true).map { Array($0.dropFirst(7)) }
        let packets = Self.packets(ts)
        let audioPID = 0x100
        let audioIndices = packets.indices.filter { packets[$0].pid == audioPID }
        // Drop one audio packet in the middle that does not start a PES.
        let victim = try #require(audioIndices.dropFirst(100).first { packets[$0].bytes[packets[$0].bytes.startIndex + 1] & 0x40 == 0 })
        let damaged = packets.enumerated().filter { $0.offset != victim }.flatMap { Array($0.element.bytes) }
        let result = trace(damaged, chunks: [4096])
        #expect(result.error == nil)
        #expect(result.warnings.contains { $0.contains("continuity counter") && $0.contains("1 packet(s) lost") }, "\(result.warnings)")
        // Where the lost payload lay in the elementary stream: the audio payloads before it
        // (PES headers left out), then its own length.
        func payload(_ packet: ArraySlice<UInt8>) -> Int {
            let p = Array(packet)
            var start = p[3] & 0x20 != 0 ? 5 + Int(p[4]) : 4
            if p[1] & 0x40 != 0 { start += 9 + Int(p[start + 8]) }
            return 188 - start
        }
        let lostStart = audioIndices.filter { $0 < victim }.reduce(0) { $0 + payload(packets[$1].bytes) }
        let lostEnd = lostStart + payload(packets[victim].bytes)
        // Exactly the frames those bytes belong to are dropped; every other frame is kept, in order.
        var offset = 0, keep: [[UInt8]] = []
        for frame in RealWorldVariantTests.frames(adts, adts: true) {
            if offset + frame.count <= lostStart || offset >= lostEnd { keep.append(Array(frame.dropFirst(7))) }
            offset += frame.count
        }
        #expect(keep.count < expected.count)
        let got = result.packets.map(\.bytes)
        let same = got == keep
        #expect(same, "\(got.count) packets kept, \(keep.count) expected")
    }

    @Test func junkBetweenPacketsIsSkippedWithAWarning() async throws {
        guard let ts = try await Self.remux("demo-melody.m4a", format: "mpegts") else { return }
        let cut = 188 * 40
        let damaged = Array(ts[..<cut]) + [UInt8](repeating: 0x11, count: 300) + Array(ts[cut...])
        let clean = trace(ts, chunks: [4096])
        for chunks in [[4096], [1], [100]] {
            let result = trace(damaged, chunks: chunks)
            #expect(result.error == nil)
            #expect(result.warnings.contains { $0.contains("lost sync: skipped 300 bytes") }, "\(result.warnings)")
            let same = result.packets.map(\.bytes) == clean.packets.map(\.bytes)
            #expect(same, "chunks \(chunks): \(result.packets.count) packets, not the clean stream's \(clean.packets.count)")
        }
    }

    @Test func aTransportStreamWithoutAudioSaysWhatItHolds() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/ffmpeg") else { return }
        let directory = FileManager.default.temporaryDirectory
        let video = directory.appendingPathComponent("ts-video-\(UUID().uuidString).ts")
        let ac3 = directory.appendingPathComponent("ts-ac3-\(UUID().uuidString).ts")
        defer { for url in [video, ac3] { try? FileManager.default.removeItem(at: url) } }
        _ = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=d=0.2:s=64x48", "-c:v", "mpeg2video",
                                                  "-f", "mpegts", video.path])
        _ = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=d=0.3", "-c:a", "ac3", "-f", "mpegts", ac3.path])
        let onlyVideo = trace(try load(video), chunks: [1000])
        #expect(onlyVideo.error?.contains("no MPEG audio or ADTS AAC stream (it has: 0x2 MPEG video)") == true, "\(onlyVideo.error ?? "")")
        #expect(onlyVideo.packets.isEmpty)
        let onlyAC3 = trace(try load(ac3), chunks: [1000])
        #expect(onlyAC3.error?.contains("0x81 AC-3 (not supported)") == true, "\(onlyAC3.error ?? "")")
    }

    @Test func aDamagedProgramTableIsAnErrorNamingIt() async throws {
        guard let ts = try await Self.remux("demo-melody.m4a", format: "mpegts") else { return }
        // Flip a bit inside every PAT section: each fails its CRC, so no program is ever found.
        var damaged = ts
        for at in stride(from: 0, to: ts.count - 187, by: 188) where Int(ts[at + 1] & 0x1F) << 8 | Int(ts[at + 2]) == 0 {
            damaged[at + 5 + 4] ^= 0x01
        }
        let result = trace(damaged, chunks: [4096])
        #expect(result.error?.contains("no program association table (PAT)") == true, "\(result.error ?? "")")
        #expect(result.warnings.contains { $0.contains("fails its CRC-32") })
        #expect(result.packets.isEmpty)
    }

    @Test func theCRCIsMPEG2s() {
        // A PAT that ffmpeg writes (program 1 on PID 0x1000), CRC included: the check gives 0.
        let pat: [UInt8] = [0x00, 0xB0, 0x0D, 0x00, 0x01, 0xC1, 0x00, 0x00, 0x00, 0x01, 0xF0, 0x00, 0x2A, 0xB1, 0x04, 0xB2]
        #expect(MPEGCRC32.checksum(pat) == 0)
        #expect(MPEGCRC32.checksum(Array(pat.dropLast(4))) == 0x2AB1_04B2)
    }
}
