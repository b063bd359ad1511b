/// Vorbis comments (Vorbis I §5), the tags of Ogg Vorbis, Ogg Opus (`OpusTags`) and FLAC
/// (`VORBIS_COMMENT`): a vendor string and `NAME=value` fields, lengths little-endian.
enum VorbisComment {
    /// The fields of a comment block starting at `offset` of `bytes`; nil when malformed.
    static func fields(_ bytes: [UInt8], from offset: Int = 0) -> [(name: String, value: String)]? {
        var at = offset
        func u32() -> Int? {
            guard at + 4 <= bytes.count else { return nil }
            defer { at += 4 }
            return (0..<4).reduce(0) { $0 | Int(bytes[at + $1]) << (8 * $1) }
        }
        guard let vendor = u32(), at + vendor <= bytes.count else { return nil }
        at += vendor
        guard let count = u32(), count <= bytes.count / 4 else { return nil }
        var fields: [(String, String)] = []
        for _ in 0..<count {
            guard let length = u32(), at + length <= bytes.count else { return nil }
            let field = bytes[at..<(at + length)]
            at += length
            guard let equals = field.firstIndex(of: 0x3D) else { continue }
            fields.append((String(decoding: field[..<equals], as: UTF8.self).uppercased(),
                           String(decoding: field[(equals + 1)...], as: UTF8.self)))
        }
        return fields
    }

    /// The metadata the fields give: TITLE, ARTIST and ALBUM, the rest as tags.
    static func metadata(_ fields: [(name: String, value: String)]) -> AudioFileMetadata {
        var metadata = AudioFileMetadata()
        for (name, value) in fields {
            switch name {
            case "TITLE" where metadata.title == nil: metadata.title = value
            case "ARTIST" where metadata.artist == nil: metadata.artist = value
            case "ALBUM" where metadata.album == nil: metadata.album = value
            default: metadata.tags[name] = metadata.tags[name].map { "\($0); \(value)" } ?? value
            }
        }
        return metadata
    }
}
