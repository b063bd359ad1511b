import Foundation

/// A moment as a sample time at a rate, a host time, or both (Apple's `AVAudioTime`). Host time
/// is AudioToolbox's: nanoseconds of the monotonic clock (`AudioGetCurrentHostTime()`).
open class AVAudioTime: NSObject {
    private let stamp: UnsafeMutablePointer<AudioTimeStamp>
    /// The rate of ``sampleTime`` (0 when there is none).
    public let sampleRate: Double

    /// A time from a timestamp (its valid fields say which times it has) and a sample rate.
    public init(audioTimeStamp ts: UnsafePointer<AudioTimeStamp>, sampleRate: Double) {
        stamp = .allocate(capacity: 1)
        stamp.initialize(to: ts.pointee)
        self.sampleRate = sampleRate
        super.init()
    }

    /// A host time.
    public convenience init(hostTime: UInt64) {
        var ts = AudioTimeStamp()
        ts.mHostTime = hostTime
        ts.mFlags = .hostTimeValid
        self.init(audioTimeStamp: &ts, sampleRate: 0)
    }

    /// A sample time at a rate.
    public convenience init(sampleTime: AVAudioFramePosition, atRate sampleRate: Double) {
        var ts = AudioTimeStamp()
        ts.mSampleTime = Double(sampleTime)
        ts.mFlags = .sampleTimeValid
        self.init(audioTimeStamp: &ts, sampleRate: sampleRate)
    }

    /// A host time and a sample time at a rate, for the same moment.
    public convenience init(hostTime: UInt64, sampleTime: AVAudioFramePosition, atRate sampleRate: Double) {
        var ts = AudioTimeStamp()
        ts.mHostTime = hostTime
        ts.mSampleTime = Double(sampleTime)
        ts.mFlags = [.hostTimeValid, .sampleTimeValid]
        self.init(audioTimeStamp: &ts, sampleRate: sampleRate)
    }

    deinit {
        stamp.deinitialize(count: 1)
        stamp.deallocate()
    }

    /// Host time for a number of seconds.
    open class func hostTime(forSeconds seconds: TimeInterval) -> UInt64 { UInt64(max(seconds, 0) * 1e9) }
    /// Seconds for a host time.
    open class func seconds(forHostTime hostTime: UInt64) -> TimeInterval { Double(hostTime) / 1e9 }

    /// Whether ``hostTime`` is valid.
    public var isHostTimeValid: Bool { stamp.pointee.mFlags.contains(.hostTimeValid) }
    /// The host time (meaningful when ``isHostTimeValid``).
    public var hostTime: UInt64 { stamp.pointee.mHostTime }
    /// Whether ``sampleTime`` is valid.
    public var isSampleTimeValid: Bool { stamp.pointee.mFlags.contains(.sampleTimeValid) }
    /// The sample time at ``sampleRate`` (meaningful when ``isSampleTimeValid``).
    public var sampleTime: AVAudioFramePosition { AVAudioFramePosition(stamp.pointee.mSampleTime) }
    /// The time as a timestamp.
    public var audioTimeStamp: AudioTimeStamp { stamp.pointee }

    /// This time with what it lacks taken from `anchor` (which has both times): a sample time
    /// from a host time or the other way, at the anchor's rate; nil when neither can be made.
    open func extrapolateTime(fromAnchor anchor: AVAudioTime) -> AVAudioTime? {
        guard anchor.isHostTimeValid, anchor.isSampleTimeValid, anchor.sampleRate > 0 else { return nil }
        let rate = sampleRate > 0 ? sampleRate : anchor.sampleRate
        if isSampleTimeValid && isHostTimeValid { return AVAudioTime(hostTime: hostTime, sampleTime: sampleTime, atRate: rate) }
        if isSampleTimeValid {
            // Both sample times at the anchor's rate, then seconds from the anchor.
            let anchorSamples = Double(anchor.sampleTime) * rate / anchor.sampleRate
            let seconds = (Double(sampleTime) - anchorSamples) / rate
            let host = Double(anchor.hostTime) + seconds * 1e9
            return AVAudioTime(hostTime: UInt64(max(host, 0)), sampleTime: sampleTime, atRate: rate)
        }
        if isHostTimeValid {
            let seconds = (Double(hostTime) - Double(anchor.hostTime)) / 1e9
            let samples = Double(anchor.sampleTime) * rate / anchor.sampleRate + seconds * rate
            return AVAudioTime(hostTime: hostTime, sampleTime: AVAudioFramePosition(samples.rounded()), atRate: rate)
        }
        return nil
    }
}
