import Foundation
import Testing
@testable import AudioFileStream
import BufferQueue
import TestSupport

/// Every file the tests can reach: the project's fixtures and, when present, the shared ones.
let allFixtureURLs: [URL] = Paths.projectFiles().map { Paths.projectFixtures.appendingPathComponent($0) }
    + Paths.sharedFiles().compactMap { Paths.shared($0) }

@Suite struct DripFeedTests {
    /// The same properties, packets and errors whether the bytes come whole, one at a time, or in
    /// odd chunks (swift-nio's ByteToMessageDecoder verifier idea).
    @Test(arguments: allFixtureURLs)
    func chunkingDoesNotChangeTheResult(_ url: URL) async throws {
        let bytes = try load(url)
        let (whole, single, odd) = try await offPool {
            (trace(bytes, chunks: [bytes.count + 1]), trace(bytes, chunks: [1]), trace(bytes, chunks: [7, 1, 4093, 2, 511, 3]))
        }
        #expect(single == whole, "\(url.lastPathComponent): one byte at a time differs: \(single) vs \(whole)")
        #expect(odd == whole, "\(url.lastPathComponent): odd chunks differ: \(odd) vs \(whole)")
        #expect(whole.warnings == single.warnings)
    }
}

@Suite struct SeekTests {
    /// Seeking to a packet gives its exact offset in tables, and parsing from there yields that packet.
    @Test(arguments: ["ffmpeg-aac-44k-moov-first.m4a", "lame-vbr-v2-44k-stereo.mp3", "pcm-s16-22k-mono.wav", "pcm-s16be-8k-mono.caf",
                      "ffmpeg-aac-48k.aac", "pcm-s16be-8k-mono.aiff"])
    func seekToPacketIsExactOnceIndexed(_ name: String) throws {
        let bytes = try load(Paths.projectFixtures.appendingPathComponent(name))
        let whole = trace(bytes, chunks: [bytes.count + 1])
        let stream = AudioFileStream()
        _ = try stream.parse(bytes)
        _ = try stream.finish()   // the last MPEG/ADTS frame is emitted once nothing can follow it
        // ADTS packets are the frames' payloads: the frame (where bytes must come from) starts 7 bytes earlier.
        let headerBytes: Int64 = name.hasSuffix(".aac") ? 7 : 0
        for target in [whole.packets.count / 3, 5, whole.packets.count - 1] {
            let expected = whole.packets[target]
            let result = try stream.seek(toPacket: Int64(target))
            #expect(result.byteOffset == expected.offset - headerBytes)
            #expect(!result.isEstimated)
            let events = try stream.parse(bytes[Int(result.byteOffset)...], discontinuity: true) + stream.finish()
            guard case .packets(let packets)? = events.first(where: { if case .packets = $0 { return true } else { return false } }) else {
                Issue.record("no packets after seeking to \(target)"); continue
            }
            #expect(packets.firstPacketIndex == Int64(target))
            let size = packets.descriptions.first?.dataByteSize ?? stream.dataFormat!.bytesPerPacket
            #expect(Array(packets.data[0..<size]) == expected.bytes)
        }
    }

    /// Seeking ahead of what was parsed in a CBR MP3: an estimate that lands on a real frame.
    @Test func mp3EstimatedSeekLandsOnAFrame() throws {
        let bytes = try load(Paths.projectFixtures.appendingPathComponent("lame-cbr128-44k-stereo.mp3"))
        let whole = trace(bytes, chunks: [bytes.count + 1])
        let stream = AudioFileStream()
        _ = try stream.parse(bytes[..<2000])
        let result = try stream.seek(toPacket: 30)
        #expect(result.isEstimated)
        let events = try stream.parse(bytes[Int(result.byteOffset)...], discontinuity: true)
        guard case .packets(let packets)? = events.first(where: { if case .packets = $0 { return true } else { return false } }) else {
            Issue.record("no packets after the estimated seek"); return
        }
        let landed = try #require(whole.packets.firstIndex { $0.offset == packets.fileOffsets[0] })
        #expect(abs(landed - 30) <= 1)
        let size = packets.descriptions[0].dataByteSize
        #expect(Array(packets.data[0..<size]) == whole.packets[landed].bytes)
    }

    @Test func byteOffsetsWithoutMovingTheStream() throws {
        let bytes = try load(Paths.projectFixtures.appendingPathComponent("lame-vbr-v2-44k-stereo.mp3"))
        let whole = trace(bytes, chunks: [bytes.count + 1])
        let stream = AudioFileStream()
        _ = try stream.parse(bytes[..<3000])
        // Parsed packets are exact; later ones come from the Xing TOC, estimated, within the file.
        let early = try #require(stream.byteOffset(forPacket: 1))
        #expect(early == AudioFileStreamSeekResult(byteOffset: whole.packets[1].offset, isEstimated: false))
        let late = try #require(stream.byteOffset(forPacket: 40))
        #expect(late.isEstimated)
        #expect(abs(late.byteOffset - whole.packets[40].offset) < 2 * 418)
        #expect(stream.nextByteOffset == 3000)
    }

    @Test func ffmpegAACDeclaresItsPreRoll() throws {
        let stream = AudioFileStream()
        _ = try stream.parse(try load(Paths.projectFixtures.appendingPathComponent("ffmpeg-aac-44k-moov-first.m4a")))
        #expect(stream.packetRollDistance == -1)
    }

    @Test func translationsBetweenFramesPacketsAndBytes() throws {
        let stream = AudioFileStream()
        _ = try stream.parse(try load(Paths.projectFixtures.appendingPathComponent("ffmpeg-aac-44k-moov-first.m4a")))
        #expect(stream.frame(forPacket: 10) == 10240)
        #expect(stream.packet(forFrame: 10240 + 17)?.packet == 10)
        #expect(stream.packet(forFrame: 10240 + 17)?.frameOffset == 17)
        #expect(stream.byteOffset(forPacket: 0)?.byteOffset == stream.dataOffset)
        let mp3 = AudioFileStream()
        _ = try mp3.parse(try load(Paths.projectFixtures.appendingPathComponent("lame-cbr64-22k-mono-mpeg2.mp3")))
        #expect(mp3.frame(forPacket: 3) == Int64(3 * 576))
        #expect(mp3.packet(forFrame: 1105)?.packet == 1)
        #expect(mp3.packet(forFrame: 1105)?.frameOffset == 529)
    }
}

@Suite struct MP4IndexPlacementTests {
    @Test func moovAfterMdatNeedsASeekableSource() throws {
        let bytes = try load(Paths.projectFixtures.appendingPathComponent("ffmpeg-aac-44k-moov-last.m4a"))
        let streaming = trace(bytes, chunks: [1000], seekable: false)
        #expect(streaming.error?.contains("follows the media data") == true)
        #expect(streaming.packets.isEmpty)
        let seekable = trace(bytes, chunks: [1000], seekable: true)
        #expect(seekable.error == nil)
        #expect(seekable.items.filter { if case .seek = $0 { return true } else { return false } }.count == 2)
        // Same packets as the faststart file with the same audio.
        let front = trace(try load(Paths.projectFixtures.appendingPathComponent("ffmpeg-aac-44k-moov-first.m4a")), chunks: [1000])
        #expect(seekable.packets.map(\.bytes) == front.packets.map(\.bytes))
        #expect(seekable.packets.count == 49)
    }
}

@Suite struct HostileInputTests {
    func error(_ bytes: [UInt8], hint: AudioFileType? = nil) -> AudioFileStreamError? {
        let stream = AudioFileStream(fileTypeHint: hint)
        do { _ = try stream.parse(bytes); _ = try stream.finish(); return nil } catch let e as AudioFileStreamError { return e } catch { return nil }
    }

    @Test func absurdLengthsAreCappedNotAllocated() {
        // A moov claiming 3 GiB, a CAF pakt claiming 2^40 packets, an ID3 tag claiming 256 MiB.
        var moov: [UInt8] = [0, 0, 0, 16] + Array("ftypM4A ".utf8) + [0, 0, 0, 0]
        moov += [0xC0, 0, 0, 0] + Array("moov".utf8)
        #expect(error(moov)?.code == .tooLarge)
        var caf: [UInt8] = Array("caff".utf8) + [0, 1, 0, 0]
        caf += Array("desc".utf8) + [0, 0, 0, 0, 0, 0, 0, 32]
        caf += withUnsafeBytes(of: Double(44100).bitPattern.bigEndian, Array.init) + Array("aac ".utf8) + [0, 0, 0, 0] + [0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 2, 0, 0, 0, 0]
        caf += Array("pakt".utf8) + [0, 0, 0, 0, 0, 0, 0, 40] + [0, 0, 1, 0, 0, 0, 0, 0] + [UInt8](repeating: 0, count: 16) + [UInt8](repeating: 1, count: 16)
        #expect(error(caf)?.code == .invalidData)
        let id3: [UInt8] = Array("ID3".utf8) + [4, 0, 0, 0x7F, 0x7F, 0x7F, 0x7F] + [UInt8](repeating: 0, count: 100)
        #expect(error(id3)?.code == .truncated)
    }

    @Test func reservedADTSSampleRateIsAnError() {
        let header: [UInt8] = [0xFF, 0xF1, 0x7C, 0x80, 0x03, 0x7F, 0xFC] + [UInt8](repeating: 0, count: 20)
        let e = error(header + header)
        #expect(e?.code == .invalidData)
        #expect(e?.container == .adts)
    }

    /// Random truncations, byte flips, zeroed ranges and duplicated chunks over every fixture must
    /// end with a result or an error, never a crash or a hang.
    @Test(.timeLimit(.minutes(3)))
    func mutationsEndWithAResultOrAnError() async throws {
        // Reaching here at all means no mutation crashed or hung (the time limit guards the rest).
        let (parsed, failed, messagesNameAnOffset, lost) = try await offPool { try Self.mutate() }
        // What was parsed before a truncation is kept, unchanged.
        #expect(lost.isEmpty, "\(lost.prefix(5))")
        #expect(messagesNameAnOffset)
        // The damage is real: many variants are refused, and some still parse (a flip in audio data).
        #expect(failed > 100)
        #expect(parsed > 100)
    }

    static func mutate() throws -> (Int, Int, Bool, [String]) {
        var lost: [String] = []
        var rng = SplitMix(seed: 0x5EED)
        var outcomes = (parsed: 0, failed: 0)
        var allNameAnOffset = true
        for url in allFixtureURLs {
            let original = try load(url)
            guard !original.isEmpty else { continue }
            let wholeTrace = trace(original, chunks: [4096])
            let whole = packets(wholeTrace)
            // An MP4 whose index follows the media has nothing decodable once the index is cut off.
            let indexAtEnd = wholeTrace.items.contains { if case .seek = $0 { return true } else { return false } }
            for round in 0..<25 {
                var bytes = original
                switch round % 5 {
                case 0:
                    // Truncation: every packet produced is the original's, and all but the last
                    // one or two complete packets before the cut are kept (when the index, if
                    // any, comes first).
                    let cut = Int(rng.next() % UInt64(bytes.count))
                    bytes = Array(bytes.prefix(cut))
                    let kept = packets(trace(bytes, chunks: [Int(rng.next() % 5000) + 1]))
                    let wrong = kept.filter { whole[$0.key] != $0.value }.count
                    let before = whole.values.filter { $0.offset + Int64($0.bytes.count) <= Int64(cut) }.count
                    if wrong > 0 || (!indexAtEnd && kept.count + 2 < before) {
                        lost.append("\(url.lastPathComponent) cut at \(cut): \(wrong) packets differ, \(kept.count) kept of \(before) complete")
                    }
                case 4:
                    // Two chunks swapped.
                    let length = Int(rng.next() % 1024) + 1
                    guard bytes.count > 2 * length else { continue }
                    let a = Int(rng.next() % UInt64(bytes.count - 2 * length)), b = a + length + Int(rng.next() % UInt64(bytes.count - a - 2 * length + 1))
                    let first = Array(bytes[a..<(a + length)])
                    bytes.replaceSubrange(a..<(a + length), with: bytes[b..<(b + length)])
                    bytes.replaceSubrange(b..<(b + length), with: first)
                case 1: for _ in 0..<8 { bytes[Int(rng.next() % UInt64(bytes.count))] ^= UInt8(truncatingIfNeeded: rng.next() | 1) }
                case 2:
                    let start = Int(rng.next() % UInt64(bytes.count)), length = Int(rng.next() % 512)
                    for i in start..<min(start + length, bytes.count) { bytes[i] = 0 }
                default:
                    let start = Int(rng.next() % UInt64(bytes.count)), length = min(Int(rng.next() % 2048), bytes.count - start)
                    bytes.insert(contentsOf: bytes[start..<(start + length)], at: start)
                }
                let result = trace(bytes, chunks: [Int(rng.next() % 5000) + 1])
                if let error = result.error {
                    allNameAnOffset = allNameAnOffset && error.contains("at byte")
                    outcomes.failed += 1
                } else {
                    outcomes.parsed += 1
                }
            }
        }
        return (outcomes.parsed, outcomes.failed, allNameAnOffset, lost)
    }
}

/// The packets of a trace by index: offset and bytes.
func packets(_ trace: Trace) -> [Int64: PacketRecord] {
    var out: [Int64: PacketRecord] = [:]
    for item in trace.items {
        if case .packet(let index, let offset, _, let bytes) = item { out[index] = PacketRecord(offset: offset, bytes: bytes) }
    }
    return out
}

struct PacketRecord: Equatable {
    var offset: Int64
    var bytes: [UInt8]
}

@Suite struct HeaderUnitTests {
    @Test func audioSpecificConfigReadings() throws {
        let v2bc = try #require(AudioSpecificConfig([0x13, 0x88, 0x56, 0xE5, 0xA5, 0x48, 0x80]))
        #expect(v2bc.sampleRate == 22050 && v2bc.channelConfiguration == 1)
        #expect(v2bc.sbrPresent == true && v2bc.psPresent == true && v2bc.extensionSampleRate == 44100)
        #expect(v2bc.signalling == "explicit backward-compatible")
        let noSBR = try #require(AudioSpecificConfig([0x13, 0x88, 0x56, 0xE5, 0x00]))
        #expect(noSBR.sbrPresent == false)
        #expect(noSBR.formatList.map(\.formatID) == [.aacLC])
        let hier = try #require(AudioSpecificConfig([0xEB, 0x8A, 0x08, 0x00]))
        #expect(hier.signalling == "explicit hierarchical" && hier.psPresent == true && hier.objectType == 2)
        let lc = try #require(AudioSpecificConfig([0x12, 0x10]))
        #expect(lc.sampleRate == 44100 && lc.channelConfiguration == 2 && lc.sbrPresent == nil)
        #expect(AudioSpecificConfig.bytes(objectType: 2, rateIndex: 4, channels: 2) == [0x12, 0x10])
    }

    @Test func id3VersionsUnsynchronisationAndITunSMPB() {
        func frame23(_ id: String, _ body: [UInt8]) -> [UInt8] {
            Array(id.utf8) + withUnsafeBytes(of: UInt32(body.count).bigEndian, Array.init) + [0, 0] + body
        }
        let smpb = Array(" 00000000 00000210 00000A2C 000000000000AC44".utf8)
        let body = frame23("TIT2", [0] + Array("T\u{FF}tle".utf8)) + frame23("TXXX", [0] + Array("iTunSMPB".utf8) + [0] + smpb)
        // v2.3 with the whole tag unsynchronised: every 0xFF is followed by an inserted 0x00.
        var unsynced: [UInt8] = []
        for byte in body { unsynced.append(byte); if byte == 0xFF { unsynced.append(0) } }
        let size = unsynced.count
        let header: [UInt8] = Array("ID3".utf8) + [3, 0, 0x80] + [UInt8(size >> 21 & 0x7F), UInt8(size >> 14 & 0x7F), UInt8(size >> 7 & 0x7F), UInt8(size & 0x7F)]
        let tag = ID3v2.parse(header + unsynced)
        #expect(tag.metadata.title == "T\u{FF}tle".utf8.map { Character(Unicode.Scalar($0)) }.map(String.init).joined())
        #expect(tag.iTunSMPB.flatMap(parseITunSMPB)?.priming == 528)
        // v2.2: three-character ids and sizes; UTF-16 text with a BOM.
        let text: [UInt8] = [1, 0xFF, 0xFE] + Array("Hi".utf16).flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }
        let v22 = Array("TT2".utf8) + [0, 0, UInt8(text.count)] + text
        let tag22 = ID3v2.parse(Array("ID3".utf8) + [2, 0, 0, 0, 0, 0, UInt8(v22.count)] + v22)
        #expect(tag22.metadata.title == "Hi")
        // v2.4 with a footer: total size counts it.
        #expect(ID3v2.totalSize(header: Array("ID3".utf8) + [4, 0, 0x10, 0, 0, 1, 0]) == 10 + 128 + 10)
    }

    @Test func mpegHeaderFields() throws {
        let h = try #require(MPEGHeader(0xFF, 0xFB, 0x90, 0x64))   // MPEG-1 L3 128 kb/s 44.1 kHz joint stereo
        #expect(h.bitRate == 128_000 && h.sampleRate == 44100 && h.frameLength == 417 && h.samplesPerFrame == 1152)
        let lsf = try #require(MPEGHeader(0xFF, 0xF3, 0x90, 0xC4))  // MPEG-2 L3 64 kb/s 22.05 kHz mono... rate index 0
        #expect(lsf.version == .mpeg2 && lsf.samplesPerFrame == 576 && lsf.channels == 1)
        #expect(MPEGHeader(0xFF, 0xFB, 0xF0, 0x64) == nil)   // bit-rate index 15
        #expect(MPEGHeader(0xFF, 0xFB, 0x9C, 0x64) == nil)   // sample-rate index 3
        #expect(MPEGHeader(0xFF, 0xE9, 0x90, 0x64) == nil)   // reserved version
    }
}



/// Every error `AudioFile(path:)` throws or keeps names the file: a file that is missing, one
/// that is not audio, one whose audio breaks off (its warnings and damage).
@Suite struct FileErrorNameTests {
    @Test func errorsNameTheFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("names-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let missing = directory.appendingPathComponent("missing.wav").path
        let garbage = directory.appendingPathComponent("garbage.mp3").path
        try Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 * 7919 >> 3) }).write(to: URL(fileURLWithPath: garbage))
        for path in [missing, garbage] {
            do {
                _ = try AudioFile(path: path)
                Issue.record("\(path) opened")
            } catch let error as AudioFileStreamError {
                #expect(error.path == path && "\(error)".hasPrefix(path + ": "), "\(error)")
            }
        }
        // A WAV that promises more data than it has: the frames there play, the damage names it.
        let cut = directory.appendingPathComponent("cut.wav").path
        var header = Data("RIFF".utf8) + le32(36 + 40_000) + Data("WAVEfmt ".utf8) + le32(16)
        header += le16(1) + le16(1) + le32(8000) + le32(16000) + le16(2) + le16(16)
        header += Data("data".utf8) + le32(40_000)
        try (header + Data(repeating: 1, count: 1000)).write(to: URL(fileURLWithPath: cut))
        let file = try AudioFile(path: cut)
        let reported = file.warnings + [file.damage].compactMap { $0 }
        #expect(!reported.isEmpty, "a WAV cut short was read without a word")
        for problem in reported {
            #expect(problem.path == cut && "\(problem)".hasPrefix(cut + ": "), "\(problem)")
        }
    }

    private func le32(_ value: Int) -> Data { withUnsafeBytes(of: UInt32(value).littleEndian) { Data($0) } }
    private func le16(_ value: Int) -> Data { withUnsafeBytes(of: UInt16(value).littleEndian) { Data($0) } }
}
