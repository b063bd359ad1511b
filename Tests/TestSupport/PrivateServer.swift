import Foundation

/// A private PulseAudio daemon for one test: its own runtime directory, a float32 null sink named
/// `out` at the test's rate, run in the foreground as the test's child. What was played is
/// recorded from the sink's monitor with parec, which is bit-exact for float32 at the same rate.
///
/// Every wait here is on an event with a deadline: the daemon is ready when it logs "Daemon
/// startup complete" on its stderr pipe, the recorder is connected when its first bytes arrive on
/// its stdout pipe, recorded audio wakes waiters as it arrives, and a killed process is gone when
/// its pipe reaches end of file. (Foundation's `waitUntilExit` is not used: with a pipe attached
/// it spins on the calling thread.)
public final class PrivateServer: @unchecked Sendable {
    public static let binary = ["/usr/bin/pulseaudio", "/usr/local/bin/pulseaudio"].first { FileManager.default.isExecutableFile(atPath: $0) }
    public static let parec = ["/usr/bin/parec", "/usr/local/bin/parec"].first { FileManager.default.isExecutableFile(atPath: $0) }
    public static var missing: Bool { binary == nil || parec == nil }

    /// The daemon's life as its log pipe tells it.
    public enum DaemonState: Sendable { case starting, ready, gone }

    public let runtime: String
    public let rate: Int
    public let channels: Int
    public var address: String { "unix:\(runtime)/pulse/native" }
    /// The environment of a program that talks to this server, and `more` (a program's own settings).
    public func environment(_ more: [String: String] = [:]) -> [String: String] {
        ["PULSE_SERVER": address, "HOME": runtime, "XDG_RUNTIME_DIR": runtime].merging(more) { $1 }
    }
    private var daemon: Process?
    private var daemonState = Watched(DaemonState.gone)
    /// A recorder per sink, by the sink's name: parec and what it delivered.
    private var recorders: [String: (process: Process, recording: Watched<CapturedAudio>)] = [:]

    private init(rate: Int, channels: Int) throws {
        self.rate = rate
        self.channels = channels
        runtime = NSTemporaryDirectory() + "aq-pulse-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    /// A new server, ready to play to.
    public static func start(rate: Int = 44100, channels: Int = 2) async throws -> PrivateServer {
        let server = try PrivateServer(rate: rate, channels: channels)
        try await server.startDaemon()
        return server
    }

    public struct ServerError: Error, CustomStringConvertible { public let description: String; public init(_ d: String) { description = d } }

    /// The daemon's last log lines (to tell why a connection ended).
    public let logTail = Watched<[String]>([])

    /// Starts the daemon in the runtime directory (again after ``kill()``: same address) and
    /// returns once it has said that it is ready.
    public func startDaemon() async throws {
        try? FileManager.default.removeItem(atPath: "\(runtime)/pulse/native")
        // A killed daemon may not be reaped yet: its pid file would name a live (zombie) process.
        try? FileManager.default.removeItem(atPath: "\(runtime)/pulse/pid")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binary ?? "/usr/bin/pulseaudio")
        process.arguments = ["-n", "--daemonize=no", "-v", "--log-target=stderr", "--exit-idle-time=-1", "--disallow-exit",
                             "--load=module-native-protocol-unix",
                             "--load=module-null-sink sink_name=out format=float32le rate=\(rate) channels=\(channels) norewinds=1"]
        process.environment = ["XDG_RUNTIME_DIR": runtime, "HOME": runtime, "PATH": "/usr/bin:/bin"]
        process.standardOutput = FileHandle.nullDevice
        let log = Pipe()
        process.standardError = log
        let state = Watched(DaemonState.starting)
        daemonState = state
        let tail = logTail
        let reader = LineReader(log.fileHandleForReading, onEnd: { state.update { $0 = .gone } }) { line in
            tail.update { lines in
                lines.append(line)
                if lines.count > 40 { lines.removeFirst(lines.count - 40) }
            }
            if line.contains("Daemon startup complete") { state.update { $0 = .ready } }
        }
        try process.run()
        daemon = process
        reader.start()
        guard await state.wait(timeout: .seconds(15), until: { $0 != .starting }), state.current == .ready else {
            throw ServerError("pulseaudio did not say it was ready within 15 s; its last lines:\n\(logTail.current.suffix(8).joined(separator: "\n"))")
        }
    }

    /// Starts recording `sink`'s monitor; returns once parec delivers audio (it is connected).
    public func startRecording(sink: String = "out") async throws {
        let recording = Watched(CapturedAudio())
        let parec = Process()
        parec.executableURL = URL(fileURLWithPath: Self.parec ?? "/usr/bin/parec")
        parec.arguments = ["-d", "\(sink).monitor", "--format=float32le", "--rate=\(rate)", "--channels=\(channels)", "--raw", "--latency-msec=20"]
        parec.environment = environment
        parec.standardError = FileHandle.nullDevice
        let pipe = Pipe()
        parec.standardOutput = pipe
        readRawFloats(pipe.fileHandleForReading, channels: channels, into: recording)
        try parec.run()
        recorders[sink] = (parec, recording)
        guard await recording.wait(timeout: .seconds(15), until: { $0.bytesSeen > 0 || $0.ended }), !recording.current.ended else {
            throw ServerError("parec delivered nothing from \(sink).monitor within 15 s")
        }
    }

    /// The environment that points a client (pactl, parec) at this server.
    private var environment: [String: String] {
        ["PULSE_SERVER": address, "HOME": runtime, "XDG_RUNTIME_DIR": runtime]
    }

    /// Waits until at least `frames` frames of sound have been recorded from `sink`.
    public func waitForSound(frames: Int, sink: String = "out", timeout: Duration = .seconds(10)) async -> Bool {
        guard let recording = recorders[sink]?.recording else { return false }
        return await recording.wait(timeout: timeout) { $0.soundFrames >= frames }
    }

    /// Stops recording `sink` once `soundFrames` frames of sound and then 0.1 s of silence have
    /// arrived (parec lags behind the server; a loaded machine can starve it), at most 10 s;
    /// returns the interleaved samples captured.
    public func stopRecording(soundFrames: Int = 1, sink: String = "out") async -> [Float] {
        guard let (recorder, recording) = recorders.removeValue(forKey: sink) else { return [] }
        let tail = rate / 10 * channels
        _ = await recording.wait(timeout: .seconds(10)) { r in
            r.soundFrames >= soundFrames && r.samples.count >= tail && r.samples.suffix(tail).allSatisfy { $0 == 0 }
        }
        // Children inherit the spawning thread's signal mask, in which the Swift runtime blocks
        // SIGINT and SIGTERM: only SIGKILL reaches them.
        Foundation.kill(recorder.processIdentifier, SIGKILL)
        _ = await recording.wait(timeout: .seconds(5)) { $0.ended }
        return recording.current.samples
    }

    /// What has been recorded from `sink` so far.
    public func captured(sink: String = "out") -> [Float] { recorders[sink]?.recording.current.samples ?? [] }

    /// Runs `pactl` against this server; throws with its message when it fails.
    @discardableResult
    public func pactl(_ arguments: [String]) async throws -> String {
        let result = try await runTool("/usr/bin/pactl", arguments, environment: environment, timeout: .seconds(20))
        guard result.status == 0 else {
            throw ServerError("pactl \(arguments.joined(separator: " ")) failed: \(String(decoding: result.errorOutput, as: UTF8.self))")
        }
        return String(decoding: result.output, as: UTF8.self)
    }

    /// Loads another float32 null sink at the server's rate; returns the module's index (for
    /// ``pactl(_:)`` `unload-module`). The server's default sink stays what it was, and its
    /// default source is set to what it was: a server with monitors only takes the default
    /// sink's monitor as its default source, and would move a recorder of a monitor with it when
    /// the default sink changes.
    public func addSink(_ name: String) async throws -> Int {
        let sink = try await pactl(["get-default-sink"]).trimmingCharacters(in: .whitespacesAndNewlines)
        let source = try await pactl(["get-default-source"]).trimmingCharacters(in: .whitespacesAndNewlines)
        let index = try await pactl(["load-module", "module-null-sink", "sink_name=\(name)", "format=float32le", "rate=\(rate)",
                                     "channels=\(channels)", "norewinds=1"])
        try await pactl(["set-default-sink", sink])
        try await pactl(["set-default-source", source])
        guard let module = Int(index.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw ServerError("pactl load-module printed no module index: \(index)")
        }
        return module
    }

    /// Kills the daemon (SIGKILL: see `stopRecording`) and returns once it is gone.
    public func kill() async {
        guard let daemon else { return }
        Foundation.kill(daemon.processIdentifier, SIGKILL)
        _ = await daemonState.wait(timeout: .seconds(5)) { $0 == .gone }
        self.daemon = nil
    }

    deinit {
        for (recorder, _) in recorders.values { Foundation.kill(recorder.processIdentifier, SIGKILL) }
        if let daemon { Foundation.kill(daemon.processIdentifier, SIGKILL) }
        try? FileManager.default.removeItem(atPath: runtime)
    }
}

/// What a recorder (parec, pw-record) delivered so far, and how many of its frames are not silent.
public struct CapturedAudio: Sendable {
    public var samples: [Float] = []
    public var soundFrames = 0
    public var bytesSeen = 0
    public var ended = false
}

extension CapturedAudio {
    /// Appends `chunk` (whole frames of interleaved float32) and counts its frames of sound.
    mutating func append(_ chunk: Data, channels: Int) {
        chunk.withUnsafeBytes { raw in
            let floats = raw.bindMemory(to: Float.self)
            samples.append(contentsOf: floats)
            var frame = 0
            while frame + channels <= floats.count {
                var sound = false
                for channel in 0..<channels where floats[frame + channel] != 0 { sound = true }
                if sound { soundFrames += 1 }
                frame += channels
            }
        }
        bytesSeen += chunk.count
    }
}

/// Reads raw interleaved float32 from a recorder's output on a thread of its own into `recording`
/// until the pipe closes (then `ended`).
public func readRawFloats(_ handle: FileHandle, channels: Int, into recording: Watched<CapturedAudio>) {
    Thread {
        var pending = Data()
        while true {
            let chunk = handle.availableData
            if chunk.isEmpty {
                recording.update { $0.ended = true }
                break
            }
            pending.append(chunk)
            let whole = pending.count / (4 * channels) * (4 * channels)
            guard whole > 0 else { continue }
            let frames = pending.prefix(whole)
            pending.removeFirst(whole)
            recording.update { $0.append(Data(frames), channels: channels) }
        }
    }.start()
}

/// Follows a file a recorder writes raw interleaved float32 into (its standard output redirected
/// to the file, so that it never waits for a reader, as it would on a full pipe): what is appended
/// goes into `recording` as the kernel reports each write (inotify), and once more at ``finish()``.
public final class RawFloatFileFollower: @unchecked Sendable {   // @unchecked: `handle` and `pending` are touched only under `lock`
    private let lock = NSLock()
    private let handle: FileHandle
    private var pending = Data()
    private let channels: Int
    private let recording: Watched<CapturedAudio>
    private var watcher: DirectoryWatcher?

    public init(path: String, channels: Int, into recording: Watched<CapturedAudio>) throws {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw CocoaError(.fileReadNoSuchFile) }
        self.handle = handle
        self.channels = channels
        self.recording = recording
        let name = (path as NSString).lastPathComponent
        watcher = try DirectoryWatcher((path as NSString).deletingLastPathComponent, everyWrite: true) { [weak self] changed in
            if changed == name { self?.readAppended() }
        }
    }

    private func readAppended() {
        lock.lock()
        defer { lock.unlock() }
        pending.append(handle.readDataToEndOfFile())
        let whole = pending.count / (4 * channels) * (4 * channels)
        guard whole > 0 else { return }
        let frames = Data(pending.prefix(whole))
        pending.removeFirst(whole)
        recording.update { $0.append(frames, channels: channels) }
    }

    /// Reads what is left (the recorder has exited) and marks the recording ended.
    public func finish() {
        watcher?.stop()
        readAppended()
        recording.update { $0.ended = true }
    }
}

/// Removes every run of silent frames (pauses) and returns what is left.
public func withoutSilence(_ samples: [Float], channels: Int) -> [Float] {
    var out: [Float] = []
    out.reserveCapacity(samples.count)
    for i in 0..<(samples.count / channels) {
        let frame = samples[(i * channels)..<((i + 1) * channels)]
        if frame.contains(where: { $0 != 0 }) { out += frame }
    }
    return out
}

/// A test signal never exactly zero: a sine riding on an offset, different per channel.
public func signal(frames: Int, channels: Int = 2, phase: Int = 0) -> [Float] {
    var out = [Float](repeating: 0, count: frames * channels)
    for i in 0..<frames {
        for c in 0..<channels {
            out[i * channels + c] = 0.2 + 0.15 * Float(sin(Double(i + phase) * 0.031 * Double(c + 1))) + Float(c) * 0.05
        }
    }
    return out
}

/// Where ALSA's `pulse` PCM plugin (Debian's `libasound2-plugins`) is, if installed: an ALSA
/// device with a clock, on a private server.
public enum ALSAPulsePlugin {
    public static let path = ["/usr/lib/x86_64-linux-gnu/alsa-lib", "/usr/lib/aarch64-linux-gnu/alsa-lib", "/usr/lib/alsa-lib"]
        .map { $0 + "/libasound_module_pcm_pulse.so" }
        .first { FileManager.default.fileExists(atPath: $0) }

    /// ALSA configuration text for a PCM named `name` that plays on `server`'s sink `out`.
    public static func configuration(name: String, server: PrivateServer) -> String {
        "pcm.\(name) { type pulse; server \"\(server.address)\"; device \"out\"; handle_underrun true }"
    }
}
