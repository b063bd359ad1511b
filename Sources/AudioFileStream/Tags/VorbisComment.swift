/// Vorbis comments (Vorbis I §5), the tags of Ogg Vorbis, Ogg Opus (`OpusTags`) and FLAC
/// (`VORBIS_COMMENT`): a vendor string and `NAME=value` fields, lengths little-endian.
enum VorbisComment {
    /// The fields of a comment block starting at `offset` of `bytes`; nil when malformed.
    static func fields(_ bytes: [UInt8], from offset: Int = 0) -> [(name: String, value: String)]? {
        guard let raw = rawFields(bytes, from: offset) else { return nil }
        return raw.fields.compactMap { field in
            guard let equals = field.firstIndex(of: 0x3D) else { return nil }
            return (String(decoding: field[..<equals], as: UTF8.self).uppercased(), String(decoding: field[(equals + 1)...], as: UTF8.self))
        }
    }

    /// The vendor string and the fields as stored (names in their own case) of the comment at
    /// `offset`, and where it ends, for rewriting it; nil when malformed.
    static func rawFields(_ bytes: [UInt8], from offset: Int = 0) -> (vendor: [UInt8], fields: [[UInt8]], end: Int)? {
        var at = offset
        func u32() -> Int? {
            guard at + 4 <= bytes.count else { return nil }
            defer { at += 4 }
            return (0..<4).reduce(0) { $0 | Int(bytes[at + $1]) << (8 * $1) }
        }
        guard let vendorLength = u32(), at + vendorLength <= bytes.count else { return nil }
        let vendor = Array(bytes[at..<(at + vendorLength)])
        at += vendorLength
        guard let count = u32(), count <= bytes.count / 4 else { return nil }
        var fields: [[UInt8]] = []
        for _ in 0..<count {
            guard let length = u32(), at + length <= bytes.count else { return nil }
            fields.append(Array(bytes[at..<(at + length)]))
            at += length
        }
        return (vendor, fields, at)
    }

    /// A comment's bytes (without Vorbis's framing bit: FLAC and OpusTags have none).
    static func encode(vendor: [UInt8], fields: [[UInt8]]) -> [UInt8] {
        var out: [UInt8] = []
        func u32(_ value: Int) { for shift in stride(from: 0, to: 32, by: 8) { out.append(UInt8(truncatingIfNeeded: value >> shift)) } }
        u32(vendor.count)
        out += vendor
        u32(fields.count)
        for field in fields {
            u32(field.count)
            out += field
        }
        return out
    }

    /// `fields` with every field named in `changes` (any case) removed, then the non-nil values
    /// appended in order: the other fields keep their order and bytes.
    static func applying(_ changes: [(name: String, value: String?)], to fields: [[UInt8]]) -> [[UInt8]] {
        let names = Set(changes.map { $0.name.uppercased() })
        var kept = fields.filter { field in
            guard let equals = field.firstIndex(of: 0x3D) else { return true }
            return !names.contains(String(decoding: field[..<equals], as: UTF8.self).uppercased())
        }
        for (name, value) in changes {
            if let value { kept.append(Array("\(name)=\(value)".utf8)) }
        }
        return kept
    }

    /// The metadata the fields give: TITLE, ARTIST and ALBUM, pictures from
    /// `METADATA_BLOCK_PICTURE`, the rest as tags.
    static func metadata(_ fields: [(name: String, value: String)]) -> AudioFileMetadata {
        var metadata = AudioFileMetadata()
        for (name, value) in fields {
            switch name {
            case "METADATA_BLOCK_PICTURE":
                if let bytes = base64(value), let picture = FLACPicture.parse(bytes) { metadata.pictures.append(picture) }
            case "TITLE" where metadata.title == nil: metadata.title = value
            case "ARTIST" where metadata.artist == nil: metadata.artist = value
            case "ALBUM" where metadata.album == nil: metadata.album = value
            case "CUESHEET" where metadata.cueSheet == nil:
                // The sheet of the album this file holds (its FILE lines name this file).
                metadata.cueSheet = try? CueSheet(text: value)
                metadata.tags[name] = value
            default: metadata.tags[name] = metadata.tags[name].map { "\($0); \(value)" } ?? value
            }
        }
        return metadata
    }

    /// Decodes base64 (RFC 4648, padding optional, whitespace ignored); nil when malformed.
    static func base64(_ text: String) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count * 3 / 4)
        var accumulator: UInt32 = 0, bits = 0
        for byte in text.utf8 {
            let value: UInt32
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = UInt32(byte - UInt8(ascii: "A"))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = UInt32(byte - UInt8(ascii: "a")) + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = UInt32(byte - UInt8(ascii: "0")) + 52
            case UInt8(ascii: "+"): value = 62
            case UInt8(ascii: "/"): value = 63
            case UInt8(ascii: "="), UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"): continue
            default: return nil
            }
            accumulator = accumulator << 6 | value
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        return out
    }

    /// Encodes base64 (RFC 4648, with padding), as `METADATA_BLOCK_PICTURE` carries a picture.
    static func base64(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var at = 0
        while at < bytes.count {
            let count = min(3, bytes.count - at)
            var group = 0
            for index in 0..<3 { group = group << 8 | (index < count ? Int(bytes[at + index]) : 0) }
            for index in 0..<4 {
                out.append(index <= count ? alphabet[(group >> (18 - 6 * index)) & 0x3F] : UInt8(ascii: "="))
            }
            at += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}
