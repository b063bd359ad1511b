import BufferQueue

/// What a stream's bytes, its MIME type or its name say it holds.
public enum AudioContentKind: Hashable, Sendable, CustomStringConvertible {
    /// A container ``AudioFileStream`` reads.
    case audio(AudioFileType)
    /// An HLS playlist (`#EXTM3U`, or one of its MIME types or extensions).
    case hlsPlaylist
    /// A format this library recognises and does not decode: its name (`"AC-3"`, `"E-AC-3"`,
    /// `"Ogg Opus"`, `"FLAC"` …).
    case unsupported(String)

    public var description: String {
        switch self {
        case .audio(let type): return type.displayName
        case .hlsPlaylist: return "HLS playlist"
        case .unsupported(let name): return name
        }
    }
}

/// The one place that decides what bytes are: ``AudioFileStream`` asks it while sniffing, and the
/// HTTP and HLS sources, `aqinfo` and `aqplay` ask it about a location.
///
/// The bytes decide first, then the MIME type, then the name's extension. MPEG audio and ADTS
/// have no magic number: their frames are confirmed by ``AudioFileStream`` itself, which needs
/// three agreeing MPEG frames (or the end of the stream, or a tag, right after a frame).
public enum AudioSniffer {
    /// What the first bytes say, if they carry a magic number (a container, an HLS playlist, or a
    /// known format nothing here decodes). MPEG audio and ADTS give nil: only their frames show them.
    ///
    /// - Parameters:
    ///   - head: the first bytes (after any ID3v2 tag); 12 are enough for containers, an Ogg
    ///     stream's codec needs its first page, and AC-3 is confirmed by a second frame when its
    ///     bytes are there.
    ///   - isComplete: `head` is the whole stream (a short file).
    public static func kind(ofHead head: some Collection<UInt8>, isComplete: Bool = true) -> AudioContentKind? {
        let bytes = Array(head)
        return bytes.withUnsafeBytes {
            if case .found(let kind) = magic(HeadBytes($0), atEnd: isComplete) { return kind }
            return nil
        }
    }

    /// The kind a MIME type (a `Content-Type` value, parameters allowed) names, if any; case-insensitive.
    public static func kind(contentType: String) -> AudioContentKind? {
        let type = contentType.split(separator: ";").first.map { $0.trimmingSpaces().lowercased() } ?? ""
        if let container = AudioFileType(contentType: type) { return .audio(container) }
        switch type {
        case "application/vnd.apple.mpegurl", "application/x-mpegurl", "audio/mpegurl", "audio/x-mpegurl": return .hlsPlaylist
        case "audio/ac3", "audio/vnd.dolby.dd-raw": return .unsupported("AC-3")
        case "audio/eac3", "audio/vnd.dolby.dd-plus", "audio/ec3": return .unsupported("E-AC-3")
        default: return nil
        }
    }

    /// The kind a file name's extension names, if any; case-insensitive.
    public static func kind(pathExtension: String) -> AudioContentKind? {
        if let container = AudioFileType(pathExtension: pathExtension) { return .audio(container) }
        switch pathExtension.lowercased() {
        case "m3u8", "m3u": return .hlsPlaylist
        case "ac3": return .unsupported("AC-3")
        case "ec3", "eac3": return .unsupported("E-AC-3")
        default: return nil
        }
    }

    /// Bytes first, then the MIME type, then the extension: the first that says something wins.
    /// `head` may be empty when only the name is known.
    public static func identify(head: some Collection<UInt8>, isComplete: Bool = false, contentType: String? = nil,
                                pathExtension: String? = nil) -> AudioContentKind? {
        kind(ofHead: head, isComplete: isComplete)
            ?? contentType.flatMap { kind(contentType: $0) }
            ?? pathExtension.flatMap { kind(pathExtension: $0) }
    }

    /// The extension of a path or URL string's last component (query and fragment dropped), lowercased.
    public static func pathExtension(of location: String) -> String {
        let path = location.split(separator: "?", maxSplits: 1).first.map { $0.split(separator: "#", maxSplits: 1).first ?? $0 } ?? ""
        guard let last = path.split(separator: "/").last, let dot = last.lastIndex(of: ".") else { return "" }
        return String(last[last.index(after: dot)...]).lowercased()
    }

    // MARK: the magic numbers

    enum Magic: Equatable {
        case found(AudioContentKind)
        /// The bytes so far could still be one; this many decide it.
        case needMore(Int)
        case none
    }

    /// Read access to the first bytes of a stream (``ByteInput`` or a buffer).
    struct HeadBytes {
        let count: Int
        let byte: (Int) -> UInt8
        init(_ buffer: UnsafeRawBufferPointer) {
            count = buffer.count
            byte = { buffer[$0] }
        }
        init(_ input: ByteInput) {
            count = input.available
            byte = { input.u8($0) }
        }
        func matches(_ text: StaticString, at offset: Int) -> Bool {
            let length = text.utf8CodeUnitCount
            guard offset + length <= count else { return false }
            return (0..<length).allSatisfy { byte(offset + $0) == text.utf8Start[$0] }
        }
        func u32be(_ offset: Int) -> UInt32 {
            (0..<4).reduce(UInt32(0)) { $0 << 8 | UInt32(byte(offset + $1)) }
        }
    }

    /// The magic numbers, containers and refused formats alike, at the start of `head`.
    static func magic(_ head: HeadBytes, atEnd: Bool) -> Magic {
        // A few formats show themselves in fewer bytes; the rest wait for 12.
        if head.matches("#!AMR", at: 0) { return .found(.audio(.amr)) }
        if head.matches("#EXTM3U", at: 0) || head.matches("\u{FEFF}#EXTM3U", at: 0) { return .found(.hlsPlaylist) }
        guard head.count >= 12 else { return atEnd ? .none : .needMore(12) }
        if head.matches("RIFF", at: 0) && head.matches("WAVE", at: 8) { return .found(.audio(.wave)) }
        if head.matches("FORM", at: 0) && head.matches("AIFF", at: 8) { return .found(.audio(.aiff)) }
        if head.matches("FORM", at: 0) && head.matches("AIFC", at: 8) { return .found(.audio(.aifc)) }
        if head.matches("caff", at: 0) { return .found(.audio(.caf)) }
        for box: StaticString in ["ftyp", "moov", "mdat", "free", "skip", "wide", "pnot", "uuid", "styp", "moof", "sidx"] where head.matches(box, at: 4) {
            return .found(.audio(.mp4))
        }
        if head.matches("OggS", at: 0) { return ogg(head, atEnd: atEnd) }
        if head.matches("fLaC", at: 0) { return .found(.audio(.flac)) }
        if head.u32be(0) == 0x1A45_DFA3 { return .found(.audio(.matroska)) }
        if head.u32be(0) == 0x3026_B275 && head.u32be(4) == 0x8E66_CF11 { return .found(.unsupported("ASF (WMA)")) }
        if head.u32be(0) == 0x7FFE_8001 || head.u32be(0) == 0xFE7F_0180 { return .found(.unsupported("DTS")) }
        if head.matches("MThd", at: 0) { return .found(.unsupported("MIDI")) }
        if head.matches("wvpk", at: 0) { return .found(.unsupported("WavPack")) }
        if head.matches("MPCK", at: 0) || head.matches("MP+", at: 0) { return .found(.unsupported("Musepack")) }
        if head.matches("MAC ", at: 0) { return .found(.unsupported("Monkey's Audio")) }
        if head.matches(".snd", at: 0) { return .found(.unsupported("Sun/NeXT audio (.au)")) }
        if head.byte(0) == 0x0B && head.byte(1) == 0x77 {
            let found = dolby(head, at: 0, atEnd: atEnd)
            if found != .none { return found }
        }
        return .none
    }

    /// An Ogg stream: played when its first packet is Opus, Vorbis or FLAC (or when the first
    /// page is not there yet to tell), refused by name for Speex. A first stream that is not
    /// audio (Skeleton, Theora video) is followed by the others: the Ogg parser plays the first
    /// audio stream among them, or names what it found when there is none.
    private static func ogg(_ head: HeadBytes, atEnd: Bool) -> Magic {
        guard head.count >= 27 else { return atEnd ? .found(.audio(.ogg)) : .needMore(27) }
        let first = 27 + Int(head.byte(26))
        guard head.count >= first + 8 else { return atEnd ? .found(.audio(.ogg)) : .needMore(first + 8) }
        if head.matches("Speex   ", at: first) { return .found(.unsupported("Ogg Speex")) }
        return .found(.audio(.ogg))
    }

    /// An AC-3 or E-AC-3 sync frame at `offset` (sync word 0x0B77; `bsid` ≤ 10 is AC-3, 11–16
    /// E-AC-3), confirmed by the next frame's sync word when its bytes are there.
    static func dolby(_ head: HeadBytes, at offset: Int, atEnd: Bool) -> Magic {
        guard offset + 6 <= head.count else { return atEnd ? .none : .needMore(offset + 6) }
        guard head.byte(offset) == 0x0B, head.byte(offset + 1) == 0x77 else { return .none }
        let bsid = Int(head.byte(offset + 5) >> 3)
        let length: Int
        let name: String
        switch bsid {
        case 0...10:
            let fscod = Int(head.byte(offset + 4) >> 6), code = Int(head.byte(offset + 4) & 0x3F)
            guard fscod < 3, code < 38 else { return .none }
            let kbps = [32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 576, 640][code / 2]
            let words = fscod == 0 ? 2 * kbps : fscod == 2 ? 3 * kbps : kbps * 96_000 / 44_100 + (code & 1)
            length = 2 * words
            name = "AC-3"
        case 11...16:
            length = 2 * ((Int(head.byte(offset + 2) & 0x07) << 8 | Int(head.byte(offset + 3))) + 1)
            name = "E-AC-3"
        default:
            return .none
        }
        let next = offset + length
        if next + 2 <= head.count {
            return head.byte(next) == 0x0B && head.byte(next + 1) == 0x77 ? .found(.unsupported(name)) : .none
        }
        return atEnd ? .found(.unsupported(name)) : .needMore(next + 2)
    }
}

extension AudioFormatID {
    /// The format an RFC 6381 codec name (an HLS `CODECS` entry, an MP4 sample entry's name)
    /// stands for, if this library reads it: `mp4a.40.2` AAC-LC, `mp4a.40.5` HE-AAC,
    /// `mp4a.40.29` HE-AAC v2 (other `mp4a.40.*` as AAC-LC), `mp4a.40.34`, `mp4a.6b`, `mp4a.69`
    /// and `mp3` MPEG audio, `alac`, `samr`, `sawb`, `opus`, `fLaC`. nil for others (`ac-3`, `ec-3` …).
    public init?(codecName: String) {
        let name = codecName.lowercased()
        switch name {
        case "mp4a.40.5": self = .heAAC
        case "mp4a.40.29": self = .heAACv2
        case "mp4a.40.34", "mp4a.6b", "mp4a.69", "mp3": self = .mpegLayer3
        case "alac": self = .appleLossless
        case "samr": self = .amr
        case "sawb": self = .amrWideband
        case "opus": self = .opus
        case "flac": self = .flac
        default:
            guard name.hasPrefix("mp4a.40.") else { return nil }
            self = .aacLC
        }
    }
}

extension Substring {
    func trimmingSpaces() -> String {
        String(drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
    }
}
