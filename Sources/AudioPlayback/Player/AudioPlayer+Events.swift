import AudioFileStream
import BufferQueue
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The machine's actions, events out, what is heard, time observers and the end. All on `work` unless said.
extension AudioPlayer {
    // MARK: events and actions

    /// Decides under the lock, acts after it.
    func act(_ decide: (inout PlayerMachine) -> [PlayerMachine.Action]) {
        perform(shared.withLock { decide(&$0.machine) })
    }

    func perform(_ actions: [PlayerMachine.Action], removedIndex: Int? = nil) {
        for action in actions {
            switch action {
            case .publish(let state):
                emit(.state(state))
                reportPositions()
            case .publishItem(let id, let state):
                let (index, start) = shared.withLock { s -> (Int, (output: Int64, gain: Float)?) in
                    let index = s.items.firstIndex { $0.id == id } ?? removedIndex ?? -1
                    guard state == .playing else { return (index, nil) }
                    s.itemsPlayed += 1
                    return (index, s.startsHeard.removeValue(forKey: id))
                }
                emit(.itemState(index: index, id: id, state))
                if state == .playing {
                    let gain = Double(start?.gain ?? 1)
                    emit(.itemStarted(index: index, id: id, outputFrame: start?.output ?? 0, gain: gain > 0 ? 20 * log10(gain) : -.infinity))
                }
                reportPositions()
            case .openItem:
                openItem()
            case .startQueue(let play):
                startQueue(play: play)
            case .resumeQueue:
                if transitionFade > 0 {
                    // The hold goes before the start: the first frames played fade in.
                    work.async { [self] in
                        releaseOutputHold()
                        try? queue?.start()
                    }
                } else {
                    try? shared.withLock({ $0.queue })?.start()
                }
            case .pauseQueue:
                if transitionFade > 0 && shared.withLock({ $0.machine.userPaused }) {
                    // The caller's pause: the sink stops once the fade out is heard (unless resumed meanwhile).
                    work.async { [self] in
                        afterFadingOut { [self] in
                            if shared.withLock({ $0.machine.userPaused }) { try? queue?.pause() }
                        }
                    }
                } else {
                    try? shared.withLock({ $0.queue })?.pause()
                }
            case .finishQueue:
                finishQueue()
            case .stopQueue:
                do { try queue?.stop(immediately: false) } catch { fail(AudioPlayerError(.sink, underlying: error), playOut: false) }
            case .restartRun:
                restartRun()
            case .disposeQueue:
                shared.withLock({ $0.queue })?.dispose(immediately: true)
            case .complete:
                complete()
            }
        }
    }

    func emit(_ event: AudioPlayerEvent) {
        let subscribers = shared.withLock { s -> [AsyncStream<AudioPlayerEvent>.Continuation] in
            switch event {
            case .streamTitle(let title, let index) where s.items.indices.contains(index): s.streamTitles[s.items[index].id] = title
            case .itemWarning(let index, _, let text): s.warnings.append(.init(itemIndex: index, message: text))
            case .itemSkipped(_, _, let error): s.skippedItems.append(error)
            default: break
            }
            return Array(s.subscribers.values)
        }
        for subscriber in subscribers { subscriber.yield(event) }
        eventHandler?(event)
    }

    /// The context a source of an item reports through: its events get the item's index here.
    func context(forItem id: AudioPlayerItem.ID) -> AudioSourceContext {
        AudioSourceContext(report: { [weak self] event in
            guard let self else { return }
            let index = self.shared.withLock { s in s.items.firstIndex { $0.id == id } } ?? -1
            switch event {
            case .state(let state): self.act { $0.sourceReported(state, item: id) }
            case .streamTitle(let title): self.emit(.streamTitle(title, index: index))
            case .property(let name, let value): self.emit(.property(name: name, value: value, index: index))
            }
        }, available: { [weak self] in
            guard let self else { return }
            self.work.async { self.pump() }
        })
    }

    func whenDone(_ waiter: @escaping @Sendable (Result<Report, any Error>) -> Void) {
        let ready = shared.withLock { s -> Result<Report, any Error>? in
            if let result = s.result { return result }
            s.waiters.append(waiter)
            return nil
        }
        if let ready { waiter(ready) }
    }

    // MARK: what is heard

    /// Reports the items whose first frame is heard by now, and schedules the next check for when
    /// the next item's first frame will be heard (from the timeline and the item's rate; checked
    /// again then, so a pause or an underrun meanwhile only moves it later).
    func scheduleHeardCheck() {
        feed.heardCheck?.cancel()
        feed.heardCheck = nil
        guard soundRunning, let next = noteHeard() else { return }
        guard let queue else { return }
        let now = queue.currentTime().sampleTime
        let rate = Double(shared.withLock { $0.playRate })
        let seconds = Double(next.start - now) / next.rate / max(rate, 0.25)
        let check = DispatchWorkItem { [weak self] in self?.scheduleHeardCheck() }
        feed.heardCheck = check
        work.asyncAfter(deadline: .now() + seconds + 0.002, execute: check)
    }

    /// Reports the items whose first frame is heard by now, in order, whatever paces the sink
    /// (an unpaced one plays a list in a moment: it is asked as buffers come back and at the
    /// end, not only when a clock says); returns the next item to come.
    @discardableResult
    func noteHeard() -> PlayerTimeline.Mark? {
        guard let queue else { return nil }
        let now = queue.currentTime().sampleTime
        let (reached, next) = shared.withLock { s -> ([PlayerTimeline.Mark], PlayerTimeline.Mark?) in
            let (reached, next) = s.timeline.reach(by: now)
            for mark in reached { s.startsHeard[mark.id] = (mark.outputStart, mark.gain) }
            return (reached, next)
        }
        for mark in reached { act { $0.itemHeard(mark.id) } }
        return next
    }

    // MARK: time observers

    /// Gives every time observer the status now.
    func reportPositions() {
        let keys = shared.withLock { Array($0.positionObservers.keys) }
        guard !keys.isEmpty else { return }
        let now = status
        for key in keys { report(now, to: key) }
    }

    /// Gives observer `key` the status, unless it is the one it was given last.
    func report(_ status: Status, to key: Int) {
        shared.withLock { s in
            guard let observer = s.positionObservers[key], observer.last != status else { return }
            s.positionObservers[key]?.last = status
            observer.continuation.yield(status)
        }
    }

    /// (Re)schedules every observer's next report: only while sound plays (the position moves).
    func schedulePositionTicks() {
        for key in shared.withLock({ Array($0.positionObservers.keys) }) { schedulePositionTick(key) }
    }

    /// On `work`: the next report of observer `key`, one period from now while sound plays.
    func schedulePositionTick(_ key: Int) {
        feed.positionTicks.removeValue(forKey: key)?.cancel()
        guard soundRunning, let period = shared.withLock({ $0.positionObservers[key]?.period }) else { return }
        let tick = DispatchWorkItem { [weak self] in
            guard let self else { return }
            self.report(self.status, to: key)
            self.schedulePositionTick(key)
        }
        feed.positionTicks[key] = tick
        let parts = period.components
        work.asyncAfter(deadline: .now() + Double(parts.seconds) + Double(parts.attoseconds) / 1e18, execute: tick)
    }

    // MARK: ending

    /// Every item is fed: the queue plays out what it has.
    func finishInput() {
        let hasQueue = queue != nil
        act { $0.inputFinished(hasQueue: hasQueue) }
    }

    /// Starts the queue if it has not started, and stops it after what it holds once all of it is decoded.
    func finishQueue() {
        feed.feeder = nil
        feed.feedingID = nil
        guard let queue else { return act { $0.noQueueToPlayOut() } }
        evaluateBuffer(waiting: false)
        let paused = shared.withLock { $0.machine.userPaused }
        do {
            if !queue.isRunning && !paused { try queue.start() }
        } catch {
            return fail(AudioPlayerError(.sink, underlying: error), playOut: false)
        }
        allDecodedIfSo()
    }

    /// After the input finished: once every buffer is back (all of it decoded), the queue may stop.
    func allDecodedIfSo() {
        guard queue != nil, feed.free.count == feed.bufferCount else { return }
        act { $0.allDecoded() }
    }

    /// Items came while the queue played out: a new run of the queue feeds them.
    func restartRun() {
        feed.timelineBeforeItem = 0
        feed.join?.reset()
        let handed = framesHanded.frames.load(ordering: .relaxed)
        shared.withLock { s in
            s.timeline.restart(at: 0, output: handed)
        }
        feed.needsNewStream = true
        openItem()
    }

    /// A source or the sink failed: what was enqueued before plays out (a source's failure),
    /// then playback ends with the error.
    func fail(_ error: AudioPlayerError, playOut: Bool = true, item: AudioPlayerItem.ID? = nil) {
        feed.resolvePendingSeeks(with: .failure(error))
        if let item {
            act { $0.itemFailed(item, error) }
        } else {
            act { $0.failed(error, playOut: playOut) }
        }
    }

    /// A seek in the item heard (`item` nil) or a jump to the start of another item. False when
    /// the player is not playing.
    func performJump(toItem target: Int?, seconds: Double, fadingOut: Bool = false) -> Bool {
        guard let queue, shared.withLock({ $0.result == nil && $0.machine.phase == .running }) else { return false }
        let heardIndex = status.itemIndex ?? feed.itemIndex
        let restarts = shared.withLock { $0.machine.stopIssued }
        // The queue's report that it stopped running (for the pause or stop here) is not the end of playback.
        let reportsStop = queue.isRunning || queue.isStopping
        act { $0.seekBegan(queueWillReportStop: reportsStop) }
        feed.heardCheck?.cancel()
        do {
            if restarts {
                // The queue was told to stop after what it holds: stop it at once (its timeline restarts).
                try queue.stop(immediately: true)
            } else {
                try queue.pause()
                try queue.reset()
            }
            // Held for a fade out before the jump: what plays from the new place fades in.
            if queue.isOutputHoldRequested { queue.setOutputHold(false, fadeFrames: transitionFadeFrames) }
        } catch {
            fail(AudioPlayerError(.sink, underlying: error), playOut: false)
            return true
        }
        // The frame reached, now that the queue stands: a skip's fade out starts there (not where
        // the status said before the pause, which the sink may have played past).
        let reached = queue.currentTime().sampleTime
        let start = fadingOut ? shared.withLock { $0.timeline.status(heard: reached, titles: [:], outputFormat: nil).position } : seconds
        // A stopped queue's timeline starts again from 0; a reset one goes on from the frame reached.
        feed.timelineBeforeItem = restarts ? 0 : reached
        let handed = framesHanded.frames.load(ordering: .relaxed)
        shared.withLock { s in
            s.timeline.restart(at: feed.timelineBeforeItem, output: handed)
        }
        let index = target ?? heardIndex
        if feed.itemIndex != index { feed.loop = max(feed.loop - (index > feed.itemIndex ? 1 : 0), 0) }
        feed.itemIndex = index
        feed.nextStart = start
        feed.feeder = nil
        feed.join?.reset()
        openItem(fadingOut: fadingOut)
        feed.needsNewStream = true
        pump()
        return true
    }

    func resetForReplay() {
        guard shared.withLock({ $0.result != nil }) else { return }
        queue?.dispose(immediately: true)
        feed.rewind(to: startSeconds)
        framesHanded.frames.store(0, ordering: .relaxed)
        recorderBox.clear()
        // A new run meters afresh, in its output's format.
        loudnessSlot.clear()
        shared.withLock { s in
            s.machine.reset(items: s.items.map(\.id))
            s.queue = nil
            s.timeline = PlayerTimeline()
            s.result = nil
            s.skippedItems = []
            s.warnings = []
            s.itemsPlayed = 0
            s.startsHeard = [:]
        }
    }

    /// Ends playback (once): the waiters, the event streams.
    func complete() {
        feed.cancelTimers()
        let played = framesHanded.frames.load(ordering: .relaxed)
        let (waiters, subscribers, observers, result) = shared.withLock { s in
            guard s.result == nil else { return ([@Sendable (Result<Report, any Error>) -> Void](), [AsyncStream<AudioPlayerEvent>.Continuation](),
                                                  [AsyncStream<Status>.Continuation](), Result<Report, any Error>?.none) }
            let report = Report(framesPlayed: played, itemsPlayed: s.itemsPlayed, skipped: s.skippedItems, warnings: s.warnings)
            // Skipped items are in the report; the run fails only when nothing could play.
            let result: Result<Report, any Error> = s.machine.outcomeFailure.map { .failure($0) } ?? .success(report)
            s.result = result
            defer {
                s.waiters.removeAll()
                s.subscribers.removeAll()
                s.positionObservers.removeAll()
            }
            return (s.waiters, Array(s.subscribers.values), s.positionObservers.values.map(\.continuation), result)
        }
        guard let result else { return }
        recorderBox.object?.finish()
        // No render feeds the meter now: its reading is made whole (the gated measures included).
        loudnessSlot.object?.state.publishFinal()
        feed.resolvePendingSeeks(with: .failure(AudioPlayerError(.request, underlying: AudioQueueError(.invalidRunState,
            "playback ended before the seek took effect"))))
        for subscriber in subscribers { subscriber.finish() }
        for observer in observers { observer.finish() }
        for waiter in waiters { waiter(result) }
    }
}
