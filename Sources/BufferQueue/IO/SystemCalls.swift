#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A system call that failed: its name and `errno`.
public struct SystemError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The call, e.g. `"pwrite"`.
    public var call: String
    /// The `errno` it set.
    public var errno: Int32

    /// The failure of `call` with `errno`.
    public init(call: String, errno: Int32) {
        self.call = call
        self.errno = errno
    }

    /// The C library's text for ``errno`` (`strerror`).
    public var reason: String { String(cString: strerror(errno)) }
    /// `ENOSPC` or `EDQUOT`: the disk is full.
    public var isNoSpace: Bool { errno == ENOSPC || errno == EDQUOT }
    public var description: String { "\(call): \(reason)" }
}

/// Runs a system call until it does not fail with `EINTR` (when asked); a failure (-1) becomes
/// a ``SystemError`` naming the call. The one place the library turns `errno` into an error
/// (swift-system's `valueOrErrno(retryOnInterrupt:)`).
@inline(__always)
package func valueOrErrno<I: FixedWidthInteger>(_ call: String, retryOnInterrupt: Bool = true, _ body: () -> I) throws(SystemError) -> I {
    while true {
        let result = body()
        if result != -1 { return result }
        let code = errno
        if retryOnInterrupt && code == EINTR { continue }
        throw SystemError(call: call, errno: code)
    }
}

/// An open file descriptor and the calls the library makes on it, each wrapped once: `EINTR`
/// retried, `errno` kept in a ``SystemError``, partial transfers continued.
package struct FileDescriptor: Sendable, Hashable {
    package let rawValue: Int32

    package init(rawValue: Int32) { self.rawValue = rawValue }

    /// `open(2)` with `O_CLOEXEC`.
    package static func open(_ path: String, _ flags: Int32, permissions: mode_t = 0o644) throws(SystemError) -> FileDescriptor {
        FileDescriptor(rawValue: try valueOrErrno("open") { Glibc.open(path, flags | O_CLOEXEC, permissions) })
    }

    /// One `pread(2)`: at most `buffer.count` bytes at `offset`; 0 at the end of the file.
    package func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(SystemError) -> Int {
        try valueOrErrno("pread") { pread(rawValue, buffer.baseAddress, buffer.count, off_t(offset)) }
    }

    /// `pread(2)` until `buffer` is full or the file ends; returns the bytes read.
    package func readAll(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(SystemError) -> Int {
        var done = 0
        while done < buffer.count {
            let count = try read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]), at: offset + Int64(done))
            if count == 0 { break }
            done += count
        }
        return done
    }

    /// Writes all of `bytes`: `pwrite(2)` at `offset`, or `write(2)` at the current position when
    /// `offset` is nil (a pipe). Partial writes are continued.
    /// - Throws: ``SystemError``, with the bytes written before it in `written`.
    package func writeAll(_ bytes: UnsafeRawBufferPointer, at offset: Int64? = nil, written: inout Int) throws(SystemError) {
        written = 0
        while written < bytes.count {
            let rest = UnsafeRawBufferPointer(rebasing: bytes[written...])
            let count: Int
            if let offset {
                count = try valueOrErrno("pwrite") { pwrite(rawValue, rest.baseAddress, rest.count, off_t(offset + Int64(written))) }
            } else {
                count = try valueOrErrno("write") { Glibc.write(rawValue, rest.baseAddress, rest.count) }
            }
            guard count > 0 else { throw SystemError(call: offset == nil ? "write" : "pwrite", errno: EIO) }
            written += count
        }
    }

    /// `fstat(2)`.
    package func status() throws(SystemError) -> stat {
        var info = stat()
        _ = try valueOrErrno("fstat") { fstat(rawValue, &info) }
        return info
    }

    /// `ftruncate(2)`.
    package func truncate(to length: Int64) throws(SystemError) {
        _ = try valueOrErrno("ftruncate") { ftruncate(rawValue, off_t(length)) }
    }

    /// `fsync(2)`.
    package func sync() throws(SystemError) {
        _ = try valueOrErrno("fsync") { fsync(rawValue) }
    }

    /// `close(2)`, not retried on `EINTR` (Linux has closed the descriptor by then).
    package func close() throws(SystemError) {
        _ = try valueOrErrno("close", retryOnInterrupt: false) { Glibc.close(rawValue) }
    }

    /// `rename(2)`.
    package static func rename(_ from: String, to: String) throws(SystemError) {
        _ = try valueOrErrno("rename") { Glibc.rename(from, to) }
    }

    /// `unlink(2)`.
    package static func remove(_ path: String) throws(SystemError) {
        _ = try valueOrErrno("unlink") { Glibc.unlink(path) }
    }

    /// `fchmod(2)`.
    package func setPermissions(_ mode: mode_t) throws(SystemError) {
        _ = try valueOrErrno("fchmod") { fchmod(rawValue, mode) }
    }

    /// The names in directory `path` (`opendir(3)`/`readdir(3)`), without `.` and `..`.
    package static func directoryEntries(_ path: String) throws(SystemError) -> [String] {
        guard let directory = opendir(path) else { throw SystemError(call: "opendir", errno: errno) }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafePointer(to: entry.pointee.d_name) { pointer in
                pointer.withMemoryRebound(to: CChar.self, capacity: MemoryLayout.size(ofValue: entry.pointee.d_name)) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Whether process `pid` exists (`kill(2)` with signal 0: only `ESRCH` says it does not).
    package static func processExists(_ pid: pid_t) -> Bool {
        Glibc.kill(pid, 0) == 0 || errno != ESRCH
    }
}
