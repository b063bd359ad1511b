import Foundation
import TestSupport

/// aqplay through PipeWire against pw-play, the same 16-bit WAVs (10 and 30 seconds) through the
/// same private PipeWire's null sink at the same latency (100 ms, pw-play's default): CPU seconds
/// of the whole process, medians of alternating runs, and the cost of each further second (the
/// slope between the two lengths) apart from the start-up.
func pipeWireBenchmarks() async throws -> [String] {
    guard !PrivatePipeWire.missing else { return ["pipewire: \(PrivatePipeWire.missingTools.joined(separator: ", ")) missing (make deps installs them)"] }
    let aqplay = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("aqplay").path
    guard FileManager.default.isExecutableFile(atPath: aqplay) else { return ["pipewire: \(aqplay) not built (make bench builds it)"] }
    let server = try await PrivatePipeWire.start()
    var environment = server.environment
    environment["HOME"] = NSTemporaryDirectory()
    var lines = ["play 16-bit WAVs through a private PipeWire's null sink at 100 ms (CPU seconds of the whole process, perf's task clock; 3 runs each, alternating)"]
    var medians: [Int: (ours: Double, theirs: Double)] = [:]
    for length in [10, 30] {
        let wav = server.runtime + "/\(length)-seconds.wav"
        _ = try await runTool("/usr/bin/ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i",
                                                  "aevalsrc=0.3*sin(2*PI*(220+50*sin(0.3*t))*t)|0.3*sin(2*PI*(330+40*sin(0.2*t))*t):s=48000:d=\(length)",
                                                  "-c:a", "pcm_s16le", wav])
        var ours: [Double] = [], theirs: [Double] = []
        for _ in 0..<3 {
            ours.append(try cpuSeconds(aqplay, [wav, "--sink", "pipewire", "--device", "out", "--latency", "100", "--fade", "0"], environment: environment))
            theirs.append(try cpuSeconds("/usr/bin/pw-play", ["--target", "out", "--latency", "100ms", wav], environment: environment))
        }
        let a = median(ours), b = median(theirs)
        medians[length] = (a, b)
        let runs = { (values: [Double]) in values.map { String(format: "%.3f", $0) }.joined(separator: " ") }
        lines.append(String(format: "  %2d s: aqplay --sink pipewire median %.3f s (runs %@), pw-play median %.3f s (runs %@)   ratio %.2f",
                            length, a, runs(ours) as NSString, b, runs(theirs) as NSString, a / b))
    }
    await server.kill()
    if let short = medians[10], let long = medians[30] {
        let ours = (long.ours - short.ours) / 20, theirs = (long.theirs - short.theirs) / 20
        lines.append(String(format: "  each further second of audio: aqplay %.2f ms, pw-play %.2f ms   ratio %.2f; start-up and the rest: aqplay %.0f ms, pw-play %.0f ms",
                            ours * 1000, theirs * 1000, ours / theirs, (short.ours - 10 * ours) * 1000, (short.theirs - 10 * theirs) * 1000))
    }
    return lines
}

/// Playback of a tone at a 10 ms latency through a private PipeWire while busy loops keep every
/// core at work: gaps (16+ silent frames inside the sound) in what pw-record captured of the sink,
/// for aqplay and for pw-play.
func pipeWireLoadBenchmarks(seconds: Int) async throws -> [String] {
    guard !PrivatePipeWire.missing else { return ["load (PipeWire): \(PrivatePipeWire.missingTools.joined(separator: ", ")) missing (make deps)"] }
    let aqplay = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("aqplay").path
    guard FileManager.default.isExecutableFile(atPath: aqplay) else { return ["load (PipeWire): \(aqplay) not built (make bench builds it)"] }
    let folder = NSTemporaryDirectory() + "aqbench-files"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    let wav = folder + "/load-tone-48k-\(seconds).wav"
    if !FileManager.default.fileExists(atPath: wav) {
        _ = try await runTool("/usr/bin/ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i",
                                                  "aevalsrc=0.3*sin(2*PI*440*t)+0.05|0.3*sin(2*PI*660*t)+0.05:s=48000:d=\(seconds)",
                                                  "-c:a", "pcm_s16le", wav])
    }
    let cores = max(Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))), 1)
    let players: [(String, String, [String])] = [
        ("aqplay --latency 10", aqplay, [wav, "--sink", "pipewire", "--device", "out", "--latency", "10", "--fade", "0"]),
        ("pw-play --latency 10ms", "/usr/bin/pw-play", ["--target", "out", "--latency", "10ms", wav]),
    ]
    var lines = ["playback of a \(seconds) s tone at a 10 ms latency through a private PipeWire (null sink, 48 kHz), \(cores) busy loops keeping every core at work: gaps in what pw-record captured (16+ silent frames inside the sound)"]
    for (name, path, arguments) in players {
        let server = try await PrivatePipeWire.start()
        try await server.startRecording()
        let hogs = try startBusyLoops(cores)
        defer { for hog in hogs where hog.isRunning { kill(hog.processIdentifier, SIGKILL) } }
        let played = try await runTool(path, arguments, environment: server.environment, timeout: .seconds(seconds + 60))
        for hog in hogs where hog.isRunning { kill(hog.processIdentifier, SIGKILL) }
        let samples = await server.stopRecording(soundFrames: 1)
        await server.kill()
        let (gaps, sound) = countGaps(samples, rate: 48000)
        lines.append(String(format: "  %-24@ %4d gaps over %.1f s of sound (exit %d)", name as NSString, gaps, sound, played.status))
    }
    return lines
}
