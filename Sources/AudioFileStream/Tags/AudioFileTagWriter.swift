#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import BufferQueue

/// How a file's tags were written.
public enum AudioFileTagUpdate: Sendable, Hashable {
    /// The new tags fitted where the old ones and their padding were: only those bytes changed.
    case inPlace
    /// The file was written anew beside the original (the audio copied byte for byte) and renamed
    /// over it.
    case rewritten
}

/// Writes tags into an existing file without touching its audio: the audio decodes bit-identically
/// before and after, and every other tag and picture is kept.
///
/// Supported: native FLAC (its VORBIS_COMMENT and PICTURE blocks), MP3 (ID3v2.3 and 2.4 text,
/// `TXXX` and `APIC` frames, a new ID3v2.4 tag where there is none), Ogg Opus, Vorbis and FLAC (the
/// comment header's pages rebuilt; pictures as `METADATA_BLOCK_PICTURE` comments, in Ogg FLAC as
/// PICTURE packets) and MP4/M4A, fragmented too (iTunes items and freeform items in
/// `moov/udta/meta/ilst`, pictures in `covr`). The other containers are refused by name.
public enum AudioFileTagWriter {
    /// Sets each named tag — every field of that name, in any case, is replaced — or removes it
    /// when its value is nil; the other tags keep their order and bytes.
    ///
    /// Safety: the change is made in place only when the new tags fit where the old ones and
    /// their padding were, by one write of the metadata; otherwise a temporary file in the same
    /// directory is written, flushed to disk and renamed over the original, so that a process
    /// killed at any moment leaves the original or the new file, never a mix.
    /// - Throws: ``AudioFileWriterError``: the file cannot be opened for writing (read-only: nothing
    ///   is written), its container is not one this writes, its metadata is damaged (the file is
    ///   left as it is; the error says where), or a write fails.
    @discardableResult
    public static func update(path: String, setting changes: [(name: String, value: String?)]) throws -> AudioFileTagUpdate {
        try update(path: path, setting: changes, pictures: nil)
    }

    /// Sets tags as ``update(path:setting:)`` does and, unless `pictures` is nil, replaces every
    /// embedded picture by `pictures` (an empty array removes them).
    ///
    /// Each format stores what it can: FLAC and Ogg keep a picture's type, MIME type, description
    /// and size; ID3v2 (`APIC`) its type, MIME type and description; MP4 (`covr`) only JPEG, PNG
    /// and BMP images, without type or description (read back as front covers). Make a picture
    /// from an image file's bytes with ``AudioFilePicture/init(image:type:description:)``.
    /// - Throws: as ``update(path:setting:)``; and ``AudioFileWriterError`` naming the picture and
    ///   the format when a picture does not fit it (a GIF in MP4, a type above 255 in ID3v2).
    @discardableResult
    public static func update(path: String, setting changes: [(name: String, value: String?)],
                              pictures: [AudioFilePicture]?) throws -> AudioFileTagUpdate {
        for picture in pictures ?? [] where picture.mimeType.isEmpty || !picture.mimeType.utf8.allSatisfy({ $0 >= 0x20 && $0 <= 0x7E }) || picture.type < 0 {
            throw AudioFileWriterError(.unsupportedFormat, path: path,
                                       "the picture \"\(picture.description)\" (\(picture.typeName)) needs a MIME type of printable ASCII and a type of 0 or more")
        }
        for (name, _) in changes where name.isEmpty || name.contains("=") || name.utf8.contains(where: { $0 < 0x20 || $0 > 0x7D }) {
            throw AudioFileWriterError(.unsupportedFormat, path: path, "\"\(name)\" is not a tag name (printable ASCII without '=')")
        }
        let file: FileDescriptor
        do throws(SystemError) { file = try FileDescriptor.open(path, O_RDWR) } catch {
            throw AudioFileWriterError(.cannotCreate, path: path, underlying: error, "cannot open the file to write its tags")
        }
        defer { try? file.close() }
        // Whether the change goes in place or through a new file, what a killed write left goes.
        AudioFileRewrite.removeStaleTemporaries(of: path)
        var head = [UInt8](repeating: 0, count: 64)
        let got = (try? head.withUnsafeMutableBytes { (raw: UnsafeMutableRawBufferPointer) in try file.readAll(into: raw, at: 0) }) ?? 0
        head = Array(head.prefix(got))
        if head.starts(with: Array("fLaC".utf8)) {
            return try FLACTagWriter.update(file, path: path, changes, pictures: pictures)
        }
        if head.count >= 8, String(decoding: head[4..<8], as: UTF8.self) == "ftyp" {
            return try MP4TagWriter.update(file, path: path, changes, pictures: pictures)
        }
        if head.starts(with: Array("OggS".utf8)) {
            return try OggTagWriter.update(file, path: path, changes, pictures: pictures)
        }
        // An ID3v2 tag in front (MP3, ADTS), or an MP3 by its name that starts with a frame.
        let mpegFrame = head.count >= 2 && head[0] == 0xFF && head[1] & 0xE0 == 0xE0
        if head.starts(with: Array("ID3".utf8)) || (mpegFrame && AudioSniffer.kind(pathExtension: extensionOf(path)) == .audio(.mp3)) {
            return try ID3TagWriter.update(file, path: path, head: head, changes, pictures: pictures)
        }
        let kind = AudioSniffer.kind(ofHead: head, isComplete: got < 64).map { "\($0)" }
            ?? (head.starts(with: Array("ID3".utf8)) ? "MP3 (ID3v2)" : "this")
        throw AudioFileWriterError(.unsupportedFormat, path: path, "writing tags into \(kind) files is not built yet (FLAC, MP3, MP4/M4A, Ogg Opus and Ogg Vorbis are)")
    }

    static func extensionOf(_ path: String) -> String {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        return name.contains(".") ? String(name.split(separator: ".").last ?? "") : ""
    }
}

/// Replacing a file by a new one written beside it: a temporary file in the same directory,
/// flushed, given the original's permissions and renamed over it.
enum AudioFileRewrite {
    /// Writes `head`, then the original's bytes from `offset` to its end, into a temporary file and
    /// renames it over `path`. On failure the temporary file is removed and the original is untouched.
    static func replace(path: String, original: FileDescriptor, head: [UInt8], copyingFrom offset: Int64) throws {
        try replace(path: path, original: original) { write in
            try head.withUnsafeBytes { try write($0) }
            try copy(original, path: path, from: offset, write)
        }
    }

    /// Copies the original's bytes from `offset` to its end (or to `end`) through `write`.
    static func copy(_ original: FileDescriptor, path: String, from offset: Int64, to end: Int64? = nil,
                     _ write: (UnsafeRawBufferPointer) throws -> Void) throws {
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        var from = offset
        while end.map({ from < $0 }) ?? true {
            let count: Int
            let want = end.map { Int(min(Int64(chunk.count), $0 - from)) } ?? chunk.count
            do { count = try chunk.withUnsafeMutableBytes { (raw: UnsafeMutableRawBufferPointer) in try original.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<want]), at: from) } } catch {
                throw AudioFileWriterError(.cannotCreate, path: path, byteOffset: from, underlying: error as? SystemError, "cannot read the audio to copy")
            }
            if count == 0 { break }
            try chunk.withUnsafeBytes { try write(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
            from += Int64(count)
        }
    }

    /// Removes what an earlier write of the same file left when its process was killed: its
    /// temporary file (`.NAME.aqtags-PID`) of a process that no longer exists. A running
    /// process's file is left to it.
    static func removeStaleTemporaries(of path: String) {
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { String(path[..<$0]) } ?? "."
        let prefix = temporaryPrefix(slash.map { String(path[path.index(after: $0)...]) } ?? path)
        guard let names = try? FileDescriptor.directoryEntries(directory) else { return }
        for name in names where name.hasPrefix(prefix) {
            guard let pid = pid_t(name.dropFirst(prefix.count)), pid > 0, !FileDescriptor.processExists(pid) else { continue }
            try? FileDescriptor.remove(directory + "/" + name)
        }
    }

    /// The start of a temporary file's name for file `name`; the writer's pid follows.
    static func temporaryPrefix(_ name: String) -> String { ".\(name).aqtags-" }

    /// Writes what `produce` hands to its writer into a temporary file beside `path`, flushes it,
    /// gives it the original's permissions and renames it over `path`. On failure the temporary
    /// file is removed and the original is untouched.
    static func replace(path: String, original: FileDescriptor, produce: ((UnsafeRawBufferPointer) throws -> Void) throws -> Void) throws {
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { String(path[..<$0]) } ?? "."
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        let temporary = directory + "/" + temporaryPrefix(name) + "\(getpid())"
        let output: FileDescriptor
        do throws(SystemError) { output = try FileDescriptor.open(temporary, O_WRONLY | O_CREAT | O_EXCL, permissions: 0o600) } catch {
            throw AudioFileWriterError(.cannotCreate, path: temporary, underlying: error, "cannot create the file the tags are written into")
        }
        var renamed = false
        defer {
            try? output.close()
            if !renamed { try? FileDescriptor.remove(temporary) }
        }
        var at: Int64 = 0
        try produce { bytes in
            var written = 0
            do throws(SystemError) { try output.writeAll(bytes, at: at, written: &written) } catch {
                throw AudioFileWriterError(.writeFailed, path: temporary, byteOffset: at + Int64(written), underlying: error, "cannot write the new file")
            }
            at += Int64(bytes.count)
        }
        do throws(SystemError) {
            try output.setPermissions(try original.status().st_mode & 0o7777)
            try output.sync()
            try FileDescriptor.rename(temporary, to: path)
            renamed = true
        } catch {
            throw AudioFileWriterError(.writeFailed, path: path, underlying: error, "cannot put the new file in place")
        }
        // The rename itself reaches the disk with the directory.
        if let directoryDescriptor = try? FileDescriptor.open(directory, O_RDONLY | O_DIRECTORY) {
            try? directoryDescriptor.sync()
            try? directoryDescriptor.close()
        }
    }
}
