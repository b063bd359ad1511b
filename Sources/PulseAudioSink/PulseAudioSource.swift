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
// @unchecked: libpulse objects are touched only under the threaded main loop's lock or on its thread; the rest is atomic or locked.
public final class PulseAudioSource: AudioSource, @unchecked Sendable {
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
    private var connection: PulseConnection?
    private var stream: OpaquePointer?
    private var target: AudioCaptureTarget?
    private var format = AudioStreamDescription.float32(sampleRate: 44100, channels: 2)
    private var streamReady = false
    private let failureReported = Atomic<Bool>(false)

    /// A source that connects to the server when an input queue opens it.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    deinit { teardown() }

    // MARK: AudioSource

    public func open(format requested: AudioStreamDescription, target: AudioCaptureTarget) throws -> AudioStreamDescription {
        if connection?.hasFailed == true { teardown() }
        if connection == nil {
            let made = PulseConnection(server: configuration.server, applicationName: configuration.applicationName, role: "production")
            connection = made
            made.onFailure = { [unowned self] message in reportFailure("the PulseAudio server connection ended: \(message)") }
            try made.connect()
        }
        guard let connection else { throw AudioQueueError(.cannotStart, "not connected to PulseAudio") }
        let rate = configuration.serverResamples ? requested.sampleRate : try deviceRate(connection) ?? requested.sampleRate
        format = .float32(sampleRate: rate, channels: requested.channelsPerFrame)
        failureReported.store(false, ordering: .relaxed)
        try connection.withLock {
            self.target = target
            try createStream(connection)
        }
        return format
    }

    public func start() throws {
        try withLock {
            guard let stream else { throw AudioQueueError(.cannotStart, "the PulseAudio record stream is not open") }
            releaseOperation(pa_stream_cork(stream, 0, nil, nil))
        }
    }

    public func pause() {
        // Under the lock: when this returns, the read callback (which runs with it held) is not running.
        try? withLock {
            if let stream { releaseOperation(pa_stream_cork(stream, 1, nil, nil)) }
        }
    }

    public func close() {
        try? withLock {
            streamReady = false
            if let stream {
                pa_stream_set_read_callback(stream, nil, nil)
                pa_stream_set_state_callback(stream, nil, nil)
                pa_stream_disconnect(stream)
                pa_stream_unref(stream)
            }
            stream = nil
            target = nil
        }
    }

    /// Frames captured by the device and not yet delivered.
    public var latencyFrames: Int { connection?.latencyFrames(of: stream, rate: format.sampleRate) ?? 0 }

    // MARK: stream

    private func withLock<R>(_ body: () throws -> R) throws -> R {
        guard let connection else { throw AudioQueueError(.sinkError, "the PulseAudio connection is closed") }
        return try connection.withLock(body)
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

    /// Makes and connects the record stream (lock held).
    private func createStream(_ connection: PulseConnection) throws {
        if let stream { pa_stream_disconnect(stream); pa_stream_unref(stream) }
        stream = nil
        let made = try connection.makeStream(name: configuration.streamName, role: nil, format: format,
                                             channelMap: PulseAudioSink.channelMap(.default(channels: format.channelsPerFrame)),
                                             kind: "record stream")
        stream = made
        let me = Unmanaged.passUnretained(self).toOpaque()
        pa_stream_set_state_callback(made, { stream, userdata in
            guard let userdata else { return }
            Unmanaged<PulseAudioSource>.fromOpaque(userdata).takeUnretainedValue().streamStateChanged(stream)
        }, me)
        pa_stream_set_read_callback(made, { stream, _, userdata in
            guard let userdata, let stream else { return }
            Unmanaged<PulseAudioSource>.fromOpaque(userdata).takeUnretainedValue().read(stream)
        }, me)
        var attributes = pa_buffer_attr(maxlength: UInt32.max, tlength: UInt32.max, prebuf: UInt32.max, minreq: UInt32.max,
                                        fragsize: latencyBytes(configuration.targetLatency, format: format))
        let flags = pa_stream_flags_t(rawValue: PA_STREAM_START_CORKED.rawValue | PA_STREAM_ADJUST_LATENCY.rawValue
                                      | PA_STREAM_INTERPOLATE_TIMING.rawValue | PA_STREAM_AUTO_TIMING_UPDATE.rawValue
                                      | (configuration.device == nil ? 0 : PA_STREAM_DONT_MOVE.rawValue))
        guard pa_stream_connect_record(made, configuration.device, &attributes, flags) >= 0 else {
            throw AudioQueueError(.cannotStart, "PulseAudio could not record from \(configuration.device ?? "the default source"): \(connection.lastError)")
        }
        try connection.waitUntilReady(made, failure: "the PulseAudio record stream on \(configuration.device ?? "the default source") failed")
        streamReady = true
    }

    /// The server has data (main loop's thread, lock held): hand it to the queue. Nothing allocates.
    private func read(_ stream: OpaquePointer) {
        guard let target else { return }
        let frameBytes = format.bytesPerFrame
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

    private func streamStateChanged(_ changed: OpaquePointer?) {
        guard connection?.streamEnded(changed, ours: stream, wasReady: streamReady) == true else { return }
        streamReady = false
        reportFailure("the PulseAudio record stream on \(configuration.device ?? "the default source") ended: \(connection?.lastError ?? "") (was the device removed?)")
    }

    private func reportFailure(_ message: String) {
        guard let target, !failureReported.exchange(true, ordering: .relaxed) else { return }
        DispatchQueue.global().async { target.reportError(AudioQueueError(.sinkError, message)) }
    }

    private func teardown() {
        close()
        connection?.disconnect()
        connection = nil
    }
}
