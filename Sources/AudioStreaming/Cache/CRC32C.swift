/// CRC-32C (Castagnoli, the polynomial iSCSI, ext4 and Btrfs check blocks with), reflected, as
/// RFC 3720 gives it: the disk cache's checksum of each block it holds. Slicing by eight: eight
/// tables, eight bytes a step.
enum CRC32C {
    private static let tables: [[UInt32]] = {
        var tables = [[UInt32]](repeating: [UInt32](repeating: 0, count: 256), count: 8)
        for byte in 0..<256 {
            var crc = UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
            tables[0][byte] = crc
        }
        for byte in 0..<256 {
            for table in 1..<8 {
                let previous = tables[table - 1][byte]
                tables[table][byte] = (previous >> 8) ^ tables[0][Int(previous & 0xFF)]
            }
        }
        return tables
    }()

    /// The checksum of `bytes`.
    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        let t = tables
        var index = 0
        let count = bytes.count
        t[0].withUnsafeBufferPointer { t0 in t[1].withUnsafeBufferPointer { t1 in t[2].withUnsafeBufferPointer { t2 in
        t[3].withUnsafeBufferPointer { t3 in t[4].withUnsafeBufferPointer { t4 in t[5].withUnsafeBufferPointer { t5 in
        t[6].withUnsafeBufferPointer { t6 in t[7].withUnsafeBufferPointer { t7 in
            while count - index >= 8 {
                let low = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: index, as: UInt32.self)) ^ crc
                let high = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: index + 4, as: UInt32.self))
                crc = t7[Int(low & 0xFF)] ^ t6[Int((low >> 8) & 0xFF)] ^ t5[Int((low >> 16) & 0xFF)] ^ t4[Int(low >> 24)]
                    ^ t3[Int(high & 0xFF)] ^ t2[Int((high >> 8) & 0xFF)] ^ t1[Int((high >> 16) & 0xFF)] ^ t0[Int(high >> 24)]
                index += 8
            }
            while index < count {
                crc = (crc >> 8) ^ t0[Int((crc ^ UInt32(bytes[index])) & 0xFF)]
                index += 1
            }
        } } } } } } } }
        return ~crc
    }

    static func checksum(_ bytes: [UInt8]) -> UInt32 { bytes.withUnsafeBytes { checksum($0) } }
}
