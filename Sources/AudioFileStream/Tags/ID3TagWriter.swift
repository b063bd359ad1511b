import BufferQueue

/// Rewrites the text frames of the ID3v2 tag at the front of an MP3 (or ADTS) file — the standard
/// names as ID3's own frames (`TIT2`, `TPE1`, `TALB`, `TRCK` …), others as user frames (`TXXX`),
/// pictures as `APIC` frames —
/// or puts a new ID3v2.4 tag there: in place when the frames fit the old tag's size (the padding
/// shrinks or grows), else the file is written anew beside it (the tag with 4 KiB of padding, the
/// audio copied byte for byte) and renamed over it. Every other frame is kept byte for byte.
enum ID3TagWriter {
    static let rewritePadding = 4096

    /// The standard names written as ID3's own text frames (every other name is a `TXXX` frame);
    /// `DATE` is `TDRC` in 2.4 and `TYER` in 2.3.
    static func frameID(for name: String, version: UInt8) -> String? {
        switch name.uppercased() {
        case "TITLE": return "TIT2"
        case "ARTIST": return "TPE1"
        case "ALBUM": return "TALB"
        case "ALBUMARTIST", "ALBUM ARTIST": return "TPE2"
        case "TRACKNUMBER", "TRACK": return "TRCK"
        case "DISCNUMBER", "DISC": return "TPOS"
        case "DATE", "YEAR": return version == 4 ? "TDRC" : "TYER"
        case "GENRE": return "TCON"
        case "COMPOSER": return "TCOM"
        default: return nil
        }
    }

    /// A frame for a change: its own text frame for a standard name, else `TXXX`.
    static func frame(_ name: String, _ value: String, version: UInt8) -> [UInt8] {
        frameID(for: name, version: version).map { textFrame(id: $0, value: value, version: version) }
            ?? textFrame(description: name, value: value, version: version)
    }

    static func update(_ file: FileDescriptor, path: String, head: [UInt8], _ changes: [(name: String, value: String?)],
                       pictures: [AudioFilePicture]?) throws -> AudioFileTagUpdate {
        for picture in pictures ?? [] where picture.type > 255 {
            throw AudioFileWriterError(.unsupportedFormat, path: path,
                                       "the picture \"\(picture.description)\" has type \(picture.type); an ID3v2 APIC frame holds types 0 to 255")
        }
        guard head.starts(with: Array("ID3".utf8)) else {
            // No tag: a new ID3v2.4 tag in front of the audio.
            let frames = changes.compactMap { change in change.value.map { frame(change.name, $0, version: 4) } }
                + (pictures ?? []).map { pictureFrame($0, version: 4) }
            let tag = encode(frames: frames.flatMap { $0 }, version: 4, padding: rewritePadding)
            try AudioFileRewrite.replace(path: path, original: file, head: tag, copyingFrom: 0)
            return .rewritten
        }
        guard head.count >= 10, let total = ID3v2.totalSize(header: head) else {
            throw AudioFileWriterError(.unsupportedFormat, path: path, "the ID3v2 header is damaged: the file is left as it is")
        }
        let version = head[3], flags = head[5]
        guard version == 3 || version == 4 else {
            throw AudioFileWriterError(.unsupportedFormat, path: path, "writing into an ID3v2.\(version) tag is not built (2.3 and 2.4 are): the file is left as it is")
        }
        guard flags & 0xD0 == 0 else {
            throw AudioFileWriterError(.unsupportedFormat, path: path,
                                       "the ID3v2 tag is unsynchronised or has an extended header or footer: not rewritten (the file is left as it is)")
        }
        let bodySize = total - 10
        var body = [UInt8](repeating: 0, count: bodySize)
        let got: Int
        do { got = try body.withUnsafeMutableBytes { (raw: UnsafeMutableRawBufferPointer) in try file.readAll(into: raw, at: 10) } } catch {
            throw AudioFileWriterError(.cannotCreate, path: path, byteOffset: 10, underlying: error as? SystemError, "cannot read the ID3v2 tag")
        }
        guard got == bodySize else {
            throw AudioFileWriterError(.unsupportedFormat, path: path, byteOffset: 10, "the ID3v2 tag claims \(bodySize) bytes and the file ends first: the file is left as it is")
        }
        // The frames, each kept as its bytes unless it is a TXXX or standard frame being replaced.
        let names = Set(changes.map { $0.name.uppercased() })
        let ids = Set(changes.compactMap { frameID(for: $0.name, version: version) })
        var kept: [UInt8] = []
        var at = 0
        while at + 10 <= bodySize, body[at] != 0 {
            let id = String(decoding: body[at..<(at + 4)], as: UTF8.self)
            let size = version == 4 ? body[(at + 4)..<(at + 8)].reduce(0) { $0 << 7 | Int($1 & 0x7F) }
                                    : body[(at + 4)..<(at + 8)].reduce(0) { $0 << 8 | Int($1) }
            guard id.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) }), at + 10 + size <= bodySize else {
                throw AudioFileWriterError(.unsupportedFormat, path: path, byteOffset: Int64(10 + at),
                                           "the ID3v2 frame here is damaged: the file is left as it is")
            }
            let frame = body[at..<(at + 10 + size)]
            var replaced = ids.contains(id) || (pictures != nil && id == "APIC")
            if id == "TXXX", body[at + 9] & (version == 4 ? 0x4F : 0xE0) == 0,
               let (description, _) = ID3v2.describedText(Array(frame.dropFirst(10)), hasLanguage: false) {
                replaced = names.contains(description.uppercased())
            }
            if !replaced { kept += frame }
            at += 10 + size
        }
        for (name, value) in changes { if let value { kept += frame(name, value, version: version) } }
        for picture in pictures ?? [] { kept += pictureFrame(picture, version: version) }
        if kept.count <= bodySize {
            // In place: the same size, the rest padding; one write of the whole tag.
            let tag = encode(frames: kept, version: version, padding: bodySize - kept.count, flags: flags)
            var written = 0
            do {
                try tag.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in try file.writeAll(raw, at: 0, written: &written) }
                try file.sync()
            } catch {
                throw AudioFileWriterError(.writeFailed, path: path, byteOffset: Int64(written), underlying: error as? SystemError, "cannot write the ID3v2 tag")
            }
            return .inPlace
        }
        try AudioFileRewrite.replace(path: path, original: file, head: encode(frames: kept, version: version, padding: rewritePadding, flags: flags),
                                     copyingFrom: Int64(total))
        return .rewritten
    }

    /// A TXXX frame: UTF-8 in 2.4; in 2.3 Latin-1 when the text is ASCII, else UTF-16 with a BOM.
    static func textFrame(description: String, value: String, version: UInt8) -> [UInt8] {
        textFrame(id: "TXXX", description: description, value: value, version: version)
    }

    /// A text frame `id` (with a description for `TXXX`), encoded as ``textFrame(description:value:version:)`` says.
    static func textFrame(id: String, description: String? = nil, value: String, version: UInt8) -> [UInt8] {
        var payload: [UInt8]
        if version == 4 {
            payload = [3] + (description.map { Array($0.utf8) + [0] } ?? []) + Array(value.utf8)
        } else if ((description ?? "") + value).utf8.allSatisfy({ $0 < 0x80 }) {
            payload = [0] + (description.map { Array($0.utf8) + [0] } ?? []) + Array(value.utf8)
        } else {
            func utf16(_ text: String) -> [UInt8] { [0xFF, 0xFE] + text.utf16.flatMap { [UInt8(truncatingIfNeeded: $0), UInt8(truncatingIfNeeded: $0 >> 8)] } }
            payload = [1] + (description.map { utf16($0) + [0, 0] } ?? []) + utf16(value)
        }
        return frame(id: id, payload: payload, version: version)
    }

    /// An `APIC` frame: the description in UTF-8 (2.4), else Latin-1 when ASCII or UTF-16 with a BOM.
    static func pictureFrame(_ picture: AudioFilePicture, version: UInt8) -> [UInt8] {
        let mime = Array(picture.mimeType.utf8) + [0]
        let description: [UInt8]
        if version == 4 {
            description = [3] + mime + [UInt8(picture.type)] + Array(picture.description.utf8) + [0]
        } else if picture.description.utf8.allSatisfy({ $0 < 0x80 }) {
            description = [0] + mime + [UInt8(picture.type)] + Array(picture.description.utf8) + [0]
        } else {
            description = [1] + mime + [UInt8(picture.type), 0xFF, 0xFE]
                + picture.description.utf16.flatMap { [UInt8(truncatingIfNeeded: $0), UInt8(truncatingIfNeeded: $0 >> 8)] } + [0, 0]
        }
        return frame(id: "APIC", payload: description + picture.data, version: version)
    }

    /// A frame's header (size syncsafe in 2.4, plain in 2.3; no flags) and payload.
    static func frame(id: String, payload: [UInt8], version: UInt8) -> [UInt8] {
        var frame = Array(id.utf8)
        frame += version == 4 ? syncsafe(payload.count) : [UInt8(truncatingIfNeeded: payload.count >> 24), UInt8(truncatingIfNeeded: payload.count >> 16),
                                                          UInt8(truncatingIfNeeded: payload.count >> 8), UInt8(truncatingIfNeeded: payload.count)]
        return frame + [0, 0] + payload
    }

    static func syncsafe(_ value: Int) -> [UInt8] {
        [UInt8((value >> 21) & 0x7F), UInt8((value >> 14) & 0x7F), UInt8((value >> 7) & 0x7F), UInt8(value & 0x7F)]
    }

    /// A whole tag: header, frames, `padding` zero bytes.
    static func encode(frames: [UInt8], version: UInt8, padding: Int, flags: UInt8 = 0) -> [UInt8] {
        Array("ID3".utf8) + [version, 0, flags] + syncsafe(frames.count + padding) + frames + [UInt8](repeating: 0, count: padding)
    }
}
