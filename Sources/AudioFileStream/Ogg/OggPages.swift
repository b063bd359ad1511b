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

/// A stretch of a packet's bytes in the stream (a packet spans pages, so it may have several).
struct OggPiece: Equatable {
    var offset: Int64
    var length: Int
}

/// One packet of a logical stream.
struct OggPacket: Equatable {
    var serial: UInt32
    var data: [UInt8]
    /// Where its bytes lie in the stream, in order (they add up to `data`).
    var pieces: [OggPiece]
    /// The page's granule position when this packet is the last to end on its page; else -1.
    var granulePosition: Int64
    /// The first packet of its logical stream (on a BOS page).
    var beginsStream: Bool
    /// The last packet of its logical stream (ends on an EOS page).
    var endsStream: Bool
}

/// Finds pages at a stream's read position (any chunking).
struct OggPageReader {
    /// Bytes skipped (junk, or pages that failed their CRC): where, how many, why.
    private(set) var skipped: [(offset: Int64, bytes: Int, why: String)] = []

    /// The next whole page that checks, consumed from `input`; nil when more bytes are needed.
    /// Junk and damaged pages on the way are consumed and noted in ``skipped``.
    mutating func nextPage(from input: ByteInput) -> OggPage? {
        while true {
            let available = input.available
            guard available >= 27 else {
                input.waitFor(27)
                return nil
            }
            guard input.matches("OggS", at: 0) else {
                skip(input, input.firstIndex(of: 0x4F, from: 1) ?? available, "not an Ogg page")
                continue
            }
            let count = Int(input.u8(26))
            guard available >= 27 + count else {
                input.waitFor(27 + count)
                return nil
            }
            var bodySize = 0
            for index in 0..<count { bodySize += Int(input.u8(27 + index)) }
            let total = 27 + count + bodySize
            guard available >= total else {
                input.waitFor(total)
                return nil
            }
            let stored = input.u32le(22)
            guard input.u8(4) == 0, input.withBytes(total, { MPEGCRC32.checksum($0, initial: 0, zeroing: 22..<26) }) == stored else {
                // A false capture pattern, or a damaged page: look again one byte on.
                skip(input, 1, input.u8(4) != 0 ? "an unknown Ogg version" : "a page that fails its CRC")
                continue
            }
            let flags = input.u8(5)
            let granule = UInt64(input.u32le(6)) | UInt64(input.u32le(10)) << 32
            let page = OggPage(continued: flags & 1 != 0, beginsStream: flags & 2 != 0, endsStream: flags & 4 != 0,
                               granulePosition: Int64(bitPattern: granule), serial: input.u32le(14), sequence: input.u32le(18),
                               segments: input.bytes(27, count), body: input.bytes(27 + count, bodySize), offset: input.position)
            input.consume(total)
            return page
        }
    }

    private mutating func skip(_ input: ByteInput, _ count: Int, _ why: String) {
        if let last = skipped.last, last.offset + Int64(last.bytes) == input.position {
            skipped[skipped.count - 1].bytes += count
        } else {
            skipped.append((input.position, count, why))
        }
        input.consume(count)
    }

    /// Forgets what was skipped (reported already).
    mutating func clearSkipped() { skipped.removeAll() }
}

/// Packets from pages, per logical stream.
struct OggPacketAssembler {
    /// A packet begun on an earlier page, per serial, with where its bytes lie.
    private var partial: [UInt32: (data: [UInt8], pieces: [OggPiece])] = [:]
    /// Next page sequence number expected per serial (a gap loses the packet in progress).
    private var nextSequence: [UInt32: UInt32] = [:]

    /// The bytes of the first packet that starts on `page` (the whole packet when it ends there).
    static func firstPacket(of page: OggPage) -> [UInt8] {
        var size = 0
        for lacing in page.segments {
            size += Int(lacing)
            if lacing < 255 { break }
        }
        return Array(page.body.prefix(size))
    }

    mutating func packets(of page: OggPage) -> [OggPacket] {
        if page.beginsStream {
            partial[page.serial] = nil
        } else if let expected = nextSequence[page.serial], expected != page.sequence {
            partial[page.serial] = nil   // pages lost: the packet in progress cannot be completed
        }
        nextSequence[page.serial] = page.sequence &+ 1
        var packets: [OggPacket] = []
        var current = page.continued ? partial[page.serial]?.data ?? [] : []
        var pieces = page.continued ? partial[page.serial]?.pieces ?? [] : []
        var orphan = page.continued && partial[page.serial] == nil
        partial[page.serial] = nil
        let bodyOffset = page.offset + 27 + Int64(page.segments.count)
        var at = 0
        for (index, lacing) in page.segments.enumerated() {
            current += page.body[at..<(at + Int(lacing))]
            if lacing > 0 {
                let start = bodyOffset + Int64(at)
                if let last = pieces.last, last.offset + Int64(last.length) == start {
                    pieces[pieces.count - 1].length += Int(lacing)
                } else {
                    pieces.append(OggPiece(offset: start, length: Int(lacing)))
                }
            }
            at += Int(lacing)
            guard lacing < 255 else { continue }
            if !orphan {
                let lastEnding = !page.segments[(index + 1)...].contains { $0 < 255 }
                packets.append(OggPacket(serial: page.serial, data: current, pieces: pieces, granulePosition: lastEnding ? page.granulePosition : -1,
                                         beginsStream: page.beginsStream && packets.isEmpty, endsStream: page.endsStream && lastEnding))
            }
            orphan = false
            current = []
            pieces = []
        }
        // A packet that goes on to the next page (unless it is the rest of one whose start was lost).
        if page.segments.last == 255, !orphan { partial[page.serial] = (current, pieces) }
        if page.endsStream {
            partial[page.serial] = nil
            nextSequence[page.serial] = nil
        }
        return packets
    }
}
