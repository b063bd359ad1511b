// Offline rendering: the queue's frames into memory instead of a sink.
extension AudioQueue {
    /// Switches between rendering offline into memory (`format` non-nil) and playing through the
    /// sink (`nil`). Core Audio's `AudioQueueSetOfflineRenderFormat`. Setting a format closes the
    /// sink; removing it reopens the sink if the queue is playing.
    ///
    /// - Parameter format: interleaved linear PCM (8-bit unsigned, 16/24/32-bit integer or 32/64-bit
    ///   float) at any sample rate and channel count. When they differ from the decoded audio the
    ///   queue converts (see ``AudioConverter`` for the channel matrix; rate conversion needs a
    ///   registered resampler, `SoxrConverter`), with exact lengths: N decoded frames render as
    ///   `round(N × rate / decoded rate)` frames, rounded once over each run up to a stop or reset.
    ///   A segment ends at every ``flush()``: the resampler drains there, so what was enqueued
    ///   before it renders completely. A decoded format that changes mid-stream is converted too.
    /// - Throws: ``AudioQueueError/Code/codecNotFound`` when the rates differ and no resampler is
    ///   registered; ``AudioQueueError/Code/invalidPropertyValue`` for a format out of range.
    public func setOfflineRenderFormat(_ format: AudioStreamDescription?) throws {
        let layout = try format.map { try PCMSampleLayout($0) }
        guard let format else {
            wake.setMuted(false)
            // Offline mode keeps the sink closed, so this thread may read the stage (and if a
            // concurrent call already left offline mode, the target is nil already).
            if control.withLock({ $0.offlineFormat != nil }) {
                _ = pipeline.withLock { _ in stage.tryExclusiveAccess { try? stage.setOutputTarget(nil) } }
            }
            control.withLock { c in
                c.offlineFormat = nil
                c.offlineLayout = nil
            }
            try lifecycleEvent { try $0.setOffline(false) }
            return
        }
        // The sink is closed first: then this thread may read the stage as its only reader.
        let heard = currentTime().sampleTime
        try lifecycleEvent { try $0.setOffline(true, heard: heard) }
        do {
            let claimed: Void? = try pipeline.withLock { _ in
                try stage.tryExclusiveAccess {
                    stage.adoptLeadingFormatChange()
                    try stage.setOutputTarget((format.sampleRate, format.channelsPerFrame))
                }
            }
            if claimed == nil {
                // Another thread left offline mode in between and the sink is rendering again.
                throw AudioQueueError(.invalidOfflineMode, "offline mode was switched off by another call while this one switched it on")
            }
        } catch {
            let keep = control.withLock { $0.offlineFormat != nil }
            _ = pipeline.withLock { _ in
                stage.tryExclusiveAccess {
                    let previous = control.withLock { $0.offlineFormat }
                    try? stage.setOutputTarget(previous.map { ($0.sampleRate, $0.channelsPerFrame) })
                }
            }
            if !keep { try lifecycleEvent { try $0.setOffline(false) } }
            throw error
        }
        control.withLock { c in
            c.offlineFormat = format
            c.offlineLayout = layout
        }
        // The worker has nothing to do for enqueues and ring space while this thread renders.
        wake.setMuted(true)
    }

    /// The frame the next ``offlineRender(at:into:frames:)-(_,AudioQueueBuffer,_)`` must start at: frames rendered so far
    /// (in the offline render format's rate).
    public var offlineRenderPosition: Int64 { Int64(stage.outputFrames.load(ordering: .acquiring)) }

    /// Renders up to `frames` frames into `buffer` in the offline render format (Core Audio's
    /// `AudioQueueOfflineRender`). Returns the frames rendered and sets the buffer's ``AudioQueueBuffer/byteSize``.
    ///
    /// It decodes what it needs on the calling thread, returns fewer frames when fewer have been
    /// enqueued, never blocks waiting for data and never invents silence that was not scheduled.
    /// - Parameters:
    ///   - sampleTime: must equal ``offlineRenderPosition``.
    ///   - buffer: a buffer of the queue's, large enough for `frames` frames of the render format.
    ///   - frames: how many frames to render at most.
    @discardableResult
    public func offlineRender(at sampleTime: Int64, into buffer: AudioQueueBuffer, frames: Int) throws -> Int {
        guard buffer.queueID == ObjectIdentifier(self) else {
            throw AudioQueueError(.invalidBuffer, "buffer \(buffer.id) was allocated by another queue")
        }
        guard !buffer.isInQueue else {
            throw AudioQueueError(.bufferInQueue, "buffer \(buffer.id) is in the queue; render into a free buffer")
        }
        let rendered = try buffer.withStorage { bytes in
            try offlineRender(at: sampleTime, into: bytes, frames: frames)
        }
        let bytesPerFrame = control.withLock { $0.offlineFormat?.bytesPerFrame ?? 0 }
        buffer.setByteSizeInternal(rendered * bytesPerFrame)
        return rendered
    }

    /// Renders up to `frames` frames into raw memory in the offline render format; see
    /// ``offlineRender(at:into:frames:)-(_,AudioQueueBuffer,_)``.
    ///
    /// Offline render is the render stage's only reader while it runs: a reset, stop or disposal
    /// on another thread waits for it, and the next call sees their effect.
    /// - Throws: ``AudioQueueError/Code/invalidOfflineMode`` without an offline render format or at
    ///   the wrong position, ``AudioQueueError/Code/codecNotFound`` when the decoded format changed
    ///   to a rate no registered resampler converts (the frames before the change were rendered by
    ///   earlier calls) and when no decoder could be made for what is enqueued (with nothing rendered),
    ///   ``AudioQueueError/Code/disposalPending``.
    public func offlineRender(at sampleTime: Int64, into destination: UnsafeMutableRawBufferPointer, frames: Int) throws -> Int {
        let (format, layout): (AudioStreamDescription, PCMSampleLayout) = try control.withLock { c in
            if c.lifecycle.isDisposed {
                throw AudioQueueError(.disposalPending, "the queue is being disposed of")
            }
            guard let format = c.offlineFormat, let layout = c.offlineLayout else {
                throw AudioQueueError(.invalidOfflineMode, "no offline render format is set; call setOfflineRenderFormat first")
            }
            c.lifecycle.newRunBegan()
            return (format, layout)
        }
        guard frames >= 0 else { throw AudioQueueError(.invalidParameter, "cannot render \(frames) frames") }
        guard destination.count >= frames * format.bytesPerFrame, let base = destination.baseAddress ?? (frames == 0 ? UnsafeMutableRawPointer(bitPattern: 16) : nil) else {
            throw AudioQueueError(.invalidBuffer, "\(frames) frames of \(format.bytesPerFrame) bytes do not fit in \(destination.count) bytes")
        }
        let channels = format.channelsPerFrame
        // What the render finished with is put in line for delivery under the pipeline lock (so
        // its order among deliveries is fixed) and, with `.beforeReturning`, delivered on this
        // thread once the lock is released (a callback may enqueue, stop or reset).
        var posted = false
        var passedEnd = false
        var shortfall: AudioQueueError?
        defer {
            if posted { delivery.drainOnCallingThread() }
            if let shortfall { delivery.deliver(.error(shortfall)) }
        }
        let rendered: Int = try pipeline.withLock { producer in
            defer {
                // Taken before the lock goes: the worker this render woke cannot take it first.
                shortfall = takeConverterShortfall(producer)
                if offlineCallbacks == .beforeReturning {
                    posted = delivery.post(producer.outbox)
                    producer.outbox.removeAll(keepingCapacity: true)
                } else {
                    flushOutbox(producer)
                }
            }
            let position = stage.outputFrames.load(ordering: .acquiring)
            guard sampleTime == Int64(position) else {
                throw AudioQueueError(.invalidOfflineMode,
                    "offline render asked to start at frame \(sampleTime) but \(position) frames have been rendered; pass offlineRenderPosition")
            }
            // Native float32 renders straight into the caller's memory; other layouts via scratch.
            let direct = layout.isNativeFloat32 && Int(bitPattern: base) % MemoryLayout<Float>.alignment == 0
            if !direct && producer.offlineScratch.count < frames * channels {
                producer.offlineScratch = [Float](repeating: 0, count: frames * channels)
            }
            let done: Int? = try stage.tryExclusiveAccess {
                let ends = stage.endsPassed
                defer { passedEnd = stage.endsPassed != ends }
                return try renderOffline(producer, into: base, direct: direct, frames: frames, channels: channels)
            }
            guard let done else {
                throw AudioQueueError(.invalidOfflineMode, "the sink is rendering; offline render needs the queue switched to offline first")
            }
            if !direct { layout.fromFloat(producer.offlineScratch, count: done * channels, into: base) }
            return done
        }
        if posted {
            posted = false
            delivery.drainOnCallingThread()
        }
        if let error = shortfall {
            shortfall = nil
            delivery.deliver(.error(error))
        }
        // The end of an asynchronous stop completes with the call that rendered it.
        takeRenderEvents()
        if takenRenderEvents.withLock({ $0.endsOfStream > 0 }) { handleRenderSignals(offline: true) }
        // The worker this render woke may have taken the end first and be acting on it (the
        // timeline restarts at 0): the render returns once that is done, so the position the
        // caller reads next is the one the next render must pass.
        if passedEnd { serial.withLock { _ in } }
        return rendered
    }

    /// The render loop of an offline render; the caller holds the pipeline lock and the stage.
    private func renderOffline(_ producer: Producer, into base: UnsafeMutableRawPointer, direct: Bool, frames: Int,
                               channels: Int) throws -> Int {
        stage.adoptLeadingFormatChange()
        var done = 0
        try producer.offlineScratch.withUnsafeMutableBufferPointer { scratch in
            guard let scratchBase = direct ? base.assumingMemoryBound(to: Float.self) : scratch.baseAddress else { return }
            while done < frames {
                if let failure = stage.nodeFailure {
                    if done > 0 { return }
                    throw failure
                }
                // Linear PCM with nothing to convert goes from the enqueued buffer to the output in
                // one pass while the ring is empty; the ring is filled only as far as this call needs.
                let out = scratchBase + done * channels
                let straight = stage.takesFramesStraight
                if straight {
                    let n = stage.renderStraight(into: out, frames: frames - done) { producer.renderStraight(into: $0, frames: $1, gains: $2) }
                    if n > 0 {
                        done += n
                        continue
                    }
                }
                // (A pump that stopped for the straight path without progress and found it could not
                // take the frames after all pumps again into the ring: nothing is left behind.)
                let need = straight ? (frames - done) * channels : nil
                let produced = producer.pump(readySamples: need, yieldingStraight: straight, next: takeEntry)
                    || (straight && producer.pump(readySamples: need, next: takeEntry))
                let n = stage.renderAsReader(into: out, frames: frames - done, fillSilence: false)
                done += n
                if n == 0 {
                    if stage.pendingFormat() != nil {
                        // A new decoded format: the stage converts it to the offline format.
                        stage.acceptFormatChange()
                        continue
                    }
                    if !produced {
                        // Nothing rendered because no decoder could be made: say so, never a
                        // render of nothing that looks like the end of what was enqueued.
                        if done == 0, let failure = producer.decoderFailure { throw failure }
                        return
                    }
                }
            }
        }
        return done
    }
}
