import Dispatch
import Synchronization

/// Wakes a dispatch queue from any thread without allocating: a user-data-add dispatch source.
final class WakeSignal: @unchecked Sendable {
    private let source: DispatchSourceUserDataAdd
    private let cancelled = Atomic<Bool>(false)

    init(queue: DispatchQueue) {
        source = DispatchSource.makeUserDataAddSource(queue: queue)
    }

    func setHandler(_ handler: @escaping @Sendable () -> Void) {
        source.setEventHandler(handler: handler)
        source.activate()
    }

    func signal() {
        if !cancelled.load(ordering: .relaxed) { source.add(data: 1) }
    }

    func cancel() {
        if !cancelled.exchange(true, ordering: .acquiringAndReleasing) { source.cancel() }
    }
}
