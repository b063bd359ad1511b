import Synchronization

/// What the render path tells the queue's worker: an underrun, the end of a stream rendered (an
/// asynchronous stop's end marker), frames a resampler failed to give.
enum RenderEvent: Equatable, Sendable {
    case underrun
    case endOfStream
    case shortfall(frames: Int)
}

/// The render path's events, in the order they happened: a bounded ring that any thread may push
/// to without blocking or allocating (the render thread; a sink reporting a device underrun from
/// its own thread) and one consumer at a time drains (Dmitry Vyukov's bounded queue: each slot's
/// sequence number says whether it is free or filled). The shape of SFBAudioEngine's render-event
/// ring. A push that finds the ring full is not lost: it is counted by kind and handed out after
/// the ring's events.
// @unchecked: one producer (the render thread) and one consumer, each slot published by its atomic sequence number.
final class RenderEventRing: @unchecked Sendable {
    static let capacity = 256
    private static let mask = capacity - 1
    private let sequences: UnsafeMutablePointer<Atomic<Int>>
    private let payloads: UnsafeMutablePointer<Atomic<Int>>
    private let enqueuePosition = Atomic<Int>(0)
    /// The consumer's position (one consumer at a time: the caller serialises ``drain(into:)``).
    private let dequeuePosition = Atomic<Int>(0)
    private let overflowUnderruns = Atomic<Int>(0)
    private let overflowEnds = Atomic<Int>(0)
    private let overflowShortfall = Atomic<Int>(0)

    init() {
        sequences = .allocate(capacity: Self.capacity)
        payloads = .allocate(capacity: Self.capacity)
        for i in 0..<Self.capacity {
            (sequences + i).initialize(to: Atomic<Int>(i))
            (payloads + i).initialize(to: Atomic<Int>(0))
        }
    }

    deinit {
        sequences.deinitialize(count: Self.capacity)
        sequences.deallocate()
        payloads.deinitialize(count: Self.capacity)
        payloads.deallocate()
    }

    /// Appends an event. Never blocks or allocates; a full ring counts it instead.
    func push(_ event: RenderEvent) {
        var position = enqueuePosition.load(ordering: .relaxed)
        while true {
            let slot = position & Self.mask
            let difference = sequences[slot].load(ordering: .acquiring) - position
            if difference == 0 {
                let (exchanged, current) = enqueuePosition.compareExchange(expected: position, desired: position + 1, ordering: .relaxed)
                if exchanged {
                    payloads[slot].store(Self.encode(event), ordering: .relaxed)
                    sequences[slot].store(position + 1, ordering: .releasing)
                    return
                }
                position = current
            } else if difference < 0 {
                // Full: the consumer has not caught up. Counted, handed out after the ring's events.
                switch event {
                case .underrun: overflowUnderruns.add(1, ordering: .releasing)
                case .endOfStream: overflowEnds.add(1, ordering: .releasing)
                case .shortfall(let frames): overflowShortfall.add(frames, ordering: .releasing)
                }
                return
            } else {
                position = enqueuePosition.load(ordering: .relaxed)
            }
        }
    }

    /// Takes every event pushed so far, in order (those a full ring counted come last). One
    /// consumer at a time.
    func drain(into events: inout [RenderEvent]) {
        var position = dequeuePosition.load(ordering: .relaxed)
        while true {
            let slot = position & Self.mask
            guard sequences[slot].load(ordering: .acquiring) == position + 1 else { break }
            events.append(Self.decode(payloads[slot].load(ordering: .relaxed)))
            sequences[slot].store(position + Self.capacity, ordering: .releasing)
            position += 1
        }
        dequeuePosition.store(position, ordering: .relaxed)
        for _ in 0..<overflowUnderruns.exchange(0, ordering: .acquiringAndReleasing) { events.append(.underrun) }
        for _ in 0..<overflowEnds.exchange(0, ordering: .acquiringAndReleasing) { events.append(.endOfStream) }
        let missing = overflowShortfall.exchange(0, ordering: .acquiringAndReleasing)
        if missing > 0 { events.append(.shortfall(frames: missing)) }
    }

    /// Whether an event waits (a consumer may look before taking the lock that serialises drains).
    var hasEvents: Bool {
        let position = dequeuePosition.load(ordering: .relaxed)
        return sequences[position & Self.mask].load(ordering: .acquiring) == position + 1
            || overflowUnderruns.load(ordering: .relaxed) > 0 || overflowEnds.load(ordering: .relaxed) > 0
            || overflowShortfall.load(ordering: .relaxed) > 0
    }

    private static func encode(_ event: RenderEvent) -> Int {
        switch event {
        case .underrun: return -1
        case .endOfStream: return -2
        case .shortfall(let frames): return max(frames, 0)
        }
    }

    private static func decode(_ value: Int) -> RenderEvent {
        switch value {
        case -1: return .underrun
        case -2: return .endOfStream
        default: return .shortfall(frames: value)
        }
    }
}

/// Render events a consumer took from the ring and the queue has not acted on yet, by kind.
struct TakenRenderEvents {
    var underruns = 0
    var endsOfStream = 0
    var shortfall = 0
    /// Reused by every drain (no allocation once it has grown).
    var scratch: [RenderEvent] = []
}
