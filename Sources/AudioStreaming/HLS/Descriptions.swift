import AudioFileStream
import AudioPlayback
import BufferQueue
import FoundationEssentials

// Enums print as words users can read, also where they are nested in another value, not as
// `AudioStreaming.AudioLocation.http(...)`.

extension HLSPlaylist: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case let .master(v0): "master(\(v0))"
        case let .media(v0): "media(\(v0))"
        }
    }
}

extension AudioLocation: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case let .file(v0): "file(path: \(v0))"
        case let .http(v0): "http(\(v0))"
        case let .hls(v0): "hls(\(v0))"
        }
    }
}

extension HLSConfiguration.VariantChoice: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .highestBandwidth: "highestBandwidth"
        case .lowestBandwidth: "lowestBandwidth"
        case let .maximumBandwidth(v0): "maximumBandwidth(\(v0))"
        case let .index(v0): "index(\(v0))"
        }
    }
}

extension HLSKey.Method: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .aes128: "aes128"
        case .sampleAES: "sampleAES"
        case .sampleAESCTR: "sampleAESCTR"
        }
    }
}
