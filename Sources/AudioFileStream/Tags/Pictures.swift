extension AudioFilePicture {
    /// A picture from an image file's bytes: its MIME type and size read from the image itself
    /// (PNG, JPEG, GIF, BMP or WebP); nil when the bytes are none of those.
    ///
    /// - Parameters:
    ///   - image: the image file's bytes, stored as they are.
    ///   - type: the ID3v2 picture type (3, the front cover, by default).
    ///   - description: a short text about the picture.
    public init?(image: [UInt8], type: Int = 3, description: String = "") {
        guard let (mimeType, width, height) = Self.imageFacts(image) else { return nil }
        self.init(type: type, mimeType: mimeType, description: description, width: width, height: height, data: image)
    }

    /// The MIME type and pixel size of an image file; nil when it is not one of the known kinds.
    static func imageFacts(_ bytes: [UInt8]) -> (mimeType: String, width: Int, height: Int)? {
        func be(_ at: Int, _ count: Int) -> Int { bytes[at..<(at + count)].reduce(0) { $0 << 8 | Int($1) } }
        func le(_ at: Int, _ count: Int) -> Int { bytes[at..<(at + count)].reversed().reduce(0) { $0 << 8 | Int($1) } }
        if bytes.count >= 24, bytes.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]), bytes[12..<16].elementsEqual("IHDR".utf8) {
            return ("image/png", be(16, 4), be(20, 4))
        }
        if bytes.count >= 10, bytes.starts(with: Array("GIF8".utf8)) {
            return ("image/gif", le(6, 2), le(8, 2))
        }
        if bytes.count >= 26, bytes.starts(with: Array("BM".utf8)) {
            return ("image/bmp", le(18, 4), abs(Int(Int32(truncatingIfNeeded: le(22, 4)))))
        }
        if bytes.count >= 30, bytes.starts(with: Array("RIFF".utf8)), bytes[8..<12].elementsEqual("WEBP".utf8) {
            switch String(decoding: bytes[12..<16], as: UTF8.self) {
            case "VP8 ": return ("image/webp", le(26, 2) & 0x3FFF, le(28, 2) & 0x3FFF)
            case "VP8L" where bytes.count >= 25:
                let bits = le(21, 4)
                return ("image/webp", bits & 0x3FFF + 1, (bits >> 14) & 0x3FFF + 1)
            case "VP8X": return ("image/webp", le(24, 3) + 1, le(27, 3) + 1)
            default: return ("image/webp", 0, 0)
            }
        }
        if bytes.count >= 4, bytes[0] == 0xFF, bytes[1] == 0xD8 {
            // JPEG: the markers up to the first start of frame (SOF0–SOF15 but DHT, JPG and DAC).
            var at = 2
            while at + 4 <= bytes.count, bytes[at] == 0xFF {
                let marker = bytes[at + 1]
                if marker == 0xFF { at += 1; continue }
                if marker == 0xD8 || (0xD0...0xD7).contains(marker) || marker == 0x01 { at += 2; continue }
                let length = be(at + 2, 2)
                if (0xC0...0xCF).contains(marker), marker != 0xC4, marker != 0xC8, marker != 0xCC {
                    guard at + 9 <= bytes.count else { break }
                    return ("image/jpeg", be(at + 7, 2), be(at + 5, 2))
                }
                if marker == 0xDA || length < 2 { break }
                at += 2 + length
            }
            return ("image/jpeg", 0, 0)
        }
        return nil
    }
}

/// FLAC's PICTURE metadata block (big-endian lengths), which Ogg streams also carry base64-encoded
/// in a `METADATA_BLOCK_PICTURE` comment.
enum FLACPicture {
    static func parse(_ bytes: [UInt8]) -> AudioFilePicture? {
        var at = 0
        func u32() -> Int? {
            guard at + 4 <= bytes.count else { return nil }
            defer { at += 4 }
            return bytes[at..<(at + 4)].reduce(0) { $0 << 8 | Int($1) }
        }
        func text() -> String? {
            guard let length = u32(), at + length <= bytes.count else { return nil }
            defer { at += length }
            return String(decoding: bytes[at..<(at + length)], as: UTF8.self)
        }
        guard let type = u32(), let mime = text(), let description = text(), let width = u32(), let height = u32(),
              u32() != nil, u32() != nil, let length = u32(), at + length <= bytes.count else { return nil }
        return AudioFilePicture(type: type, mimeType: mime, description: description, width: width, height: height,
                                data: Array(bytes[at..<(at + length)]))
    }

    /// The block's body for `picture`: colour depth and palette size are written as 0 (unknown).
    static func encode(_ picture: AudioFilePicture) -> [UInt8] {
        var out: [UInt8] = []
        func u32(_ value: Int) { for shift in stride(from: 24, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: value >> shift)) } }
        let mime = Array(picture.mimeType.utf8), description = Array(picture.description.utf8)
        u32(picture.type)
        u32(mime.count)
        out += mime
        u32(description.count)
        out += description
        u32(picture.width)
        u32(picture.height)
        u32(0)
        u32(0)
        u32(picture.data.count)
        out += picture.data
        return out
    }
}
