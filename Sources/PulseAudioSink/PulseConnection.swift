import BufferQueue
import CPulseAudio

/// One connection to a PulseAudio server: libpulse's threaded main loop and a context, shared by
/// the sink, the source and the device list.
///
/// Everything that touches libpulse objects runs under the main loop's lock (``withLock(_:)``),
/// or on the main loop's own thread inside a callback, where the lock is already held.
// @unchecked: a libpulse main loop and context, touched only under the loop's lock (withLock) or on its thread.
final class PulseConnection: @unchecked Sendable {
    let server: String?
    let applicationName: String
    let role: String
    private(set) var mainloop: OpaquePointer?
    private(set) var context: OpaquePointer?
    /// Called on the main loop's thread once when the context fails or ends, with libpulse's reason.
    var onFailure: ((String) -> Void)?

    init(server: String?, applicationName: String, role: String) {
        self.server = server
        self.applicationName = applicationName
        self.role = role
    }

    deinit { disconnect() }

    /// Whether the context failed or ended (a server that went away).
    var hasFailed: Bool {
        guard let context, let mainloop else { return false }
        pa_threaded_mainloop_lock(mainloop)
        defer { pa_threaded_mainloop_unlock(mainloop) }
        let state = pa_context_get_state(context)
        return state == PA_CONTEXT_FAILED || state == PA_CONTEXT_TERMINATED
    }

    var isConnected: Bool { context != nil }

    /// Runs `body` under the main loop's lock (or directly on the main loop's thread).
    func withLock<R>(_ body: () throws -> R) throws -> R {
        guard let mainloop else { throw AudioQueueError(.sinkError, "the PulseAudio connection is closed") }
        let inLoop = pa_threaded_mainloop_in_thread(mainloop) != 0
        if !inLoop { pa_threaded_mainloop_lock(mainloop) }
        defer { if !inLoop { pa_threaded_mainloop_unlock(mainloop) } }
        return try body()
    }

    /// Waits for a main-loop signal (under the lock, not on the main loop's thread).
    func wait() { if let mainloop { pa_threaded_mainloop_wait(mainloop) } }

    /// Wakes ``wait()`` (from a callback).
    func signal() { if let mainloop { pa_threaded_mainloop_signal(mainloop, 0) } }

    /// libpulse's message for the context's last error.
    var lastError: String {
        guard let context else { return "not connected" }
        return String(cString: pa_strerror(pa_context_errno(context)))
    }

    /// A new, unconnected stream of interleaved float32 frames in `format` (lock held): its
    /// `media.name` is `name`, its `media.role` `role` when given. `kind` names it in the error.
    func makeStream(name: String, role: String?, format: AudioStreamDescription, channelMap: pa_channel_map,
                    kind: String) throws -> OpaquePointer {
        guard let context else { throw AudioQueueError(.cannotStart, "not connected to PulseAudio") }
        var spec = pa_sample_spec(format: PA_SAMPLE_FLOAT32LE, rate: UInt32(format.sampleRate), channels: UInt8(format.channelsPerFrame))
        var map = channelMap
        let properties = pa_proplist_new()
        defer { pa_proplist_free(properties) }
        pa_proplist_sets(properties, PA_PROP_MEDIA_NAME, name)
        if let role { pa_proplist_sets(properties, PA_PROP_MEDIA_ROLE, role) }
        guard let made = pa_stream_new_with_proplist(context, name, &spec, &map, properties) else {
            throw AudioQueueError(.cannotStart, "PulseAudio refused a \(format) \(kind): \(lastError)")
        }
        return made
    }

    /// Connects and returns once the context is ready.
    func connect() throws {
        guard let loop = pa_threaded_mainloop_new() else { throw AudioQueueError(.cannotStart, "libpulse could not make a main loop") }
        mainloop = loop
        let properties = pa_proplist_new()
        defer { pa_proplist_free(properties) }
        pa_proplist_sets(properties, PA_PROP_APPLICATION_NAME, applicationName)
        pa_proplist_sets(properties, PA_PROP_MEDIA_ROLE, role)
        guard let made = pa_context_new_with_proplist(pa_threaded_mainloop_get_api(loop), applicationName, properties) else {
            throw AudioQueueError(.cannotStart, "libpulse could not make a context")
        }
        context = made
        let me = Unmanaged.passUnretained(self).toOpaque()
        pa_context_set_state_callback(made, { context, userdata in
            guard let userdata else { return }
            Unmanaged<PulseConnection>.fromOpaque(userdata).takeUnretainedValue().contextStateChanged(context)
        }, me)
        pa_threaded_mainloop_lock(loop)
        defer { pa_threaded_mainloop_unlock(loop) }
        guard pa_threaded_mainloop_start(loop) == 0 else { throw AudioQueueError(.cannotStart, "libpulse could not start its main loop") }
        guard pa_context_connect(made, server, PA_CONTEXT_NOAUTOSPAWN, nil) >= 0 else {
            throw AudioQueueError(.cannotStart, "no PulseAudio server at \(server ?? "the default address"): \(lastError)")
        }
        while true {
            let state = pa_context_get_state(made)
            if state == PA_CONTEXT_READY { return }
            if state == PA_CONTEXT_FAILED || state == PA_CONTEXT_TERMINATED {
                throw AudioQueueError(.cannotStart, "no PulseAudio server answered at \(server ?? "the default address"): \(lastError)")
            }
            pa_threaded_mainloop_wait(loop)
        }
    }

    private var failureReported = false

    private func contextStateChanged(_ context: OpaquePointer?) {
        guard let context else { return }
        let state = pa_context_get_state(context)
        signal()
        if (state == PA_CONTEXT_FAILED || state == PA_CONTEXT_TERMINATED), !failureReported {
            failureReported = true
            onFailure?(String(cString: pa_strerror(pa_context_errno(context))))
        }
    }

    /// Waits (under the lock) until `operation` is done, then releases it. False when libpulse
    /// gave no operation (the connection is gone).
    func await(_ operation: OpaquePointer?) -> Bool {
        guard let operation else { return false }
        defer { pa_operation_unref(operation) }
        while pa_operation_get_state(operation) == PA_OPERATION_RUNNING {
            if hasFailedLocked { pa_operation_cancel(operation); return false }
            wait()
        }
        return true
    }

    private var hasFailedLocked: Bool {
        guard let context else { return true }
        let state = pa_context_get_state(context)
        return state == PA_CONTEXT_FAILED || state == PA_CONTEXT_TERMINATED
    }

    func disconnect() {
        if let context, let mainloop {
            pa_threaded_mainloop_lock(mainloop)
            pa_context_set_state_callback(context, nil, nil)
            pa_context_disconnect(context)
            pa_context_unref(context)
            pa_threaded_mainloop_unlock(mainloop)
        }
        context = nil
        if let mainloop {
            pa_threaded_mainloop_stop(mainloop)
            pa_threaded_mainloop_free(mainloop)
        }
        mainloop = nil
        failureReported = false
    }
}

/// Drops an operation reference; libpulse returns none when the connection is gone.
func releaseOperation(_ operation: OpaquePointer?) {
    if let operation { pa_operation_unref(operation) }
}

/// A target latency in bytes of `format` (at least 64 frames).
func latencyBytes(_ latency: Duration, format: AudioStreamDescription) -> UInt32 {
    let seconds = Double(latency.components.seconds) + Double(latency.components.attoseconds) * 1e-18
    return UInt32(max(Int(seconds * format.sampleRate), 64) * format.bytesPerFrame)
}

extension PulseConnection {
    /// Frames a stream holds (played: not yet heard; recorded: not yet delivered) at `rate`; 0 when
    /// unknown or closed.
    func latencyFrames(of stream: OpaquePointer?, rate: Double) -> Int {
        (try? withLock { () -> Int in
            guard let stream else { return 0 }
            var usec: pa_usec_t = 0
            var negative: Int32 = 0
            guard pa_stream_get_latency(stream, &usec, &negative) == 0, negative == 0 else { return 0 }
            return Int(Double(usec) * rate / 1_000_000)
        }) ?? 0
    }

    /// The server's default sink and source names ("" where it has none), asked and waited for
    /// (lock held, not on the main loop's thread).
    func serverDefaults() throws -> (sink: String, source: String) {
        final class Answer {
            var sink = "", source = ""
            let connection: PulseConnection
            init(_ connection: PulseConnection) { self.connection = connection }
        }
        guard let context else { throw AudioQueueError(.cannotStart, "not connected to PulseAudio") }
        let answer = Answer(self)
        let asked = withExtendedLifetime(answer) {
            self.await(pa_context_get_server_info(context, { _, info, userdata in
                guard let userdata else { return }
                let answer = Unmanaged<Answer>.fromOpaque(userdata).takeUnretainedValue()
                if let name = info?.pointee.default_sink_name { answer.sink = String(cString: name) }
                if let name = info?.pointee.default_source_name { answer.source = String(cString: name) }
                answer.connection.signal()
            }, Unmanaged.passUnretained(answer).toOpaque()))
        }
        guard asked else { throw AudioQueueError(.sinkError, "the PulseAudio server did not say its default devices: \(lastError)") }
        return (answer.sink, answer.source)
    }

    /// The server's default sink; nil when it has none.
    func defaultSinkName() throws -> String? {
        let name = try serverDefaults().sink
        return name.isEmpty ? nil : name
    }

    /// Waits (lock held, not on the main loop's thread) until a connecting stream is ready;
    /// throws `failure` followed by libpulse's reason when it fails or ends instead.
    func waitUntilReady(_ stream: OpaquePointer, failure: String) throws {
        while true {
            let state = pa_stream_get_state(stream)
            if state == PA_STREAM_READY { return }
            if state == PA_STREAM_FAILED || state == PA_STREAM_TERMINATED {
                throw AudioQueueError(.cannotStart, "\(failure): \(lastError)")
            }
            wait()
        }
    }

    /// Whether a stream that was ready has failed or ended (a removed device), after a state
    /// callback (main loop's thread); wakes waiters either way.
    func streamEnded(_ changed: OpaquePointer?, ours: OpaquePointer?, wasReady: Bool) -> Bool {
        signal()
        guard let changed, changed == ours, wasReady else { return false }
        let state = pa_stream_get_state(changed)
        return state == PA_STREAM_FAILED || state == PA_STREAM_TERMINATED
    }
}
