import BufferQueue

/// What each container is called and holds: the names the sniffer knows it by (extensions, MIME
/// types), the names Apple's Audio File Services give it (its type name, UTIs), and the formats
/// this library decodes from it. ``AudioSniffer`` and AudioToolbox's global info read this table.
extension AudioFileType {
    /// File name extensions, the usual one first (lowercase).
    public var pathExtensions: [String] {
        switch self {
        case .mp3: return ["mp3", "mp2", "mp1", "mpga"]
        case .adts: return ["aac", "adts"]
        case .mp4: return ["m4a", "mp4", "m4b", "3gp", "3g2"]
        case .caf: return ["caf"]
        case .wave: return ["wav", "wave"]
        case .aiff: return ["aiff", "aif"]
        case .aifc: return ["aifc"]
        case .amr: return ["amr", "awb"]
        case .ogg: return ["ogg", "oga", "opus"]
        case .flac: return ["flac"]
        case .matroska: return ["mka", "webm", "mkv"]
        case .mpegTransportStream: return ["ts"]
        }
    }

    /// MIME types (lowercase), the registered one first.
    public var mimeTypes: [String] {
        switch self {
        case .mp3: return ["audio/mpeg", "audio/mp3", "audio/mpeg3", "audio/x-mpeg"]
        case .adts: return ["audio/aac", "audio/aacp", "audio/x-aac"]
        case .mp4: return ["audio/mp4", "audio/x-m4a", "audio/m4a", "video/mp4"]
        case .caf: return ["audio/x-caf"]
        case .wave: return ["audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave"]
        case .aiff: return ["audio/aiff", "audio/x-aiff"]
        case .aifc: return []
        case .amr: return ["audio/amr", "audio/amr-wb"]
        case .ogg: return ["audio/ogg", "application/ogg", "audio/opus", "audio/vorbis", "audio/x-vorbis+ogg", "audio/x-opus+ogg"]
        case .flac: return ["audio/flac", "audio/x-flac"]
        case .matroska: return ["audio/webm", "audio/x-matroska", "video/webm", "video/x-matroska"]
        case .mpegTransportStream: return ["video/mp2t", "audio/mp2t"]
        }
    }

    /// Uniform type identifiers, as Apple's platforms name the type.
    public var utis: [String] {
        switch self {
        case .mp3: return ["public.mp3"]
        case .adts: return ["public.aac-audio"]
        case .mp4: return ["com.apple.m4a-audio", "public.mpeg-4-audio"]
        case .caf: return ["com.apple.coreaudio-format"]
        case .wave: return ["com.microsoft.waveform-audio"]
        case .aiff: return ["public.aiff-audio"]
        case .aifc: return ["public.aifc-audio"]
        case .amr: return ["org.3gpp.adaptive-multi-rate-audio"]
        case .ogg: return ["org.xiph.ogg-audio"]
        case .flac: return ["org.xiph.flac"]
        case .matroska: return ["org.webmproject.webm", "org.matroska.mka"]
        case .mpegTransportStream: return ["public.mpeg-2-transport-stream"]
        }
    }

    /// The type's name as Audio File Services gives it (`kAudioFileGlobalInfo_FileTypeName`).
    public var typeName: String {
        switch self {
        case .mp3: return "MPEG Layer 3"
        case .adts: return "AAC ADTS"
        case .mp4: return "Apple MPEG-4 Audio"
        case .caf: return "CAF"
        case .wave: return "WAVE"
        case .aiff: return "AIFF"
        case .aifc: return "AIFC"
        case .amr: return "AMR"
        case .ogg: return "Ogg"
        case .flac: return "FLAC"
        case .matroska: return "Matroska"
        case .mpegTransportStream: return "MPEG-2 Transport Stream"
        }
    }

    /// The formats this library decodes from the container (its parser yields them and a decoder
    /// module plays them).
    public var readableFormats: [AudioFormatID] {
        let aac: [AudioFormatID] = [.aacLC, .heAAC, .heAACv2]
        let mpeg: [AudioFormatID] = [.mpegLayer1, .mpegLayer2, .mpegLayer3]
        switch self {
        case .mp3: return mpeg
        case .adts: return aac
        case .mp4: return [.linearPCM] + aac + [.appleLossless, .mpegLayer3, .opus, .flac, .amr, .amrWideband]
        case .caf: return [.linearPCM] + aac + [.appleLossless, .appleIMA4, .uLaw, .aLaw, .opus, .flac, .amr, .amrWideband]
        case .wave: return [.linearPCM, .uLaw, .aLaw, .dviIntelIMA]
        case .aiff: return [.linearPCM]
        case .aifc: return [.linearPCM, .uLaw, .aLaw, .appleIMA4]
        case .amr: return [.amr, .amrWideband]
        case .ogg: return [.opus, .vorbis, .flac]
        case .flac: return [.flac]
        case .matroska: return [.opus, .vorbis, .flac, .aacLC, .heAAC, .heAACv2, .mpegLayer1, .mpegLayer2, .mpegLayer3, .linearPCM]
        case .mpegTransportStream: return aac + mpeg
        }
    }

    /// The container a file name extension names (case-insensitive), if any.
    public init?(pathExtension: String) {
        let lowered = pathExtension.lowercased()
        guard let type = Self.allCases.first(where: { $0.pathExtensions.contains(lowered) }) else { return nil }
        self = type
    }

    /// The container a MIME type (a `Content-Type` value) names (case-insensitive, parameters
    /// dropped), if any.
    public init?(contentType: String) {
        let type = contentType.split(separator: ";").first.map { $0.trimmingSpaces().lowercased() } ?? ""
        guard let found = Self.allCases.first(where: { $0.mimeTypes.contains(type) }) else { return nil }
        self = found
    }
}
