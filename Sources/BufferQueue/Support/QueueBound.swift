import Dispatch

/// State that belongs to one serial dispatch queue: it may be handed to other threads (in a
/// `Sendable` owner, in a closure), but it is read and written only on that queue, and every access
/// checks so at run time — the shape of swift-nio's `NIOLoopBound`, for a dispatch queue.
///
/// An owner keeps its confined state in one value (a class or a struct) behind this, so the
/// owner itself is `Sendable` by construction and the compiler checks everything else it holds.
// @unchecked: `storage` is reached only through `value`, which traps unless called on `queue`.
package final class QueueBound<Value>: @unchecked Sendable {
    /// The queue the value belongs to.
    package let queue: DispatchQueue
    private var storage: Value

    /// Binds `value` to `queue`. Made on any thread (before it is shared); used only on `queue`.
    package init(_ value: Value, on queue: DispatchQueue) {
        self.queue = queue
        storage = value
    }

    /// The value; traps when called off ``queue``.
    package var value: Value {
        get {
            dispatchPrecondition(condition: .onQueue(queue))
            return storage
        }
        _modify {
            dispatchPrecondition(condition: .onQueue(queue))
            yield &storage
        }
    }
}

/// A weak reference set after it is captured (a queue's closures are made before the queue
/// exists): read and set under a lock, so never from a render thread. Where the object exists
/// first, a `weak let` says the same without a lock.
package final class WeakReference<Object: AnyObject & Sendable>: Sendable {
    private struct Slot { weak var object: Object? }
    private let slot = Lock(Slot())

    package init() {}

    /// The object, while it lives.
    package var object: Object? {
        get { slot.withLock { $0.object } }
        set { slot.withLock { $0.object = newValue } }
    }
}
