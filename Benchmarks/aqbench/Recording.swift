// The `recording` section: round-trip latency played → recorded through a private PulseAudio
// server against paplay → parecord, and the CPU cost of recording against parecord and sox.
import AudioPlayback
import BufferQueue
import Dispatch
import Foundation
import PulseAudioSink

/// Watches a recorded float32 stereo stream for a step: armed after `quietFrames` frames of
/// silence, it notes when the first non-zero frame arrives and how many non-zero frames follow
/// before silence returns (a whole step is `stepFrames` frames of `stepValue`).
final class StepDetector: @unchecked Sendable {
    private let lock = NSCondition()
    private var zeros = 0
    private var armed = false
    private var arrival: UInt64?
    private var stepCount = 0
    private var stepIntact = true
    private var finished: (arrival: UInt64, frames: Int, intact: Bool)?
    let quietFrames: Int
    let stepValue: Float

    init(quietFrames: Int = 4410, stepValue: Float) {
        self.quietFrames = quietFrames
        self.stepValue = stepValue
    }

    /// Feeds recorded interleaved stereo samples, as they arrive.
    func feed(_ samples: UnsafeBufferPointer<Float>) {
        let now = DispatchTime.now().uptimeNanoseconds
        lock.lock()
        defer { lock.unlock() }
        var i = 0
        while i + 1 < samples.count {
            let silent = samples[i] == 0 && samples[i + 1] == 0
            if silent {
                zeros += 1
                if arrival != nil {
                    finished = (arrival ?? now, stepCount, stepIntact)
                    arrival = nil
                    armed = false
                    lock.broadcast()
                }
                if zeros >= quietFrames && finished == nil { armed = true }
            } else {
                zeros = 0
                if armed && arrival == nil { arrival = now; stepCount = 0; stepIntact = true }
                if arrival != nil {
                    stepCount += 1
                    if samples[i] != stepValue || samples[i + 1] != stepValue { stepIntact = false }
                }
            }
            i += 2
        }
    }

    /// Waits (at most `timeout`) until armed: the recorder has seen enough silence.
    func waitArmed(timeout: Double) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        lock.lock()
        defer { lock.unlock() }
        finished = nil
        while !armed { if !lock.wait(until: deadline) { return armed } }
        return true
    }

    /// Waits (at most `timeout`) for a whole step: when it began to arrive, how many frames it had,
    /// whether every one was the step's value.
    func waitStep(timeout: Double) -> (arrival: UInt64, frames: Int, intact: Bool)? {
        let deadline = Date(timeIntervalSinceNow: timeout)
        lock.lock()
        defer { lock.unlock() }
        while finished == nil { if !lock.wait(until: deadline) { break } }
        return finished
    }
}

/// Counts events of one kind from an async stream (overruns, underruns) on a task of its own.
final class EventCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    var count: Int { lock.lock(); defer { lock.unlock() }; return value }
    func add() { lock.lock(); value += 1; lock.unlock() }
}

struct RoundTrip {
    var fromStart: [Double] = []      // ms, start() of a primed queue → first frame delivered to the recorder
    var fromCreate: [Double] = []     // ms, creating the queue (connection included) → the same
    var broken = 0                    // steps that did not arrive whole and exact
    var glitches = 0                  // underrun and overrun events
}

let stepFrames = 4410
let stepValue: Float = 0.5

/// Our pipeline: an output queue on the server's sink, an input queue on its monitor, both at
/// `latency` ms; `trials` steps of 0.1 s.
func ourRoundTrip(server: String, latency: Int, trials: Int) throws -> RoundTrip {
    let format = AudioStreamDescription.float32(sampleRate: 44100, channels: 2)
    let detector = StepDetector(stepValue: stepValue)
    let overruns = EventCounter(), underruns = EventCounter()
    let source = PulseAudioSource(configuration: .init(server: server, device: "out.monitor", targetLatency: .milliseconds(latency)))
    let recorder = try AudioInputQueue(format: format, configuration: .init(source: source)) { queue, buffer, frames in
        buffer.withUnsafeBytes { bytes in
            detector.feed(UnsafeBufferPointer(start: bytes.baseAddress?.assumingMemoryBound(to: Float.self), count: frames.frameCount * 2))
        }
        try? queue.enqueue(buffer)
    }
    let recorderEvents = recorder.events()
    let watcher = Task { for await event in recorderEvents { if case .overrun = event { overruns.add() } } }
    defer { watcher.cancel() }
    // Buffers of half the latency: the callback sees frames about as soon as the server sends them.
    let bufferFrames = max(64, latency * 441 / 20)
    for _ in 0..<4 { try recorder.enqueue(recorder.allocateBuffer(capacity: bufferFrames * 8)) }
    try recorder.start()
    defer { recorder.dispose(immediately: true) }
    var result = RoundTrip()
    let step = [Float](repeating: stepValue, count: stepFrames * 2)
    for _ in 0..<trials {
        guard detector.waitArmed(timeout: 5) else { throw BenchError("the recorder heard no silence at \(latency) ms") }
        let created = DispatchTime.now().uptimeNanoseconds
        let sink = PulseAudioSink(configuration: .init(server: server, device: "out", targetLatency: .milliseconds(latency)))
        let player = try AudioQueue(format: format, configuration: .init(sink: sink))
        let playerEvents = player.events()
        let playerWatcher = Task { for await event in playerEvents { if case .underrun = event { underruns.add() } } }
        let buffer = try player.allocateBuffer(capacity: step.count * 4)
        try step.withUnsafeBytes { try buffer.setData($0) }
        try player.enqueue(buffer)
        try player.prime()
        let started = DispatchTime.now().uptimeNanoseconds
        try player.start()
        try player.stop(immediately: false)
        guard let heard = detector.waitStep(timeout: 5) else {
            player.dispose(immediately: true)
            throw BenchError("the step did not reach the recorder at \(latency) ms")
        }
        result.fromStart.append(Double(heard.arrival &- started) / 1e6)
        result.fromCreate.append(Double(heard.arrival &- created) / 1e6)
        if heard.frames != stepFrames || !heard.intact { result.broken += 1 }
        player.dispose(immediately: true)
        playerWatcher.cancel()
    }
    result.glitches = overruns.count + underruns.count
    return result
}

/// paplay → parecord at `latency` ms: parecord records the monitor to a pipe; each trial launches
/// paplay on a file holding the step.
func toolRoundTrip(server: String, latency: Int, trials: Int, stepFile: String) throws -> RoundTrip {
    let environment = ["PULSE_SERVER": server, "HOME": NSTemporaryDirectory(), "PATH": "/usr/bin:/bin"]
    let detector = StepDetector(stepValue: stepValue)
    let parecord = Process()
    parecord.executableURL = URL(fileURLWithPath: "/usr/bin/parecord")
    parecord.arguments = ["-d", "out.monitor", "--raw", "--format=float32le", "--rate=44100", "--channels=2", "--latency-msec=\(latency)"]
    parecord.environment = environment
    let pipe = Pipe()
    parecord.standardOutput = pipe
    parecord.standardError = FileHandle.nullDevice
    try parecord.run()
    defer { kill(parecord.processIdentifier, SIGKILL) }
    let handle = pipe.fileHandleForReading
    Thread {
        var pending = Data()
        while true {
            let chunk = handle.availableData
            if chunk.isEmpty { break }
            pending.append(chunk)
            let whole = pending.count / 8 * 8
            pending.prefix(whole).withUnsafeBytes { detector.feed($0.bindMemory(to: Float.self)) }
            pending.removeFirst(whole)
        }
    }.start()
    var result = RoundTrip()
    for _ in 0..<trials {
        guard detector.waitArmed(timeout: 5) else { throw BenchError("parecord heard no silence at \(latency) ms") }
        let paplay = Process()
        paplay.executableURL = URL(fileURLWithPath: "/usr/bin/paplay")
        paplay.arguments = ["-d", "out", "--latency-msec=\(latency)", stepFile]
        paplay.environment = environment
        paplay.standardOutput = FileHandle.nullDevice
        paplay.standardError = FileHandle.nullDevice
        let launched = DispatchTime.now().uptimeNanoseconds
        try paplay.run()
        guard let heard = detector.waitStep(timeout: 5) else { throw BenchError("paplay's step did not reach parecord at \(latency) ms") }
        result.fromCreate.append(Double(heard.arrival &- launched) / 1e6)
        if heard.frames != stepFrames || !heard.intact { result.broken += 1 }
    }
    return result
}

/// The step as a float32 WAV for paplay.
func writeStepFile(_ path: String) throws {
    let writer = try WAVFileWriter(path: path, sampleRate: 44100, channels: 2)
    let step = [Float](repeating: stepValue, count: stepFrames * 2)
    try step.withUnsafeBufferPointer { try writer.write($0) }
    try writer.close()
}

func recordingBenchmarks() throws -> [String] {
    guard FileManager.default.isExecutableFile(atPath: "/usr/bin/pulseaudio") else { return ["recording: pulseaudio is not installed"] }
    let folder = NSTemporaryDirectory() + "aqbench-files"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    let stepFile = folder + "/step.wav"
    try writeStepFile(stepFile)
    let here = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    let aqrecord = here.appendingPathComponent("aqrecord").path
    let trials = 10
    var lines = ["round trip played → recorded through a private PulseAudio server (null sink, its monitor), 0.1 s steps, \(trials) per setting"]
    lines.append("  setting: both ends' target latency. ours: output queue → input queue in one process; tools: paplay → parecord.")
    lines.append("  'from start': start() of a primed, connected queue; 'from create': creating the queue (connection included) or launching paplay.")
    let fmt = { (values: [Double]) -> String in
        values.isEmpty ? "—" : String(format: "median %6.1f ms, worst %6.1f", median(values), values.max() ?? 0)
    }
    try withPrivateServer { server in
        var smallestOurs: (Int, RoundTrip)?, smallestTools: (Int, RoundTrip)?
        for latency in [5, 10, 20, 40] {
            let ours = try ourRoundTrip(server: server, latency: latency, trials: trials)
            let tools = try toolRoundTrip(server: server, latency: latency, trials: trials, stepFile: stepFile)
            let oursStable = ours.broken == 0 && ours.glitches == 0
            let toolsStable = tools.broken == 0
            if oursStable && smallestOurs == nil { smallestOurs = (latency, ours) }
            if toolsStable && smallestTools == nil { smallestTools = (latency, tools) }
            lines.append(String(format: "  %2d ms  ours from start  : %@   (broken steps %d, under/overruns %d)", latency, fmt(ours.fromStart), ours.broken, ours.glitches))
            lines.append(String(format: "         ours from create : %@", fmt(ours.fromCreate)))
            lines.append(String(format: "         paplay→parecord  : %@   (broken steps %d)", fmt(tools.fromCreate), tools.broken))
        }
        if let (latency, ours) = smallestOurs, let (toolLatency, tools) = smallestTools {
            lines.append(String(format: "  smallest stable setting: ours %d ms, median %.1f ms from start, %.1f ms from create; tools %d ms, median %.1f ms; ratio (from create) %.2f",
                                latency, median(ours.fromStart), median(ours.fromCreate), toolLatency, median(tools.fromCreate),
                                median(ours.fromCreate) / median(tools.fromCreate)))
        }

        // CPU of recording in real time: 10 s of the monitor to a 16-bit WAV, alternating, medians of 3.
        guard FileManager.default.isExecutableFile(atPath: aqrecord) else {
            lines.append("  \(aqrecord) not built (make bench builds it)")
            return
        }
        var ours: [Double] = [], theirs: [Double] = []
        for _ in 0..<3 {
            ours.append(try cpuSeconds(aqrecord, [folder + "/rec-ours.wav", "--device", "out.monitor", "--server", server, "--duration", "10"], server: server))
            theirs.append(try cpuSeconds("/usr/bin/timeout", ["-s", "INT", "10", "/usr/bin/parecord", "-d", "out.monitor", "--file-format=wav",
                                                              "--format=s16le", folder + "/rec-tool.wav"], server: server, allowFailure: true))
        }
        lines.append("")
        lines.append("recording 10 s of the monitor in real time to a 16-bit WAV (CPU seconds, user + system; medians of 3, alternating)")
        lines.append(String(format: "  aqrecord --duration 10         : %.3f s  (%.0f s per hour)", median(ours), median(ours) * 360))
        lines.append(String(format: "  timeout -s INT 10 parecord     : %.3f s  (%.0f s per hour)   ratio %.2f", median(theirs), median(theirs) * 360,
                            median(ours) / max(median(theirs), 0.001)))
    }
    // The offline equivalent of an hour: generate and write 3600 s of a sine as fast as it goes.
    if FileManager.default.isExecutableFile(atPath: aqrecord) {
        var ours: [Double] = [], theirs: [Double] = []
        for _ in 0..<3 {
            ours.append(try gnuTime("%U %S", aqrecord, [folder + "/hour-ours.wav", "--source", "null", "--fast", "--duration", "3600"]).reduce(0, +))
            theirs.append(try gnuTime("%U %S", "/usr/bin/sox", ["-n", "-r", "44100", "-c", "2", "-b", "16", folder + "/hour-sox.wav", "synth", "3600", "sine", "440"]).reduce(0, +))
        }
        try? FileManager.default.removeItem(atPath: folder + "/hour-ours.wav")
        try? FileManager.default.removeItem(atPath: folder + "/hour-sox.wav")
        lines.append("")
        lines.append("one hour recorded offline: a generated 440 Hz sine through the input queue to a 16-bit WAV (CPU seconds; medians of 3)")
        lines.append(String(format: "  aqrecord --source null --fast --duration 3600 : %.2f s", median(ours)))
        lines.append(String(format: "  sox -n … synth 3600 sine 440                  : %.2f s   ratio %.2f", median(theirs), median(ours) / max(median(theirs), 0.001)))
    }
    return lines
}
