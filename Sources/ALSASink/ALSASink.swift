#if canImport(Glibc)
import Glibc
#endif
import BufferQueue
import Dispatch
import CALSA
import Synchronization

/// An ``/BufferQueue/AudioSink`` on ALSA (libasound2, LGPL-2.1+), for machines without a sound server:
/// single-board computers, kiosks, containers.
///
/// It plays on a named PCM (`default`, `hw:0,0`, `plughw:1`, or one defined in an ALSA
/// configuration), interleaved, as float32 when the device takes it and as 16-bit integers
/// otherwise. The period and buffer sizes are chosen for ``Configuration/targetLatency``. A
/// thread of its own renders a period at a time and waits for the device on its poll descriptors
/// (and an eventfd for commands): nothing polls on a timer. An xrun is recovered with
/// `snd_pcm_recover` and reported as the queue's underrun event; a device that fails or is
/// removed is an error event. An asynchronous stop drains the device; `currentTime` comes from
/// `snd_pcm_delay`.
// @unchecked: the PCM handle and device-thread state are touched only by its device thread; control calls cross through a ConditionLock.
public final class ALSASink: AudioSink, @unchecked Sendable {
    /// The sample format written to the device.
    public enum SampleFormat: Sendable, Hashable {
        /// float32 when the device takes it, else 16-bit.
        case automatic
        /// 32-bit float samples.
        case float32
        /// 16-bit signed integer samples (converted from float32 by the sink).
        case int16
    }

    /// How the sink opens the device.
    public struct Configuration: Sendable {
        /// The PCM name: `default`, `hw:0,0`, `plughw:0`, or one defined in ``extraConfiguration``.
        public var device: String
        /// How much audio the device buffer holds.
        public var targetLatency: Duration
        /// Periods in the buffer (a period is rendered at a time).
        public var periods: Int
        /// The sample format to ask the device for.
        public var sampleFormat: SampleFormat
        /// ALSA configuration text added to the system's (`alsa.conf` and `~/.asoundrc`) for this
        /// sink only, e.g. `pcm.capture { type file; slave.pcm "null"; file "/tmp/out.raw"; format "raw" }`.
        public var extraConfiguration: String?

        /// A configuration; every value has the default the type's properties describe.
        public init(device: String = "default", targetLatency: Duration = .milliseconds(100), periods: Int = 4,
                    sampleFormat: SampleFormat = .automatic, extraConfiguration: String? = nil) {
            self.device = device
            self.targetLatency = targetLatency
            self.periods = periods
            self.sampleFormat = sampleFormat
            self.extraConfiguration = extraConfiguration
        }
    }

    /// What was agreed with the device at the last open.
    public struct Negotiated: Sendable, Hashable {
        /// The sample format in use.
        public var sampleFormat: SampleFormat
        /// Frames per period (the device's wake-up interval).
        public var periodFrames: Int
        /// Frames in the device's buffer.
        public var bufferFrames: Int
    }

    /// What the sink was made with.
    public let configuration: Configuration
    /// The device thread's commands and state (see ``DeviceControl``).
    private let control = ConditionLock(DeviceControl())
    private let negotiatedNow = Lock<Negotiated?>(nil)
    // Owned by the device thread while it runs (set up by open before it starts).
    private var pcm: OpaquePointer?
    private var source: AudioRenderSource?
    private var format = AudioStreamDescription.float32(sampleRate: 44100, channels: 2)
    private var periodFrames = 1024
    private var bufferFrames = 4096
    private var writesFloat = true
    private var scratch: [Float] = []
    private var scratch16: [Int16] = []
    private let int16Layout = PCMSampleLayout.signed(bits: 16, bytes: 2, alignedHigh: true, bigEndian: false)
    private let wakeFD: Int32
    private let delay = Atomic<Int>(0)
    private let delayStamp = Atomic<UInt64>(0)

    /// A sink that opens the PCM when a queue opens it.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        wakeFD = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
    }

    deinit {
        close()
        if wakeFD >= 0 { Glibc.close(wakeFD) }
    }

    /// The sample format, period and buffer the device agreed to (nil while closed).
    public var negotiated: Negotiated? { negotiatedNow.withLock { $0 } }

    // MARK: AudioSink

    public func open(format: AudioStreamDescription, source: AudioRenderSource) throws {
        guard format.isFloat32Interleaved else {
            throw AudioQueueError(.invalidPropertyValue, "the ALSA sink takes interleaved float32, not \(format)")
        }
        close()
        let handle = try Self.openPCM(configuration.device, stream: SND_PCM_STREAM_PLAYBACK, extra: configuration.extraConfiguration)
        do {
            try configure(handle, format: format)
        } catch {
            snd_pcm_close(handle)
            throw error
        }
        pcm = handle
        self.source = source
        self.format = format
        scratch = Array(repeating: 0, count: periodFrames * format.channelsPerFrame)
        scratch16 = writesFloat ? [] : Array(repeating: 0, count: periodFrames * format.channelsPerFrame)
        delay.store(0, ordering: .relaxed)
        control.withLock { $0.opened() }
        let agreed = Negotiated(sampleFormat: writesFloat ? .float32 : .int16, periodFrames: periodFrames, bufferFrames: bufferFrames)
        negotiatedNow.withLock { $0 = agreed }
        OwnThread.start(name: "ALSASink \(configuration.device)") { [self] in deviceLoop() }
    }

    public func start() throws {
        guard control.withLock({ $0.start() }) else {
            throw AudioQueueError(.cannotStart, "the ALSA device \(configuration.device) is not open")
        }
        // A parked device thread wakes on the condition; one waiting for the device, on the eventfd.
        wake()
    }

    /// Returns once the device thread has paused the device and waits for the next command (a
    /// render in progress finishes first), so a ``start()`` that follows always finds it waiting.
    public func pause() {
        guard control.withLock({ $0.pause() }) else { return }
        wake()
        control.wait(until: \.pauseTookEffect) { _ in }
    }

    public func flush() {
        guard control.withLock({ $0.requestFlush() }) else { return }
        wake()
        control.wait(until: \.flushTookEffect) { _ in }
    }

    public func drain(_ completion: @escaping @Sendable () -> Void) {
        if control.withLock({ $0.drain(completion) }) { wake() } else { completion() }
    }

    public func close() {
        guard control.withLock({ $0.close() }) else { return }
        wake()
        let pending = control.wait(until: \.threadEnded) { $0.takeCompletions() }
        if let pcm { snd_pcm_close(pcm) }
        pcm = nil
        source = nil
        negotiatedNow.withLock { $0 = nil }
        for completion in pending { completion() }
    }

    public var latencyFrames: Int {
        let frames = delay.load(ordering: .acquiring)
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds &- delayStamp.load(ordering: .acquiring)) / 1e9
        return max(0, frames - Int(elapsed * format.sampleRate))
    }

    // MARK: device thread

    private func wake() {
        var one: UInt64 = 1
        _ = withUnsafeBytes(of: &one) { Glibc.write(wakeFD, $0.baseAddress, 8) }
    }

    /// What the device thread got when it started.
    private let scheduling = Lock<RenderThreadScheduling?>(nil)
    public var renderThreadScheduling: RenderThreadScheduling? { scheduling.withLock { $0 } }

    private func deviceLoop() {
        guard let pcm, let source else {
            control.withLock { $0.threadExited() }
            return
        }
        // The device thread renders: it asks for real-time scheduling (and keeps what it gets).
        let got = RealtimeScheduling.requestForCurrentThread()
        scheduling.withLock { $0 = got }
        let channels = format.channelsPerFrame
        var pending = 0
        var offset = 0
        var applied = DeviceControl.Wanted.paused
        var hardwarePaused = false
        var failed = false
        loop: while true {
            var step = control.withLock { $0.nextStep(applied: applied, failed: failed) }
            if step == .park {
                // Parked until a command changes the step (the caller's pause waits for this).
                let (wasFailed, wasApplied) = (failed, applied)
                control.withLock { $0.setParked(true) }
                step = control.wait(until: { $0.nextStep(applied: wasApplied, failed: wasFailed) != .park }) { control -> DeviceControl.Step in
                    control.setParked(false)
                    return control.nextStep(applied: wasApplied, failed: wasFailed)
                }
            }
            let draining: Bool
            switch step {
            case .park:
                continue
            case .flush:
                snd_pcm_drop(pcm)
                snd_pcm_prepare(pcm)
                hardwarePaused = false
                pending = 0
                delay.store(0, ordering: .releasing)
                control.withLock { $0.flushed() }
                continue
            case .close:
                snd_pcm_drop(pcm)
                break loop
            case .pause:
                if snd_pcm_state(pcm) == SND_PCM_STATE_RUNNING, snd_pcm_pause(pcm, 1) == 0 { hardwarePaused = true }
                applied = .paused
                continue
            case .play(let drains):
                if hardwarePaused {
                    snd_pcm_pause(pcm, 0)
                    hardwarePaused = false
                }
                applied = drains ? .draining : .running
                draining = drains
            }
            if pending == 0 {
                if draining {
                    // Everything rendered is written: let the device play it out, then report.
                    snd_pcm_nonblock(pcm, 0)
                    if snd_pcm_state(pcm) == SND_PCM_STATE_PREPARED { snd_pcm_start(pcm) }
                    snd_pcm_drain(pcm)
                    snd_pcm_nonblock(pcm, 1)
                    snd_pcm_prepare(pcm)
                    delay.store(0, ordering: .releasing)
                    let done = control.withLock { $0.drained() }
                    applied = .paused
                    for completion in done { DispatchQueue.global().async { completion() } }
                    continue
                }
                let available = snd_pcm_avail_update(pcm)
                if available < 0 {
                    if !recover(pcm, Int32(available), source) { failed = true }
                    continue
                }
                if available < periodFrames {
                    if snd_pcm_state(pcm) == SND_PCM_STATE_PREPARED && snd_pcm_avail_update(pcm) < bufferFrames { snd_pcm_start(pcm) }
                    waitForDevice(pcm)
                    continue
                }
                // Render one period, unless a pause or close came meanwhile.
                guard control.withLock({ $0.beginRender() }) else { continue }
                scratch.withUnsafeMutableBufferPointer { buffer in
                    if let base = buffer.baseAddress { _ = source.render(into: base, frames: periodFrames, fillSilence: true) }
                }
                control.withLock { $0.endRender() }
                if !writesFloat {
                    scratch.withUnsafeBufferPointer { samples in
                        scratch16.withUnsafeMutableBytes { out in
                            if let from = samples.baseAddress, let to = out.baseAddress {
                                int16Layout.fromFloat(from, count: periodFrames * channels, into: to)
                            }
                        }
                    }
                }
                pending = periodFrames
                offset = 0
            }
            let written: Int = writesFloat
                ? scratch.withUnsafeBufferPointer { snd_pcm_writei(pcm, $0.baseAddress.map { $0 + offset * channels }, snd_pcm_uframes_t(pending)) }
                : scratch16.withUnsafeBufferPointer { snd_pcm_writei(pcm, $0.baseAddress.map { $0 + offset * channels }, snd_pcm_uframes_t(pending)) }
            if written == -Int(EAGAIN) {
                waitForDevice(pcm)
            } else if written < 0 {
                if !recover(pcm, Int32(written), source) { failed = true; pending = 0 }
            } else {
                pending -= written
                offset += written
                var frames: snd_pcm_sframes_t = 0
                if snd_pcm_delay(pcm, &frames) == 0 {
                    delay.store(max(Int(frames), 0), ordering: .releasing)
                    delayStamp.store(DispatchTime.now().uptimeNanoseconds, ordering: .releasing)
                }
            }
        }
        control.withLock { $0.threadExited() }
    }

    /// Recovers from an xrun or a suspend (reported as the queue's underrun); false when the device
    /// failed for good (reported as an error).
    private func recover(_ pcm: OpaquePointer, _ error: Int32, _ source: AudioRenderSource) -> Bool {
        if error == -EPIPE || error == -ESTRPIPE, snd_pcm_recover(pcm, error, 1) == 0 {
            if error == -EPIPE { source.reportDeviceUnderrun() }
            return true
        }
        let message = String(cString: snd_strerror(error))
        DispatchQueue.global().async {
            source.reportError(AudioQueueError(.sinkError, "the ALSA device \(self.configuration.device) failed: \(message) (was it removed?)"))
        }
        return false
    }

    /// Waits until the device can take a period or a command arrives (no timer: the poll wakes on
    /// either; a long deadline only guards against a device that stopped answering).
    private func waitForDevice(_ pcm: OpaquePointer) {
        let count = Int(snd_pcm_poll_descriptors_count(pcm))
        var fds = [pollfd](repeating: pollfd(), count: max(count, 0) + 1)
        let filled = fds.withUnsafeMutableBufferPointer { buffer -> Int32 in
            guard let base = buffer.baseAddress else { return 0 }
            return snd_pcm_poll_descriptors(pcm, base, UInt32(count))
        }
        fds[Int(max(filled, 0))] = pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)
        let total = Int(max(filled, 0)) + 1
        let deadline = Int32(max(2 * bufferFrames * 1000 / max(Int(format.sampleRate), 1), 100) + 1000)
        _ = fds.withUnsafeMutableBufferPointer { poll($0.baseAddress, nfds_t(total), deadline) }
        if fds[total - 1].revents != 0 {
            var value: UInt64 = 0
            _ = withUnsafeMutableBytes(of: &value) { Glibc.read(wakeFD, $0.baseAddress, 8) }
        }
    }

    // MARK: setup

    static func openPCM(_ name: String, stream: snd_pcm_stream_t, extra: String?) throws -> OpaquePointer {
        var handle: OpaquePointer?
        var result: Int32
        if let extra {
            var top: OpaquePointer?
            result = snd_config_update_ref(&top)
            guard result >= 0, let top else { throw openError(name, result) }
            defer { snd_config_unref(top) }
            var copy: OpaquePointer?
            guard snd_config_copy(&copy, top) >= 0, let copy else { throw openError(name, -ENOMEM) }
            defer { snd_config_delete(copy) }
            var input: OpaquePointer?
            result = extra.withCString { snd_input_buffer_open(&input, $0, extra.utf8.count) }
            guard result >= 0, let input else { throw openError(name, result) }
            result = snd_config_load(copy, input)
            snd_input_close(input)
            guard result >= 0 else {
                throw AudioQueueError(.cannotStart, "the ALSA configuration given for \(name) does not parse: \(String(cString: snd_strerror(result)))")
            }
            result = snd_pcm_open_lconf(&handle, name, stream, SND_PCM_NONBLOCK, copy)
        } else {
            result = snd_pcm_open(&handle, name, stream, SND_PCM_NONBLOCK)
        }
        guard result >= 0, let handle else { throw openError(name, result) }
        return handle
    }

    private static func openError(_ name: String, _ code: Int32) -> AudioQueueError {
        AudioQueueError(.cannotStart, "ALSA could not open the PCM \(name): \(String(cString: snd_strerror(code)))")
    }

    private func configure(_ pcm: OpaquePointer, format: AudioStreamDescription) throws {
        let name = configuration.device
        func check(_ result: Int32, _ what: String) throws {
            if result < 0 { throw AudioQueueError(.cannotStart, "the ALSA device \(name) refused \(what): \(String(cString: snd_strerror(result)))") }
        }
        var hw: OpaquePointer?
        try check(snd_pcm_hw_params_malloc(&hw), "hardware parameters")
        guard let hw else { throw AudioQueueError(.cannotStart, "ALSA could not allocate hardware parameters") }
        defer { snd_pcm_hw_params_free(hw) }
        try check(snd_pcm_hw_params_any(pcm, hw), "any configuration")
        try check(snd_pcm_hw_params_set_access(pcm, hw, SND_PCM_ACCESS_RW_INTERLEAVED), "interleaved access")
        let floatOK = snd_pcm_hw_params_test_format(pcm, hw, SND_PCM_FORMAT_FLOAT_LE) == 0
        switch configuration.sampleFormat {
        case .float32:
            guard floatOK else { throw AudioQueueError(.cannotStart, "the ALSA device \(name) does not take float32 samples; use int16 or a plughw: device") }
            writesFloat = true
        case .int16: writesFloat = false
        case .automatic: writesFloat = floatOK
        }
        try check(snd_pcm_hw_params_set_format(pcm, hw, writesFloat ? SND_PCM_FORMAT_FLOAT_LE : SND_PCM_FORMAT_S16_LE),
                  writesFloat ? "float32 samples" : "16-bit samples (use a plughw: device to convert)")
        try check(snd_pcm_hw_params_set_channels(pcm, hw, UInt32(format.channelsPerFrame)),
                  "\(format.channelsPerFrame) channels (use a plughw: device to convert)")
        var rate = UInt32(format.sampleRate)
        var direction: Int32 = 0
        try check(snd_pcm_hw_params_set_rate_near(pcm, hw, &rate, &direction), "the rate \(Int(format.sampleRate)) Hz")
        guard Double(rate) == format.sampleRate else {
            throw AudioQueueError(.cannotStart,
                "the ALSA device \(name) plays \(rate) Hz, not \(Int(format.sampleRate)) Hz: use a plughw: device, or a fixed sink format of \(rate) Hz")
        }
        let latencyMicros = UInt32(max(configuration.targetLatency.components.seconds * 1_000_000
                                       + configuration.targetLatency.components.attoseconds / 1_000_000_000_000, 5_000))
        var bufferTime = latencyMicros
        try check(snd_pcm_hw_params_set_buffer_time_near(pcm, hw, &bufferTime, &direction), "a buffer of \(latencyMicros) µs")
        var periodTime = bufferTime / UInt32(max(configuration.periods, 2))
        try check(snd_pcm_hw_params_set_period_time_near(pcm, hw, &periodTime, &direction), "a period of \(periodTime) µs")
        try check(snd_pcm_hw_params(pcm, hw), "the configuration")
        var period: snd_pcm_uframes_t = 0
        var buffer: snd_pcm_uframes_t = 0
        snd_pcm_hw_params_get_period_size(hw, &period, &direction)
        snd_pcm_hw_params_get_buffer_size(hw, &buffer)
        periodFrames = max(Int(period), 16)
        bufferFrames = max(Int(buffer), periodFrames)
        var sw: OpaquePointer?
        try check(snd_pcm_sw_params_malloc(&sw), "software parameters")
        guard let sw else { throw AudioQueueError(.cannotStart, "ALSA could not allocate software parameters") }
        defer { snd_pcm_sw_params_free(sw) }
        try check(snd_pcm_sw_params_current(pcm, sw), "software parameters")
        // Start once the buffer is full (or explicitly, when rendering waits for room), wake per period.
        try check(snd_pcm_sw_params_set_start_threshold(pcm, sw, snd_pcm_uframes_t(bufferFrames)), "a start threshold")
        try check(snd_pcm_sw_params_set_avail_min(pcm, sw, snd_pcm_uframes_t(periodFrames)), "a wake-up per period")
        try check(snd_pcm_sw_params(pcm, sw), "the software parameters")
        try check(snd_pcm_prepare(pcm), "to prepare")
    }
}

extension ALSASink {
    /// Whether the PCM `device` opens for playback (without blocking: a device another program
    /// holds is busy, not waited for); when not, why not.
    /// ALSA's own messages are not printed meanwhile (its error handler is process-wide).
    public static func probe(device: String = "default") -> Result<Void, AudioQueueError> {
        aq_alsa_set_quiet(1)
        defer { aq_alsa_set_quiet(0) }
        do {
            snd_pcm_close(try openPCM(device, stream: SND_PCM_STREAM_PLAYBACK, extra: nil))
            return .success(())
        } catch let error as AudioQueueError {
            return .failure(error)
        } catch {
            return .failure(AudioQueueError(.cannotStart, "\(error)"))
        }
    }

    /// ALSA's playback PCMs as its name hints list them (`default`, `null`, `hw:…`, `plughw:…`,
    /// defined ones), with their descriptions; the first is `default` when it exists.
    public static func devices() -> [AudioDeviceInfo] {
        var hints: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
        guard snd_device_name_hint(-1, "pcm", &hints) >= 0, let hints else { return [] }
        defer { snd_device_name_free_hint(hints) }
        var devices: [AudioDeviceInfo] = []
        var index = 0
        while let hint = hints[index] {
            index += 1
            func value(_ key: String) -> String? {
                guard let raw = snd_device_name_get_hint(hint, key) else { return nil }
                defer { free(raw) }
                return String(cString: raw)
            }
            guard let name = value("NAME") else { continue }
            let direction = value("IOID")
            if let direction, direction != "Output" { continue }
            let description = (value("DESC") ?? name).split(separator: "\n", omittingEmptySubsequences: false).joined(separator: " — ")
            devices.append(AudioDeviceInfo(name: name, description: description, isDefault: name == "default"))
        }
        return devices
    }
}
