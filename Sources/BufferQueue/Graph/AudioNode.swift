import Synchronization

/// A node of an ``AudioGraph``: something the graph pulls interleaved float32 frames from.
///
/// Three kinds, as in AVAudioEngine and miniaudio's node graph:
/// - **sources** have no input: ``AudioBufferSourceNode`` (frames in memory),
///   ``AudioPullSourceNode`` (anything that renders on request: a file renderer, for offline graphs),
///   ``AudioQueueSourceNode`` (a live queue);
/// - a **mixer** (``AudioMixerNode``) takes any number of inputs, each with its own volume, pan and
///   start offset, converting inputs of other rates and channel counts to its format;
/// - **effects** (``AudioEffectNode``) take one input of their own format: ``AudioEQNode``.
///
/// The library's node types are the nodes there are: each holds an ``AudioGraphNode``, which a
/// type of yours cannot make. A node's format is fixed when it is made. A node belongs to the
/// first graph it is attached to. Its render side runs on the graph's render thread only (the
/// sink's thread or the caller of ``AudioGraph/render(into:frames:)``), one render at a time; it
/// allocates nothing, locks nothing and makes no system call, except where a node says otherwise.
public protocol AudioNode: AnyObject, Sendable, CustomStringConvertible {
    /// The node as its graph sees it: name, format, and the render side.
    var graphNode: AudioGraphNode { get }
}

extension AudioNode {
    /// A name for messages and events.
    public var name: String { graphNode.name }
    /// What the node gives: interleaved float32.
    public var outputFormat: AudioStreamDescription { graphNode.outputFormat }
    /// The name, channels and rate: `eq (2 ch, 48000.0 Hz)`.
    public var description: String { graphNode.description }

    var channels: Int { graphNode.channels }
    var sampleRate: Double { graphNode.sampleRate }
    var slot: Int { graphNode.slot }
    var inputLimit: Int { graphNode.inputLimit }
}

/// A node with one input of its own format that processes its frames in place: the kind an
/// equaliser (``AudioEQNode``) is.
public protocol AudioEffectNode: AudioNode {}

/// What a graph holds of a node: its name and format, which graph it belongs to, and its render
/// side. Sendable by construction: the render side is claimed by the one render that runs it
/// (`ClaimedState`), and the rest is immutable or atomic.
public final class AudioGraphNode: Sendable, CustomStringConvertible {
    enum Kind: Sendable {
        case source, effect, mixer
    }

    /// A name for messages and events.
    public let name: String
    /// What the node gives: interleaved float32.
    public let outputFormat: AudioStreamDescription
    let kind: Kind
    /// The graph it belongs to (0: none yet) and its index in that graph's render tables.
    let owner = Atomic<Int>(0)
    private let slotValue = Atomic<Int>(-1)
    private let renderSide: ClaimedState<any AudioNodeRenderer>

    init(name: String, sampleRate: Double, channels: Int, kind: Kind, renderer: any AudioNodeRenderer) throws {
        guard sampleRate.isFinite, sampleRate > 0, sampleRate <= 1_536_000, (1...RenderStage.maxChannels).contains(channels) else {
            throw AudioQueueError(.invalidParameter,
                "\(name): a node's format must be 1...\(RenderStage.maxChannels) channels at a rate above 0 and up to 1536000 Hz; got \(channels) ch at \(sampleRate) Hz")
        }
        self.name = name
        self.kind = kind
        outputFormat = .float32(sampleRate: sampleRate, channels: channels)
        renderSide = ClaimedState(renderer)
    }

    /// The name, channels and rate: `eq (2 ch, 48000.0 Hz)`.
    public var description: String { "\(name) (\(outputFormat.channelsPerFrame) ch, \(outputFormat.sampleRate) Hz)" }

    var channels: Int { outputFormat.channelsPerFrame }
    var sampleRate: Double { outputFormat.sampleRate }
    /// The node's row in its graph's input table (set once, at the first attach).
    var slot: Int { slotValue.load(ordering: .acquiring) }
    func assignSlot(_ slot: Int) { slotValue.store(slot, ordering: .releasing) }

    /// How many inputs the node takes: 0 for a source, 1 for an effect, `Int.max` for a mixer.
    var inputLimit: Int {
        switch kind {
        case .source: return 0
        case .effect: return 1
        case .mixer: return .max
        }
    }

    /// Control side, on connection: the node checks that `input` suits it (an effect takes its own format).
    func check(input: AudioGraphNode) throws {
        guard kind == .effect, input.sampleRate != sampleRate || input.channels != channels else { return }
        throw AudioQueueError(.invalidParameter, "\(input) cannot feed \(self): an effect takes its own format "
            + "(put a mixer between them to convert)")
    }

    /// Render side: writes up to `frames` frames into `out` and says why it stopped short
    /// (``PullEnd/starved``: nothing now; ``PullEnd/boundary``: the node has ended). A node
    /// another thread is rendering (a node wrongly in two renders) gives nothing now.
    @inline(__always)
    func render(_ program: GraphProgram, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
        renderSide.withClaim { $0.render(program, node: self, into: out, frames: frames) } ?? (0, .starved)
    }
}

/// A node's render side: state only the render that holds the node's claim touches.
protocol AudioNodeRenderer: AnyObject {
    /// Writes up to `frames` frames of `node` into `out` (see ``AudioGraphNode/render(_:into:frames:)``).
    func render(_ program: GraphProgram, node: AudioGraphNode, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd)
}

/// An effect's render side: pulls the one input, then processes its frames in place.
final class EffectRenderer: AudioNodeRenderer {
    private let process: (UnsafeMutablePointer<Float>, Int) -> Void

    /// `process` filters `frames` frames in place (on the render side).
    init(process: @escaping (UnsafeMutablePointer<Float>, Int) -> Void) {
        self.process = process
    }

    func render(_ program: GraphProgram, node: AudioGraphNode, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
        let inputs = program.inputs(of: node)
        guard inputs.count > 0 else { return (0, .boundary) }
        let (n, end) = program.pull(inputs.connections[0].source, into: out, frames: frames)
        process(out, n)
        return (n, end)
    }
}

/// One edge of the graph: the node pulled (as the control side knows it, and as the render side
/// pulls it), and for a mixer the bus.
final class GraphConnection: Sendable {
    let node: any AudioNode
    let source: AudioGraphNode
    let bus: AudioMixerInput?
    init(source: any AudioNode, bus: AudioMixerInput?) {
        node = source
        self.source = source.graphNode
        self.bus = bus
    }
}

/// What the render side reads: per node slot, its inputs; and the node the output pulls. Immutable;
/// a change of the graph publishes a new one. The connections are laid out in memory of its own,
/// read through pointers: the render side never iterates a Swift collection (unspecialised, as
/// in debug builds, that allocates).
// @unchecked: immutable after init; the memory it owns is only read.
final class GraphProgram: @unchecked Sendable {
    let output: AudioGraphNode?
    /// The nodes that can fail while rendering (their failures become events).
    let failing: [AudioPullSourceNode]
    private let connections: UnsafeMutablePointer<GraphConnection>
    private let connectionCount: Int
    /// Per slot: where its connections start in ``connections``, and how many there are.
    private let starts: UnsafeMutablePointer<Int>
    private let counts: UnsafeMutablePointer<Int>
    private let slots: Int
    /// Nodes pulled after the output each render, their frames dropped (a node that hands its
    /// input elsewhere: AVFAudio's sink node), and the memory they are pulled into.
    private let terminals: UnsafeMutablePointer<AudioGraphNode>
    private let terminalCount: Int
    private let terminalScratch: UnsafeMutablePointer<Float>
    static let terminalBlock = 4096

    init(inputs: [[GraphConnection]], output: (any AudioNode)?, failing: [AudioPullSourceNode], terminals: [AudioGraphNode] = []) {
        self.output = output?.graphNode
        self.failing = failing
        terminalCount = terminals.count
        self.terminals = .allocate(capacity: max(terminals.count, 1))
        self.terminals.initialize(from: terminals, count: terminals.count)
        terminalScratch = .allocate(capacity: Self.terminalBlock * max(terminals.map(\.channels).max() ?? 1, 1))
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
        terminals.deinitialize(count: terminalCount)
        terminals.deallocate()
        terminalScratch.deallocate()
        connections.deinitialize(count: connectionCount)
        connections.deallocate()
        starts.deallocate()
        counts.deallocate()
    }

    /// The connections into `node`, in the order made.
    @inline(__always)
    func inputs(of node: AudioGraphNode) -> (connections: UnsafePointer<GraphConnection>, count: Int) {
        let slot = node.slot
        guard slot >= 0 && slot < slots else { return (UnsafePointer(connections), 0) }
        return (UnsafePointer(connections + starts[slot]), counts[slot])
    }

    /// Pulls each terminal node for `frames` frames (of the output's time), in blocks, dropping
    /// what they give.
    @inline(__always)
    func pullTerminals(frames: Int) {
        for index in 0..<terminalCount {
            var done = 0
            while done < frames {
                let (n, end) = pull(terminals[index], into: terminalScratch, frames: min(Self.terminalBlock, frames - done))
                done += n
                if end != .filled || n == 0 { break }
            }
        }
    }

    /// Pulls `node` until `frames` frames are out or it is starved or ended.
    @inline(__always)
    func pull(_ node: AudioGraphNode, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
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
public final class AudioBufferSourceNode: AudioNode {
    /// The node as its graph sees it.
    /// The node as its graph sees it.
    public let graphNode: AudioGraphNode
    /// The frames it holds.
    public let frameCount: Int

    /// - Parameters:
    ///   - name: how events and errors name the node.
    ///   - samples: interleaved float32 frames of `channels` channels (a partial last frame is dropped).
    ///   - sampleRate: the frames' rate.
    ///   - channels: samples per frame.
    public init(name: String = "buffer", samples: [Float], sampleRate: Double, channels: Int) throws {
        let frames = channels > 0 ? samples.count / channels : 0
        frameCount = frames
        graphNode = try AudioGraphNode(name: name, sampleRate: sampleRate, channels: channels, kind: .source,
                                       renderer: BufferSourceRenderer(samples: samples, frames: frames, channels: channels))
    }
}

/// A buffer source's render side: the frames and how far it has played.
final class BufferSourceRenderer: AudioNodeRenderer {
    private let samples: UnsafeMutablePointer<Float>
    private let frameCount: Int
    private let channels: Int
    private var position = 0

    init(samples: [Float], frames: Int, channels: Int) {
        let count = frames * max(channels, 0)
        self.samples = .allocate(capacity: max(count, 1))
        for index in 0..<count { (self.samples + index).initialize(to: samples[index]) }
        frameCount = frames
        self.channels = channels
    }

    deinit { samples.deallocate() }

    func render(_ program: GraphProgram, node: AudioGraphNode, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
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
public final class AudioPullSourceNode: AudioNode {
    /// The node as its graph sees it.
    /// The node as its graph sees it.
    public let graphNode: AudioGraphNode
    private let failure: PullFailure

    /// A node named `name` that pulls its frames from `source`, in the source's format.
    public init(name: String, source: any AudioNodePullSource) throws {
        let failure = PullFailure()
        self.failure = failure
        graphNode = try AudioGraphNode(name: name, sampleRate: source.outputFormat.sampleRate, channels: source.outputFormat.channelsPerFrame,
                                       kind: .source, renderer: PullSourceRenderer(source: source, failure: failure))
    }

    /// The failure not yet reported, once (control side, after a render).
    func takeFailure() -> (any Error)? {
        failure.error.withLock { error in
            defer { error = nil }
            return error
        }
    }
}

/// Where a pull source's render side leaves the error it ended on, for the control side.
final class PullFailure: Sendable {
    /// Set once by the render side (which then stops decoding), taken once by the control side.
    let error = Lock<(any Error)?>(nil)
}

/// A pull source's render side: the source it decodes from, and whether it has ended.
final class PullSourceRenderer: AudioNodeRenderer {
    private let source: any AudioNodePullSource
    private let failure: PullFailure
    private var ended = false

    init(source: any AudioNodePullSource, failure: PullFailure) {
        self.source = source
        self.failure = failure
    }

    func render(_ program: GraphProgram, node: AudioGraphNode, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
        guard !ended else { return (0, .boundary) }
        let channels = node.channels
        var done = 0
        while done < frames {
            let n: Int
            do {
                n = try source.render(into: UnsafeMutableBufferPointer(start: out + done * channels, count: (frames - done) * channels),
                                      frames: frames - done)
            } catch {
                // A pull source decodes on an offline thread (it allocates anyway): the lock is taken once, here.
                failure.error.withLock { $0 = error }
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
}
