import Dispatch
import Synchronization

/// Wakes a dispatch queue from any thread without allocating: a user-data-add dispatch source.
// @unchecked: a dispatch source, which libdispatch makes safe to signal from any thread.
package final class WakeSignal: @unchecked Sendable {
    private let source: DispatchSourceUserDataAdd
    private let cancelled = Atomic<Bool>(false)
    /// Set while the queue renders offline: the wake-ups that only serve decoding ahead or a sink
    /// (an enqueue, ring space freed) are skipped, since the rendering thread decodes and handles
    /// the render's signals itself.
    private let muted = Atomic<Bool>(false)

    package init(queue: DispatchQueue) {
        source = DispatchSource.makeUserDataAddSource(queue: queue)
    }

    package func setHandler(_ handler: @escaping @Sendable () -> Void) {
        source.setEventHandler(handler: handler)
        source.activate()
    }

    package func signal() {
        if !cancelled.load(ordering: .relaxed) { source.add(data: 1) }
    }

    /// Wakes the queue unless muted (see ``setMuted(_:)``).
    func signalUnlessMuted() {
        if !muted.load(ordering: .acquiring) { signal() }
    }

    func setMuted(_ on: Bool) {
        muted.store(on, ordering: .releasing)
    }

    package func cancel() {
        if !cancelled.exchange(true, ordering: .acquiringAndReleasing) { source.cancel() }
    }
}
