import Synchronization

/// A parametric equaliser: any number of cookbook biquad bands (``AudioEQBand``) in series,
/// processing interleaved float32 in place, in double precision.
///
/// Parameters change while it plays: the control side publishes a band's new values, and the
/// render side glides from the old filter to the new one over ``rampSeconds`` — both filters run
/// from the same history and their outputs are crossfaded — so a change never clicks. A change
/// that comes during a glide is taken when it ends.
///
/// Use it as a graph node (``AudioEQNode``), on a queue as a processing tap
/// (``processingTapCallback``), or on frames of your own (``process(_:frames:channels:sampleRate:)``).
/// The render side allocates nothing, locks nothing and makes no system call; it computes the
/// coefficients itself when the bands or the sample rate change.
/// Sendable by construction: parameters cross through atomics, and the filter state is claimed by
/// the one renderer processing (`ClaimedState`).
public final class AudioEqualizer: Sendable {
    /// The most channels one equaliser filters (more are passed through).
    public static let maximumChannels = 64

    /// How many bands it has (fixed at creation, as AVAudioUnitEQ's `numberOfBands`).
    public let bandCount: Int
    /// How long a parameter change glides, in seconds.
    public let rampSeconds: Double

    // MARK: control side
    private let bandsNow: Lock<[AudioEQBand]>
    /// Odd while a write is under way; each write adds 2.
    let sequence = Atomic<Int>(0)
    /// Per band, six words: type, frequency, gain and Q bits, bypass, and how often the band was set.
    let published: AtomicWords
    static let words = 6
    /// The filters: claimed by the one renderer processing.
    private let renderSide: ClaimedState<EQRenderState>

    /// - Parameters:
    ///   - bands: the bands, in the order the signal passes them (validated at the first render's
    ///     rate by ``process(_:frames:channels:sampleRate:)``; use ``validate(sampleRate:)`` to check ahead).
    ///   - rampSeconds: how long a parameter change glides (0 switches at once).
    public init(bands: [AudioEQBand], rampSeconds: Double = 0.01) {
        bandCount = bands.count
        self.rampSeconds = max(rampSeconds.isFinite ? rampSeconds : 0, 0)
        bandsNow = Lock(bands)
        published = AtomicWords(count: bands.count * Self.words)
        for (index, band) in bands.enumerated() { Self.store(band, sets: 1, into: published, at: index) }
        renderSide = ClaimedState(EQRenderState(bandCount: bands.count, rampSeconds: self.rampSeconds))
    }

    /// The bands as last set.
    public var bands: [AudioEQBand] { bandsNow.withLock { $0 } }

    /// Checks every band at `sampleRate` (see ``AudioEQBand/validate(sampleRate:)``).
    public func validate(sampleRate: Double) throws {
        for (index, band) in bands.enumerated() {
            do { try band.validate(sampleRate: sampleRate) } catch let error as AudioQueueError {
                throw AudioQueueError(error.code, "band \(index): \(error.message)")
            }
        }
    }

    /// Changes band `index` while playing; the change glides in over ``rampSeconds``.
    /// - Throws: ``AudioQueueError/Code/invalidParameter`` for an index out of range or a band
    ///   that is invalid at `sampleRate` (when given).
    public func setBand(_ index: Int, to band: AudioEQBand, sampleRate: Double? = nil) throws {
        guard (0..<bandCount).contains(index) else {
            throw AudioQueueError(.invalidParameter, "the equaliser has \(bandCount) bands; there is no band \(index)")
        }
        if let sampleRate { try band.validate(sampleRate: sampleRate) }
        bandsNow.withLock { bands in
            bands[index] = band
            sequence.add(1, ordering: .relaxed)
            atomicMemoryFence(ordering: .releasing)
            Self.store(band, sets: published[index * Self.words + 5] + 1, into: published, at: index)
            sequence.add(1, ordering: .releasing)
        }
    }

    private static func store(_ band: AudioEQBand, sets: UInt64, into words: AtomicWords, at index: Int) {
        let base = index * Self.words
        words[base] = band.type.code
        words[base + 1] = band.frequency.bitPattern
        words[base + 2] = band.gain.bitPattern
        words[base + 3] = band.q.bitPattern
        words[base + 4] = band.bypass ? 1 : 0
        words[base + 5] = sets
    }

    /// Forgets the filters' history (a new stream starts from silence). Render side only: call it
    /// where you call ``process(_:frames:channels:sampleRate:)`` (while another thread processes, it does nothing).
    public func reset() {
        _ = renderSide.withClaim { $0.reset() }
    }

    /// Filters `frames` interleaved frames of `channels` channels in place. Real-time safe.
    ///
    /// A band that is invalid at `sampleRate` (at or above Nyquist, Q ≤ 0) passes audio unchanged;
    /// validate ahead to get the error. A second caller while one is processing gets its audio
    /// back unchanged (one renderer at a time).
    public func process(_ samples: UnsafeMutablePointer<Float>, frames: Int, channels: Int, sampleRate: Double) {
        guard bandCount > 0, frames > 0, channels > 0 else { return }
        _ = renderSide.withClaim { $0.process(samples, frames: frames, channels: channels, sampleRate: sampleRate, from: self) }
    }

    /// A processing-tap callback that filters what passes the tap: install it with
    /// ``AudioQueue/installProcessingTap(_:callback:)`` (`.preEffects` or `.postEffects`), or pass
    /// it as an ``AudioQueueProcessingTapCallback`` wherever one is taken. The tap's processing
    /// format gives the rate and channels.
    public var processingTapCallback: AudioQueueProcessingTapCallback {
        { [self] tap, frames, output, flags in
            if flags.contains(.startOfStream) { reset() }
            let got = tap.getSourceAudio(frames: frames, into: output)
            process(output, frames: got.frames, channels: tap.processingFormat.channelsPerFrame, sampleRate: tap.processingFormat.sampleRate)
            return got.frames
        }
    }
}

/// An equaliser's render side: the filters in use, their histories, and the glides under way.
final class EQRenderState {
    private let bandCount: Int
    private let rampSeconds: Double
    private var generationSeen = -1
    private var rateSeen = 0.0
    /// Per band: the coefficients in use, those glided to, and the band's sets applied.
    private let current: UnsafeMutablePointer<BiquadCoefficients>
    private let target: UnsafeMutablePointer<BiquadCoefficients>
    private let pendingCoefficients: UnsafeMutablePointer<BiquadCoefficients>
    private let setsApplied: UnsafeMutablePointer<Int>
    /// Per band, during a read: the sets just read (-1: unchanged).
    private let pendingSets: UnsafeMutablePointer<Int>
    private let rampLeft: UnsafeMutablePointer<Int>
    private var rampLength = 1
    /// Per band and channel: the history of the filter in use, and of the one glided to.
    private let states: UnsafeMutablePointer<BiquadState>
    private let gliding: UnsafeMutablePointer<BiquadState>

    init(bandCount: Int, rampSeconds: Double) {
        self.bandCount = bandCount
        self.rampSeconds = rampSeconds
        let count = max(bandCount, 1)
        current = .allocate(capacity: count)
        current.initialize(repeating: .identity, count: count)
        target = .allocate(capacity: count)
        target.initialize(repeating: .identity, count: count)
        pendingCoefficients = .allocate(capacity: count)
        pendingCoefficients.initialize(repeating: .identity, count: count)
        setsApplied = .allocate(capacity: count)
        setsApplied.initialize(repeating: 0, count: count)
        pendingSets = .allocate(capacity: count)
        pendingSets.initialize(repeating: -1, count: count)
        rampLeft = .allocate(capacity: count)
        rampLeft.initialize(repeating: 0, count: count)
        states = .allocate(capacity: count * AudioEqualizer.maximumChannels)
        states.initialize(repeating: BiquadState(), count: count * AudioEqualizer.maximumChannels)
        gliding = .allocate(capacity: count * AudioEqualizer.maximumChannels)
        gliding.initialize(repeating: BiquadState(), count: count * AudioEqualizer.maximumChannels)
    }


    deinit {
        current.deallocate(); target.deallocate(); pendingCoefficients.deallocate()
        setsApplied.deallocate(); pendingSets.deallocate(); rampLeft.deallocate(); states.deallocate(); gliding.deallocate()
    }


    func reset() {
        let count = bandCount * AudioEqualizer.maximumChannels
        states.update(repeating: BiquadState(), count: count)
        gliding.update(repeating: BiquadState(), count: count)
    }

    func process(_ samples: UnsafeMutablePointer<Float>, frames: Int, channels: Int, sampleRate: Double, from equalizer: AudioEqualizer) {
        readParameters(sampleRate: sampleRate, from: equalizer)
        let filtered = min(channels, AudioEqualizer.maximumChannels)
        for band in 0..<bandCount {
            var frame = 0
            while frame < frames {
                if rampLeft[band] > 0 {
                    let n = min(rampLeft[band], frames - frame)
                    glide(band, samples + frame * channels, frames: n, channels: channels, filtered: filtered)
                    frame += n
                } else {
                    steady(band, samples + frame * channels, frames: frames - frame, channels: channels, filtered: filtered)
                    frame = frames
                }
            }
        }
    }

    private func steady(_ band: Int, _ samples: UnsafeMutablePointer<Float>, frames: Int, channels: Int, filtered: Int) {
        let c = current[band]
        if c == .identity { return }
        for channel in 0..<filtered {
            var state = states[band * AudioEqualizer.maximumChannels + channel]
            var p = samples + channel
            for _ in 0..<frames {
                p.pointee = Float(state.step(Double(p.pointee), c))
                p += channels
            }
            states[band * AudioEqualizer.maximumChannels + channel] = state
        }
    }

    /// Runs the old and the new filter side by side and crossfades from one to the other.
    private func glide(_ band: Int, _ samples: UnsafeMutablePointer<Float>, frames: Int, channels: Int, filtered: Int) {
        let old = current[band], new = target[band]
        let left = rampLeft[band]
        let length = Double(rampLength)
        for channel in 0..<filtered {
            var a = states[band * AudioEqualizer.maximumChannels + channel]
            var b = gliding[band * AudioEqualizer.maximumChannels + channel]
            var p = samples + channel
            for i in 0..<frames {
                let x = Double(p.pointee)
                let t = (length - Double(left - i) + 1) / length
                p.pointee = Float((1 - t) * a.step(x, old) + t * b.step(x, new))
                p += channels
            }
            states[band * AudioEqualizer.maximumChannels + channel] = a
            gliding[band * AudioEqualizer.maximumChannels + channel] = b
        }
        rampLeft[band] = left - frames
        if rampLeft[band] == 0 {
            current[band] = new
            for channel in 0..<filtered { states[band * AudioEqualizer.maximumChannels + channel] = gliding[band * AudioEqualizer.maximumChannels + channel] }
        }
    }

    /// Takes the published bands when they changed (or the rate did), computing their coefficients.
    /// A read that met a write under way is dropped and made again at the next call.
    private func readParameters(sampleRate: Double, from equalizer: AudioEqualizer) {
        let published = equalizer.published
        let generation = equalizer.sequence.load(ordering: .acquiring)
        let rateChanged = sampleRate != rateSeen
        guard generation & 1 == 0, rateChanged || generation != generationSeen else { return }
        for band in 0..<bandCount {
            let base = band * AudioEqualizer.words
            let sets = Int(truncatingIfNeeded: published[base + 5])
            guard rateChanged || sets != setsApplied[band] else { pendingSets[band] = -1; continue }
            let value = AudioEQBand(AudioEQFilterType(code: published[base]),
                                    frequency: Double(bitPattern: published[base + 1]),
                                    gain: Double(bitPattern: published[base + 2]),
                                    q: Double(bitPattern: published[base + 3]),
                                    bypass: published[base + 4] != 0)
            pendingCoefficients[band] = value.isValid(sampleRate: sampleRate) ? value.coefficients(sampleRate: sampleRate) : .identity
            pendingSets[band] = sets
        }
        atomicMemoryFence(ordering: .acquiring)
        guard equalizer.sequence.load(ordering: .relaxed) == generation else { return }
        // A new rate switches at once (the old coefficients mean nothing there); a change glides.
        let glides = rateSeen != 0 && !rateChanged
        rateSeen = sampleRate
        rampLength = max(Int((rampSeconds * sampleRate).rounded()), 1)
        for band in 0..<bandCount where pendingSets[band] >= 0 {
            setsApplied[band] = pendingSets[band]
            apply(band, pendingCoefficients[band], glide: glides)
        }
        generationSeen = generation
    }

    private func apply(_ band: Int, _ coefficients: BiquadCoefficients, glide: Bool) {
        if !glide || rampSeconds == 0 || rampLeft[band] > 0 {
            if rampLeft[band] > 0 {
                // A glide is under way: finish it at once and glide on to the newest values.
                current[band] = target[band]
                for channel in 0..<AudioEqualizer.maximumChannels {
                    states[band * AudioEqualizer.maximumChannels + channel] = gliding[band * AudioEqualizer.maximumChannels + channel]
                }
                rampLeft[band] = 0
                if glide && rampSeconds > 0 { startGlide(band, to: coefficients); return }
            }
            current[band] = coefficients
            return
        }
        startGlide(band, to: coefficients)
    }

    private func startGlide(_ band: Int, to coefficients: BiquadCoefficients) {
        guard coefficients != current[band] else { return }
        target[band] = coefficients
        for channel in 0..<AudioEqualizer.maximumChannels {
            gliding[band * AudioEqualizer.maximumChannels + channel] = states[band * AudioEqualizer.maximumChannels + channel]
        }
        rampLeft[band] = rampLength
    }
}

/// An equaliser in a graph (AVAudioEngine's `AVAudioUnitEQ`): one input of its own format, the
/// bands of an ``AudioEqualizer`` applied in place. Change bands while playing with
/// ``setBand(_:to:)``; the change glides in.
public final class AudioEQNode: AudioEffectNode {
    /// The node as its graph sees it.
    public let graphNode: AudioGraphNode
    /// The equaliser doing the work.
    public let equalizer: AudioEqualizer

    /// - Throws: ``AudioQueueError/Code/invalidParameter`` naming the band that cannot be at
    ///   `sampleRate` (a frequency at or above Nyquist, a Q at or below 0).
    public init(name: String = "eq", bands: [AudioEQBand], sampleRate: Double, channels: Int, rampSeconds: Double = 0.01) throws {
        let equalizer = AudioEqualizer(bands: bands, rampSeconds: rampSeconds)
        self.equalizer = equalizer
        graphNode = try AudioGraphNode(name: name, sampleRate: sampleRate, channels: channels, kind: .effect,
                                       renderer: EffectRenderer { samples, frames in
                                           equalizer.process(samples, frames: frames, channels: channels, sampleRate: sampleRate)
                                       })
        do { try equalizer.validate(sampleRate: sampleRate) } catch let error as AudioQueueError {
            throw AudioQueueError(error.code, "\(name): \(error.message)")
        }
    }

    /// The bands as last set.
    public var bands: [AudioEQBand] { equalizer.bands }

    /// Changes band `index` while playing (validated at the node's rate).
    public func setBand(_ index: Int, to band: AudioEQBand) throws {
        try equalizer.setBand(index, to: band, sampleRate: sampleRate)
    }
}
