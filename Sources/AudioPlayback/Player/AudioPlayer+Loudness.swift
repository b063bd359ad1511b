import BufferQueue
import Synchronization

extension AudioPlayer {
    /// Meters what the player plays, live, beside any processing taps (an equaliser and a meter
    /// together): every frame handed to the sink, once, in order — after the items' gains, the
    /// crossfades, volume and the taps, as heard — feeds a ``/BufferQueue/LoudnessMeter`` on the
    /// render path, which publishes its ``/BufferQueue/LoudnessReading`` at every 100 ms step for
    /// any thread to read (momentary, short-term and the peaks live; integrated and range of
    /// everything played since the start or the last ``AudioPlayerLoudnessMonitor/reset()``, as of
    /// the last whole second while playing, and of everything once playback ended).
    ///
    /// Install it before or while the player plays: it meters from the first frame once the output
    /// format is known (at once when it is). A player has one meter: a second call returns it.
    /// The render path allocates, waits and calls the system for nothing for it; the meter's memory
    /// is fixed when it is made. Channels are weighted by ``channelLayout`` (else in WAVE's order).
    public func installLoudnessMeter() -> AudioPlayerLoudnessMonitor {
        let monitor = loudnessRequest.withLock { request -> AudioPlayerLoudnessMonitor in
            if let request { return request }
            let made = AudioPlayerLoudnessMonitor()
            request = made
            return made
        }
        work.async { [self] in startLoudnessMeter() }
        return monitor
    }

    /// On `work`: makes the meter asked for, once the output's format is known, and hands it to the
    /// output observer.
    func startLoudnessMeter() {
        guard let monitor = loudnessRequest.withLock({ $0 }), loudnessSlot.object == nil, let format = feed.observedFormat else { return }
        let layout = channelLayout
        do {
            let meter = try LoudnessMeter(sampleRate: format.sampleRate, channels: format.channelsPerFrame,
                                          channelLayout: layout?.channelCount == format.channelsPerFrame ? layout : nil)
            monitor.state.meter.withLock { $0 = meter }
            loudnessSlot.set(OutputLoudness(state: monitor.state, channels: format.channelsPerFrame))
        } catch {
            monitor.failure.withLock { $0 = "\(error)" }
        }
    }
}

/// The live loudness of what a player plays (``AudioPlayer/installLoudnessMeter()``): read
/// ``reading`` from any thread at any time.
public final class AudioPlayerLoudnessMonitor: Sendable {
    /// Integrated and range once a second while playing (each costs a pass over the meter's
    /// histograms), everything at the end (the player publishes the final reading).
    let state = LoudnessTapState(gatedEvery: 10)
    /// Why the meter could not be made (an output it cannot measure: more than 64 channels).
    let failure = Lock<String?>(nil)

    init() {}

    /// What has been measured, as published at the last completed 100 ms step (peaks included);
    /// silence (-infinity) before the first step.
    public var reading: LoudnessReading { state.published.read() }

    /// Why nothing is metered, when the output could not be (more than 64 channels); nil otherwise.
    public var error: String? { failure.withLock { $0 } }

    /// Starts a new measurement with the next frames played (a new programme); what was published
    /// stays readable until the first new step.
    public func reset() { state.resetRequested.store(true, ordering: .releasing) }
}

/// What the output observer feeds on the render path: the meter's state and the output's channels.
final class OutputLoudness: Sendable {
    let state: LoudnessTapState
    let channels: Int

    init(state: LoudnessTapState, channels: Int) {
        self.state = state
        self.channels = channels
    }

    /// Render path: `frames` output frames.
    func measure(_ output: UnsafePointer<Float>, frames: Int) {
        state.measure(UnsafeBufferPointer(start: output, count: frames * channels))
    }
}
