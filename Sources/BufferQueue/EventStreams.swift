import Synchronization

/// The `AsyncStream`s a queue's `events()` hands out: each gets every event yielded after it was
/// made, and all finish together.
final class EventStreams<Event: Sendable>: Sendable {
    private let streams = Lock<[Int: AsyncStream<Event>.Continuation]>([:])
    private let nextID = Atomic<Int>(0)
    private let finished = Atomic<Bool>(false)

    func make(bufferingPolicy: AsyncStream<Event>.Continuation.BufferingPolicy) -> AsyncStream<Event> {
        let (stream, continuation) = AsyncStream<Event>.makeStream(bufferingPolicy: bufferingPolicy)
        if finished.load(ordering: .acquiring) {
            continuation.finish()
            return stream
        }
        let id = nextID.add(1, ordering: .relaxed).newValue
        streams.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.streams.withLock { $0.removeValue(forKey: id) }
        }
        return stream
    }

    func yield(_ event: Event) {
        let continuations = streams.withLock { Array($0.values) }
        for continuation in continuations { continuation.yield(event) }
    }

    /// Finishes every stream; streams made later finish at once.
    func finishAll() {
        finished.store(true, ordering: .releasing)
        let continuations = streams.withLock { list -> [AsyncStream<Event>.Continuation] in
            defer { list.removeAll() }
            return Array(list.values)
        }
        for continuation in continuations { continuation.finish() }
    }
}
