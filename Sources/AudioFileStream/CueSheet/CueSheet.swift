import BufferQueue

/// A cue sheet: the tracks of an album kept in one file (or a few), as a `.cue` file, a FLAC
/// `CUESHEET` block or a `CUESHEET` Vorbis comment gives them.
///
/// `.cue` text: `FILE "name" TYPE`, `TRACK nn AUDIO`, `INDEX 01 mm:ss:ff` (75 frames a second),
/// `INDEX 00` (the pregap), `TITLE`, `PERFORMER`; `REM`, `FLAGS`, `ISRC`, `CATALOG`, `SONGWRITER`,
/// `PREGAP` and `POSTGAP` are read past. A track's audio runs from its `INDEX 01` to the next
/// track's `INDEX 01` in the same file — a pregap (`INDEX 00`) is heard at the end of the track
/// before it, as a CD player plays it — and the last track of a file to the file's end.
public struct CueSheet: Hashable, Sendable {
    /// Where an index lies in its file.
    public enum Position: Hashable, Sendable {
        /// `mm:ss:ff` of a `.cue` file, in CD frames (1/75 s).
        case cdFrames(Int)
        /// A sample frame (a FLAC `CUESHEET` block's offsets).
        case sampleFrame(Int64)

        /// The sample frame at `rate` (a CD frame is `rate / 75` samples, rounded when that is not whole).
        public func frame(atRate rate: Double) -> Int64 {
            switch self {
            case .cdFrames(let frames): return Int64((Double(frames) * rate / 75).rounded())
            case .sampleFrame(let frame): return frame
            }
        }
    }

    /// A track as the sheet gives it.
    public struct Track: Hashable, Sendable {
        /// The track's number (`TRACK nn`).
        public var number: Int
        /// The track's `TITLE`.
        public var title: String?
        /// The track's `PERFORMER`.
        public var performer: String?
        /// The `FILE` the track's `INDEX 01` is in (nil in a sheet embedded in its audio file).
        public var file: String?
        /// `INDEX 01`: where the track starts.
        public var start: Position
        /// `INDEX 00`: where its pregap starts (heard at the end of the track before), if given.
        public var pregap: Position?
    }

    /// The album's `TITLE`.
    public var title: String?
    /// The album's `PERFORMER`.
    public var performer: String?
    /// The tracks, in order.
    public var tracks: [Track]

    /// A sheet of `tracks` with the album's title and performer.
    public init(title: String? = nil, performer: String? = nil, tracks: [Track]) {
        self.title = title
        self.performer = performer
        self.tracks = tracks
    }
}

/// A malformed cue sheet: what and on which line (1-based; 0 for a sheet as a whole).
public struct CueSheetError: Error, CustomStringConvertible, Hashable, Sendable {
    /// The line of the sheet (from 1; 0 for the sheet as a whole).
    public var line: Int
    /// What is wrong there.
    public var message: String
    /// The sheet's file, when it was read from one.
    public var path: String?
    /// A malformed sheet: `message` about `line`, in the file at `path` when known.
    public init(line: Int, message: String, path: String? = nil) {
        self.line = line
        self.message = message
        self.path = path
    }
    /// The file (or "cue sheet"), the line when there is one, and what is wrong:
    /// `album.cue line 12: INDEX before any TRACK`.
    public var description: String {
        let sheet = path ?? "cue sheet"
        return line > 0 ? "\(sheet) line \(line): \(message)" : "\(sheet): \(message)"
    }
}

extension CueSheet {
    /// Parses `.cue` text (UTF-8, a byte-order mark allowed; CR, LF or CRLF line ends).
    /// - Throws: ``CueSheetError`` naming the line: a `TRACK` before any `FILE`, an `INDEX` or
    ///   `TITLE` out of place, a time that is not `mm:ss:ff` (ff < 75, ss < 60), a track without
    ///   `INDEX 01`, indexes going backwards, track numbers not rising, no track at all.
    public init(text: String) throws {
        var title: String?, performer: String?
        var tracks: [Track] = []
        var file: String?
        var current: (track: Track, line: Int, hasStart: Bool)?
        func close() throws {
            guard let (track, line, hasStart) = current else { return }
            guard hasStart else { throw CueSheetError(line: line, message: "TRACK \(track.number) has no INDEX 01") }
            tracks.append(track)
            current = nil
        }
        let lines = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r" || $0 == "\r\n" })
        for (offset, raw) in lines.enumerated() {
            let number = offset + 1
            var words = Self.words(of: raw.drop(while: { $0 == "\u{FEFF}" }))
            guard !words.isEmpty else { continue }
            let command = words.removeFirst().uppercased()
            func fail(_ message: String) -> CueSheetError { CueSheetError(line: number, message: message) }
            switch command {
            case "REM", "FLAGS", "ISRC", "CATALOG", "SONGWRITER", "CDTEXTFILE", "PREGAP", "POSTGAP", "COMPOSER", "ARRANGER", "MESSAGE":
                continue
            case "FILE":
                guard let name = words.first else { throw fail("FILE without a file name") }
                try close()
                file = name
            case "TRACK":
                guard let text = words.first, let trackNumber = Int(text), (0...99).contains(trackNumber) else {
                    throw fail("TRACK needs a number of 1 to 99, not '\(words.first ?? "")'")
                }
                guard file != nil else { throw fail("TRACK \(trackNumber) comes before any FILE") }
                try close()
                if let last = tracks.last, trackNumber <= last.number {
                    throw fail("TRACK \(trackNumber) follows TRACK \(last.number): track numbers must rise")
                }
                current = (Track(number: trackNumber, title: nil, performer: nil, file: file, start: .cdFrames(0), pregap: nil), number, false)
            case "INDEX":
                guard var open = current else { throw fail("INDEX before any TRACK") }
                guard words.count >= 2, let index = Int(words[0]) else { throw fail("INDEX needs a number and a time mm:ss:ff") }
                guard let time = Self.cdFrames(words[1]) else { throw fail("'\(words[1])' is not a time mm:ss:ff (seconds under 60, frames under 75)") }
                switch index {
                case 0:
                    open.track.pregap = .cdFrames(time)
                case 1:
                    if case .cdFrames(let gap)? = open.track.pregap, gap > time { throw fail("INDEX 01 comes before the track's INDEX 00") }
                    open.track.start = .cdFrames(time)
                    open.track.file = file
                    open.hasStart = true
                default:
                    break   // indexes 02... mark places inside the track
                }
                current = open
            case "TITLE", "PERFORMER":
                let value = words.joined(separator: " ")
                if var open = current {
                    if command == "TITLE" { open.track.title = value } else { open.track.performer = value }
                    current = open
                } else if command == "TITLE" {
                    title = value
                } else {
                    performer = value
                }
            default:
                throw fail("unknown command \(command)")
            }
        }
        try close()
        guard !tracks.isEmpty else { throw CueSheetError(line: 0, message: "no TRACK with an INDEX 01") }
        // Within a file, tracks start in order.
        for (a, b) in zip(tracks, tracks.dropFirst()) where a.file == b.file {
            if case .cdFrames(let x) = a.start, case .cdFrames(let y) = b.start, y <= x {
                throw CueSheetError(line: 0, message: "TRACK \(b.number) starts at or before TRACK \(a.number) in \(b.file ?? "the file")")
            }
        }
        self.init(title: title, performer: performer, tracks: tracks)
    }

    /// The words of a line: quoted strings whole (without their quotes), others split at spaces.
    static func words(of line: Substring) -> [String] {
        var words: [String] = []
        var current = ""
        var quoted = false, inWord = false
        for character in line {
            if character == "\"" {
                if quoted { words.append(current); current = ""; inWord = false }
                quoted.toggle()
            } else if !quoted && (character == " " || character == "\t") {
                if inWord { words.append(current); current = ""; inWord = false }
            } else {
                current.append(character)
                inWord = true
            }
        }
        if inWord || quoted { words.append(current) }
        return words
    }

    /// `mm:ss:ff` in CD frames.
    static func cdFrames(_ text: String) -> Int? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, let m = Int(parts[0]), let s = Int(parts[1]), let f = Int(parts[2]),
              m >= 0, (0..<60).contains(s), (0..<75).contains(f) else { return nil }
        return (m * 60 + s) * 75 + f
    }
}

/// A track placed in its file, in sample frames.
public struct CueTrack: Hashable, Sendable {
    /// The track's number.
    public var number: Int
    /// The track's title.
    public var title: String?
    /// The track's performer.
    public var performer: String?
    /// The file the track is in, as the sheet names it (nil: the file the sheet is in).
    public var file: String?
    /// The track's first sample frame in its file (its `INDEX 01`).
    public var startFrame: Int64
    /// Its frames: to the next track's `INDEX 01` in the same file, or to the file's end.
    public var frames: Int64
}

extension CueSheet {
    /// The tracks in sample frames, given each file's valid frames and rate (a track's performer
    /// is the sheet's when it has none of its own).
    /// - Throws: ``CueSheetError`` when a track starts past its file's end; what `file` throws.
    public func resolvedTracks(file: (String?) throws -> (frames: Int64, rate: Double)) throws -> [CueTrack] {
        var resolved: [CueTrack] = []
        for (index, track) in tracks.enumerated() {
            let (length, rate) = try file(track.file)
            let start = track.start.frame(atRate: rate)
            var end = length
            if index + 1 < tracks.count, tracks[index + 1].file == track.file {
                end = tracks[index + 1].start.frame(atRate: rate)
            }
            guard start < length, end > start else {
                throw CueSheetError(line: 0, message: "TRACK \(track.number) starts at frame \(start), past the end of \(track.file ?? "its file") (\(length) frames)")
            }
            resolved.append(CueTrack(number: track.number, title: track.title, performer: track.performer ?? performer,
                                     file: track.file, startFrame: start, frames: min(end, length) - start))
        }
        return resolved
    }
}

extension CueSheet {
    /// A FLAC `CUESHEET` metadata block's tracks (the lead-out left out), their indexes in
    /// sample frames from the start of the stream; nil when the block is malformed.
    ///
    /// The block: a 128-byte catalog number, 8 bytes of lead-in, 259 bytes of flags, the track
    /// count; each track 36 bytes (offset, number, ISRC, flags, its index count), then its
    /// indexes of 12 bytes (offset from the track's, number).
    init?(flacBlock body: [UInt8]) {
        func u64(_ at: Int) -> Int64 { Int64(bitPattern: body[at..<(at + 8)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }) }
        guard body.count >= 396 else { return nil }
        let count = Int(body[395])
        var at = 396
        var tracks: [Track] = []
        for _ in 0..<count {
            guard at + 36 <= body.count else { return nil }
            let offset = u64(at), number = Int(body[at + 8]), indexes = Int(body[at + 35])
            at += 36
            var start: Int64?, pregap: Int64?
            for _ in 0..<indexes {
                guard at + 12 <= body.count else { return nil }
                let point = u64(at), index = body[at + 8]
                if index == 1 { start = offset + point } else if index == 0 { pregap = offset + point }
                at += 12
            }
            // The lead-out (170 on a CD, 255 otherwise) has no index: the end of the audio.
            guard number != 170, number != 255, let start else { continue }
            guard start >= 0, tracks.last.map({ number > $0.number }) ?? true else { return nil }
            tracks.append(Track(number: number, title: nil, performer: nil, file: nil, start: .sampleFrame(start),
                                pregap: pregap.map { .sampleFrame($0) }))
        }
        guard !tracks.isEmpty else { return nil }
        self.init(tracks: tracks)
    }
}
