/// An input queue's lifecycle as a plain value, the shape of ``QueueLifecycle``: every call and
/// every report of its worker is a method that changes the phase and returns the actions the
/// queue performs, in order. Nothing here touches a source, a lock or a thread, so every
/// transition is testable as a value (`InputLifecycleTests`).
///
/// ```
///             start                  stop(immediately: false)
///   stopped ─────────▶ running ──────────────────────────────▶ stopping
///      ▲  ▲  start       │ ▲                                     │ every enqueued buffer
///      │  └─ paused ◀────┘ │ (pause / start)                     │ full, the source ended
///      │     │             │                                     ▼ or failed
///      └─────┴─────────────┴── stop(immediately: true) ◀──── stopped
///   any ── dispose ──▶ disposed
/// ```
struct InputLifecycle: Equatable {
    enum Phase: Equatable {
        case stopped, running, paused, stopping, disposed
    }

    /// Something the queue must do, in the order given.
    enum Action: Equatable {
        /// Open the source (again): a start after a stop, or after the source was closed.
        case openSource
        /// Start the source capturing.
        case startSource
        /// Stop the source capturing (no frame is written after it returns).
        case pauseSource
        /// Wake the worker (it finishes an asynchronous stop when the buffers are full).
        case wakeWorker
        /// Hand back what was captured into the enqueued buffers (what none takes is an
        /// overrun), then close the source.
        case drainAndClose
        /// Return every enqueued buffer empty and drop what was captured (a reset).
        case discardCaptured
        /// Release the buffers and end the event streams (disposal); `handBackFirst`: what was
        /// captured is handed back before.
        case release(handBackFirst: Bool)
        /// Tell the caller that capture started or stopped.
        case report(running: Bool)
    }

    private(set) var phase = Phase.stopped

    /// Capture is under way (an asynchronous stop finishing included).
    var isRunning: Bool { phase == .running || phase == .stopping }

    /// Whether an enqueue is taken now.
    func checkEnqueue() throws {
        switch phase {
        case .disposed: throw Self.disposed()
        case .stopping: throw AudioQueueError(.enqueueDuringReset, "the input queue is stopping after its enqueued buffers")
        default: break
        }
    }

    /// `start()`: from stopped or paused. The source is opened first when it is not open.
    mutating func start(sourceIsOpen: Bool) throws -> [Action] {
        switch phase {
        case .disposed: throw Self.disposed()
        case .running, .stopping: return []
        case .stopped, .paused:
            let open = phase == .stopped || !sourceIsOpen
            phase = .running
            return (open ? [.openSource] : []) + [.report(running: true), .startSource]
        }
    }

    /// Opening or starting the source failed: back to where the start began (`reported`: the
    /// start was already reported, so its end is too).
    mutating func startFailed(restoring previous: Phase, reported: Bool) -> [Action] {
        guard phase == .running else { return [] }
        phase = previous
        return reported ? [.report(running: false)] : []
    }

    /// `pause()`: capture stops, the timeline holds.
    mutating func pause() throws -> [Action] {
        if phase == .disposed { throw Self.disposed() }
        guard phase == .running else { return [] }
        phase = .paused
        return [.pauseSource, .report(running: false)]
    }

    /// `stop(immediately:)`. Asynchronously from running: record on until the buffers enqueued
    /// now are full (``bufferedStopReached()``). Otherwise at once.
    mutating func stop(immediately: Bool) throws -> [Action] {
        switch phase {
        case .disposed: throw Self.disposed()
        case .stopped: return []
        case .running where !immediately:
            phase = .stopping
            return [.wakeWorker]
        case .running, .paused, .stopping:
            let was = phase
            phase = .stopped
            return [.pauseSource, .drainAndClose] + (was == .paused ? [] : [.report(running: false)])
        }
    }

    /// The worker found the end of capture: an asynchronous stop's buffers are full, the source
    /// ended (and everything was handed back), or the source failed.
    mutating func captureEnded() -> [Action] {
        guard phase == .running || phase == .stopping || phase == .paused else { return [.pauseSource, .drainAndClose] }
        phase = .stopped
        return [.pauseSource, .drainAndClose, .report(running: false)]
    }

    /// `reset()`: what was captured is dropped and the buffers come back empty; a running queue
    /// keeps running (its source paused for the moment of the discard).
    func reset() throws -> [Action] {
        switch phase {
        case .disposed: throw Self.disposed()
        case .running: return [.pauseSource, .discardCaptured, .startSource]
        default: return [.discardCaptured]
        }
    }

    /// `dispose(immediately:)`: final. Only the first one acts.
    mutating func dispose(immediately: Bool) -> [Action] {
        guard phase != .disposed else { return [] }
        phase = .disposed
        return [.pauseSource, .release(handBackFirst: !immediately)]
    }

    static func disposed() -> AudioQueueError {
        AudioQueueError(.disposalPending, "the input queue has been disposed of")
    }
}
