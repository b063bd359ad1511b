import BufferQueue
import CRubberBand

/// The ``/BufferQueue/TimePitchAlgorithm/spectral`` time-pitch algorithm on the Rubber Band
/// Library (Debian `librubberband-dev` 3.x, its R3 "finer" engine in real-time mode).
///
/// **Licence: the Rubber Band Library is GPL-2.0-or-later** (or commercially licensed by its
/// authors). A program that links this module is bound by the GPL: the module opens the library
/// (`dlopen`) when its first engine is made, which for the GPL is the same as linking it. The rest
/// of the package is not (it never loads it unless you add this product).
///
/// ```swift
/// RubberBandTimePitch.register()
/// try queue.setTimePitch(.spectral)
/// try queue.setParameters(AudioQueueParameters(playRate: 1.25, pitch: -200))
/// ```
public enum RubberBandTimePitch {
    /// Registers Rubber Band with `registry` (the shared one by default).
    public static func register(in registry: TimePitchEngineRegistry = .shared) {
        registry.register(TimePitchEngineFactory(name: "Rubber Band", priority: 10) { sampleRate, channels in
            try RubberBandEngine(sampleRate: sampleRate, channels: channels)
        })
    }
}

/// One Rubber Band stretcher in real-time mode (R3 engine, channels processed together so the
/// stereo image holds, pitch changes smoothed), behind the ``/BufferQueue/TimePitchEngine`` interface:
/// interleaved float32 in and out, planar scratch inside, no allocation after `init`.
public final class RubberBandEngine: TimePitchEngine {
    private let state: RubberBandState
    private let channels: Int
    /// Planar scratch, one block per channel.
    private let planar: UnsafeMutablePointer<Float>
    private let pointers: UnsafeMutablePointer<UnsafeMutablePointer<Float>?>
    public let maximumProcessFrames = 1024

    /// - Throws: ``/BufferQueue/AudioQueueError/Code/invalidPropertyValue`` for a rate or channel
    ///   count Rubber Band cannot take.
    public init(sampleRate: Double, channels: Int) throws {
        guard (1...32).contains(channels), sampleRate >= 8000, sampleRate <= 384_000, sampleRate == sampleRate.rounded() else {
            throw AudioQueueError(.invalidPropertyValue,
                "Rubber Band cannot stretch \(channels) channels at \(sampleRate) Hz (1–32 channels, 8000–384000 Hz, whole rates)")
        }
        let options = RubberBandOptions(RubberBandOptionProcessRealTime.rawValue | RubberBandOptionEngineFiner.rawValue
            | RubberBandOptionChannelsTogether.rawValue | RubberBandOptionThreadingNever.rawValue
            // Pitch changes glide (crossing 1 too). It costs about 15 % more CPU than the default
            // method; switching to it when a pitch is first set was measured to click.
            | RubberBandOptionPitchHighConsistency.rawValue)
        try AudioQueueError.requireLibrary(aq_rubberband_load(), reason: aq_rubberband_error)
        guard let made = aq_rubberband_new(UInt32(sampleRate), UInt32(channels), options, 1, 1) else {
            throw AudioQueueError(.invalidPropertyValue, "Rubber Band could not be set up for \(channels) channels at \(sampleRate) Hz")
        }
        state = made
        self.channels = channels
        aq_rubberband_set_max_process_size(state, UInt32(maximumProcessFrames))
        planar = .allocate(capacity: maximumProcessFrames * channels)
        planar.initialize(repeating: 0, count: maximumProcessFrames * channels)
        pointers = .allocate(capacity: channels)
        for c in 0..<channels { pointers[c] = planar + c * maximumProcessFrames }
        warmUp()
    }

    /// Rubber Band allocates much of its working memory on the first real `process` and
    /// `retrieve`, not in `rubberband_new`: run it once here, on silence at a rate and pitch other
    /// than 1, so that this happens where the engine is made (off the render thread), then reset
    /// (at rate and pitch 1: resetting at another pitch left a step at the next start). Another
    /// project measured the lazy allocation in Rubber Band 3.3; it was not measured here.
    private func warmUp() {
        aq_rubberband_set_time_ratio(state, 0.8)
        aq_rubberband_set_pitch_scale(state, 1.1)
        let frames = 4 * maximumProcessFrames
        let silence = UnsafeMutablePointer<Float>.allocate(capacity: frames * channels)
        defer { silence.deallocate() }
        silence.initialize(repeating: 0, count: frames * channels)
        var fed = 0
        while fed < 4 * frames {
            process(silence, frames: frames)
            fed += frames
            while availableFrames > 0 { _ = retrieve(into: silence, frames: min(availableFrames, frames)) }
        }
        aq_rubberband_set_time_ratio(state, 1)
        aq_rubberband_set_pitch_scale(state, 1)
        aq_rubberband_reset(state)
    }

    deinit {
        aq_rubberband_delete(state)
        planar.deallocate()
        pointers.deallocate()
    }

    public func setTimeRatio(_ ratio: Double) { aq_rubberband_set_time_ratio(state, ratio) }

    public func setPitchScale(_ scale: Double) { aq_rubberband_set_pitch_scale(state, scale) }

    public var startPad: Int { Int(aq_rubberband_get_preferred_start_pad(state)) }

    public var startDelay: Int { Int(aq_rubberband_get_start_delay(state)) }

    public func process(_ input: UnsafePointer<Float>, frames: Int) {
        var offset = 0
        while offset < frames {
            let n = min(frames - offset, maximumProcessFrames)
            for c in 0..<channels {
                let lane = planar + c * maximumProcessFrames
                for i in 0..<n { lane[i] = input[(offset + i) * channels + c] }
            }
            pointers.withMemoryRebound(to: UnsafePointer<Float>?.self, capacity: channels) { lanes in
                aq_rubberband_process(state, lanes, UInt32(n), 0)
            }
            offset += n
        }
    }

    public var availableFrames: Int { max(Int(aq_rubberband_available(state)), 0) }

    public func retrieve(into output: UnsafeMutablePointer<Float>, frames: Int) -> Int {
        var done = 0
        while done < frames {
            let n = min(frames - done, maximumProcessFrames)
            let got = Int(aq_rubberband_retrieve(state, pointers, UInt32(n)))
            for c in 0..<channels {
                let lane = planar + c * maximumProcessFrames
                for i in 0..<got { output[(done + i) * channels + c] = lane[i] }
            }
            done += got
            if got < n { break }
        }
        return done
    }

    public func reset() { aq_rubberband_reset(state) }
}
