import Foundation

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
}

/// Runs a command-line tool and returns its standard output and exit status. Its output is read
/// on a thread of its own and its exit comes from Foundation's termination handler, so no thread
/// of Swift's cooperative pool blocks (`Process.waitUntilExit` would spin one).
/// - Throws: when the tool cannot start, or has not exited `timeout` after closing its output.
public func runTool(_ tool: String, _ arguments: [String], timeout: Duration = .seconds(120)) async throws -> ToolResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: tool)
    process.arguments = arguments
    // No terminal input: ffmpeg reads its stdin for commands, and a background run would stop on it.
    process.standardInput = FileHandle.nullDevice
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = FileHandle.nullDevice
    let exit = Watched<Int32?>(nil)
    process.terminationHandler = { finished in exit.update { $0 = finished.terminationStatus } }
    try process.run()
    // The output is read while the exit is awaited: a tool that hangs is killed at the deadline
    // (which closes its pipe) instead of keeping the read waiting.
    let reading = Task { await onOwnThread { pipe.fileHandleForReading.readDataToEndOfFile() } }
    // Foundation's own exit notice did not arrive in a test process that had started a PulseAudio
    // daemon earlier (seen with pactl and aqrecord): once the output closes, reap the tool here too;
    // whichever reaps it first reports the status.
    let pid = process.processIdentifier
    Task {
        _ = await reading.value
        let status = await onOwnThread { () -> Int32? in
            var status: Int32 = 0
            return waitpid(pid, &status, 0) == pid ? status : nil
        }
        if let status { exit.update { $0 = $0 ?? ((status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)) } }
    }
    guard await exit.wait(timeout: timeout, until: { $0 != nil }), let status = exit.current else {
        kill(process.processIdentifier, SIGKILL)
        _ = await reading.value
        throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "\(tool) did not exit within \(timeout)"])
    }
    return ToolResult(output: await reading.value, status: status)
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
