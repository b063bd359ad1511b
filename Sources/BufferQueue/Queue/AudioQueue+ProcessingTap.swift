// Processing taps: the caller's code on the render path (Apple's AudioQueueProcessingTapNew).
extension AudioQueue {
    /// Installs a processing tap (Apple's `AudioQueueProcessingTapNew`): `callback` runs on the
    /// render path for every block, pull style — asked for N frames, it pulls source audio itself
    /// with ``AudioQueueProcessingTap/getSourceAudio(frames:into:)`` and may take more or fewer
    /// frames than it returns (a rate changer, a filter with latency). A
    /// ``AudioQueueProcessingTapPosition/siphon`` only watches what goes out.
    ///
    /// The returned tap tells the ``AudioQueueProcessingTap/maximumFrames`` per call and the
    /// ``AudioQueueProcessingTap/processingFormat`` (interleaved float32), as Apple's does. A
    /// queue has one tap at a time; install it while the queue is not running (before the first
    /// start, or while paused or stopped), like Apple's.
    ///
    /// Lengths and times follow what the tap returns: a tap that returns half the frames it
    /// pulls halves the output, and ``offlineRenderPosition`` counts its output.
    /// - Throws: ``AudioQueueError/Code/invalidRunState`` while the sink renders,
    ///   ``AudioQueueError/Code/invalidPropertyValue`` when a tap is installed already.
    @discardableResult
    public func installProcessingTap(_ position: AudioQueueProcessingTapPosition,
                                     callback: @escaping AudioQueueProcessingTapCallback) throws -> AudioQueueProcessingTap {
        try addTap(position, callback: callback, besideOthers: false)
    }

    /// Adds a processing tap after those installed before at its position (a layer built on the
    /// queue: the player's equaliser, a meter, the caller's taps, in order). Pre-effects taps
    /// chain (each pulls the one added before it), post-effects taps likewise, siphons each see
    /// what goes out. The same conditions as ``installProcessingTap(_:callback:)`` otherwise.
    @discardableResult
    package func addProcessingTap(_ position: AudioQueueProcessingTapPosition,
                                  callback: @escaping AudioQueueProcessingTapCallback) throws -> AudioQueueProcessingTap {
        try addTap(position, callback: callback, besideOthers: true)
    }

    private func addTap(_ position: AudioQueueProcessingTapPosition, callback: @escaping AudioQueueProcessingTapCallback,
                        besideOthers: Bool) throws -> AudioQueueProcessingTap {
        try checkNotDisposed()
        let active = control.withLock { $0.lifecycle.sink == .active }
        let result: Result<AudioQueueProcessingTap, AudioQueueError>? = active ? nil : pipeline.withLock { _ in
            stage.tryExclusiveAccess { () -> Result<AudioQueueProcessingTap, AudioQueueError> in
                stage.adoptLeadingFormatChange()
                let installed = stage.taps?.taps ?? []
                if !besideOthers && !installed.isEmpty {
                    return .failure(AudioQueueError(.invalidPropertyValue, "the queue has a processing tap already; remove it first"))
                }
                let format: AudioStreamDescription = position == .preEffects
                    ? .float32(sampleRate: stage.sampleRate, channels: stage.channels)
                    : .float32(sampleRate: stage.outputRate, channels: stage.outputChannels)
                let tap = AudioQueueProcessingTap(position: position, maximumFrames: ConversionNode.blockFrames,
                                                  processingFormat: format, callback: callback)
                stage.setTaps(installed + [tap])
                return .success(tap)
            }
        }
        guard let result else {
            throw AudioQueueError(.invalidRunState, "a processing tap can be installed only while the queue is not running (pause or stop it first)")
        }
        return try result.get()
    }

    /// Removes the tap (Apple's `AudioQueueProcessingTapDispose`), under the same condition.
    /// - Throws: ``AudioQueueError/Code/invalidRunState`` while the sink renders,
    ///   ``AudioQueueError/Code/invalidParameter`` for a tap that is not installed on this queue.
    public func removeProcessingTap(_ tap: AudioQueueProcessingTap) throws {
        let active = control.withLock { $0.lifecycle.sink == .active }
        let result: AudioQueueError?? = active ? nil : pipeline.withLock { _ in
            stage.tryExclusiveAccess { () -> AudioQueueError? in
                let installed = stage.taps?.taps ?? []
                guard installed.contains(where: { $0 === tap }) else { return AudioQueueError(.invalidParameter, "the tap is not installed on this queue") }
                stage.setTaps(installed.filter { $0 !== tap })
                return nil
            }
        }
        guard let result else {
            throw AudioQueueError(.invalidRunState, "a processing tap can be removed only while the queue is not running (pause or stop it first)")
        }
        if let error = result { throw error }
    }

    /// Watches the output for a layer built on the queue (the player counts and records what the
    /// sink gets) while the caller keeps the one processing tap: called on the render path after
    /// the tap, with the output frames (interleaved float32 in the format returned). Set while the
    /// queue is not running, like a tap.
    package typealias OutputObserver = @Sendable (_ output: UnsafePointer<Float>, _ frames: Int) -> Void

    /// Sets the output observer (nil removes it); returns the output format it sees.
    /// - Throws: ``AudioQueueError/Code/invalidRunState`` while the sink renders.
    @discardableResult
    package func setOutputObserver(_ observer: OutputObserver?) throws -> AudioStreamDescription {
        try checkNotDisposed()
        let active = control.withLock { $0.lifecycle.sink == .active }
        let format: AudioStreamDescription? = active ? nil : pipeline.withLock { _ in
            stage.tryExclusiveAccess { () -> AudioStreamDescription in
                stage.adoptLeadingFormatChange()
                stage.setOutputObserver(observer)
                return .float32(sampleRate: stage.outputRate, channels: stage.outputChannels)
            }
        }
        guard let format else {
            throw AudioQueueError(.invalidRunState, "an output observer can be set only while the queue is not running")
        }
        return format
    }
}
