/// Vorbis's three header packets (Vorbis I §4.2), which are the magic cookie of
/// ``AudioFormatID/vorbis`` in Xiph lacing. The container layer needs the block sizes and the
/// modes' block flags from them to count each audio packet's frames (Vorbis has no frame count in
/// its packets); the decoder hands the packets to libvorbis. One reader for both.
public struct VorbisHeaders: Hashable, Sendable {
    /// The identification, comment and setup packets.
    public var packets: [[UInt8]]
    /// Channels, 1–255.
    public var channels: Int
    /// Samples per second.
    public var sampleRate: Int
    /// Nominal bit rate in bits per second (0 when the header leaves it unset).
    public var nominalBitRate: Int
    /// The short and long block sizes (powers of two, 64–8192).
    public var blockSizes: (short: Int, long: Int)
    /// For each mode of the setup header, whether it uses the long block.
    public var modeBlockFlags: [Bool]

    public static func == (lhs: VorbisHeaders, rhs: VorbisHeaders) -> Bool { lhs.packets == rhs.packets }
    public func hash(into hasher: inout Hasher) { hasher.combine(packets) }

    /// Reads the three packets; nil when they are not Vorbis headers, with `why` saying what is wrong.
    public init?(packets: [[UInt8]], why: inout String) {
        guard packets.count == 3 else {
            why = "Vorbis needs 3 header packets, not \(packets.count)"
            return nil
        }
        let id = packets[0]
        for (index, type) in [(0, 1), (1, 3), (2, 5)] where !(packets[index].count >= 7 && packets[index][0] == UInt8(type)
                                                               && packets[index][1...6].elementsEqual("vorbis".utf8)) {
            why = "Vorbis header packet \(index + 1) is not a \(["identification", "comment", "setup"][index]) header"
            return nil
        }
        guard id.count >= 30 else {
            why = "the Vorbis identification header has \(id.count) bytes, not 30"
            return nil
        }
        func u32(_ at: Int) -> Int { (0..<4).reduce(0) { $0 | Int(id[at + $1]) << (8 * $1) } }
        guard u32(7) == 0 else {
            why = "Vorbis version \(u32(7)) is not 0"
            return nil
        }
        channels = Int(id[11])
        sampleRate = u32(12)
        nominalBitRate = Int(Int32(truncatingIfNeeded: u32(20)))
        if nominalBitRate < 0 { nominalBitRate = 0 }
        let short = 1 << Int(id[28] & 0x0F), long = 1 << Int(id[28] >> 4)
        guard channels > 0, sampleRate > 0, (64...8192).contains(short), (64...8192).contains(long), short <= long, id[29] & 1 == 1 else {
            why = "the Vorbis identification header is invalid (\(channels) channels, \(sampleRate) Hz, blocks \(short)/\(long))"
            return nil
        }
        blockSizes = (short, long)
        guard let flags = Self.modeBlockFlags(setup: packets[2]) else {
            why = "the modes at the end of the Vorbis setup header cannot be found"
            return nil
        }
        modeBlockFlags = flags
        self.packets = packets
    }

    /// Reads the headers from a magic cookie (Xiph lacing).
    public init?(magicCookie: [UInt8], why: inout String) {
        guard let packets = Self.unlace(magicCookie) else {
            why = "the Vorbis magic cookie (\(magicCookie.count) bytes) is not three Xiph-laced header packets"
            return nil
        }
        self.init(packets: packets, why: &why)
    }

    /// The magic cookie: the packets in Xiph lacing.
    public var magicCookie: [UInt8] { Self.lace(packets) }

    /// The block size of an audio packet, from its mode; nil for a header or malformed packet.
    public func blockSize(ofPacket packet: UnsafeRawBufferPointer) -> Int? {
        guard let first = packet.first, first & 1 == 0 else { return nil }
        let bits = Self.bitsToHold(modeBlockFlags.count - 1)
        var mode = 0
        for bit in 0..<bits {
            let position = 1 + bit
            guard position / 8 < packet.count else { return nil }
            mode |= Int(packet[position / 8] >> UInt8(position % 8) & 1) << bit
        }
        guard mode < modeBlockFlags.count else { return nil }
        return modeBlockFlags[mode] ? blockSizes.long : blockSizes.short
    }

    /// Frames a packet of block size `current` adds after one of block size `previous` (nil:
    /// the first packet of a decode, which adds none).
    public static func frames(previousBlock previous: Int?, currentBlock current: Int) -> Int {
        guard let previous else { return 0 }
        return previous / 4 + current / 4
    }

    // MARK: Xiph lacing

    /// Packets in Xiph lacing: count − 1, the sizes of all but the last, the packets.
    public static func lace(_ packets: [[UInt8]]) -> [UInt8] {
        guard !packets.isEmpty else { return [] }
        var out: [UInt8] = [UInt8(truncatingIfNeeded: packets.count - 1)]
        for packet in packets.dropLast() {
            var size = packet.count
            while size >= 255 {
                out.append(255)
                size -= 255
            }
            out.append(UInt8(size))
        }
        for packet in packets { out += packet }
        return out
    }

    /// The packets of a Xiph-laced block; nil when malformed.
    public static func unlace(_ bytes: [UInt8]) -> [[UInt8]]? {
        guard let first = bytes.first else { return nil }
        let count = Int(first) + 1
        var position = 1
        var sizes: [Int] = []
        for _ in 0..<(count - 1) {
            var size = 0
            while true {
                guard position < bytes.count else { return nil }
                let value = Int(bytes[position])
                position += 1
                size += value
                if value < 255 { break }
            }
            sizes.append(size)
        }
        let used = sizes.reduce(0, +)
        guard position + used <= bytes.count else { return nil }
        sizes.append(bytes.count - position - used)
        var packets: [[UInt8]] = []
        for size in sizes {
            packets.append(Array(bytes[position..<(position + size)]))
            position += size
        }
        return packets
    }

    // MARK: the modes

    /// The number of bits that hold `value` (Vorbis's `ilog`).
    static func bitsToHold(_ value: Int) -> Int {
        var bits = 0, rest = max(value, 0)
        while rest > 0 {
            bits += 1
            rest >>= 1
        }
        return bits
    }

    /// The block flag of each mode. The modes end the setup header, so they are found from the
    /// back, as every demuxer does without decoding the codebooks: the framing bit is the last
    /// bit set; before it, each mode is 41 bits (the flag, a 16-bit window type and a 16-bit
    /// transform type that must be 0, an 8-bit mapping), and before them the mode count − 1 in 6 bits.
    static func modeBlockFlags(setup: [UInt8]) -> [Bool]? {
        guard let lastByte = setup.lastIndex(where: { $0 != 0 }) else { return nil }
        let framing = lastByte * 8 + (7 - setup[lastByte].leadingZeroBitCount)
        func bit(_ position: Int) -> Int { Int(setup[position / 8] >> UInt8(position % 8) & 1) }
        func value(_ position: Int, _ width: Int) -> Int { (0..<width).reduce(0) { $0 | bit(position + $1) << $1 } }
        var found: Int?
        var count = 1
        // The smallest setup header is far past the 7-byte packet header.
        while count <= 64, framing - 41 * count - 6 >= 7 * 8 {
            let start = framing - 41 * count
            guard value(start + 1, 32) == 0 else { break }
            if value(start - 6, 6) == count - 1 { found = count }
            count += 1
        }
        guard let modes = found else { return nil }
        return (0..<modes).map { bit(framing - 41 * (modes - $0)) == 1 }
    }
}
