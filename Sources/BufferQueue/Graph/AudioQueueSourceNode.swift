import Dispatch
import Synchronization

/// An ``AudioQueue`` as a live source of a graph that plays through a sink: the node is the
/// queue's sink. Everything the queue does stays as it is — buffers enqueued with trims, start
/// times and packet descriptions, decoding ahead on its worker, its callbacks and events — and the
/// graph's render pulls the queue's render stage on the output sink's thread.
///
/// ```swift
/// let input = try AudioQueueSourceNode(name: "music", sampleRate: 48_000, channels: 2)
/// let queue = try AudioQueue(format: file.dataFormat,
///                            configuration: .init(sink: input, sinkFormat: input.sinkFormat)) { … }
/// try graph.connect(input, to: graph.mainMixer)
/// try graph.start(sink: PulseAudioSink())
/// try queue.start()
/// ```
///
/// The queue converts what it decodes to the node's format (``sinkFormat``). While the queue is
/// not started, or has nothing to play, the node adds silence (the queue counts an underrun when
/// it was playing); it never ends on its own. The queue's `drain` (an asynchronous stop) completes
/// once its last frames were pulled into the mix: what the output's own sink still holds is the
/// graph's latency.
// @unchecked: `source` is written only while the state says no render can read it (closed or paused), read only while rendering.
public final class AudioQueueSourceNode: AudioNode, AudioSink, @unchecked Sendable {
    private enum State: Int {
        case closed, paused, started, rendering, pausing
    }
    private let state = Atomic<Int>(State.closed.rawValue)
    private let paused = DispatchSemaphore(value: 0)
    private var source: AudioRenderSource?

    /// A node named `name` whose queue plays at `sampleRate` with `channels` channels.
    public override init(name: String = "queue", sampleRate: Double, channels: Int) throws {
        try super.init(name: name, sampleRate: sampleRate, channels: channels)
    }

    /// The sink format to give the queue's configuration: the node's.
    public var sinkFormat: AudioQueue.SinkFormat { .fixed(sampleRate: sampleRate, channels: channels) }

    // MARK: AudioSink (the queue's side)

    public func open(format: AudioStreamDescription, source: AudioRenderSource) throws {
        guard format.sampleRate == sampleRate && format.channelsPerFrame == channels else {
            throw AudioQueueError(.sinkError, "\(name) takes \(channels) ch at \(sampleRate) Hz and the queue opened it with "
                + "\(format.channelsPerFrame) ch at \(format.sampleRate) Hz; create the queue with sinkFormat: node.sinkFormat")
        }
        pause()
        self.source = source
        state.store(State.paused.rawValue, ordering: .releasing)
    }

    public func start() throws {
        guard state.compareExchange(expected: State.paused.rawValue, desired: State.started.rawValue, ordering: .acquiringAndReleasing).exchanged
                || state.load(ordering: .acquiring) == State.started.rawValue else {
            throw AudioQueueError(.sinkError, "\(name) was started before the queue opened it")
        }
    }

    /// Stops the graph from pulling the queue; if a render of it is under way, waits for its end.
    public func pause() {
        while true {
            let now = state.load(ordering: .acquiring)
            switch State(rawValue: now) {
            case .started:
                if state.compareExchange(expected: now, desired: State.paused.rawValue, ordering: .acquiringAndReleasing).exchanged { return }
            case .rendering:
                if state.compareExchange(expected: now, desired: State.pausing.rawValue, ordering: .acquiringAndReleasing).exchanged {
                    paused.wait()   // signalled by the render as it ends
                    return
                }
            default:
                return
            }
        }
    }

    public func flush() {}

    public func drain(_ completion: @escaping @Sendable () -> Void) { completion() }

    public func close() {
        pause()
        source = nil
        state.store(State.closed.rawValue, ordering: .releasing)
    }

    public var latencyFrames: Int { 0 }

    // MARK: the graph's side

    override func render(_ program: GraphProgram, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
        guard state.compareExchange(expected: State.started.rawValue, desired: State.rendering.rawValue, ordering: .acquiring).exchanged else {
            return (0, .starved)
        }
        _ = source?.render(into: out, frames: frames, fillSilence: true)
        if !state.compareExchange(expected: State.rendering.rawValue, desired: State.started.rawValue, ordering: .releasing).exchanged {
            // A pause came while rendering: it waits for this.
            state.store(State.paused.rawValue, ordering: .releasing)
            paused.signal()
        }
        return (frames, .filled)
    }
}
