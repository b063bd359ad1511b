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
// @unchecked: as AudioNode's (its scratch memory is used only by the render side).
public final class AudioMixerNode: AudioNode, @unchecked Sendable {
    static let blockFrames = 1024
    /// How long a change of an input's volume or pan glides, in seconds.
    public let rampSeconds: Double
    let rampFrames: Int
    private let scratch: UnsafeMutablePointer<Float>

    /// - Parameters:
    ///   - rampSeconds: how long a volume or pan change glides (0: at once). Values set before an
    ///     input's first frame apply from it at once.
    public init(name: String = "mixer", sampleRate: Double, channels: Int, rampSeconds: Double = 0.01) throws {
        self.rampSeconds = max(rampSeconds.isFinite ? rampSeconds : 0, 0)
        rampFrames = Int((self.rampSeconds * sampleRate).rounded())
        scratch = .allocate(capacity: Self.blockFrames * max(channels, 1))
        try super.init(name: name, sampleRate: sampleRate, channels: channels)
    }

    deinit { scratch.deallocate() }

    override var inputLimit: Int { .max }

    override func render(_ program: GraphProgram, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
        let inputs = program.inputs(of: self)
        let ch = channels
        out.update(repeating: 0, count: frames * ch)
        var reach = 0          // how far the inputs that ended here reached
        var active = false     // an input goes on past this render
        for index in 0..<inputs.count {
            guard let bus = inputs.connections[index].bus, !bus.ended else { continue }
            var position = 0
            if bus.offsetLeft > 0 {
                position = min(bus.offsetLeft, frames)
                bus.offsetLeft -= position
            }
            while position < frames {
                let want = min(frames - position, Self.blockFrames)
                let (n, end) = bus.pull(program, into: scratch, frames: want)
                bus.accumulate(scratch, frames: n, into: out + position * ch, channels: ch)
                position += n
                if end == .boundary {
                    bus.ended = true
                    break
                }
                if end == .starved { position = frames; break }
            }
            if bus.ended { reach = max(reach, position) } else { active = true }
        }
        if active { return (frames, .filled) }
        return (reach, .boundary)
    }
}

/// One input of an ``AudioMixerNode``: its volume and pan (changed while playing, gliding over
/// the mixer's ``AudioMixerNode/rampSeconds``) and its start offset.
// @unchecked: the render-side fields below are touched only under the graph's render claim; volume and pan are atomic.
public final class AudioMixerInput: @unchecked Sendable {
    /// The node this bus pulls.
    public let source: AudioNode
    /// Mixer frames of silence before the input's first frame.
    public let offsetFrames: Int
    private let volumeBits: Atomic<UInt32>
    private let panBits: Atomic<UInt32>

    // MARK: render side
    var ended = false
    var offsetLeft: Int
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

    init(source: AudioNode, mixer: AudioMixerNode, volume: Float, pan: Float, offsetFrames: Int,
         resamplers: AudioResamplerRegistry, quality: AudioConverterQuality) throws {
        guard volume.isFinite, volume >= 0 else {
            throw AudioQueueError(.invalidParameter, "\(source.name): a mixer input's volume must be 0 or more; got \(volume)")
        }
        guard pan.isFinite, (-1...1).contains(pan) else {
            throw AudioQueueError(.invalidParameter, "\(source.name): a mixer input's pan must be -1...1; got \(pan)")
        }
        guard offsetFrames >= 0 else {
            throw AudioQueueError(.invalidParameter, "\(source.name): a mixer input cannot start at frame \(offsetFrames)")
        }
        self.source = source
        self.offsetFrames = offsetFrames
        offsetLeft = offsetFrames
        volumeBits = Atomic(volume.bitPattern)
        panBits = Atomic(pan.bitPattern)
        rampFrames = mixer.rampFrames
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
        pullThrough = { [unowned self] out, frames in
            guard let program = self.program?.takeUnretainedValue() else { return (0, .boundary) }
            return program.pull(self.source, into: out, frames: frames)
        }
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

    /// Render side: pulls the source (through the converter when formats differ).
    func pull(_ program: GraphProgram, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
        guard let converter else { return program.pull(source, into: out, frames: frames) }
        self.program = Unmanaged.passUnretained(program)
        defer { self.program = nil }
        return converter.render(into: out, frames: frames, from: pullThrough)
    }

    /// Render side: adds `frames` frames times the gains into `out`.
    func accumulate(_ input: UnsafePointer<Float>, frames: Int, into out: UnsafeMutablePointer<Float>, channels: Int) {
        updateGains(channels: channels)
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

    @inline(__always)
    private func add(_ input: UnsafePointer<Float>, into out: UnsafeMutablePointer<Float>, channels: Int) {
        out[0] += input[0] * gainLeft
        if channels > 1 { out[1] += input[1] * gainRight }
        if channels > 2 { for c in 2..<channels { out[c] += input[c] * gainOther } }
    }

    /// Picks up a volume or pan set since the last render: at once before the first frame, else a glide.
    private func updateGains(channels: Int) {
        let volume = self.volume, pan = self.pan
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
