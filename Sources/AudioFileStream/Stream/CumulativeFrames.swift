/// The frames before each packet read so far, for parsers whose packets vary in frames (Ogg,
/// FLAC): exact frame ↔ packet lookups by binary search, in the packets' order from the first.
struct CumulativeFrames {
    /// Frames before packet `i`, one more entry than packets.
    private var before: [Int64] = [0]

    /// Packets counted.
    var count: Int { before.count - 1 }
    /// Frames of every packet counted.
    var total: Int64 { before[before.count - 1] }

    mutating func append(_ frames: Int) { before.append(total + Int64(frames)) }

    /// Forgets packet `packet` and those after it.
    mutating func removeAll(from packet: Int) { before.removeSubrange((max(packet, 0) + 1)...) }

    /// Frames before packet `packet`; nil past the packets counted.
    func frames(beforePacket packet: Int64) -> Int64? {
        guard packet >= 0, packet < Int64(before.count) else { return nil }
        return before[Int(packet)]
    }

    /// The packet holding frame `frame` and the frame's offset in it; nil past the packets counted.
    func packet(forFrame frame: Int64) -> (packet: Int64, frameOffset: Int)? {
        guard frame >= 0, frame < total else { return nil }
        var low = 0, high = before.count - 1
        while low + 1 < high {
            let middle = (low + high) / 2
            if before[middle] <= frame { low = middle } else { high = middle }
        }
        return (Int64(low), Int(frame - before[low]))
    }
}
