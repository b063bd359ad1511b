import BufferQueue
import Foundation

extension CueSheet {
    /// Reads a `.cue` file: UTF-8, else Latin-1 (older rippers wrote their code page).
    /// - Throws: ``CueSheetError`` for malformed text; the file system's error when it cannot be read.
    public init(contentsOfFile path: String) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        // Latin-1 decodes any bytes, so the second reading never fails.
        let text = String(data: data, encoding: .utf8) ?? String(data.map { Character(Unicode.Scalar($0)) })
        do { try self.init(text: text) } catch var error as CueSheetError {
            error.path = error.path ?? path
            throw error
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
        let folder = URL(fileURLWithPath: sheetPath).deletingLastPathComponent().path
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
