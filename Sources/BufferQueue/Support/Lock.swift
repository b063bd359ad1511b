#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value guarded by a `pthread_mutex_t`; `package` so the library's other modules use the same
/// lock without it being public API.
///
/// The library uses this rather than `Synchronization.Mutex` for one reason: on Linux that Mutex
/// locks with raw futex calls, which ThreadSanitizer cannot see, so every access it guards shows
/// up as a data race and real races drown in the noise (checked with Swift 6.3 and
/// `-sanitize=thread`). A pthread mutex is intercepted by TSan and costs the same uncontended.
/// Lock-free state keeps using `Synchronization.Atomic`, which TSan understands.
///
/// Guard a value, not `()`: a zero-size value shares its address with the mutex pointer, so
/// ThreadSanitizer reads every lock as an access racing with the last holder's (put the guarded
/// state in a struct instead, as `AudioDiskCache` does).
// @unchecked: the value is reached only inside withLock, under the pthread mutex.
package final class Lock<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    package init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let result = pthread_mutex_init(mutex, nil)
        precondition(result == 0, "pthread_mutex_init failed: \(result)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` with the value, the mutex held.
    @inline(__always)
    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }

    /// Runs `body` with the value, the mutex held; when another thread holds it, tries again a
    /// bounded number of times before blocking. For a lock a rendering thread shares with
    /// critical sections of a few instructions (a hand-over of arrays): a holder running on
    /// another core lets go within the spin, so the rendering thread does not sleep on the futex;
    /// a holder that was preempted is still waited for (spinning on would starve it).
    @inline(__always)
    package func withLockSpinningFirst<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        var attempts = 0
        while pthread_mutex_trylock(mutex) != 0 {
            attempts += 1
            if attempts == 200 {
                pthread_mutex_lock(mutex)
                break
            }
        }
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }

    /// Runs `body` with the value if the mutex is free now; nil when another thread holds it.
    /// Never blocks (a real-time thread may call it).
    @inline(__always)
    package func withLockIfAvailable<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result? {
        guard pthread_mutex_trylock(mutex) == 0 else { return nil }
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}

/// A value guarded by a `pthread_mutex_t` with a condition variable: ``Lock`` for state that a
/// thread waits on (a device thread parked until a command, a caller waiting until the device
/// thread has acted). Every ``withLock(_:)`` wakes the waiters, which check their predicate again.
// @unchecked: the value is reached only inside withLock, under the pthread mutex.
package final class ConditionLock<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var value: Value

    package init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        let locked = pthread_mutex_init(mutex, nil), signalled = pthread_cond_init(condition, nil)
        precondition(locked == 0 && signalled == 0, "pthread_mutex_init / pthread_cond_init failed: \(locked), \(signalled)")
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deinitialize(count: 1)
        condition.deallocate()
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` with the value, the mutex held; then wakes every waiter.
    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer {
            pthread_cond_broadcast(condition)
            pthread_mutex_unlock(mutex)
        }
        return try body(&value)
    }

    /// Waits, the mutex released meanwhile, until `predicate` holds for the value; then runs
    /// `body` with it (the mutex held) and wakes every waiter.
    package func wait<Result>(until predicate: (Value) -> Bool, then body: (inout Value) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer {
            pthread_cond_broadcast(condition)
            pthread_mutex_unlock(mutex)
        }
        while !predicate(value) { pthread_cond_wait(condition, mutex) }
        return try body(&value)
    }

    /// ``wait(until:then:)`` that gives up at `deadline`, a wall-clock time (`CLOCK_REALTIME`, as
    /// `pthread_cond_timedwait` takes it): nil then, `body` not run.
    package func wait<Result>(until predicate: (Value) -> Bool, deadline: timespec,
                              then body: (inout Value) throws -> Result) rethrows -> Result? {
        pthread_mutex_lock(mutex)
        defer {
            pthread_cond_broadcast(condition)
            pthread_mutex_unlock(mutex)
        }
        var limit = deadline
        while !predicate(value) {
            if pthread_cond_timedwait(condition, mutex, &limit) == ETIMEDOUT && !predicate(value) { return nil }
        }
        return try body(&value)
    }
}
