import Synchronization

/// The `AsyncStream`s a queue's `events()` hands out: each gets every event yielded after it was
/// made, and all finish together.
final class EventStreams<Event: Sendable>: Sendable {
    private let streams = Lock<[Int: AsyncStream<Event>.Continuation]>([:])
    private let nextID = Atomic<Int>(0)
    private let finished = Atomic<Bool>(false)
    /// How many streams are open: an event with no stream to go to costs no lock.
    private let open = Atomic<Int>(0)

    func make(bufferingPolicy: AsyncStream<Event>.Continuation.BufferingPolicy) -> AsyncStream<Event> {
        let (stream, continuation) = AsyncStream<Event>.makeStream(bufferingPolicy: bufferingPolicy)
        if finished.load(ordering: .acquiring) {
            continuation.finish()
            return stream
        }
        let id = nextID.add(1, ordering: .relaxed).newValue
        streams.withLock {
            $0[id] = continuation
            open.add(1, ordering: .releasing)
        }
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            streams.withLock { if $0.removeValue(forKey: id) != nil { open.subtract(1, ordering: .releasing) } }
        }
        return stream
    }

    func yield(_ event: Event) {
        guard open.load(ordering: .acquiring) > 0 else { return }
        let continuations = streams.withLock { Array($0.values) }
        for continuation in continuations { continuation.yield(event) }
    }

    /// Finishes every stream; streams made later finish at once.
    func finishAll() {
        finished.store(true, ordering: .releasing)
        let continuations = streams.withLock { list -> [AsyncStream<Event>.Continuation] in
            defer {
                list.removeAll()
                open.store(0, ordering: .releasing)
            }
            return Array(list.values)
        }
        for continuation in continuations { continuation.finish() }
    }
}
