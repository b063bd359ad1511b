#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Something that happened in a queue, delivered in order on the queue's callback executor.
public enum AudioQueueEvent: Sendable, CustomStringConvertible {
    /// The queue no longer needs the buffer's bytes (decoded, or discarded by a stop or reset): the
    /// caller owns it again and may refill and enqueue it.
    case bufferReturned(AudioQueueBuffer)
    /// The sink really started or stopped producing the queue's sound.
    case runningChanged(Bool)
    /// The sink asked for frames the queue did not have; the timeline stood still meanwhile.
    case underrun
    /// Frames from here on have this format (interleaved float32); announced before any of them play.
    case formatChanged(AudioStreamDescription)
    /// A problem that did not stop the queue: a corrupt packet, an excessive trim, a sink failure.
    case error(AudioQueueError)
    /// The sink moved to another device (the system's default output changed, or the device in
    /// use went away): the named device plays from here on, without a frame lost or repeated.
    case outputDeviceChanged(String)

    public var description: String {
        switch self {
        case .bufferReturned(let buffer): return "bufferReturned(\(buffer.id))"
        case .runningChanged(let running): return "runningChanged(\(running))"
        case .underrun: return "underrun"
        case .formatChanged(let format): return "formatChanged(\(format))"
        case .error(let error): return "error(\(error))"
        case .outputDeviceChanged(let name): return "outputDeviceChanged(\(name))"
        }
    }
}

/// A position on the queue's timeline: Core Audio's `AudioTimeStamp` as far as a queue uses it.
public struct AudioQueueTime: Hashable, Sendable {
    /// Frames since the queue started, counting scheduled gaps, not counting time paused or starved.
    public var sampleTime: Int64
    /// True when the timeline was interrupted (an underrun or a reset) since the last time asked.
    public var discontinuity: Bool
}

/// Level of one channel, over the most recently rendered block of frames.
public struct AudioLevelMeter: Hashable, Sendable {
    /// Root mean square level, linear (1 = full scale).
    public var average: Float
    /// Largest absolute sample, linear.
    public var peak: Float

    /// The same levels in decibels relative to full scale, floored at -120 dB.
    public var decibels: AudioLevelMeter {
        AudioLevelMeter(average: Self.dB(average), peak: Self.dB(peak))
    }

    static func dB(_ linear: Float) -> Float {
        linear <= 1e-6 ? -120 : max(20 * log10f(linear), -120)
    }
}

/// Parameters a queue applies to its output, now or from a given buffer on.
/// How a queue changes play rate (Core Audio's `kAudioQueueProperty_TimePitchAlgorithm`).
public enum TimePitchAlgorithm: Sendable, Hashable {
    /// WSOLA in the time domain, written in Swift: the pitch stays; suits speech and music.
    /// Apple's `kAudioQueueTimePitchAlgorithm_TimeDomain`.
    case timeDomain
    /// Band-limited resampling: the pitch follows the rate, like a tape played faster.
    /// Apple's `kAudioQueueTimePitchAlgorithm_Varispeed`.
    case varispeed
    /// A phase vocoder (Rubber Band's R3 engine): rate and pitch independent, the best quality for
    /// music at rates far from 1, at a higher cost and latency. Needs an engine registered:
    /// import `RubberBandTimePitch` (GPL-2+) and call `RubberBandTimePitch.register()`.
    /// Apple's `kAudioQueueTimePitchAlgorithm_Spectral`.
    case spectral
}

/// The queue's parameters that change while it plays (Core Audio's `kAudioQueueParam_…`):
/// volume, play rate, pitch, pan and the volume ramp's time.
public struct AudioQueueParameters: Hashable, Sendable {
    /// Linear gain, 0...1.
    public var volume: Float?
    /// Balance, -1 (left only) ... 1 (right only); no effect on mono.
    public var pan: Float?
    /// Playback speed, 0.25...4 (Core Audio's `kAudioQueueParam_PlayRate`); 1 plays as recorded.
    /// Takes effect only with time-pitch on (``AudioQueue/setTimePitch(_:)``): with
    /// ``TimePitchAlgorithm/timeDomain`` the pitch stays, with ``TimePitchAlgorithm/varispeed``
    /// it follows the rate.
    public var playRate: Float?
    /// Pitch shift in cents, -2400...2400 (Core Audio's `kAudioQueueParam_Pitch`); as with
    /// Apple's, only the ``TimePitchAlgorithm/spectral`` algorithm applies it (from the next
    /// block of at most 1024 frames).
    public var pitch: Float?
    /// A linear multiplier on the volume, 0...16 (+24 dB): a gain that belongs to what is played
    /// (an item's loudness normalisation, ReplayGain) rather than to the listener's ``volume``,
    /// which it leaves as it is. It applies at once, without the volume's ramp: given with a
    /// buffer, exactly from its first frame, as the frames leave the decoded ring — before every
    /// processing tap, time-pitch and conversion, so each of them sees the frames at their gain.
    public var gain: Float?

    /// Parameters to set; nil leaves each as it is.
    public init(volume: Float? = nil, pan: Float? = nil, playRate: Float? = nil, pitch: Float? = nil, gain: Float? = nil) {
        self.volume = volume
        self.pan = pan
        self.playRate = playRate
        self.pitch = pitch
        self.gain = gain
    }

    /// These parameters, or an ``AudioQueueError/Code/invalidParameter`` naming the one out of range.
    public func validated() throws -> AudioQueueParameters {
        if let volume, !(0...1).contains(volume) {
            throw AudioQueueError(.invalidParameter, "volume \(volume) is outside 0...1")
        }
        if let pan, !(-1...1).contains(pan) {
            throw AudioQueueError(.invalidParameter, "pan \(pan) is outside -1...1")
        }
        if let playRate, !(0.25...4).contains(playRate) {
            throw AudioQueueError(.invalidParameter, "play rate \(playRate) is outside 0.25...4")
        }
        if let pitch, !(-2400...2400).contains(pitch) {
            throw AudioQueueError(.invalidParameter, "pitch \(pitch) cents is outside -2400...2400")
        }
        if let gain, !(0...16).contains(gain) {
            throw AudioQueueError(.invalidParameter, "gain \(gain) is outside 0...16 (+24 dB)")
        }
        return self
    }
}
