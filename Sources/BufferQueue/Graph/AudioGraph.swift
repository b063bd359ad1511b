import Synchronization

/// What a graph reports, on the thread that rendered (offline) once the render returned.
public enum AudioGraphEvent: Sendable, CustomStringConvertible {
    /// A source failed while rendering: it ended there, what it gave before stays in the mix, and
    /// the other inputs go on.
    case sourceFailed(name: String, error: AudioQueueError)
    /// The output's sink failed (server gone, device lost); the graph stopped pulling. Delivered
    /// on the thread the sink reported it from.
    case outputFailed(AudioQueueError)
    /// The output's sink moved to another device (it follows the default, as PipeWire's and
    /// PulseAudio's sinks do); the device's name. Delivered on the thread the sink reported it from.
    case outputDeviceChanged(String)

    public var description: String {
        switch self {
        case let .sourceFailed(name, error): return "\(name) failed: \(error.message)"
        case let .outputFailed(error): return "the output failed: \(error.message)"
        case let .outputDeviceChanged(name): return "the output moved to \(name)"
        }
    }
}

/// A render graph: source nodes into mixers, through effects, to one output — AVAudioEngine's
/// vocabulary (attach, connect, ``mainMixer``, manual rendering) over miniaudio's node-graph model.
///
/// ```swift
/// let graph = try AudioGraph(sampleRate: 48_000, channels: 2)
/// let eq = try AudioEQNode(bands: [.init(.lowShelf, frequency: 120, gain: 4)], sampleRate: 48_000, channels: 2)
/// try graph.connect(voice, to: graph.mainMixer, volume: 0.8)
/// try graph.connect(music, to: graph.mainMixer, offsetFrames: 48_000)
/// try graph.connect(graph.mainMixer, to: eq)
/// try graph.connectOutput(eq)
/// while case let n = try graph.render(into: block, frames: 4096), n > 0 { write(block, n) }
/// ```
///
/// **Threads.** Connecting, disconnecting and changing parameters happen on any thread, while the
/// graph renders: each change of the connections is published to the render side as a new
/// immutable table (one atomic store), and the table it replaced is freed on the control side
/// once no render can still be reading it. The render side — ``render(into:frames:)`` — takes no
/// lock, allocates nothing and makes no system call (unless a node says so: a pull source decodes).
/// One render at a time: a second concurrent render is refused.
///
/// **Errors.** A connection that would make a cycle, a second input to an effect, a node feeding
/// two places, formats an effect does not take, or a conversion no registered resampler makes
/// throws, naming the nodes; nothing changes.
public final class AudioGraph: Sendable {
    /// What the output gives: interleaved float32.
    public let outputFormat: AudioStreamDescription
    /// The mixer made with the graph, connected to the output until ``connectOutput(_:)`` says otherwise.
    public let mainMixer: AudioMixerNode
    private let resamplers: AudioResamplerRegistry
    private let quality: AudioConverterQuality
    private let eventHandler: (@Sendable (AudioGraphEvent) -> Void)?

    private static let lastID = Atomic<Int>(0)
    private let id: Int
    private let topology: Lock<Topology>
    /// The program the render side reads (an unretained `GraphProgram`; ``Topology/current`` owns it).
    private let published = Atomic<UInt>(0)
    /// A render is under way (the render claim).
    private let rendering = Atomic<Bool>(false)
    /// Renders finished: a program retired when `n` were done is free once more are.
    private let rendersDone = Atomic<Int>(0)
    /// The sink the output plays through, while started; calls on it are serialised here.
    private let output = Lock<(sink: (any AudioSink)?, running: Bool)>((nil, false))
    private let underruns = Atomic<Int>(0)

    private struct Topology {
        var nodes: [ObjectIdentifier: any AudioNode] = [:]
        /// Per slot, the connections into that node, in the order made.
        var inputs: [[GraphConnection]] = []
        /// Where each node's output goes.
        var feeds: [ObjectIdentifier: any AudioNode] = [:]
        var output: (any AudioNode)?
        /// Nodes pulled after the output, their frames dropped (``setTerminals(_:)``).
        var terminals: [any AudioNode] = []
        var current: GraphProgram
        var retired: [(program: GraphProgram, rendersDone: Int)] = []
    }

    /// - Parameters:
    ///   - sampleRate: the output's rate (and the ``mainMixer``'s).
    ///   - channels: the output's channels (and the ``mainMixer``'s).
    ///   - rampSeconds: how long the main mixer's volume and pan changes glide.
    ///   - resamplers: where mixers find a resampler for inputs of other rates (register `SoxrConverter`).
    ///   - quality: the resamplers' quality.
    ///   - eventHandler: called with ``AudioGraphEvent``s on the rendering thread after a render.
    public init(sampleRate: Double, channels: Int, rampSeconds: Double = 0.01, resamplers: AudioResamplerRegistry = .shared,
                quality: AudioConverterQuality = .veryHigh, eventHandler: (@Sendable (AudioGraphEvent) -> Void)? = nil) throws {
        mainMixer = try AudioMixerNode(name: "main mixer", sampleRate: sampleRate, channels: channels, rampSeconds: rampSeconds)
        outputFormat = mainMixer.outputFormat
        self.resamplers = resamplers
        self.quality = quality
        self.eventHandler = eventHandler
        id = Self.lastID.add(1, ordering: .relaxed).newValue
        let empty = GraphProgram(inputs: [], output: nil, failing: [])
        topology = Lock(Topology(current: empty))
        published.store(UInt(bitPattern: Unmanaged.passUnretained(empty).toOpaque()), ordering: .releasing)
        try topology.withLock { t in
            try attach(mainMixer, &t)
            t.output = mainMixer
            publish(&t)
        }
    }

    deinit {
        // No render can be under way: it would hold a reference (a sink holds one while open).
        topology.withLock { $0.retired.removeAll() }
    }

    // MARK: building the graph

    /// Adds `node` to the graph (``connect(_:to:volume:pan:offsetFrames:startFrame:)`` does it too).
    /// - Throws: when the node belongs to another graph.
    public func attach(_ node: any AudioNode) throws {
        try topology.withLock { t in
            try attach(node, &t)
            publish(&t)
        }
    }

    /// Connects `source` to a new input of `mixer`, attaching both if needed, and returns the
    /// input, whose volume and pan can change while the graph plays.
    /// - Parameters:
    ///   - source: the node whose frames the input mixes.
    ///   - mixer: the mixer that gets the input.
    ///   - volume: linear gain, 0 or more.
    ///   - pan: -1 (left) ... 1 (right).
    ///   - offsetFrames: mixer frames after its ``AudioMixerNode/sampleTime`` now at which the
    ///     input's first frame plays (before the graph renders: its first frame of output).
    ///   - startFrame: or the mixer sample time of the input's first frame, wherever the mixer is
    ///     now (`AVAudioPlayerNode`'s `play(at:)`); a time already mixed starts it at once and
    ///     ``AudioMixerInput/lateFrames`` says by how much.
    @discardableResult
    public func connect(_ source: any AudioNode, to mixer: AudioMixerNode, volume: Float = 1, pan: Float = 0,
                        offsetFrames: Int = 0, startFrame: Int64? = nil) throws -> AudioMixerInput {
        guard offsetFrames >= 0 else {
            throw AudioQueueError(.invalidParameter, "\(source.name): a mixer input cannot start \(offsetFrames) frames before now")
        }
        return try topology.withLock { t in
            try checkEdge(from: source, to: mixer, t)
            let bus = try AudioMixerInput(source: source, mixer: mixer, volume: volume, pan: pan,
                                          startFrame: startFrame ?? mixer.sampleTime + Int64(offsetFrames),
                                          resamplers: resamplers, quality: quality)
            try link(source, to: mixer, bus: bus, &t)
            return bus
        }
    }

    /// Connects `source` as the one input of `destination`, attaching both if needed. When
    /// `source` fed the output, `destination` takes its place there (`connect(mainMixer, to: eq)`
    /// puts the equaliser between the main mixer and the output).
    public func connect(_ source: any AudioNode, to destination: any AudioEffectNode) throws {
        try topology.withLock { t in
            try checkEdge(from: source, to: destination, t)
            try destination.graphNode.check(input: source.graphNode)
            try link(source, to: destination, bus: nil, &t)
        }
    }

    /// Adds the edge (both nodes attached) and publishes. What fed the output now feeds
    /// `destination`, which takes its place there (an EQ after the main mixer).
    private func link(_ source: any AudioNode, to destination: any AudioNode, bus: AudioMixerInput?, _ t: inout Topology) throws {
        try attach(source, &t)
        try attach(destination, &t)
        t.inputs[destination.slot].append(GraphConnection(source: source, bus: bus))
        t.feeds[ObjectIdentifier(source)] = destination
        t.terminals.removeAll { $0 === source }
        if t.output === source { t.output = destination }
        publish(&t)
    }

    /// Makes `node` what the output pulls (the ``mainMixer`` until this is called); its format
    /// must be ``outputFormat``.
    public func connectOutput(_ node: any AudioNode) throws {
        guard node.sampleRate == outputFormat.sampleRate && node.channels == outputFormat.channelsPerFrame else {
            throw AudioQueueError(.invalidParameter, "\(node) cannot feed the output of \(outputFormat.channelsPerFrame) ch at "
                + "\(outputFormat.sampleRate) Hz; put a mixer of that format before it")
        }
        try topology.withLock { t in
            if let fed = t.feeds[ObjectIdentifier(node)] {
                throw AudioQueueError(.invalidParameter, "\(node.name) already feeds \(fed.name); disconnect it first")
            }
            try attach(node, &t)
            t.output = node
            publish(&t)
        }
    }

    /// Removes the connection out of `source` (to a mixer's input or an effect, or the output);
    /// nothing happens when it has none. The render side stops pulling it from its next render.
    public func disconnect(_ source: any AudioNode) {
        topology.withLock { t in
            disconnect(source, &t)
            publish(&t)
        }
    }

    /// Disconnects `node` from everything, both ways, and removes it from the graph.
    public func detach(_ node: any AudioNode) {
        topology.withLock { t in
            disconnect(node, &t)
            if node.slot >= 0 && node.slot < t.inputs.count && node.graphNode.owner.load(ordering: .relaxed) == id {
                for input in t.inputs[node.slot] { t.feeds[ObjectIdentifier(input.node)] = nil }
                t.inputs[node.slot] = []
            }
            t.nodes[ObjectIdentifier(node)] = nil
            t.terminals.removeAll { $0 === node }
            publish(&t)
        }
    }

    /// Makes `nodes` (attaching them) the graph's terminals: each render pulls them after the
    /// output, as many frames as the output gave, and drops what they give — nodes that hand
    /// their input elsewhere (AVFAudio's sink node, a tapped input). A terminal feeds nothing.
    /// Replaces the terminals set before.
    /// - Throws: a node that belongs to another graph, or feeds a node.
    package func setTerminals(_ nodes: [any AudioNode]) throws {
        try topology.withLock { t in
            for node in nodes {
                if let fed = t.feeds[ObjectIdentifier(node)] {
                    throw AudioQueueError(.invalidParameter, "\(node.name) feeds \(fed.name): a terminal feeds nothing")
                }
                try attach(node, &t)
            }
            t.terminals = nodes
            publish(&t)
        }
    }

    /// The inputs of `mixer`, in the order connected.
    public func inputs(of mixer: AudioMixerNode) -> [AudioMixerInput] {
        topology.withLock { t in
            guard mixer.graphNode.owner.load(ordering: .relaxed) == id, mixer.slot < t.inputs.count else { return [] }
            return t.inputs[mixer.slot].compactMap(\.bus)
        }
    }

    private func attach(_ node: any AudioNode, _ t: inout Topology) throws {
        let owner = node.graphNode.owner.load(ordering: .acquiring)
        if owner == 0 {
            guard node.graphNode.owner.compareExchange(expected: 0, desired: id, ordering: .acquiringAndReleasing).exchanged else {
                throw AudioQueueError(.invalidParameter, "\(node.name) was attached to another graph meanwhile")
            }
            node.graphNode.assignSlot(t.inputs.count)
            t.inputs.append([])
        } else if owner != id {
            throw AudioQueueError(.invalidParameter, "\(node.name) belongs to another graph")
        }
        t.nodes[ObjectIdentifier(node)] = node
    }

    private func checkEdge(from source: any AudioNode, to destination: any AudioNode, _ t: Topology) throws {
        for node in [source, destination] where node.graphNode.owner.load(ordering: .relaxed) != 0 && node.graphNode.owner.load(ordering: .relaxed) != id {
            throw AudioQueueError(.invalidParameter, "\(node.name) belongs to another graph")
        }
        guard source !== destination else {
            throw AudioQueueError(.invalidParameter, "\(source.name) cannot feed itself")
        }
        guard destination.inputLimit > 0 else {
            throw AudioQueueError(.invalidParameter, "\(destination.name) is a source: it takes no input")
        }
        if let fed = t.feeds[ObjectIdentifier(source)] {
            throw AudioQueueError(.invalidParameter, "\(source.name) already feeds \(fed.name); disconnect it first")
        }
        if t.output === source && (destination.sampleRate != outputFormat.sampleRate || destination.channels != outputFormat.channelsPerFrame) {
            throw AudioQueueError(.invalidParameter, "\(source.name) feeds the output and \(destination) cannot take its place there")
        }
        let slot = destination.slot
        if destination.inputLimit == 1, destination.graphNode.owner.load(ordering: .relaxed) == id, slot < t.inputs.count, let existing = t.inputs[slot].first {
            throw AudioQueueError(.invalidParameter, "\(destination.name) takes one input and \(existing.source.name) is connected to it")
        }
        // Following the outputs from the destination must not reach the source.
        var path = [destination.name]
        var node: (any AudioNode)? = destination
        while let next = node.flatMap({ t.feeds[ObjectIdentifier($0)] }) {
            path.append(next.name)
            if next === source {
                throw AudioQueueError(.invalidParameter, "connecting \(source.name) to \(destination.name) would make a cycle: "
                    + "\(source.name) → \(path.joined(separator: " → "))")
            }
            node = next
        }
    }

    private func disconnect(_ source: any AudioNode, _ t: inout Topology) {
        if t.output === source { t.output = nil }
        guard let destination = t.feeds.removeValue(forKey: ObjectIdentifier(source)) else { return }
        t.inputs[destination.slot].removeAll { $0.node === source }
    }

    /// Hands the render side a new table and frees the tables no render can still read.
    private func publish(_ t: inout Topology) {
        let failing = t.nodes.values.compactMap { $0 as? AudioPullSourceNode }
        let program = GraphProgram(inputs: t.inputs, output: t.output, failing: failing, terminals: t.terminals.map(\.graphNode))
        let old = t.current
        t.current = program
        published.store(UInt(bitPattern: Unmanaged.passUnretained(program).toOpaque()), ordering: .sequentiallyConsistent)
        t.retired.append((old, rendersDone.load(ordering: .sequentiallyConsistent)))
        if !rendering.load(ordering: .sequentiallyConsistent) {
            // A render that begins now reads the new table.
            t.retired.removeAll()
        } else {
            let done = rendersDone.load(ordering: .sequentiallyConsistent)
            t.retired.removeAll { $0.rendersDone < done }
        }
    }

    // MARK: playing through a sink

    /// Plays the output through `sink`: opens it with ``outputFormat`` and starts it pulling on
    /// its own thread (a real-time one, for the device sinks). Sources that are live queues
    /// (``AudioQueueSourceNode``) play from here on; offline sources must not be connected to a
    /// graph that plays live (they decode on the sink's thread). While it plays,
    /// ``render(into:frames:)`` is refused.
    /// - Throws: what the sink's `open` or `start` threw; ``AudioQueueError/Code/invalidRunState``
    ///   when a sink is already playing the graph.
    public func start(sink: any AudioSink) throws {
        try output.withLock { state in
            guard state.sink == nil else { throw AudioQueueError(.invalidRunState, "the graph already plays through a sink; stop it first") }
            let handler = eventHandler
            let source = AudioRenderSource(graph: self, errorHandler: { error in handler?(.outputFailed(error)) },
                                           deviceHandler: { name in handler?(.outputDeviceChanged(name)) })
            try sink.open(format: outputFormat, source: source)
            do { try sink.start() } catch {
                sink.close()
                throw error
            }
            state = (sink, true)
        }
    }

    /// Stops pulling (the sink keeps what it holds); ``resume()`` goes on.
    public func pause() {
        output.withLock { state in
            guard let sink = state.sink, state.running else { return }
            sink.pause()
            state.running = false
        }
    }

    /// Starts pulling again after ``pause()``.
    public func resume() throws {
        try output.withLock { state in
            guard let sink = state.sink, !state.running else { return }
            try sink.start()
            state.running = true
        }
    }

    /// Stops and closes the sink; the graph can render offline again, or start on another sink.
    public func stop() {
        output.withLock { state in
            state.sink?.close()
            state = (nil, false)
        }
    }

    /// Whether a sink is pulling the graph now.
    public var isRunning: Bool { output.withLock { $0.running } }

    /// Frames the sink playing the graph holds before they are heard (0 when none plays it).
    public var outputLatencyFrames: Int { output.withLock { $0.sink?.latencyFrames ?? 0 } }

    /// Times the output's device ran dry although the sink kept feeding it (see
    /// ``AudioRenderSource/reportDeviceUnderrun()``).
    public var deviceUnderruns: Int { underruns.load(ordering: .relaxed) }

    func countDeviceUnderrun() { underruns.add(1, ordering: .relaxed) }

    /// A sink's pull: the graph's output, silence after it where asked (and when another
    /// render holds the graph). Real-time safe.
    func renderForSink(into buffer: UnsafeMutablePointer<Float>, frames: Int, fillSilence: Bool) -> Int {
        let n = renderObserved(into: buffer, frames: frames) ?? 0
        if fillSilence && n < frames { (buffer + n * outputFormat.channelsPerFrame).update(repeating: 0, count: (frames - n) * outputFormat.channelsPerFrame) }
        return n
    }

    // MARK: rendering

    /// Renders up to `frames` frames of the output into `buffer` (interleaved, ``outputFormat``):
    /// AVAudioEngine's manual rendering. Returns the frames rendered: fewer than asked only where
    /// the output's node ended (0 once it has), or where a live source ran dry.
    ///
    /// Events (a source that failed) are delivered to the event handler on this thread before it returns.
    /// - Throws: ``AudioQueueError/Code/invalidRunState`` when another render is under way, or a
    ///   sink plays the graph (``start(sink:)``).
    public func render(into buffer: UnsafeMutablePointer<Float>, frames: Int) throws -> Int {
        guard frames > 0 else { return 0 }
        if output.withLock({ $0.sink != nil }) {
            throw AudioQueueError(.invalidRunState, "the graph plays through a sink; stop it before rendering it yourself")
        }
        guard let rendered = renderObserved(into: buffer, frames: frames) else {
            throw AudioQueueError(.invalidRunState, "the graph is being rendered by another thread")
        }
        if let eventHandler {
            for node in topology.withLock({ $0.current.failing }) {
                if let error = node.takeFailure() {
                    let wrapped = error as? AudioQueueError ?? AudioQueueError(.decoderError, "\(error)")
                    eventHandler(.sourceFailed(name: node.name, error: wrapped))
                }
            }
        }
        return rendered
    }

    /// Renders into `buffer` (its whole length, in frames of ``outputFormat``); see ``render(into:frames:)``.
    public func render(into buffer: UnsafeMutableBufferPointer<Float>) throws -> Int {
        guard let base = buffer.baseAddress else { return 0 }
        return try render(into: base, frames: buffer.count / outputFormat.channelsPerFrame)
    }

    /// What ``RenderThreadObserver`` is passed for this graph's renders.
    package var renderSourceIdentity: UnsafeRawPointer { UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque()) }

    /// ``renderClaimed(into:frames:)`` bracketed for the test hook.
    func renderObserved(into buffer: UnsafeMutablePointer<Float>, frames: Int) -> Int? {
        guard let observer = RenderThreadObserver.current else { return renderClaimed(into: buffer, frames: frames) }
        observer(renderSourceIdentity, 1)
        defer { observer(renderSourceIdentity, 0) }
        return renderClaimed(into: buffer, frames: frames)
    }

    /// The render side: claims the graph, reads the published table and pulls the output node.
    /// Nil when another render holds the claim. Real-time safe: the table is used without a
    /// retain, so its last release can never happen here.
    func renderClaimed(into buffer: UnsafeMutablePointer<Float>, frames: Int) -> Int? {
        guard rendering.compareExchange(expected: false, desired: true, ordering: .sequentiallyConsistent).exchanged else { return nil }
        defer {
            rendersDone.add(1, ordering: .sequentiallyConsistent)
            rendering.store(false, ordering: .sequentiallyConsistent)
        }
        let bits = published.load(ordering: .sequentiallyConsistent)
        guard let pointer = UnsafeRawPointer(bitPattern: bits) else { return 0 }
        return Unmanaged<GraphProgram>.fromOpaque(pointer)._withUnsafeGuaranteedRef { program in
            guard let output = program.output else { return 0 }
            let rendered = program.pull(output, into: buffer, frames: frames).0
            program.pullTerminals(frames: rendered)
            return rendered
        }
    }
}
