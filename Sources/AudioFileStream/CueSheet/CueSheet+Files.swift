import BufferQueue
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension CueSheet {
    /// Reads a `.cue` file: UTF-8, else Latin-1 (older rippers wrote their code page).
    /// - Throws: ``CueSheetError`` for malformed text; ``AudioFileStreamError`` naming the file when it cannot be read.
    public init(contentsOfFile path: String) throws {
        let data = try Self.bytes(ofFile: path)
        // Latin-1 decodes any bytes, so the second reading never fails.
        let text = String(validating: data, as: UTF8.self) ?? String(data.map { Character(Unicode.Scalar($0)) })
        do { try self.init(text: text) } catch var error as CueSheetError {
            error.path = error.path ?? path
            throw error
        }
    }

    /// The bytes of the file at `path`, through the library's one system-call wrapper (no
    /// Foundation below the player).
    static func bytes(ofFile path: String) throws -> [UInt8] {
        let fd: FileDescriptor
        do { fd = try FileDescriptor.open(path, O_RDONLY) } catch {
            throw AudioFileStreamError(.invalidOperation, nil, 0, "cannot open the file: \(error.reason)").about(path)
        }
        defer { try? fd.close() }
        do {
            let size = Int(try fd.status().st_size)
            var bytes = [UInt8](repeating: 0, count: size)
            let got = try bytes.withUnsafeMutableBytes { (raw: UnsafeMutableRawBufferPointer) throws(SystemError) in try fd.readAll(into: raw, at: 0) }
            return Array(bytes.prefix(got))
        } catch {
            throw AudioFileStreamError(.invalidOperation, nil, 0, "cannot read the file: \((error as? SystemError)?.reason ?? "\(error)")").about(path)
        }
    }

    /// A track and the path of the file it is in.
    public struct PlacedTrack: Hashable, Sendable {
        /// The track.
        public var track: CueTrack
        /// The path of the file the track is in.
        public var path: String
    }

    /// The tracks of a `.cue` file's sheet, each with the path of its `FILE` (relative names
    /// against the sheet's folder), placed in their files' valid frames; each file opened once.
    /// - Throws: what opening a file throws (its name in the message), ``CueSheetError``.
    public func tracks(ofSheetAt sheetPath: String) throws -> [PlacedTrack] {
        // The sheet's folder ("." for a bare name; "/" for a sheet at the root).
        let folder = sheetPath.lastIndex(of: "/").map { $0 == sheetPath.startIndex ? "" : String(sheetPath[..<$0]) } ?? "."

        var opened: [String: AudioFile] = [:]
        func path(_ name: String?) -> String {
            guard let name else { return sheetPath }
            return name.hasPrefix("/") ? name : folder + "/" + name
        }
        let tracks: [CueTrack]
        do {
            tracks = try resolvedTracks { name in
                let file = try opened[path(name)] ?? AudioFile(path: path(name))
                opened[path(name)] = file
                return (file.validFrames, (file.formatList.first ?? file.dataFormat).sampleRate)
            }
        } catch var error as CueSheetError {
            error.path = error.path ?? sheetPath
            throw error
        }
        return tracks.map { PlacedTrack(track: $0, path: path($0.file)) }
    }
}

extension AudioFile {
    /// The frames that play: the packet table's valid frames, else every decoded frame.
    public var validFrames: Int64 { packetTableInfo?.validFrames ?? totalFrames * Int64(indexFrameScale) }

    /// The tracks of the cue sheet embedded in this file (``AudioFileMetadata/cueSheet``), placed
    /// in its valid frames; nil without one, or when it does not fit the audio.
    public var cueTracks: [CueTrack]? {
        guard let sheet = metadata.cueSheet else { return nil }
        // Every track is in this file, whatever name its FILE line gave.
        var local = sheet
        for index in local.tracks.indices { local.tracks[index].file = nil }
        let rate = (formatList.first ?? dataFormat).sampleRate
        return try? local.resolvedTracks { _ in (validFrames, rate) }
    }
}
