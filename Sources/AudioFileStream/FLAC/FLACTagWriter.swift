#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import BufferQueue

/// Rewrites a native FLAC file's VORBIS_COMMENT block (and, when asked, its PICTURE blocks)
/// without touching its audio: in place when the new blocks fit in the old ones and the padding
/// (the padding shrinks or grows), else the whole file is written anew beside it (new metadata
/// with 8 KiB of padding, the audio frames copied byte for byte) and renamed over it.
enum FLACTagWriter {
    /// One metadata block as the file holds it.
    struct Block {
        var type: UInt8
        var body: [UInt8]
    }

    /// Padding given to a rewritten file, so that the next change fits in place.
    static let rewritePadding = 8192

    static func update(_ file: FileDescriptor, path: String, _ changes: [(name: String, value: String?)],
                       pictures: [AudioFilePicture]?) throws -> AudioFileTagUpdate {
        let (blocks, audioStart) = try readBlocks(file, path: path)
        // The comment: the old one's vendor and fields, changed; a new one after STREAMINFO otherwise.
        var vendor = Array("AudioFileStream".utf8), fields: [[UInt8]] = []
        var commentIndex = 1
        if let index = blocks.firstIndex(where: { $0.type == FLACMetadataType.vorbisComment.rawValue }) {
            guard let raw = VorbisComment.rawFields(blocks[index].body) else {
                throw AudioFileWriterError(.unsupportedFormat, path: path, "the VORBIS_COMMENT block is damaged: the file is left as it is")
            }
            (vendor, fields) = (raw.vendor, raw.fields)
            commentIndex = index
        }
        var kept = blocks
        kept.removeAll { $0.type == FLACMetadataType.vorbisComment.rawValue || $0.type == FLACMetadataType.padding.rawValue }
        let comment = Block(type: FLACMetadataType.vorbisComment.rawValue,
                            body: VorbisComment.encode(vendor: vendor, fields: VorbisComment.applying(changes, to: fields)))
        guard comment.body.count < 1 << 24 else {
            throw AudioFileWriterError(.unsupportedFormat, path: path, "the tags would make a VORBIS_COMMENT block of \(comment.body.count) bytes (FLAC's limit is 16 MiB)")
        }
        let before = blocks[..<commentIndex].filter { $0.type != FLACMetadataType.padding.rawValue && $0.type != FLACMetadataType.vorbisComment.rawValue }
        kept = Array(before) + [comment] + kept.dropFirst(before.count)
        if let pictures {
            // The new pictures replace the old ones, right after the comment.
            let blocks = try pictures.map { picture in
                let body = FLACPicture.encode(picture)
                guard body.count < 1 << 24 else {
                    throw AudioFileWriterError(.unsupportedFormat, path: path,
                                               "the picture \"\(picture.description)\" takes \(body.count) bytes, more than a FLAC PICTURE block holds (16 MiB)")
                }
                return Block(type: FLACMetadataType.picture.rawValue, body: body)
            }
            kept.removeAll { $0.type == FLACMetadataType.picture.rawValue }
            kept.insert(contentsOf: blocks, at: before.count + 1)
        }
        let room = Int(audioStart) - 4
        let needed = kept.reduce(0) { $0 + 4 + $1.body.count }
        if needed == room || room - needed >= 4 {
            // In place: the padding takes up what the comment gave back or took.
            if needed < room { kept.append(Block(type: FLACMetadataType.padding.rawValue, body: Array(repeating: 0, count: room - needed - 4))) }
            let bytes = encode(kept)
            var written = 0
            do {
                // One write of the whole metadata: a process killed during it leaves it done or not begun.
                try bytes.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in try file.writeAll(raw, at: 4, written: &written) }
                try file.sync()
            } catch {
                throw AudioFileWriterError(.writeFailed, path: path, byteOffset: 4 + Int64(written), underlying: error as? SystemError, "cannot write the metadata")
            }
            return .inPlace
        }
        kept.append(Block(type: FLACMetadataType.padding.rawValue, body: Array(repeating: 0, count: rewritePadding)))
        try AudioFileRewrite.replace(path: path, original: file, head: Array("fLaC".utf8) + encode(kept), copyingFrom: audioStart)
        return .rewritten
    }

    /// The metadata blocks, and where the audio frames begin.
    static func readBlocks(_ file: FileDescriptor, path: String) throws -> ([Block], Int64) {
        func read(_ count: Int, at offset: Int64) throws -> [UInt8] {
            var bytes = [UInt8](repeating: 0, count: count)
            let got: Int
            do { got = try bytes.withUnsafeMutableBytes { (raw: UnsafeMutableRawBufferPointer) in try file.readAll(into: raw, at: offset) } } catch {
                throw AudioFileWriterError(.cannotCreate, path: path, byteOffset: offset, underlying: error as? SystemError, "cannot read the file")
            }
            guard got == count else {
                throw AudioFileWriterError(.unsupportedFormat, path: path, byteOffset: offset, "the FLAC metadata ends with the file: the file is left as it is")
            }
            return bytes
        }
        guard try read(4, at: 0) == Array("fLaC".utf8) else {
            throw AudioFileWriterError(.unsupportedFormat, path: path, "no `fLaC` marker: not a native FLAC file")
        }
        var blocks: [Block] = []
        var offset: Int64 = 4
        while true {
            let header = try read(4, at: offset)
            let last = header[0] & 0x80 != 0, type = header[0] & 0x7F
            let length = Int(header[1]) << 16 | Int(header[2]) << 8 | Int(header[3])
            guard type != 127, blocks.count < 1024 else {
                throw AudioFileWriterError(.unsupportedFormat, path: path, byteOffset: offset, "the metadata block here is invalid: the file is left as it is")
            }
            // (Padding is not read: its bytes are zeros by definition and are rebuilt.)
            let body = type == FLACMetadataType.padding.rawValue ? [] : try read(length, at: offset + 4)
            if blocks.isEmpty, type != FLACMetadataType.streamInfo.rawValue {
                throw AudioFileWriterError(.unsupportedFormat, path: path, byteOffset: offset, "the first metadata block is not STREAMINFO: the file is left as it is")
            }
            blocks.append(Block(type: type, body: body))
            offset += 4 + Int64(length)
            if last { return (blocks, offset) }
        }
    }

    /// Blocks with their headers, the last one flagged.
    static func encode(_ blocks: [Block]) -> [UInt8] {
        var out: [UInt8] = []
        for (index, block) in blocks.enumerated() {
            out.append(block.type | (index == blocks.count - 1 ? 0x80 : 0))
            out += [UInt8(truncatingIfNeeded: block.body.count >> 16), UInt8(truncatingIfNeeded: block.body.count >> 8), UInt8(truncatingIfNeeded: block.body.count)]
            out += block.body
        }
        return out
    }
}
