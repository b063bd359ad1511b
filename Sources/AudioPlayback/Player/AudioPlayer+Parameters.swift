import BufferQueue

/// Volume, balance, play rate and pitch: kept for the getters and for a queue made later, and set on the queue now.
extension AudioPlayer {
    /// The gain applied to everything now (0...1): see ``setVolume(_:)``.
    public var volume: Float { shared.withLock { $0.volume } }

    /// The balance now (-1 left ... 1 right): see ``setPan(_:)``.
    public var pan: Float { shared.withLock { $0.pan } }

    /// Changes the play rate (0.25...4) and, optionally, the pitch shift in cents (-2400...2400;
    /// spectral only) of what plays now and later, within about 20 ms. Needs `timePitch` at init.
    /// ``Status/position`` stays the position in the item (source time).
    /// - Throws: ``/BufferQueue/AudioQueueError/Code/invalidParameter`` for values out of range, or
    ///   without time-pitch.
    public func setPlayRate(_ rate: Float, pitch: Float? = nil) throws {
        guard timePitch != nil else {
            throw AudioQueueError(.invalidParameter, "the player was made without time-pitch: pass timePitch: to init")
        }
        if let pitch, pitch != 0, timePitch != .spectral {
            throw AudioQueueError(.invalidParameter, "a pitch shift needs the spectral time-pitch algorithm")
        }
        let parameters = try AudioQueueParameters(playRate: rate, pitch: pitch).validated()
        let queue = shared.withLock { s -> AudioQueue? in
            s.playRate = rate
            if let pitch { s.pitch = pitch }
            return s.queue
        }
        try queue?.setParameters(parameters)
    }

    /// Changes the gain (0...1) of what plays now and later; the change glides over a few
    /// milliseconds, as the queue's volume does.
    /// - Throws: ``/BufferQueue/AudioQueueError/Code/invalidParameter`` outside 0...1.
    public func setVolume(_ volume: Float) throws {
        try setMix(AudioQueueParameters(volume: volume).validated()) { $0.volume = volume }
    }

    /// Changes the balance (-1 left only ... 1 right only; no effect on mono).
    /// - Throws: ``/BufferQueue/AudioQueueError/Code/invalidParameter`` outside -1...1.
    public func setPan(_ pan: Float) throws {
        try setMix(AudioQueueParameters(pan: pan).validated()) { $0.pan = pan }
    }

    func setMix(_ parameters: AudioQueueParameters, _ keep: (inout Shared) -> Void) throws {
        let queue = shared.withLock { s -> AudioQueue? in
            keep(&s)
            return s.queue
        }
        try queue?.setParameters(parameters)
    }
}
