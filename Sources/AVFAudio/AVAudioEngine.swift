import Foundation
import Synchronization
import AudioToolbox
internal import BufferQueue

/// How an engine renders when it does not play to a device.
public enum AVAudioEngineManualRenderingMode: Int, Sendable {
    /// The caller renders as fast as it likes (a file, a test).
    case offline = 0
    /// The caller renders from a real-time context of its own (``AVAudioEngine/manualRenderingBlock``).
    case realtime = 1
}

/// What a manual render did.
public enum AVAudioEngineManualRenderingStatus: Int, Sendable {
    /// It failed (the error says why).
    case error = -1
    /// The buffer holds the frames asked for.
    case success = 0
    /// The input node had not enough frames.
    case insufficientDataFromInputNode = 1
    /// The render could not run now (another render held the engine); try again.
    case cannotDoInCurrentContext = 2
}

/// Renders `frameCount` frames into `outputData` (the manual rendering format) from a real-time
/// context; `outError` gets the status when it fails.
public typealias AVAudioEngineManualRenderingBlock = (_ numberOfFrames: AVAudioFrameCount, _ outBuffer: UnsafeMutablePointer<AudioBufferList>,
                                                      _ outError: UnsafeMutablePointer<OSStatus>?) -> AVAudioEngineManualRenderingStatus

extension Notification.Name {
    /// Posted (object: the engine) when the output device changed under a running engine.
    public static let AVAudioEngineConfigurationChange = Notification.Name("AVAudioEngineConfigurationChangeNotification")
}

/// The engine's render clock: the output's sample time, and where the render under way began.
final class EngineClock: Sendable {
    /// Frames the output has rendered.
    let sampleTime = Atomic<Int64>(0)
    /// The output's sample time at the start of the render under way (or the last one).
    let renderStart = Atomic<Int64>(0)
    /// The host time (nanoseconds, monotonic) of the last render's start.
    let hostTime = Atomic<UInt64>(0)
    /// A render has happened.
    let rendered = Atomic<Bool>(false)
}

/// The output node's render side: pulls what feeds the output, silence where nothing does, and
/// counts the engine's sample time. An engine renders for as long as it is asked: its sources
/// (players, source nodes) never end, as on a Mac.
final class OutputProcessor: AudioNodeProcessor {
    private let clock: EngineClock
    private let channels: Int

    init(clock: EngineClock, channels: Int) {
        self.clock = clock
        self.channels = channels
    }

    func render(input: AudioNodeInput, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
        let start = clock.sampleTime.load(ordering: .relaxed)
        clock.renderStart.store(start, ordering: .relaxed)
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        clock.hostTime.store(UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec), ordering: .relaxed)
        let (n, _) = input.pull(into: out, frames: frames)
        if n < frames { (out + n * channels).update(repeating: 0, count: (frames - n) * channels) }
        clock.sampleTime.store(start + Int64(frames), ordering: .releasing)
        clock.rendered.store(true, ordering: .releasing)
        return (frames, .filled)
    }
}

/// A graph of audio nodes — players, mixers, effects — played to the output device or rendered
/// manually (Apple's `AVAudioEngine`).
///
/// It is the library's render graph (`AudioGraph`): each attached node is a node there, made when
/// the engine first renders (``prepare()``, ``start()``, ``renderOffline(_:to:)``) and kept in step
/// with every later ``connect(_:to:format:)`` and ``disconnectNodeOutput(_:)``, also while it runs.
/// Live, it plays through AudioToolbox's output (`AQ_OUTPUT`, else PipeWire, PulseAudio or ALSA);
/// in manual rendering it renders exactly the frames asked, sample time counted from 0.
///
/// Formats: a connection's format sets its source's output (rate and channels); without one a
/// player gives 44.1 kHz stereo, an effect its input's format, a mixer the output's. Mixers
/// convert what feeds them. Not thread-safe, as Apple's: configure it from one thread at a time.
open class AVAudioEngine: NSObject {
    private struct Edge {
        let source: AVAudioNode
        let sourceBus: AVAudioNodeBus
        let destination: AVAudioNode
        let destinationBus: AVAudioNodeBus
        let format: NodeFormat?
    }

    /// A connection made in the graph: from a node's outlet (or core, to its tap) to a core.
    private struct Applied {
        let source: any AudioNode
        let destination: any AudioNode
        let bus: AudioMixerInput?
        /// The engine node whose mixing (volume, pan) the bus carries.
        let mixing: AVAudioNode?
        let mixer: AVAudioMixerNode?
        /// The engine connection's index (mixers sum their inputs in the order connected; -1: a tap's).
        var order = -1
    }

    private struct Built {
        let graph: AudioGraph
        let format: NodeFormat
        let clock: EngineClock
        let offline: Bool
        var applied: [ObjectIdentifier: Applied] = [:]
    }

    private struct Manual {
        let mode: AVAudioEngineManualRenderingMode
        let format: AVAudioFormat
        let maximumFrameCount: AVAudioFrameCount
    }

    /// The device output (or the manual render's).
    public let outputNode: AVAudioOutputNode
    /// The mixer connected to the output, made with the engine.
    public let mainMixerNode: AVAudioMixerNode
    private var input: AVAudioInputNode?
    private var nodes: [AVAudioNode] = []
    private var edges: [Edge] = []
    private var built: Built?
    private var manual: Manual?
    private var running = false
    private var live = false
    private var configurationError: NSError?
    private var scratch: [Float] = []
    let callbacks = DispatchQueue(label: "AVAudioEngine callbacks")

    public override init() {
        _ = codecsRegistered
        outputNode = AVAudioOutputNode()
        mainMixerNode = AVAudioMixerNode()
        super.init()
        attach(outputNode)
        attach(mainMixerNode)
        connect(mainMixerNode, to: outputNode, format: nil)
    }

    deinit {
        built?.graph.stop()
    }

    /// The device input (made on first use: recording starts when the engine does).
    open var inputNode: AVAudioInputNode {
        if let input { return input }
        let node = AVAudioInputNode()
        input = node
        attach(node)
        return node
    }

    /// The nodes attached.
    open var attachedNodes: Set<AVAudioNode> { Set(nodes) }

    // MARK: building

    /// Adds a node to the engine (a node belongs to one engine at a time).
    open func attach(_ node: AVAudioNode) {
        guard !nodes.contains(where: { $0 === node }) else { return }
        if let other = node.attachedEngine, other !== self { other.detach(node) }
        node.attachedEngine = self
        nodes.append(node)
    }

    /// Removes a node and its connections.
    open func detach(_ node: AVAudioNode) {
        guard node !== outputNode && node !== mainMixerNode else { return }
        edges.removeAll { $0.source === node || $0.destination === node }
        nodes.removeAll { $0 === node }
        dropCore(of: node)
        node.attachedEngine = nil
        graphChanged()
    }

    /// Connects `node1`'s output to the next free input of `node2` (bus 0 but of a mixer), in
    /// `format` (nil: `node1`'s own format).
    open func connect(_ node1: AVAudioNode, to node2: AVAudioNode, format: AVAudioFormat?) {
        let bus = node2.role == .mixer ? nextInputBus(of: node2) : 0
        connect(node1, to: node2, fromBus: 0, toBus: bus, format: format)
    }

    /// Connects `node1`'s output bus to `node2`'s input bus, in `format` (nil: `node1`'s own
    /// format); what either bus was connected to before is disconnected.
    open func connect(_ node1: AVAudioNode, to node2: AVAudioNode, fromBus bus1: AVAudioNodeBus, toBus bus2: AVAudioNodeBus, format: AVAudioFormat?) {
        attach(node1)
        attach(node2)
        edges.removeAll { ($0.source === node1 && $0.sourceBus == bus1) || ($0.destination === node2 && $0.destinationBus == bus2) }
        edges.append(Edge(source: node1, sourceBus: bus1, destination: node2, destinationBus: bus2, format: format.map(NodeFormat.init)))
        graphChanged()
    }

    /// Disconnects what feeds `node`'s input `bus`.
    open func disconnectNodeInput(_ node: AVAudioNode, bus: AVAudioNodeBus) {
        edges.removeAll { $0.destination === node && $0.destinationBus == bus }
        graphChanged()
    }

    /// Disconnects everything that feeds `node`.
    open func disconnectNodeInput(_ node: AVAudioNode) {
        edges.removeAll { $0.destination === node }
        graphChanged()
    }

    /// Disconnects `node`'s output `bus`.
    open func disconnectNodeOutput(_ node: AVAudioNode, bus: AVAudioNodeBus) {
        edges.removeAll { $0.source === node && $0.sourceBus == bus }
        graphChanged()
    }

    /// Disconnects `node`'s outputs.
    open func disconnectNodeOutput(_ node: AVAudioNode) {
        edges.removeAll { $0.source === node }
        graphChanged()
    }

    /// Where `node`'s output bus goes (nil: nowhere), as Apple's connection point.
    open func outputConnectionPoints(for node: AVAudioNode, outputBus bus: AVAudioNodeBus) -> [AVAudioConnectionPoint] {
        edges.filter { $0.source === node && $0.sourceBus == bus }.map { AVAudioConnectionPoint(node: $0.destination, bus: $0.destinationBus) }
    }

    /// What feeds `node`'s input bus (nil: nothing).
    open func inputConnectionPoint(for node: AVAudioNode, inputBus bus: AVAudioNodeBus) -> AVAudioConnectionPoint? {
        edges.first { $0.destination === node && $0.destinationBus == bus }.map { AVAudioConnectionPoint(node: $0.source, bus: $0.sourceBus) }
    }

    // MARK: running

    /// Makes the graph (nodes and connections) so that ``start()`` starts at once.
    open func prepare() {
        do { _ = try build() } catch { configurationError = error as NSError }
    }

    /// Starts rendering: to the output device, or (in manual rendering mode) for
    /// ``renderOffline(_:to:)``.
    /// - Throws: an `NSError` in `NSOSStatusErrorDomain`: a connection the graph refuses (an
    ///   effect fed another format, a cycle, a rate conversion with no resampler), or the device
    ///   did not open.
    open func start() throws {
        let built = try build()
        if let configurationError { throw configurationError }
        if running { return }
        if manual != nil {
            running = true
            return
        }
        if live {
            try wrap { try built.graph.resume() }
        } else {
            let sink = OutputRoute.output.makeSink(applicationName: ProcessInfo.processInfo.processName, streamName: "AVAudioEngine")
            try wrap { try built.graph.start(sink: sink) }
            live = true
        }
        input?.startCapture(engine: self)
        running = true
    }

    /// Stops rendering; ``start()`` goes on from here (players keep their place).
    open func pause() {
        guard running else { return }
        if live { built?.graph.pause() }
        running = false
    }

    /// Stops rendering and lets the device go; the graph stays.
    open func stop() {
        if live { built?.graph.stop() }
        live = false
        running = false
        input?.stopCapture()
    }

    /// Clears what every node holds: players' schedules, effects' histories.
    open func reset() {
        for node in nodes { node.reset() }
    }

    /// Whether the engine renders now.
    open var isRunning: Bool { running }

    /// The sample time at the start of the last render (nil before the first).
    var lastRenderTime: AVAudioTime? {
        guard let built, built.clock.rendered.load(ordering: .acquiring) else { return nil }
        return AVAudioTime(hostTime: built.clock.hostTime.load(ordering: .relaxed),
                           sampleTime: built.clock.renderStart.load(ordering: .relaxed), atRate: built.format.sampleRate)
    }

    /// The output device's latency in seconds (0 in manual rendering).
    var outputLatency: TimeInterval {
        guard live, let built else { return 0 }
        return Double(built.graph.outputLatencyFrames) / built.format.sampleRate
    }

    // MARK: manual rendering

    /// Renders to the caller's buffers instead of a device, in `format`, at most
    /// `maximumFrameCount` frames per call. The engine must be stopped.
    /// - Throws: when the engine runs, or the format is not PCM of 1...64 channels.
    open func enableManualRenderingMode(_ mode: AVAudioEngineManualRenderingMode, format pcmFormat: AVAudioFormat,
                                        maximumFrameCount: AVAudioFrameCount) throws {
        guard !running else { throw statusError(kAudioUnitErr_InvalidPropertyValue, "stop the engine before enabling manual rendering") }
        guard pcmFormat.commonFormat != .otherFormat, (1...64).contains(pcmFormat.channelCount), pcmFormat.sampleRate > 0, maximumFrameCount > 0 else {
            throw statusError(kAudio_ParamError, "manual rendering needs a PCM format of 1...64 channels and a frame count above 0; got \(pcmFormat)")
        }
        stop()
        manual = Manual(mode: mode, format: pcmFormat, maximumFrameCount: maximumFrameCount)
        rebuild()
    }

    /// Goes back to the output device.
    open func disableManualRenderingMode() {
        guard manual != nil else { return }
        stop()
        manual = nil
        rebuild()
    }

    /// Whether the engine renders manually.
    open var isInManualRenderingMode: Bool { manual != nil }
    /// The manual rendering mode (offline when not in manual rendering).
    open var manualRenderingMode: AVAudioEngineManualRenderingMode { manual?.mode ?? .offline }
    /// The format manual renders give (the output node's).
    open var manualRenderingFormat: AVAudioFormat { manual?.format ?? outputNode.outputFormat(forBus: 0) }
    /// The most frames one manual render gives.
    open var manualRenderingMaximumFrameCount: AVAudioFrameCount { manual?.maximumFrameCount ?? 0 }
    /// Frames rendered manually since the engine's graph was made.
    open var manualRenderingSampleTime: AVAudioFramePosition { built?.clock.sampleTime.load(ordering: .acquiring) ?? 0 }

    /// Renders `numberOfFrames` frames into `buffer` (of ``manualRenderingFormat``).
    /// - Returns: ``AVAudioEngineManualRenderingStatus/success``: the buffer's `frameLength` is
    ///   `numberOfFrames`.
    /// - Throws: not in manual rendering mode or not started, a buffer of another format or too
    ///   small, more than ``manualRenderingMaximumFrameCount`` frames, or a graph the engine
    ///   could not make.
    open func renderOffline(_ numberOfFrames: AVAudioFrameCount, to buffer: AVAudioPCMBuffer) throws -> AVAudioEngineManualRenderingStatus {
        guard let manual else { throw statusError(kAudioUnitErr_InvalidPropertyValue, "the engine is not in manual rendering mode") }
        guard running else { throw statusError(kAudioUnitErr_Uninitialized, "start the engine before rendering") }
        guard buffer.format.holdsSamples(as: manual.format) else {
            throw statusError(kAudio_ParamError, "the buffer's format \(buffer.format) is not the manual rendering format \(manual.format)")
        }
        guard numberOfFrames <= buffer.frameCapacity, numberOfFrames <= manual.maximumFrameCount else {
            throw statusError(kAudio_ParamError, "\(numberOfFrames) frames: the buffer holds \(buffer.frameCapacity), a render gives at most \(manual.maximumFrameCount)")
        }
        let built = try build()
        if let configurationError { throw configurationError }
        let frames = Int(numberOfFrames)
        let channels = built.format.channels
        if scratch.count < frames * channels { scratch = [Float](repeating: 0, count: frames * channels) }
        let rendered = try scratch.withUnsafeMutableBufferPointer { samples -> Int in
            guard let base = samples.baseAddress else { return 0 }
            let n = try wrap { try built.graph.render(into: base, frames: frames) }
            buffer.setInterleavedFloats(base, at: 0, count: n)
            return n
        }
        buffer.frameLength = AVAudioFrameCount(rendered)
        deliverTapsNow()
        // The input block had nothing for this render: its frames are silence, as on a Mac.
        if input?.takeStarved() == true { return .insufficientDataFromInputNode }
        return .success
    }

    /// Renders into an `AudioBufferList` of ``manualRenderingFormat`` (float32) from a real-time
    /// context: ``AVAudioEngineManualRenderingStatus/cannotDoInCurrentContext`` when another render
    /// holds the graph.
    open var manualRenderingBlock: AVAudioEngineManualRenderingBlock {
        let graph = built?.graph
        let format = manual?.format
        let maximum = Int(manual?.maximumFrameCount ?? 0)
        let channels = Int(format?.channelCount ?? 2)
        let samples = UnsafeMutablePointer<Float>.allocate(capacity: max(maximum * channels, 1))
        let starved = input?.starvedFlag
        let holder = ScratchHolder(samples)
        return { frames, list, status in
            guard let graph, let format, Int(frames) <= maximum, format.commonFormat == .pcmFormatFloat32 else {
                status?.pointee = kAudio_ParamError
                return .error
            }
            let n: Int
            do { n = try graph.render(into: holder.samples, frames: Int(frames)) } catch {
                return .cannotDoInCurrentContext
            }
            let buffers = UnsafeMutableAudioBufferListPointer(list)
            if format.isInterleaved, let data = buffers[0].mData {
                data.assumingMemoryBound(to: Float.self).update(from: holder.samples, count: n * channels)
                buffers[0].mDataByteSize = UInt32(n * channels * 4)
            } else {
                for channel in 0..<min(channels, buffers.count) {
                    guard let data = buffers[channel].mData?.assumingMemoryBound(to: Float.self) else { continue }
                    for frame in 0..<n { data[frame] = holder.samples[frame * channels + channel] }
                    buffers[channel].mDataByteSize = UInt32(n * 4)
                }
            }
            status?.pointee = noErr
            return starved?.take() == true ? .insufficientDataFromInputNode : .success
        }
    }

    // MARK: the graph behind it

    /// The graph, made if needed.
    private func build() throws -> Built {
        if let built { return built }
        let format: NodeFormat
        if let manual {
            format = NodeFormat(manual.format)
        } else {
            format = NodeFormat(sampleRate: AVAudioSession.sharedInstance().sampleRate, channels: 2)
        }
        let clock = EngineClock()
        let engine = WeakEngine(self)
        let graph = try wrap {
            try AudioGraph(sampleRate: format.sampleRate, channels: format.channels) { event in
                guard case .outputDeviceChanged(let name) = event else { return }
                // The session's route follows, and the engine says its configuration changed.
                OutputRoute.changed(to: name)
                if let engine = engine.engine { NotificationCenter.default.post(name: .AVAudioEngineConfigurationChange, object: engine) }
            }
        }
        let output = try wrap {
            try AudioProcessorEffectNode(name: "output", sampleRate: format.sampleRate, channels: format.channels,
                                         processor: OutputProcessor(clock: clock, channels: format.channels))
        }
        try wrap { try graph.connectOutput(output) }
        for node in nodes { dropCore(of: node) }
        mainMixerNode.core = graph.mainMixer
        mainMixerNode.coreFormat = format
        outputNode.core = output
        outputNode.coreFormat = format
        built = Built(graph: graph, format: format, clock: clock, offline: manual?.mode == .offline)
        configurationError = nil
        do { try reconcile() } catch { configurationError = error as NSError }
        return built!
    }

    /// Drops the graph (a new output format): the next render makes another.
    private func rebuild() {
        built?.graph.stop()
        built = nil
        for node in nodes { dropCore(of: node) }
        live = false
    }

    private func dropCore(of node: AVAudioNode) {
        if let graph = built?.graph {
            if let tap = node.tapCore { graph.detach(tap) }
            if let core = node.core, core !== graph.mainMixer { graph.detach(core) }
        }
        if let shared = node.tap?.shared { shared.close() }
        node.tap?.shared = nil
        node.core = nil
        node.coreFormat = nil
        node.tapCore = nil
        node.coreDropped()
    }

    /// What `node` renders changed (a manual input block): its graph node is made anew.
    func nodeChanged(_ node: AVAudioNode) {
        guard built != nil else { return }
        if let old = node.core { built?.applied = built?.applied.filter { $0.value.source !== old && $0.value.destination !== old } ?? [:] }
        dropCore(of: node)
        graphChanged()
    }

    /// The topology changed: the graph follows (when made), and a refusal is kept for the next
    /// ``start()`` or render.
    func graphChanged() {
        guard built != nil else { return }
        do {
            try reconcile()
            configurationError = nil
        } catch {
            configurationError = error as NSError
        }
    }

    /// Each node's output format, as the connections set them.
    private func formats(output: NodeFormat) -> [ObjectIdentifier: NodeFormat] {
        var result: [ObjectIdentifier: NodeFormat] = [ObjectIdentifier(mainMixerNode): output, ObjectIdentifier(outputNode): output]
        func resolve(_ node: AVAudioNode, depth: Int) -> NodeFormat {
            if let known = result[ObjectIdentifier(node)] { return known }
            var format: NodeFormat
            if let explicit = edges.first(where: { $0.source === node })?.format {
                format = explicit
            } else {
                switch node.role {
                case .mixer, .output: format = output
                case .effect, .sink:
                    if depth < 64, let feed = edges.first(where: { $0.destination === node }) {
                        format = resolve(feed.source, depth: depth + 1)
                    } else {
                        format = node.naturalFormat ?? .standard
                    }
                case .source, .input: format = node.naturalFormat ?? .standard
                }
            }
            result[ObjectIdentifier(node)] = format
            return format
        }
        for node in nodes { _ = resolve(node, depth: 0) }
        return result
    }

    /// Makes the graph what the engine's nodes and connections say: new cores where a node has
    /// none (or another format), the graph's connections added and removed to match.
    private func reconcile() throws {
        guard var built else { return }
        defer { self.built = built }
        let graph = built.graph
        let formats = self.formats(output: built.format)
        let context = NodeContext(clock: built.clock, callbacks: callbacks, offline: built.offline, outputRate: built.format.sampleRate, graph: graph)
        let maximumRender = Int(manual?.maximumFrameCount ?? 8192)
        // Cores.
        for node in nodes {
            guard let format = formats[ObjectIdentifier(node)] else { continue }
            if node.core == nil || node.coreFormat != format {
                if let old = node.core {
                    built.applied = built.applied.filter { $0.value.source !== old && $0.value.destination !== old }
                }
                dropCore(of: node)
                node.core = try wrap { try node.makeCore(format, context) }
                node.coreFormat = format
            }
            if let tap = node.tap, node.tapCore == nil {
                let shared = TapShared(format: format, bufferSize: tap.bufferSize, maximumRender: maximumRender, block: tap.block, queue: callbacks)
                tap.shared = shared
                node.tapCore = try wrap {
                    try AudioProcessorEffectNode(name: "tap", sampleRate: format.sampleRate, channels: format.channels,
                                                 processor: TapProcessor(shared: shared, clock: built.clock, outputRate: built.format.sampleRate))
                }
            } else if node.tap == nil, let old = node.tapCore {
                built.applied = built.applied.filter { $0.value.source !== old && $0.value.destination !== old }
                graph.detach(old)
                node.tapCore = nil
            }
        }
        // Connections wanted.
        var wanted: [ObjectIdentifier: Applied] = [:]
        for node in nodes {
            if let core = node.core, let tap = node.tapCore {
                wanted[ObjectIdentifier(core)] = Applied(source: core, destination: tap, bus: nil, mixing: nil, mixer: nil)
            }
        }
        for (index, edge) in edges.enumerated() {
            guard let source = edge.source.outlet, let destination = edge.destination.core else { continue }
            wanted[ObjectIdentifier(source)] = Applied(source: source, destination: destination, bus: nil, mixing: mixingSource(of: edge.source),
                                                       mixer: edge.destination as? AVAudioMixerNode, order: index)
        }
        for (key, applied) in built.applied where wanted[key]?.destination !== applied.destination {
            graph.disconnect(applied.source)
            built.applied[key] = nil
        }
        for (key, want) in wanted.sorted(by: { $0.value.order < $1.value.order }) where built.applied[key] == nil {
            if let mixer = want.destination as? AudioMixerNode {
                let gain = (want.mixing?.mixingVolume ?? 1) * (want.mixer?.outputVolume ?? 1)
                let bus = try wrap { try graph.connect(want.source, to: mixer, volume: gain, pan: want.mixing?.mixingPan ?? 0) }
                built.applied[key] = Applied(source: want.source, destination: mixer, bus: bus, mixing: want.mixing, mixer: want.mixer, order: want.order)
            } else if let effect = want.destination as? any AudioEffectNode {
                try wrap { try graph.connect(want.source, to: effect) }
                built.applied[key] = want
            }
        }
        // Pulled each render though they feed nothing: a sink node that something feeds, and a
        // tapped input node that feeds nothing (as on a Mac, a tap on the input is enough for it
        // to record).
        let terminals = nodes.compactMap { node -> (any AudioNode)? in
            let fed = edges.contains { $0.destination === node }, feeds = edges.contains { $0.source === node }
            if node.role == .sink && fed { return node.core }
            if node.role == .input && node.tap != nil && !feeds { return node.outlet }
            return nil
        }
        try wrap { try graph.setTerminals(terminals) }
    }

    /// Whose volume and pan a connection out of `node` carries: its own, or through effects the
    /// node that feeds them (a player's volume applies at the mixer it reaches through an EQ).
    private func mixingSource(of node: AVAudioNode) -> AVAudioNode {
        var current = node
        for _ in 0..<64 {
            guard current.role == .effect, let feed = edges.first(where: { $0.destination === current }) else { break }
            current = feed.source
        }
        return current
    }

    /// A node's volume or pan changed: the mixer input it reaches follows.
    func mixingChanged(of node: AVAudioNode) {
        guard let built else { return }
        for applied in built.applied.values where applied.mixing === node {
            applied.bus?.volume = node.mixingVolume * (applied.mixer?.outputVolume ?? 1)
            applied.bus?.pan = node.mixingPan
        }
    }

    /// A mixer's output volume changed: each of its inputs follows.
    func mixingChanged(into mixer: AVAudioMixerNode) {
        guard let built else { return }
        for applied in built.applied.values where applied.mixer === mixer {
            applied.bus?.volume = (applied.mixing?.mixingVolume ?? 1) * mixer.outputVolume
        }
    }

    /// The bus the next connection to `node` takes (one past the highest connected).
    func nextInputBus(of node: AVAudioNode) -> Int {
        (edges.filter { $0.destination === node }.map(\.destinationBus).max() ?? -1) + 1
    }

    /// A node's output format as the engine resolves it now.
    func format(of node: AVAudioNode) -> NodeFormat? {
        if let format = node.coreFormat { return format }
        let output = built?.format ?? manual.map { NodeFormat($0.format) }
            ?? NodeFormat(sampleRate: AVAudioSession.sharedInstance().sampleRate, channels: 2)
        return formats(output: output)[ObjectIdentifier(node)]
    }

    /// The format connected to `node`'s input `bus`.
    func inputFormat(of node: AVAudioNode, bus: AVAudioNodeBus) -> AVAudioFormat? {
        guard let edge = edges.first(where: { $0.destination === node && $0.destinationBus == bus }) else { return nil }
        return format(of: edge.source)?.avFormat
    }

    /// The manual rendering format, while the engine renders manually (the input node's block gives it).
    var manualFormat: AVAudioFormat? { manual?.format }

    /// The render clock and settings nodes use outside the graph (the player's times).
    var renderClock: (clock: EngineClock, rate: Double)? { built.map { ($0.clock, $0.format.sampleRate) } }

    /// In an offline render: taps get what the render gave before it returns.
    private func deliverTapsNow() {
        let shared = nodes.compactMap { $0.tap?.shared }
        guard !shared.isEmpty else { return }
        callbacks.sync { for tap in shared { tap.deliver() } }
    }

    private func wrap<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let error as NSError where error.domain == NSOSStatusErrorDomain {
            throw error
        } catch {
            throw statusError(kAudioUnitErr_FormatNotSupported, "\(error)")
        }
    }
}

/// A weak reference to an engine that the graph's event handler (Sendable) can hold: the engine is
/// only handed to NotificationCenter, which takes any object.
private final class WeakEngine: Sendable {
    private let reference = Lock<WeakBox>(WeakBox())
    private struct WeakBox { weak var engine: AVAudioEngine? }

    init(_ engine: AVAudioEngine) { reference.withLock { $0.engine = engine } }

    var engine: AVAudioEngine? { reference.withLock { $0.engine } }
}

/// The manual rendering block's scratch memory, freed with the block.
private final class ScratchHolder {
    let samples: UnsafeMutablePointer<Float>
    init(_ samples: UnsafeMutablePointer<Float>) { self.samples = samples }
    deinit { samples.deallocate() }
}

/// A node and one of its buses (Apple's `AVAudioConnectionPoint`).
open class AVAudioConnectionPoint: NSObject {
    /// The node (nil once it was released).
    public private(set) weak var node: AVAudioNode?
    /// The bus.
    public let bus: AVAudioNodeBus

    /// The point at `bus` of `node`.
    public init(node: AVAudioNode, bus: AVAudioNodeBus) {
        self.node = node
        self.bus = bus
        super.init()
    }
}
