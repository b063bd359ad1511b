import Foundation
import CProcessWait

/// A value that tests wait on: every change wakes the waiters whose condition now holds; a waiter
/// whose deadline passes first gets `false`. Nothing polls; the deadline is the only timer.
public final class Watched<Value: Sendable>: @unchecked Sendable {
    private struct Waiter {
        let condition: @Sendable (Value) -> Bool
        let continuation: CheckedContinuation<Bool, Never>
    }

    private let lock = NSLock()
    private var value: Value
    private var waiters: [Int: Waiter] = [:]
    private var nextID = 0

    public init(_ value: Value) { self.value = value }

    /// The value now.
    public var current: Value { lock.withLock { value } }

    /// Changes the value and wakes the waiters it satisfies.
    public func update<R>(_ body: (inout Value) -> R) -> R {
        var woken: [Waiter] = []
        let result: R = lock.withLock {
            let result = body(&value)
            for (id, waiter) in waiters where waiter.condition(value) {
                woken.append(waiter)
                waiters[id] = nil
            }
            return result
        }
        for waiter in woken { waiter.continuation.resume(returning: true) }
        return result
    }

    /// Waits until `condition` holds (true) or `timeout` passes (false).
    public func wait(timeout: Duration = .seconds(10), until condition: @escaping @Sendable (Value) -> Bool) async -> Bool {
        await withCheckedContinuation { continuation in
            let id: Int? = lock.withLock {
                if condition(value) { return nil }
                nextID += 1
                waiters[nextID] = Waiter(condition: condition, continuation: continuation)
                return nextID
            }
            guard let id else {
                continuation.resume(returning: true)
                return
            }
            // The deadline is a dispatch timer; if the condition came first it finds no waiter.
            let parts = timeout.components
            let nanoseconds = Int(parts.seconds) * 1_000_000_000 + Int(parts.attoseconds / 1_000_000_000)
            DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [weak self] in self?.expire(id) }
        }
    }

    private func expire(_ id: Int) {
        let waiter = lock.withLock { waiters.removeValue(forKey: id) }
        waiter?.continuation.resume(returning: false)
    }
}

/// Runs a blocking call on a thread of its own (never on Swift's cooperative pool) and resumes
/// when it returns.
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: body()) }.start()
    }
}

/// The same for a call that throws.
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

/// What a tool run by ``runTool(_:_:timeout:)`` left.
public struct ToolResult: Sendable {
    public let output: Data
    public let status: Int32
    /// What it wrote to standard error.
    public let errorOutput: Data
}

/// A child process's exit, watched through a pidfd (a descriptor naming that process only).
///
/// Foundation on Linux learns that a child exited when a socket it gave the child closes; every
/// process the child's siblings start while it runs inherits that socket too (swift-corelibs-
/// foundation issue 4795), so a long-lived daemon started by the same test process (a private
/// PulseAudio server) can hide a tool's exit from Foundation for ever. The pidfd becomes readable
/// when the process exits, whoever else holds its descriptors, and `waitid(P_PIDFD, WNOWAIT)`
/// reads that process's status only (no recycled pid can be taken for it) without reaping it.
public final class ChildExit: Sendable {
    private let descriptor: Int32
    private let status = Watched<Int32?>(nil)

    /// Starts watching `process`, which has been started with `run()` and has a termination
    /// handler that calls ``foundationReported(_:)`` (Foundation may still reap it first).
    public init(_ process: Process) {
        descriptor = pidfd_open(process.processIdentifier, 0)
        let descriptor = self.descriptor, status = self.status
        guard descriptor >= 0 else { return }   // already reaped: Foundation's handler reports it
        Thread {
            var wake = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            while poll(&wake, 1, -1) < 0 && errno == EINTR {}
            var info = siginfo_t()
            // WNOWAIT: read the status but leave the reaping to Foundation, so that its own
            // waitpid can never meet a recycled pid (another child of this process).
            if waitid(P_PIDFD, id_t(descriptor), &info, WEXITED | WNOWAIT) == 0 {
                let code = info._sifields._sigchld.si_status
                let exited = info.si_code == Int32(CLD_EXITED)
                status.update { $0 = $0 ?? (exited ? code : 128 + code) }
            }
            close(descriptor)
        }.start()
    }

    /// What a termination handler saw (when Foundation reaped the process before the pidfd did).
    public func foundationReported(_ process: Process) {
        let code = process.terminationStatus
        let signalled = process.terminationReason == .uncaughtSignal
        status.update { $0 = $0 ?? (signalled ? 128 + code : code) }
    }

    /// The exit status (128 + the signal for a killed process), or nil when it has not exited by
    /// the deadline.
    public func wait(timeout: Duration) async -> Int32? {
        _ = await status.wait(timeout: timeout) { $0 != nil }
        return status.current
    }
}

/// Starts `process` with its exit watched by ``ChildExit`` (sets its termination handler).
public func runWatched(_ process: Process) throws -> ChildExit {
    let box = Watched<ChildExit?>(nil)
    process.terminationHandler = { finished in box.current?.foundationReported(finished) }
    try process.run()
    let exit = ChildExit(process)
    box.update { $0 = exit }
    // The handler may have run before the watcher existed: ask Foundation once more.
    if !process.isRunning { exit.foundationReported(process) }
    return exit
}

/// Kills `process` (SIGKILL) and waits until it is gone, at most `timeout`; false if it is not.
public func killAndWait(_ process: Process, _ exit: ChildExit, timeout: Duration = .seconds(10)) async -> Bool {
    kill(process.processIdentifier, SIGKILL)
    return await exit.wait(timeout: timeout) != nil
}

/// Runs a command-line tool and returns its standard output and error and exit status. Its output
/// is read on threads of its own and its exit is watched by ``ChildExit``, so no thread of Swift's
/// cooperative pool blocks (`Process.waitUntilExit` would spin one).
/// - Throws: when the tool cannot start, or has not exited by `timeout`.
/// `environment` adds to (or replaces in) the test's own environment.
public func runTool(_ tool: String, _ arguments: [String], environment: [String: String] = [:],
                    timeout: Duration = .seconds(120)) async throws -> ToolResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: tool)
    process.arguments = arguments
    if !environment.isEmpty {
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    }
    // No terminal input: ffmpeg reads its stdin for commands, and a background run would stop on it.
    process.standardInput = FileHandle.nullDevice
    let pipe = Pipe(), errorPipe = Pipe()
    process.standardOutput = pipe
    process.standardError = errorPipe
    let exit = try runWatched(process)
    // The output is read while the exit is awaited: a tool that hangs is killed at the deadline
    // (which closes its pipes) instead of keeping the reads waiting.
    let reading = Task { await onOwnThread { pipe.fileHandleForReading.readDataToEndOfFile() } }
    let readingErrors = Task { await onOwnThread { errorPipe.fileHandleForReading.readDataToEndOfFile() } }
    guard let status = await exit.wait(timeout: timeout) else {
        kill(process.processIdentifier, SIGKILL)
        _ = await reading.value
        _ = await readingErrors.value
        throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "\(tool) did not exit within \(timeout)"])
    }
    return ToolResult(output: await reading.value, status: status, errorOutput: await readingErrors.value)
}

/// Reads lines from a pipe on a thread of its own until it closes (a server's log, say).
public final class LineReader {
    private let thread: Thread
    public init(_ handle: FileHandle, onEnd: @escaping @Sendable () -> Void, _ onLine: @escaping @Sendable (String) -> Void) {
        thread = Thread {
            var buffer = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty {
                    onEnd()
                    break
                }
                buffer.append(chunk)
                while let newline = buffer.firstIndex(of: 10) {
                    onLine(String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self))
                    buffer.removeSubrange(buffer.startIndex...newline)
                }
            }
        }
    }
    public func start() { thread.start() }
}

/// Starts `tool` with `arguments` (`environment` over this process's), its standard output read
/// line by line as it comes and its standard error dropped: for a test that acts on what a
/// running program says (a recorder's "recording"), then waits for its exit.
public func startReadingLines(_ tool: String, _ arguments: [String],
                              environment: [String: String]) throws -> (lines: Watched<[String]>, exit: ChildExit) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: tool)
    process.arguments = arguments
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = FileHandle.nullDevice
    let lines = Watched<[String]>([])
    let reader = LineReader(pipe.fileHandleForReading, onEnd: {}) { line in lines.update { $0.append(line) } }
    let exit = try runWatched(process)
    reader.start()
    return (lines, exit)
}
