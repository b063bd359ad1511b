#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What a ``LoudnessMeter`` has measured, in the units EBU R128 reports them. A level that no
/// block reached (silence, or less audio than one block) is `-infinity`.
public struct LoudnessReading: Sendable, Hashable {
    /// Integrated loudness in LUFS: the whole programme, gated at −70 LUFS absolute and 10 LU below
    /// the ungated mean (ITU-R BS.1770-4).
    public var integrated: Double
    /// Loudness range in LU (EBU Tech 3342): the spread between the 10th and 95th percentiles of the
    /// short-term loudness, gated at −70 LUFS and 20 LU below their mean; 0 without two blocks.
    public var range: Double
    /// The highest true (inter-sample) peak in dBTP, from the signal oversampled (BS.1770-4 Annex 2).
    public var truePeak: Double
    /// The highest sample magnitude in dBFS.
    public var samplePeak: Double
    /// The loudest momentary (400 ms) block in LUFS.
    public var momentaryMax: Double
    /// The loudest short-term (3 s) block in LUFS.
    public var shortTermMax: Double
    /// The momentary loudness of the last 400 ms, in LUFS.
    public var momentary: Double
    /// The short-term loudness of the last 3 s, in LUFS.
    public var shortTerm: Double

    /// A reading of these values (LUFS, LU and dBTP / dBFS as the properties say).
    public init(integrated: Double, range: Double, truePeak: Double, samplePeak: Double, momentaryMax: Double,
                shortTermMax: Double, momentary: Double, shortTerm: Double) {
        self.integrated = integrated
        self.range = range
        self.truePeak = truePeak
        self.samplePeak = samplePeak
        self.momentaryMax = momentaryMax
        self.shortTermMax = shortTermMax
        self.momentary = momentary
        self.shortTerm = shortTerm
    }

    /// Nothing measured.
    public static let silent = LoudnessReading(integrated: -.infinity, range: 0, truePeak: -.infinity, samplePeak: -.infinity,
                                               momentaryMax: -.infinity, shortTermMax: -.infinity,
                                               momentary: -.infinity, shortTerm: -.infinity)
}

/// One gain that brings a measured programme to a target loudness, limited so that its true peak
/// stays at or under a ceiling.
public struct LoudnessNormalization: Sendable, Hashable {
    /// The gain to apply, in dB.
    public var gain: Double
    /// Whether the ceiling lowered the gain (the programme then ends up quieter than the target).
    public var isLimitedByCeiling: Bool
    /// The integrated loudness after the gain, in LUFS.
    public var loudness: Double
    /// The true peak after the gain, in dBTP.
    public var truePeak: Double

    /// The linear factor of ``gain``.
    public var linearGain: Double { pow(10, gain / 20) }

    /// The normalisation of `reading` to `target` LUFS with a true-peak `ceiling` in dBTP (nil: none);
    /// nil when the reading has no integrated loudness (silence, or less than 400 ms above −70 LUFS).
    public init?(_ reading: LoudnessReading, target: Double, truePeakCeiling ceiling: Double? = -1) {
        guard reading.integrated.isFinite else { return nil }
        var gain = target - reading.integrated
        var limited = false
        if let ceiling, reading.truePeak.isFinite, reading.truePeak + gain > ceiling {
            gain = ceiling - reading.truePeak
            limited = true
        }
        self.gain = gain
        isLimitedByCeiling = limited
        loudness = reading.integrated + gain
        truePeak = reading.truePeak + gain
    }
}

/// Loudness and peaks of interleaved float audio as EBU R128 and ITU-R BS.1770-4 define them:
/// K-weighting (its two filters derived for any sample rate), channel weights from the channel
/// layout, momentary, short-term, gated integrated loudness, loudness range (EBU Tech 3342), sample
/// peak and true peak (4× oversampled below 96 kHz, 2× below 192 kHz).
///
/// Feed it buffer by buffer with ``add(_:)-(UnsafeBufferPointer<Float>)``; ``reading`` is current at any time (momentary and
/// short-term to the last complete 100 ms step). Its memory is fixed when it is made: the gated
/// measures keep 0.01 LU histograms of the blocks (each bin with the blocks' exact energy), so
/// feeding never allocates and a render thread may own one (see ``AudioQueue/installLoudnessMeter()``).
/// A value: a copy measures on by itself.
public struct LoudnessMeter: Sendable {
    /// Frames per second of what is fed.
    public let sampleRate: Double
    /// Channels per frame of what is fed.
    public let channels: Int
    /// Each channel's weight in the sum (BS.1770-4 Table 3): 1 for left, right, centre and mono,
    /// 1.41 (+1.5 dB) for surrounds, 0 for LFE.
    public let channelWeights: [Double]
    /// Frames fed so far.
    public private(set) var frames: Int64 = 0

    private let shelf: KFilter
    private let highPass: KFilter
    /// Per channel: the shelf's two state variables, then the high-pass's.
    private var filterState: [Double]

    /// A step: 100 ms of frames (rounded as libebur128 does, (rate + 5) / 10).
    private let stepFrames: Int
    private var stepFill = 0
    private var stepEnergy = 0.0
    /// The weighted energy of the last 30 steps (a ring), and how many steps have completed.
    private var recent: [Double]
    private var steps = 0
    private var momentaryBlocks = LoudnessHistogram()
    private var shortTermBlocks = LoudnessHistogram()
    private var momentaryMaxEnergy = 0.0
    private var shortTermMaxEnergy = 0.0

    private let oversampling: Int
    /// The interpolator's coefficients, phase by phase (`oversampling` × `Self.taps`).
    private let interpolator: [Double]
    /// The largest sum of absolute coefficients of a phase: no interpolated value exceeds the
    /// largest sample magnitude in its window by more than this factor.
    private let interpolatorBound: Double
    /// Per channel, its last `taps` samples twice over (a ring read without wrapping).
    private var history: [Double]
    private var historyPosition = 0
    private var samplePeakValue = 0.0
    private var truePeakValue = 0.0

    /// Taps per phase of the true-peak interpolator (48 at 4×, as BS.1770-4's example filter).
    static let taps = 12

    /// - Parameters:
    ///   - sampleRate: frames per second, 8 000 to 384 000.
    ///   - channels: 1 to 64.
    ///   - channelLayout: the speakers, for the weights; nil counts channels as a WAVE file of that
    ///     many channels orders them (5.1: L R C LFE Ls Rs).
    /// - Throws: ``AudioQueueError/Code/invalidParameter`` for a rate or channel count out of range, or
    ///   a layout of another channel count.
    public init(sampleRate: Double, channels: Int, channelLayout: AudioChannelLayout? = nil) throws {
        guard sampleRate.isFinite, sampleRate >= 8000, sampleRate <= 384_000 else {
            throw AudioQueueError(.invalidParameter, "a loudness meter measures 8 to 384 kHz, not \(sampleRate) Hz")
        }
        guard (1...64).contains(channels) else {
            throw AudioQueueError(.invalidParameter, "a loudness meter measures 1 to 64 channels, not \(channels)")
        }
        if let channelLayout, channelLayout.channelCount != channels {
            throw AudioQueueError(.invalidParameter, "the channel layout has \(channelLayout.channelCount) channels, the audio \(channels)")
        }
        self.sampleRate = sampleRate
        self.channels = channels
        let layout = channelLayout ?? .wave(channels: channels)
        channelWeights = layout.channelLabels.map(Self.weight)
        shelf = .highShelf(sampleRate: sampleRate)
        highPass = .highPass(sampleRate: sampleRate)
        filterState = Array(repeating: 0, count: 4 * channels)
        stepFrames = max((Int(sampleRate.rounded()) + 5) / 10, 1)
        recent = Array(repeating: 0, count: 30)
        oversampling = sampleRate < 96_000 ? 4 : sampleRate < 192_000 ? 2 : 1
        let table = Self.interpolator(oversampling: oversampling)
        interpolator = table
        interpolatorBound = stride(from: 0, to: table.count, by: Self.taps).map { phase in
            table[phase..<(phase + Self.taps)].reduce(0) { $0 + abs($1) }
        }.max() ?? 1
        history = Array(repeating: 0, count: 2 * Self.taps * channels)
    }

    /// A channel's weight (BS.1770-4 Table 3).
    public static func weight(_ label: AudioChannelLayout.Label) -> Double {
        switch label {
        case .lfeScreen: 0
        case .leftSurround, .rightSurround, .centerSurround, .leftSurroundDirect, .rightSurroundDirect: 1.41
        case .left, .right, .center, .mono, .unknown, .unused: 1
        }
    }

    /// Measures `samples`: interleaved frames of ``channels`` samples (a trailing part of a frame is
    /// ignored). Never allocates, locks or waits.
    public mutating func add(_ samples: UnsafeBufferPointer<Float>) {
        guard let base = samples.baseAddress else { return }
        let count = samples.count / channels
        var done = 0
        while done < count {
            let n = min(count - done, stepFrames - stepFill)
            measure(base + done * channels, frames: n)
            done += n
            stepFill += n
            if stepFill == stepFrames { closeStep() }
        }
        frames += Int64(count)
    }

    /// Forgets everything measured: the meter starts again as new. Never allocates.
    public mutating func reset() {
        frames = 0
        Self.zero(&filterState)
        stepFill = 0
        stepEnergy = 0
        Self.zero(&recent)
        steps = 0
        momentaryBlocks.reset()
        shortTermBlocks.reset()
        momentaryMaxEnergy = 0
        shortTermMaxEnergy = 0
        Self.zero(&history)
        historyPosition = 0
        samplePeakValue = 0
        truePeakValue = 0
    }

    static func zero<T: Numeric>(_ array: inout [T]) {
        array.withUnsafeMutableBufferPointer { $0.update(repeating: 0) }
    }

    /// 100 ms steps completed so far (the momentary and short-term values change only with it).
    var completedSteps: Int { steps }

    /// Measures `samples` (interleaved frames).
    public mutating func add(_ samples: [Float]) {
        samples.withUnsafeBufferPointer { add($0) }
    }

    /// Everything measured so far.
    public var reading: LoudnessReading {
        LoudnessReading(integrated: integrated, range: loudnessRange, truePeak: Self.decibels(truePeak),
                        samplePeak: Self.decibels(samplePeak), momentaryMax: Self.loudness(momentaryMaxEnergy),
                        shortTermMax: Self.loudness(shortTermMaxEnergy), momentary: momentary, shortTerm: shortTerm)
    }

    /// Everything measured so far but the gated measures, which are `integrated` and `range` as
    /// given (a live meter publishes those less often: each costs a pass over the histograms).
    func reading(integrated: Double, range: Double) -> LoudnessReading {
        LoudnessReading(integrated: integrated, range: range, truePeak: Self.decibels(truePeak),
                        samplePeak: Self.decibels(samplePeak), momentaryMax: Self.loudness(momentaryMaxEnergy),
                        shortTermMax: Self.loudness(shortTermMaxEnergy), momentary: momentary, shortTerm: shortTerm)
    }

    /// Gated integrated loudness in LUFS (−∞ before the first block above −70 LUFS).
    public var integrated: Double { momentaryBlocks.gatedLoudness(relativeGate: -10) }

    /// Loudness range in LU (EBU Tech 3342).
    public var loudnessRange: Double { shortTermBlocks.range() }

    /// The integrated loudness of several programmes played one after another (an album): every
    /// block of every meter gated together, as one programme (ReplayGain's album loudness); −∞
    /// when none passes. The meters may measure different rates and channel counts.
    public static func integrated(of meters: [LoudnessMeter]) -> Double {
        guard var all = meters.first?.momentaryBlocks else { return -.infinity }
        for meter in meters.dropFirst() { all.merge(meter.momentaryBlocks) }
        return all.gatedLoudness(relativeGate: -10)
    }

    /// The last 400 ms in LUFS (−∞ before 400 ms were fed).
    public var momentary: Double { Self.loudness(lastSteps(4)) }

    /// The last 3 s in LUFS (−∞ before 3 s were fed).
    public var shortTerm: Double { Self.loudness(lastSteps(30)) }

    /// The highest sample magnitude (linear; 1 is full scale).
    public var samplePeak: Double { samplePeakValue }

    /// The highest true peak (linear), never below the sample peak.
    public var truePeak: Double { max(truePeakValue, samplePeakValue) }

    // MARK: measuring

    /// The mean weighted energy of the last `count` steps; 0 when fewer have completed.
    private func lastSteps(_ count: Int) -> Double {
        guard steps >= count else { return 0 }
        var sum = 0.0
        for i in 1...count { sum += recent[(steps - i) % recent.count] }
        return sum / Double(count * stepFrames)
    }

    private mutating func closeStep() {
        recent[steps % recent.count] = stepEnergy
        steps += 1
        stepEnergy = 0
        stepFill = 0
        if steps >= 4 {
            let block = lastSteps(4)
            momentaryBlocks.add(block)
            momentaryMaxEnergy = max(momentaryMaxEnergy, block)
        }
        if steps >= 30 {
            let block = lastSteps(30)
            shortTermBlocks.add(block)
            shortTermMaxEnergy = max(shortTermMaxEnergy, block)
        }
    }

    /// K-weights `frames` frames at `samples` into the step's energy and follows their peaks.
    private mutating func measure(_ samples: UnsafePointer<Float>, frames: Int) {
        let channels = self.channels
        let shelf = self.shelf, highPass = self.highPass
        var energy = 0.0
        var samplePeak = samplePeakValue
        var truePeak = truePeakValue
        let start = historyPosition
        // (Taken out while the channels are measured, so that the peak follower may use self;
        // a swap, not a copy.)
        var filters: [Double] = []
        swap(&filters, &filterState)
        defer { swap(&filters, &filterState) }
        filters.withUnsafeMutableBufferPointer { state in
            for channel in 0..<channels {
                var s1 = state[4 * channel], s2 = state[4 * channel + 1]
                var h1 = state[4 * channel + 2], h2 = state[4 * channel + 3]
                var sum = 0.0, highest = 0.0
                var p = samples + channel
                var left = frames
                // (while loops and concrete comparisons: a debug build's ranges and generic
                // `abs`/`max` would cost more than the filters.)
                while left > 0 {
                    left -= 1
                    let x = Double(p.pointee)
                    p += channels
                    // K-weighting: the shelf, then the high-pass (transposed direct form II).
                    let y = shelf.b0 * x + s1
                    s1 = shelf.b1 * x - shelf.a1 * y + s2
                    s2 = shelf.b2 * x - shelf.a2 * y
                    let z = highPass.b0 * y + h1
                    h1 = highPass.b1 * y - highPass.a1 * z + h2
                    h2 = highPass.b2 * y - highPass.a2 * z
                    sum += z * z
                    let magnitude = x.magnitude
                    if magnitude > highest { highest = magnitude }
                }
                state[4 * channel] = s1
                state[4 * channel + 1] = s2
                state[4 * channel + 2] = h1
                state[4 * channel + 3] = h2
                energy += channelWeights[channel] * sum
                if highest > samplePeak { samplePeak = highest }
                if oversampling > 1 { truePeak = interpolate(samples + channel, frames: frames, channel: channel, from: start, highest: highest, peak: truePeak) }
            }
        }
        if oversampling > 1 { historyPosition = (start + frames) % Self.taps }
        stepEnergy += energy
        samplePeakValue = samplePeak
        truePeakValue = truePeak
    }

    /// Follows one channel's true peak over `frames` samples (`samples` strided by the channel
    /// count) and keeps its last ``taps`` samples; returns the peak so far. A stretch whose
    /// samples (and the ones before it) cannot interpolate above `peak` — bounded by the
    /// interpolator's largest absolute gain — only updates the history.
    private mutating func interpolate(_ samples: UnsafePointer<Float>, frames: Int, channel: Int, from start: Int,
                                      highest: Double, peak: Double) -> Double {
        let taps = Self.taps, phases = oversampling, channels = self.channels
        let bound = interpolatorBound
        return history.withUnsafeMutableBufferPointer { history in
            interpolator.withUnsafeBufferPointer { coefficients in
                guard let historyBase = history.baseAddress, let c = coefficients.baseAddress else { return peak }
                let ring = historyBase + 2 * taps * channel
                var before = 0.0
                for k in 0..<taps where ring[k].magnitude > before { before = ring[k].magnitude }
                var peak = peak
                var position = start
                if (before > highest ? before : highest) * bound <= peak {
                    // Nothing here can exceed the peak: keep the last samples only.
                    let kept = min(frames, taps)
                    position = (start + frames - kept) % taps
                    var p = samples + (frames - kept) * channels
                    for _ in 0..<kept {
                        let x = Double(p.pointee)
                        p += channels
                        ring[position] = x
                        ring[position + taps] = x
                        position += 1
                        if position == taps { position = 0 }
                    }
                    return peak
                }
                var p = samples
                var left = frames
                while left > 0 {
                    left -= 1
                    let x = Double(p.pointee)
                    p += channels
                    // The newest sample at `position + taps`, the older ones before it.
                    ring[position] = x
                    ring[position + taps] = x
                    let newest = ring + position + taps
                    var phase = c
                    var phasesLeft = phases
                    while phasesLeft > 0 {
                        phasesLeft -= 1
                        var value = 0.0
                        var q = newest
                        var coefficient = phase
                        let end = phase + taps
                        while coefficient < end {
                            value += coefficient.pointee * q.pointee
                            coefficient += 1
                            q -= 1
                        }
                        if value.magnitude > peak { peak = value.magnitude }
                        phase = end
                    }
                    position += 1
                    if position == taps { position = 0 }
                }
                return peak
            }
        }
    }

    // MARK: levels

    /// Loudness in LUFS of a mean weighted energy (BS.1770-4 (2)).
    static func loudness(_ energy: Double) -> Double {
        energy > 0 ? -0.691 + 10 * log10(energy) : -.infinity
    }

    static func decibels(_ linear: Double) -> Double { linear > 0 ? 20 * log10(linear) : -.infinity }

    /// A windowed-sinc low-pass interpolating by `oversampling`, as `oversampling` phases of
    /// ``taps`` coefficients each summing to 1 (a phase passes DC unchanged).
    static func interpolator(oversampling: Int) -> [Double] {
        guard oversampling > 1 else { return [] }
        let length = taps * oversampling
        let centre = Double(length - 1) / 2
        var prototype = [Double](repeating: 0, count: length)
        for j in 0..<length {
            let t = (Double(j) - centre) / Double(oversampling)
            let sinc = t == 0 ? 1 : sin(Double.pi * t) / (Double.pi * t)
            let window = sin(Double.pi * Double(j + 1) / Double(length + 1))
            prototype[j] = sinc * window * window
        }
        var phases = [Double](repeating: 0, count: length)
        for phase in 0..<oversampling {
            var sum = 0.0
            for k in 0..<taps { sum += prototype[k * oversampling + phase] }
            for k in 0..<taps { phases[phase * taps + k] = prototype[k * oversampling + phase] / sum }
        }
        return phases
    }
}

/// One of K-weighting's two biquads (BS.1770-4 Annex 1), normalised (a0 = 1).
struct KFilter: Sendable {
    let b0, b1, b2, a1, a2: Double

    /// The high-frequency shelf (+4 dB above about 1.7 kHz, a head's acoustic effect), derived
    /// from its analogue prototype by the bilinear transform at `sampleRate`; at 48 kHz it is the
    /// standard's table.
    static func highShelf(sampleRate: Double) -> KFilter {
        let f0 = 1681.974450955533, gain = 3.999843853973347, q = 0.7071752369554196
        let k = tan(Double.pi * f0 / sampleRate)
        let vh = pow(10, gain / 20)
        let vb = pow(vh, 0.4996667741545416)
        let a0 = 1 + k / q + k * k
        return KFilter(b0: (vh + vb * k / q + k * k) / a0, b1: 2 * (k * k - vh) / a0, b2: (vh - vb * k / q + k * k) / a0,
                       a1: 2 * (k * k - 1) / a0, a2: (1 - k / q + k * k) / a0)
    }

    /// The RLB high-pass (about 38 Hz): b = 1, −2, 1 as in the standard's table.
    static func highPass(sampleRate: Double) -> KFilter {
        let f0 = 38.13547087602444, q = 0.5003270373238773
        let k = tan(Double.pi * f0 / sampleRate)
        let a0 = 1 + k / q + k * k
        return KFilter(b0: 1, b1: -2, b2: 1, a1: 2 * (k * k - 1) / a0, a2: (1 - k / q + k * k) / a0)
    }
}

/// Gating blocks by loudness in 0.01 LU bins from −70 LUFS (blocks at or below it are gated out)
/// to +20 LUFS (louder ones share the top bin); each bin keeps its blocks' count and exact energy,
/// so the gated means are exact but for the one bin the relative gate falls in.
struct LoudnessHistogram: Sendable {
    static let floor = -70.0
    static let binWidth = 0.01
    static let binCount = 9000
    private var counts = [Int](repeating: 0, count: binCount)
    private var energies = [Double](repeating: 0, count: binCount)
    private var total = 0
    private var totalEnergy = 0.0

    /// Adds another histogram's blocks.
    mutating func merge(_ other: LoudnessHistogram) {
        for bin in 0..<Self.binCount where other.counts[bin] > 0 {
            counts[bin] += other.counts[bin]
            energies[bin] += other.energies[bin]
        }
        total += other.total
        totalEnergy += other.totalEnergy
    }

    mutating func reset() {
        LoudnessMeter.zero(&counts)
        LoudnessMeter.zero(&energies)
        total = 0
        totalEnergy = 0
    }

    mutating func add(_ energy: Double) {
        let loudness = LoudnessMeter.loudness(energy)
        guard loudness > Self.floor else { return }
        let bin = min(Int((loudness - Self.floor) / Self.binWidth), Self.binCount - 1)
        counts[bin] += 1
        energies[bin] += energy
        total += 1
        totalEnergy += energy
    }

    /// The mean energy above which a block passes a gate `gate` LU below the mean of all.
    private func threshold(_ gate: Double) -> Double { totalEnergy / Double(total) * pow(10, gate / 10) }

    /// The loudness of the blocks above the relative gate (BS.1770-4's integrated loudness).
    func gatedLoudness(relativeGate gate: Double) -> Double {
        guard total > 0 else { return -.infinity }
        let threshold = self.threshold(gate)
        var count = 0, energy = 0.0
        for bin in 0..<Self.binCount where counts[bin] > 0 && energies[bin] / Double(counts[bin]) > threshold {
            count += counts[bin]
            energy += energies[bin]
        }
        return count > 0 ? LoudnessMeter.loudness(energy / Double(count)) : -.infinity
    }

    /// EBU Tech 3342's loudness range of short-term blocks: gated 20 LU below their mean, the 95th
    /// percentile less the 10th.
    func range() -> Double {
        guard total > 0 else { return 0 }
        let threshold = self.threshold(-20)
        var passing = 0
        var first = Self.binCount
        for bin in 0..<Self.binCount where counts[bin] > 0 && energies[bin] / Double(counts[bin]) > threshold {
            passing += counts[bin]
            first = min(first, bin)
        }
        guard passing > 1 else { return 0 }
        let low = value(rank: Int((Double(passing - 1) * 0.10).rounded()), from: first)
        let high = value(rank: Int((Double(passing - 1) * 0.95).rounded()), from: first)
        return high - low
    }

    /// The loudness of the block of rank `rank` (0 the quietest) among the bins from `first` on.
    private func value(rank: Int, from first: Int) -> Double {
        var seen = 0
        for bin in first..<Self.binCount where counts[bin] > 0 {
            seen += counts[bin]
            if seen > rank { return LoudnessMeter.loudness(energies[bin] / Double(counts[bin])) }
        }
        return -.infinity
    }
}
