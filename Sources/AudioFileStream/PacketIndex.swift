/// Where each variable-size packet of a file lies: its offset, size and frames, kept compact
/// (an hour of MP3 is about 140 000 packets). Offsets are 32-bit while the file is under 4 GiB;
/// the frame counts are stored only when they vary (MP3, ADTS and most MP4 tracks have one count
/// for every packet), which also makes frame ↔ packet lookups constant-time.
struct PacketIndex {
    private var narrowOffsets: [UInt32] = []
    private var wideOffsets: [Int64] = []
    private let wide: Bool
    private(set) var sizes: [UInt32] = []
    /// Every packet's frames while they vary; empty while they are all `constantFrames`.
    private var varyingFrames: [Int32] = []
    private var constantFrames: Int32?
    private(set) var totalFrames: Int64 = 0
    private(set) var largestSize = 0

    /// `maximumOffset`: the largest offset that can occur (the file's or the kept bytes' size).
    init(maximumOffset: Int64) { wide = maximumOffset > Int64(UInt32.max) }

    var count: Int { sizes.count }
    var isEmpty: Bool { sizes.isEmpty }

    /// Makes room for `packets` packets at once (the container said how many), so the arrays are
    /// not regrown — and briefly held twice — as they fill.
    mutating func reserve(_ packets: Int) {
        guard packets > 0 else { return }
        if wide { wideOffsets.reserveCapacity(packets) } else { narrowOffsets.reserveCapacity(packets) }
        sizes.reserveCapacity(packets)
    }

    mutating func append(offset: Int64, size: Int, frames: Int) {
        if wide { wideOffsets.append(offset) } else { narrowOffsets.append(UInt32(truncatingIfNeeded: offset)) }
        sizes.append(UInt32(truncatingIfNeeded: size))
        largestSize = max(largestSize, size)
        let frames32 = Int32(truncatingIfNeeded: frames)
        if varyingFrames.isEmpty {
            if constantFrames == nil { constantFrames = frames32 }
            if constantFrames != frames32 {
                // The first that differs: from now on every packet's count is kept.
                varyingFrames = [Int32](repeating: constantFrames ?? 0, count: sizes.count - 1)
                varyingFrames.reserveCapacity(sizes.capacity)
                varyingFrames.append(frames32)
                constantFrames = nil
            }
        } else {
            varyingFrames.append(frames32)
        }
        totalFrames += Int64(frames)
    }

    func offset(_ packet: Int) -> Int64 { wide ? wideOffsets[packet] : Int64(narrowOffsets[packet]) }
    func size(_ packet: Int) -> Int { Int(sizes[packet]) }
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
