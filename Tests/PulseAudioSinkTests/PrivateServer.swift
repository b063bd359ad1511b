import Foundation
import Testing
@_exported import TestSupport

/// A private PulseAudio daemon for one test: its own runtime directory, a float32 null sink named
/// `out` at the test's rate, stopped by pid afterwards. What was played is recorded from the
/// sink's monitor with parec, which is bit-exact for float32 at the same rate.
final class PrivateServer: @unchecked Sendable {
    static let binary = ["/usr/bin/pulseaudio", "/usr/local/bin/pulseaudio"].first { FileManager.default.isExecutableFile(atPath: $0) }
    static let parec = ["/usr/bin/parec", "/usr/local/bin/parec"].first { FileManager.default.isExecutableFile(atPath: $0) }
    static var missing: Bool { binary == nil || parec == nil }

    let runtime: String
    let rate: Int
    let channels: Int
    var address: String { "unix:\(runtime)/pulse/native" }
    private var recorder: Process?
    private let capturePath: String

    init(rate: Int = 44100, channels: Int = 2) throws {
        self.rate = rate
        self.channels = channels
        runtime = NSTemporaryDirectory() + "aq-pulse-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        capturePath = runtime + "/captured.raw"
        try startDaemon()
    }

    /// Starts the daemon in the runtime directory (again after ``kill()``: same address).
    func startDaemon() throws {
        try? FileManager.default.removeItem(atPath: "\(runtime)/pulse/native")
        try? FileManager.default.removeItem(atPath: "\(runtime)/pulse/pid")
        let daemon = Process()
        daemon.executableURL = URL(fileURLWithPath: try #require(Self.binary))
        daemon.arguments = ["-D", "-n", "--exit-idle-time=-1", "--disallow-exit", "--load=module-native-protocol-unix",
                            "--load=module-null-sink sink_name=out format=float32le rate=\(rate) channels=\(channels) norewinds=1",
                            "--log-target=file:\(runtime)/pa.log"]
        daemon.environment = ["XDG_RUNTIME_DIR": runtime, "HOME": runtime, "PATH": "/usr/bin:/bin"]
        daemon.standardOutput = FileHandle.nullDevice
        daemon.standardError = FileHandle.nullDevice
        try daemon.run()
        daemon.waitUntilExit()
        let deadline = Date().addingTimeInterval(10)
        while !FileManager.default.fileExists(atPath: "\(runtime)/pulse/native") {
            guard Date() < deadline else { throw ServerError("pulseaudio did not start (see \(runtime)/pa.log)") }
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    struct ServerError: Error, CustomStringConvertible { let description: String; init(_ d: String) { description = d } }

    /// Starts recording the sink's monitor; returns once parec is connected.
    func startRecording() throws {
        let parec = Process()
        parec.executableURL = URL(fileURLWithPath: try #require(Self.parec))
        parec.arguments = ["-d", "out.monitor", "--format=float32le", "--rate=\(rate)", "--channels=\(channels)", "--raw", "--latency-msec=20", capturePath]
        parec.environment = ["PULSE_SERVER": address, "HOME": runtime, "XDG_RUNTIME_DIR": runtime]
        parec.standardError = FileHandle.nullDevice
        try parec.run()
        recorder = parec
        // Anything played before the recorder is connected is lost: wait until the server lists
        // its record stream (a fixed sleep was too short on a loaded machine).
        let deadline = Date().addingTimeInterval(15)
        while Date() < deadline && !recorderIsConnected() { Thread.sleep(forTimeInterval: 0.05) }
        Thread.sleep(forTimeInterval: 0.1)
    }

    /// Whether the server has a record stream (parec's) on it, asked with `pactl`.
    private func recorderIsConnected() -> Bool {
        let pactl = Process()
        pactl.executableURL = URL(fileURLWithPath: "/usr/bin/pactl")
        pactl.arguments = ["-s", address, "list", "short", "source-outputs"]
        pactl.environment = ["HOME": runtime, "XDG_RUNTIME_DIR": runtime]
        let pipe = Pipe()
        pactl.standardOutput = pipe
        pactl.standardError = FileHandle.nullDevice
        guard (try? pactl.run()) != nil else { return false }
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        pactl.waitUntilExit()
        return pactl.terminationStatus == 0 && !output.isEmpty
    }

    /// Stops recording and returns the interleaved samples captured.
    func stopRecording() -> [Float] {
        // parec writes with a delay, and a loaded machine can starve it: wait (at most 5 s) until
        // what it wrote ends in 0.1 s of silence, i.e. it has caught up past the end of playback.
        let deadline = Date().addingTimeInterval(5)
        let tail = rate / 10 * channels
        while Date() < deadline {
            let samples = captured()
            if samples.count >= tail && samples.suffix(tail).allSatisfy({ $0 == 0 }) { break }
            Thread.sleep(forTimeInterval: 0.05)
        }
        // Children inherit the spawning thread's signal mask, in which the Swift runtime blocks
        // SIGINT and SIGTERM: only SIGKILL reaches them. parec writes as it records.
        if let recorder { Foundation.kill(recorder.processIdentifier, SIGKILL) }
        recorder?.waitUntilExit()
        recorder = nil
        return captured()
    }

    func captured() -> [Float] {
        guard let data = FileManager.default.contents(atPath: capturePath) else { return [] }
        return data.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
    }

    var pid: Int32? {
        (try? String(contentsOfFile: "\(runtime)/pulse/pid", encoding: .utf8)).flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    /// Kills the daemon (SIGKILL: see `stopRecording`).
    func kill() {
        guard let pid else { return }
        Foundation.kill(pid, SIGKILL)
        // Gone once the signal was delivered and the process reaped (it is not our child: poll).
        let deadline = Date().addingTimeInterval(5)
        while Foundation.kill(pid, 0) == 0 && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
    }

    deinit {
        if let recorder { Foundation.kill(recorder.processIdentifier, SIGKILL) }
        kill()
        try? FileManager.default.removeItem(atPath: runtime)
    }
}

/// Removes every run of silent frames (pauses) and returns what is left.
func withoutSilence(_ samples: [Float], channels: Int) -> [Float] {
    var out: [Float] = []
    out.reserveCapacity(samples.count)
    for i in 0..<(samples.count / channels) {
        let frame = samples[(i * channels)..<((i + 1) * channels)]
        if frame.contains(where: { $0 != 0 }) { out += frame }
    }
    return out
}

/// A test signal never exactly zero: a sine riding on an offset, different per channel.
func signal(frames: Int, channels: Int = 2, phase: Int = 0) -> [Float] {
    var out = [Float](repeating: 0, count: frames * channels)
    for i in 0..<frames {
        for c in 0..<channels {
            out[i * channels + c] = 0.2 + 0.15 * Float(sin(Double(i + phase) * 0.031 * Double(c + 1))) + Float(c) * 0.05
        }
    }
    return out
}

