import BufferQueue
import CPipeWire
import Synchronization
import Dispatch

/// An ``/BufferQueue/AudioSource`` on PipeWire itself: a capture `pw_stream` from a source (a microphone, a
/// line in) or from what a sink plays (`stream.capture.sink`), for an ``/BufferQueue/AudioInputQueue``.
///
/// The stream is interleaved float32 at the queue's rate and channel count: PipeWire converts
/// from the device when they differ (a sink recorded at its own rate and channel count is bit
/// for bit what it played). What PipeWire's data thread captures is written into the queue's
/// capture ring there, under the render thread's contract. Starting activates the stream,
/// pausing deactivates it. When the server goes away, or the device the stream was pinned to is
/// removed, the queue gets an error event.
public final class PipeWireSource: AudioSource {
    /// How the source connects and what it records.
    public struct Configuration: Sendable {
        /// The server's socket (see ``PipeWireSink/Configuration-swift.struct/remote``).
        public var remote: String?
        /// The node to record: a source's `node.name`, or with ``monitor`` a sink's; nil = the
        /// default source (with ``monitor``: the default sink). A named node is not followed:
        /// its removal is an error event.
        public var target: String?
        /// Record what the sink ``target`` plays instead of a source.
        public var monitor: Bool
        /// How much audio PipeWire gathers per delivery (`node.latency`).
        public var targetLatency: Duration
        /// The application name the server shows.
        public var applicationName: String
        /// `media.name` of the stream.
        public var streamName: String
        /// How long connecting and opening the stream may take.
        public var timeout: Duration

        /// A configuration; every value has the default the type's properties describe.
        public init(remote: String? = nil, target: String? = nil, monitor: Bool = false, targetLatency: Duration = .milliseconds(20),
                    applicationName: String = "BufferQueue", streamName: String = "recording", timeout: Duration = .seconds(2)) {
            self.remote = remote
            self.target = target
            self.monitor = monitor
            self.targetLatency = targetLatency
            self.applicationName = applicationName
            self.streamName = streamName
            self.timeout = timeout
        }

        /// What the sink named `sink` plays (nil: the default sink).
        public static func monitor(of sink: String?, remote: String? = nil) -> Configuration {
            Configuration(remote: remote, target: sink, monitor: true)
        }
    }

    /// What the source was made with.
    public let configuration: Configuration

    private struct State {
        var connection: OpaquePointer?
        var stream: OpaquePointer?
        var context: Unmanaged<CaptureContext>?
    }
    private let state = Lock(State())

    /// A source that connects to PipeWire when an input queue opens it.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    deinit {
        close()
        state.withLock { state in
            if let connection = state.connection { aq_pw_disconnect(connection) }
            state.connection = nil
        }
    }

    /// The server's sources (monitors are not nodes of their own in PipeWire: record a sink with
    /// ``Configuration-swift.struct/monitor(of:remote:)``).
    public static func devices(remote: String? = nil) throws -> [AudioDeviceInfo] {
        try PipeWireSink.nodes(remote: remote).filter { $0.mediaClass == "Audio/Source" }.map {
            AudioDeviceInfo(name: $0.name, description: $0.description, sampleRate: $0.sampleRate, channels: $0.channels, isDefault: $0.isDefault)
        }
    }

    // MARK: AudioSource

    public func open(format requested: AudioStreamDescription, target: AudioCaptureTarget) throws -> AudioStreamDescription {
        let format = AudioStreamDescription.float32(sampleRate: requested.sampleRate, channels: requested.channelsPerFrame)
        close()
        try state.withLock { state in
            state.connection = try pipeWireConnection(reusing: state.connection, remote: configuration.remote,
                                                      application: configuration.applicationName, timeout: configuration.timeout)
            let place = configuration.target.map { configuration.monitor ? "what \($0) plays" : $0 }
                ?? (configuration.monitor ? "what the default sink plays" : "the default source")
            let context = Unmanaged.passRetained(CaptureContext(target: target, place: place))
            let callbacks = aq_pw_stream_callbacks(
                context: context.toOpaque(),
                render: nil,
                capture: { context, data, frames in
                    guard let context, let data else { return }
                    Unmanaged<CaptureContext>.fromOpaque(context).takeUnretainedValue().target.write(data, frames: Int(frames))
                },
                started: nil,
                drained: nil,
                failed: { context, message in
                    guard let context else { return }
                    Unmanaged<CaptureContext>.fromOpaque(context).takeUnretainedValue().failed(message.map { String(cString: $0) } ?? "")
                })
            var message = [CChar](repeating: 0, count: 512)
            let latency = UInt32(max(1, PipeWireSink.milliseconds(configuration.targetLatency)) * Int(format.sampleRate) / 1000)
            let positions = PipeWireSink.positions(.default(channels: format.channelsPerFrame))
            guard let stream = aq_pw_stream_open_capture(state.connection, configuration.streamName, configuration.target, configuration.monitor ? 1 : 0,
                                                         UInt32(format.sampleRate), UInt32(format.channelsPerFrame), positions, latency,
                                                         callbacks, Int32(PipeWireSink.milliseconds(configuration.timeout)), &message, message.count) else {
                context.release()
                throw AudioQueueError(.cannotStart, "PipeWire could not open a stream from \(place): \(String(nulTerminated: message))")
            }
            state.stream = stream
            state.context = context
        }
        return format
    }

    public func start() throws {
        try state.withLock { state in
            guard let stream = state.stream else { throw AudioQueueError(.cannotStart, "the PipeWire stream is not open") }
            aq_pw_stream_start(stream)
        }
    }

    public func pause() {
        state.withLock { state in
            if let stream = state.stream { aq_pw_stream_pause(stream) }
        }
    }

    public func close() {
        let context = state.withLock { state -> Unmanaged<CaptureContext>? in
            if let stream = state.stream { aq_pw_stream_close(stream) }
            state.stream = nil
            defer { state.context = nil }
            return state.context
        }
        context?.release()
    }

    public var latencyFrames: Int {
        state.withLock { state in state.stream.map { Int(aq_pw_stream_latency_frames($0)) } ?? 0 }
    }
}

/// What PipeWire's threads reach through a capture stream's user data.
final class CaptureContext: Sendable {
    let target: AudioCaptureTarget
    let place: String
    private let failureReported = Atomic<Bool>(false)

    init(target: AudioCaptureTarget, place: String) {
        self.target = target
        self.place = place
    }

    /// The loop's thread: reports the failure to the queue once, off that thread.
    func failed(_ message: String) {
        guard !failureReported.exchange(true, ordering: .relaxed) else { return }
        let target = self.target, place = self.place
        DispatchQueue.global().async {
            target.reportError(AudioQueueError(.sinkError, "the PipeWire stream from \(place) ended: \(message)"))
        }
    }
}
