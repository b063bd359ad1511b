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
/// Sendable by construction: the queue's render source is handed over under a lock the render
/// side only tries (never waits on), and the run state is atomic.
public final class AudioQueueSourceNode: AudioNode, AudioSink {
    /// The node as its graph sees it.
    public let graphNode: AudioGraphNode
    private let link: QueueNodeLink

    /// A node named `name` whose queue plays at `sampleRate` with `channels` channels.
    public init(name: String = "queue", sampleRate: Double, channels: Int) throws {
        let link = QueueNodeLink()
        self.link = link
        graphNode = try AudioGraphNode(name: name, sampleRate: sampleRate, channels: channels, kind: .source,
                                       renderer: QueueSourceRenderer(link: link))
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
        link.source.withLock { $0 = source }
        link.state.store(QueueNodeLink.State.paused.rawValue, ordering: .releasing)
    }

    public func start() throws {
        guard link.state.compareExchange(expected: QueueNodeLink.State.paused.rawValue, desired: QueueNodeLink.State.started.rawValue,
                                    ordering: .acquiringAndReleasing).exchanged
                || link.state.load(ordering: .acquiring) == QueueNodeLink.State.started.rawValue else {
            throw AudioQueueError(.sinkError, "\(name) was started before the queue opened it")
        }
    }

    /// Stops the graph from pulling the queue; if a render of it is under way, waits for its end.
    public func pause() {
        typealias State = QueueNodeLink.State
        while true {
            let now = link.state.load(ordering: .acquiring)
            switch State(rawValue: now) {
            case .started:
                if link.state.compareExchange(expected: now, desired: State.paused.rawValue, ordering: .acquiringAndReleasing).exchanged { return }
            case .rendering:
                if link.state.compareExchange(expected: now, desired: State.pausing.rawValue, ordering: .acquiringAndReleasing).exchanged {
                    link.paused.wait()   // signalled by the render as it ends
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
        link.source.withLock { $0 = nil }
        link.state.store(QueueNodeLink.State.closed.rawValue, ordering: .releasing)
    }

    public var latencyFrames: Int { 0 }
}

/// What a queue source node and its render side share: the run state, the queue's render source,
/// and the semaphore a pause waits on while a render ends.
final class QueueNodeLink: Sendable {
    enum State: Int {
        case closed, paused, started, rendering, pausing
    }
    let state = Atomic<Int>(State.closed.rawValue)
    let paused = DispatchSemaphore(value: 0)
    /// Set while no render can read it (closed or paused); the render side only tries the lock,
    /// which is free whenever it renders (a pause waits for the render's end before it writes).
    let source = Lock<AudioRenderSource?>(nil)
}

/// A queue source node's render side: pulls the queue's render stage while the node is started.
final class QueueSourceRenderer: AudioNodeRenderer {
    private let link: QueueNodeLink

    init(link: QueueNodeLink) {
        self.link = link
    }

    func render(_ program: GraphProgram, node: AudioGraphNode, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
        typealias State = QueueNodeLink.State
        guard link.state.compareExchange(expected: State.started.rawValue, desired: State.rendering.rawValue, ordering: .acquiring).exchanged else {
            return (0, .starved)
        }
        _ = link.source.withLockIfAvailable { $0?.render(into: out, frames: frames, fillSilence: true) }
        if !link.state.compareExchange(expected: State.rendering.rawValue, desired: State.started.rawValue, ordering: .releasing).exchanged {
            // A pause came while rendering: it waits for this.
            link.state.store(State.paused.rawValue, ordering: .releasing)
            link.paused.signal()
        }
        return (frames, .filled)
    }
}
