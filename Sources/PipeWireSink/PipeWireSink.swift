import BufferQueue
import CPipeWire
import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An ``/BufferQueue/AudioSink`` on PipeWire itself, not through its PulseAudio layer: a `pw_thread_loop`
/// and a `pw_stream`. libpipewire-0.3 (MIT) is opened when the first sink connects; a program
/// that links this module runs where it is not installed and gets an error naming it.
///
/// The stream is interleaved float32 at the queue's rate, channel count and speaker positions;
/// PipeWire converts for the device. The queue's frames are rendered on PipeWire's data thread
/// (real-time where PipeWire made it so) under the render thread's contract: no allocation,
/// lock or wait. Starting activates the stream, pausing deactivates it (what it holds stays),
/// an asynchronous stop drains it. The latency (`node.latency`) is the configuration's target;
/// `latencyFrames`, hence the queue's `currentTime`, comes from `pw_stream_get_time_n`. When
/// the server goes away, or the device the stream was pinned to is removed, the queue gets an
/// error event.
///
/// A stream with no ``Configuration-swift.struct/target`` follows the default sink as
/// PipeWire's session manager moves it.
public final class PipeWireSink: AudioSink {
    /// How the sink connects and what it tells the server.
    public struct Configuration: Sendable {
        /// The server's socket: a name in the runtime directory (`pipewire-0`) or an absolute
        /// path; nil = `$PIPEWIRE_REMOTE`, else `pipewire-0`.
        public var remote: String?
        /// The node to play to (a sink's `node.name` or object serial); nil = the default sink.
        /// A stream pinned to a node is not moved: the node's removal is an error event.
        public var target: String?
        /// How much audio the graph keeps ahead of the device (`node.latency`).
        public var targetLatency: Duration
        /// The application name the server shows.
        public var applicationName: String
        /// `media.name` of the stream.
        public var streamName: String
        /// `media.role` of the stream (`Music`, `Movie`, `Game`, `Notification`…).
        public var role: String
        /// How long connecting and opening a stream may take before they fail.
        public var timeout: Duration

        /// A configuration; every value has the default the type's properties describe.
        public init(remote: String? = nil, target: String? = nil, targetLatency: Duration = .milliseconds(50),
                    applicationName: String = "BufferQueue", streamName: String = "playback", role: String = "Music",
                    timeout: Duration = .seconds(2)) {
            self.remote = remote
            self.target = target
            self.targetLatency = targetLatency
            self.applicationName = applicationName
            self.streamName = streamName
            self.role = role
            self.timeout = timeout
        }
    }

    /// What the sink was made with.
    public let configuration: Configuration

    /// The connection and the stream: changed by the control methods and by a move to another
    /// device, under the lock. The loop's and the data thread's callbacks never take it (they
    /// reach the stream's ``RenderContext``; a move is done on `follower`).
    private struct State {
        var connection: OpaquePointer?
        var stream: OpaquePointer?
        var context: Unmanaged<RenderContext>?
        var format = AudioStreamDescription.float32(sampleRate: 48000, channels: 2)
        var layout = AudioChannelLayout.stereo
        var source: AudioRenderSource?
        /// Whether the default sink is watched on this connection.
        var watching = false
        /// The node the stream plays to, when it follows the default (nil: pinned, or no default known).
        var following: String?
        var started = false
        var draining = false
        /// Streams left behind by a move, playing out what they hold; closed when drained.
        var retiring: [(stream: OpaquePointer, context: Unmanaged<RenderContext>)] = []
    }
    private let state = Lock(State())
    private let scheduling = SchedulingRecord()
    /// Where moves to a new default device happen (never on the loop's thread, which a new
    /// stream needs in order to connect).
    private let follower = DispatchQueue(label: "PipeWireSink.follow")
    /// What the loop's thread reaches for default changes and failures: the sink, weakly.
    private let weakSelf = WeakPipeWireSink()

    /// A sink that connects to PipeWire when a queue opens it.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        weakSelf.sink.withLock { $0 = WeakReferenceBox(self) }
    }

    deinit {
        close()
        state.withLock { state in
            if let connection = state.connection { aq_pw_disconnect(connection) }
            state.connection = nil
        }
    }

    /// Whether PipeWire serves audio at `remote`: libpipewire opens, a server answers within
    /// `timeout`, and it has at least one audio sink (a server that runs for screen sharing
    /// only, or without a session manager, has none). When not, why not.
    public static func probe(remote: String? = nil, timeout: Duration = .milliseconds(500)) -> Result<Void, AudioQueueError> {
        do {
            let sinks = try nodes(remote: remote, timeout: timeout).filter { $0.mediaClass == "Audio/Sink" }
            guard !sinks.isEmpty else {
                return .failure(AudioQueueError(.sinkError, "the PipeWire server at \(place(remote)) has no audio sink (is its session manager, WirePlumber, running?)"))
            }
            return .success(())
        } catch let error as AudioQueueError {
            return .failure(error)
        } catch {
            return .failure(AudioQueueError(.sinkError, "\(error)"))
        }
    }

    /// Where a connection to `remote` goes, for messages.
    static func place(_ remote: String?) -> String {
        remote ?? getenv("PIPEWIRE_REMOTE").map { String(cString: $0) } ?? "pipewire-0"
    }

    /// The version of libpipewire in use, nil when it cannot be opened.
    public static var libraryVersion: String? {
        aq_pw_load() == 1 ? String(cString: aq_pw_library_version()) : nil
    }

    // MARK: AudioSink

    public func open(format: AudioStreamDescription, source: AudioRenderSource) throws {
        try open(format: format, channelLayout: .default(channels: format.channelsPerFrame), source: source)
    }

    /// Opens a stream whose channel positions follow `channelLayout` (Apple's labels mapped to
    /// PipeWire's positions; unknown labels become auxiliary channels).
    public func open(format: AudioStreamDescription, channelLayout: AudioChannelLayout, source: AudioRenderSource) throws {
        guard format.isFloat32Interleaved else {
            throw AudioQueueError(.invalidPropertyValue, "the PipeWire sink takes interleaved float32, not \(format)")
        }
        let layout = channelLayout.channelCount == format.channelsPerFrame ? channelLayout : .default(channels: format.channelsPerFrame)
        close()
        try state.withLock { state in
            let connection = try pipeWireConnection(reusing: state.connection, remote: configuration.remote,
                                                    application: configuration.applicationName, timeout: configuration.timeout)
            if connection != state.connection { state.watching = false }
            state.connection = connection
            state.format = format
            state.layout = layout
            state.source = source
            var target = configuration.target
            state.following = nil
            if target == nil {
                // Follow the default: the stream is pinned to it by name (so that the session
                // manager does not move it, dropping what it holds) and moved here when it changes.
                if !state.watching {
                    let box = Unmanaged.passUnretained(weakSelf).toOpaque()
                    _ = aq_pw_watch_default_sink(connection, { context, sink in
                        guard let context, let sink else { return }
                        Unmanaged<WeakPipeWireSink>.fromOpaque(context).takeUnretainedValue().defaultChanged(String(cString: sink))
                    }, box, Int32(Self.milliseconds(configuration.timeout)))
                    state.watching = true
                }
                var name = [CChar](repeating: 0, count: 256)
                aq_pw_default_sink(connection, &name, name.count)
                let current = String(nulTerminated: name)
                if !current.isEmpty { target = current; state.following = current }
            }
            let (stream, context) = try openStream(&state, target: target)
            state.stream = stream
            state.context = context
        }
    }

    /// Opens an inactive stream to `target` (nil: wherever the session manager links it).
    private func openStream(_ state: inout State, target: String?) throws -> (OpaquePointer, Unmanaged<RenderContext>) {
        guard let source = state.source else { throw AudioQueueError(.cannotStart, "the PipeWire sink has no source") }
        let format = state.format
        let weak = weakSelf
        let following = configuration.target == nil
        let context = Unmanaged.passRetained(RenderContext(source: source, channels: format.channelsPerFrame, scheduling: scheduling,
                                                           place: target ?? "the default sink", onFailure: { context, message in
            if following { weak.streamFailed(context, message) } else { context.reportFailure(message) }
        }))
        let callbacks = aq_pw_stream_callbacks(
            context: context.toOpaque(),
            render: { context, data, frames in
                guard let context, let data else { return }
                Unmanaged<RenderContext>.fromOpaque(context).takeUnretainedValue().render(into: data, frames: Int(frames))
            },
            capture: nil,
            started: { context in
                guard let context else { return }
                Unmanaged<RenderContext>.fromOpaque(context).takeUnretainedValue().source.reportPlaybackStarted()
            },
            drained: { context in
                guard let context else { return }
                Unmanaged<RenderContext>.fromOpaque(context).takeUnretainedValue().drained()
            },
            failed: { context, message in
                guard let context else { return }
                Unmanaged<RenderContext>.fromOpaque(context).takeUnretainedValue().failed(message.map { String(cString: $0) } ?? "")
            })
        var message = [CChar](repeating: 0, count: 512)
        let latency = UInt32(max(1, Self.milliseconds(configuration.targetLatency)) * Int(format.sampleRate) / 1000)
        guard let stream = aq_pw_stream_open_playback(state.connection, configuration.streamName, configuration.role, target,
                                                      UInt32(format.sampleRate), UInt32(format.channelsPerFrame), Self.positions(state.layout),
                                                      latency, callbacks, Int32(Self.milliseconds(configuration.timeout)), &message, message.count) else {
            context.release()
            throw AudioQueueError(.cannotStart, "PipeWire could not open a stream to \(target ?? "the default sink"): \(String(nulTerminated: message))")
        }
        return (stream, context)
    }

    // MARK: following the default

    /// The loop's thread: the default sink is now `name`.
    fileprivate func defaultChanged(_ name: String) {
        follower.async { self.move(to: name) }
    }

    /// Moves a stream that follows the default to `name`: the old stream stops being rendered
    /// into at a known frame and plays out what it holds; the new one is rendered into from the
    /// next frame on. Nothing is lost or repeated (unless the old device is gone: then what it
    /// held is lost, and the new one still continues from the next frame).
    @discardableResult
    private func move(to name: String) -> Bool {
        let moved = state.withLock { state -> AudioRenderSource? in
            guard let old = state.stream, let oldContext = state.context, let current = state.following,
                  !name.isEmpty, name != current, !state.draining else { return nil }
            // A default that cannot be played to is not followed (the stream stays; if its device
            // is gone, the failure reaches the queue).
            guard let (stream, context) = try? openStream(&state, target: name) else { return nil }
            let failed = oldContext.takeUnretainedValue().hasFailed
            if state.started && !failed {
                // The old stream renders no more once this returns; it plays out, then closes.
                let weak = weakSelf, retiring = oldContext.takeUnretainedValue()
                retiring.drainCompletion.withLock { $0 = { weak.retire(retiring) } }
                aq_pw_stream_drain(old)
                state.retiring.append((old, oldContext))
            } else {
                aq_pw_stream_close(old)
                oldContext.release()
            }
            if state.started { aq_pw_stream_start(stream) }
            state.stream = stream
            state.context = context
            state.following = name
            return state.source
        }
        moved?.reportDeviceChanged(name)
        return moved != nil
    }

    /// Closes a stream left behind by a move once it has played out.
    fileprivate func retire(_ context: RenderContext) {
        follower.async {
            let gone = self.state.withLock { state -> Unmanaged<RenderContext>? in
                guard let index = state.retiring.firstIndex(where: { $0.context.takeUnretainedValue() === context }) else { return nil }
                let (stream, context) = state.retiring.remove(at: index)
                aq_pw_stream_close(stream)
                return context
            }
            gone?.release()
        }
    }

    /// The loop's thread: a stream that follows the default failed (its device went away). The
    /// session manager picks another default: the move continues there. If none comes within a
    /// second, the queue gets the error.
    fileprivate func streamFailed(_ context: RenderContext, _ message: String) {
        follower.asyncAfter(deadline: .now() + 1) {
            let current = self.state.withLock { state -> String? in
                guard state.context?.takeUnretainedValue() === context, let connection = state.connection else { return nil }
                var name = [CChar](repeating: 0, count: 256)
                aq_pw_default_sink(connection, &name, name.count)
                return String(nulTerminated: name)
            }
            // Still on the failed stream: the default may have changed while a move could not
            // open a stream to it (the new device not ready yet); one more try, else the error.
            guard let current else { return }
            if !self.move(to: current) { context.reportFailure(message) }
        }
    }

    public func start() throws {
        try state.withLock { state in
            guard let stream = state.stream else { throw AudioQueueError(.cannotStart, "the PipeWire stream is not open") }
            state.started = true
            state.draining = false
            aq_pw_stream_start(stream)
        }
    }

    public func pause() {
        state.withLock { state in
            state.started = false
            if let stream = state.stream { aq_pw_stream_pause(stream) }
        }
    }

    public func flush() {
        state.withLock { state in
            if let stream = state.stream { aq_pw_stream_flush(stream) }
        }
    }

    public func drain(_ completion: @escaping @Sendable () -> Void) {
        let issued = state.withLock { state -> Bool in
            guard let stream = state.stream, let context = state.context?.takeUnretainedValue() else { return false }
            context.drainCompletion.withLock { $0 = completion }
            state.draining = true
            aq_pw_stream_drain(stream)
            return true
        }
        if !issued { completion() }
    }

    public func close() {
        let contexts = state.withLock { state -> [Unmanaged<RenderContext>] in
            if let stream = state.stream { aq_pw_stream_close(stream) }
            for (stream, _) in state.retiring { aq_pw_stream_close(stream) }
            let contexts = (state.context.map { [$0] } ?? []) + state.retiring.map(\.context)
            state.stream = nil
            state.context = nil
            state.retiring = []
            state.source = nil
            state.started = false
            state.draining = false
            return contexts
        }
        // No callback runs any more: a drain that did not finish completes now, as a closed
        // stream holds nothing.
        for context in contexts {
            context.takeUnretainedValue().drained()
            context.release()
        }
    }

    public var reportsPlaybackStart: Bool { true }

    public var latencyFrames: Int {
        state.withLock { state in state.stream.map { Int(aq_pw_stream_latency_frames($0)) } ?? 0 }
    }

    public var renderThreadScheduling: RenderThreadScheduling? { scheduling.value.withLock { $0 } }

    /// The server's id of the stream's node while it is open (for tests and diagnostics).
    public var nodeID: UInt32? {
        state.withLock { state in state.stream.map { aq_pw_stream_node_id($0) } }
    }

    // MARK: helpers

    static func milliseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        return Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000)
    }

    /// PipeWire's position names for a layout, separated by commas: each label to its
    /// position, anything else to AUXn.
    static func positions(_ layout: AudioChannelLayout) -> String {
        var aux = 0
        return layout.channelLabels.map { label -> String in
            switch label {
            case .mono: return "MONO"
            case .left: return "FL"
            case .right: return "FR"
            case .center: return "FC"
            case .lfeScreen: return "LFE"
            case .leftSurround: return "RL"
            case .rightSurround: return "RR"
            case .centerSurround: return "RC"
            case .leftSurroundDirect: return "SL"
            case .rightSurroundDirect: return "SR"
            case .unknown, .unused:
                defer { aux += 1 }
                return "AUX\(aux)"
            }
        }.joined(separator: ",")
    }
}

/// A connection to `remote`: `existing` while it has not failed, else a new one (the server may be
/// back). Throws when none can be made within `timeout`.
func pipeWireConnection(reusing existing: OpaquePointer?, remote: String?, application: String, timeout: Duration) throws -> OpaquePointer {
    if let existing {
        if aq_pw_connection_failed(existing) == 0 { return existing }
        aq_pw_disconnect(existing)
    }
    var message = [CChar](repeating: 0, count: 512)
    guard let made = aq_pw_connect(remote, application, Int32(PipeWireSink.milliseconds(timeout)), &message, message.count) else {
        throw AudioQueueError(.cannotStart, String(nulTerminated: message))
    }
    return made
}

/// What the render thread asked for and got, shared by the sink and its streams' contexts.
final class SchedulingRecord: Sendable {
    let value = Lock<RenderThreadScheduling?>(nil)
    let asked = Atomic<Bool>(false)
}

/// The sink, weakly, for the loop's thread (a callback in flight while the sink goes away finds nothing).
final class WeakPipeWireSink: Sendable {
    let sink = Lock<WeakReferenceBox<PipeWireSink>?>(nil)

    func defaultChanged(_ name: String) { sink.withLock { $0?.object }?.defaultChanged(name) }
    func streamFailed(_ context: RenderContext, _ message: String) { sink.withLock { $0?.object }?.streamFailed(context, message) }
    func retire(_ context: RenderContext) { sink.withLock { $0?.object }?.retire(context) }
}

/// A weak reference that can live in a lock.
struct WeakReferenceBox<Object: AnyObject> {
    weak var object: Object?
    init(_ object: Object) { self.object = object }
}

/// What PipeWire's threads reach through the stream's user data: the queue's render source and
/// the flags of one stream. Sendable: immutable but for atomics and locks that only the loop's
/// thread and the control methods take (never the data thread in steady state).
final class RenderContext: Sendable {
    let source: AudioRenderSource
    let channels: Int
    let scheduling: SchedulingRecord
    let place: String
    let drainCompletion = Lock<(@Sendable () -> Void)?>(nil)
    private let failure = Atomic<Bool>(false)
    private let failureReported = Atomic<Bool>(false)
    private let onFailure: @Sendable (RenderContext, String) -> Void

    init(source: AudioRenderSource, channels: Int, scheduling: SchedulingRecord, place: String,
         onFailure: @escaping @Sendable (RenderContext, String) -> Void) {
        self.source = source
        self.channels = channels
        self.scheduling = scheduling
        self.place = place
        self.onFailure = onFailure
    }

    /// PipeWire's data thread. The first call records how the thread is scheduled (and asks
    /// for real-time scheduling if PipeWire has not given it); later ones only render.
    func render(into data: UnsafeMutablePointer<Float>, frames: Int) {
        if !scheduling.asked.load(ordering: .relaxed), !scheduling.asked.exchange(true, ordering: .acquiringAndReleasing) {
            let got = RealtimeScheduling.keepOrRequestForCurrentThread()
            scheduling.value.withLock { $0 = got }
        }
        _ = source.render(into: data, frames: frames, fillSilence: true)
    }

    /// The loop's thread: the drain finished (or the stream closed).
    func drained() {
        guard let completion = drainCompletion.withLock({ value -> (@Sendable () -> Void)? in
            defer { value = nil }
            return value
        }) else { return }
        DispatchQueue.global().async { completion() }
    }

    /// Whether the stream failed (its device went away, the server ended).
    var hasFailed: Bool { failure.load(ordering: .acquiring) }

    /// The loop's thread: the stream failed.
    func failed(_ message: String) {
        guard !failure.exchange(true, ordering: .acquiringAndReleasing) else { return }
        onFailure(self, message)
    }

    /// Reports the failure to the queue once, off the loop's thread (the queue calls back into
    /// the sink).
    func reportFailure(_ message: String) {
        guard !failureReported.exchange(true, ordering: .relaxed) else { return }
        let source = self.source, place = self.place
        DispatchQueue.global().async {
            source.reportError(AudioQueueError(.sinkError, "the PipeWire stream to \(place) ended: \(message)"))
        }
    }
}
