/// The queue's lifecycle as a plain value: its state, the pending end of a run (an asynchronous
/// stop or disposal), the tokens that tell a current deferred start or drain from a stale one, and
/// what the queue has done to its sink.
///
/// Every public lifecycle call and every signal from the render path or the sink is an event: a
/// method here that changes the state and returns the actions the queue must perform, in order.
/// Nothing here touches a sink, a lock or a thread, so every transition is testable as a value.
/// ``AudioQueue`` decides under its state lock and performs the actions after releasing it (still
/// serialised with other lifecycle calls, so actions never interleave).
///
/// ```
///                start                    end of stream rendered (stop pending)
///   idle ───────────────────▶ playing ─────────────────────────────────▶ draining
///    │  ▲ start(at: later)      │  ▲                                       │ drain done
///    │  │     ┌─▶ waiting ──────┘  │ start                                  ▼
///    │  │     │   (time comes)     │                                      idle (stopped)
///    │  └─────┴── stop(immediately: true), reset during a stop ◀── any ──┘
///    │          pause            pause
///    └──────────────▶ paused ◀──────┘
///   any ── dispose(immediately: true), or a pending disposal completing ──▶ disposed
/// ```
/// `stop(immediately: false)` and `dispose(immediately: false)` do not change the state: they
/// mark it with an ``Ending`` that completes when the end of what was enqueued has been rendered
/// (and, with a sink, heard).
struct QueueLifecycle: Equatable {
    /// An end of the run that was asked for and waits for everything enqueued to play.
    enum Ending: Equatable, Sendable {
        /// `stop(immediately: false)`.
        case stop
        /// `dispose(immediately: false)`.
        case dispose
    }

    enum State: Equatable {
        /// Not started, or stopped. `lastRunEnd`: where the previous run ended, reported by
        /// `currentTime` until something new begins.
        case idle(ending: Ending?, lastRunEnd: Int64?)
        /// `start(at:)` with a time still to come; `token` identifies the scheduled start.
        case waiting(token: Int, ending: Ending?)
        /// Pulling audio (through the sink, or offline).
        case playing(ending: Ending?)
        /// Paused by the caller (or by a sink failure). `endRendered`: the end of an asynchronous
        /// stop was already rendered, so resuming goes straight to draining.
        case paused(ending: Ending?, endRendered: Bool)
        /// The end of an asynchronous stop was rendered; the sink plays out what it holds.
        case draining(token: Int, ending: Ending)
        /// Released; every call but reads fails.
        case disposed

        /// The same state marked with another ending.
        func with(ending: Ending) -> State {
            switch self {
            case .idle: return .idle(ending: ending, lastRunEnd: nil)
            case .waiting(let token, _): return .waiting(token: token, ending: ending)
            case .playing: return .playing(ending: ending)
            case .paused(_, let endRendered): return .paused(ending: ending, endRendered: endRendered)
            case .draining(let token, _): return .draining(token: token, ending: ending)
            case .disposed: return .disposed
            }
        }
    }

    /// What the queue has done to its sink.
    enum SinkState: Equatable { case closed, open, active }

    /// Something the queue must do, in the order given.
    enum Action: Equatable {
        /// Open the sink (when closed) with the format of the next frames, then start it. On
        /// failure the queue calls ``activationFailed(opened:)`` and throws `cannotStart`.
        case activateSink
        /// Stop the sink pulling (no render call runs after it returns).
        case pauseSink
        /// Discard what the sink holds and release it.
        case closeSink
        /// Discard what the sink accepted but has not played.
        case flushSink
        /// Ask the sink to play out what it holds and report back with `token`.
        case drainSink(token: Int)
        /// Reopen the sink with the new decoded format (it changed mid-stream).
        case reopenSink
        /// Schedule ``deferredStartFired(token:)`` at the requested time.
        case scheduleStart(token: Int)
        /// Append the end-of-stream entry and refuse enqueues with `refusal` until the run ends.
        case appendEnd(refusal: AudioQueueError.Code)
        /// Discard every queued buffer and all decoder and render state; buffers come back
        /// through the callback (`returnBuffers`) or are released silently (disposal).
        case discard(returnBuffers: Bool)
        /// Restart the timeline at zero and accept enqueues again (a run ended).
        case restartTimeline
        /// Deliver ``AudioQueueEvent/runningChanged(_:)``.
        case reportRunning(Bool)
        /// Release the queue: stop deliveries, refuse every call.
        case release
    }

    private(set) var state: State = .idle(ending: nil, lastRunEnd: nil)
    private(set) var sink: SinkState = .closed
    /// Frames render offline (an offline render format is set) instead of through the sink.
    private(set) var offline = false
    /// What ``AudioQueue/isRunning`` reports.
    private(set) var isRunning = false
    private var nextToken = 0
    /// The state to go back to when activating the sink fails.
    private var revertOnFailure: State?
    /// The heard position given with the event being handled.
    private var lastHeard: Int64 = 0

    var isDisposed: Bool { state == .disposed }

    /// The asynchronous end the current run waits for, if any.
    var ending: Ending? {
        switch state {
        case .idle(let ending, _), .waiting(_, let ending), .playing(let ending), .paused(let ending, _): return ending
        case .draining(_, let ending): return ending
        case .disposed: return nil
        }
    }

    /// Whether an asynchronous stop or disposal is still playing out what was enqueued.
    var isStopping: Bool { ending != nil }

    /// Whether the worker decodes ahead: once started (or waiting to start), as Apple's queue,
    /// which decodes nothing before `AudioQueuePrime` or `AudioQueueStart`; never offline (the
    /// rendering thread decodes what it needs).
    var decodesAhead: Bool {
        guard !offline else { return false }
        switch state {
        case .waiting, .playing, .paused, .draining: return true
        case .idle, .disposed: return false
        }
    }

    /// Where the last run ended, while nothing new has begun.
    var lastRunEnd: Int64? {
        if case .idle(_, let end) = state { return end }
        return nil
    }

    private mutating func token() -> Int {
        nextToken += 1
        return nextToken
    }

    private static func disposed() -> AudioQueueError {
        AudioQueueError(.disposalPending, "the queue has been disposed of")
    }

    // MARK: events from the caller

    /// `start(at:)`; `deferred` when the requested time lies in the future.
    mutating func start(deferred: Bool) throws -> [Action] {
        switch state {
        case .disposed:
            throw Self.disposed()
        case .playing, .draining:
            return []
        case .idle(let ending, _):
            if deferred && !offline {
                let t = token()
                state = .waiting(token: t, ending: ending)
                return [.scheduleStart(token: t)]
            }
            return beginPlaying(ending: ending, endRendered: false, from: state)
        case .waiting(_, let ending):
            if deferred {
                let t = token()
                state = .waiting(token: t, ending: ending)
                return [.scheduleStart(token: t)]
            }
            return beginPlaying(ending: ending, endRendered: false, from: state)
        case .paused(let ending, let endRendered):
            return beginPlaying(ending: ending, endRendered: endRendered, from: state)
        }
    }

    /// A scheduled start's time has come.
    mutating func deferredStartFired(token: Int) -> [Action] {
        guard case .waiting(let t, let ending) = state, t == token else { return [] }
        return beginPlaying(ending: ending, endRendered: false, from: state)
    }

    private mutating func beginPlaying(ending: Ending?, endRendered: Bool, from previous: State) -> [Action] {
        if offline {
            state = .playing(ending: ending)
            return setRunning(true)
        }
        revertOnFailure = previous
        sink = .active
        if endRendered, let ending {
            let t = token()
            state = .draining(token: t, ending: ending)
            return [.activateSink, .drainSink(token: t)]
        }
        state = .playing(ending: ending)
        return [.activateSink]
    }

    /// Activating the sink failed; `opened`: it was opened (and must be closed again).
    mutating func activationFailed(opened: Bool) -> [Action] {
        sink = .closed
        switch revertOnFailure {
        case .waiting(_, let ending)?: state = .idle(ending: ending, lastRunEnd: nil)
        case let previous?: state = previous
        case nil: state = .paused(ending: ending, endRendered: false)
        }
        revertOnFailure = nil
        return (opened ? [.closeSink] : []) + setRunning(false)
    }

    mutating func pause() throws -> [Action] {
        switch state {
        case .disposed:
            throw Self.disposed()
        case .idle, .paused:
            return []
        case .waiting(_, let ending):
            state = .paused(ending: ending, endRendered: false)
            return []
        case .playing(let ending):
            state = .paused(ending: ending, endRendered: false)
            return deactivate() + setRunning(false)
        case .draining(_, let ending):
            state = .paused(ending: ending, endRendered: true)
            return deactivate() + setRunning(false)
        }
    }

    /// `stop(immediately:)`. `heard`: the position heard now, kept as the run's end.
    mutating func stop(immediately: Bool, heard: Int64) throws -> [Action] {
        if state == .disposed { throw Self.disposed() }
        if immediately {
            if ending == .dispose { return dispose(immediately: true) }
            return stopNow(heard: heard)
        }
        return requestEnding(.stop)
    }

    private mutating func stopNow(heard: Int64) -> [Action] {
        var actions = closeIfOpen()
        actions += [.discard(returnBuffers: true), .restartTimeline]
        state = .idle(ending: nil, lastRunEnd: heard)
        return actions + setRunning(false)
    }

    private mutating func requestEnding(_ wanted: Ending) -> [Action] {
        guard state != .disposed else { return [] }
        let current = ending
        // Asked already, or a disposal pending (which a stop does not weaken).
        if current == wanted || current == .dispose { return [] }
        state = state.with(ending: wanted)
        let refusal: AudioQueueError.Code = wanted == .dispose ? .disposalPending : .enqueueDuringReset
        // With an ending already marked, the end-of-stream entry is in place.
        return current == nil ? [.appendEnd(refusal: refusal)] : []
    }

    /// `reset()`: discards without stopping; during an asynchronous stop it stops at once.
    mutating func reset(heard: Int64) throws -> [Action] {
        switch state {
        case .disposed:
            throw Self.disposed()
        case _ where ending == .dispose:
            return dispose(immediately: true)
        case _ where ending == .stop:
            return stopNow(heard: heard)
        case .playing where sink == .active:
            // The sink stops pulling while the render state is discarded, so that exactly one
            // reader acts on it and the timeline loses no frame; then it plays on.
            revertOnFailure = .paused(ending: nil, endRendered: false)
            return [.pauseSink, .discard(returnBuffers: true), .flushSink, .activateSink]
        case .idle(_, let end) where end != nil:
            state = .idle(ending: nil, lastRunEnd: nil)
            return [.discard(returnBuffers: true)]
        default:
            return [.discard(returnBuffers: true)]
        }
    }

    /// `dispose(immediately:)`. `nothingQueued`: no buffer waits to be played.
    mutating func dispose(immediately: Bool, nothingQueued: Bool = false) -> [Action] {
        if state == .disposed { return [] }
        let playing: Bool
        switch state {
        case .playing, .draining: playing = true
        default: playing = false
        }
        if immediately || (!playing && nothingQueued) {
            var actions = closeIfOpen()
            state = .disposed
            isRunning = false
            actions += [.discard(returnBuffers: false), .release]
            return actions
        }
        return requestEnding(.dispose)
    }

    // MARK: events from the render path and the sink

    /// The render path reached the end-of-stream entry of an asynchronous stop.
    mutating func endRendered(heard: Int64) -> [Action] {
        guard let ending else { return [] }
        switch state {
        case .playing where sink == .active:
            let t = token()
            state = .draining(token: t, ending: ending)
            return [.drainSink(token: t)]
        case .paused(_, false) where !offline:
            state = .paused(ending: ending, endRendered: true)
            return []
        case .draining:
            return []
        default:
            // Offline, or no sink pulling: nothing is left to hear.
            return completeEnding(ending, heard: heard)
        }
    }

    /// The sink has played out what it held; stale tokens (an earlier stop's drain) are ignored.
    mutating func drainCompleted(token: Int, heard: Int64) -> [Action] {
        guard case .draining(let t, let ending) = state, t == token else { return [] }
        return completeEnding(ending, heard: heard)
    }

    private mutating func completeEnding(_ ending: Ending, heard: Int64) -> [Action] {
        if ending == .dispose { return dispose(immediately: true) }
        let actions = closeIfOpen() + [.restartTimeline]
        state = .idle(ending: nil, lastRunEnd: heard)
        return actions + setRunning(false)
    }

    /// The sink reported that playback really began (or rendered its first frames).
    mutating func playbackObserved() -> [Action] {
        switch state {
        case .playing, .draining: return sink == .active ? setRunning(true) : []
        default: return []
        }
    }

    /// The sink failed while open (server gone, device lost): playback pauses and the sink is
    /// released, to be opened afresh by the next start.
    mutating func sinkFailed() -> [Action] {
        guard sink != .closed else { return [] }
        switch state {
        case .playing(let ending): state = .paused(ending: ending, endRendered: false)
        case .draining(_, let ending): state = .paused(ending: ending, endRendered: true)
        default: break
        }
        let actions = closeIfOpen()
        return actions + setRunning(false)
    }

    /// The decoded format changed while the sink pulls: it must be reopened.
    mutating func formatChangeReached() -> [Action] {
        guard sink == .active, !offline else { return [] }
        return [.reopenSink]
    }

    /// Reopening the sink after a format change failed.
    mutating func reopenFailed() -> [Action] {
        sink = .open
        return sinkFailed()
    }

    /// An offline render format was set (`true`) or removed. `heard`: the position heard now
    /// (where a run cut short by the switch ends).
    mutating func setOffline(_ on: Bool, heard: Int64 = 0) throws -> [Action] {
        lastHeard = heard
        if state == .disposed { throw Self.disposed() }
        guard on != offline else { return [] }
        offline = on
        if on {
            // A sink closed mid-drain may never report the drain: closing discarded what it
            // held, so nothing is left to hear and the ending completes now.
            if case .draining(_, let ending) = state { return completeEnding(ending, heard: lastHeard) }
            return closeIfOpen()
        }
        switch state {
        case .playing, .draining:
            revertOnFailure = .paused(ending: ending, endRendered: false)
            sink = .active
            return [.activateSink]
        default:
            return []
        }
    }

    /// Something new begins on an idle queue (offline rendering): the last run's end is no
    /// longer what the timeline reports.
    mutating func newRunBegan() {
        if case .idle(let ending, let end) = state, end != nil { state = .idle(ending: ending, lastRunEnd: nil) }
    }

    // MARK: helpers

    private mutating func deactivate() -> [Action] {
        guard sink == .active else { return [] }
        sink = .open
        return [.pauseSink]
    }

    private mutating func closeIfOpen() -> [Action] {
        var actions: [Action] = []
        if sink == .active { actions.append(.pauseSink) }
        if sink != .closed { actions.append(.closeSink) }
        sink = .closed
        return actions
    }

    private mutating func setRunning(_ running: Bool) -> [Action] {
        guard isRunning != running else { return [] }
        isRunning = running
        return [.reportRunning(running)]
    }
}
