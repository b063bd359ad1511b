/// ID3v2 tags (2.2, 2.3, 2.4): their size, and the title/artist/album, user text (TXXX), attached
/// pictures (APIC) and iTunSMPB they carry.
enum ID3v2 {
    /// Most bytes of a tag kept for reading frames, cover art included (FLAC's metadata is read to
    /// the same size); the rest of a larger tag is skipped.
    static let readCap = 16 << 20

    /// Total size of the tag starting at `header` (10 bytes), including a footer; nil if not a tag.
    static func totalSize(header: [UInt8]) -> Int? {
        guard header.count >= 10, header[0] == 0x49, header[1] == 0x44, header[2] == 0x33,
              header[3] >= 2, header[3] <= 4, header[4] != 0xFF,
              header[6...9].allSatisfy({ $0 < 0x80 }) else { return nil }
        let size = header[6...9].reduce(0) { $0 << 7 | Int($1) }
        let footer = header[3] == 4 && header[5] & 0x10 != 0 ? 10 : 0
        return 10 + size + footer
    }

    struct Contents {
        var metadata = AudioFileMetadata()
        /// The iTunSMPB text, if a COMM or TXXX frame carries one.
        var iTunSMPB: String?
        /// HLS packed audio: the 33-bit 90 kHz PTS of the PRIV frame
        /// `com.apple.streaming.transportStreamTimestamp`.
        var transportStreamTimestamp: Int64?
    }

    static let transportStreamTimestampOwner = Array("com.apple.streaming.transportStreamTimestamp".utf8) + [0]

    /// Reads frames from the first bytes of a tag (header included).
    static func parse(_ tag: [UInt8]) -> Contents {
        var contents = Contents()
        guard tag.count >= 10 else { return contents }
        let version = tag[3], flags = tag[5]
        var body = Array(tag[10...])
        if flags & 0x80 != 0 && version < 4 { body = removeUnsynchronisation(body) }
        var offset = 0
        if flags & 0x40 != 0 && version >= 3 {
            guard body.count >= 4 else { return contents }
            let size = version == 4 ? body[0..<4].reduce(0) { $0 << 7 | Int($1 & 0x7F) }
                                    : body[0..<4].reduce(0) { $0 << 8 | Int($1) } + 4
            offset = size
        }
        let idLength = version == 2 ? 3 : 4, headerLength = version == 2 ? 6 : 10
        while offset + headerLength <= body.count {
            let idBytes = body[offset..<(offset + idLength)]
            guard idBytes.allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) }) else { break }
            let id = String(decoding: idBytes, as: UTF8.self)
            var size: Int
            var frameFlags: UInt8 = 0
            if version == 2 {
                size = Int(body[offset + 3]) << 16 | Int(body[offset + 4]) << 8 | Int(body[offset + 5])
            } else if version == 3 {
                size = body[(offset + 4)..<(offset + 8)].reduce(0) { $0 << 8 | Int($1) }
                frameFlags = body[offset + 9]
            } else {
                size = body[(offset + 4)..<(offset + 8)].reduce(0) { $0 << 7 | Int($1 & 0x7F) }
                frameFlags = body[offset + 9]
            }
            let start = offset + headerLength
            guard size > 0, start + size <= body.count else { break }
            var data = Array(body[start..<(start + size)])
            offset = start + size
            // Compressed or encrypted frames are skipped; grouping and length prefixes are stripped.
            if version == 3 {
                if frameFlags & 0xC0 != 0 { continue }
                if frameFlags & 0x20 != 0 { data = Array(data.dropFirst(1)) }
            } else if version == 4 {
                if frameFlags & 0x0C != 0 { continue }
                if frameFlags & 0x40 != 0 { data = Array(data.dropFirst(1)) }
                if frameFlags & 0x01 != 0 { data = Array(data.dropFirst(4)) }
                if frameFlags & 0x02 != 0 || flags & 0x80 != 0 { data = removeUnsynchronisation(data) }
            }
            switch id {
            case "TIT2", "TT2": contents.metadata.title = contents.metadata.title ?? text(data)
            case "TPE1", "TP1": contents.metadata.artist = contents.metadata.artist ?? text(data)
            case "TALB", "TAL": contents.metadata.album = contents.metadata.album ?? text(data)
            case "APIC", "PIC":
                if let picture = picture(data, version: version) { contents.metadata.pictures.append(picture) }
            case "PRIV":
                let owner = Self.transportStreamTimestampOwner
                if data.count == owner.count + 8, data.starts(with: owner) {
                    contents.transportStreamTimestamp = data[owner.count...].reduce(Int64(0)) { $0 << 8 | Int64($1) } & ((1 << 33) - 1)
                }
            case "COMM", "COM", "TXXX", "TXX":
                guard let (description, value) = describedText(data, hasLanguage: id.hasPrefix("CO")) else { break }
                if description == "iTunSMPB" {
                    contents.iTunSMPB = value
                } else if id.hasPrefix("TX"), !description.isEmpty, contents.metadata.tags[description] == nil {
                    // A user text frame under its description (REPLAYGAIN_TRACK_GAIN, …), the first of a name.
                    contents.metadata.tags[description] = value
                }
            default: break
            }
        }
        return contents
    }

    /// An attached picture: `APIC` (encoding, MIME type, picture type, description, image) or
    /// ID3v2.2's `PIC` (a three-letter image format instead of the MIME type).
    static func picture(_ data: [UInt8], version: UInt8) -> AudioFilePicture? {
        guard let encoding = data.first else { return nil }
        var at = 1
        let mime: String
        if version == 2 {
            guard data.count >= 4 else { return nil }
            let format = String(decoding: data[1..<4], as: UTF8.self).uppercased()
            mime = format == "JPG" ? "image/jpeg" : format == "-->" ? "-->" : "image/" + format.lowercased()
            at = 4
        } else {
            guard let end = data[1...].firstIndex(of: 0) else { return nil }
            mime = String(String.UnicodeScalarView(data[1..<end].map { Unicode.Scalar($0) }))
            at = end + 1
        }
        guard at < data.count else { return nil }
        let type = Int(data[at])
        at += 1
        // The description ends at the encoding's terminator: one zero byte, or two on a pair boundary.
        var end = at
        if encoding == 1 || encoding == 2 {
            while end + 1 < data.count, data[end] != 0 || data[end + 1] != 0 { end += 2 }
            guard end + 1 < data.count else { return nil }
        } else {
            guard let zero = data[at...].firstIndex(of: 0) else { return nil }
            end = zero
        }
        let description = decode(Array(data[at..<end]), encoding: encoding).first ?? ""
        let image = Array(data[(end + (encoding == 1 || encoding == 2 ? 2 : 1))...])
        let facts = AudioFilePicture.imageFacts(image)
        return AudioFilePicture(type: type, mimeType: mime.isEmpty ? facts?.mimeType ?? "image/" : mime, description: description,
                                width: facts?.width ?? 0, height: facts?.height ?? 0, data: image)
    }

    static func removeUnsynchronisation(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var previous: UInt8 = 0
        for byte in bytes {
            if !(previous == 0xFF && byte == 0x00) { out.append(byte) }
            previous = byte
        }
        return out
    }

    /// A text frame's first value.
    static func text(_ data: [UInt8]) -> String? {
        guard let encoding = data.first else { return nil }
        let value = decode(Array(data.dropFirst()), encoding: encoding).first ?? ""
        return value.isEmpty ? nil : value
    }

    /// (description, text) of a COMM (with a language code) or TXXX frame.
    static func describedText(_ data: [UInt8], hasLanguage: Bool) -> (String, String)? {
        guard let encoding = data.first else { return nil }
        let rest = Array(data.dropFirst(hasLanguage ? 4 : 1))
        let parts = decode(rest, encoding: encoding)
        guard parts.count >= 2 else { return nil }
        return (parts[0], parts[1])
    }

    /// Splits on the encoding's terminator and decodes each part.
    static func decode(_ bytes: [UInt8], encoding: UInt8) -> [String] {
        var parts: [String] = []
        if encoding == 1 || encoding == 2 {
            var units: [UInt16] = []
            var bigEndian = encoding == 2
            var index = 0
            var atStart = true
            while index + 1 < bytes.count {
                let pair = (bytes[index], bytes[index + 1])
                index += 2
                if atStart && encoding == 1 {
                    atStart = false
                    if pair == (0xFF, 0xFE) { bigEndian = false; continue }
                    if pair == (0xFE, 0xFF) { bigEndian = true; continue }
                }
                let unit = bigEndian ? UInt16(pair.0) << 8 | UInt16(pair.1) : UInt16(pair.1) << 8 | UInt16(pair.0)
                if unit == 0 {
                    parts.append(String(decoding: units, as: UTF16.self))
                    units.removeAll()
                    atStart = true
                } else {
                    units.append(unit)
                }
            }
            if !units.isEmpty { parts.append(String(decoding: units, as: UTF16.self)) }
        } else {
            for piece in bytes.split(separator: 0, omittingEmptySubsequences: false) {
                parts.append(encoding == 3 ? String(decoding: piece, as: UTF8.self)
                                           : String(String.UnicodeScalarView(piece.map { Unicode.Scalar($0) })))
            }
            while parts.last == "" { parts.removeLast() }
        }
        return parts
    }
}

/// The iTunSMPB text: words of hex, [1] priming, [2] remainder, [3] valid frames.
func parseITunSMPB(_ text: String) -> (priming: Int, remainder: Int, valid: Int64)? {
    let words = text.split(whereSeparator: { $0 == " " || $0 == "\0" }).map(String.init)
    guard words.count >= 4, let priming = Int(words[1], radix: 16), let remainder = Int(words[2], radix: 16),
          let valid = Int64(words[3], radix: 16), valid > 0 else { return nil }
    return (priming, remainder, valid)
}

extension AudioFileMetadata {
    /// The title, artist and album of an ID3v2 tag (versions 2.2–2.4), such as the timed metadata
    /// of an HLS or transport stream; nil when `tag` is not one.
    public init?(id3v2 tag: [UInt8]) {
        guard ID3v2.totalSize(header: Array(tag.prefix(10))) != nil else { return nil }
        self = ID3v2.parse(tag).metadata
    }
}
