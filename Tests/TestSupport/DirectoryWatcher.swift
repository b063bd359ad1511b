import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Calls back when a file in a folder is created, written, or renamed into it (Linux inotify),
/// on a thread of its own that sleeps in `poll` until the kernel reports something or ``stop()``
/// wakes it. Tests wait on what changed instead of looking again and again.
public final class DirectoryWatcher: @unchecked Sendable {
    private let fd: Int32
    private let wake: (read: Int32, write: Int32)
    private let lock = NSLock()
    private var stopped = false

    /// - Parameter everyWrite: also each write to an open file (not only its close).
    public init(_ path: String, everyWrite: Bool = false, onChange: @escaping @Sendable (String) -> Void) throws {
        fd = inotify_init1(Int32(IN_CLOEXEC))
        guard fd >= 0 else { throw POSIXError(.EMFILE) }
        let mask = UInt32(IN_CREATE | IN_CLOSE_WRITE | IN_MOVED_TO) | (everyWrite ? UInt32(IN_MODIFY) : 0)
        guard inotify_add_watch(fd, path, mask) >= 0 else { close(fd); throw POSIXError(.ENOENT) }
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { close(fd); throw POSIXError(.EMFILE) }
        wake = (ends[0], ends[1])
        let (fd, wake) = (self.fd, self.wake)
        Thread {
            defer { close(fd); close(wake.read); close(wake.write) }
            var buffer = [UInt8](repeating: 0, count: 64 << 10)
            while true {
                var waiting = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
                guard poll(&waiting, 2, -1) >= 0 || errno == EINTR else { return }
                if waiting[1].revents != 0 { return }
                guard waiting[0].revents != 0 else { continue }
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                guard n > 0 else { return }
                // inotify_event: wd (4), mask (4), cookie (4), len (4), then len bytes of name.
                var offset = 0
                while offset + 16 <= n {
                    let length = Int(buffer[offset + 12]) | Int(buffer[offset + 13]) << 8 | Int(buffer[offset + 14]) << 16 | Int(buffer[offset + 15]) << 24
                    let name = buffer[(offset + 16)..<min(offset + 16 + length, n)].prefix { $0 != 0 }
                    onChange(String(decoding: name, as: UTF8.self))
                    offset += 16 + length
                }
            }
        }.start()
    }

    /// Ends the watching thread.
    public func stop() {
        // Once only: the thread closes the pipe after the first wake-up.
        guard lock.withLock({ () -> Bool in defer { stopped = true }; return !stopped }) else { return }
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
    }

    deinit { stop() }
}
