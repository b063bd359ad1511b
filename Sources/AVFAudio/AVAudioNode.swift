import Foundation
import Synchronization
import AudioToolbox
internal import BufferQueue

/// A node's format in the engine's graph: the rate and channels of its interleaved float32 frames.
struct NodeFormat: Hashable {
    var sampleRate: Double
    var channels: Int

    init(sampleRate: Double, channels: Int) {
        self.sampleRate = sampleRate
        self.channels = channels
    }

    init(_ format: AVAudioFormat) {
        self.init(sampleRate: format.sampleRate, channels: Int(format.channelCount))
    }

    /// Apple's default for a node nothing has set: 44.1 kHz stereo.
    static let standard = NodeFormat(sampleRate: 44_100, channels: 2)

    /// The standard (deinterleaved float32) format Apple's nodes describe themselves with.
    var avFormat: AVAudioFormat {
        AVAudioFormat(standardFormatWithSampleRate: sampleRate, channels: AVAudioChannelCount(channels))
            ?? AVAudioFormat(commonFormat: .pcmFormatFloat32, sampleRate: 44_100, channels: 2, interleaved: false)!
    }
}

/// What an engine tells a node when it makes the node's part of the graph.
struct NodeContext {
    /// The engine's render clock: the output's sample time.
    let clock: EngineClock
    /// Where completion handlers and taps are called.
    let callbacks: DispatchQueue
    /// The render is manual and offline: the render side may wait for a lock (it is the
    /// caller's thread, not a device's).
    let offline: Bool
    /// The output's rate (node times are counted in it).
    let outputRate: Double
    /// The graph, for how far behind the render the device plays (its sink's latency).
    let graph: AudioGraph
}

/// How the engine treats a node.
enum NodeRole {
    case source, effect, mixer, output, input
    /// A node that takes its input and gives nothing on (``AVAudioSinkNode``).
    case sink
}

/// A block that receives a node's output (``AVAudioNode/installTap(onBus:bufferSize:format:block:)``),
/// with the sample time of its first frame.
public typealias AVAudioNodeTapBlock = (AVAudioPCMBuffer, AVAudioTime) -> Void

/// A processing stage of an ``AVAudioEngine`` (Apple's `AVAudioNode`).
///
/// Each node is a node of the library's render graph (`AudioGraph` in BufferQueue), made when the
/// engine first renders and remade when its format changes: a player is a source node, a mixer is
/// an `AudioMixerNode`, an equaliser is the graph's equaliser, a time-pitch unit its time-pitch
/// node. Not thread-safe, as Apple's: configure an engine from one thread at a time.
open class AVAudioNode: NSObject {
    weak var attachedEngine: AVAudioEngine?
    /// The node in the engine's graph, and the format it was made for.
    var core: (any AudioNode)?
    var coreFormat: NodeFormat?
    /// The installed tap (bus 0), and its node in the graph.
    var tap: NodeTap?
    var tapCore: (any AudioNode)?
    /// The volume and pan this node's output gets at the mixer it feeds (``AVAudioMixing``).
    var mixingVolume: Float = 1
    var mixingPan: Float = 0

    override init() {
        super.init()
    }

    /// How the engine treats the node.
    var role: NodeRole { .source }

    /// The format the node gives when no connection says (nil: what feeds it, or the engine's).
    var naturalFormat: NodeFormat? { nil }

    /// Makes the node's part of the graph, in `format`.
    func makeCore(_ format: NodeFormat, _ context: NodeContext) throws -> any AudioNode {
        throw statusError(kAudio_UnimplementedError, "\(type(of: self)) cannot be part of a graph")
    }

    /// The node's core was dropped (a new graph, or a new format).
    func coreDropped() {}

    /// The node as it feeds others: its tap when one is installed, else its core.
    var outlet: (any AudioNode)? { tapCore ?? core }

    /// The engine the node is attached to.
    open var engine: AVAudioEngine? { attachedEngine }

    /// Input buses: none for a source, one for an effect, as many as are connected (and one
    /// free) for a mixer.
    open var numberOfInputs: Int {
        switch role {
        case .source, .input: return 0
        case .effect, .output, .sink: return 1
        case .mixer: return attachedEngine?.nextInputBus(of: self) ?? 1
        }
    }

    /// Output buses: one, none for the output node.
    open var numberOfOutputs: Int { role == .output || role == .sink ? 0 : 1 }

    /// The format of an input bus: what is connected to it (the node's own format otherwise).
    open func inputFormat(forBus bus: AVAudioNodeBus) -> AVAudioFormat {
        attachedEngine?.inputFormat(of: self, bus: bus) ?? outputFormat(forBus: 0)
    }

    /// The format of the output bus: as connected, else the node's own.
    open func outputFormat(forBus bus: AVAudioNodeBus) -> AVAudioFormat {
        (attachedEngine?.format(of: self) ?? naturalFormat ?? .standard).avFormat
    }

    /// The name of an input bus (nil: none).
    open func name(forInputBus bus: AVAudioNodeBus) -> String? { bus < numberOfInputs ? "input \(bus)" : nil }

    /// The name of an output bus (nil: none).
    open func name(forOutputBus bus: AVAudioNodeBus) -> String? { bus < numberOfOutputs ? "output \(bus)" : nil }

    /// Calls `block` with the node's output, `bufferSize` frames at a time, on a thread of the
    /// engine's (not the render thread), with the sample time of each buffer's first frame.
    /// The buffers are in the node's output format (a `format` of another rate or channel count
    /// is not converted: the node's is used). One tap per node; installing a second replaces it.
    open func installTap(onBus bus: AVAudioNodeBus, bufferSize: AVAudioFrameCount, format: AVAudioFormat?, block: @escaping AVAudioNodeTapBlock) {
        tap = NodeTap(bufferSize: Int(max(bufferSize, 64)), block: block)
        attachedEngine?.graphChanged()
    }

    /// Removes the tap.
    open func removeTap(onBus bus: AVAudioNodeBus) {
        tap = nil
        attachedEngine?.graphChanged()
    }

    /// Clears what the node holds (a player's schedule, an effect's history).
    open func reset() {}

    /// When the node last rendered: the engine's sample time at the start of that render.
    open var lastRenderTime: AVAudioTime? { attachedEngine?.lastRenderTime }

    /// The node's processing latency in seconds (0: the library's effects have none that delays the mix).
    open var latency: TimeInterval { 0 }

    /// The output's presentation latency in seconds (the device's buffer, for the output node).
    open var outputPresentationLatency: TimeInterval { 0 }
}

/// A node's tap: the block, the buffer size, and what the graph side shares with the engine.
final class NodeTap {
    let bufferSize: Int
    let block: AVAudioNodeTapBlock
    var shared: TapShared?

    init(bufferSize: Int, block: @escaping AVAudioNodeTapBlock) {
        self.bufferSize = bufferSize
        self.block = block
    }
}

/// What a tap's render side hands to the engine's callback queue: the frames, in a ring, and the
/// sample time of the ring's first frame. The block is called on the callback queue only.
final class TapShared: Sendable {
    let ring: SampleRing
    let channels: Int
    let sampleRate: Double
    let bufferSize: Int
    /// The node time of the ring's first frame (set by the first render).
    let base = Atomic<Int64>(-1)
    /// Frames the render side dropped because the ring was full (a block slower than real time).
    let dropped = Atomic<Int>(0)
    private let delivery: Lock<Delivery>
    private let wake: WakeSignal

    struct Delivery {
        var block: AVAudioNodeTapBlock?
        var delivered: Int64 = 0
    }

    init(format: NodeFormat, bufferSize: Int, maximumRender: Int, block: @escaping AVAudioNodeTapBlock, queue: DispatchQueue) {
        channels = format.channels
        sampleRate = format.sampleRate
        self.bufferSize = bufferSize
        ring = SampleRing(minimumCapacity: (max(bufferSize * 8, maximumRender * 2, Int(format.sampleRate)) + bufferSize) * format.channels)
        delivery = Lock(Delivery(block: block))
        wake = WakeSignal(queue: queue)
        wake.setHandler { [weak self] in self?.deliver() }
    }

    deinit { wake.cancel() }

    /// Render side: enough frames for a buffer are there.
    func signal() { wake.signal() }

    /// Stops calling the block (the tap was removed).
    func close() {
        delivery.withLock { $0.block = nil }
        wake.cancel()
    }

    /// On the callback queue: calls the block with each whole buffer the ring holds.
    func deliver() {
        let format = NodeFormat(sampleRate: sampleRate, channels: channels).avFormat
        while ring.readable >= bufferSize * channels {
            guard let buffer = AVAudioPCMBuffer(pcmFormat: format, frameCapacity: AVAudioFrameCount(bufferSize)) else { return }
            var offset = 0
            ring.consume(count: bufferSize * channels) { pointer, _, count in
                buffer.setInterleavedFloats(pointer, at: offset / channels, count: count / channels)
                offset += count
            }
            buffer.frameLength = AVAudioFrameCount(bufferSize)
            let (block, first) = delivery.withLock { d -> (AVAudioNodeTapBlock?, Int64) in
                defer { d.delivered += Int64(bufferSize) }
                return (d.block, d.delivered)
            }
            guard let block else { return }
            let start = max(base.load(ordering: .acquiring), 0) + first
            block(buffer, AVAudioTime(sampleTime: start, atRate: sampleRate))
        }
    }
}

/// A tap's render side: passes its input through and copies it into the ring.
final class TapProcessor: AudioNodeProcessor {
    private let shared: TapShared
    private let clock: EngineClock
    private let outputRate: Double
    private var started = false

    init(shared: TapShared, clock: EngineClock, outputRate: Double) {
        self.shared = shared
        self.clock = clock
        self.outputRate = outputRate
    }

    func render(input: AudioNodeInput, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
        let (n, end) = input.pull(into: out, frames: frames)
        if !started {
            started = true
            let now = clock.renderStart.load(ordering: .relaxed)
            shared.base.store(Int64((Double(now) * shared.sampleRate / outputRate).rounded()), ordering: .releasing)
        }
        let samples = n * shared.channels
        if shared.ring.writable >= samples {
            shared.ring.write(out, count: samples)
        } else {
            shared.dropped.add(n, ordering: .relaxed)
        }
        if shared.ring.readable >= shared.bufferSize * shared.channels { shared.signal() }
        return (n, end)
    }
}

/// The stereo part of ``AVAudioMixing``: where a node's output sits between left and right.
public protocol AVAudioStereoMixing: AnyObject {
    /// -1 (left) ... 1 (right), at the mixer the node feeds.
    var pan: Float { get set }
}

/// How a node's output is mixed at the mixer it feeds (Apple's `AVAudioMixing`): its volume
/// and pan there, applied by the mixer's input (changes glide over 10 ms, without a click).
public protocol AVAudioMixing: AVAudioStereoMixing {
    /// Linear gain at the mixer the node feeds, 0...1 (more amplifies).
    var volume: Float { get set }
}

extension AVAudioMixing where Self: AVAudioNode {
    /// The node's volume at the mixer it reaches (directly, or through effects), times that
    /// mixer's output volume; changes glide over 10 ms.
    public var volume: Float {
        get { mixingVolume }
        set {
            mixingVolume = newValue
            attachedEngine?.mixingChanged(of: self)
        }
    }

    /// The node's pan at the mixer it reaches, -1 (left) ... 1 (right).
    public var pan: Float {
        get { mixingPan }
        set {
            mixingPan = newValue
            attachedEngine?.mixingChanged(of: self)
        }
    }
}

/// A node of the engine's input or output (Apple's `AVAudioIONode`).
open class AVAudioIONode: AVAudioNode {
    /// The device's latency in seconds.
    open var presentationLatency: TimeInterval { attachedEngine?.outputLatency ?? 0 }
}

/// The engine's output (Apple's `AVAudioOutputNode`): the device, or the manual render's
/// buffers. Its format is the engine's output format.
open class AVAudioOutputNode: AVAudioIONode {
    override var role: NodeRole { .output }
}

/// Mixes any number of inputs into one output (Apple's `AVAudioMixerNode`): the graph's
/// `AudioMixerNode`. Inputs of another rate or channel count are converted (libsoxr; the
/// channel matrix of the library's converter). Each input's volume and pan are those of the node
/// that feeds it (``AVAudioMixing``); ``outputVolume`` scales them all.
open class AVAudioMixerNode: AVAudioNode, AVAudioMixing {
    override var role: NodeRole { .mixer }

    public override init() {
        super.init()
    }

    override func makeCore(_ format: NodeFormat, _ context: NodeContext) throws -> any AudioNode {
        try AudioMixerNode(name: "mixer", sampleRate: format.sampleRate, channels: format.channels)
    }

    /// The mixer's own output gain (applied to each of its inputs).
    open var outputVolume: Float = 1 {
        didSet { attachedEngine?.mixingChanged(into: self) }
    }

    /// The input bus the next ``AVAudioEngine/connect(_:to:format:)`` to this mixer takes.
    open var nextAvailableInputBus: AVAudioNodeBus { attachedEngine?.nextInputBus(of: self) ?? 0 }

}

/// The block an ``AVAudioSourceNode`` renders with: fill `frameCount` frames of the buffer list
/// (the node's format, deinterleaved float32), set `isSilence` when they are silence, and
/// return `noErr`.
public typealias AVAudioSourceNodeRenderBlock = (_ isSilence: UnsafeMutablePointer<ObjCBool>, _ timestamp: UnsafePointer<AudioTimeStamp>,
                                                 _ frameCount: AVAudioFrameCount, _ outputData: UnsafeMutablePointer<AudioBufferList>) -> OSStatus

/// A source whose frames a block renders (Apple's `AVAudioSourceNode`): a tone, a synthesiser.
/// The block is called on the render thread (the device's, or the caller of a manual render)
/// with the node's format, deinterleaved float32, and at most 1024 frames at a time.
open class AVAudioSourceNode: AVAudioNode, AVAudioMixing {
    private let block: Lock<AVAudioSourceNodeRenderBlock>
    private let format: NodeFormat?

    /// A source in the format of its output connection.
    public init(renderBlock block: @escaping AVAudioSourceNodeRenderBlock) {
        self.block = Lock(block)
        format = nil
        super.init()
    }

    /// A source in `format` (its rate and channels; a mixer converts it).
    public init(format: AVAudioFormat, renderBlock block: @escaping AVAudioSourceNodeRenderBlock) {
        self.block = Lock(block)
        self.format = NodeFormat(format)
        super.init()
    }

    override var naturalFormat: NodeFormat? { format }

    override func makeCore(_ format: NodeFormat, _ context: NodeContext) throws -> any AudioNode {
        try AudioProcessorSourceNode(name: "source", sampleRate: format.sampleRate, channels: format.channels,
                                     processor: SourceBlockProcessor(block: block, format: format, clock: context.clock, outputRate: context.outputRate))
    }

}

/// The render side of a node whose block takes or gives deinterleaved float32 (the source and
/// sink nodes): a buffer list over memory of its own, ``chunk`` frames a channel, and the node's
/// sample time (from the output's at its first render).
final class BlockBuffers {
    static let chunk = 1024
    let channels: Int
    private let samples: UnsafeMutablePointer<Float>
    private let list: UnsafeMutableAudioBufferListPointer
    private var sampleTime: Int64 = -1
    private let clock: EngineClock
    private let rateRatio: Double

    init(format: NodeFormat, clock: EngineClock, outputRate: Double) {
        channels = format.channels
        samples = .allocate(capacity: Self.chunk * format.channels)
        samples.initialize(repeating: 0, count: Self.chunk * format.channels)
        list = AudioBufferList.allocate(maximumBuffers: format.channels)
        self.clock = clock
        rateRatio = format.sampleRate / outputRate
    }

    deinit {
        samples.deallocate()
        list.unsafeMutablePointer.deallocate()
    }

    /// The list sized for `count` frames (at most ``chunk``) and their timestamp; the sample time
    /// moves on by `count`.
    func next(_ count: Int) -> (UnsafeMutablePointer<AudioBufferList>, AudioTimeStamp) {
        if sampleTime < 0 { sampleTime = Int64((Double(clock.renderStart.load(ordering: .relaxed)) * rateRatio).rounded()) }
        for channel in 0..<channels {
            list[channel] = AudioBuffer(mNumberChannels: 1, mDataByteSize: UInt32(count * 4), mData: samples + channel * Self.chunk)
        }
        var stamp = AudioTimeStamp()
        stamp.mSampleTime = Double(sampleTime)
        stamp.mFlags = .sampleTimeValid
        sampleTime += Int64(count)
        return (list.unsafeMutablePointer, stamp)
    }

    /// `count` interleaved frames into the list's memory.
    func deinterleave(_ source: UnsafePointer<Float>, count: Int) {
        for channel in 0..<channels {
            let target = samples + channel * Self.chunk
            for frame in 0..<count { target[frame] = source[frame * channels + channel] }
        }
    }

    /// The list's first `count` frames, interleaved into `target`.
    func interleave(into target: UnsafeMutablePointer<Float>, count: Int) {
        for channel in 0..<channels {
            let source = samples + channel * Self.chunk
            for frame in 0..<count { target[frame * channels + channel] = source[frame] }
        }
    }
}

/// A source node's render side: its block (taken once, when the node's part of the graph is
/// made) and its buffers.
final class SourceBlockProcessor: AudioNodeProcessor {
    private let render: AVAudioSourceNodeRenderBlock
    private let buffers: BlockBuffers

    init(block: Lock<AVAudioSourceNodeRenderBlock>, format: NodeFormat, clock: EngineClock, outputRate: Double) {
        render = block.withLock { $0 }
        buffers = BlockBuffers(format: format, clock: clock, outputRate: outputRate)
    }

    func render(input: AudioNodeInput, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
        let channels = buffers.channels
        var done = 0
        while done < frames {
            let n = min(BlockBuffers.chunk, frames - done)
            var (list, stamp) = buffers.next(n)
            var silence = ObjCBool(false)
            let status = render(&silence, &stamp, AVAudioFrameCount(n), list)
            if status != noErr || silence.boolValue {
                (out + done * channels).update(repeating: 0, count: n * channels)
            } else {
                buffers.interleave(into: out + done * channels, count: n)
            }
            done += n
        }
        return (frames, .filled)
    }
}

/// The device input (Apple's `AVAudioInputNode`): what AudioToolbox's input records (`AQ_INPUT`;
/// else PipeWire or PulseAudio, else the null device's silence), at the session's rate and input
/// channel count, from when the engine starts. Its frames come through a recording queue that
/// converts the device's rate; the graph reads them from a ring, silence when it runs dry.
/// Not in manual rendering (an engine rendering manually gives the input's silence).
open class AVAudioInputNode: AVAudioIONode, AVAudioMixing {
    private let shared = InputShared()
    private var queue: AudioInputQueue?
    /// In manual rendering: the format and block the input's frames come from.
    private var manualInput: (format: NodeFormat, block: Lock<AVAudioIONodeInputBlock>)?

    override init() {
        super.init()
    }

    override var role: NodeRole { .input }

    override var naturalFormat: NodeFormat? {
        if let manualInput { return manualInput.format }
        return NodeFormat(sampleRate: AVAudioSession.sharedInstance().sampleRate, channels: max(1, min(AVAudioSession.sharedInstance().inputNumberOfChannels, 2)))
    }

    /// In manual rendering, takes the input's frames from `block`: each render asks it for that
    /// many frames of `format` (float32, interleaved or not); nil when it has none (the render
    /// then gives ``AVAudioEngineManualRenderingStatus/insufficientDataFromInputNode`` and the
    /// input's silence). False when the engine does not render manually or the format is not float32.
    open func setManualRenderingInputPCMFormat(_ format: AVAudioFormat, inputBlock block: @escaping AVAudioIONodeInputBlock) -> Bool {
        guard attachedEngine?.manualFormat != nil, format.commonFormat == .pcmFormatFloat32, (1...64).contains(format.channelCount) else { return false }
        manualInput = (NodeFormat(format), Lock(block))
        interleavedInput = format.isInterleaved && format.channelCount > 1
        attachedEngine?.nodeChanged(self)
        return true
    }

    private var interleavedInput = false

    /// Whether the input block had nothing for the last render (cleared by reading it).
    func takeStarved() -> Bool { shared.starved.take() }

    var starvedFlag: InputStarved { shared.starved }

    override func makeCore(_ format: NodeFormat, _ context: NodeContext) throws -> any AudioNode {
        if let manualInput, attachedEngine?.manualFormat != nil {
            return try AudioProcessorSourceNode(name: "input", sampleRate: format.sampleRate, channels: format.channels,
                                                processor: ManualInputProcessor(block: manualInput.block, channels: format.channels,
                                                                                interleaved: interleavedInput, starved: shared.starved))
        }
        let ring = SampleRing(minimumCapacity: Int(format.sampleRate) * format.channels)
        shared.ring.withLock { $0 = ring }
        return try AudioProcessorSourceNode(name: "input", sampleRate: format.sampleRate, channels: format.channels,
                                            processor: InputProcessor(ring: ring, channels: format.channels))
    }

    /// Starts recording into the ring (the engine started live).
    func startCapture(engine: AVAudioEngine) {
        guard queue == nil, let format = coreFormat, let ring = shared.ring.withLock({ $0 }) else { return }
        let channels = format.channels
        do {
            let recorder = try AudioInputQueue(format: .float32(sampleRate: format.sampleRate, channels: channels),
                                               configuration: .init(source: InputRoute.makeSource())) { queue, buffer, frames in
                buffer.withUnsafeBytes { bytes in
                    guard let base = bytes.baseAddress?.assumingMemoryBound(to: Float.self) else { return }
                    let count = min(frames.frameCount * channels, ring.writable)
                    ring.write(base, count: count - count % channels)
                }
                try? queue.enqueue(buffer)
            }
            let frames = max(Int(format.sampleRate / 100), 64)
            for _ in 0..<4 { try recorder.enqueue(recorder.allocateBuffer(capacity: frames * channels * 4)) }
            try recorder.start()
            queue = recorder
        } catch {
            FileHandle.standardError.write(Data("AVAudioInputNode: the input did not start: \(error)\n".utf8))
        }
    }

    /// Stops recording.
    func stopCapture() {
        guard let queue else { return }
        self.queue = nil
        queue.dispose(immediately: true)
    }

}

/// The ring the input node's recording fills and its render side reads (the one in use), and
/// whether a manual input block ran dry.
final class InputShared: Sendable {
    let ring = Lock<SampleRing?>(nil)
    let starved = InputStarved()
}

/// Set by the render side when the manual input block had nothing; taken by the engine.
final class InputStarved: Sendable {
    private let flag = Atomic<Bool>(false)
    func set() { flag.store(true, ordering: .releasing) }
    func take() -> Bool { flag.exchange(false, ordering: .acquiringAndReleasing) }
}

/// The block the input node takes its frames from in manual rendering: `frameCount` frames in
/// a buffer list of the format given, or nil when there are none.
public typealias AVAudioIONodeInputBlock = (_ frameCount: AVAudioFrameCount) -> UnsafePointer<AudioBufferList>?

/// The input node's render side in manual rendering: the caller's block, asked for each render's frames.
final class ManualInputProcessor: AudioNodeProcessor {
    private let ask: AVAudioIONodeInputBlock
    private let channels: Int
    private let interleaved: Bool
    private let starved: InputStarved

    init(block: Lock<AVAudioIONodeInputBlock>, channels: Int, interleaved: Bool, starved: InputStarved) {
        ask = block.withLock { $0 }
        self.channels = channels
        self.interleaved = interleaved
        self.starved = starved
    }

    func render(input: AudioNodeInput, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
        guard let list = ask(AVAudioFrameCount(frames)) else {
            starved.set()
            out.update(repeating: 0, count: frames * channels)
            return (frames, .filled)
        }
        let buffers = UnsafeMutableAudioBufferListPointer(UnsafeMutablePointer(mutating: list))
        if interleaved {
            let given = buffers.count > 0 ? Int(buffers[0].mDataByteSize) / 4 / channels : 0
            let n = min(given, frames)
            if let data = buffers.count > 0 ? buffers[0].mData?.assumingMemoryBound(to: Float.self) : nil { out.update(from: data, count: n * channels) }
            if n < frames { (out + n * channels).update(repeating: 0, count: (frames - n) * channels) }
        } else {
            for channel in 0..<channels {
                let data = channel < buffers.count ? buffers[channel].mData?.assumingMemoryBound(to: Float.self) : nil
                let n = channel < buffers.count ? min(Int(buffers[channel].mDataByteSize) / 4, frames) : 0
                for frame in 0..<frames { out[frame * channels + channel] = frame < n ? data?[frame] ?? 0 : 0 }
            }
        }
        return (frames, .filled)
    }
}

/// The input node's render side: the recorded frames, silence where there are none yet.
final class InputProcessor: AudioNodeProcessor {
    private let ring: SampleRing
    private let channels: Int

    init(ring: SampleRing, channels: Int) {
        self.ring = ring
        self.channels = channels
    }

    func render(input: AudioNodeInput, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
        let available = min(ring.readable / channels, frames)
        var offset = 0
        if available > 0 {
            ring.consume(count: available * channels) { pointer, _, count in
                (out + offset).update(from: pointer, count: count)
                offset += count
            }
        }
        if available < frames { (out + available * channels).update(repeating: 0, count: (frames - available) * channels) }
        return (frames, .filled)
    }
}

/// The block an ``AVAudioSinkNode`` receives its input with: `frameCount` frames in the buffer
/// list (the node's format, deinterleaved float32) and their sample time; return `noErr`.
public typealias AVAudioSinkNodeReceiverBlock = (_ timestamp: UnsafePointer<AudioTimeStamp>, _ frameCount: AVAudioFrameCount,
                                                 _ inputData: UnsafePointer<AudioBufferList>) -> OSStatus

/// A node that hands what feeds it to a block and gives nothing on (Apple's `AVAudioSinkNode`):
/// connect the input node (or any node) to it. The block is called on the render thread, with
/// at most 1024 frames at a time, in the format of what feeds it. The graph pulls it after its
/// output at each render (a terminal), so it runs while the engine does.
open class AVAudioSinkNode: AVAudioNode {
    private let block: Lock<AVAudioSinkNodeReceiverBlock>

    /// A sink calling `block` with its input.
    public init(receiverBlock block: @escaping AVAudioSinkNodeReceiverBlock) {
        self.block = Lock(block)
        super.init()
    }

    override var role: NodeRole { .sink }

    override func makeCore(_ format: NodeFormat, _ context: NodeContext) throws -> any AudioNode {
        try AudioProcessorEffectNode(name: "sink", sampleRate: format.sampleRate, channels: format.channels,
                                     processor: SinkBlockProcessor(block: block, format: format, clock: context.clock, outputRate: context.outputRate))
    }
}

/// A sink node's render side: its block (taken once, when the node's part of the graph is made)
/// and its buffers. The graph pulls it as a terminal and drops what it gives.
final class SinkBlockProcessor: AudioNodeProcessor {
    private let receive: AVAudioSinkNodeReceiverBlock
    private let buffers: BlockBuffers

    init(block: Lock<AVAudioSinkNodeReceiverBlock>, format: NodeFormat, clock: EngineClock, outputRate: Double) {
        receive = block.withLock { $0 }
        buffers = BlockBuffers(format: format, clock: clock, outputRate: outputRate)
    }

    func render(input: AudioNodeInput, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
        let (n, end) = input.pull(into: out, frames: frames)
        var done = 0
        while done < n {
            let count = min(BlockBuffers.chunk, n - done)
            buffers.deinterleave(out + done * buffers.channels, count: count)
            var (list, stamp) = buffers.next(count)
            _ = receive(&stamp, AVAudioFrameCount(count), UnsafePointer(list))
            done += count
        }
        return (n, end)
    }
}

