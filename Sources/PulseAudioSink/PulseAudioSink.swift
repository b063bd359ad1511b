import BufferQueue
import CPulseAudio
import Dispatch
import Synchronization

/// An ``/BufferQueue/AudioSink`` on PulseAudio: libpulse's threaded main loop and a `pa_stream` (not
/// `pa_simple`, which cannot pause, call back or tell time).
///
/// The stream is interleaved float32 at the queue's rate and channel count; the server converts
/// for the device. Starting uncorks, pausing corks, flushing corks and flushes, an asynchronous
/// stop drains. Timing comes from the stream's timing info, so the queue's `currentTime` is what
/// is heard. When the server goes away the queue gets an error event within a second.
///
/// A sink with no ``Configuration-swift.struct/device`` follows the server's default sink, and
/// moves its stream itself so that nothing is lost or repeated: the stream is pinned to the
/// current default by name (the server does not move it, which would drop what it holds); when
/// the server's default changes (its server events), the sink opens a stream to the new default,
/// stops rendering into the old one at a known frame, lets the old one play out and continues on
/// the new one from the next frame. The queue gets ``/BufferQueue/AudioQueueEvent/outputDeviceChanged(_:)``.
/// When the default device is removed, the stream moves to the server's next default (what the
/// removed device held is lost with it); with no new default within a second, the queue gets the
/// error. A stream pinned to a named device is never moved: its removal is an error event.
// @unchecked: libpulse objects are touched only under the threaded main loop's lock or on its thread; the rest is atomic or locked.
public final class PulseAudioSink: AudioSink, @unchecked Sendable {
    /// How the sink connects and what it tells the server.
    public struct Configuration: Sendable {
        /// Server address (e.g. `unix:/run/user/1000/pulse/native`); nil = the default server.
        public var server: String?
        /// Sink (device) name; nil = the server's default, followed when it changes. A stream to a
        /// named sink is not moved: the sink's removal is an error event.
        public var device: String?
        /// Target latency: how much audio the server keeps buffered.
        public var targetLatency: Duration
        /// The application name the server shows.
        public var applicationName: String
        /// `media.name` of the stream.
        public var streamName: String
        /// `media.role` of the stream (`music`, `video`, `game`, `event`...).
        public var role: String

        /// A configuration; every value has the default the type's properties describe.
        public init(server: String? = nil, device: String? = nil, targetLatency: Duration = .milliseconds(50),
                    applicationName: String = "BufferQueue", streamName: String = "playback", role: String = "music") {
            self.server = server
            self.device = device
            self.targetLatency = targetLatency
            self.applicationName = applicationName
            self.streamName = streamName
            self.role = role
        }
    }

    /// What the sink was made with.
    public let configuration: Configuration
    private var connection: PulseConnection?
    private var stream: OpaquePointer?
    private var source: AudioRenderSource?
    private var format = AudioStreamDescription.float32(sampleRate: 44100, channels: 2)
    private var channelLayout = AudioChannelLayout.stereo
    /// Read by the write callback (main-loop thread, lock held); changed under the main-loop lock.
    private var pulling = false
    private var draining = false
    /// The sink the stream is pinned to while it follows the default (nil: pinned by the
    /// configuration, or no default known). Changed under the main-loop lock.
    private var following: String?
    /// Whether this connection reports server events to the sink (for following).
    private var subscribed = false
    /// Streams left behind by a move, playing out what they hold; closed when drained.
    private var retiring: [OpaquePointer] = []
    /// Where moves happen: never on the main loop's thread, which a new stream needs to connect.
    private let follower = DispatchQueue(label: "PulseAudioSink.follow")
    private let failureReported = Atomic<Bool>(false)
    /// Uptime nanoseconds of the last start() and of the first write after it (for measurements).
    private let startedAt = Atomic<UInt64>(0)
    private let firstWriteAt = Atomic<UInt64>(0)

    /// Time from the last ``start()`` to the first frames written to the server, once written.
    public var startToFirstWrite: Duration? {
        let start = startedAt.load(ordering: .acquiring), write = firstWriteAt.load(ordering: .acquiring)
        guard start > 0, write >= start else { return nil }
        return .nanoseconds(Int64(write - start))
    }

    /// A sink that connects to the server when a queue opens it.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    deinit { teardown() }

    /// Whether a PulseAudio server answers (the default one, or `server`).
    public static func serverIsReachable(server: String? = nil) -> Bool {
        let probe = PulseConnection(server: server, applicationName: "BufferQueue", role: "music")
        defer { probe.disconnect() }
        return (try? probe.connect()) != nil
    }

    // MARK: AudioSink

    public func open(format: AudioStreamDescription, source: AudioRenderSource) throws {
        try open(format: format, channelLayout: .default(channels: format.channelsPerFrame), source: source)
    }

    /// Opens a stream whose channel map follows `channelLayout` (Apple's labels mapped to
    /// PulseAudio's positions; unknown labels become auxiliary channels).
    public func open(format: AudioStreamDescription, channelLayout: AudioChannelLayout, source: AudioRenderSource) throws {
        self.channelLayout = channelLayout.channelCount == format.channelsPerFrame ? channelLayout : .default(channels: format.channelsPerFrame)
        guard format.isFloat32Interleaved else {
            throw AudioQueueError(.invalidPropertyValue, "the PulseAudio sink takes interleaved float32, not \(format)")
        }
        // A server that went away leaves a failed context: connect afresh (the server may be back).
        // (Before taking the source: tearing down releases it.)
        if connection?.hasFailed == true { teardown() }
        self.format = format
        setSource(source)
        failureReported.store(false, ordering: .relaxed)
        if connection == nil { try connectContext() }
        if configuration.device == nil { try followDefault() }
        try createStream()
    }

    public func start() throws {
        try withLock {
            guard let stream else { throw AudioQueueError(.cannotStart, "the PulseAudio stream is not open") }
            pulling = true
            draining = false
            firstWriteAt.store(0, ordering: .relaxed)
            startedAt.store(DispatchTime.now().uptimeNanoseconds, ordering: .releasing)
            fillWritable(stream)
            // The server acknowledges the uncork once the stream is running on the device: from
            // then its read index moves, and that is when the queue reports isRunning.
            let box = source.map { Unmanaged.passRetained(SourceBox($0)).toOpaque() }
            let uncork = pa_stream_cork(stream, 0, { _, success, userdata in
                guard let userdata else { return }
                let source = Unmanaged<SourceBox>.fromOpaque(userdata).takeRetainedValue().source
                if success != 0 { source.reportPlaybackStarted() }
            }, box)
            if uncork == nil, let box { Unmanaged<SourceBox>.fromOpaque(box).release() }
            releaseOperation(uncork)
            releaseOperation(pa_stream_trigger(stream, nil, nil))
        }
    }

    public func pause() {
        try? withLock {
            pulling = false
            if let stream { releaseOperation(pa_stream_cork(stream, 1, nil, nil)) }
        }
    }

    public func flush() {
        try? withLock {
            guard let stream else { return }
            let wasPulling = pulling
            releaseOperation(pa_stream_cork(stream, 1, nil, nil))
            releaseOperation(pa_stream_flush(stream, nil, nil))
            if wasPulling { releaseOperation(pa_stream_cork(stream, 0, nil, nil)) }
        }
    }

    public func drain(_ completion: @escaping @Sendable () -> Void) {
        let box = Unmanaged.passRetained(CompletionBox(completion)).toOpaque()
        let issued = (try? withLock { () -> Bool in
            guard let stream else { return false }
            draining = true
            releaseOperation(pa_stream_drain(stream, { _, _, userdata in
                guard let userdata else { return }
                let box = Unmanaged<CompletionBox>.fromOpaque(userdata).takeRetainedValue()
                DispatchQueue.global().async { box.completion() }
            }, box))
            return true
        }) ?? false
        if !issued {
            Unmanaged<CompletionBox>.fromOpaque(box).release()
            completion()
        }
    }

    public func close() {
        try? withLock {
            pulling = false
            streamReady = false
            if let stream { Self.disconnect(stream) }
            stream = nil
            for old in retiring { Self.disconnect(old) }
            retiring.removeAll()
        }
        setSource(nil)
    }

    /// Stops a stream's callbacks, disconnects it and drops the sink's reference (lock held).
    private static func disconnect(_ stream: OpaquePointer) {
        pa_stream_set_write_callback(stream, nil, nil)
        pa_stream_set_state_callback(stream, nil, nil)
        if pa_stream_get_state(stream) == PA_STREAM_READY { pa_stream_disconnect(stream) }
        pa_stream_unref(stream)
    }

    /// The server asked for data while the stream was corked and the sink declined: it will not
    /// ask again until it gets some, so fill what is writable now (lock held).
    private func fillWritable(_ stream: OpaquePointer) {
        let writable = pa_stream_writable_size(stream)
        if writable > 0 && writable != Int.max { write(writable) }
    }

    /// `source` is read by the main loop's thread (a context that fails reports to it): change it
    /// under the main loop's lock once that thread exists.
    private func setSource(_ new: AudioRenderSource?) {
        if (try? withLock({ source = new })) == nil { source = new }
    }

    /// The queue's `isRunning` turns true when the server acknowledges the uncork.
    public var reportsPlaybackStart: Bool { true }

    public var latencyFrames: Int { connection?.latencyFrames(of: stream, rate: format.sampleRate) ?? 0 }

    // MARK: connection

    private func withLock<R>(_ body: () throws -> R) throws -> R {
        guard let connection else { throw AudioQueueError(.sinkError, "the PulseAudio connection is closed") }
        return try connection.withLock(body)
    }

    private func connectContext() throws {
        let made = PulseConnection(server: configuration.server, applicationName: configuration.applicationName, role: configuration.role)
        connection = made
        made.onFailure = { [unowned self] message in reportFailure("the PulseAudio server connection ended: \(message)") }
        try made.connect()
    }

    /// Reports a failure to the queue once (from the main loop's thread, lock held).
    private func reportFailure(_ message: String) {
        guard let source, !failureReported.exchange(true, ordering: .relaxed) else { return }
        // Not on the main-loop thread: the queue will call back into the sink.
        DispatchQueue.global().async { source.reportError(AudioQueueError(.sinkError, message)) }
    }

    private func createStream() throws {
        try withLock {
            if let stream { Self.disconnect(stream) }
            stream = nil
            stream = try connectStream(to: configuration.device ?? following)
            streamReady = true
        }
    }

    /// A new corked stream connected to `device` (nil: wherever the server puts it), ready, with
    /// the sink's callbacks (lock held, not on the main loop's thread).
    private func connectStream(to device: String?) throws -> OpaquePointer {
        guard let connection, let context = connection.context else { throw AudioQueueError(.cannotStart, "not connected to PulseAudio") }
        let made = try connection.makeStream(name: configuration.streamName, role: configuration.role, format: format,
                                             channelMap: Self.channelMap(channelLayout), kind: "stream")
        let me = Unmanaged.passUnretained(self).toOpaque()
        pa_stream_set_state_callback(made, { stream, userdata in
            guard let userdata else { return }
            Unmanaged<PulseAudioSink>.fromOpaque(userdata).takeUnretainedValue().streamStateChanged(stream)
        }, me)
        pa_stream_set_write_callback(made, { _, bytes, userdata in
            guard let userdata else { return }
            let sink = Unmanaged<PulseAudioSink>.fromOpaque(userdata).takeUnretainedValue()
            sink.requestRealtimeOnce()
            sink.write(bytes)
        }, me)
        var attributes = pa_buffer_attr(maxlength: UInt32.max, tlength: latencyBytes(configuration.targetLatency, format: format), prebuf: UInt32.max, minreq: UInt32.max, fragsize: UInt32.max)
        // A stream to a named device is not swapped for another by the server when the device
        // goes away: the stream fails and the queue gets an error event (or, when it follows
        // the default, the sink moves it itself).
        let flags = pa_stream_flags_t(rawValue: PA_STREAM_START_CORKED.rawValue | PA_STREAM_ADJUST_LATENCY.rawValue
                                      | PA_STREAM_INTERPOLATE_TIMING.rawValue | PA_STREAM_AUTO_TIMING_UPDATE.rawValue
                                      | (device == nil ? 0 : PA_STREAM_DONT_MOVE.rawValue))
        guard pa_stream_connect_playback(made, device, &attributes, flags, nil, nil) >= 0 else {
            let message = String(cString: pa_strerror(pa_context_errno(context)))
            pa_stream_unref(made)
            throw AudioQueueError(.cannotStart, "PulseAudio could not connect the stream to \(device ?? "the default sink"): \(message)")
        }
        do {
            try connection.waitUntilReady(made, failure: "the PulseAudio stream to \(device ?? "the default sink") failed")
        } catch {
            Self.disconnect(made)
            throw error
        }
        return made
    }

    // MARK: following the default

    /// Pins the stream to the server's default sink and, once per connection, asks for the
    /// server's events, which tell when the default changes (lock not held).
    private func followDefault() throws {
        try withLock {
            guard let connection, let context = connection.context else { throw AudioQueueError(.cannotStart, "not connected to PulseAudio") }
            following = try connection.defaultSinkName()
            guard !subscribed else { return }
            subscribed = true
            let me = Unmanaged.passUnretained(self).toOpaque()
            pa_context_set_subscribe_callback(context, { context, _, _, userdata in
                guard let context, let userdata else { return }
                // A server event (its default may have changed) or a sink event (a removed sink
                // makes another the default): ask for the default.
                releaseOperation(pa_context_get_server_info(context, { _, info, userdata in
                    guard let userdata, let name = info?.pointee.default_sink_name else { return }
                    Unmanaged<PulseAudioSink>.fromOpaque(userdata).takeUnretainedValue().defaultIs(String(cString: name))
                }, userdata))
            }, me)
            let mask = pa_subscription_mask_t(rawValue: PA_SUBSCRIPTION_MASK_SERVER.rawValue | PA_SUBSCRIPTION_MASK_SINK.rawValue)
            releaseOperation(pa_context_subscribe(context, mask, nil, nil))
        }
    }

    /// The server's default sink is `name` (main loop's thread, lock held).
    private func defaultIs(_ name: String) {
        guard let current = following, current != name, stream != nil else { return }
        follower.async { self.move(to: name) }
    }

    /// Moves a stream that follows the default to `name`: the old stream is rendered into no more
    /// from here and plays out what it holds; the new one is rendered into from the next frame.
    private func move(to name: String) {
        let moved = try? withLock { () -> AudioRenderSource? in
            guard let old = stream, let current = following, current != name, !draining, let source else { return nil }
            // A default that cannot be played to is not followed: the stream stays (if its device
            // is gone, the failure reaches the queue).
            guard let made = try? connectStream(to: name) else { return nil }
            pa_stream_set_write_callback(old, nil, nil)
            pa_stream_set_state_callback(old, nil, nil)
            if pulling && streamReady && pa_stream_get_state(old) == PA_STREAM_READY {
                retiring.append(old)
                let me = Unmanaged.passUnretained(self).toOpaque()
                let drain = pa_stream_drain(old, { stream, _, userdata in
                    guard let stream, let userdata else { return }
                    // Closed off the main loop's thread: not from inside the stream's own operation.
                    let sink = Unmanaged<PulseAudioSink>.fromOpaque(userdata).takeUnretainedValue(), drained = Int(bitPattern: stream)
                    sink.follower.async { try? sink.withLock { sink.retire(drained) } }
                }, me)
                if drain == nil { retire(Int(bitPattern: old)) }
                releaseOperation(drain)
            } else {
                Self.disconnect(old)
            }
            stream = made
            streamReady = true
            following = name
            if pulling {
                fillWritable(made)
                releaseOperation(pa_stream_cork(made, 0, nil, nil))
                releaseOperation(pa_stream_trigger(made, nil, nil))
            }
            return source
        }
        moved?.reportDeviceChanged(name)
    }

    /// Closes a stream left behind by a move once it has played out (lock held); the stream is
    /// named by its address, which stays the sink's until then.
    private func retire(_ old: Int) {
        guard let index = retiring.firstIndex(where: { Int(bitPattern: $0) == old }) else { return }
        Self.disconnect(retiring.remove(at: index))
    }

    /// Set once the stream is ready; a failure after that (the device removed) is reported.
    private var streamReady = false

    /// What the main-loop thread (which renders in the write callback) got when it first rendered.
    private let scheduling = Lock<RenderThreadScheduling?>(nil)
    /// Whether the request was made: an atomic, so later write callbacks pass by without a lock.
    private let askedForRealtime = Atomic<Bool>(false)

    /// The first write callback asks real-time scheduling for libpulse's main-loop thread, the
    /// thread that renders (as PulseAudio's own clients ask for theirs); later ones do nothing.
    fileprivate func requestRealtimeOnce() {
        guard !askedForRealtime.load(ordering: .relaxed), !askedForRealtime.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let got = RealtimeScheduling.requestForCurrentThread()
        scheduling.withLock { $0 = got }
    }

    public var renderThreadScheduling: RenderThreadScheduling? { scheduling.withLock { $0 } }

    /// The stream's state changed (main loop's thread, lock held).
    private func streamStateChanged(_ changed: OpaquePointer?) {
        guard connection?.streamEnded(changed, ours: stream, wasReady: streamReady) == true else { return }
        streamReady = false
        if following != nil, let changed {
            // The default device went away: the server picks another default and the stream
            // moves there. If none comes within a second, the queue gets the error.
            let failed = Int(bitPattern: changed), message = connection?.lastError ?? ""
            follower.asyncAfter(deadline: .now() + 1) {
                try? self.withLock {
                    guard let stream = self.stream, Int(bitPattern: stream) == failed, !self.streamReady else { return }
                    self.reportFailure("the PulseAudio stream to the default sink \(self.following ?? "") ended: \(message) (was the device removed?); no other default came")
                }
            }
            return
        }
        reportFailure("the PulseAudio stream to \(configuration.device ?? "the default sink") ended: \(connection?.lastError ?? "") (was the device removed?)")
    }

    /// PulseAudio's channel map for a layout: each label to its position, anything else to AUXn.
    static func channelMap(_ layout: AudioChannelLayout) -> pa_channel_map {
        var map = pa_channel_map()
        map.channels = UInt8(min(layout.channelCount, Int(PA_CHANNELS_MAX)))
        var aux = 0
        withUnsafeMutableBytes(of: &map.map) { raw in
            let positions = raw.bindMemory(to: pa_channel_position_t.self)
            for (index, label) in layout.channelLabels.prefix(positions.count).enumerated() {
                let position: pa_channel_position_t
                switch label {
                case .mono: position = PA_CHANNEL_POSITION_MONO
                case .left: position = PA_CHANNEL_POSITION_FRONT_LEFT
                case .right: position = PA_CHANNEL_POSITION_FRONT_RIGHT
                case .center: position = PA_CHANNEL_POSITION_FRONT_CENTER
                case .lfeScreen: position = PA_CHANNEL_POSITION_LFE
                case .leftSurround: position = PA_CHANNEL_POSITION_REAR_LEFT
                case .rightSurround: position = PA_CHANNEL_POSITION_REAR_RIGHT
                case .centerSurround: position = PA_CHANNEL_POSITION_REAR_CENTER
                case .leftSurroundDirect: position = PA_CHANNEL_POSITION_SIDE_LEFT
                case .rightSurroundDirect: position = PA_CHANNEL_POSITION_SIDE_RIGHT
                case .unknown, .unused:
                    position = pa_channel_position_t(rawValue: PA_CHANNEL_POSITION_AUX0.rawValue + Int32(aux))
                    aux += 1
                }
                positions[index] = position
            }
        }
        return map
    }

    /// The server wants `bytes` more: render them (main-loop thread, lock held). Nothing allocates.
    private func write(_ bytes: Int) {
        guard let stream, pulling, !draining, let source else { return }
        var data: UnsafeMutableRawPointer?
        var size = bytes
        guard pa_stream_begin_write(stream, &data, &size) == 0, let data else { return }
        let channels = format.channelsPerFrame
        let frames = size / (4 * channels)
        _ = source.render(into: data.assumingMemoryBound(to: Float.self), frames: frames, fillSilence: true)
        pa_stream_write(stream, data, frames * 4 * channels, nil, 0, PA_SEEK_RELATIVE)
        if firstWriteAt.load(ordering: .relaxed) == 0 {
            firstWriteAt.store(DispatchTime.now().uptimeNanoseconds, ordering: .releasing)
        }
    }

    private func teardown() {
        close()
        connection?.disconnect()
        connection = nil
        subscribed = false
    }
}

private final class SourceBox {
    let source: AudioRenderSource
    init(_ source: AudioRenderSource) { self.source = source }
}

private final class CompletionBox: Sendable {
    let completion: @Sendable () -> Void
    init(_ completion: @escaping @Sendable () -> Void) { self.completion = completion }
}
