import Synchronization

/// State that one thread at a time works on, claimed without blocking: the render side of a graph
/// node or an equaliser (a position, a filter's history), which a real-time thread must reach
/// without a lock. A claim is one compare-and-swap; a thread that tries while another holds it is
/// refused (nil), never blocked. So the state is never touched by two threads at once, and each
/// claim sees what the claim before it wrote (acquire and release).
///
/// The shape of ``QueueBound``, checked by an atomic flag instead of a dispatch queue: an owner
/// keeps its render state behind this and is `Sendable` by construction.
// @unchecked: `value` is reached only inside withClaim, which holds the claim (an atomic flag) throughout.
package final class ClaimedState<Value>: @unchecked Sendable {
    private let claimed = Atomic<Bool>(false)
    private var value: Value

    /// Holds `value`; made on any thread before it is shared.
    package init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with the value while holding the claim; nil, `body` not run, when another
    /// thread holds it. Real-time safe.
    @inline(__always)
    package func withClaim<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result? {
        guard claimed.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else { return nil }
        defer { claimed.store(false, ordering: .releasing) }
        return try body(&value)
    }
}
