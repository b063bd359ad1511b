import Dispatch
import Synchronization

// The lifecycle verbs. Each is an event for `QueueLifecycle`: the state machine decides under the
// `control` lock and returns actions, which are performed here after that lock is released, in
// order, under the `serial` lock that orders all lifecycle calls.
extension AudioQueue {
    /// Decodes ahead so that ``start(at:)`` produces sound at once (Core Audio's `AudioQueuePrime`).
    ///
    /// - Parameter frames: frames wanted ready; 0 means as many as the decode buffer holds. It
    ///   decodes whole packets (PCM in chunks of up to 4096 frames), so it may prepare a little
    ///   more than asked; never more than ``decodeBufferFrames`` (the ring behind it may be larger:
    ///   it is rounded up, and a mono one holds twice as many frames).
    /// - Returns: the frames ready to play.
    /// - Throws: ``AudioQueueError/Code/codecNotFound`` when no decoder could be made for the stream,
    ///   ``AudioQueueError/Code/disposalPending``, ``AudioQueueError/Code/invalidParameter`` for a
    ///   negative count.
    @discardableResult
    public func prime(frames: Int = 0) throws -> Int {
        try checkNotDisposed()
        guard frames >= 0 else { throw AudioQueueError(.invalidParameter, "cannot prime \(frames) frames") }
        let (ready, failure, wrote) = pipeline.withLock { producer -> (Int, AudioQueueError?, Bool) in
            let channels = max(producer.ringFormat.channelsPerFrame, 1)
            // Never more than the decode buffer (the producer keeps to it), though the ring may hold more.
            let limit = decodeBufferFrames * channels
            let wrote = producer.pump(readySamples: frames > 0 ? min(frames * channels, limit) : nil, next: takeEntry)
            flushOutbox(producer)
            return (stage.ring.readable / max(producer.ringFormat.channelsPerFrame, 1), producer.decoderFailure, wrote)
        }
        // What prime wrote (frames, or the end-of-stream marker of an asynchronous stop) must
        // reach a sink that waits to be told, as the worker's writes do.
        if wrote { sink.sourceHasData() }
        if ready == 0, let failure { throw failure }
        return ready
    }

    /// Starts or resumes playback (Core Audio's `AudioQueueStart`).
    ///
    /// ``isRunning`` turns true (with ``AudioQueueEvent/runningChanged(_:)``) when the sink really
    /// plays, not when this returns. During an asynchronous stop or disposal a start plays out what
    /// is left (the stop or disposal then completes).
    ///
    /// - Parameter time: when the sink should start pulling; `nil` or a time already past = now.
    ///   A later time leaves a queue that was not started waiting; ``pause()``, a stop or another
    ///   start cancels the wait. A paused queue resumes at once (its time is ignored).
    /// - Throws: ``AudioQueueError/Code/cannotStart`` when the sink fails to open or start (a sink
    ///   that opened is closed again, and the queue stays as it was),
    ///   ``AudioQueueError/Code/disposalPending``.
    public func start(at time: DispatchTime? = nil) throws {
        let deferred = time.map { $0 > .now() } ?? false
        try lifecycleEvent(startAt: time) { try $0.start(deferred: deferred) }
    }

    /// Pauses playback, keeping every buffer and the decoder state (Core Audio's `AudioQueuePause`).
    /// Queue time stands still until ``start(at:)``. Pausing during an asynchronous stop pauses
    /// its play-out; the next start resumes it.
    public func pause() throws {
        try lifecycleEvent { try $0.pause() }
    }

    /// Marks the end of a run of buffers: once they have played, the decoder's tail is drained and
    /// its state cleared. Discards nothing; the queue keeps running (Core Audio's `AudioQueueFlush`).
    /// On a stopped queue it only marks the point in what is enqueued next.
    /// - Throws: ``AudioQueueError/Code/disposalPending``; ``AudioQueueError/Code/enqueueDuringReset``
    ///   while an asynchronous stop is under way (the stop flushes already).
    public func flush() throws {
        try checkNotDisposed()
        try pastFinishedStop { try input.withLock { input in
            if let refusal = input.refusal { throw refusal }
            input.entries.append(.flush)
        } }
        wake.signal()
    }

    /// Stops playback (Core Audio's `AudioQueueStop`).
    ///
    /// - Parameter immediately: `true` stops now, discards what has not played and returns every
    ///   buffer still in the queue through the callback; ``isRunning`` turns false. `false`
    ///   returns at once; the queue flushes, plays everything enqueued, then stops (``isRunning``
    ///   turns false when the sink has played the last frame); ``isStopping`` is true meanwhile and
    ///   enqueues fail with ``AudioQueueError/Code/enqueueDuringReset``. On a queue that is not
    ///   started or is paused, `false` marks the end: playback stops once ``start(at:)`` (or
    ///   offline rendering) has played everything enqueued before it.
    ///
    /// After a stop, ``currentTime(in:)`` reports where the run ended until something new starts;
    /// the next run's timeline begins at 0 (what is enqueued meanwhile is scheduled on it).
    /// `stop(immediately: true)` during an asynchronous disposal disposes at once.
    public func stop(immediately: Bool) throws {
        let heard = immediately ? currentTime().sampleTime : 0
        try lifecycleEvent { try $0.stop(immediately: immediately, heard: heard) }
    }

    /// Discards every buffer and all decoder and DSP state without stopping: the seek primitive
    /// (Core Audio's `AudioQueueReset`). Discarded buffers come back through the callback; the
    /// timeline goes on from the exact frame reached, and every ``AudioQueueTimeline`` sees a
    /// discontinuity. While playing, the sink stops pulling for the moment of the discard (no
    /// ``AudioQueueEvent/runningChanged(_:)``). A reset during an asynchronous stop completes the
    /// stop at once (during an asynchronous disposal, the disposal).
    public func reset() throws {
        let heard = currentTime().sampleTime
        try lifecycleEvent { try $0.reset(heard: heard) }
        wake.signal()
    }

    /// Releases the queue (Core Audio's `AudioQueueDispose`).
    ///
    /// - Parameter immediately: `true` stops and releases now; no callback runs after this returns
    ///   (unless called from inside a callback) and buffers still queued are handed back without
    ///   a callback. `false` returns at once and releases the queue after everything enqueued has
    ///   played: enqueues fail from now on; a queue that is idle or paused with buffers left
    ///   plays them out once started; one with nothing left is released at once.
    public func dispose(immediately: Bool) {
        let nothingQueued = immediately ? true : pipeline.withLock { producer in
            producer.isIdle && stage.ring.readable == 0 && !input.withLock { $0.hasPendingBuffers }
        }
        try? lifecycleEvent { $0.dispose(immediately: immediately, nothingQueued: nothingQueued) }
        wake.signal()
    }

    /// Whether an asynchronous stop (or disposal) is still playing out what was enqueued.
    public var isStopping: Bool { control.withLock { $0.lifecycle.isStopping } }

    /// Whether the sink is producing the queue's sound (Core Audio's `kAudioQueueProperty_IsRunning`).
    /// Changes are announced by ``AudioQueueEvent/runningChanged(_:)`` when they really happen.
    public var isRunning: Bool { control.withLock { $0.lifecycle.isRunning } }

    /// Runs `step`, which throws the input's refusal. A refusal by an asynchronous stop that the
    /// lifecycle already counts as over (``isStopping`` false) means the step that allows enqueues
    /// again is being performed: wait for it (it holds `serial`) and try once more, so a caller
    /// that saw the stop end is never refused by it.
    func pastFinishedStop<T>(_ step: () throws -> T) throws -> T {
        do {
            return try step()
        } catch let error as AudioQueueError where error.code == .enqueueDuringReset && !isStopping {
            serial.withLock { _ in }
            return try step()
        }
    }

    func checkNotDisposed() throws {
        let lifecycle = control.withLock { $0.lifecycle }
        if lifecycle.isDisposed || lifecycle.ending == .dispose {
            throw AudioQueueError(.disposalPending, "the queue is being disposed of")
        }
    }

    // MARK: performing actions

    /// Feeds one event to the state machine and performs the actions it returns.
    /// `deliverFirst`: on release, deliver what is already on its way (a disposal completing after
    /// play-out) instead of dropping it (`dispose(immediately: true)`: nothing after it returns).
    func lifecycleEvent(startAt time: DispatchTime? = nil, deliverFirst: Bool = false,
                        _ event: (inout QueueLifecycle) throws -> [QueueLifecycle.Action]) throws {
        defer { wakeLifecycleWaiters() }
        let release = try serial.withLock { handle -> Bool in
            let actions = try control.withLock { try event(&$0.lifecycle) }
            return try perform(actions, on: &handle, startAt: time)
        }
        if release {
            if deliverFirst { delivery.waitUntilDelivered() }
            releaseNow()
        }
    }

    /// Blocks the calling thread until no asynchronous stop or disposal is pending, `interrupted`
    /// returns true, or `deadline` passes; returns whether the stop is over. Woken by every
    /// lifecycle change and by ``wakeLifecycleWaiters()`` (for conditions of the caller's own).
    /// For threads of their own: never call it on Swift's cooperative pool or inside a callback.
    package func waitWhileStopping(until deadline: DispatchTime, unless interrupted: () -> Bool) -> Bool {
        let id = nextLifecycleWaiter.add(1, ordering: .relaxed).newValue
        let semaphore = DispatchSemaphore(value: 0)
        lifecycleWaiters.withLock { $0[id] = semaphore }
        defer { _ = lifecycleWaiters.withLock { $0.removeValue(forKey: id) } }
        while true {
            // Registered before checking: a change after the check signals the semaphore.
            if !isStopping { return true }
            if interrupted() { return false }
            if semaphore.wait(timeout: deadline) == .timedOut { return !isStopping }
        }
    }

    /// Wakes the threads in ``waitWhileStopping(until:unless:)`` to look at their conditions again.
    package func wakeLifecycleWaiters() {
        let waiting = lifecycleWaiters.withLock { Array($0.values) }
        for semaphore in waiting { semaphore.signal() }
    }

    /// Performs actions in order; `serial` is held. Returns whether the queue must be released
    /// (done by the caller after `serial` is released: waiting for a callback in progress while
    /// holding it could deadlock with a callback that calls the queue).
    private func perform(_ actions: [QueueLifecycle.Action], on handle: inout SinkHandle,
                         startAt time: DispatchTime? = nil) throws -> Bool {
        var release = false
        for action in actions {
            switch action {
            case .activateSink:
                try activateSink(&handle)
            case .pauseSink:
                sink.pause()
                stage.playing.store(false, ordering: .releasing)
            case .closeSink:
                stage.playing.store(false, ordering: .releasing)
                if handle.isOpen {
                    sink.flush()
                    sink.close()
                    handle.isOpen = false
                    control.withLock { $0.sinkStreamFormat = nil }
                }
            case .flushSink:
                if handle.isOpen { sink.flush() }
            case .drainSink(let token):
                let workQueue = self.workQueue
                sink.drain { [weak self] in
                    workQueue.async { [weak self] in self?.drainCompleted(token: token) }
                }
            case .reopenSink:
                reopenSink(&handle)
            case .scheduleStart(let token):
                let when = time ?? .now()
                workQueue.asyncAfter(deadline: when) { [weak self] in self?.deferredStartFired(token: token) }
            case .appendEnd(let code):
                input.withLock { input in
                    input.entries.append(.endOfStream)
                    input.refusal = AudioQueueError(code, code == .disposalPending
                        ? "the queue is being disposed of"
                        : "an asynchronous stop is under way; enqueue after isRunning turns false")
                }
                wake.signal()
            case .discard(let returnBuffers):
                discardEverything(returnBuffers: returnBuffers)
            case .restartTimeline:
                restartTimeline()
            case .reportRunning(let running):
                delivery.deliver(.runningChanged(running))
            case .release:
                release = true
            }
        }
        return release
    }

    /// Opens the sink (when closed) with the format of the next frames and starts it. On failure
    /// the state machine goes back and a sink that is open is closed again.
    private func activateSink(_ handle: inout SinkHandle) throws {
        do {
            if !handle.isOpen {
                let offline = control.withLock { $0.offlineFormat != nil }
                let format = pipeline.withLock { producer -> AudioStreamDescription in
                    producer.pump(next: takeEntry)
                    flushOutbox(producer)
                    stage.withExclusiveAccess { stage.adoptLeadingFormatChange() }
                    if sinkFormat == .keepFirst && stage.sinkTarget == nil && !offline {
                        // The sink keeps the format of the first frames from now on.
                        stage.withExclusiveAccess { try? stage.setSinkTarget((stage.sampleRate, stage.channels)) }
                    }
                    return .float32(sampleRate: stage.outputRate, channels: stage.outputChannels)
                }
                do {
                    try sink.open(format: format, channelLayout: layout(for: format), source: renderSource)
                } catch {
                    throw AudioQueueError(.cannotStart, "the sink could not open \(format): \(error)")
                }
                handle.isOpen = true
                control.withLock { $0.sinkStreamFormat = format }
            }
            stage.playing.store(true, ordering: .releasing)
            stage.startGeneration.add(1, ordering: .releasing)
            do { try sink.start() } catch {
                throw AudioQueueError(.cannotStart, "the sink could not start: \(error)")
            }
        } catch let error as AudioQueueError {
            stage.playing.store(false, ordering: .releasing)
            let opened = handle.isOpen
            let followUp = control.withLock { $0.lifecycle.activationFailed(opened: opened) }
            _ = try? perform(followUp, on: &handle)
            throw error
        }
    }

    /// The queue's channel layout, or the default one when the decoded channel count differs.
    private func layout(for format: AudioStreamDescription) -> AudioChannelLayout {
        let layout = control.withLock { $0.channelLayout }
        return layout.channelCount == format.channelsPerFrame ? layout : .default(channels: format.channelsPerFrame)
    }

    /// The decoded format changed while the sink pulls: reopen it with the new format.
    private func reopenSink(_ handle: inout SinkHandle) {
        sink.pause()
        let (format, failure) = pipeline.withLock { _ -> (AudioStreamDescription, AudioQueueError?) in
            stage.withExclusiveAccess { stage.acceptFormatChange() }
            return (.float32(sampleRate: stage.outputRate, channels: stage.outputChannels), stage.nodeFailure)
        }
        if let failure { delivery.deliver(.error(failure)) }
        sink.close()
        handle.isOpen = false
        control.withLock { $0.sinkStreamFormat = nil }
        do {
            try sink.open(format: format, channelLayout: layout(for: format), source: renderSource)
            handle.isOpen = true
            control.withLock { $0.sinkStreamFormat = format }
            stage.startGeneration.add(1, ordering: .releasing)
            try sink.start()
        } catch {
            stage.playing.store(false, ordering: .releasing)
            delivery.deliver(.error(AudioQueueError(.sinkError,
                "the sink could not follow the format change to \(format.channelsPerFrame) ch \(format.sampleRate) Hz: \(error); start again to retry")))
            let followUp = control.withLock { $0.lifecycle.reopenFailed() }
            _ = try? perform(followUp, on: &handle)
        }
    }

    /// Discards every queued buffer and all decoder and render state. The discard is applied at
    /// once by this thread as the render stage's only reader (no sink pulls now), so the timeline
    /// continues from the exact frame reached. On disposal (`returnBuffers == false`) enqueues are
    /// refused in the same step that empties the input, and discarded buffers are handed back
    /// without a callback.
    private func discardEverything(returnBuffers: Bool) {
        pipeline.withLock { producer in
            var items = producer.outbox
            producer.outbox.removeAll(keepingCapacity: true)
            let timeline = returnBuffers ? stage.timelineFrames.load(ordering: .acquiring) : 0
            let interrupted = producer.discard(timelineContinuesAt: timeline)
            stage.withExclusiveAccess { _ = stage.applyDiscardIfNeeded() }
            // An end of stream the render path reached before the discard, not yet acted on,
            // belongs to what was discarded: left, it would end a later asynchronous stop before
            // that stop's own end is rendered.
            takeRenderEvents()
            takenRenderEvents.withLock { $0.endsOfStream = 0 }
            let pending = input.withLock { input -> [AudioQueueBuffer] in
                input.scheduledEnd = timeline
                input.refusal = returnBuffers ? nil : AudioQueueError(.disposalPending, "the queue has been disposed of")
                let removed = input.removeAllBuffers()
                if let (format, cookie) = removed.stream { producer.adoptStream(format, magicCookie: cookie) }
                return removed.buffers
            }
            if let interrupted { items.append(.buffer(interrupted)) }
            items += pending.map { .buffer($0) }
            if returnBuffers {
                delivery.deliver(items)
            } else {
                for case .buffer(let buffer) in items { buffer.release() }
            }
        }
    }

    /// A run ended: the timeline of the next one begins at 0, on the write and the play side at once.
    private func restartTimeline() {
        pipeline.withLock { producer in
            producer.restartAfterEnd()
            stage.withExclusiveAccess { stage.resetTimeline() }
            input.withLock { input in
                input.scheduledEnd = 0
                input.refusal = nil
            }
        }
    }

    /// Stops deliveries and the worker; called after `serial` is released.
    private func releaseNow() {
        delivery.shutDown()
        wake.cancel()
    }

    // MARK: events from the worker and the sink

    func deferredStartFired(token: Int) {
        do {
            try lifecycleEvent { $0.deferredStartFired(token: token) }
        } catch let error as AudioQueueError {
            delivery.deliver(.error(error))
        } catch {}
    }

    func drainCompleted(token: Int) {
        let heard = Int64(stage.timelineFrames.load(ordering: .acquiring))
        try? lifecycleEvent(deliverFirst: true) { $0.drainCompleted(token: token, heard: heard) }
    }

    func sinkFailed(_ error: AudioQueueError) {
        delivery.deliver(.error(error))
        try? lifecycleEvent { $0.sinkFailed() }
    }

    /// Acts on what the render stage signalled: underruns, the end of an asynchronous stop, a
    /// format change the sink must follow, and playback really beginning. Runs on the worker, and
    /// on an offline-rendering thread after a render that reached the end (`offline`).
    func handleRenderSignals(offline: Bool = false) {
        reportConverterShortfall(always: offline)
        takeRenderEvents()
        // Ends of stream are only peeked here: they are taken under the serial lock below, where
        // a discard (which holds that lock) cannot come between taking one and acting on it.
        let (underruns, ends) = takenRenderEvents.withLock { taken -> (Int, Int) in
            defer { taken.underruns = 0 }
            return (taken.underruns, taken.endsOfStream)
        }
        for _ in 0..<underruns { delivery.deliver(.underrun) }
        let endReached = ends > 0
        let formatPending = stage.pendingFormat() != nil
        let observe = playbackBegan() && control.withLock { !$0.lifecycle.isRunning && $0.lifecycle.sink == .active }
        guard endReached || formatPending || observe else { return }
        let heard = Int64(stage.timelineFrames.load(ordering: .acquiring))
        try? lifecycleEvent(deliverFirst: true) { lifecycle in
            var actions: [QueueLifecycle.Action] = []
            // Asked again under the serial lock: a start marks the sink active before it counts
            // a new start generation (both under this lock), and in between the generations of
            // the last start still match. Seen from outside the lock, that window made the queue
            // running before the new start had rendered or been heard.
            if observe && playbackBegan() { actions += lifecycle.playbackObserved() }
            if formatPending { actions += lifecycle.formatChangeReached() }
            let endTaken = takenRenderEvents.withLock { taken -> Bool in
                defer { taken.endsOfStream = 0 }
                return taken.endsOfStream > 0
            }
            if endTaken { actions += lifecycle.endRendered(heard: heard) }
            return actions
        }
    }

    /// Whether the latest start has rendered its first frames and, for a sink that reports it,
    /// been heard. Only conclusive under the serial lock (see ``handleRenderSignals(offline:)``).
    private func playbackBegan() -> Bool {
        let generation = stage.startGeneration.load(ordering: .acquiring)
        return stage.startedGeneration.load(ordering: .acquiring) == generation
            && (!sink.reportsPlaybackStart || stage.heardGeneration.load(ordering: .acquiring) == generation)
    }

    /// Frames the render path's resampler failed to give (silence stood in, so lengths stay exact)
    /// become an error event and the last converter error: never silent.
    ///
    /// The shortfall is taken and recorded under the pipeline lock. An offline render takes it
    /// before it lets go of the lock it rendered under, so when it returns the error is recorded
    /// (the worker the render woke cannot take it first); `always` takes the lock even when the
    /// count reads zero, for an offline render that reached the end and handles its signals.
    func reportConverterShortfall(always: Bool = false) {
        guard always || stage.events.hasEvents || takenRenderEvents.withLock({ $0.shortfall > 0 }) else { return }
        if let error = pipeline.withLock({ takeConverterShortfall($0) }) { delivery.deliver(.error(error)) }
    }

    /// Drains the stage's render-event ring into ``takenRenderEvents``, in order.
    func takeRenderEvents() {
        takenRenderEvents.withLock { taken in
            taken.scratch.removeAll(keepingCapacity: true)
            stage.events.drain(into: &taken.scratch)
            for event in taken.scratch {
                switch event {
                case .underrun: taken.underruns += 1
                case .endOfStream: taken.endsOfStream += 1
                case .shortfall(let frames): taken.shortfall += frames
                }
            }
        }
    }

    /// Takes the resampler's shortfall and records it as the last converter error; the caller holds
    /// the pipeline lock and delivers the returned error once it has let go of it.
    func takeConverterShortfall(_ producer: Producer) -> AudioQueueError? {
        takeRenderEvents()
        let missing = takenRenderEvents.withLock { taken -> Int in
            defer { taken.shortfall = 0 }
            return taken.shortfall
        }
        guard missing > 0 else { return nil }
        let error = AudioQueueError(.decoderError,
            "the resampler gave \(missing) frames fewer than the decoded audio makes; silence stands in for them")
        producer.recordConverterError(error)
        return error
    }

    /// Runs on the worker queue whenever something woke it: render signals first, then decoding.
    func serviceWorker() {
        handleRenderSignals()
        // Before a start nothing decodes (prime does, on the caller's thread); offline rendering
        // decodes on demand on the rendering thread.
        guard control.withLock({ $0.lifecycle.decodesAhead }) else { return }
        let wrote = pipeline.withLock { producer -> Bool in
            let wrote = producer.pump(next: takeEntry)
            flushOutbox(producer)
            return wrote
        }
        if wrote { sink.sourceHasData() }
    }

    func takeEntry() -> PendingEntry? { input.withLock { $0.popFirst() } }

    func flushOutbox(_ producer: Producer) {
        if !producer.outbox.isEmpty {
            delivery.deliver(producer.outbox)
            producer.outbox.removeAll(keepingCapacity: true)
        }
    }
}
