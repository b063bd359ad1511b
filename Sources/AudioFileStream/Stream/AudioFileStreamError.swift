/// What went wrong while parsing a stream, in which container and at which byte.
public struct AudioFileStreamError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of failure it was.
    public enum Code: String, Hashable, Sendable {
        /// The bytes are not a container this library reads.
        case unsupportedFileType
        /// The container is read, but its codec or variant is not supported (free-format MP3, IMA4 decoding...).
        case unsupportedDataFormat
        /// A structure in the file is malformed or contradicts itself.
        case invalidData
        /// The data ended before a structure or a promised amount of audio was complete.
        case truncated
        /// No audio frame could be found (after a bounded search).
        case noAudio
        /// A length field asks for more memory than the library will spend on it.
        case tooLarge
        /// The container keeps its index after the media data and the source cannot seek.
        case indexAfterMediaData
        /// A call that does not fit the stream's state (seeking before the index is known...).
        case invalidOperation
    }

    /// What kind of failure it was.
    public let code: Code
    /// The container being parsed, when known.
    public let container: AudioFileType?
    /// Absolute byte offset in the stream where the problem is.
    public let byteOffset: Int64
    /// What went wrong, in words.
    public let message: String
    /// The file (or the name the audio was opened under) the error is about, when it came from
    /// one: ``AudioFile`` names it in every error it throws or keeps.
    public private(set) var path: String?

    /// An error of `code` in `container` at `byteOffset`, saying `message`.
    public init(_ code: Code, _ container: AudioFileType?, _ byteOffset: Int64, _ message: String) {
        self.code = code
        self.container = container
        self.byteOffset = byteOffset
        self.message = message
    }

    /// The same error, about the file at `path` (a name it already has stays).
    public func about(_ path: String) -> AudioFileStreamError {
        var named = self
        named.path = self.path ?? path
        return named
    }

    public var description: String {
        let place = "\(container?.displayName ?? "stream") at byte \(byteOffset): \(message)"
        return path.map { "\($0): \(place)" } ?? place
    }
}
