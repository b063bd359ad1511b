/// Where each variable-size packet of a file lies: its offset, size and frames, kept compact
/// (an hour of AAC is about 155 000 packets: about 2.3 bytes each here).
///
/// Packets nearly always follow each other, so offsets are not stored one by one: every 16th
/// packet's offset is kept (an anchor), with the packets that do not start where the one before
/// ended (a break: junk between MP3 frames, another track's chunk between MP4 chunks), and an
/// offset is the anchor plus the sizes since it. Sizes take 16 bits until one does not fit. The
/// frame counts are stored only when they vary (MP3, ADTS and most MP4 tracks have one count for
/// every packet), which also makes frame ↔ packet lookups constant-time.
struct PacketIndex {
    private static let anchorShift = 4
    private var narrowSizes: [UInt16] = []
    /// Every size once one needs more than 16 bits (then `narrowSizes` is emptied).
    private var wideSizes: [UInt32] = []
    private var wide = false
    /// The offset of packet `i << anchorShift`.
    private var anchors: [Int64] = []
    /// Packets that do not start where the previous packet ended, in packet order.
    private var breakPackets: [Int] = []
    private var breakOffsets: [Int64] = []
    /// Where the next packet starts if it follows the last.
    private var end: Int64 = 0
    /// Every packet's frames while they vary; empty while they are all `constantFrames`.
    private var varyingFrames: [Int32] = []
    private var constantFrames: Int32?
    private(set) var count = 0
    private(set) var totalFrames: Int64 = 0
    private(set) var totalBytes: Int64 = 0
    private(set) var largestSize = 0

    init() {}

    var isEmpty: Bool { count == 0 }

    /// Makes room for `packets` packets at once (the container said how many), so the arrays are
    /// not regrown — and briefly held twice — as they fill.
    mutating func reserve(_ packets: Int) {
        guard packets > 0 else { return }
        if wide { wideSizes.reserveCapacity(packets) } else { narrowSizes.reserveCapacity(packets) }
        anchors.reserveCapacity((packets >> Self.anchorShift) + 1)
    }

    mutating func append(offset: Int64, size: Int, frames: Int) {
        if count & ((1 << Self.anchorShift) - 1) == 0 { anchors.append(offset) }
        if count > 0 && offset != end {
            breakPackets.append(count)
            breakOffsets.append(offset)
        }
        end = offset + Int64(size)
        if !wide && size > Int(UInt16.max) {
            // The first size that needs more than 16 bits: from now on they are all kept wide.
            wideSizes = narrowSizes.map(UInt32.init)
            wideSizes.reserveCapacity(narrowSizes.capacity)
            narrowSizes = []
            wide = true
        }
        if wide { wideSizes.append(UInt32(truncatingIfNeeded: size)) } else { narrowSizes.append(UInt16(truncatingIfNeeded: size)) }
        largestSize = max(largestSize, size)
        totalBytes += Int64(size)
        let frames32 = Int32(truncatingIfNeeded: frames)
        if varyingFrames.isEmpty {
            if constantFrames == nil { constantFrames = frames32 }
            if constantFrames != frames32 {
                // The first that differs: from now on every packet's count is kept.
                varyingFrames = [Int32](repeating: constantFrames ?? 0, count: count)
                varyingFrames.reserveCapacity(wide ? wideSizes.capacity : narrowSizes.capacity)
                varyingFrames.append(frames32)
                constantFrames = nil
            }
        } else {
            varyingFrames.append(frames32)
        }
        totalFrames += Int64(frames)
        count += 1
    }

    func size(_ packet: Int) -> Int { wide ? Int(wideSizes[packet]) : Int(narrowSizes[packet]) }

    /// The first packet after `packet` that does not start where the one before it ended (nil:
    /// every later packet follows on).
    func nextBreak(after packet: Int) -> Int? {
        let next = breakIndex(atOrBefore: packet).map { $0 + 1 } ?? 0
        return next < breakPackets.count ? breakPackets[next] : nil
    }

    /// The offset of `packet`: from its anchor or the last break before it, plus the sizes between.
    func offset(_ packet: Int) -> Int64 {
        var from = (packet >> Self.anchorShift) << Self.anchorShift
        var offset = anchors[packet >> Self.anchorShift]
        if let found = breakIndex(atOrBefore: packet), breakPackets[found] > from {
            from = breakPackets[found]
            offset = breakOffsets[found]
        }
        for earlier in from..<packet { offset += Int64(size(earlier)) }
        return offset
    }

    /// The last break at or before `packet`.
    private func breakIndex(atOrBefore packet: Int) -> Int? {
        var low = 0, high = breakPackets.count   // the first break after `packet`
        while low < high {
            let middle = (low + high) / 2
            if breakPackets[middle] <= packet { low = middle + 1 } else { high = middle }
        }
        return low > 0 ? low - 1 : nil
    }

    func frames(_ packet: Int) -> Int { constantFrames.map(Int.init) ?? Int(varyingFrames[packet]) }

    /// Frames before packet `end` (at most `count`).
    func frames(before end: Int) -> Int64 {
        if let constantFrames { return Int64(end) * Int64(constantFrames) }
        var total: Int64 = 0
        for packet in 0..<end { total += Int64(varyingFrames[packet]) }
        return total
    }

    /// The packet holding frame `frame` and the frame's offset in it; nil past the end.
    func packet(forFrame frame: Int64) -> (packet: Int64, frameOffset: Int)? {
        guard frame >= 0, frame < totalFrames else { return nil }
        if let constantFrames, constantFrames > 0 {
            return (frame / Int64(constantFrames), Int(frame % Int64(constantFrames)))
        }
        var start: Int64 = 0
        for packet in 0..<varyingFrames.count {
            let next = start + Int64(varyingFrames[packet])
            if frame < next { return (Int64(packet), Int(frame - start)) }
            start = next
        }
        return nil
    }
}
