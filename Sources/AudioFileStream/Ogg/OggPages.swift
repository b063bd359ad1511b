/// Ogg (RFC 3533): the page layer, pushed bytes in, pages and packets out. The groundwork of the
/// Ogg container (issue 38): pages are found by their capture pattern and kept only when their
/// CRC-32 holds; a lost sync resumes at the next page that checks; packets are assembled across
/// pages per logical stream (multiplexed streams by serial number, chained streams by a new BOS
/// page after an EOS), each with the granule position of the page it ends on when it is the last
/// packet to end there.
struct OggPage: Equatable {
    var continued: Bool
    var beginsStream: Bool
    var endsStream: Bool
    /// The granule position of the last packet ending on the page; -1 when none ends here.
    var granulePosition: Int64
    var serial: UInt32
    var sequence: UInt32
    /// The lacing values.
    var segments: [UInt8]
    var body: [UInt8]
    /// Where the page starts in the stream.
    var offset: Int64
}

/// One packet of a logical stream.
struct OggPacket: Equatable {
    var serial: UInt32
    var data: [UInt8]
    /// The page's granule position when this packet is the last to end on its page; else -1.
    var granulePosition: Int64
    /// The first packet of its logical stream (on a BOS page).
    var beginsStream: Bool
    /// The last packet of its logical stream (ends on an EOS page).
    var endsStream: Bool
}

/// Finds pages in pushed bytes (any chunking).
struct OggPageReader {
    private var buffer: [UInt8] = []
    private var start = 0
    /// The stream offset of `buffer[start]`.
    private var position: Int64 = 0
    /// Bytes skipped since the last good page (junk, or pages that failed their CRC).
    private(set) var skipped: [(offset: Int64, bytes: Int, why: String)] = []

    mutating func push(_ bytes: some Collection<UInt8>) { buffer.append(contentsOf: bytes) }

    /// The next whole page that checks; nil when more bytes are needed. Junk and damaged pages on
    /// the way are noted in ``skipped``.
    mutating func nextPage() -> OggPage? {
        while true {
            let available = buffer.count - start
            guard available >= 27 else { compact(); return nil }
            guard buffer[start] == 0x4F, buffer[start + 1] == 0x67, buffer[start + 2] == 0x67, buffer[start + 3] == 0x53 else {
                skip(1, "not an Ogg page")
                continue
            }
            let count = Int(buffer[start + 26])
            guard available >= 27 + count else { compact(); return nil }
            let lacing = Array(buffer[(start + 27)..<(start + 27 + count)])
            let bodySize = lacing.reduce(0) { $0 + Int($1) }
            let total = 27 + count + bodySize
            guard available >= total else { compact(); return nil }
            let page = buffer[start..<(start + total)]
            let stored = UInt32(page[start + 22]) | UInt32(page[start + 23]) << 8 | UInt32(page[start + 24]) << 16 | UInt32(page[start + 25]) << 24
            guard buffer[start + 4] == 0, MPEGCRC32.checksum(page, initial: 0, zeroing: (start + 22)..<(start + 26)) == stored else {
                // A false capture pattern, or a damaged page: look again one byte on.
                skip(1, buffer[start + 4] != 0 ? "an unknown Ogg version" : "a page that fails its CRC")
                continue
            }
            func le(_ at: Int, _ width: Int) -> UInt64 {
                (0..<width).reduce(UInt64(0)) { $0 | UInt64(buffer[start + at + $1]) << (8 * $1) }
            }
            let flags = buffer[start + 5]
            let result = OggPage(continued: flags & 1 != 0, beginsStream: flags & 2 != 0, endsStream: flags & 4 != 0,
                                 granulePosition: Int64(bitPattern: le(6, 8)), serial: UInt32(le(14, 4)), sequence: UInt32(le(18, 4)),
                                 segments: lacing, body: Array(buffer[(start + 27 + count)..<(start + total)]), offset: position)
            start += total
            position += Int64(total)
            return result
        }
    }

    private mutating func skip(_ count: Int, _ why: String) {
        if let last = skipped.last, last.offset + Int64(last.bytes) == position {
            skipped[skipped.count - 1].bytes += count
        } else {
            skipped.append((position, count, why))
        }
        start += count
        position += Int64(count)
    }

    private mutating func compact() {
        if start > 65536 || start == buffer.count {
            buffer.removeSubrange(0..<start)
            start = 0
        }
    }
}

/// Packets from pages, per logical stream.
struct OggPacketAssembler {
    /// A packet begun on an earlier page, per serial.
    private var partial: [UInt32: [UInt8]] = [:]
    /// Next page sequence number expected per serial (a gap loses the packet in progress).
    private var nextSequence: [UInt32: UInt32] = [:]
    /// Pages whose continued packet had no start (after a gap, or at the start of a cut stream).
    private(set) var orphanedContinuations = 0

    mutating func packets(of page: OggPage) -> [OggPacket] {
        if page.beginsStream {
            partial[page.serial] = nil
        } else if let expected = nextSequence[page.serial], expected != page.sequence {
            partial[page.serial] = nil   // pages lost: the packet in progress cannot be completed
        }
        nextSequence[page.serial] = page.sequence &+ 1
        var packets: [OggPacket] = []
        var current: [UInt8]
        if page.continued {
            if let begun = partial[page.serial] { current = begun } else { current = []; orphanedContinuations += 1 }
        } else {
            current = []
        }
        var orphan = page.continued && partial[page.serial] == nil
        partial[page.serial] = nil
        var at = 0
        for (index, lacing) in page.segments.enumerated() {
            current += page.body[at..<(at + Int(lacing))]
            at += Int(lacing)
            guard lacing < 255 else { continue }
            if !orphan {
                let lastEnding = !page.segments[(index + 1)...].contains { $0 < 255 }
                packets.append(OggPacket(serial: page.serial, data: current, granulePosition: lastEnding ? page.granulePosition : -1,
                                         beginsStream: page.beginsStream && packets.isEmpty, endsStream: page.endsStream && lastEnding))
            }
            orphan = false
            current = []
        }
        // A packet that goes on to the next page (unless it is the rest of one whose start was lost).
        if page.segments.last == 255, !orphan { partial[page.serial] = current }
        if page.endsStream {
            partial[page.serial] = nil
            nextSequence[page.serial] = nil
        }
        return packets
    }
}
