import BufferQueue

/// Reads big- or little-endian fields from a byte array, throwing instead of reading out of bounds.
struct FieldReader {
    let bytes: [UInt8]
    var offset: Int
    let end: Int
    /// Absolute file offset of `bytes[0]`, for messages.
    let base: Int64
    let container: AudioFileType

    init(_ bytes: [UInt8], from: Int = 0, to: Int? = nil, base: Int64, container: AudioFileType) {
        self.bytes = bytes
        offset = from
        end = min(to ?? bytes.count, bytes.count)
        self.base = base
        self.container = container
    }

    var remaining: Int { end - offset }
    var absoluteOffset: Int64 { base + Int64(offset) }

    func need(_ count: Int, _ what: @autoclosure () -> String) throws {
        guard count >= 0, count <= remaining else {
            throw AudioFileStreamError(.invalidData, container, absoluteOffset,
                "\(what()) needs \(count) bytes but only \(max(remaining, 0)) remain")
        }
    }

    mutating func u8(_ what: @autoclosure () -> String = "a field") throws -> UInt8 {
        try need(1, what())
        defer { offset += 1 }
        return bytes[offset]
    }
    mutating func u16be(_ what: @autoclosure () -> String = "a field") throws -> UInt16 {
        try need(2, what()); defer { offset += 2 }
        return UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
    }
    mutating func u24be(_ what: @autoclosure () -> String = "a field") throws -> UInt32 {
        try need(3, what()); defer { offset += 3 }
        return UInt32(bytes[offset]) << 16 | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2])
    }
    mutating func u32be(_ what: @autoclosure () -> String = "a field") throws -> UInt32 {
        try need(4, what()); defer { offset += 4 }
        return UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
    }
    mutating func u64be(_ what: @autoclosure () -> String = "a field") throws -> UInt64 {
        let high = try u32be(what()), low = try u32be(what())
        return UInt64(high) << 32 | UInt64(low)
    }
    mutating func u16le(_ what: @autoclosure () -> String = "a field") throws -> UInt16 {
        try need(2, what()); defer { offset += 2 }
        return UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8
    }
    mutating func u32le(_ what: @autoclosure () -> String = "a field") throws -> UInt32 {
        try need(4, what()); defer { offset += 4 }
        return UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16 | UInt32(bytes[offset + 3]) << 24
    }
    mutating func tag(_ what: @autoclosure () -> String = "a four-character code") throws -> String { fourCC(try u32be(what())) }
    mutating func take(_ count: Int, _ what: @autoclosure () -> String = "a field") throws -> [UInt8] {
        try need(count, what()); defer { offset += count }
        return Array(bytes[offset..<(offset + count)])
    }
    mutating func skip(_ count: Int, _ what: @autoclosure () -> String = "a field") throws {
        try need(count, what()); offset += count
    }
    /// A variable-length integer as CAF writes them: 7 bits a byte, high bit = more follow.
    mutating func varint(_ what: @autoclosure () -> String = "a variable-length integer") throws -> Int64 {
        var value: Int64 = 0
        for _ in 0..<9 {
            let byte = try u8(what())
            value = value << 7 | Int64(byte & 0x7F)
            if byte & 0x80 == 0 { return value }
        }
        throw AudioFileStreamError(.invalidData, container, absoluteOffset, "\(what()) runs longer than 9 bytes")
    }
}

/// Four bytes as text, `????` for unprintable ones.
func fourCC(_ value: UInt32) -> String {
    var text = ""
    for shift in stride(from: 24, through: 0, by: -8) {
        let byte = UInt8(truncatingIfNeeded: value >> UInt32(shift))
        text.append((32...126).contains(byte) ? Character(Unicode.Scalar(byte)) : "?")
    }
    return text
}
