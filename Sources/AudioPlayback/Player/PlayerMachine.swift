/// The player's lifecycle as a plain value: its state, what it has asked of its queue, what the
/// caller asked for, and every item's state.
///
/// Every call of the player's API and every report from its queue, its sources and its clock is
/// an event: a method here that changes the state and returns the actions the player performs, in
/// order (the shape of swift-nio's protocol state machines and of the queue's ``QueueLifecycle``).
/// Nothing here touches a queue, a lock or a thread, so every transition is testable as a value.
///
/// ```
///   ready ── begin ──▶ buffering ── enough buffered ──▶ playing ◀──▶ paused (pause / resume)
///                        ▲   │                           │  ▲
///                        │   └─── seek ──▶ seeking ──────┘  │ refilled
///                        └────────── underrun ◀─────────────┘
///   any ── everything heard ──▶ finished      any ── failure (played out first) ──▶ failed
///   finished / failed ── replay ──▶ ready
/// ```
struct PlayerMachine: Equatable {
    enum Phase: Equatable {
        /// Not begun (or reset for a replay).
        case ready
        /// Feeding and playing.
        case running
        /// Ended: every waiter has its result.
        case ended
    }

    /// Something the player must do, in the order given.
    enum Action: Equatable {
        /// Report a new player state.
        case publish(AudioPlayerState)
        /// Report a new state of the item with this id.
        case publishItem(id: AudioPlayerItem.ID, AudioPlayerItemState)
        /// Open the current item and feed it.
        case openItem
        /// Prime the queue and start it (`play: false` when paused: primed only).
        case startQueue(play: Bool)
        /// Start the queue again (after a pause or an underrun).
        case resumeQueue
        /// Pause the queue.
        case pauseQueue
        /// Every item is fed: start the queue if it has not started, and stop it once everything
        /// enqueued is decoded (until then an appended item is still fed without a gap).
        case finishQueue
        /// Everything enqueued is decoded: play it out, then stop.
        case stopQueue
        /// Items were added after the queue was told to stop: once it has played out, feed them
        /// in a new run.
        case restartRun
        /// Release the queue at once.
        case disposeQueue
        /// Give every waiter the result and end the event streams.
        case complete
    }

    /// Where the feeding is.
    enum Input: Equatable {
        /// Items are being fed.
        case feeding
        /// Every item is fed: the queue plays out what it has.
        case done
        /// Everything fed was decoded and the queue was told to stop after what it holds;
        /// `restartAfterDrain`: items came since, and a new run feeds them once it has played out.
        case stopIssued(restartAfterDrain: Bool)
    }

    /// Where the queue's run is.
    enum Run: Equatable {
        /// Not started: before the first start, after a seek or a restart.
        case notStarted
        /// Primed and started (or primed while paused); `underrun`: it ran dry and waits to be refilled.
        case started(underrun: Bool)
    }

    private(set) var phase = Phase.ready
    private(set) var state = AudioPlayerState.buffering
    private(set) var userPaused = false
    private(set) var input = Input.feeding
    private(set) var run = Run.notStarted
    /// `stop()` was called (it may come before `play()` began).
    private(set) var stopRequested = false
    /// The sink produces the queue's sound now (between its reports that it runs and that it stopped).
    private(set) var soundRunning = false
    /// Reports that the queue stopped running still to come from the pause or stop of a seek
    /// (they are not the end of playback).
    private(set) var staleStops = 0

    var inputDone: Bool { input != .feeding }
    var stopIssued: Bool { if case .stopIssued = input { true } else { false } }
    var restartAfterDrain: Bool { input == .stopIssued(restartAfterDrain: true) }
    var queueStarted: Bool { run != .notStarted }
    var underrun: Bool { run == .started(underrun: true) }
    /// The item heard now (nil before the first is heard).
    private(set) var heard: AudioPlayerItem.ID?
    /// The first error that ended playback.
    private(set) var failure: AudioPlayerError?
    /// The first item that failed and was skipped (``AudioPlayerItemFailurePolicy/skip``).
    private(set) var skipped: AudioPlayerError?
    /// An item was heard in this run.
    private(set) var anyHeard = false
    /// What the run ends with: its failure; else, when nothing was heard, the first skipped
    /// item's error (nothing could play). Skips beside items that played are in the report.
    var outcomeFailure: AudioPlayerError? { failure ?? (anyHeard ? nil : skipped) }
    private(set) var itemStates: [AudioPlayerItem.ID: AudioPlayerItemState] = [:]

    init(items: [AudioPlayerItem.ID] = []) {
        for id in items { itemStates[id] = .queued }
    }

    // MARK: the caller

    /// `play()`: begins once; with nothing to play (or stopped before) it ends at once.
    mutating func begin(hasItems: Bool) -> [Action] {
        guard phase == .ready else { return [] }
        phase = .running
        if stopRequested || !hasItems { return end() }
        return [.openItem]
    }

    /// `stop()` was called, from any thread: ``begin(hasItems:)`` ends at once after it. The stop
    /// itself is ``stop()``, on the player's queue.
    mutating func requestStop() {
        stopRequested = true
    }

    /// `stop()`: ends now; what is enqueued is dropped.
    mutating func stop() -> [Action] {
        guard phase != .ended else { return [] }
        stopRequested = true
        if input == .feeding { input = .done }
        return [.disposeQueue] + end()
    }

    mutating func pause() -> [Action] {
        guard phase != .ended else { return [] }
        userPaused = true
        return [.pauseQueue] + move(to: .paused)
    }

    mutating func resume() -> [Action] {
        guard phase != .ended, userPaused else { return [] }
        userPaused = false
        return (queueStarted ? [.resumeQueue] : []) + move(to: .playing)
    }

    /// A seek (or a skip) restarts feeding: the queue was reset and must be primed again.
    /// `queueWillReportStop`: the queue was running, so its pause or stop for the seek will be
    /// reported; that report is not the end of playback.
    mutating func seekBegan(queueWillReportStop: Bool = false) -> [Action] {
        guard phase == .running else { return [] }
        run = .notStarted
        input = .feeding
        soundRunning = false
        if queueWillReportStop { staleStops += 1 }
        return move(to: .seeking)
    }

    /// `replay()` after the end: everything as new, every item queued again.
    mutating func reset(items: [AudioPlayerItem.ID]) {
        self = PlayerMachine(items: items)
    }

    // MARK: the items

    mutating func itemAdded(_ id: AudioPlayerItem.ID) -> [Action] {
        itemStates[id] = .queued
        return [.publishItem(id: id, .queued)]
    }

    mutating func itemRemoved(_ id: AudioPlayerItem.ID) -> [Action] {
        guard itemStates[id] != nil else { return [] }
        itemStates[id] = nil
        if heard == id { heard = nil }
        return [.publishItem(id: id, .removed)]
    }

    /// An item was opened and is being fed.
    mutating func itemOpened(_ id: AudioPlayerItem.ID) -> [Action] {
        setItem(id, heard == id ? .playing : .loading)
    }

    /// A source reported its connection state. It is the player's state only while that item is
    /// the one heard (or nothing is heard yet): a prefetched item's buffering is its own.
    mutating func sourceReported(_ reported: AudioPlayerState, item id: AudioPlayerItem.ID) -> [Action] {
        var actions: [Action] = []
        let itemState: AudioPlayerItemState
        switch reported {
        case .connecting: itemState = .connecting
        case .reconnecting: itemState = .reconnecting
        default: itemState = .loading
        }
        if itemStates[id] != .playing { actions += setItem(id, itemState) }
        if heard == nil || heard == id { actions += move(to: reported) }
        return actions
    }

    /// The first frame of the item is heard: it plays, the one before it is done.
    mutating func itemHeard(_ id: AudioPlayerItem.ID) -> [Action] {
        guard heard != id else { return [] }
        var actions: [Action] = []
        if let previous = heard, itemStates[previous] == .playing { actions += setItem(previous, .finished) }
        heard = id
        anyHeard = true
        actions += setItem(id, .playing)
        return actions
    }

    /// The item's source failed: it is marked, and playback ends after what was enqueued.
    mutating func itemFailed(_ id: AudioPlayerItem.ID?, _ error: AudioPlayerError) -> [Action] {
        var actions: [Action] = []
        if let id { actions += setItem(id, .failed(error)) }
        return actions + failed(error, playOut: true)
    }

    /// An item failed and the list plays on (``AudioPlayerItemFailurePolicy/skip``): the item is
    /// failed, the player is not.
    mutating func itemSkipped(_ id: AudioPlayerItem.ID, _ error: AudioPlayerError) -> [Action] {
        if skipped == nil { skipped = error }
        return setItem(id, .failed(error))
    }

    /// Every item is fed.
    mutating func inputFinished(hasQueue: Bool) -> [Action] {
        guard phase == .running, input == .feeding else { return [] }
        input = .done
        return hasQueue ? [.finishQueue] : end()
    }

    /// After the input finished, everything enqueued was decoded: the queue may stop after it.
    mutating func allDecoded() -> [Action] {
        guard phase == .running, input == .done else { return [] }
        input = .stopIssued(restartAfterDrain: false)
        return [.stopQueue]
    }

    /// Items were added to the list. Before the stop was issued they are fed on at once
    /// (gaplessly); after it, once the queue has played out.
    mutating func moreInput() -> [Action] {
        guard phase == .running, inputDone, failure == nil else { return [] }
        if stopIssued {
            input = .stopIssued(restartAfterDrain: true)
            return []
        }
        input = .feeding
        return [.openItem]
    }

    // MARK: the queue

    /// What is enqueued ahead now: starts playback when enough is (or nothing more comes for now,
    /// `waiting`), or resumes after an underrun once the restart amount is there.
    mutating func buffered(enough: Bool, ahead: Double, waiting: Bool, buffering: AudioPlayer.Buffering) -> [Action] {
        guard phase == .running else { return [] }
        if !queueStarted {
            guard enough || (waiting && ahead >= buffering.startSeconds) else { return [] }
            run = .started(underrun: false)
            return [.startQueue(play: !userPaused)]
        }
        if underrun && !userPaused && (enough || ahead >= buffering.restartSeconds) {
            run = .started(underrun: false)
            return [.resumeQueue] + move(to: .playing)
        }
        return []
    }

    /// The sink ran dry: unless the input is done or the caller paused, hold until refilled.
    mutating func underran() -> [Action] {
        soundRunning = false
        guard phase == .running, !inputDone, !userPaused, queueStarted else { return [] }
        run = .started(underrun: true)
        return [.pauseQueue] + move(to: .buffering)
    }

    /// The sink started or stopped producing sound. Stopped after the end of the input (and not
    /// by a stop in progress): everything was heard.
    mutating func runningChanged(_ running: Bool, queueStopping: Bool) -> [Action] {
        guard phase == .running else { return [] }
        if !running && staleStops > 0 {
            // The pause or stop of a seek: the queue goes on.
            staleStops -= 1
            soundRunning = false
            return []
        }
        soundRunning = running
        if running { return userPaused || underrun ? [] : move(to: .playing) }
        guard inputDone && !queueStopping else { return [] }
        if restartAfterDrain {
            input = .feeding
            run = .notStarted
            return [.restartRun]
        }
        return end()
    }

    /// A failure: with `playOut`, what was enqueued plays first (a source's failure); otherwise
    /// the queue is released at once (the sink's).
    mutating func failed(_ error: AudioPlayerError, playOut: Bool) -> [Action] {
        guard phase != .ended else { return [] }
        if failure == nil { failure = error }
        if phase == .ready { phase = .running }
        if stopIssued { input = .stopIssued(restartAfterDrain: false) }
        if playOut && input == .feeding {
            input = .done
            return [.finishQueue]
        }
        return [.disposeQueue] + end()
    }

    /// The queue is gone before it was made (nothing was ever enqueued): the end.
    mutating func noQueueToPlayOut() -> [Action] { phase == .running ? end() : [] }

    // MARK: helpers

    private mutating func end() -> [Action] {
        guard phase != .ended else { return [] }
        phase = .ended
        var actions: [Action] = []
        if let heard, itemStates[heard] == .playing, failure == nil { actions += setItem(heard, .finished) }
        state = outcomeFailure.map { .failed($0) } ?? .finished
        return actions + [.publish(state), .complete]
    }

    /// A new player state; `finished` and `failed` are final, and a repeat is not reported.
    private mutating func move(to new: AudioPlayerState) -> [Action] {
        guard phase != .ended, state != new else { return [] }
        state = new
        return [.publish(new)]
    }

    private mutating func setItem(_ id: AudioPlayerItem.ID, _ new: AudioPlayerItemState) -> [Action] {
        guard let current = itemStates[id], current != new else { return [] }
        if case .failed = current { return [] }
        if current == .removed { return [] }
        itemStates[id] = new
        return [.publishItem(id: id, new)]
    }
}
