import Synchronization

/// A graph effect that plays its input faster or slower: the queue's time-pitch stage as a node
/// (AVAudioEngine's `AVAudioUnitTimePitch` and `AVAudioUnitVarispeed`).
///
/// The algorithm is the queue's (``TimePitchAlgorithm``): ``TimePitchAlgorithm/timeDomain`` keeps the
/// pitch, ``TimePitchAlgorithm/varispeed`` lets it follow the rate (like a tape), and
/// ``TimePitchAlgorithm/spectral`` keeps it or shifts it by ``pitch`` cents (needs an engine:
/// register `RubberBandTimePitch`). The rate and pitch change while the graph plays, from the
/// next render on; at 1 (and no pitch shift) the input passes through untouched. The node pulls
/// as much input as the rate needs: an input that ends, ends the node once its last frame is out.
public final class AudioTimePitchNode: AudioEffectNode {
    /// The node as its graph sees it.
    public let graphNode: AudioGraphNode
    /// How the rate is applied.
    public let algorithm: TimePitchAlgorithm
    private let control: TimePitchControl

    /// - Parameters:
    ///   - name: how events and errors name the node.
    ///   - algorithm: how the rate is applied.
    ///   - rate: playback speed, 0.25...4.
    ///   - pitch: pitch shift in cents, -2400...2400 (``TimePitchAlgorithm/spectral`` only).
    ///   - sampleRate: the format's rate (its input's).
    ///   - channels: the format's channels (its input's).
    ///   - engines: where the spectral algorithm finds its engine.
    /// - Throws: a rate or pitch out of range, a pitch with another algorithm, or the spectral
    ///   algorithm with no engine registered.
    public init(name: String = "time-pitch", algorithm: TimePitchAlgorithm = .timeDomain, rate: Double = 1, pitch: Double = 0,
                sampleRate: Double, channels: Int, engines: TimePitchEngineRegistry = .shared) throws {
        try Self.check(rate: rate, name: name)
        try Self.check(pitch: pitch, algorithm: algorithm, name: name)
        self.algorithm = algorithm
        let control = TimePitchControl(rate: rate, pitch: pitch)
        self.control = control
        let stage: any PlayRateNode
        switch algorithm {
        case .timeDomain: stage = TimeStretchNode(channels: channels, sampleRate: sampleRate)
        case .varispeed: stage = VarispeedNode(channels: channels)
        case .spectral: stage = SpectralNode(engine: try engines.makeEngine(sampleRate: sampleRate, channels: channels), channels: channels)
        }
        graphNode = try AudioGraphNode(name: name, sampleRate: sampleRate, channels: channels, kind: .effect,
                                       renderer: TimePitchRenderer(stage: stage, control: control))
    }

    /// Playback speed, 0.25...4.
    public var rate: Double { control.rate }

    /// Pitch shift in cents.
    public var pitch: Double { control.pitch }

    /// Changes the speed from the next render on.
    /// - Throws: a rate outside 0.25...4.
    public func setRate(_ rate: Double) throws {
        try Self.check(rate: rate, name: name)
        control.set(rate: rate, pitch: control.pitch)
    }

    /// Changes the pitch shift from the next render on.
    /// - Throws: a shift outside -2400...2400 cents, or any shift but 0 with an algorithm other
    ///   than ``TimePitchAlgorithm/spectral``.
    public func setPitch(_ cents: Double) throws {
        try Self.check(pitch: cents, algorithm: algorithm, name: name)
        control.set(rate: control.rate, pitch: cents)
    }

    /// Passes the input through untouched whatever the rate (and back when false).
    public var bypass: Bool {
        get { control.bypass.load(ordering: .relaxed) }
        set { control.bypass.store(newValue, ordering: .relaxed) }
    }

    private static func check(rate: Double, name: String) throws {
        guard (0.25...4).contains(rate) else { throw AudioQueueError(.invalidParameter, "\(name): rate \(rate) is outside 0.25...4") }
    }

    private static func check(pitch: Double, algorithm: TimePitchAlgorithm, name: String) throws {
        guard (-2400...2400).contains(pitch) else {
            throw AudioQueueError(.invalidParameter, "\(name): pitch \(pitch) cents is outside -2400...2400")
        }
        guard pitch == 0 || algorithm == .spectral else {
            throw AudioQueueError(.invalidParameter, "\(name): only the spectral algorithm shifts the pitch")
        }
    }
}

/// The rate and pitch as the control side sets them: a generation counter around the pair, so
/// the render side reads them whole (a sequence lock) or keeps the last pair it read.
final class TimePitchControl: Sendable {
    private let sequence = Atomic<Int>(0)
    private let rateBits: Atomic<UInt64>
    private let pitchBits: Atomic<UInt64>
    let bypass = Atomic<Bool>(false)
    private let writer = Lock<Void>(())

    init(rate: Double, pitch: Double) {
        rateBits = Atomic(rate.bitPattern)
        pitchBits = Atomic(pitch.bitPattern)
    }

    var rate: Double { Double(bitPattern: rateBits.load(ordering: .relaxed)) }
    var pitch: Double { Double(bitPattern: pitchBits.load(ordering: .relaxed)) }

    func set(rate: Double, pitch: Double) {
        writer.withLock { _ in
            sequence.add(1, ordering: .acquiringAndReleasing)
            rateBits.store(rate.bitPattern, ordering: .relaxed)
            pitchBits.store(pitch.bitPattern, ordering: .relaxed)
            sequence.add(1, ordering: .acquiringAndReleasing)
        }
    }

    /// The pair and its generation when not being written (render side; real-time safe).
    func read() -> (generation: Int, rate: Double, pitch: Double)? {
        let before = sequence.load(ordering: .acquiring)
        guard before & 1 == 0 else { return nil }
        let rate = Double(bitPattern: rateBits.load(ordering: .relaxed))
        let pitch = Double(bitPattern: pitchBits.load(ordering: .relaxed))
        atomicMemoryFence(ordering: .acquiring)
        guard sequence.load(ordering: .relaxed) == before else { return nil }
        return (before, rate, pitch)
    }
}

/// A time-pitch node's render side: the queue's play-rate stage, fed by the node's input.
final class TimePitchRenderer: AudioNodeRenderer {
    private let stage: any PlayRateNode
    private let control: TimePitchControl
    private var generation = -1

    init(stage: any PlayRateNode, control: TimePitchControl) {
        self.stage = stage
        self.control = control
    }

    func render(_ program: GraphProgram, node: AudioGraphNode, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
        if let now = control.read(), now.generation != generation {
            generation = now.generation
            stage.setRate(now.rate)
            stage.setPitch(now.pitch)
        }
        stage.bypassed = control.bypass.load(ordering: .relaxed)
        let inputs = program.inputs(of: node)
        guard inputs.count > 0 else { return (0, .boundary) }
        let source = inputs.connections[0].source
        return stage.render(into: out, frames: frames) { program.pull(source, into: $0, frames: $1) }
    }
}
