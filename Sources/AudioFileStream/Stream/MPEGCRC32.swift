/// The CRC-32 of polynomial 0x04C11DB7, not reflected. MPEG-2 PSI sections start it at all ones
/// (over a whole section including its CRC field the result is 0); Ogg pages start it at 0, with
/// the page's CRC field taken as zero.
enum MPEGCRC32 {
    private static let table: [UInt32] = (0..<256).map { index -> UInt32 in
        var crc = UInt32(index) << 24
        for _ in 0..<8 { crc = crc & 0x8000_0000 != 0 ? (crc << 1) ^ 0x04C1_1DB7 : crc << 1 }
        return crc
    }

    /// An MPEG-2 section's CRC (initial value all ones).
    static func checksum(_ bytes: [UInt8]) -> UInt32 { bytes.withUnsafeBytes { checksum($0, initial: 0xFFFF_FFFF) } }

    /// The CRC of `bytes` from `initial`, the bytes at the indices in `zeroing` taken as 0.
    static func checksum(_ bytes: UnsafeRawBufferPointer, initial: UInt32, zeroing: Range<Int> = 0..<0) -> UInt32 {
        var crc = initial
        for index in 0..<bytes.count {
            let byte = zeroing.contains(index) ? 0 : bytes[index]
            crc = (crc << 8) ^ table[Int((crc >> 24) ^ UInt32(byte))]
        }
        return crc
    }
}
