/// Reads bits most-significant first (MPEG headers, AudioSpecificConfig).
struct BitReader {
    let bytes: [UInt8]
    private(set) var bitOffset = 0
    init(_ bytes: [UInt8]) { self.bytes = bytes }
    var bitsLeft: Int { bytes.count * 8 - bitOffset }

    mutating func read(_ count: Int) -> UInt32? {
        guard count <= 32, count <= bitsLeft else { return nil }
        var value: UInt32 = 0
        for _ in 0..<count {
            let byte = bytes[bitOffset >> 3]
            let bit = (byte >> (7 - UInt8(bitOffset & 7))) & 1
            value = value << 1 | UInt32(bit)
            bitOffset += 1
        }
        return value
    }
}
