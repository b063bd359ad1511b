import BufferQueue

/// Rewrites iTunes items in an MP4's `moov/udta/meta/ilst` — the standard names as iTunes' own
/// items (`©nam`, `©ART`, `©alb`, `trkn` …), others as freeform items (`----:com.apple.iTunes:NAME`),
/// pictures as `covr` —
/// creating the boxes where missing; every other item and box is kept byte for byte. In place when
/// the grown or shrunk `moov` fits with the `free` box after it; otherwise the file is written anew
/// beside it (with 1 KiB of `free` after `moov` for the next change) and renamed over it, and when
/// `moov` precedes the media data every `stco`/`co64` chunk offset is moved by what `moov` grew.
/// In a fragmented MP4 the fragments move with it: their absolute offsets (`tfhd` base data
/// offsets, `mfra`'s `moof` offsets) are moved too.
enum MP4TagWriter {
    struct Box {
        var type: String
        var start: Int
        var header: Int
        var end: Int
    }

    /// The boxes in `bytes[range]`; nil when one's size does not fit.
    static func children(_ bytes: [UInt8], _ range: Range<Int>) -> [Box]? {
        var boxes: [Box] = []
        var at = range.lowerBound
        while at + 8 <= range.upperBound {
            var size = bytes[at..<(at + 4)].reduce(0) { $0 << 8 | Int($1) }
            var header = 8
            if size == 1 {
                guard at + 16 <= range.upperBound else { return nil }
                size = bytes[(at + 8)..<(at + 16)].reduce(0) { $0 << 8 | Int($1) }
                header = 16
            } else if size == 0 {
                size = range.upperBound - at
            }
            guard size >= header, at + size <= range.upperBound else { return nil }
            boxes.append(Box(type: String(decoding: bytes[(at + 4)..<(at + 8)], as: UTF8.self), start: at, header: header, end: at + size))
            at += size
        }
        return at == range.upperBound ? boxes : nil
    }

    static func box(_ type: String, _ body: [UInt8]) -> [UInt8] {
        let size = 8 + body.count
        return [UInt8(truncatingIfNeeded: size >> 24), UInt8(truncatingIfNeeded: size >> 16), UInt8(truncatingIfNeeded: size >> 8), UInt8(truncatingIfNeeded: size)]
            + Array(type.utf8) + body
    }

    /// The item type of a standard name (every other name is a freeform item).
    static func itemType(for name: String) -> String? {
        switch name.uppercased() {
        case "TITLE": return "\u{A9}nam"
        case "ARTIST": return "\u{A9}ART"
        case "ALBUM": return "\u{A9}alb"
        case "ALBUMARTIST", "ALBUM ARTIST": return "aART"
        case "DATE", "YEAR": return "\u{A9}day"
        case "GENRE": return "\u{A9}gen"
        case "COMPOSER": return "\u{A9}wrt"
        case "TRACKNUMBER", "TRACK": return "trkn"
        case "DISCNUMBER", "DISC": return "disk"
        default: return nil
        }
    }

    /// An item for a change: a standard item (text, or `trkn`/`disk`'s numbers from "N" or "N/TOTAL"),
    /// else a freeform one.
    static func item(_ name: String, _ value: String) -> [UInt8] {
        guard let type = itemType(for: name) else { return freeform(name, value) }
        // Item types are Latin-1 (iTunes' © is the byte 0xA9).
        let typeBytes = type.unicodeScalars.map { UInt8(truncatingIfNeeded: $0.value) }
        if type == "trkn" || type == "disk" {
            let parts = value.split(separator: "/").map { Int($0.trimmingSpaces()) ?? 0 }
            let number = min(max(parts.first ?? 0, 0), 0xFFFF), total = min(max(parts.count > 1 ? parts[1] : 0, 0), 0xFFFF)
            let numbers: [UInt8] = [0, 0, UInt8(number >> 8), UInt8(number & 0xFF), UInt8(total >> 8), UInt8(total & 0xFF)] + (type == "trkn" ? [0, 0] : [])
            return rawBox(typeBytes, box("data", [0, 0, 0, 0, 0, 0, 0, 0] + numbers))
        }
        return rawBox(typeBytes, box("data", [0, 0, 0, 1, 0, 0, 0, 0] + Array(value.utf8)))
    }

    /// The `data` type codes of the images a `covr` item holds.
    static let coverTypes: [(code: UInt8, mimeType: String)] = [(13, "image/jpeg"), (14, "image/png"), (27, "image/bmp")]

    /// A `covr` item's `data` box for `picture`; only JPEG, PNG and BMP fit.
    static func coverData(_ picture: AudioFilePicture, path: String) throws -> [UInt8] {
        guard let code = coverTypes.first(where: { $0.mimeType == picture.mimeType.lowercased() })?.code else {
            throw AudioFileWriterError(.unsupportedFormat, path: path,
                                       "the picture \"\(picture.description)\" is \(picture.mimeType); an MP4 `covr` item holds JPEG, PNG or BMP only")
        }
        return box("data", [0, 0, 0, code, 0, 0, 0, 0] + picture.data)
    }

    static func rawBox(_ type: [UInt8], _ body: [UInt8]) -> [UInt8] {
        let size = 8 + body.count
        return [UInt8(truncatingIfNeeded: size >> 24), UInt8(truncatingIfNeeded: size >> 16), UInt8(truncatingIfNeeded: size >> 8), UInt8(truncatingIfNeeded: size)]
            + type + body
    }

    /// A freeform item: `mean` com.apple.iTunes, `name`, `data` of UTF-8 text.
    static func freeform(_ name: String, _ value: String) -> [UInt8] {
        box("----", box("mean", [0, 0, 0, 0] + Array("com.apple.iTunes".utf8)) + box("name", [0, 0, 0, 0] + Array(name.utf8))
            + box("data", [0, 0, 0, 1, 0, 0, 0, 0] + Array(value.utf8)))
    }

    /// The freeform item's name, if `item` is one.
    static func freeformName(_ bytes: [UInt8], _ item: Box) -> String? {
        guard item.type == "----", let fields = children(bytes, (item.start + item.header)..<item.end) else { return nil }
        guard let name = fields.first(where: { $0.type == "name" }), name.end - name.start >= name.header + 4 else { return nil }
        return String(decoding: bytes[(name.start + name.header + 4)..<name.end], as: UTF8.self)
    }

    /// `container` (a whole box) with its child `type` transformed (nil: it is missing); the box's
    /// body starts `prefix` bytes after its header (a `meta`'s version and flags).
    static func editing(_ container: [UInt8], prefix: Int = 0, child type: String, path: String,
                        _ transform: ([UInt8]?) throws -> [UInt8]) throws -> [UInt8] {
        guard let whole = children(container, 0..<container.count).flatMap({ $0.count == 1 ? $0[0] : nil }),
              let inner = children(container, (whole.header + prefix)..<container.count) else {
            throw AudioFileWriterError(.unsupportedFormat, path: path, "the MP4 box `\(String(decoding: container[4..<8], as: UTF8.self))` is damaged: the file is left as it is")
        }
        var body = Array(container[whole.header..<(whole.header + prefix)])
        var found = false
        for child in inner {
            if child.type == type && !found {
                body += try transform(Array(container[child.start..<child.end]))
                found = true
            } else {
                body += container[child.start..<child.end]
            }
        }
        if !found { body += try transform(nil) }
        return box(String(decoding: container[4..<8], as: UTF8.self), body)
    }

    /// `moov` with the changes made in its `udta/meta/ilst`.
    static func editedMovie(_ moov: [UInt8], path: String, _ changes: [(name: String, value: String?)],
                            pictures: [AudioFilePicture]? = nil) throws -> [UInt8] {
        let names = Set(changes.map { $0.name.uppercased() })
        var types = Set(changes.compactMap { itemType(for: $0.name) }.map { Array($0.unicodeScalars.map { UInt8(truncatingIfNeeded: $0.value) }) })
        var added = changes.compactMap { change in change.value.map { item(change.name, $0) } }.flatMap { $0 }
        if let pictures {
            types.insert(Array("covr".utf8))
            if !pictures.isEmpty { added += box("covr", try pictures.map { try coverData($0, path: path) }.flatMap { $0 }) }
        }
        func ilst(_ old: [UInt8]?) throws -> [UInt8] {
            guard let old else { return box("ilst", added) }
            guard let items = children(old, 8..<old.count) else {
                throw AudioFileWriterError(.unsupportedFormat, path: path, "the MP4 `ilst` box is damaged: the file is left as it is")
            }
            var body: [UInt8] = []
            for item in items {
                let replaced = freeformName(old, item).map { names.contains($0.uppercased()) } ?? types.contains(Array(old[(item.start + 4)..<(item.start + 8)]))
                if !replaced { body += old[item.start..<item.end] }
            }
            return box("ilst", body + added)
        }
        func meta(_ old: [UInt8]?) throws -> [UInt8] {
            guard let old else {
                let handler = box("hdlr", [0, 0, 0, 0, 0, 0, 0, 0] + Array("mdirappl".utf8) + [UInt8](repeating: 0, count: 9))
                return box("meta", [0, 0, 0, 0] + handler + (try ilst(nil)))
            }
            // ISO's meta has version and flags before its boxes; QuickTime's does not.
            let prefix = old.count >= 16 && String(decoding: old[12..<16], as: UTF8.self) == "hdlr" ? 0 : 4
            return try editing(old, prefix: prefix, child: "ilst", path: path, ilst)
        }
        return try editing(moov, child: "udta", path: path) { udta in
            try editing(udta ?? box("udta", []), child: "meta", path: path, meta)
        }
    }

    /// A `moof` or `mfra` box with its absolute file offsets moved by `shift`: each `traf/tfhd`'s
    /// base data offset (when its flag 0x000001 says it is there) and each `tfra` entry's `moof` offset.
    static func shiftingFragmentOffsets(_ box: [UInt8], by shift: Int64, path: String) throws -> [UInt8] {
        var bytes = box
        func damaged(_ what: String) -> AudioFileWriterError {
            AudioFileWriterError(.unsupportedFormat, path: path, "the `\(what)` box is damaged: the file is left as it is")
        }
        func u(_ at: Int, _ width: Int) -> Int64 { bytes[at..<(at + width)].reduce(Int64(0)) { $0 << 8 | Int64($1) } }
        func put(_ value: Int64, at: Int, _ width: Int) throws {
            guard value >= 0, width == 8 || value <= Int64(UInt32.max) else { throw damaged("tfra") }
            for byte in 0..<width { bytes[at + byte] = UInt8(truncatingIfNeeded: value >> (8 * Int64(width - 1 - byte))) }
        }
        guard let top = children(bytes, 0..<bytes.count), top.count == 1 else { throw damaged("moof") }
        let outer = top[0]
        guard let inner = children(bytes, (outer.start + outer.header)..<outer.end) else { throw damaged(outer.type) }
        for child in inner {
            let body = (child.start + child.header)..<child.end
            if child.type == "traf" {
                guard let parts = children(bytes, body) else { throw damaged("traf") }
                for tfhd in parts where tfhd.type == "tfhd" {
                    let at = tfhd.start + tfhd.header
                    guard tfhd.end - at >= 8 else { throw damaged("tfhd") }
                    let flags = u(at + 1, 3)
                    guard flags & 1 != 0 else { continue }
                    guard tfhd.end - at >= 16 else { throw damaged("tfhd") }
                    try put(u(at + 8, 8) + shift, at: at + 8, 8)
                }
            }
            if child.type == "tfra" {
                guard body.count >= 16 else { throw damaged("tfra") }
                let version = bytes[body.lowerBound]
                let sizes = u(body.lowerBound + 8, 4)
                let count = Int(u(body.lowerBound + 12, 4))
                let width = version == 1 ? 8 : 4
                let rest = Int((sizes >> 4) & 3) + Int((sizes >> 2) & 3) + Int(sizes & 3) + 3
                let entry = 2 * width + rest
                guard count >= 0, count <= (body.count - 16) / max(entry, 1) else { throw damaged("tfra") }
                for index in 0..<count {
                    let at = body.lowerBound + 16 + index * entry + width
                    try put(u(at, width) + shift, at: at, width)
                }
            }
        }
        return bytes
    }

    /// Adds `shift` to every chunk offset (`stco`, `co64`) of every track in `moov`.
    static func shiftingChunkOffsets(_ moov: [UInt8], by shift: Int, path: String) throws -> [UInt8] {
        var moov = moov
        func walk(_ range: Range<Int>) throws {
            guard let boxes = children(moov, range) else {
                throw AudioFileWriterError(.unsupportedFormat, path: path, "an MP4 box inside `moov` is damaged: the file is left as it is")
            }
            for child in boxes {
                let body = (child.start + child.header)..<child.end
                switch child.type {
                case "trak", "mdia", "minf", "stbl": try walk(body)
                case "stco", "co64":
                    let width = child.type == "stco" ? 4 : 8
                    guard body.count >= 8 else { continue }
                    let count = moov[(body.lowerBound + 4)..<(body.lowerBound + 8)].reduce(0) { $0 << 8 | Int($1) }
                    guard body.count >= 8 + count * width else {
                        throw AudioFileWriterError(.unsupportedFormat, path: path, "the `\(child.type)` table is cut short: the file is left as it is")
                    }
                    for entry in 0..<count {
                        let at = body.lowerBound + 8 + entry * width
                        let value = moov[at..<(at + width)].reduce(0) { $0 << 8 | Int($1) } + shift
                        guard value >= 0, width == 8 || value <= Int(UInt32.max) else {
                            throw AudioFileWriterError(.unsupportedFormat, path: path, "a chunk offset would pass 4 GiB in `stco`: not rewritten")
                        }
                        for byte in 0..<width { moov[at + byte] = UInt8(truncatingIfNeeded: value >> (8 * (width - 1 - byte))) }
                    }
                default: break
                }
            }
        }
        guard let top = children(moov, 0..<moov.count), top.count == 1 else { return moov }
        try walk((top[0].start + top[0].header)..<top[0].end)
        return moov
    }

    static func update(_ file: FileDescriptor, path: String, _ changes: [(name: String, value: String?)],
                       pictures: [AudioFilePicture]?) throws -> AudioFileTagUpdate {
        // The top-level boxes, from their headers.
        let length: Int64
        do { length = Int64(try file.status().st_size) } catch {
            throw AudioFileWriterError(.cannotCreate, path: path, underlying: error, "cannot read the file's size")
        }
        func read(_ count: Int, at offset: Int64) throws -> [UInt8] {
            var bytes = [UInt8](repeating: 0, count: count)
            let got: Int
            do { got = try bytes.withUnsafeMutableBytes { (raw: UnsafeMutableRawBufferPointer) in try file.readAll(into: raw, at: offset) } } catch {
                throw AudioFileWriterError(.cannotCreate, path: path, byteOffset: offset, underlying: error as? SystemError, "cannot read the file")
            }
            guard got == count else { throw AudioFileWriterError(.unsupportedFormat, path: path, byteOffset: offset, "the MP4 box here is cut short: the file is left as it is") }
            return bytes
        }
        var top: [(type: String, start: Int64, end: Int64)] = []
        var at: Int64 = 0
        while at + 8 <= length {
            let header = try read(min(16, Int(length - at)), at: at)
            var size = Int64(header[0..<4].reduce(0) { $0 << 8 | Int($1) })
            if size == 1, header.count >= 16 { size = Int64(header[8..<16].reduce(0) { $0 << 8 | Int($1) }) }
            if size == 0 { size = length - at }
            guard size >= 8, at + size <= length else {
                throw AudioFileWriterError(.unsupportedFormat, path: path, byteOffset: at, "the MP4 box here claims more than the file holds: the file is left as it is")
            }
            top.append((String(decoding: header[4..<8], as: UTF8.self), at, at + size))
            at += size
        }
        guard let moovIndex = top.firstIndex(where: { $0.type == "moov" }) else {
            throw AudioFileWriterError(.unsupportedFormat, path: path, "the MP4 has no `moov` box: the file is left as it is")
        }
        let fragmented = top.contains(where: { $0.type == "moof" })
        if fragmented, top[..<moovIndex].contains(where: { $0.type == "moof" || $0.type == "mdat" }) {
            throw AudioFileWriterError(.unsupportedFormat, path: path, "a fragmented MP4 with media before `moov`: not rewritten")
        }
        let moov = top[moovIndex]
        let edited = try editedMovie(try read(Int(moov.end - moov.start), at: moov.start), path: path, changes, pictures: pictures)
        // In place: the new moov and a `free` box (or nothing) in the old moov's place and any `free` after it.
        let nextFree = moovIndex + 1 < top.count && (top[moovIndex + 1].type == "free" || top[moovIndex + 1].type == "skip") ? top[moovIndex + 1] : nil
        let room = Int((nextFree?.end ?? moov.end) - moov.start)
        let left = room - edited.count
        if left == 0 || left >= 8 {
            let bytes = edited + (left > 0 ? box("free", [UInt8](repeating: 0, count: left - 8)) : [])
            var written = 0
            do {
                try bytes.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in try file.writeAll(raw, at: moov.start, written: &written) }
                try file.sync()
            } catch {
                throw AudioFileWriterError(.writeFailed, path: path, byteOffset: moov.start + Int64(written), underlying: error as? SystemError, "cannot write `moov`")
            }
            return .inPlace
        }
        // Rewritten: the new moov and 1 KiB of `free`; the media after it moves by the difference.
        let padding = box("free", [UInt8](repeating: 0, count: 1024 - 8))
        let mediaFollows = top[(moovIndex + 1)...].contains { $0.type == "mdat" }
        let shift = edited.count + padding.count - Int(moov.end - moov.start)
        let movie = mediaFollows ? try shiftingChunkOffsets(edited, by: shift, path: path) : edited
        let before = try read(Int(moov.start), at: 0)
        try AudioFileRewrite.replace(path: path, original: file) { write in
            try before.withUnsafeBytes { try write($0) }
            try (movie + padding).withUnsafeBytes { try write($0) }
            guard fragmented else { return try AudioFileRewrite.copy(file, path: path, from: moov.end, write) }
            // Fragments: a `moof`'s offsets relative to itself hold; its absolute ones (a `tfhd`
            // base data offset) and the `mfra` index's `moof` offsets move with it.
            for box in top[(moovIndex + 1)...] {
                if box.type == "moof" || box.type == "mfra" {
                    let moved = try shiftingFragmentOffsets(try read(Int(box.end - box.start), at: box.start), by: Int64(shift), path: path)
                    try moved.withUnsafeBytes { try write($0) }
                } else {
                    try AudioFileRewrite.copy(file, path: path, from: box.start, to: box.end, write)
                }
            }
        }
        return .rewritten
    }
}
