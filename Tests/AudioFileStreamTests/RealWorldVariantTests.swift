import Foundation
import Testing
@testable import AudioFileStream
import BufferQueue

/// What real files from other projects' test suites carry (issue 14): free-format MP3, frames cut
/// short mid-stream, junk between ADTS frames, MP3 in MP4, the compact sample-size box, and files
/// that end before their headers say. Each case is made from a generated fixture whose packets
/// are known, so the test can say which packets must come out.
@Suite struct RealWorldVariantTests {
    static func fixture(_ name: String) throws -> [UInt8] { try load(Paths.projectFixtures.appendingPathComponent(name)) }

    /// The frames of an MPEG audio or ADTS file, split by their headers' lengths.
    static func frames(_ bytes: [UInt8], adts: Bool) -> [[UInt8]] {
        var frames: [[UInt8]] = [], i = 0
        while i + 7 <= bytes.count, bytes[i] == 0xFF {
            let length: Int
            if adts {
                length = Int(bytes[i + 3] & 3) << 11 | Int(bytes[i + 4]) << 3 | Int(bytes[i + 5] >> 5)
            } else {
                // MPEG-1 Layer III at 128 kbit/s, 44.1 kHz (the fixture used here).
                length = 144 * 128_000 / 44_100 + Int(bytes[i + 2] >> 1 & 1)
            }
            guard length > 0, i + length <= bytes.count else { break }
            frames.append(Array(bytes[i..<(i + length)]))
            i += length
        }
        return frames
    }

    @Test func freeFormatFramesAreMeasuredFromTheNextHeader() {
        // Two free-format frames (bit-rate index 0, 48 kHz, no padding) of 604 bytes, then one
        // with the padding bit: 605.
        let frame: [UInt8] = [0xFF, 0xFB, 0x04, 0xC4] + [UInt8](repeating: 0, count: 600)
        let padded: [UInt8] = [0xFF, 0xFB, 0x06, 0xC4] + [UInt8](repeating: 0, count: 601)
        let bytes = frame + frame + padded
        for chunks in [[bytes.count + 1], [1], [7, 300, 2]] {
            let result = trace(bytes, chunks: chunks)
            #expect(result.error == nil)
            #expect(result.packets.map(\.bytes.count) == [604, 604, 605])
        }
        // 604 bytes per 1152 frames at 48 kHz.
        #expect(trace(bytes, chunks: [bytes.count + 1]).items.contains(.property("bitRate=Optional(201333)")))
    }

    @Test func aLoneFreeFormatFrameCannotBeMeasuredAndSaysSo() {
        let frame: [UInt8] = [0xFF, 0xFB, 0x04, 0xC4] + [UInt8](repeating: 0, count: 600)
        let result = trace(frame, chunks: [frame.count + 1])
        #expect(result.error?.contains("at byte 0") == true)
        #expect(result.packets.isEmpty)
    }

    @Test func theLAMEFreeFormatFileGivesEveryFrame() throws {
        let bytes = try Self.fixture("lame-freeformat-400k-44k-stereo.mp3")
        let result = trace(bytes, chunks: [4093])
        #expect(result.error == nil)
        #expect(result.warnings.isEmpty)
        #expect(result.packets.count == 44)
        // Every packet starts with a free-format header, and they tile the file after the Info frame.
        #expect(result.packets.allSatisfy { $0.bytes[0] == 0xFF && $0.bytes[2] >> 4 == 0 })
        #expect(result.packets.reduce(0) { $0 + $1.bytes.count } == bytes.count - Int(result.packets[0].offset))
        // A byte at a time, or in odd pieces, the size search resumes where it stopped: the same packets.
        for chunks in [[1], [3, 1, 1130, 7]] {
            let pieces = trace(bytes, chunks: chunks)
            #expect(pieces.error == nil)
            #expect(pieces.packets.map(\.bytes) == result.packets.map(\.bytes))
            #expect(pieces.packets.map(\.offset) == result.packets.map(\.offset))
        }
    }

    @Test func anADTSFrameCutShortDoesNotCostTheNextFrame() throws {
        let frames = Self.frames(try Self.fixture("ffmpeg-aac-48k.aac"), adts: true)
        #expect(frames.count == 44)
        let cut = frames.enumerated().flatMap { $0.offset == 10 ? Array($0.element.prefix($0.element.count / 2)) : $0.element }
        for chunks in [[cut.count + 1], [1], [7, 1, 4093]] {
            let result = trace(cut, chunks: chunks)
            #expect(result.error == nil)
            // Every frame but the cut one, whole (ADTS packets are the frames without their 7-byte header).
            #expect(result.packets.map(\.bytes) == frames.enumerated().filter { $0.offset != 10 }.map { Array($0.element.dropFirst(7)) })
            #expect(result.warnings.contains { $0.contains("cut short") })
        }
    }

    @Test func junkAndAnID3TagBetweenADTSFramesAreSkipped() throws {
        let frames = Self.frames(try Self.fixture("ffmpeg-aac-48k.aac"), adts: true)
        var bytes: [UInt8] = []
        let id3: [UInt8] = Array("ID3".utf8) + [4, 0, 0, 0, 0, 0, 21] + Array("TIT2".utf8) + [0, 0, 0, 11, 0, 0, 3] + Array("hello junk".utf8)
        for (index, frame) in frames.enumerated() {
            bytes += frame
            if index == 10 { bytes += (0..<37).map { UInt8(truncatingIfNeeded: $0 &* 97 &+ 13) } }
            if index == 20 { bytes += id3 }
            if index == 30 { bytes += [0xFF, 0xF1, 0x50] }   // a false start of a header
        }
        let result = trace(bytes, chunks: [1])
        #expect(result.error == nil)
        #expect(result.packets.map(\.bytes) == frames.map { Array($0.dropFirst(7)) })
    }

    @Test func anMP3FrameCutShortDoesNotCostTheNextFrame() throws {
        let bytes = try Self.fixture("lame-cbr128-44k-stereo.mp3")
        let frames = Self.frames(bytes, adts: false)   // the Info frame, then 44 audio frames
        #expect(frames.count == 45)
        let cut = frames.enumerated().flatMap { $0.offset == 10 ? Array($0.element.prefix(200)) : $0.element }
        let result = trace(cut, chunks: [1000])
        #expect(result.packets.map(\.bytes) == frames.enumerated().filter { $0.offset != 0 && $0.offset != 10 }.map(\.element))
        #expect(result.warnings.contains { $0.contains("cut short after 200 of its") })
    }

    /// A file cut off before the frame count its Xing/LAME tag gives plays what is there, with the
    /// start trim, and says so in a warning (mpg123 and ffmpeg play it too).
    @Test(arguments: [1, 2, 20])
    func anMP3EndingBeforeItsTagSaysKeepsItsStartTrim(_ kept: Int) throws {
        let bytes = try Self.fixture("lame-cbr128-44k-stereo.mp3")
        let frames = Self.frames(bytes, adts: false)
        let cut = Array(frames.prefix(1 + kept).joined()) + Array(frames[1 + kept].prefix(150))
        let result = trace(cut, chunks: [cut.count + 1])
        #expect(result.error == nil)
        #expect(result.packets.count == kept)
        #expect(result.warnings.contains { $0.contains("promises 44 frames but the stream ends after \(kept)") })
        let valid = max(kept * 1152 - 1105, 0)
        #expect(result.items.last { if case .property(let p) = $0 { return p.hasPrefix("table=") } else { return false } }
                == .property("table=Optional(\(valid) valid frames + \(min(1105, kept * 1152)) priming + 0 remainder (LAME/Info tag))"))
    }

    @Test func mp3InMP4AndQuickTimeGiveTheMP3FilesPackets() throws {
        let mp3 = Self.frames(try Self.fixture("lame-cbr128-44k-stereo.mp3"), adts: false).dropFirst()
        for name in ["mp3-in-mp4-44k-stereo.mp4", "mp3-in-mov-44k-stereo.mov"] {
            let file = try AudioFile(path: Paths.projectFixtures.appendingPathComponent(name).path)
            #expect(file.dataFormat.formatID == .mpegLayer3)
            #expect(file.dataFormat.framesPerPacket == 1152 && file.dataFormat.channelsPerFrame == 2)
            let packets = try file.readPackets(from: 0, count: Int(file.packetCount))
            let split = packets.descriptions.map { Array(packets.data[$0.startOffset..<($0.startOffset + $0.dataByteSize)]) }
            #expect(split == Array(mp3), "\(name)")
            // ffmpeg's edit list: its decoder delay (1105) at the start, no end trim.
            let table = try #require(file.packetTableInfo)
            #expect(table.primingFrames == 1105 && table.validFrames == 44 * 1152 - 1105)
        }
    }

    /// The compact sample-size box: the moov-last AAC file with its stsz rewritten as a 16-bit
    /// stz2 (a `free` box keeps every size and offset as it was) gives the same packets.
    @Test func stz2GivesTheSamePacketsAsStsz() throws {
        var bytes = try Self.fixture("ffmpeg-aac-44k-moov-last.m4a")
        let at = try #require(bytes.firstRange(of: Array("stsz".utf8))).lowerBound - 4
        let size = Int(bytes[at]) << 24 | Int(bytes[at + 1]) << 16 | Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
        let count = Int(bytes[at + 16]) << 24 | Int(bytes[at + 17]) << 16 | Int(bytes[at + 18]) << 8 | Int(bytes[at + 19])
        #expect(size == 20 + 4 * count && bytes[at + 12..<at + 16].allSatisfy { $0 == 0 })
        let sizes = (0..<count).map { i in bytes[at + 20 + 4 * i..<at + 24 + 4 * i].reduce(0) { $0 << 8 | Int($1) } }
        #expect(sizes.allSatisfy { $0 < 65536 })
        func be32(_ v: Int) -> [UInt8] { [UInt8(v >> 24 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        var stz2 = be32(20 + 2 * count) + Array("stz2".utf8) + [0, 0, 0, 0] + [0, 0, 0, 16] + be32(count)
        for s in sizes { stz2 += [UInt8(s >> 8), UInt8(s & 0xFF)] }
        let free = be32(size - stz2.count) + Array("free".utf8) + [UInt8](repeating: 0, count: size - stz2.count - 8)
        bytes.replaceSubrange(at..<(at + size), with: stz2 + free)
        let original = trace(try Self.fixture("ffmpeg-aac-44k-moov-last.m4a"), chunks: [4096])
        let rewritten = trace(bytes, chunks: [4096])
        #expect(rewritten.error == nil)
        #expect(rewritten.packets.count == 49)
        #expect(rewritten.packets.map(\.bytes) == original.packets.map(\.bytes))
    }
}

/// What an MP4 index claims costs memory only in proportion to the index's own bytes (issue 14's
/// hostile inputs: a box of a few bytes claiming tens of millions of equal-size samples used to
/// allocate hundreds of megabytes before the first packet).
@Suite struct MP4SampleTableTests {
    @Test func chunksThatFollowEachOtherBecomeOneRun() {
        var table = MP4SampleTable()
        table.append(start: 1000, count: 3, size: 10)
        table.append(start: 1030, count: 2, size: 10)     // right after: merged
        table.append(start: 2000, count: 1, size: 10)     // a gap: a new run
        table.append(start: 2010, sizes: [5, 6, 7])
        table.append(start: 2028, sizes: [1])             // right after the listed run: merged
        table.append(start: 3000, sizes: [2, 2])
        #expect(table.runCount == 4)
        #expect(table.count == 12)
        #expect((0..<12).map { table[$0].offset } == [1000, 1010, 1020, 1030, 1040, 2000, 2010, 2015, 2021, 2028, 3000, 3002])
        #expect((0..<12).map { table[$0].size } == [10, 10, 10, 10, 10, 10, 5, 6, 7, 1, 2, 2])
        #expect(table.totalBytes == 60 + 18 + 1 + 4)
        #expect(table.maximumSize == 10)
        #expect(table.firstOffset == 1000 && table.lastOffset == 3002)
    }

    @Test func aHugeClaimIsOneRun() {
        var table = MP4SampleTable()
        table.append(start: 48, count: 40_000_000, size: 400)
        #expect(table.runCount == 1)
        #expect(table[39_999_999] == (48 + 39_999_999 * 400, 400))
        #expect(table.totalBytes == 16_000_000_000)
    }

    /// The moov-last AAC file with its stsz rewritten to claim 40 million samples of 400 bytes and
    /// its stsc to put them all in the first chunk: the packets present come out, then the end
    /// says how many were claimed.
    @Test func anIndexClaimingMillionsOfSamplesEndsAsTruncated() throws {
        var bytes = try RealWorldVariantTests.fixture("ffmpeg-aac-44k-moov-last.m4a")
        func be32(_ v: Int) -> [UInt8] { [UInt8(v >> 24 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        func replace(_ type: String, with body: [UInt8]) throws {
            let at = try #require(bytes.firstRange(of: Array(type.utf8))).lowerBound - 4
            let size = bytes[at..<(at + 4)].reduce(0) { $0 << 8 | Int($1) }
            let box = be32(8 + body.count) + Array(type.utf8) + body
            try #require(box.count == size || box.count + 8 <= size)   // a free box keeps every offset
            let free = box.count == size ? [] : be32(size - box.count) + Array("free".utf8) + [UInt8](repeating: 0, count: size - box.count - 8)
            bytes.replaceSubrange(at..<(at + size), with: box + free)
        }
        try replace("stsz", with: [0, 0, 0, 0] + be32(400) + be32(40_000_000))
        try replace("stsc", with: [0, 0, 0, 0] + be32(1) + be32(1) + be32(40_000_000) + be32(1))
        let result = trace(bytes, chunks: [4096])
        #expect(result.items.contains(.property("packets=Optional(40000000)")))
        #expect(!result.packets.isEmpty && result.packets.allSatisfy { $0.bytes.count == 400 })
        #expect(result.error?.contains("list 40000000 samples") == true)
    }
}
