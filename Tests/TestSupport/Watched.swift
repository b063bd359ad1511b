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
