/// Ogg pages in a file's bytes, for tests that edit them: where each lies, and its CRC.
public enum OggTestPages {
    /// The byte ranges of the pages, in order.
    public static func ranges(_ bytes: [UInt8]) -> [Range<Int>] {
        var ranges: [Range<Int>] = [], at = 0
        while at + 27 <= bytes.count {
            let count = Int(bytes[at + 26])
            guard at + 27 + count <= bytes.count else { break }
            let size = 27 + count + bytes[(at + 27)..<(at + 27 + count)].reduce(0) { $0 + Int($1) }
            ranges.append(at..<min(at + size, bytes.count))
            at += size
        }
        return ranges
    }

    /// A page's granule position.
    public static func granule(_ bytes: [UInt8], _ page: Range<Int>) -> Int64 {
        (0..<8).reduce(Int64(0)) { $0 | Int64(bytes[page.lowerBound + 6 + $1]) << (8 * Int64($1)) }
    }

    /// Sets a page's CRC (polynomial 0x04C11DB7, initial 0, the CRC field taken as 0) after its
    /// bytes were changed.
    public static func fixCRC(_ bytes: inout [UInt8], page: Range<Int>) {
        var crc: UInt32 = 0
        for (index, byte) in bytes[page].enumerated() {
            crc ^= UInt32((22..<26).contains(index) ? 0 : byte) << 24
            for _ in 0..<8 { crc = crc & 0x8000_0000 != 0 ? (crc << 1) ^ 0x04C1_1DB7 : crc << 1 }
        }
        for index in 0..<4 { bytes[page.lowerBound + 22 + index] = UInt8(truncatingIfNeeded: crc >> (8 * index)) }
    }
}
