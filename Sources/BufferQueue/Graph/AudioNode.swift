import Synchronization

/// A node of an ``AudioGraph``: something the graph pulls interleaved float32 frames from.
///
/// Three kinds, as in AVAudioEngine and miniaudio's node graph:
/// - **sources** have no input: ``AudioBufferSourceNode`` (frames in memory),
///   ``AudioPullSourceNode`` (anything that renders on request: a file renderer, for offline graphs);
/// - a **mixer** (``AudioMixerNode``) takes any number of inputs, each with its own volume, pan and
///   start offset, converting inputs of other rates and channel counts to its format;
/// - **effects** take one input of their own format: ``AudioEQNode``.
///
/// A node's format is fixed when it is made. A node belongs to the first graph it is attached to.
/// Its render side runs on the graph's render thread only (the sink's thread or the caller of
/// ``AudioGraph/render(into:frames:)``), one render at a time; it allocates nothing, locks nothing
/// and makes no system call, except where a node says otherwise.
// @unchecked: render-side state is touched only under the owning graph's render claim; the rest is immutable or atomic.
public class AudioNode: @unchecked Sendable, CustomStringConvertible {
    /// A name for messages and events.
    public let name: String
    /// What the node gives: interleaved float32.
    public let outputFormat: AudioStreamDescription
    /// The graph it belongs to (0: none yet) and its index in that graph's render tables.
    let owner = Atomic<Int>(0)
    private let slotValue = Atomic<Int>(-1)

    init(name: String, sampleRate: Double, channels: Int) throws {
        guard sampleRate.isFinite, sampleRate > 0, sampleRate <= 1_536_000, (1...RenderStage.maxChannels).contains(channels) else {
            throw AudioQueueError(.invalidParameter,
                "\(name): a node's format must be 1...\(RenderStage.maxChannels) channels at a rate above 0 and up to 1536000 Hz; got \(channels) ch at \(sampleRate) Hz")
        }
        self.name = name
        outputFormat = .float32(sampleRate: sampleRate, channels: channels)
    }

    public var description: String { "\(name) (\(outputFormat.channelsPerFrame) ch, \(outputFormat.sampleRate) Hz)" }

    var channels: Int { outputFormat.channelsPerFrame }
    var sampleRate: Double { outputFormat.sampleRate }
    /// The node's row in its graph's input table (set once, at the first attach).
    var slot: Int { slotValue.load(ordering: .acquiring) }
    func assignSlot(_ slot: Int) { slotValue.store(slot, ordering: .releasing) }

    /// How many inputs the node takes: 0 for a source, 1 for an effect, `Int.max` for a mixer.
    var inputLimit: Int { 0 }

    /// Render side: writes up to `frames` frames into `out` and says why it stopped short
    /// (``PullEnd/starved``: nothing now; ``PullEnd/boundary``: the node has ended).
    func render(_ program: GraphProgram, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) { (0, .boundary) }

    /// Control side, on connection: the node checks that `input` suits it (an effect takes its own format).
    func check(input: AudioNode) throws {}
}

/// A node with one input of its own format that processes its frames in place: the kind an
/// equaliser (``AudioEQNode``) is.
// @unchecked: as AudioNode's.
public class AudioEffectNode: AudioNode, @unchecked Sendable {
    override init(name: String, sampleRate: Double, channels: Int) throws {
        try super.init(name: name, sampleRate: sampleRate, channels: channels)
    }

    override var inputLimit: Int { 1 }

    override func check(input: AudioNode) throws {
        guard input.sampleRate == sampleRate && input.channels == channels else {
            throw AudioQueueError(.invalidParameter, "\(input) cannot feed \(self): an effect takes its own format "
                + "(put a mixer between them to convert)")
        }
    }

    override func render(_ program: GraphProgram, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
        let inputs = program.inputs(of: self)
        guard inputs.count > 0 else { return (0, .boundary) }
        let (n, end) = program.pull(inputs.connections[0].source, into: out, frames: frames)
        process(out, frames: n)
        return (n, end)
    }

    /// Render side: processes `frames` frames in place.
    func process(_ samples: UnsafeMutablePointer<Float>, frames: Int) {}
}

/// One edge of the graph as the render side sees it: the node pulled, and for a mixer the bus.
final class GraphConnection: Sendable {
    let source: AudioNode
    let bus: AudioMixerInput?
    init(source: AudioNode, bus: AudioMixerInput?) {
        self.source = source
        self.bus = bus
    }
}

/// What the render side reads: per node slot, its inputs; and the node the output pulls. Immutable;
/// a change of the graph publishes a new one. The connections are laid out in memory of its own,
/// read through pointers: the render side never iterates a Swift collection (unspecialised, as
/// in debug builds, that allocates).
// @unchecked: immutable after init; the memory it owns is only read.
final class GraphProgram: @unchecked Sendable {
    let output: AudioNode?
    /// The nodes that can fail while rendering (their failures become events).
    let failing: [AudioPullSourceNode]
    private let connections: UnsafeMutablePointer<GraphConnection>
    private let connectionCount: Int
    /// Per slot: where its connections start in ``connections``, and how many there are.
    private let starts: UnsafeMutablePointer<Int>
    private let counts: UnsafeMutablePointer<Int>
    private let slots: Int

    init(inputs: [[GraphConnection]], output: AudioNode?, failing: [AudioPullSourceNode]) {
        self.output = output
        self.failing = failing
        slots = inputs.count
        connectionCount = inputs.reduce(0) { $0 + $1.count }
        connections = .allocate(capacity: max(connectionCount, 1))
        starts = .allocate(capacity: max(slots, 1))
        counts = .allocate(capacity: max(slots, 1))
        var next = 0
        for (slot, list) in inputs.enumerated() {
            starts[slot] = next
            counts[slot] = list.count
            for connection in list {
                (connections + next).initialize(to: connection)
                next += 1
            }
        }
    }

    deinit {
        connections.deinitialize(count: connectionCount)
        connections.deallocate()
        starts.deallocate()
        counts.deallocate()
    }

    /// The connections into `node`, in the order made.
    @inline(__always)
    func inputs(of node: AudioNode) -> (connections: UnsafePointer<GraphConnection>, count: Int) {
        let slot = node.slot
        guard slot >= 0 && slot < slots else { return (UnsafePointer(connections), 0) }
        return (UnsafePointer(connections + starts[slot]), counts[slot])
    }

    /// Pulls `node` until `frames` frames are out or it is starved or ended.
    @inline(__always)
    func pull(_ node: AudioNode, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
        var done = 0
        while done < frames {
            let (n, end) = node.render(self, into: out + done * node.channels, frames: frames - done)
            done += n
            if end != .filled { return (done, end) }
            if n == 0 { return (done, .starved) }
        }
        return (done, .filled)
    }
}

/// A source of frames held in memory: it plays them once from the start and ends (a sound of a
/// game, a sampler's note, a test signal). Real-time safe.
// @unchecked: as AudioNode's (its position is the render side's).
public final class AudioBufferSourceNode: AudioNode, @unchecked Sendable {
    private let samples: UnsafeMutablePointer<Float>
    /// The frames it holds.
    public let frameCount: Int
    // Render side.
    private var position = 0

    /// - Parameters:
    ///   - name: how events and errors name the node.
    ///   - samples: interleaved float32 frames of `channels` channels (a partial last frame is dropped).
    ///   - sampleRate: the frames' rate.
    ///   - channels: samples per frame.
    public init(name: String = "buffer", samples: [Float], sampleRate: Double, channels: Int) throws {
        let frames = channels > 0 ? samples.count / channels : 0
        let storage = UnsafeMutablePointer<Float>.allocate(capacity: max(frames * channels, 1))
        for index in 0..<(frames * channels) { (storage + index).initialize(to: samples[index]) }
        self.samples = storage
        frameCount = frames
        try super.init(name: name, sampleRate: sampleRate, channels: channels)
    }

    deinit { samples.deallocate() }

    override func render(_ program: GraphProgram, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
        let n = min(frames, frameCount - position)
        out.update(from: samples + position * channels, count: n * channels)
        position += n
        return (n, position == frameCount ? (n == frames ? .filled : .boundary) : .filled)
    }
}

/// What an ``AudioPullSourceNode`` pulls: anything that renders interleaved float32 on request
/// (`AudioFileRenderer` in AudioPlayback is one).
public protocol AudioNodePullSource: AnyObject {
    /// The format it renders: interleaved float32.
    var outputFormat: AudioStreamDescription { get }
    /// Renders up to `frames` frames into `destination`; returns how many, 0 at the end.
    func render(into destination: UnsafeMutableBufferPointer<Float>, frames: Int) throws -> Int
}

/// A source that pulls an ``AudioNodePullSource`` — a file renderer that decodes on the calling
/// thread — for graphs rendered offline (``AudioGraph/render(into:frames:)``). Not for a sink's
/// real-time thread: decoding allocates and reads.
///
/// When the source throws, the node ends there: the frames it gave before stay in the mix, and
/// the graph reports ``AudioGraphEvent/sourceFailed(name:error:)``; the other inputs go on.
// @unchecked: as AudioNode's (the pulled source and the failure are the render side's until `failed` publishes it).
public final class AudioPullSourceNode: AudioNode, @unchecked Sendable {
    private let source: any AudioNodePullSource
    private let failed = Atomic<Bool>(false)
    private let reported = Atomic<Bool>(false)
    /// Written by the render side before `failed` is set; read after it is seen.
    private var failure: (any Error)?
    private var ended = false

    /// A node named `name` that pulls its frames from `source`, in the source's format.
    public init(name: String, source: any AudioNodePullSource) throws {
        self.source = source
        try super.init(name: name, sampleRate: source.outputFormat.sampleRate, channels: source.outputFormat.channelsPerFrame)
    }

    override func render(_ program: GraphProgram, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
        guard !ended else { return (0, .boundary) }
        var done = 0
        while done < frames {
            let n: Int
            do {
                n = try source.render(into: UnsafeMutableBufferPointer(start: out + done * channels, count: (frames - done) * channels),
                                      frames: frames - done)
            } catch {
                failure = error
                failed.store(true, ordering: .releasing)
                ended = true
                return (done, .boundary)
            }
            if n == 0 {
                ended = true
                return (done, .boundary)
            }
            done += n
        }
        return (done, .filled)
    }

    /// The failure not yet reported, once (control side, after a render).
    func takeFailure() -> (any Error)? {
        guard failed.load(ordering: .acquiring), !reported.exchange(true, ordering: .relaxed) else { return nil }
        return failure
    }
}
