import Foundation

/// A private PipeWire for one test: its own runtime directory, a D-Bus session bus, `pipewire`
/// and `wireplumber`, and no PulseAudio server. Null sinks are made with `pw-cli`, and what a
/// sink played is recorded from it with `pw-record` (float32 at the sink's rate: bit-exact).
///
/// Every wait is on an event with a deadline: the bus is ready when `dbus-daemon` prints its
/// address, PipeWire when its socket appears in the runtime directory (inotify), a recorder when
/// its first bytes arrive, a tool when its exit is reported.
public final class PrivatePipeWire: @unchecked Sendable {   // @unchecked: the children are set up in start() and only killed after
    public static let tools = ["pipewire", "wireplumber", "pw-cli", "pw-record", "dbus-daemon", "wpctl"]
    /// The tools that are not installed (`make deps` installs them).
    public static let missingTools: [String] = tools.filter { tool in
        !["/usr/bin/", "/usr/local/bin/"].contains { FileManager.default.isExecutableFile(atPath: $0 + tool) }
    }
    public static var missing: Bool { !missingTools.isEmpty }

    public let runtime: String
    /// The server's socket, an absolute path (`PipeWireSink.Configuration.remote`).
    public var remote: String { runtime + "/pipewire-0" }
    private var children: [(Process, ChildExit)] = []
    /// A recorder per sink.
    private var recorders: [String: (Process, ChildExit)] = [:]
    private var recordings: [String: Watched<CapturedAudio>] = [:]
    private var followers: [String: RawFloatFileFollower] = [:]
    private var busAddress = ""

    private init() throws {
        runtime = NSTemporaryDirectory() + "aq-pw-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    public struct Failure: Error, CustomStringConvertible { public let description: String }

    /// The environment of the servers and of the tools that talk to them.
    public var environment: [String: String] {
        ["XDG_RUNTIME_DIR": runtime, "HOME": runtime, "PATH": "/usr/bin:/bin", "PIPEWIRE_REMOTE": remote,
         "DBUS_SESSION_BUS_ADDRESS": busAddress, "DISABLE_RTKIT": "1", "PIPEWIRE_LOG_SYSTEMD": "false"]
    }

    /// A running PipeWire with WirePlumber, and a null sink for each name (48 kHz stereo unless
    /// said), the first one the default.
    public static func start(sinks: [String] = ["out"], rate: Int = 48000, positions: String = "FL FR") async throws -> PrivatePipeWire {
        let server = try PrivatePipeWire()
        try await server.startBus()
        try await server.startPipeWire()
        try server.spawn("/usr/bin/wireplumber", [])
        for sink in sinks { try await server.makeSink(sink, rate: rate, positions: positions) }
        if sinks.count > 1 { try await server.setDefaultSink(sinks[0]) } else if let first = sinks.first { try await server.waitForDefaultSink(first) }
        return server
    }

    /// Waits until WirePlumber has made `sink` the default (its `default` metadata says so, as
    /// `pw-metadata --monitor` prints).
    public func waitForDefaultSink(_ sink: String) async throws {
        let output = Pipe()
        let seen = Watched(false)
        LineReader(output.fileHandleForReading, onEnd: {}) { line in
            if line.contains("default.audio.sink"), line.contains("\"\(sink)\"") { seen.update { $0 = true } }
        }.start()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/pw-metadata")
        process.arguments = ["--monitor", "--name", "default"]
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        let exit = try runWatched(process)
        let found = await seen.wait(timeout: .seconds(10), until: { $0 })
        _ = await killAndWait(process, exit)
        guard found else { throw Failure(description: "WirePlumber did not make \(sink) the default sink within 10 s") }
    }

    private func spawn(_ tool: String, _ arguments: [String], output: Pipe? = nil) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output ?? FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        children.append((process, try runWatched(process)))
    }

    private func startBus() async throws {
        let bus = try await startPrivateBus(environment: environment)
        children.append((bus.process, bus.exit))
        busAddress = bus.address
    }

    private func startPipeWire() async throws {
        let socket = Watched(false)
        let watcher = try DirectoryWatcher(runtime) { name in if name == "pipewire-0" { socket.update { $0 = true } } }
        defer { watcher.stop() }
        try spawn("/usr/bin/pipewire", [])
        guard await socket.wait(timeout: .seconds(10), until: { $0 }) else {
            throw Failure(description: "pipewire made no socket in \(runtime) within 10 s")
        }
    }

    /// Runs a PipeWire tool against this server.
    public func tool(_ name: String, _ arguments: [String]) async throws -> ToolResult {
        try await runTool("/usr/bin/" + name, arguments, environment: environment, timeout: .seconds(20))
    }

    /// Makes a null sink (it stays when pw-cli exits).
    public func makeSink(_ name: String, rate: Int = 48000, positions: String = "FL FR") async throws {
        let count = positions.split(separator: " ").count
        let result = try await tool("pw-cli", ["create-node", "adapter",
            "{ factory.name=support.null-audio-sink node.name=\(name) media.class=Audio/Sink object.linger=true audio.rate=\(rate) audio.channels=\(count) audio.position=[\(positions)] }"])
        guard result.status == 0 else { throw Failure(description: "pw-cli could not make the sink \(name): \(String(decoding: result.errorOutput, as: UTF8.self))") }
    }

    /// Makes `sink` the default (as a user's choice: WirePlumber's configured default) and waits
    /// until WirePlumber says so.
    public func setDefaultSink(_ sink: String) async throws {
        let result = try await tool("wpctl", ["status"])
        // The sink's line in wpctl's listing: " │  *   32. one   [vol: 1.00]".
        let line = String(decoding: result.output, as: UTF8.self).split(separator: "\n").first { $0.contains(". \(sink) ") }
        let id = line.flatMap { $0.split(whereSeparator: { !$0.isNumber }).first }.map(String.init)
        guard let id else { throw Failure(description: "wpctl status lists no sink \(sink)") }
        let set = try await tool("wpctl", ["set-default", id])
        guard set.status == 0 else { throw Failure(description: "wpctl set-default \(id) failed: \(String(decoding: set.errorOutput, as: UTF8.self))") }
        try await waitForDefaultSink(sink)
    }

    /// Starts recording what `sink` plays; returns once pw-record delivers audio (it is linked).
    /// pw-record writes into a file, followed as it grows: a reader that falls behind on a loaded
    /// machine cannot make it drop a quantum, as a full pipe would.
    public func startRecording(sink: String = "out", rate: Int = 48000, channels: Int = 2) async throws {
        let file = runtime + "/recording-\(sink).raw"
        guard FileManager.default.createFile(atPath: file, contents: nil), let output = FileHandle(forWritingAtPath: file) else {
            throw Failure(description: "cannot make \(file)")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/pw-record")
        process.arguments = ["--target", sink, "-P", "{ stream.capture.sink=true node.dont-reconnect=true }", "--format", "f32",
                             "--rate", "\(rate)", "--channels", "\(channels)", "--latency", "50ms", "-"]
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardOutput = output
        let recording = Watched(CapturedAudio())
        recordings[sink] = recording
        let follower = try RawFloatFileFollower(path: file, channels: channels, into: recording)
        followers[sink] = follower
        recorders[sink] = (process, try runWatched(process))
        try? output.close()
        guard await recording.wait(timeout: .seconds(15), until: { $0.bytesSeen > 0 || $0.ended }), !recording.current.ended else {
            throw Failure(description: "pw-record delivered nothing within 15 s")
        }
    }

    /// Waits until at least `frames` frames of sound have been recorded from `sink`.
    public func waitForSound(frames: Int, sink: String = "out", timeout: Duration = .seconds(10)) async -> Bool {
        guard let recording = recordings[sink] else { return false }
        return await recording.wait(timeout: timeout) { $0.soundFrames >= frames }
    }

    /// What has been recorded from `sink` so far.
    public func captured(sink: String = "out") -> [Float] { recordings[sink]?.current.samples ?? [] }

    /// Stops recording once `soundFrames` frames of sound and then 0.1 s of silence have arrived
    /// (at most 10 s); returns the interleaved samples captured.
    public func stopRecording(soundFrames: Int = 1, sink: String = "out", rate: Int = 48000, channels: Int = 2) async -> [Float] {
        guard let recording = recordings[sink] else { return [] }
        let tail = rate / 10 * channels
        _ = await recording.wait(timeout: .seconds(10)) { r in
            r.soundFrames >= soundFrames && r.samples.count >= tail && r.samples.suffix(tail).allSatisfy { $0 == 0 }
        }
        if let (process, exit) = recorders[sink] { _ = await killAndWait(process, exit) }
        followers[sink]?.finish()
        followers[sink] = nil
        recorders[sink] = nil
        return recording.current.samples
    }

    /// Kills the servers (SIGKILL: children inherit a mask in which the Swift runtime blocks
    /// SIGTERM) and waits until they are gone.
    public func kill(_ name: String? = nil) async {
        for (process, exit) in children.reversed() where name == nil || process.executableURL?.lastPathComponent == name {
            _ = await killAndWait(process, exit)
        }
    }

    deinit {
        for (process, _) in recorders.values { Foundation.kill(process.processIdentifier, SIGKILL) }
        for (process, _) in children { Foundation.kill(process.processIdentifier, SIGKILL) }
        try? FileManager.default.removeItem(atPath: runtime)
    }
}
