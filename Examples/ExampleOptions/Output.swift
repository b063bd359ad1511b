#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import BufferQueue

/// Writes `text` to standard error as it is (no newline added): what the examples print besides
/// their results, without Foundation's `FileHandle`.
public func writeError(_ text: String) {
    var written = 0
    var bytes = Array(text.utf8)
    bytes.withUnsafeBytes { try? FileDescriptor(rawValue: 2).writeAll($0, written: &written) }
    bytes.removeAll()
}

/// Writes `text` to standard output at once (no newline added, nothing held in a buffer): a line
/// a program prints as each piece of work is done reaches a pipe then, not at exit.
public func writeOutput(_ text: String) {
    var written = 0
    var bytes = Array(text.utf8)
    bytes.withUnsafeBytes { try? FileDescriptor(rawValue: 1).writeAll($0, written: &written) }
    bytes.removeAll()
}

/// Ends the program with `status` (C's `exit`, which Foundation re-exports on a Mac).
public func exitProgram(_ status: Int32) -> Never {
    exit(status)
}

/// The processors online (what Foundation's `activeProcessorCount` gives on a machine without CPU limits).
public var activeProcessorCount: Int {
    max(Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))), 1)
}
