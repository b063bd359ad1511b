#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A thread of the library's own (a device loop, a writer, a render job), started without
/// Foundation: what `Thread` would give, for modules that must not load Foundation and its ICU.
package enum OwnThread {
    /// Starts a detached thread named `name` (the first 15 bytes show in `top -H` and debuggers)
    /// that runs `body` and ends.
    package static func start(name: String, _ body: @escaping @Sendable () -> Void) {
        let start = Unmanaged.passRetained(ThreadStart(name: name, body: body)).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(&thread, nil, ownThreadEntry, start)
        precondition(result == 0, "pthread_create failed: \(result)")
        pthread_detach(thread)
    }

    /// Names the calling thread (Linux keeps 15 bytes), through /proc as `pthread_setname_np`
    /// does (which Swift's Glibc module does not declare). A failure leaves the name as it was.
    static func nameThisThread(_ name: String) {
        guard let file = try? FileDescriptor.open("/proc/thread-self/comm", O_WRONLY) else { return }
        var written = 0
        let bytes = Array(name.utf8.prefix(15))
        bytes.withUnsafeBytes { try? file.writeAll($0, written: &written) }
        try? file.close()
    }
}

/// What a new thread runs, handed over retained.
private final class ThreadStart: Sendable {
    let name: String
    let body: @Sendable () -> Void
    init(name: String, body: @escaping @Sendable () -> Void) {
        self.name = name
        self.body = body
    }
}

/// The thread's entry point (a C function: a closure here trips the compiler's region checker).
private func ownThreadEntry(_ argument: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    guard let argument else { return nil }
    let start = Unmanaged<ThreadStart>.fromOpaque(argument).takeRetainedValue()
    OwnThread.nameThisThread(start.name)
    start.body()
    return nil
}
