import Dispatch
import Synchronization

/// Delivers a queue's output callbacks and events, in order, on one serial executor.
///
/// Both the closure callback and every ``AudioQueue/events(bufferingPolicy:)`` stream are fed from
/// the same serial dispatch queue, so there is one order and one mechanism. After ``shutDown()``
/// returns nothing more is delivered.
final class EventDelivery: Sendable {
    private let queue: DispatchQueue
    private let key = DispatchSpecificKey<UInt8>()
    private let closed = Atomic<Bool>(false)
    private let streams = EventStreams<AudioQueueEvent>()
    private let outputCallback: (@Sendable (AudioQueueBuffer) -> Void)?
    private let eventHandler: (@Sendable (AudioQueueEvent) -> Void)?
    /// Items waiting for delivery, in order, and the emptied array of the last delivery (its
    /// storage is used again, so that putting items in line does not allocate in steady state).
    private let line = Lock<(items: [Outgoing], spare: [Outgoing])>(([], []))
    /// Wakes the delivery queue without allocating: a user-data-add source (an offline render
    /// hands buffers back from its rendering thread).
    private let wake: WakeSignal

    init(label: String, target: DispatchQueue?, outputCallback: (@Sendable (AudioQueueBuffer) -> Void)?,
         eventHandler: (@Sendable (AudioQueueEvent) -> Void)? = nil) {
        self.eventHandler = eventHandler
        queue = DispatchQueue(label: label, target: target)
        queue.setSpecific(key: key, value: 1)
        // Code running on the caller's callback queue itself (not in a callback) is serialized
        // with the deliveries too: waiting for them from there would wait for itself.
        target?.setSpecific(key: key, value: 1)
        self.outputCallback = outputCallback
        line.withLock { line in
            line.items.reserveCapacity(64)
            line.spare.reserveCapacity(64)
        }
        wake = WakeSignal(queue: queue)
        wake.setHandler { [weak self] in self?.drain() }
    }

    deinit { wake.cancel() }

    /// Whether the current code runs on the delivery queue (inside a callback) or on the
    /// callback queue it targets.
    var isCurrent: Bool { DispatchQueue.getSpecific(key: key) != nil }

    /// Delivers items in order. Buffers are handed back to their owner (no longer in the queue)
    /// even when delivery has shut down; only the callback and the event are skipped then.
    func deliver(_ items: [Outgoing]) {
        guard post(items) else { return }
        wake.signal()
    }

    /// Puts items in line for delivery without running them: the order among deliveries is
    /// fixed here (call it where that order is decided, under the queue's locks), and
    /// ``drainOnCallingThread()`` or a later ``deliver(_:)-([Outgoing])`` runs them.
    /// Returns whether anything was put in line.
    @discardableResult
    func post(_ items: [Outgoing]) -> Bool {
        guard !items.isEmpty else { return false }
        if closed.load(ordering: .acquiring) {
            Self.releaseBuffers(in: items)
            return false
        }
        // A rendering thread posts here (offline, the caller's; the delivery queue takes the
        // line for a swap of arrays only): it spins rather than sleeps while the swap runs.
        line.withLockSpinningFirst { line in
            // By index: appending another array is generic code that allocates in unoptimized builds.
            for index in 0..<items.count { line.items.append(items[index]) }
        }
        return true
    }

    /// Runs what is in line on the calling thread, serialized with the delivery queue: it waits
    /// for a delivery running on the queue's thread, then runs the rest itself. The caller holds
    /// none of the queue's locks. From inside a callback (where waiting would wait for itself)
    /// what is in line runs after the callback, on the queue.
    func drainOnCallingThread() {
        if isCurrent {
            queue.async { [self] in drain() }
        } else {
            queue.sync { drain() }
        }
    }

    /// Runs everything in line, in order (on the delivery queue).
    private func drain() {
        while true {
            // Nothing in line leaves both arrays where they are: swapping an empty line out would
            // drop one of the two reserved arrays, and a later `post` from a rendering thread
            // would then allocate.
            let taken = line.withLock { line -> [Outgoing]? in
                guard !line.items.isEmpty else { return nil }
                let items = line.items
                line.items = line.spare
                line.spare = []
                return items
            }
            guard var items = taken else { return }
            for index in items.indices {
                guard !closed.load(ordering: .acquiring) else {
                    Self.releaseBuffers(in: items[index...])
                    break
                }
                switch items[index] {
                case .buffer(let buffer):
                    buffer.release()
                    outputCallback?(buffer)
                    yield(.bufferReturned(buffer))
                case .event(let event):
                    eventHandler?(event)
                    yield(event)
                }
            }
            items.removeAll(keepingCapacity: true)
            line.withLock { line in
                if line.spare.capacity < items.capacity { swap(&line.spare, &items) }
            }
        }
    }

    private static func releaseBuffers<C: Collection>(in items: C) where C.Element == Outgoing {
        for case .buffer(let buffer) in items { buffer.release() }
    }

    func deliver(_ event: AudioQueueEvent) { deliver([.event(event)]) }

    private func yield(_ event: AudioQueueEvent) { streams.yield(event) }

    func makeStream(bufferingPolicy: AsyncStream<AudioQueueEvent>.Continuation.BufferingPolicy) -> AsyncStream<AudioQueueEvent> {
        streams.make(bufferingPolicy: bufferingPolicy)
    }

    /// Stops all delivery. Waits for a callback in progress unless called from inside one.
    func shutDown() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        // What is still in line only has its buffers handed back.
        if !isCurrent { queue.sync { drain() } }
        streams.finishAll()
    }

    /// The capacities of the line and of its spare array (for tests: neither may drop to zero,
    /// or putting items in line allocates).
    var reservedCapacities: (line: Int, spare: Int) {
        line.withLock { ($0.items.capacity, $0.spare.capacity) }
    }

    /// Waits until everything delivered so far has been handled (for tests and orderly shutdown).
    func waitUntilDelivered() {
        if !isCurrent { queue.sync {} }
    }
}
