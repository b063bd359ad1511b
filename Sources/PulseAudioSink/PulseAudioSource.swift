import BufferQueue
import CPulseAudio
import Dispatch
import Synchronization

/// An ``/BufferQueue/AudioSource`` on PulseAudio: a record stream on a source (a microphone, a line in) or on
/// a sink's monitor (what the sink plays), for an ``/BufferQueue/AudioInputQueue``.
///
/// The stream is interleaved float32 with the queue's channel count, at the source device's own
/// rate: when the queue records another rate, its resampler converts (so the conversion is the
/// library's, exact in length, not the server's). Starting uncorks, pausing corks. A hole the
/// server reports in the stream (data it dropped) reaches the queue as lost frames, so the
/// timeline stays true. When the server goes away, or the named device is removed, the queue gets
/// an error event and stops.
///
/// Sendable by construction: the libpulse handles are state under a lock (taken before the main
/// loop's, never on its thread), and the main loop's callbacks reach only an immutable context
/// per stream.
public final class PulseAudioSource: AudioSource {
    /// How the source connects and what it tells the server.
    public struct Configuration: Sendable {
        /// Server address (e.g. `unix:/run/user/1000/pulse/native`); nil = the default server.
        public var server: String?
        /// Source name (``PulseAudioSource/devices(server:)``), or a sink's monitor
        /// (`<sink name>.monitor`); nil = the server's default source.
        public var device: String?
        /// How much audio the server gathers before it sends (the record stream's fragment size).
        public var targetLatency: Duration
        /// Record at the rate the queue asks for and let the server resample (false: at the
        /// device's rate, resampled by the queue's converter).
        public var serverResamples: Bool
        /// The application name the server shows.
        public var applicationName: String
        /// `media.name` of the stream.
        public var streamName: String

        /// A configuration; every value has the default the type's properties describe.
        public init(server: String? = nil, device: String? = nil, targetLatency: Duration = .milliseconds(20),
                    serverResamples: Bool = false, applicationName: String = "BufferQueue", streamName: String = "recording") {
            self.server = server
            self.device = device
            self.targetLatency = targetLatency
            self.serverResamples = serverResamples
            self.applicationName = applicationName
            self.streamName = streamName
        }

        /// The monitor of the sink named `sink` (records what it plays).
        public static func monitor(of sink: String, server: String? = nil) -> Configuration {
            Configuration(server: server, device: sink + ".monitor")
        }
    }

    /// What the source was made with.
    public let configuration: Configuration

    private struct State {
        var connection: PulseConnection?
        var stream: OpaquePointer?
        /// The stream's callbacks' user data (retained until they are cleared).
        var context: Unmanaged<RecordContext>?
        var format = AudioStreamDescription.float32(sampleRate: 44100, channels: 2)
    }
    private let state = Lock(State())
    /// The open stream's context, for the connection's failure (taken under the main loop's lock,
    /// never held while waiting for it).
    private let current = Lock<RecordContext?>(nil)

    /// A source that connects to the server when an input queue opens it.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    deinit {
        state.withLock { state in
            close(&state)
            state.connection?.disconnect()
            state.connection = nil
        }
    }

    // MARK: AudioSource

    public func open(format requested: AudioStreamDescription, target: AudioCaptureTarget) throws -> AudioStreamDescription {
        try state.withLock { state in
            if state.connection?.hasFailed == true {
                close(&state)
                state.connection?.disconnect()
                state.connection = nil
            }
            if state.connection == nil {
                let made = PulseConnection(server: configuration.server, applicationName: configuration.applicationName, role: "production")
                state.connection = made
                let current = self.current
                made.onFailure = { message in
                    current.withLock { $0 }?.failed("the PulseAudio server connection ended: \(message)")
                }
                try made.connect()
            }
            guard let connection = state.connection else { throw AudioQueueError(.cannotStart, "not connected to PulseAudio") }
            let rate = configuration.serverResamples ? requested.sampleRate : try deviceRate(connection) ?? requested.sampleRate
            state.format = .float32(sampleRate: rate, channels: requested.channelsPerFrame)
            try connection.withLock { try createStream(&state, connection, target: target) }
            return state.format
        }
    }

    public func start() throws {
        try state.withLock { state in
            guard let connection = state.connection, let stream = state.stream else {
                throw AudioQueueError(.cannotStart, "the PulseAudio record stream is not open")
            }
            try connection.withLock { releaseOperation(pa_stream_cork(stream, 0, nil, nil)) }
        }
    }

    public func pause() {
        // Under the main loop's lock: when this returns, the read callback (which runs with it held) is not running.
        state.withLock { state in
            guard let connection = state.connection, let stream = state.stream else { return }
            try? connection.withLock { releaseOperation(pa_stream_cork(stream, 1, nil, nil)) }
        }
    }

    public func close() {
        state.withLock { close(&$0) }
    }

    /// Frames captured by the device and not yet delivered.
    public var latencyFrames: Int {
        state.withLock { state in state.connection?.latencyFrames(of: state.stream, rate: state.format.sampleRate) ?? 0 }
    }

    // MARK: stream

    /// Disconnects the stream and lets its context go once its callbacks are cleared.
    private func close(_ state: inout State) {
        if let connection = state.connection, state.stream != nil {
            try? connection.withLock { Self.disconnectStream(&state) }
        }
        state.stream = nil   // (gone with its connection when that is closed)
        state.context?.release()
        state.context = nil
        current.withLock { $0 = nil }
    }

    /// Clears the stream's callbacks, then disconnects and drops it (main loop's lock held); its
    /// context is released by the caller, outside the lock.
    private static func disconnectStream(_ state: inout State) {
        guard let stream = state.stream else { return }
        state.context?.takeUnretainedValue().streamReady.store(false, ordering: .relaxed)
        pa_stream_set_read_callback(stream, nil, nil)
        pa_stream_set_state_callback(stream, nil, nil)
        pa_stream_disconnect(stream)
        pa_stream_unref(stream)
        state.stream = nil
    }

    /// The sample rate of the source device (under no lock).
    private func deviceRate(_ connection: PulseConnection) throws -> Double? {
        final class Box { var rate: UInt32 = 0; let connection: PulseConnection; init(_ c: PulseConnection) { connection = c } }
        let box = Box(connection)
        let me = Unmanaged.passUnretained(box).toOpaque()
        return try connection.withLock { () -> Double? in
            guard let context = connection.context else { return nil }
            let name = configuration.device ?? "@DEFAULT_SOURCE@"
            let found = connection.await(pa_context_get_source_info_by_name(context, name, { _, info, eol, userdata in
                guard let userdata else { return }
                let box = Unmanaged<Box>.fromOpaque(userdata).takeUnretainedValue()
                if eol == 0, let info { box.rate = info.pointee.sample_spec.rate }
                box.connection.signal()
            }, me))
            guard found, box.rate > 0 else {
                throw AudioQueueError(.cannotStart, "PulseAudio has no source named \(name): \(connection.lastError)")
            }
            return Double(box.rate)
        }
    }

    /// Makes and connects the record stream (main loop's lock held).
    private func createStream(_ state: inout State, _ connection: PulseConnection, target: AudioCaptureTarget) throws {
        Self.disconnectStream(&state)
        state.context?.release()
        state.context = nil
        let format = state.format
        let place = configuration.device ?? "the default source"
        let made = try connection.makeStream(name: configuration.streamName, role: nil, format: format,
                                             channelMap: PulseAudioSink.channelMap(.default(channels: format.channelsPerFrame)),
                                             kind: "record stream")
        let context = RecordContext(connection: connection, stream: made, target: target, frameBytes: format.bytesPerFrame, place: place)
        let retained = Unmanaged.passRetained(context)
        state.stream = made
        state.context = retained
        current.withLock { $0 = context }
        pa_stream_set_state_callback(made, { stream, userdata in
            guard let userdata else { return }
            Unmanaged<RecordContext>.fromOpaque(userdata).takeUnretainedValue().stateChanged(stream)
        }, retained.toOpaque())
        pa_stream_set_read_callback(made, { stream, _, userdata in
            guard let userdata, let stream else { return }
            Unmanaged<RecordContext>.fromOpaque(userdata).takeUnretainedValue().read(stream)
        }, retained.toOpaque())
        var attributes = pa_buffer_attr(maxlength: UInt32.max, tlength: UInt32.max, prebuf: UInt32.max, minreq: UInt32.max,
                                        fragsize: latencyBytes(configuration.targetLatency, format: format))
        let flags = pa_stream_flags_t(rawValue: PA_STREAM_START_CORKED.rawValue | PA_STREAM_ADJUST_LATENCY.rawValue
                                      | PA_STREAM_INTERPOLATE_TIMING.rawValue | PA_STREAM_AUTO_TIMING_UPDATE.rawValue
                                      | (configuration.device == nil ? 0 : PA_STREAM_DONT_MOVE.rawValue))
        guard pa_stream_connect_record(made, configuration.device, &attributes, flags) >= 0 else {
            throw AudioQueueError(.cannotStart, "PulseAudio could not record from \(place): \(connection.lastError)")
        }
        try connection.waitUntilReady(made, failure: "the PulseAudio record stream on \(place) failed")
        context.streamReady.store(true, ordering: .relaxed)
    }
}

/// What the main loop's callbacks of one record stream reach: immutable but for two flags.
final class RecordContext: Sendable {
    let connection: PulseConnection
    /// The stream's address, to tell its state changes from others'.
    private let streamAddress: UInt
    let target: AudioCaptureTarget
    let frameBytes: Int
    /// Where it records, for messages.
    let place: String
    /// Connected and not yet closed (a state change after this is the device going away).
    let streamReady = Atomic<Bool>(false)
    private let failureReported = Atomic<Bool>(false)

    init(connection: PulseConnection, stream: OpaquePointer, target: AudioCaptureTarget, frameBytes: Int, place: String) {
        self.connection = connection
        streamAddress = UInt(bitPattern: stream)
        self.target = target
        self.frameBytes = frameBytes
        self.place = place
    }

    /// The server has data (main loop's thread, its lock held): hand it to the queue. Nothing allocates.
    func read(_ stream: OpaquePointer) {
        while pa_stream_readable_size(stream) > 0 {
            var data: UnsafeRawPointer?
            var bytes = 0
            guard pa_stream_peek(stream, &data, &bytes) == 0, bytes > 0 else { return }
            if let data {
                target.write(data.assumingMemoryBound(to: Float.self), frames: bytes / frameBytes)
            } else {
                // A hole: the server has no data for this stretch.
                target.reportLost(frames: bytes / frameBytes)
            }
            pa_stream_drop(stream)
        }
    }

    /// A state change of a stream (main loop's thread): a ready stream that ended is a failure.
    func stateChanged(_ changed: OpaquePointer?) {
        guard connection.streamEnded(changed, ours: OpaquePointer(bitPattern: streamAddress),
                                     wasReady: streamReady.load(ordering: .relaxed)) else { return }
        streamReady.store(false, ordering: .relaxed)
        failed("the PulseAudio record stream on \(place) ended: \(connection.lastError) (was the device removed?)")
    }

    /// Reports a failure to the queue once, off the main loop's thread.
    func failed(_ message: String) {
        guard !failureReported.exchange(true, ordering: .relaxed) else { return }
        let target = self.target
        DispatchQueue.global().async { target.reportError(AudioQueueError(.sinkError, message)) }
    }
}
