import Testing
@testable import AudioFileStream
import TestSupport

/// The compact packet index gives back exactly what was appended: offsets (anchored every 16
/// packets, with breaks where a packet does not follow the one before), sizes (16-bit until one
/// does not fit), frames and the runs of packets that follow each other.
@Suite struct PacketIndexTests {
    /// Appends `packets` (offset, size, frames) and checks every lookup against them.
    static func check(_ packets: [(offset: Int64, size: Int, frames: Int)], _ note: String) {
        var index = PacketIndex()
        index.reserve(packets.count / 2)
        for packet in packets { index.append(offset: packet.offset, size: packet.size, frames: packet.frames) }
        #expect(index.count == packets.count, "\(note)")
        #expect(index.totalBytes == packets.reduce(0) { $0 + Int64($1.size) }, "\(note)")
        #expect(index.totalFrames == packets.reduce(0) { $0 + Int64($1.frames) }, "\(note)")
        #expect(index.largestSize == packets.map(\.size).max() ?? 0, "\(note)")
        let wrongOffset = packets.indices.first { index.offset($0) != packets[$0].offset }
        let wrongSize = packets.indices.first { index.size($0) != packets[$0].size }
        let wrongFrames = packets.indices.first { index.frames($0) != packets[$0].frames }
        #expect(wrongOffset == nil && wrongSize == nil && wrongFrames == nil,
                "\(note): offset wrong at \(wrongOffset ?? -1), size at \(wrongSize ?? -1), frames at \(wrongFrames ?? -1)")
        // nextBreak: the first later packet that does not start where the one before ended.
        let wrongBreak = packets.indices.first { packet in
            let expected = packets.indices.first { $0 > packet && packets[$0].offset != packets[$0 - 1].offset + Int64(packets[$0 - 1].size) }
            return index.nextBreak(after: packet) != expected
        }
        #expect(wrongBreak == nil, "\(note): nextBreak wrong after packet \(wrongBreak ?? -1)")
    }

    @Test func offsetsSizesAndFramesComeBackAsAppended() {
        var random = SplitMix(seed: 17)
        for round in 0..<40 {
            var packets: [(offset: Int64, size: Int, frames: Int)] = []
            var offset = Int64(random.next() % 5000)
            let count = Int(random.next() % 600) + 1
            let varying = round % 3 == 0, widens = round % 4 == 1, breaks = round % 2 == 0
            for packet in 0..<count {
                if breaks && random.next() % 7 == 0 { offset += Int64(random.next() % 3000) + 1 }   // a gap
                let size = widens && packet == count / 2 ? 70_000 + Int(random.next() % 1000) : Int(random.next() % 1500) + 1
                packets.append((offset, size, varying ? Int(random.next() % 4) * 576 + 576 : 1152))
                offset += Int64(size)
            }
            Self.check(packets, "round \(round)")
        }
    }

    /// Offsets past 4 GiB (a large file) and breaks that land on anchored packets.
    @Test func largeOffsetsAndBreaksOnAnchors() {
        var packets: [(offset: Int64, size: Int, frames: Int)] = []
        var offset: Int64 = 5 << 30
        for packet in 0..<100 {
            if packet % 16 == 0 || packet % 16 == 15 { offset += 4096 }
            packets.append((offset, 417 + packet % 2, 1152))
            offset += Int64(417 + packet % 2)
        }
        Self.check(packets, "large offsets")
    }
}
