import Foundation
import Testing
@testable import AudioFileStream
import TestSupport

/// The Ogg page layer (groundwork of issue 38) on files ffmpeg writes: pages check their CRC and
/// come out the same at any chunking; packets are assembled across pages with the granule
/// position of the page they end on; chained and damaged streams.
@Suite(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/ffmpeg"), "ffmpeg is missing (make deps installs it): Ogg page tests skipped"))
struct OggPageTests {
    static func make(_ codec: String, _ ext: String, seconds: Double = 1) async throws -> [UInt8] {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ogg-\(UUID()).\(ext)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let result = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=f=440:d=\(seconds):r=48000",
                                                           "-c:a", codec, path])
        try #require(result.status == 0, "ffmpeg could not write \(ext)")
        return [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// Every page and packet, pushing `chunk` bytes at a time.
    static func read(_ bytes: [UInt8], chunk: Int) -> (pages: [OggPage], packets: [OggPacket], reader: OggPageReader) {
        var reader = OggPageReader(), assembler = OggPacketAssembler()
        let input = ByteInput()
        var pages: [OggPage] = [], packets: [OggPacket] = []
        var at = 0
        while at < bytes.count {
            Array(bytes[at..<min(at + chunk, bytes.count)]).withUnsafeBytes { input.append($0) }
            at += chunk
            while let page = reader.nextPage(from: input) {
                pages.append(page)
                packets += assembler.packets(of: page)
            }
        }
        return (pages, packets, reader)
    }

    @Test func opusPagesAndPacketsAtAnyChunking() async throws {
        let bytes = try await Self.make("libopus", "opus")
        let whole = Self.read(bytes, chunk: bytes.count)
        #expect(whole.reader.skipped.isEmpty)
        #expect(whole.pages.first?.beginsStream == true && whole.pages.last?.endsStream == true)
        #expect(whole.pages.map { 27 + $0.segments.count + $0.body.count }.reduce(0, +) == bytes.count)
        let packets = whole.packets
        #expect(packets.first.map { $0.beginsStream && $0.data.starts(with: Array("OpusHead".utf8)) } == true)
        #expect(packets.dropFirst().first.map { $0.data.starts(with: Array("OpusTags".utf8)) } == true)
        // 1 s at 48 kHz in 20 ms packets, after the two header packets; the last granule is the
        // pre-skip plus the 48 000 samples (the end trim lies inside the last packet).
        let preSkip = Int64(packets[0].data[10]) | Int64(packets[0].data[11]) << 8
        #expect(packets.count - 2 >= 50)
        #expect(packets.last?.endsStream == true)
        #expect(packets.last?.granulePosition == preSkip + 48000)
        for chunk in [1, 7, 200, 4096] {
            let dripped = Self.read(bytes, chunk: chunk)
            #expect(dripped.pages == whole.pages, "chunk \(chunk)")
            #expect(dripped.packets == whole.packets, "chunk \(chunk)")
        }
    }

    @Test func vorbisHeadersAndAudioPackets() async throws {
        let bytes = try await Self.make("libvorbis", "ogg")
        let packets = Self.read(bytes, chunk: 333).packets
        // The identification, comment and setup headers (the setup spans pages), then audio.
        #expect(packets.prefix(3).map { $0.data.first } == [1, 3, 5])
        #expect(packets.prefix(3).allSatisfy { $0.data.dropFirst().starts(with: Array("vorbis".utf8)) })
        #expect(packets.count > 3 + 20)
        #expect(packets.last?.granulePosition == 48000)
    }

    /// Two files one after the other make a chained stream: a new BOS after the EOS.
    @Test func aChainedStreamStartsAgainAtEachLink() async throws {
        let first = try await Self.make("libopus", "opus"), second = try await Self.make("libopus", "opus", seconds: 0.5)
        let packets = Self.read(first + second, chunk: 1000).packets
        let starts = packets.enumerated().filter { $0.element.beginsStream }.map(\.offset)
        let ends = packets.enumerated().filter { $0.element.endsStream }.map(\.offset)
        #expect(starts.count == 2 && ends.count == 2 && ends[0] + 1 == starts[1])
        #expect(packets[starts[1]].data.starts(with: Array("OpusHead".utf8)))
    }

    /// Junk before and between pages is skipped; a page with a flipped byte fails its CRC and is
    /// dropped (with its packets), and reading goes on at the next page.
    @Test func junkAndDamageAreSkippedAndReported() async throws {
        let bytes = try await Self.make("libopus", "opus", seconds: 4)
        let clean = Self.read(bytes, chunk: bytes.count)
        try #require(clean.pages.count >= 6, "\(clean.pages.count) pages")
        let third = clean.pages[3]
        var damaged = bytes
        damaged[Int(third.offset) + 27 + third.segments.count + 5] ^= 0x40
        let junk: [UInt8] = Array("OggSjunk".utf8) + (0..<100).map { UInt8($0 & 0xFF) }
        let cut = Int(clean.pages[5].offset)
        let hostile = junk + Array(damaged[..<cut]) + junk + Array(damaged[cut...])
        for chunk in [1, 64, hostile.count] {
            let result = Self.read(hostile, chunk: chunk)
            #expect(result.pages.count == clean.pages.count - 1, "chunk \(chunk)")
            #expect(!result.pages.contains { $0.sequence == third.sequence }, "chunk \(chunk)")
            #expect(result.reader.skipped.contains { $0.why.contains("CRC") }, "chunk \(chunk)")
            #expect(result.reader.skipped.count >= 3, "chunk \(chunk): \(result.reader.skipped.map(\.why))")
            // The packets of every other page are all there (their bytes: junk moved their offsets).
            let lost = clean.packets.filter { packet in !result.packets.contains { $0.data == packet.data && $0.granulePosition == packet.granulePosition } }
            #expect(lost.count <= third.segments.filter { $0 < 255 }.count + 1, "chunk \(chunk): \(lost.count) packets lost")
        }
    }
}

extension OggPageTests {
    /// Each packet says where its bytes lie: the pieces, read from the stream, are its bytes
    /// (packets spanning pages included), so an indexed file can read them again by offset.
    @Test func everyPacketsPiecesAreItsBytes() async throws {
        // A comment header of 70 000 bytes spans two pages (a page holds at most 65 025).
        let wav = FileManager.default.temporaryDirectory.appendingPathComponent("ogg-\(UUID()).wav").path
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ogg-\(UUID()).opus").path
        defer { try? FileManager.default.removeItem(atPath: path); try? FileManager.default.removeItem(atPath: wav) }
        let made = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=f=440:d=1:r=48000", wav])
        try #require(made.status == 0)
        let opusenc = "/usr/bin/opusenc"
        try #require(FileManager.default.isExecutableFile(atPath: opusenc), "opus-tools is missing (make deps installs it)")
        let result = try await runTool(opusenc, ["--quiet", "--comment", "BIG=" + String(repeating: "a", count: 70_000), wav, path])
        try #require(result.status == 0, "opusenc failed")
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let packets = Self.read(bytes, chunk: 777).packets
        #expect(packets.contains { $0.pieces.count > 1 }, "no packet spans pages: at most \(packets.map(\.pieces.count).max() ?? 0) pieces")
        for packet in packets {
            let gathered = packet.pieces.flatMap { bytes[Int($0.offset)..<(Int($0.offset) + $0.length)] }
            #expect(gathered == packet.data)
        }
    }
}

/// The map from an Ogg file's packets back to back to the stretches of its pages.
@Suite struct PieceTableTests {
    @Test func stretchesFollowThePages() {
        var table = PieceTable()
        table.append(fileOffset: 100, length: 50)    // packets 0…49
        table.append(fileOffset: 150, length: 10)    // contiguous in the file: the same stretch
        table.append(fileOffset: 300, length: 40)    // after a page header
        table.append(fileOffset: 400, length: 5)
        #expect(table.totalLength == 105)
        #expect(table.stretches(from: 0, count: 60).map { [$0.fileOffset, Int64($0.length)] } == [[100, 60]])
        #expect(table.stretches(from: 55, count: 20).map { [$0.fileOffset, Int64($0.length)] } == [[155, 5], [300, 15]])
        #expect(table.stretches(from: 98, count: 7).map { [$0.fileOffset, Int64($0.length)] } == [[338, 2], [400, 5]])
        #expect(table.stretches(from: 104, count: 10).map { [$0.fileOffset, Int64($0.length)] } == [[404, 1]])
        #expect(table.stretches(from: 105, count: 1).isEmpty)
    }
}
