#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// Mixes any number of inputs into one format (AVAudioEngine's `AVAudioMixerNode`, miniaudio's
/// splitter-and-mixer): each input is an ``AudioMixerInput`` bus with its own volume, pan and start
/// offset. An input of another rate or channel count is converted to the mixer's format by the
/// library's converter (rates need a registered resampler: `SoxrConverter`), with exact lengths.
///
/// The mix is the sum, in the order the inputs were connected, of each input's frames times its
/// gains, placed at its offset: its length is the longest input's offset plus its length. It ends
/// when every input has ended; an input that has nothing yet (a live source running dry) adds
/// silence for that render and goes on.
public final class AudioMixerNode: AudioNode {
    static let blockFrames = 1024
    /// The node as its graph sees it.
    public let graphNode: AudioGraphNode
    /// How long a change of an input's volume or pan glides, in seconds.
    public let rampSeconds: Double
    let rampFrames: Int
    /// Frames mixed so far: the mixer's timeline, which input starts and fades are placed on.
    private let clock: MixerClock

    /// The mixer's sample time: frames it has mixed so far (read from any thread; the render side
    /// advances it after each render).
    public var sampleTime: Int64 { clock.time.load(ordering: .acquiring) }

    /// - Parameters:
    ///   - name: how events and errors name the node.
    ///   - sampleRate: the rate it mixes at (inputs of other rates are converted to it).
    ///   - channels: the channels it mixes into (inputs of other counts are converted).
    ///   - rampSeconds: how long a volume or pan change glides (0: at once). Values set before an
    ///     input's first frame apply from it at once.
    public init(name: String = "mixer", sampleRate: Double, channels: Int, rampSeconds: Double = 0.01) throws {
        self.rampSeconds = max(rampSeconds.isFinite ? rampSeconds : 0, 0)
        rampFrames = Int((self.rampSeconds * sampleRate).rounded())
        let clock = MixerClock()
        self.clock = clock
        graphNode = try AudioGraphNode(name: name, sampleRate: sampleRate, channels: channels, kind: .mixer,
                                       renderer: MixerRenderer(channels: channels, clock: clock))
    }
}

/// A mixer's timeline, advanced by its render side and read by anyone.
final class MixerClock: Sendable {
    let time = Atomic<Int64>(0)
}

/// A mixer's render side: its scratch memory, and each input's render side claimed in turn.
final class MixerRenderer: AudioNodeRenderer {
    private let scratch: UnsafeMutablePointer<Float>
    private let clock: MixerClock

    init(channels: Int, clock: MixerClock) {
        scratch = .allocate(capacity: AudioMixerNode.blockFrames * max(channels, 1))
        self.clock = clock
    }

    deinit { scratch.deallocate() }

    func render(_ program: GraphProgram, node: AudioGraphNode, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
        let inputs = program.inputs(of: node)
        let ch = node.channels
        if inputs.count == 1, let bus = inputs.connections[0].bus, let passed = passThrough(program, bus: bus, into: out, frames: frames, channels: ch) {
            return passed
        }
        out.update(repeating: 0, count: frames * ch)
        var reach = 0          // how far the inputs that ended here reached
        var active = false     // an input goes on past this render
        let now = clock.time.load(ordering: .relaxed)
        defer { clock.time.store(now + Int64(reach), ordering: .releasing) }
        for index in 0..<inputs.count {
            guard let bus = inputs.connections[index].bus else { continue }
            // (how far the input reached in this render, whether it ended); nil: it had ended before.
            let result = bus.renderSide.withClaim { side -> (Int, Bool)? in
                guard !side.ended else { return nil }
                var position = side.framesBeforeStart(now: now, frames: frames, of: bus)
                while position < frames {
                    let want = min(frames - position, AudioMixerNode.blockFrames)
                    let (n, end) = side.pull(program, into: scratch, frames: want)
                    side.accumulate(scratch, frames: n, into: out + position * ch, channels: ch, at: now + Int64(position), of: bus)
                    position += n
                    if end == .boundary {
                        side.ended = true
                        break
                    }
                    if end == .starved { position = frames; break }
                }
                return (position, side.ended)
            }
            guard let reached = result ?? nil else { continue }
            if reached.1 { reach = max(reach, reached.0) } else { active = true }
        }
        if active {
            reach = frames
            return (frames, .filled)
        }
        return (reach, .boundary)
    }

    /// One input at unity gain, started, in the mixer's format, with no fade and no glide under
    /// way: its frames are the mix (0 + x × 1 is x), so they are pulled straight into `out`. Nil
    /// when the input is not such (the render mixes as usual).
    private func passThrough(_ program: GraphProgram, bus: AudioMixerInput, into out: UnsafeMutablePointer<Float>, frames: Int,
                             channels: Int) -> (Int, PullEnd)? {
        let now = clock.time.load(ordering: .relaxed)
        let result = bus.renderSide.withClaim { side -> (Int, PullEnd)? in
            guard !side.ended, side.passesThrough(bus, now: now, frames: frames, channels: channels) else { return nil }
            var (n, end) = side.pull(program, into: out, frames: frames)
            if end == .boundary { side.ended = true }
            if end == .starved {
                // A live source that ran dry: silence for the rest, as the mix gives it.
                (out + n * channels).update(repeating: 0, count: (frames - n) * channels)
                (n, end) = (frames, .filled)
            }
            return (n, end == .boundary ? .boundary : .filled)
        }
        guard let passed = result ?? nil else { return nil }
        clock.time.store(now + Int64(passed.0), ordering: .releasing)
        return passed
    }
}

/// One input of an ``AudioMixerNode``: its volume and pan (changed while playing, gliding over
/// the mixer's ``AudioMixerNode/rampSeconds``), where on the mixer's timeline it starts, and a
/// fade placed on that timeline (``fade(_:curve:at:frames:)``: what a crossfade is made of).
/// Sendable by construction: what the control side sets is atomic, and the render side is claimed
/// by the render that mixes it (`ClaimedState`).
public final class AudioMixerInput: Sendable {
    /// The node this bus pulls.
    public let source: any AudioNode
    /// The mixer sample time of the input's first frame (see ``AudioMixerNode/sampleTime``).
    public let startFrame: Int64
    private let volumeBits: Atomic<UInt32>
    private let panBits: Atomic<UInt32>
    /// The fade: a sequence lock over four words (start, length, curve, direction).
    let fadeSequence = Atomic<Int>(0)
    let fadeWords = AtomicWords(count: 4)
    private let fadeLock = Lock(())
    /// Frames the input started after its start frame (it was connected too late for it).
    let late = Atomic<Int64>(0)
    /// The input's render side.
    let renderSide: ClaimedState<MixerBusRenderer>


    init(source: any AudioNode, mixer: AudioMixerNode, volume: Float, pan: Float, startFrame: Int64,
         resamplers: AudioResamplerRegistry, quality: AudioConverterQuality) throws {
        guard volume.isFinite, volume >= 0 else {
            throw AudioQueueError(.invalidParameter, "\(source.name): a mixer input's volume must be 0 or more; got \(volume)")
        }
        guard pan.isFinite, (-1...1).contains(pan) else {
            throw AudioQueueError(.invalidParameter, "\(source.name): a mixer input's pan must be -1...1; got \(pan)")
        }
        guard startFrame >= 0 else {
            throw AudioQueueError(.invalidParameter, "\(source.name): a mixer input cannot start at frame \(startFrame)")
        }
        self.source = source
        self.startFrame = startFrame
        volumeBits = Atomic(volume.bitPattern)
        panBits = Atomic(pan.bitPattern)
        let converter: ConversionNode?
        if source.sampleRate != mixer.sampleRate || source.channels != mixer.channels {
            do {
                converter = try ConversionNode(from: (source.sampleRate, source.channels), to: (mixer.sampleRate, mixer.channels),
                                               quality: quality, registry: resamplers)
            } catch let error as AudioQueueError {
                throw AudioQueueError(error.code, "\(source.name) (\(source.channels) ch, \(source.sampleRate) Hz) cannot be converted to \(mixer.name)'s "
                    + "\(mixer.channels) ch at \(mixer.sampleRate) Hz: \(error.message)")
            }
        } else {
            converter = nil
        }
        renderSide = ClaimedState(MixerBusRenderer(source: source.graphNode, converter: converter, rampFrames: mixer.rampFrames))
    }

    /// The input's volume (0 silences it; 1 leaves it as it is).
    public var volume: Float {
        get { Float(bitPattern: volumeBits.load(ordering: .relaxed)) }
        set { if newValue.isFinite && newValue >= 0 { volumeBits.store(newValue.bitPattern, ordering: .relaxed) } }
    }

    /// The input's pan, -1 (left) ... 1 (right), the queue's balance law: the far side is
    /// attenuated, the near side kept. Mono mixers ignore it.
    public var pan: Float {
        get { Float(bitPattern: panBits.load(ordering: .relaxed)) }
        set { if newValue.isFinite { panBits.store(min(max(newValue, -1), 1).bitPattern, ordering: .relaxed) } }
    }

    /// Frames the input started after its ``startFrame`` because it was connected after that time
    /// had been mixed (0 when it started where asked).
    public var lateFrames: Int64 { late.load(ordering: .relaxed) }

    /// Places a fade on the mixer's timeline: for the i-th of the `frames` frames from mixer
    /// frame `startFrame`, the input is multiplied by the curve's value at i / `frames` — rising
    /// for ``AudioFadeDirection/in`` (0 before it, 1 after), falling for ``AudioFadeDirection/out``
    /// (1 before, 0 after). A crossfade is one input fading out and another fading in over the
    /// same frames. A new fade replaces the last; ``clearFade()`` removes it.
    public func fade(_ direction: AudioFadeDirection, curve: AudioFadeCurve, at startFrame: Int64, frames: Int) {
        fadeLock.withLock { _ in
            fadeSequence.add(1, ordering: .relaxed)
            atomicMemoryFence(ordering: .releasing)
            fadeWords[0] = UInt64(bitPattern: startFrame)
            fadeWords[1] = UInt64(max(frames, 0))
            fadeWords[2] = curve == .linear ? 0 : 1
            fadeWords[3] = direction == .in ? 1 : 2
            fadeSequence.add(1, ordering: .releasing)
        }
    }

    /// Removes the fade: the input plays at its volume.
    public func clearFade() {
        fadeLock.withLock { _ in
            fadeSequence.add(1, ordering: .relaxed)
            atomicMemoryFence(ordering: .releasing)
            fadeWords[3] = 0
            fadeSequence.add(1, ordering: .releasing)
        }
    }
}

/// A mixer input's render side: where it is, its fade and gains, and the converter to the
/// mixer's format. Touched only by the render that holds the input's claim.
final class MixerBusRenderer {
    /// The node it pulls.
    let source: AudioGraphNode
    var ended = false
    private var seen = false
    private var fadeSeen = 0
    private var envelope = Envelope()
    private let converter: ConversionNode?
    private let rampFrames: Int
    /// The program of the render under way (not retained: the graph keeps it alive while it renders).
    private var program: Unmanaged<GraphProgram>?
    private var pullThrough: PullSource = { _, _ in (0, .boundary) }
    private var started = false
    /// Left, right, and every channel past the first two (pan places only left and right).
    private var gainLeft: Float = 1, gainRight: Float = 1, gainOther: Float = 1
    private var goalLeft: Float = 1, goalRight: Float = 1, goalOther: Float = 1
    private var stepLeft: Float = 0, stepRight: Float = 0, stepOther: Float = 0
    private var rampLeft = 0
    private var volumeSeen: Float = 1, panSeen: Float = 0

    init(source: AudioGraphNode, converter: ConversionNode?, rampFrames: Int) {
        self.source = source
        self.converter = converter
        self.rampFrames = rampFrames
        pullThrough = { [unowned self] out, frames in
            guard let program = self.program?.takeUnretainedValue() else { return (0, .boundary) }
            return program.pull(self.source, into: out, frames: frames)
        }
    }

    /// Render side: on the input's first render, how many of this render's frames come before
    /// its start (all of them while its start is later than this render).
    func framesBeforeStart(now: Int64, frames: Int, of input: AudioMixerInput) -> Int {
        if seen { return 0 }
        let startFrame = input.startFrame
        if startFrame >= now + Int64(frames) { return frames }
        seen = true
        if startFrame < now { input.late.store(now - startFrame, ordering: .relaxed) }
        return Int(max(startFrame - now, 0))
    }

    /// Render side: picks up a fade published since the last render.
    private func readFade(_ input: AudioMixerInput) {
        let fadeWords = input.fadeWords
        let generation = input.fadeSequence.load(ordering: .acquiring)
        guard generation != fadeSeen, generation & 1 == 0 else { return }
        var next = Envelope(start: Int64(bitPattern: fadeWords[0]), length: Int(truncatingIfNeeded: fadeWords[1]),
                            equalPower: fadeWords[2] == 1, direction: Int(truncatingIfNeeded: fadeWords[3]))
        atomicMemoryFence(ordering: .acquiring)
        guard input.fadeSequence.load(ordering: .relaxed) == generation else { return }
        if next.length < 0 { next.length = 0 }
        envelope = next
        fadeSeen = generation
    }

    /// Render side: whether this render can take the source's frames as they are: no converter,
    /// started before this render, unity gains with no glide, no fade (volume and pan changes are
    /// picked up here first).
    func passesThrough(_ input: AudioMixerInput, now: Int64, frames: Int, channels: Int) -> Bool {
        guard converter == nil, seen || input.startFrame <= now else { return false }
        updateGains(channels: channels, volume: input.volume, pan: input.pan)
        readFade(input)
        guard envelope.direction == 0, rampLeft == 0, gainLeft == 1, gainRight == 1, gainOther == 1 else { return false }
        if !seen { _ = framesBeforeStart(now: now, frames: frames, of: input) }
        return true
    }

    /// Render side: pulls the source (through the converter when formats differ).
    func pull(_ program: GraphProgram, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
        guard let converter else { return program.pull(source, into: out, frames: frames) }
        self.program = Unmanaged.passUnretained(program)
        defer { self.program = nil }
        return converter.render(into: out, frames: frames, from: pullThrough)
    }

    /// Render side: adds `frames` frames times the gains into `out`; the first is mixer frame `time`.
    func accumulate(_ input: UnsafePointer<Float>, frames: Int, into out: UnsafeMutablePointer<Float>, channels: Int, at time: Int64,
                    of bus: AudioMixerInput) {
        updateGains(channels: channels, volume: bus.volume, pan: bus.pan)
        readFade(bus)
        if envelope.direction != 0 && envelope.touches(time, frames: frames) {
            accumulateFading(input, frames: frames, into: out, channels: channels, at: time)
            return
        }
        if envelope.direction != 0 && envelope.value(at: time) == 0 {
            // Faded out (or not yet in): silent, but the volume ramp moves on.
            rampLeft = max(rampLeft - frames, 0)
            if rampLeft == 0 { gainLeft = goalLeft; gainRight = goalRight; gainOther = goalOther }
            return
        }
        var f = 0
        while rampLeft > 0 && f < frames {
            rampLeft -= 1
            gainLeft = rampLeft == 0 ? goalLeft : gainLeft + stepLeft
            gainRight = rampLeft == 0 ? goalRight : gainRight + stepRight
            gainOther = rampLeft == 0 ? goalOther : gainOther + stepOther
            add(input + f * channels, into: out + f * channels, channels: channels)
            f += 1
        }
        if f < frames {
            let left = gainLeft, right = gainRight
            if channels == 2 {
                for i in f..<frames {
                    out[2 * i] += input[2 * i] * left
                    out[2 * i + 1] += input[2 * i + 1] * right
                }
            } else if channels == 1 || (left == right && right == gainOther) {
                for i in (f * channels)..<(frames * channels) { out[i] += input[i] * left }
            } else {
                for i in f..<frames { add(input + i * channels, into: out + i * channels, channels: channels) }
            }
        }
    }

    /// Frame by frame under a fade: each frame's gains times the envelope there.
    private func accumulateFading(_ input: UnsafePointer<Float>, frames: Int, into out: UnsafeMutablePointer<Float>, channels: Int, at time: Int64) {
        for f in 0..<frames {
            if rampLeft > 0 {
                rampLeft -= 1
                gainLeft = rampLeft == 0 ? goalLeft : gainLeft + stepLeft
                gainRight = rampLeft == 0 ? goalRight : gainRight + stepRight
                gainOther = rampLeft == 0 ? goalOther : gainOther + stepOther
            }
            let e = envelope.value(at: time + Int64(f))
            let frame = input + f * channels, o = out + f * channels
            o[0] += frame[0] * (gainLeft * e)
            if channels > 1 { o[1] += frame[1] * (gainRight * e) }
            if channels > 2 { for c in 2..<channels { o[c] += frame[c] * (gainOther * e) } }
        }
    }

    @inline(__always)
    private func add(_ input: UnsafePointer<Float>, into out: UnsafeMutablePointer<Float>, channels: Int) {
        out[0] += input[0] * gainLeft
        if channels > 1 { out[1] += input[1] * gainRight }
        if channels > 2 { for c in 2..<channels { out[c] += input[c] * gainOther } }
    }

    /// Picks up a volume or pan set since the last render: at once before the first frame, else a glide.
    private func updateGains(channels: Int, volume: Float, pan: Float) {
        guard !started || volume != volumeSeen || pan != panSeen else { return }
        volumeSeen = volume
        panSeen = pan
        let left = channels >= 2 ? volume * RenderStage.panGain(pan, channel: 0) : volume
        let right = channels >= 2 ? volume * RenderStage.panGain(pan, channel: 1) : volume
        goalLeft = left
        goalRight = right
        goalOther = volume
        if !started || rampFrames == 0 {
            started = true
            gainLeft = left
            gainRight = right
            gainOther = volume
            rampLeft = 0
        } else {
            stepLeft = (left - gainLeft) / Float(rampFrames)
            stepRight = (right - gainRight) / Float(rampFrames)
            stepOther = (volume - gainOther) / Float(rampFrames)
            rampLeft = rampFrames
        }
    }
}

/// Which way a fade goes.
public enum AudioFadeDirection: Sendable, Hashable {
    /// From silence to full: 0 before the fade, the curve rising over it, 1 after.
    case `in`
    /// From full to silence: 1 before, the curve falling over it, 0 after.
    case out
}

/// The shape of a fade over D frames, at the i-th frame (0 ≤ i < D).
public enum AudioFadeCurve: String, Sendable, Hashable, CaseIterable {
    /// In: i / D; out: 1 − i / D. The two sum to 1.
    case linear
    /// In: sin(π/2 · i / D); out: cos(π/2 · i / D). Their squares sum to 1 (constant power for
    /// uncorrelated material).
    case equalPower = "equal-power"

    /// The gain at the i-th of `length` frames, computed in double precision.
    public func gain(_ direction: AudioFadeDirection, frame i: Int, of length: Int) -> Float {
        // Before the fade, where it was; from its end on, where it goes (a fade of 0 frames is a step).
        if i < 0 { return direction == .in ? 0 : 1 }
        if i >= length { return direction == .in ? 1 : 0 }
        let x = Double(i) / Double(length)
        switch (self, direction) {
        case (.linear, .in): return Float(x)
        case (.linear, .out): return Float(1 - x)
        case (.equalPower, .in): return Float(sin(Double.pi / 2 * x))
        case (.equalPower, .out): return Float(cos(Double.pi / 2 * x))
        }
    }

    /// Both gains of every frame of a fade of `length` frames, interleaved (out, in): exactly
    /// ``gain(_:frame:of:)``'s numbers. The equal-power sines and cosines come from a rotation
    /// re-anchored on the library's own every 64 frames; a value whose float is not certain from
    /// it (the rotation's error bound straddles a rounding boundary) is computed directly. A
    /// crossfade of seconds needs hundreds of thousands of them: about a tenth of the cost.
    package func gainTable(_ length: Int) -> [Float] {
        guard length > 0 else { return [] }
        guard self == .equalPower else {
            return [Float](unsafeUninitializedCapacity: 2 * length) { table, count in
                for i in 0..<length {
                    table[2 * i] = gain(.out, frame: i, of: length)
                    table[2 * i + 1] = gain(.in, frame: i, of: length)
                }
                count = 2 * length
            }
        }
        let step = Double.pi / 2 / Double(length)
        let (stepCos, stepSin) = (cos(step), sin(step))
        // 64 rotations add at most about 64 · 4 ulp to values of magnitude ≤ 1; the angles the
        // direct formula takes differ from the rotation's by a few ulp more. 1e-13 is far above both.
        let bound = 1e-13
        return [Float](unsafeUninitializedCapacity: 2 * length) { table, count in
            var c = 1.0, s = 0.0
            for i in 0..<length {
                if i & 63 == 0 {
                    let x = Double.pi / 2 * (Double(i) / Double(length))
                    (c, s) = (cos(x), sin(x))
                    table[2 * i] = Float(c)
                    table[2 * i + 1] = Float(s)
                } else {
                    (c, s) = (c * stepCos - s * stepSin, s * stepCos + c * stepSin)
                    let (outLow, outHigh) = (Float(c - bound), Float(c + bound))
                    table[2 * i] = outLow == outHigh ? outLow : gain(.out, frame: i, of: length)
                    let (inLow, inHigh) = (Float(s - bound), Float(s + bound))
                    table[2 * i + 1] = inLow == inHigh ? inLow : gain(.in, frame: i, of: length)
                }
            }
            count = 2 * length
        }
    }
}

/// A fade as the render side holds it (direction 0: none, 1: in, 2: out).
struct Envelope {
    var start: Int64 = 0
    var length = 0
    var equalPower = false
    var direction = 0

    /// Whether frames `time ..< time + frames` meet the fade itself.
    @inline(__always)
    func touches(_ time: Int64, frames: Int) -> Bool {
        time < start + Int64(length) && time + Int64(frames) > start
    }

    @inline(__always)
    func value(at time: Int64) -> Float {
        guard direction != 0 else { return 1 }
        let curve: AudioFadeCurve = equalPower ? .equalPower : .linear
        return curve.gain(direction == 1 ? .in : .out, frame: Int(clamping: time - start), of: length)
    }
}
