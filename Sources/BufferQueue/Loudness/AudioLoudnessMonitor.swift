import Synchronization

extension AudioQueue {
    /// Meters what the queue plays, live: a ``AudioQueueProcessingTapPosition/siphon`` tap feeds a
    /// ``LoudnessMeter`` on the render path with every output frame, once, in order, and publishes
    /// its ``LoudnessReading`` at every 100 ms step for any thread to read.
    ///
    /// The tap keeps the render thread's contract: the meter's memory is fixed when it is made, and
    /// the render path never allocates, waits or makes a system call for it. It takes the queue's
    /// one processing tap, so install it as a tap: while the queue is not running; remove it with
    /// ``removeProcessingTap(_:)`` and the monitor's ``AudioLoudnessMonitor/tap``.
    ///
    /// The channels are weighted by the queue's ``channelLayout`` when the output has its channel
    /// count (else as a WAVE file of that many channels orders them); the meter keeps the format the
    /// output had at installation.
    /// - Throws: what ``installProcessingTap(_:callback:)`` throws; ``AudioQueueError/Code/invalidParameter``
    ///   for an output the meter cannot measure (more than 64 channels).
    public func installLoudnessMeter() throws -> AudioLoudnessMonitor {
        let state = LoudnessTapState()
        let layout = channelLayout
        let tap = try installProcessingTap(.siphon) { tap, frames, output, _ in
            state.measure(UnsafeBufferPointer(start: output, count: frames * tap.processingFormat.channelsPerFrame))
            return frames
        }
        do {
            let format = tap.processingFormat
            let meter = try LoudnessMeter(sampleRate: format.sampleRate, channels: format.channelsPerFrame,
                                          channelLayout: layout.channelCount == format.channelsPerFrame ? layout : nil)
            state.meter.withLock { $0 = meter }
        } catch {
            try? removeProcessingTap(tap)
            throw error
        }
        return AudioLoudnessMonitor(tap: tap, state: state)
    }
}

/// The live loudness of a playing queue (``AudioQueue/installLoudnessMeter()``): read ``reading``
/// from any thread at any time.
public final class AudioLoudnessMonitor: Sendable {
    /// The siphon tap that feeds the meter (remove it to stop metering).
    public let tap: AudioQueueProcessingTap
    private let state: LoudnessTapState

    init(tap: AudioQueueProcessingTap, state: LoudnessTapState) {
        self.tap = tap
        self.state = state
    }

    /// What has been measured, as published at the last completed 100 ms step (peaks included).
    public var reading: LoudnessReading { state.published.read() }

    /// Starts a new measurement with the next frames played (a new programme); what was published
    /// stays readable until the first new step.
    public func reset() { state.resetRequested.store(true, ordering: .releasing) }
}

/// What the tap's callback and the monitor share (the player's meter, on its output, too).
package final class LoudnessTapState: Sendable {
    /// Locked only by the render path (one render at a time, so never contended: no wait) and
    /// once at installation, before the tap runs.
    package let meter = Mutex<LoudnessMeter?>(nil)
    package let published = PublishedReading()
    package let resetRequested = Atomic<Bool>(false)
    /// The gated measures (integrated, range) as last computed, and at which step: they are
    /// computed every `gatedEvery` steps (each costs a pass over the meter's histograms, 18 000
    /// bins: at every 100 ms step that was most of a player's CPU), the rest at every step.
    private let gated = Mutex<(integrated: Double, range: Double, step: Int?)>((-.infinity, 0, nil))
    private let gatedEvery: Int

    /// A meter's shared state whose readings carry the gated measures of every `gatedEvery`-th
    /// step (1: every step; more for a meter whose owner publishes a final reading at the end,
    /// ``publishFinal()``).
    package init(gatedEvery: Int = 1) {
        self.gatedEvery = max(gatedEvery, 1)
    }

    /// Render path: feeds the meter and publishes a reading when a step completed: momentary,
    /// short-term and peaks at every step, the gated measures once a second.
    package func measure(_ samples: UnsafeBufferPointer<Float>) {
        let reset = resetRequested.exchange(false, ordering: .acquiring)
        let reading = meter.withLock { meter -> LoudnessReading? in
            guard meter != nil else { return nil }
            if reset { meter!.reset() }
            let before = meter!.completedSteps
            meter!.add(samples)
            let steps = meter!.completedSteps
            guard steps != before else { return nil }
            return gated.withLock { gated in
                if reset || gated.step.map({ steps - $0 >= gatedEvery || steps < $0 }) ?? true {
                    gated = (meter!.integrated, meter!.loudnessRange, steps)
                }
                return meter!.reading(integrated: gated.integrated, range: gated.range)
            }
        }
        if let reading { published.write(reading) }
    }

    /// Publishes everything measured, the gated measures too — once no render feeds the meter
    /// any more (the end of playback: the lock is then never contended).
    package func publishFinal() {
        let reading = meter.withLock { $0?.reading }
        if let reading { published.write(reading) }
    }
}

/// A ``LoudnessReading`` published by one writer (the render path) to any number of readers, as a
/// sequence lock: the writer never waits; a reader that met a write under way reads again.
package final class PublishedReading: Sendable {
    /// Odd while a write is under way.
    private let sequence = Atomic<Int>(0)
    private let words = AtomicWords(count: 8)

    init() { write(.silent) }

    package func write(_ reading: LoudnessReading) {
        sequence.add(1, ordering: .relaxed)
        atomicMemoryFence(ordering: .releasing)
        // (Field by field: an array of the values would allocate on the render path.)
        words[0] = reading.integrated.bitPattern
        words[1] = reading.range.bitPattern
        words[2] = reading.truePeak.bitPattern
        words[3] = reading.samplePeak.bitPattern
        words[4] = reading.momentaryMax.bitPattern
        words[5] = reading.shortTermMax.bitPattern
        words[6] = reading.momentary.bitPattern
        words[7] = reading.shortTerm.bitPattern
        sequence.add(1, ordering: .releasing)
    }

    package func read() -> LoudnessReading {
        while true {
            let before = sequence.load(ordering: .acquiring)
            if before & 1 == 0 {
                func value(_ index: Int) -> Double { Double(bitPattern: words[index]) }
                let reading = LoudnessReading(integrated: value(0), range: value(1), truePeak: value(2), samplePeak: value(3),
                                              momentaryMax: value(4), shortTermMax: value(5), momentary: value(6), shortTerm: value(7))
                atomicMemoryFence(ordering: .acquiring)
                if sequence.load(ordering: .relaxed) == before { return reading }
            }
            // A write is under way on the render thread (a few stores long): read again.
        }
    }
}
