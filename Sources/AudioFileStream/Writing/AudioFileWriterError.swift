import BufferQueue

/// A file writer's failure: which file, what failed, where, and the system's error when a call
/// failed — never a parser's error.
public struct AudioFileWriterError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of failure it was.
    public enum Code: String, Hashable, Sendable {
        /// The file could not be created or opened.
        case cannotCreate
        /// The format is not one the writer writes.
        case unsupportedFormat
        /// Bytes could not be written (a full disk, an output that cannot seek).
        case writeFailed
        /// The file could not be cut to length or closed.
        case closeFailed
        /// The writer was already closed.
        case closed
    }

    /// What kind of failure it was.
    public var code: Code
    /// The file.
    public var path: String
    /// Where in the file, when the failure is at a place.
    public var byteOffset: Int64?
    /// The system call that failed, if one did.
    public var underlying: SystemError?
    /// What went wrong, in words.
    public var message: String

    /// An error of `code` about the file at `path`, at `byteOffset` where known, caused by `underlying` where a system call failed.
    public init(_ code: Code, path: String, byteOffset: Int64? = nil, underlying: SystemError? = nil, _ message: String) {
        self.code = code
        self.path = path
        self.byteOffset = byteOffset
        self.underlying = underlying
        self.message = message
    }

    public var description: String {
        "\(path)\(byteOffset.map { " at byte \($0)" } ?? ""): \(message)\(underlying.map { ": \($0.reason)" } ?? "")"
    }
}
