// aqbench: measures the queue against the simplest thing that moves the same bytes, in the same run.
// Run with `make bench` (release build). Nothing here is a pass/fail check.
import AudioFileStream
import AudioPlayback
import AudioStreaming
import TestSupport
import BufferQueue
import Dispatch
import FAADDecoder
import Foundation
import Synchronization
import MPG123Decoder
import PulseAudioSink

func measure(repeats: Int, _ body: () throws -> Void) rethrows -> Duration {
    var best = Duration.seconds(1_000_000)
    for _ in 0..<repeats {
        let start = ContinuousClock.now
        try body()
        best = min(best, ContinuousClock.now - start)
    }
    return best
}

func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) * 1e-18 }

func machine() -> String {
    let cpu = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8))?
        .split(separator: "\n").first { $0.hasPrefix("model name") }?
        .split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "unknown CPU"
    return "\(cpu), \(ProcessInfo.processInfo.activeProcessorCount) cores"
}

// MARK: 1. offline render throughput vs memcpy

struct RenderResult {
    let memcpy: Duration, queue: Duration, floor: Duration
    /// memcpy run seven times back to back, with no eviction between runs (the method before
    /// 2026-11-24, for comparison).
    let memcpyRepeated: Duration
    let bytes: Int, audioSeconds: Int
}

func renderBenchmark() throws -> RenderResult {
let rate = 44100.0, channels = 2
let audioSeconds = 120
let totalFrames = Int(rate) * audioSeconds
let framesPerBuffer = 16384
let renderFrames = 8192
let format = AudioStreamDescription.float32(sampleRate: rate, channels: channels)
var source = [Float](repeating: 0, count: totalFrames * channels)
for i in 0..<totalFrames {
    let v = Float(sin(Double(i) * 2 * Double.pi * 440 / rate)) * 0.5
    source[2 * i] = v
    source[2 * i + 1] = -v
}
let byteCount = source.count * 4
var destination = [Float](repeating: 0, count: source.count)

func copyAll() {
    source.withUnsafeBytes { src in
        destination.withUnsafeMutableBytes { dst in
            dst.baseAddress!.copyMemory(from: src.baseAddress!, byteCount: byteCount)
        }
    }
}

let trimStart = 2112, trimEnd = 970
var renderedFrames = 0
func renderThroughQueue() throws {
    // Buffers come back on this thread before each render returns: a loop that renders and
    // refills never waits for another thread.
    let queue = try AudioQueue(format: format, configuration: .init(decodeBufferFrames: 16384, offlineCallbacks: .beforeReturning))
    try queue.setParameters(.init(volume: 0.8))
    try queue.setOfflineRenderFormat(format)
    // Enqueue ahead with a few reusable buffers, refilling as the render returns them.
    let buffers = try (0..<4).map { _ in try queue.allocateBuffer(capacity: framesPerBuffer * channels * 4) }
    var nextFrame = 0
    var free = buffers
    func enqueueNext(_ buffer: AudioQueueBuffer) throws {
        let count = min(framesPerBuffer, totalFrames - nextFrame)
        guard count > 0 else { return }
        try source.withUnsafeBytes { bytes in
            try buffer.setData(UnsafeRawBufferPointer(rebasing: bytes[(nextFrame * channels * 4)..<((nextFrame + count) * channels * 4)]))
        }
        let first = nextFrame == 0, last = nextFrame + count == totalFrames
        try queue.enqueue(buffer, trimFramesAtStart: first ? trimStart : 0, trimFramesAtEnd: last ? trimEnd : 0)
        nextFrame += count
    }
    var done = 0
    try destination.withUnsafeMutableBytes { out in
        while true {
            while let buffer = free.popLast(), !buffer.isInQueue { try enqueueNext(buffer) }
            let want = min(renderFrames, totalFrames - done)
            let n = try queue.offlineRender(at: Int64(done), into: UnsafeMutableRawBufferPointer(rebasing: out[(done * channels * 4)...]), frames: want)
            done += n
            free = buffers.filter { !$0.isInQueue }
            if n == 0 && nextFrame >= totalFrames && free.count == buffers.count { break }
            if n == 0 { queue.waitForCallbacks() }
        }
    }
    renderedFrames = done
    queue.dispose(immediately: true)
}

// The least any queue can do here: copy each piece into a buffer (setData), then copy it out to
// the destination multiplied by the volume — two passes where memcpy makes one, the second
// writing the 40 MiB destination through the cache.
var staging = [Float](repeating: 0, count: framesPerBuffer * channels)
func copyTwice() {
    source.withUnsafeBufferPointer { src in
        staging.withUnsafeMutableBufferPointer { buffer in
            destination.withUnsafeMutableBufferPointer { dst in
                var start = 0
                while start < src.count {
                    let n = min(buffer.count, src.count - start)
                    let piece = buffer.baseAddress!, out = dst.baseAddress! + start
                    piece.update(from: src.baseAddress! + start, count: n)
                    for i in 0..<n { out[i] = piece[i] * 0.8 }
                    start += n
                }
            }
        }
    }
}

// The three take turns, round by round, so that a slow spell of the machine does not fall on
// one of them only; each keeps its best round. Each starts from the same state of the caches:
// reading 64 MiB of other memory first leaves them full of clean lines, so no run pays for the
// dirty lines the one before it left (memcpy's non-temporal stores leave none, a render leaves
// its output), and none finds its own source still cached.
let evictor = [UInt64](repeating: 1, count: 8 << 20)
var evictorSum: UInt64 = 0
func evictCaches() {
    evictorSum &+= evictor.withUnsafeBufferPointer { words in
        var sum: UInt64 = 0
        for i in stride(from: 0, to: words.count, by: 8) { sum &+= words[i] }
        return sum
    }
}
var memcpyTime = Duration.seconds(1_000_000), queueTime = memcpyTime, floorTime = memcpyTime
for _ in 0..<9 {
    evictCaches()
    memcpyTime = min(memcpyTime, measure(repeats: 1, copyAll))
    evictCaches()
    queueTime = min(queueTime, try measure(repeats: 1, renderThroughQueue))
    guard renderedFrames == totalFrames - trimStart - trimEnd else {
        print("aqbench: rendered \(renderedFrames) frames, expected \(totalFrames - trimStart - trimEnd)")
        exit(1)
    }
    evictCaches()
    floorTime = min(floorTime, measure(repeats: 1, copyTwice))
}
guard evictorSum > 0 else { exit(1) }  // keeps the reads
let memcpyRepeated = measure(repeats: 7, copyAll)
return RenderResult(memcpy: memcpyTime, queue: queueTime, floor: floorTime, memcpyRepeated: memcpyRepeated,
                    bytes: byteCount, audioSeconds: audioSeconds)
}

// MARK: 2. output callback round trips

final class Counter: @unchecked Sendable {
    let lock = NSLock()
    var count = 0
    let limit: Int
    let done = DispatchSemaphore(value: 0)
    init(limit: Int) { self.limit = limit }
    func next() -> Bool {
        lock.lock(); defer { lock.unlock() }
        count += 1
        if count == limit { done.signal() }
        return count < limit
    }
}
func callbackBenchmark(roundTrips: Int) throws -> Duration {
let counter = Counter(limit: roundTrips)
let sink = NullSink(pacing: .unpaced)
let small = AudioStreamDescription.float32(sampleRate: 48000, channels: 2)
let loopQueue = try AudioQueue(format: small, configuration: .init(sink: sink, decodeBufferFrames: 1024)) { queue, buffer in
    if counter.next() { _ = try? queue.enqueue(buffer) }
}
let chunk = [Float](repeating: 0.25, count: 64 * 2)
for _ in 0..<2 {
    let buffer = try loopQueue.allocateBuffer(capacity: chunk.count * 4)
    try chunk.withUnsafeBytes { try buffer.setData($0) }
    try loopQueue.enqueue(buffer)
}
let loopStart = ContinuousClock.now
try loopQueue.start()
counter.done.wait()
let loopTime = ContinuousClock.now - loopStart
loopQueue.dispose(immediately: true)
return loopTime
}

// MARK: 3. decoding against the C libraries' own command-line tools

/// Runs a command with stdout to /dev/null; returns its wall time.
@discardableResult
func runTool(_ path: String, _ arguments: [String], stdout: FileHandle? = FileHandle.nullDevice) throws -> Duration {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    process.standardOutput = stdout
    process.standardError = FileHandle.nullDevice
    // The exit is taken from the termination handler (Foundation's SIGCHLD source), not from
    // waitUntilExit, which looks every 50 ms and so rounded every time up to the next 50 ms.
    let exited = DispatchSemaphore(value: 0)
    let end = Mutex<ContinuousClock.Instant?>(nil)
    process.terminationHandler = { _ in
        end.withLock { $0 = ContinuousClock.now }
        exited.signal()
    }
    let start = ContinuousClock.now
    try process.run()
    exited.wait()
    guard process.terminationStatus == 0 else { throw ExitMessage("\(path) \(arguments.joined(separator: " ")) failed") }
    return (end.withLock { $0 } ?? ContinuousClock.now) - start
}

/// CPU seconds (user + system) of every child process waited for so far: the kernel counts them
/// to the microsecond (GNU time prints hundredths, too coarse for runs of a tenth of a second).
func childrenCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_CHILDREN.rawValue), &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

/// Runs a command to its end: its wall time and CPU time, in seconds.
func wallAndCPU(_ path: String, _ arguments: [String]) throws -> (wall: Double, cpu: Double) {
    let before = childrenCPUSeconds()
    let wall = try runTool(path, arguments)
    return (seconds(wall), childrenCPUSeconds() - before)
}

struct ExitMessage: Error { let text: String; init(_ text: String) { self.text = text } }

/// Decodes a whole file through the queue (offline), as aqrender does without writing.
func decodeThroughQueue(_ path: String) throws -> Int64 {
    let renderer = try AudioFileRenderer(file: try AudioFile(path: path))
    var scratch = [Float](repeating: 0, count: 8192 * renderer.outputFormat.channelsPerFrame)
    var total: Int64 = 0
    while true {
        let n = try scratch.withUnsafeMutableBufferPointer { try renderer.render(into: $0, frames: 8192) }
        if n == 0 { return total }
        total += Int64(n)
    }
}

/// Makes the test files once in a temporary folder: synthesized music-like stereo material.
func makeFile(_ name: String, seconds: Int, in folder: String) throws -> String {
    let path = folder + "/" + name
    if FileManager.default.fileExists(atPath: path) { return path }
    let source = "aevalsrc=0.3*sin(2*PI*(220+50*sin(0.3*t))*t)+0.1*sin(2*PI*3520*t)*sin(0.7*t)|0.3*sin(2*PI*(330+40*sin(0.2*t))*t)+0.1*sin(2*PI*5000*t):s=44100:d=\(seconds)"
    var arguments = ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", source]
    if name.hasSuffix(".mp3") {
        arguments += ["-c:a", "libmp3lame", "-q:a", "2"]
    } else if name.hasSuffix(".wav") {
        arguments += ["-c:a", "pcm_s16le"]
    } else if name.hasSuffix(".flac") {
        arguments += ["-c:a", "flac"]
    } else {
        arguments += ["-c:a", "aac", "-b:a", "128k"] + (name.contains("nopns") ? ["-aac_pns", "0"] : [])
    }
    try runTool("/usr/bin/ffmpeg", arguments + [path])
    return path
}

func bestOf(_ count: Int, _ body: () throws -> Duration) rethrows -> Duration {
    var best = Duration.seconds(1_000_000)
    for _ in 0..<count { best = min(best, try body()) }
    return best
}

/// Runs a command under GNU time and returns the numbers its `format` prints.
/// `allowFailure`: a non-zero exit is expected (a tool stopped by `timeout`).
func gnuTime(_ format: String, _ path: String, _ arguments: [String], environment: [String: String]? = nil,
             allowFailure: Bool = false) throws -> [Double] {
    let (text, status) = try standardError(of: "/usr/bin/time", ["-f", format, path] + arguments, environment: environment)
    let numbers = text.split(separator: "\n").last?.split(separator: " ").compactMap { Double($0) } ?? []
    guard status == 0 || allowFailure, !numbers.isEmpty else { throw ExitMessage("\(path) failed: \(text)") }
    return numbers
}

/// Runs a command to its end; returns what it wrote to standard error and its exit status.
func standardError(of path: String, _ arguments: [String], environment: [String: String]?) throws -> (String, Int32) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    if let environment { process.environment = environment }
    let pipe = Pipe()
    process.standardError = pipe
    process.standardOutput = FileHandle.nullDevice
    try process.run()
    let text = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    return (text, process.terminationStatus)
}

/// Peak resident memory of one run of a command, in KiB.
func peakRSSOfChild(_ path: String, _ arguments: [String]) throws -> Int {
    Int(try gnuTime("%M", path, arguments)[0])
}

func codecBenchmarks() throws -> [String] {
    MPG123Decoder.register()
    FAADDecoder.register()
    let folder = NSTemporaryDirectory() + "aqbench-files"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    var lines: [String] = []
    let mp3 = try makeFile("ten-minutes.mp3", seconds: 600, in: folder)
    let m4a = try makeFile("ten-minutes.m4a", seconds: 600, in: folder)
    var frames: Int64 = 0
    let oursMP3 = try bestOf(3) { let t = ContinuousClock.now; frames = try decodeThroughQueue(mp3); return ContinuousClock.now - t }
    let mpg123 = try bestOf(3) { try runTool("/usr/bin/mpg123", ["-q", "-s", mp3]) }
    lines.append("decode a 10-minute MP3 (LAME V2 stereo, \(frames) frames)")
    lines.append(String(format: "  queue + libmpg123 (float, trimmed) : %7.0f ms", seconds(oursMP3) * 1000))
    lines.append(String(format: "  mpg123 -q -s FILE > /dev/null      : %7.0f ms", seconds(mpg123) * 1000))
    lines.append(String(format: "  ratio queue / mpg123               : %7.2f", seconds(oursMP3) / seconds(mpg123)))
    let oursM4A = try bestOf(3) { let t = ContinuousClock.now; frames = try decodeThroughQueue(m4a); return ContinuousClock.now - t }
    let faad = try bestOf(3) { try runTool("/usr/bin/faad", ["-q", "-w", m4a]) }
    let ffmpeg = try bestOf(3) { try runTool("/usr/bin/ffmpeg", ["-nostdin", "-v", "error", "-i", m4a, "-f", "s16le", "-"]) }
    lines.append("decode a 10-minute M4A (AAC-LC 128 kb/s stereo, \(frames) frames)")
    lines.append(String(format: "  queue + libfaad2 (float, trimmed)  : %7.0f ms", seconds(oursM4A) * 1000))
    lines.append(String(format: "  faad -w FILE > /dev/null           : %7.0f ms   ratio queue / faad   %5.2f", seconds(faad) * 1000, seconds(oursM4A) / seconds(faad)))
    lines.append(String(format: "  ffmpeg -f s16le - > /dev/null      : %7.0f ms   ratio queue / ffmpeg %5.2f", seconds(ffmpeg) * 1000, seconds(oursM4A) / seconds(ffmpeg)))

    // Peak memory of aqrender (beside this executable) for a 1-minute and a 60-minute file.
    let aqrender = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("aqrender").path
    if FileManager.default.isExecutableFile(atPath: aqrender) {
        let short = try makeFile("one-minute.mp3", seconds: 60, in: folder)
        let long = try makeFile("sixty-minutes.mp3", seconds: 3600, in: folder)
        let output = folder + "/out.wav"
        let small = try peakRSSOfChild(aqrender, [short, output])
        let large = try peakRSSOfChild(aqrender, [long, output])
        lines.append("peak RSS of aqrender FILE OUT.wav (MP3)")
        lines.append(String(format: "  1-minute file : %.1f MiB", Double(small) / 1024))
        lines.append(String(format: "  60-minute file: %.1f MiB   (ratio %.2f)", Double(large) / 1024, Double(large) / Double(small)))
        try? FileManager.default.removeItem(atPath: output)
    } else {
        lines.append("peak RSS: \(aqrender) not built (make bench builds it)")
    }
    return lines
}

/// Apple's other formats (issue 14): whole commands, `aqrender FILE /dev/null --format f32` against
/// `ffmpeg -i FILE -f f32le - > /dev/null`, on 10-minute files made from the same source.
func appleFormatBenchmarks() throws -> [String] {
    let folder = NSTemporaryDirectory() + "aqbench-files"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    let aqrender = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("aqrender").path
    guard FileManager.default.isExecutableFile(atPath: aqrender) else { return ["apple formats: \(aqrender) not built (make bench builds it)"] }
    let source = try makeFile("ten-minutes.wav", seconds: 600, in: folder)
    func encode(_ name: String, _ arguments: [String]) throws -> String {
        let path = folder + "/" + name
        if !FileManager.default.fileExists(atPath: path) {
            try runTool("/usr/bin/ffmpeg", ["-nostdin", "-v", "error", "-y", "-i", source] + arguments + [path])
        }
        return path
    }
    // (name, path, float bytes out: 600 s of 44.1 kHz stereo, or 8 kHz mono for AMR)
    let stereo = 600.0 * 44100 * 2 * 4
    var files: [(String, String, Double)] = [
        ("ALAC 16-bit stereo (.m4a)", try encode("ten-minutes-alac.m4a", ["-c:a", "alac"]), stereo),
        ("µ-law stereo (.wav)", try encode("ten-minutes-ulaw.wav", ["-c:a", "pcm_mulaw"]), stereo),
        ("A-law stereo (.caf)", try encode("ten-minutes-alaw.caf", ["-c:a", "pcm_alaw"]), stereo),
        ("IMA4 stereo (.caf)", try encode("ten-minutes-ima4.caf", ["-c:a", "adpcm_ima_qt"]), stereo),
        ("IMA ADPCM stereo (.wav)", try encode("ten-minutes-ima.wav", ["-c:a", "adpcm_ima_wav"]), stereo),
    ]
    // AMR-NB: 8 kHz mono, encoded by sox (Debian's ffmpeg has no AMR encoder).
    let amr = folder + "/ten-minutes.amr"
    if !FileManager.default.fileExists(atPath: amr), FileManager.default.isExecutableFile(atPath: "/usr/bin/sox") {
        try runTool("/usr/bin/sox", ["-R", source, "-r", "8000", "-c", "1", "-t", "amr-nb", amr])
    }
    if FileManager.default.fileExists(atPath: amr) { files.append(("AMR-NB 12.2k mono (.amr)", amr, 600.0 * 8000 * 4)) }
    var lines = ["decode 10-minute files: aqrender FILE /dev/null --format f32 against ffmpeg -i FILE -f f32le - > /dev/null (best of 3)"]
    for (name, path, bytes) in files {
        let ours = try bestOf(3) { try runTool(aqrender, [path, "/dev/null", "--format", "f32"]) }
        let ffmpeg = try bestOf(3) { try runTool("/usr/bin/ffmpeg", ["-nostdin", "-v", "error", "-i", path, "-f", "f32le", "-"]) }
        lines.append(String(format: "  %-26@ ours %6.0f ms (%5.0f MiB/s of float out)   ffmpeg %6.0f ms   ratio ours / ffmpeg %5.2f",
                            name as NSString, seconds(ours) * 1000, bytes / 1_048_576 / seconds(ours), seconds(ffmpeg) * 1000, seconds(ours) / seconds(ffmpeg)))
    }
    return lines
}

// MARK: 3a'. FLAC, Ogg Opus and Ogg Vorbis against their reference decoders (issue 38)

/// Whole commands writing a 16-bit WAV, on 10-minute files the reference encoders make from the
/// same source: `aqrender` (one thread and the default two) against `flac -d`, `opusdec --rate
/// 48000` (Opus decodes at 48 kHz here; opusdec's default resamples to the source's 44.1 kHz) and
/// `oggdec`, best of 3 each.
func xiphBenchmarks() throws -> [String] {
    let folder = NSTemporaryDirectory() + "aqbench-files"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    let aqrender = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("aqrender").path
    guard FileManager.default.isExecutableFile(atPath: aqrender) else { return ["xiph: \(aqrender) not built (make bench builds it)"] }
    let tools = ["/usr/bin/flac", "/usr/bin/opusenc", "/usr/bin/opusdec", "/usr/bin/oggenc", "/usr/bin/oggdec"]
    guard tools.allSatisfy({ FileManager.default.isExecutableFile(atPath: $0) }) else { return ["xiph: flac, opus-tools or vorbis-tools missing (make deps)"] }
    let source = try makeFile("ten-minutes.wav", seconds: 600, in: folder)
    func encode(_ name: String, _ tool: String, _ arguments: [String]) throws -> String {
        let path = folder + "/" + name
        if !FileManager.default.fileExists(atPath: path) { try runTool(tool, arguments + [path]) }
        return path
    }
    let flac = try encode("ten-minutes.flac", "/usr/bin/flac", ["-s", "-f", source, "-o"])
    let opus = try encode("ten-minutes.opus", "/usr/bin/opusenc", ["--quiet", source])
    let vorbis = try encode("ten-minutes.ogg", "/usr/bin/oggenc", ["-Q", source, "-o"])
    let out = folder + "/xiph-out.wav"
    let rows: [(String, String, String, [String])] = [
        ("FLAC (.flac)", flac, "/usr/bin/flac", ["-s", "-d", "-f", flac, "-o", out]),
        ("Ogg Opus (.opus)", opus, "/usr/bin/opusdec", ["--quiet", "--rate", "48000", opus, out]),
        ("Ogg Vorbis (.ogg)", vorbis, "/usr/bin/oggdec", ["-Q", vorbis, "-o", out]),
    ]
    var lines = ["decode 10-minute files to a 16-bit WAV: aqrender FILE OUT --format s16 [--jobs 1] against the reference decoder (best of 3)"]
    for (name, path, tool, arguments) in rows {
        let one = try bestOf(3) { try runTool(aqrender, [path, out, "--format", "s16", "--jobs", "1"]) }
        let two = try bestOf(3) { try runTool(aqrender, [path, out, "--format", "s16"]) }
        let reference = try bestOf(3) { try runTool(tool, arguments) }
        lines.append(String(format: "  %-18@ ours %5.0f ms one thread, %5.0f ms default (2 jobs)   %@ %5.0f ms   ratios %4.2f / %4.2f",
                            name as NSString, seconds(one) * 1000, seconds(two) * 1000, (URL(fileURLWithPath: tool).lastPathComponent as NSString),
                            seconds(reference) * 1000, seconds(one) / seconds(reference), seconds(two) / seconds(reference)))
    }
    try? FileManager.default.removeItem(atPath: out)
    return lines
}

// MARK: 2c. Matroska and WebM against ffmpeg

func matroskaBenchmarks() throws -> [String] {
    let folder = NSTemporaryDirectory() + "aqbench-files"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    let aqrender = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("aqrender").path
    guard FileManager.default.isExecutableFile(atPath: aqrender) else { return ["matroska: \(aqrender) not built (make bench builds it)"] }
    let ffmpeg = "/usr/bin/ffmpeg"
    guard FileManager.default.isExecutableFile(atPath: ffmpeg) else { return ["matroska: ffmpeg missing (make deps)"] }
    let source = try makeFile("ten-minutes.wav", seconds: 600, in: folder)
    func encode(_ name: String, _ arguments: [String]) throws -> String {
        let path = folder + "/" + name
        if !FileManager.default.fileExists(atPath: path) { try runTool(ffmpeg, ["-v", "error", "-y", "-i", source] + arguments + [path]) }
        return path
    }
    let rows = [
        ("WebM Opus", try encode("ten-minutes.webm", ["-c:a", "libopus"])),
        ("Matroska FLAC", try encode("ten-minutes-flac.mka", ["-c:a", "flac"])),
        ("Matroska AAC", try encode("ten-minutes-aac.mka", ["-c:a", "aac"])),
    ]
    let out = folder + "/matroska-out.wav"
    var lines = ["decode 10-minute Matroska files to a 16-bit WAV: aqrender FILE OUT --format s16 [--jobs 1] against ffmpeg -i FILE -c:a pcm_s16le OUT (best of 3)"]
    for (name, path) in rows {
        let one = try bestOf(3) { try runTool(aqrender, [path, out, "--format", "s16", "--jobs", "1"]) }
        let two = try bestOf(3) { try runTool(aqrender, [path, out, "--format", "s16"]) }
        let reference = try bestOf(3) { try runTool(ffmpeg, ["-v", "error", "-y", "-i", path, "-c:a", "pcm_s16le", out]) }
        lines.append(String(format: "  %-15@ ours %5.0f ms one thread, %5.0f ms default (2 jobs)   ffmpeg %5.0f ms   ratios %4.2f / %4.2f",
                            name as NSString, seconds(one) * 1000, seconds(two) * 1000, seconds(reference) * 1000,
                            seconds(one) / seconds(reference), seconds(two) / seconds(reference)))
    }
    try? FileManager.default.removeItem(atPath: out)
    return lines
}

// MARK: 3a. encoding: whole commands against the reference encoders

func encodeBenchmarks() throws -> [String] {
    let folder = NSTemporaryDirectory() + "aqbench-files"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    let aqrender = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("aqrender").path
    guard FileManager.default.isExecutableFile(atPath: aqrender) else { return ["encode: \(aqrender) not built (make bench builds it)"] }
    let tools = ["/usr/bin/ffmpeg", "/usr/bin/flac", "/usr/bin/opusenc"]
    guard tools.allSatisfy({ FileManager.default.isExecutableFile(atPath: $0) }) else { return ["encode: ffmpeg, flac or opus-tools missing (make deps)"] }
    let source = try makeFile("ten-minutes.wav", seconds: 600, in: folder)
    func size(_ path: String) -> Int { ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0 }
    let rows: [(String, [String], String, [String], String, String)] = [
        ("AAC 128 kbit/s (.m4a)", [source, folder + "/ours.m4a", "--bitrate", "128000"],
         "/usr/bin/ffmpeg", ["-v", "error", "-y", "-i", source, "-c:a", "aac", "-b:a", "128k", folder + "/theirs.m4a"], "ours.m4a", "theirs.m4a"),
        ("ALAC (.m4a)", [source, folder + "/ours-alac.m4a", "--codec", "alac"],
         "/usr/bin/ffmpeg", ["-v", "error", "-y", "-i", source, "-c:a", "alac", folder + "/theirs-alac.m4a"], "ours-alac.m4a", "theirs-alac.m4a"),
        ("FLAC level 5 (.flac)", [source, folder + "/ours.flac"],
         "/usr/bin/flac", ["-s", "-f", "-5", source, "-o", folder + "/theirs.flac"], "ours.flac", "theirs.flac"),
        ("Opus 96 kbit/s (.opus)", [source, folder + "/ours.opus", "--bitrate", "96000"],
         "/usr/bin/opusenc", ["--quiet", "--bitrate", "96", source, folder + "/theirs.opus"], "ours.opus", "theirs.opus"),
    ]
    var lines = ["encode a 10-minute 16-bit stereo 44.1 kHz WAV: aqrender IN OUT.ext (default jobs) against the reference encoder (best of 3, wall time)"]
    for (name, ours, tool, theirs, ourFile, theirFile) in rows {
        let mine = try bestOf(3) { try runTool(aqrender, ours) }
        let reference = try bestOf(3) { try runTool(tool, theirs) }
        lines.append(String(format: "  %-22@ aqrender %6.0f ms   %@ %6.0f ms   ratio %4.2f   sizes %.1f / %.1f MB",
                            name as NSString, seconds(mine) * 1000, (URL(fileURLWithPath: tool).lastPathComponent as NSString),
                            seconds(reference) * 1000, seconds(mine) / seconds(reference),
                            Double(size(folder + "/" + ourFile)) / 1e6, Double(size(folder + "/" + theirFile)) / 1e6))
    }
    let oneJob = try bestOf(3) { try runTool(aqrender, [source, folder + "/ours-alac.m4a", "--codec", "alac", "--jobs", "1"]) }
    lines.append(String(format: "  ALAC with --jobs 1: %6.0f ms (ratio %4.2f)", seconds(oneJob) * 1000, seconds(oneJob) / seconds(try bestOf(3) {
        try runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-i", source, "-c:a", "alac", folder + "/theirs-alac.m4a"]) })))
    // Decoding AAC: libavcodec's decoder (LGPL) against libfaad2's and ffmpeg's own, on a 10-minute M4A.
    let m4a = try makeFile("ten-minutes-nopns.m4a", seconds: 600, in: folder)
    let wav = folder + "/aac-out.wav"
    let avcodec = try bestOf(3) { try runTool(aqrender, [m4a, wav, "--format", "s16", "--jobs", "1", "--aac-decoder", "libavcodec"]) }
    let faad = try bestOf(3) { try runTool(aqrender, [m4a, wav, "--format", "s16", "--jobs", "1", "--aac-decoder", "libfaad2"]) }
    let ffmpeg = try bestOf(3) { try runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-i", m4a, "-c:a", "pcm_s16le", wav]) }
    lines.append(String(format: "decode a 10-minute AAC M4A to a 16-bit WAV on one thread: libavcodec %5.0f ms, libfaad2 %5.0f ms, ffmpeg %5.0f ms; ratios to ffmpeg %4.2f / %4.2f",
                        seconds(avcodec) * 1000, seconds(faad) * 1000, seconds(ffmpeg) * 1000, seconds(avcodec) / seconds(ffmpeg), seconds(faad) / seconds(ffmpeg)))
    try? FileManager.default.removeItem(atPath: wav)
    return lines
}

// MARK: 3a. Apple's C API: the same decode through AudioToolbox and through the Swift API

func toolboxBenchmarks() throws -> [String] {
    let folder = NSTemporaryDirectory() + "aqbench-files"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    let here = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    let atoffline = here.appendingPathComponent("atoffline").path, aqrender = here.appendingPathComponent("aqrender").path
    guard FileManager.default.isExecutableFile(atPath: atoffline), FileManager.default.isExecutableFile(atPath: aqrender) else {
        return ["toolbox: atoffline or aqrender not built (make bench builds them)"]
    }
    let mp3 = try makeFile("ten-minutes.mp3", seconds: 600, in: folder)
    // atoffline: AudioFile → AudioQueueOfflineRender → AudioFile (WAVE, float32); aqrender the
    // same on one job; mpg123 -w writes 16-bit WAV.
    let toolbox = try bestOf(3) { try runTool(atoffline, [mp3, folder + "/toolbox.wav"]) }
    let swiftAPI = try bestOf(3) { try runTool(aqrender, [mp3, folder + "/swift.wav", "--jobs", "1", "--format", "f32"]) }
    let mpg123 = try bestOf(3) { try runTool("/usr/bin/mpg123", ["-q", "-w", folder + "/mpg123.wav", mp3]) }
    let same = FileManager.default.contentsEqual(atPath: folder + "/toolbox.wav", andPath: folder + "/swift.wav")
    return [String(format: "decode a 10-minute MP3 to WAV (best of 3): atoffline (Apple's C API) %4.0f ms, aqrender --jobs 1 %4.0f ms, mpg123 -w %4.0f ms; ratios %4.2f to aqrender, %4.2f to mpg123; the two WAVs %@",
                          seconds(toolbox) * 1000, seconds(swiftAPI) * 1000, seconds(mpg123) * 1000, seconds(toolbox) / seconds(swiftAPI),
                          seconds(toolbox) / seconds(mpg123), same ? "are identical" : "DIFFER")]
}

// MARK: 3b. transforming: play rate and rate conversion against sox, whole commands on one core

func transformBenchmarks() throws -> [String] {
    let folder = NSTemporaryDirectory() + "aqbench-files"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    let aqrender = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("aqrender").path
    guard FileManager.default.isExecutableFile(atPath: aqrender) else { return ["transform: \(aqrender) not built (make bench builds it)"] }
    let output = folder + "/transform-out.wav"
    defer { try? FileManager.default.removeItem(atPath: output) }
    var lines: [String] = []
    // Everything pinned to one core (taskset -c 0), best of 3 wall times.
    func oneCore(_ path: String, _ arguments: [String]) throws -> Double {
        seconds(try bestOf(3) { try runTool("/usr/bin/taskset", ["-c", "0", path] + arguments) })
    }
    var perSecond: [Int: Double] = [:], plainPerSecond: [Int: Double] = [:]
    for minutes in [1, 10] {
        let wav = try makeFile("\(minutes)-minutes.wav", seconds: 60 * minutes, in: folder)
        let audio = Double(60 * minutes)
        let plain = try oneCore(aqrender, [wav, output])
        let ours = try oneCore(aqrender, [wav, output, "--rate", "1.5"])
        let tempo = try oneCore("/usr/bin/sox", [wav, "-e", "floating-point", "-b", "32", output, "tempo", "1.5"])
        let converted = try oneCore(aqrender, [wav, output, "--sample-rate", "48000"])
        let rate = try oneCore("/usr/bin/sox", [wav, "-e", "floating-point", "-b", "32", output, "rate", "-v", "48000"])
        perSecond[minutes] = ours / audio
        plainPerSecond[minutes] = plain / audio
        lines.append("\(minutes)-minute WAV (16-bit stereo 44.1 kHz), whole commands on one core, writing float WAV")
        lines.append(String(format: "  aqrender IN OUT                        : %7.0f ms", plain * 1000))
        lines.append(String(format: "  aqrender IN OUT --rate 1.5             : %7.0f ms  (%4.0fx real time)", ours * 1000, audio / ours))
        lines.append(String(format: "  sox IN OUT tempo 1.5                   : %7.0f ms  ratio aqrender / sox %5.2f", tempo * 1000, ours / tempo))
        lines.append(String(format: "  aqrender IN OUT --sample-rate 48000    : %7.0f ms  (%4.0fx real time)", converted * 1000, audio / converted))
        lines.append(String(format: "  sox IN OUT rate -v 48000               : %7.0f ms  ratio aqrender / sox %5.2f", rate * 1000, converted / rate))
    }
    if let short = plainPerSecond[1], let long = plainPerSecond[10] {
        lines.append(String(format: "  aqrender cost per audio second, 10-minute / 1-minute file: %.2f (1.00 = linear)", long / short))
    }
    if let short = perSecond[1], let long = perSecond[10] {
        lines.append(String(format: "  --rate 1.5 cost per audio second, 10-minute / 1-minute file: %.2f (1.00 = linear)", long / short))
    }
    return lines
}

// MARK: 3c. mixing: aqmix against sox -m, whole commands on one core

func mixBenchmarks() throws -> [String] {
    let folder = NSTemporaryDirectory() + "aqbench-files"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    let aqmix = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("aqmix").path
    guard FileManager.default.isExecutableFile(atPath: aqmix) else { return ["mix: \(aqmix) not built (make bench builds it)"] }
    let output = folder + "/mix-out.wav"
    defer { try? FileManager.default.removeItem(atPath: output) }
    func oneCore(_ path: String, _ arguments: [String]) throws -> Double {
        seconds(try bestOf(3) { try runTool("/usr/bin/taskset", ["-c", "0", path] + arguments) })
    }
    var lines: [String] = []
    var perSecond: [Int: Double] = [:]
    for minutes in [1, 4] {
        // Eight inputs (copies of one synthesized file: the cost does not depend on the content).
        let source = try makeFile("\(minutes)-minutes.wav", seconds: 60 * minutes, in: folder)
        let inputs = try (0..<8).map { index -> String in
            let path = folder + "/mix-\(minutes)-\(index).wav"
            if !FileManager.default.fileExists(atPath: path) { try FileManager.default.copyItem(atPath: source, toPath: path) }
            return path
        }
        let ours = try oneCore(aqmix, [output] + inputs)
        // sox -m scales each input by 1/8 unless told: -v 1 before each, as aqmix mixes at unity gain.
        let sox = try oneCore("/usr/bin/sox", ["-m"] + inputs.flatMap { ["-v", "1", $0] } + ["-e", "floating-point", "-b", "32", output])
        perSecond[minutes] = ours / Double(60 * minutes)
        lines.append("8 \(minutes)-minute WAVs (16-bit stereo 44.1 kHz) mixed, whole commands on one core, writing float WAV")
        lines.append(String(format: "  aqmix OUT IN×8                         : %7.0f ms", ours * 1000))
        lines.append(String(format: "  sox -m -v 1 IN ×8 OUT                  : %7.0f ms  ratio aqmix / sox %5.2f", sox * 1000, ours / sox))
    }
    if let short = perSecond[1], let long = perSecond[4] {
        lines.append(String(format: "  aqmix cost per audio second, 4-minute / 1-minute inputs: %.2f (1.00 = linear)", long / short))
    }
    // The crossfading player against the gapless one: the same list, the whole command.
    let aqplay = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("aqplay").path
    guard FileManager.default.isExecutableFile(atPath: aqplay) else { return lines + ["crossfade: \(aqplay) not built (make bench builds it)"] }
    let mp3 = try makeFile("60s.mp3", seconds: 60, in: folder)
    let list = Array(repeating: mp3, count: 4)
    // Runs of a tenth of a second vary by several per cent on a shared machine: medians of 25
    // runs each, taking turns, of the wall time and of the CPU time (user + system, as the
    // kernel counts it for the waited-for child).
    var walls: [[Double]] = [[], []], cpus: [[Double]] = [[], []]
    for _ in 0..<25 {
        for (index, extra) in [[], ["--crossfade", "5"]].enumerated() {
            let (wall, cpu) = try wallAndCPU("/usr/bin/taskset", ["-c", "0", aqplay, "--fast"] + extra + list)
            walls[index].append(wall)
            cpus[index].append(cpu)
        }
    }
    func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
    let (gapless, crossfading) = (median(walls[0]), median(walls[1]))
    let (gaplessCPU, crossfadingCPU) = (median(cpus[0]), median(cpus[1]))
    lines.append("aqplay of 4 one-minute MP3s (stereo 44.1 kHz) through the unpaced null sink, whole commands on one core, medians of 25 runs")
    lines.append(String(format: "  aqplay --fast LIST                     : wall %4.0f ms  CPU %4.0f ms", gapless * 1000, gaplessCPU * 1000))
    lines.append(String(format: "  aqplay --fast --crossfade 5 LIST       : wall %4.0f ms  CPU %4.0f ms  ratio crossfading / gapless: wall %5.2f, CPU %5.2f",
                        crossfading * 1000, crossfadingCPU * 1000, crossfading / gapless, crossfadingCPU / gaplessCPU))
    // An equaliser before and after volume and the loudness meter on what is played, against the
    // plain player: a 10-minute MP3, medians of 9 runs each, taking turns.
    let long = try makeFile("600s.mp3", seconds: 600, in: folder)
    var plain: [Double] = [], effected: [Double] = []
    for _ in 0..<9 {
        plain.append(try wallAndCPU("/usr/bin/taskset", ["-c", "0", aqplay, "--fast", long]).1)
        effected.append(try wallAndCPU("/usr/bin/taskset", ["-c", "0", aqplay, "--fast", "--eq", "lowshelf:150:6", "--eq", "highshelf:5000:-3",
                                                          "--loudness", long]).1)
    }
    lines.append("aqplay of a 10-minute MP3 (stereo 44.1 kHz) through the unpaced null sink, one core, CPU medians of 9 runs")
    lines.append(String(format: "  aqplay --fast MP3                      : CPU %5.0f ms", median(plain) * 1000))
    lines.append(String(format: "  aqplay --fast --eq ×2 --loudness MP3   : CPU %5.0f ms  ratio %5.3f", median(effected) * 1000, median(effected) / median(plain)))
    return lines
}

// MARK: 3d. loudness: aqinfo --loudness against loudgain (libebur128), whole commands

func loudnessBenchmarks() throws -> [String] {
    let folder = NSTemporaryDirectory() + "aqbench-files"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    let aqinfo = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("aqinfo").path
    guard FileManager.default.isExecutableFile(atPath: aqinfo) else { return ["loudness: \(aqinfo) not built (make bench builds it)"] }
    guard FileManager.default.isExecutableFile(atPath: "/usr/bin/loudgain") else { return ["loudness: loudgain is not installed"] }
    var lines = ["loudness scans (integrated, range, true peak) of FLAC (stereo 44.1 kHz), whole commands (wall / CPU seconds; medians of 7, alternating)"]
    var perSecond: [Int: Double] = [:]
    for minutes in [1, 10] {
        let flac = try makeFile("\(minutes)-min.flac", seconds: minutes * 60, in: folder)
        let (ours, theirs) = try compare((aqinfo, ["--loudness", flac]), ("/usr/bin/loudgain", ["-O", "-q", flac]))
        perSecond[minutes] = ours.wall / Double(minutes * 60)
        lines.append(String(format: "  %2d min: aqinfo --loudness FILE.flac %6.2f / %5.2f s   loudgain -O -q FILE.flac %6.2f / %5.2f s   wall %.2f  CPU %.2f",
                            minutes, ours.wall, ours.cpu, theirs.wall, theirs.cpu, ours.wall / max(theirs.wall, 0.001), ours.cpu / max(theirs.cpu, 0.001)))
    }
    if let short = perSecond[1], let long = perSecond[10] {
        lines.append(String(format: "  aqinfo --loudness cost per audio second, 10-minute / 1-minute file: %.2f (1.00 = linear)", long / short))
    }
    // The meter alone, as a live tap runs it: 60 s of stereo 44.1 kHz noise in blocks of 512 frames.
    let frames = 44100 * 60
    var noise = [Float](repeating: 0, count: frames * 2)
    var seed: UInt32 = 1
    for i in noise.indices {
        seed = seed &* 1_664_525 &+ 1_013_904_223
        noise[i] = (Float(seed >> 8) / Float(1 << 24) - 0.5) * 0.8
    }
    let meterTime = try measure(repeats: 3) {
        var meter = try LoudnessMeter(sampleRate: 44100, channels: 2)
        noise.withUnsafeBufferPointer { all in
            for start in stride(from: 0, to: all.count, by: 1024) {
                meter.add(UnsafeBufferPointer(rebasing: all[start..<min(start + 1024, all.count)]))
                if start % (4410 * 2) == 0 { _ = meter.reading }   // a reading published every 100 ms
            }
        }
        precondition(meter.reading.integrated.isFinite)
    }
    lines.append(String(format: "  LoudnessMeter alone (a live tap's work), stereo 44.1 kHz white noise: %.1f ms per audio second = %.2f %% of one core",
                        seconds(meterTime) * 1000 / 60, seconds(meterTime) / 60 * 100))
    return lines
}

// MARK: 4. playback through PulseAudio

/// A private PulseAudio server for the measurements (a null sink), killed at the end. Its log is
/// at ``privateServerLog(_:)``; `debugLog` makes it log at debug level (the underruns it sees).
func withPrivateServer<T>(debugLog: Bool = false, _ body: (String) throws -> T) throws -> T {
    // A directory of its own for each server: a socket left by the last one would be taken for
    // this one's before it listens.
    let runtime = NSTemporaryDirectory() + "aqbench-pulse-\(getpid())-\(UUID().uuidString.prefix(8))"
    try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    let daemon = Process()
    daemon.executableURL = URL(fileURLWithPath: "/usr/bin/pulseaudio")
    daemon.arguments = ["-D", "-n", "--exit-idle-time=-1", "--disallow-exit", "--load=module-native-protocol-unix",
                        "--load=module-null-sink sink_name=out format=float32le rate=44100 channels=2 norewinds=1", "--log-target=file:\(runtime)/pa.log"]
        + (debugLog ? ["--log-level=debug"] : [])
    daemon.environment = ["XDG_RUNTIME_DIR": runtime, "HOME": runtime, "PATH": "/usr/bin:/bin"]
    try daemon.run()
    daemon.waitUntilExit()
    while !FileManager.default.fileExists(atPath: runtime + "/pulse/native") { usleep(20_000) }
    defer {
        if let pid = (try? String(contentsOfFile: runtime + "/pulse/pid", encoding: .utf8)).flatMap({ Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }) {
            kill(pid, SIGKILL)
        }
        try? FileManager.default.removeItem(atPath: runtime)
    }
    return try body("unix:" + runtime + "/pulse/native")
}

/// The log file of the private server at `server` (an address ``withPrivateServer(debugLog:_:)`` gave).
func privateServerLog(_ server: String) -> String {
    String(server.dropFirst("unix:".count).dropLast("/pulse/native".count)) + "/pa.log"
}

/// Underruns of playback streams a private server logged at debug level: protocol-native's
/// "Actual underrun of '…'" and "Implicit underrun of '…'" (a stream's end is logged as a drain,
/// not an underrun). The server rate-limits these lines, so a count above ten in five seconds is a
/// lower bound.
func serverUnderruns(_ server: String) -> Int {
    let log = (try? String(contentsOfFile: privateServerLog(server), encoding: .utf8)) ?? ""
    return log.split(separator: "\n").filter { $0.contains(" underrun of '") }.count
}

// MARK: playback under full CPU load: gaps heard, against mpg123 and paplay

/// Plays `seconds` of a continuous two-tone signal through a private PulseAudio server at a 20 ms
/// target latency while a busy loop per core (bounded by `timeout`) keeps every core at work, and
/// counts the gaps in the server's monitor (runs of 16 or more silent frames between the first and
/// the last sound): each underrun is heard as one. `aqplay --latency 20`, `mpg123 -o pulse` and
/// `paplay --latency-msec=20` play the same tone (the MP3 for the first two, its WAV decode for
/// paplay); `PULSE_LATENCY_MSEC=20` asks mpg123 for the same latency.
func loadBenchmarks(seconds: Int) throws -> [String] {
    let tools = ["/usr/bin/pulseaudio", "/usr/bin/parec", "/usr/bin/paplay", "/usr/bin/mpg123", "/usr/bin/timeout", "/usr/bin/ffmpeg"]
    guard tools.allSatisfy({ FileManager.default.isExecutableFile(atPath: $0) }) else { return ["load: pulseaudio-utils, mpg123 or ffmpeg missing (make deps)"] }
    let aqplay = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("aqplay").path
    guard FileManager.default.isExecutableFile(atPath: aqplay) else { return ["load: \(aqplay) not built (make bench builds it)"] }
    let folder = NSTemporaryDirectory() + "aqbench-files"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    let mp3 = folder + "/load-tone-\(seconds).mp3", wav = folder + "/load-tone-\(seconds).wav"
    if !FileManager.default.fileExists(atPath: mp3) {
        try runTool("/usr/bin/ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i",
                                        "aevalsrc=0.3*sin(2*PI*440*t)+0.05|0.3*sin(2*PI*660*t)+0.05:s=44100:d=\(seconds)", "-c:a", "libmp3lame", "-q:a", "2", mp3])
        try runTool("/usr/bin/ffmpeg", ["-nostdin", "-v", "error", "-y", "-i", mp3, "-c:a", "pcm_s16le", wav])
    }
    let cores = max(Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))), 1)
    let players: [(String, String, [String], [String: String])] = [
        ("aqplay --latency 20", aqplay, ["--sink", "pulse", "--latency", "20", mp3], [:]),
        ("the same, AQ_REALTIME=0", aqplay, ["--sink", "pulse", "--latency", "20", mp3], ["AQ_REALTIME": "0"]),
        ("mpg123 -o pulse", "/usr/bin/mpg123", ["-q", "-o", "pulse", mp3], ["PULSE_LATENCY_MSEC": "20"]),
        ("paplay --latency-msec=20", "/usr/bin/paplay", ["--latency-msec=20", wav], [:]),
    ]
    var lines = ["playback of a \(seconds) s tone at a 20 ms target latency through a private PulseAudio server, \(cores) busy loops keeping every core at work: gaps heard in the monitor (16+ silent frames inside the sound) and underruns the server logged"]
    for (name, path, arguments, extra) in players {
        let result = try withPrivateServer(debugLog: true) { server -> (gaps: Int, sound: Double, underruns: Int) in
            let environment = ["PULSE_SERVER": server, "HOME": NSTemporaryDirectory(), "PATH": "/usr/bin:/bin"].merging(extra) { $1 }
            let capture = folder + "/load-capture.raw"
            _ = FileManager.default.createFile(atPath: capture, contents: nil)
            let recorder = Process()
            recorder.executableURL = URL(fileURLWithPath: "/usr/bin/parec")
            recorder.arguments = ["-d", "out.monitor", "--format=float32le", "--rate=44100", "--channels=2", "--raw", "--latency-msec=20"]
            recorder.environment = environment
            recorder.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: capture))
            try recorder.run()
            let hogs = try startBusyLoops(cores)
            defer {
                for hog in hogs where hog.isRunning { kill(hog.processIdentifier, SIGKILL) }
                if recorder.isRunning { kill(recorder.processIdentifier, SIGKILL) }
            }
            let player = Process()
            player.executableURL = URL(fileURLWithPath: path)
            player.arguments = arguments
            player.environment = environment
            player.standardOutput = FileHandle.nullDevice
            player.standardError = FileHandle.nullDevice
            let exited = DispatchSemaphore(value: 0)
            player.terminationHandler = { _ in exited.signal() }
            try player.run()
            exited.wait()
            for hog in hogs where hog.isRunning { kill(hog.processIdentifier, SIGKILL) }
            // The monitor runs about the server's latency behind: give it half a second to catch up.
            _ = exited.wait(timeout: .now() + .milliseconds(500))
            kill(recorder.processIdentifier, SIGKILL)
            let data = (try? Data(contentsOf: URL(fileURLWithPath: capture))) ?? Data()
            let samples: [Float] = data.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
            let (gaps, sound) = countGaps(samples)
            return (gaps, sound, serverUnderruns(server))
        }
        lines.append(String(format: "  %-26@ %4d gaps over %.1f s of sound, %3d underruns logged by the server", name as NSString,
                            result.gaps, result.sound, result.underruns))
    }
    return lines
}

/// Runs of 16 or more silent stereo frames between the first and the last sound, and the seconds
/// of sound between them.
/// One busy loop (`sh -c 'while :; do :; done'`) per core, started. Stop them with SIGKILL:
/// children inherit a signal mask in which the Swift runtime blocks SIGTERM, so neither
/// `terminate()` nor `timeout`'s SIGTERM ends them.
func startBusyLoops(_ count: Int) throws -> [Process] {
    let hogs = (0..<count).map { _ -> Process in
        let hog = Process()
        hog.executableURL = URL(fileURLWithPath: "/bin/sh")
        hog.arguments = ["-c", "while :; do :; done"]
        return hog
    }
    for hog in hogs { try hog.run() }
    return hogs
}

func countGaps(_ samples: [Float], rate: Double = 44100) -> (gaps: Int, sound: Double) {
    let frames = samples.count / 2
    func silent(_ frame: Int) -> Bool { samples[2 * frame] == 0 && samples[2 * frame + 1] == 0 }
    guard let first = (0..<frames).first(where: { !silent($0) }), let last = (0..<frames).last(where: { !silent($0) }) else { return (0, 0) }
    var gaps = 0, run = 0
    for frame in first...last {
        if silent(frame) { run += 1 } else {
            if run >= 16 { gaps += 1 }
            run = 0
        }
    }
    return (gaps, Double(last - first + 1) / rate)
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
}

/// CPU seconds of one whole run, every thread (the kernel's task clock, `perf stat -e task-clock`,
/// to the microsecond; GNU time's user + system, to the hundredth, where perf is missing).
func cpuSeconds(_ path: String, _ arguments: [String], server: String, allowFailure: Bool = false) throws -> Double {
    try cpuSeconds(path, arguments, environment: ["PULSE_SERVER": server, "HOME": NSTemporaryDirectory(), "PATH": "/usr/bin:/bin"],
                   allowFailure: allowFailure)
}

/// CPU seconds of a whole run (perf's task clock, else GNU time's user + system) in `environment`.
func cpuSeconds(_ path: String, _ arguments: [String], environment: [String: String], allowFailure: Bool = false) throws -> Double {
    if FileManager.default.isExecutableFile(atPath: "/usr/bin/perf") {
        let (text, status) = try standardError(of: "/usr/bin/perf", ["stat", "-x", ",", "-e", "task-clock", path] + arguments,
                                               environment: environment)
        if let line = text.split(separator: "\n").last(where: { $0.contains("task-clock") }),
           let milliseconds = line.split(separator: ",").first.flatMap({ Double($0) }), status == 0 || allowFailure {
            return milliseconds / 1000
        }
        throw ExitMessage("\(path) failed under perf stat: \(text.suffix(400))")
    }
    return try gnuTime("%U %S", path, arguments, environment: environment, allowFailure: allowFailure).reduce(0, +)
}

/// Instructions a whole run executes, every thread, as valgrind's callgrind counts them ("Collected").
func instructionCount(_ path: String, _ arguments: [String], server: String) throws -> Int {
    let (text, _) = try standardError(of: "/usr/bin/valgrind", ["--tool=callgrind", "--callgrind-out-file=/dev/null", path] + arguments,
                                      environment: ["PULSE_SERVER": server, "HOME": NSTemporaryDirectory(), "PATH": "/usr/bin:/bin"])
    guard let line = text.split(separator: "\n").last(where: { $0.contains("Collected :") }),
          let count = line.split(separator: " ").last.flatMap({ Int($0) }) else {
        throw BenchError("callgrind gave no count for \(path): \(text.suffix(400))")
    }
    return count
}

func playbackBenchmarks() throws -> [String] {
    guard FileManager.default.isExecutableFile(atPath: "/usr/bin/pulseaudio") else { return ["playback: pulseaudio is not installed"] }
    let folder = NSTemporaryDirectory() + "aqbench-files"
    let mp3 = try makeFile("thirty-seconds.mp3", seconds: 30, in: folder)
    let aqplay = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("aqplay").path
    return try withPrivateServer { server in
        var lines = ["play a 30-second MP3 through a PulseAudio null sink (CPU seconds of the whole process: perf's task clock)"]
        if FileManager.default.isExecutableFile(atPath: aqplay) {
            // Nine runs each, alternating; medians (one run is 0.05-0.1 s of CPU: noisy).
            var ours: [Double] = [], theirs: [Double] = []
            for _ in 0..<9 {
                ours.append(try cpuSeconds(aqplay, [mp3, "--sink", "pulse"], server: server))
                theirs.append(try cpuSeconds("/usr/bin/mpg123", ["-q", "-o", "pulse", mp3], server: server))
            }
            let a = median(ours), b = median(theirs)
            let runs = { (values: [Double]) in values.map { String(format: "%.3f", $0) }.joined(separator: " ") }
            lines.append(String(format: "  aqplay FILE --sink pulse : median %.3f s", a) + " (runs \(runs(ours)))")
            lines.append(String(format: "  mpg123 -o pulse FILE     : median %.3f s", b) + " (runs \(runs(theirs)))" + String(format: "   ratio %.2f", a / b))
            // Instructions executed (valgrind's callgrind): repeatable where seconds are not.
            if FileManager.default.isExecutableFile(atPath: "/usr/bin/valgrind") {
                // Valgrind 3.19 cannot read the Swift binary's DWARF 5 debug information (it stops
                // with "exceeds valid image size"): it runs a copy without it.
                let stripped = NSTemporaryDirectory() + "aqplay-stripped-\(getpid())"
                try? FileManager.default.removeItem(atPath: stripped)
                _ = try runTool("/usr/bin/strip", ["--strip-debug", "-o", stripped, aqplay])
                defer { try? FileManager.default.removeItem(atPath: stripped) }
                let ourCount = try instructionCount(stripped, [mp3, "--sink", "pulse"], server: server)
                let theirCount = try instructionCount("/usr/bin/mpg123", ["-q", "-o", "pulse", mp3], server: server)
                // What starting a Swift program costs before any audio: the dynamic linker, the
                // runtime's conformance tables, Foundation.
                let startUp = try instructionCount(stripped, ["--help"], server: server)
                lines.append(String(format: "  instructions (callgrind): aqplay %.1f M (of which %.1f M is start-up, `aqplay --help`), mpg123 %.1f M"
                                    + "   ratio %.2f, %.2f without start-up",
                                    Double(ourCount) / 1e6, Double(startUp) / 1e6, Double(theirCount) / 1e6,
                                    Double(ourCount) / Double(max(theirCount, 1)), Double(ourCount - startUp) / Double(max(theirCount, 1))))
            } else {
                lines.append("  valgrind is not installed (make bench installs it): no instruction counts")
            }
        } else {
            lines.append("  \(aqplay) not built (make bench builds it)")
        }
        // start() to the first frames written to the server, after priming.
        var delays: [Double] = []
        for _ in 0..<20 {
            let sink = PulseAudioSink(configuration: .init(server: server))
            let queue = try AudioQueue(format: .float32(sampleRate: 44100, channels: 2), configuration: .init(sink: sink))
            let tone = [Float](repeating: 0.1, count: 44100 * 2)
            let buffer = try queue.allocateBuffer(capacity: tone.count * 4)
            try tone.withUnsafeBytes { try buffer.setData($0) }
            try queue.enqueue(buffer)
            try queue.prime()
            try queue.start()
            var waited = 0
            while sink.startToFirstWrite == nil && waited < 2000 { usleep(1000); waited += 1 }
            if let delay = sink.startToFirstWrite { delays.append(seconds(delay) * 1000) }
            queue.dispose(immediately: true)
        }
        delays.sort()
        if !delays.isEmpty {
            lines.append(String(format: "start() to the first frame written to the server, after prime (20 runs): median %.3f ms, worst %.3f ms",
                                delays[delays.count / 2], delays.last ?? 0))
        }
        return lines
    }
}

// MARK: report

let render = try renderBenchmark()
let roundTrips = 50_000
let loopTime = try callbackBenchmark(roundTrips: roundTrips)
let mb = Double(render.bytes) / 1_048_576
let memcpyTime = render.memcpy, queueTime = render.queue, audioSeconds = render.audioSeconds
let ratio = seconds(queueTime) / seconds(memcpyTime)
/// `aqbench [load [SECONDS]] [codecs] [apple] [toolbox] [transform] [mix] [loudness] [timepitch] [commands] [playback] [recording] [streaming] [longrun [HOURS] [m4a]]`: only those sections (render and callback
/// figures always print; `longrun` runs only when named).
let sections = Set(CommandLine.arguments.dropFirst())
print("aqbench — \(machine())")
print("")
print("offline render, float32 stereo 44.1 kHz, \(audioSeconds) s (\(String(format: "%.1f", mb)) MiB), trims 2112/970, volume 0.8")
print(String(format: "  memcpy of the same bytes : %8.2f ms  (%7.0f MiB/s)", seconds(memcpyTime) * 1000, mb / seconds(memcpyTime)))
print(String(format: "  queue offline render     : %8.2f ms  (%7.0f MiB/s, %.0fx real time)", seconds(queueTime) * 1000, mb / seconds(queueTime), Double(audioSeconds) / seconds(queueTime)))
print(String(format: "  ratio queue / memcpy     : %8.2f", ratio))
print(String(format: "  floor: setData + volume  : %8.2f ms  (ratio %.2f: copy into a buffer, then out times the volume)",
             seconds(render.floor) * 1000, seconds(render.floor) / seconds(memcpyTime)))
print("  (each run above starts with the caches full of other, clean data; best of 9 rounds, taking turns)")
print(String(format: "  memcpy 7 times in a row  : %8.2f ms  (ratio queue / that %.2f: no eviction between the runs, the earlier method)",
             seconds(render.memcpyRepeated) * 1000, seconds(queueTime) / seconds(render.memcpyRepeated)))
print("")
print("output callback round trips (enqueue -> decode -> unpaced null sink -> callback -> enqueue), 2 buffers of 64 frames")
print(String(format: "  %d round trips in %.1f ms : %.0f per second", roundTrips, seconds(loopTime) * 1000, Double(roundTrips) / seconds(loopTime)))
// The sections run when no section is named, in this order.
let namedSections: [(name: String, run: () throws -> [String])] = [
    ("codecs", codecBenchmarks), ("apple", appleFormatBenchmarks), ("xiph", xiphBenchmarks), ("matroska", matroskaBenchmarks), ("encode", encodeBenchmarks), ("toolbox", toolboxBenchmarks), ("avfaudio", avfaudioBenchmarks), ("transform", transformBenchmarks), ("mix", mixBenchmarks), ("loudness", loudnessBenchmarks),
    ("timepitch", timePitchBenchmarks), ("playback", playbackBenchmarks), ("commands", commandBenchmarks),
    ("recording", recordingBenchmarks),
]
for section in namedSections where sections.isEmpty || sections.contains(section.name) {
    print("")
    for line in try section.run() { print(line) }
}

// MARK: 5. streaming over loopback HTTP

struct BenchError: Error, CustomStringConvertible { let description: String; init(_ d: String) { description = d } }

/// Events of a player, with the time each arrived; a waiter is woken by each new one.
final class TimedEvents: @unchecked Sendable {
    private let condition = NSCondition()
    private var list: [(ContinuousClock.Instant, AudioPlayerEvent)] = []
    func add(_ event: AudioPlayerEvent) {
        condition.lock()
        list.append((.now, event))
        condition.broadcast()
        condition.unlock()
    }
    /// When the player first reported `state` after `after`, waiting up to `timeout` seconds for it.
    func first(_ state: AudioPlayerState, after: ContinuousClock.Instant, timeout: Double) -> ContinuousClock.Instant? {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let found = list.first(where: { if case .state(let s) = $0.1, s == state, $0.0 >= after { return true } else { return false } }) {
                return found.0
            }
            if !condition.wait(until: deadline) { return nil }
        }
    }
}

/// Wall time of a command (the median of `runs`).
func wallSeconds(_ path: String, _ arguments: [String], runs: Int = 5) throws -> Double {
    var times: [Double] = []
    for _ in 0..<runs {
        // posix_spawn and waitpid: Foundation's Process notices an exit only every few tens of ms.
        var pid: pid_t = 0
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        defer { posix_spawn_file_actions_destroy(&actions) }
        let begin = ContinuousClock.now
        guard posix_spawn(&pid, path, &actions, nil, argv, environ) == 0 else { throw BenchError("cannot start \(path)") }
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        times.append(seconds(ContinuousClock.now - begin))
    }
    return median(times)
}

/// Five runs of: play `url` until the sink renders (`playing`), then seek to 20 s until it renders
/// again; the seconds each took.
func startAndSeekLatencies(_ url: String) -> (start: [Double], seek: [Double]) {
    var firstFrame: [Double] = [], seekLatency: [Double] = []
    for _ in 0..<5 {
        let events = TimedEvents()
        let player = AudioPlayer(items: [.url(url)],
                                 configuration: .init(buffering: .init(startSeconds: 0.1, restartSeconds: 0.5, maximumSeconds: 2),
                                                      onEvent: { events.add($0) }),
                                 makeSink: { NullSink(pacing: .realTime) })
        let begin = ContinuousClock.now
        let finished = DispatchSemaphore(value: 0)
        let thread = Thread { _ = try? player.run(); finished.signal() }
        thread.start()
        if let playing = events.first(.playing, after: begin, timeout: 10) { firstFrame.append(seconds(playing - begin)) }
        let seekAt = ContinuousClock.now
        Task { _ = try? await player.seek(to: 20) }
        if let playing = events.first(.playing, after: seekAt, timeout: 10) { seekLatency.append(seconds(playing - seekAt)) }
        player.stop()
        _ = finished.wait(timeout: .now() + 5)
    }
    return (firstFrame, seekLatency)
}

func streamingBenchmarks() throws -> [String] {
    MPG123Decoder.register()
    FAADDecoder.register()
    let folder = NSTemporaryDirectory() + "aqbench-files"
    var lines = ["streaming over loopback HTTP (a 30-second file; medians of 5; ours in-process, ffmpeg as a process)"]
    let startup = try wallSeconds("/usr/bin/ffmpeg", ["-nostdin", "-v", "error", "-version"])
    for name in ["thirty-seconds.mp3", "thirty-seconds.m4a"] {
        let path = try makeFile(name, seconds: 30, in: folder)
        let server = try LoopbackServer(body: Array(try Data(contentsOf: URL(fileURLWithPath: path))))
        defer { server.shutdown() }
        let (firstFrame, seekLatency) = startAndSeekLatencies(server.url(name))
        let url = server.url(name)
        let theirs = try wallSeconds("/usr/bin/ffmpeg", ["-nostdin", "-v", "error", "-i", url, "-frames:a", "1", "-f", "null", "-"])
        let theirsSeek = try wallSeconds("/usr/bin/ffmpeg", ["-nostdin", "-v", "error", "-ss", "20", "-i", url, "-frames:a", "1", "-f", "null", "-"])
        lines.append("  \(name)")
        lines.append(String(format: "    play(url) -> first frame at the sink : %6.1f ms   ffmpeg -i URL -frames:a 1 -f null -       : %6.1f ms",
                            median(firstFrame) * 1000, theirs * 1000))
        lines.append(String(format: "    seek(20 s) -> playing again          : %6.1f ms   ffmpeg -ss 20 -i URL -frames:a 1 -f null - : %6.1f ms",
                            median(seekLatency) * 1000, theirsSeek * 1000))
    }
    lines.append(String(format: "  (ffmpeg -version alone takes %.1f ms: its figures are mostly process start-up)", startup * 1000))
    return lines
}

/// HLS VOD over loopback: ffmpeg's HLS muxer cuts a 30-second and a 10-minute AAC file into 2 s
/// MPEG-TS segments (`-c:a copy`), served by the test suite's `LoopbackServer`.
func hlsBenchmarks() throws -> [String] {
    MPG123Decoder.register()
    FAADDecoder.register()
    let folder = NSTemporaryDirectory() + "aqbench-files"
    var lines = ["HLS VOD over loopback HTTP (2 s MPEG-TS segments of AAC 128 kb/s; medians of 5; ours in-process, ffmpeg as a process)"]
    func presentation(_ source: String, _ name: String) throws -> [String: [UInt8]] {
        let dir = folder + "/" + name
        if !FileManager.default.fileExists(atPath: dir + "/index.m3u8") {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            try runTool("/usr/bin/ffmpeg", ["-nostdin", "-v", "error", "-y", "-i", source, "-c:a", "copy", "-f", "hls", "-hls_time", "2",
                                             "-hls_playlist_type", "vod", "-hls_segment_filename", dir + "/seg%04d.ts", dir + "/index.m3u8"])
        }
        var files: [String: [UInt8]] = [:]
        for file in try FileManager.default.contentsOfDirectory(atPath: dir) {
            files[name + "/" + file] = Array(try Data(contentsOf: URL(fileURLWithPath: dir + "/" + file)))
        }
        return files
    }
    let short = try presentation(try makeFile("thirty-seconds.m4a", seconds: 30, in: folder), "hls-30s")
    let long = try presentation(try makeFile("ten-minutes.m4a", seconds: 600, in: folder), "hls-10min")
    let server = try LoopbackServer(files: short.merging(long) { a, _ in a }, faultyPath: nil)
    defer { server.shutdown() }
    let url = server.url("hls-30s/index.m3u8")
    let (firstFrame, seekLatency) = startAndSeekLatencies(url)
    let theirs = try wallSeconds("/usr/bin/ffmpeg", ["-nostdin", "-v", "error", "-i", url, "-frames:a", "1", "-f", "null", "-"])
    let theirsSeek = try wallSeconds("/usr/bin/ffmpeg", ["-nostdin", "-v", "error", "-ss", "20", "-i", url, "-frames:a", "1", "-f", "null", "-"])
    let startup = try wallSeconds("/usr/bin/ffmpeg", ["-nostdin", "-v", "error", "-version"])
    lines.append(String(format: "  play(url) -> first frame at the sink : %6.1f ms   ffmpeg -i URL -frames:a 1 -f null -       : %6.1f ms",
                        median(firstFrame) * 1000, theirs * 1000))
    lines.append(String(format: "  seek(20 s) -> playing again          : %6.1f ms   ffmpeg -ss 20 -i URL -frames:a 1 -f null - : %6.1f ms",
                        median(seekLatency) * 1000, theirsSeek * 1000))
    lines.append(String(format: "  (ffmpeg -version alone takes %.1f ms)", startup * 1000))
    // CPU of playing 10 minutes (unpaced: the same work as real time, without the waiting),
    // scaled to an hour; ffmpeg decoding the same URL to nothing beside it.
    let aqplay = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("aqplay").path
    let longURL = server.url("hls-10min/index.m3u8")
    var ours: [Double] = [], ffmpeg: [Double] = []
    for _ in 0..<3 {
        ours.append(try gnuTime("%U %S", aqplay, ["--fast", longURL]).reduce(0, +))
        ffmpeg.append(try gnuTime("%U %S", "/usr/bin/ffmpeg", ["-nostdin", "-v", "error", "-i", longURL, "-f", "null", "-"]).reduce(0, +))
    }
    lines.append(String(format: "  CPU per hour of audio: aqplay --fast URL %.2f s   ffmpeg -i URL -f null - %.2f s   ratio %.2f (user+system, medians of 3, 10-minute presentation x 6)",
                        median(ours) * 6, median(ffmpeg) * 6, median(ours) / median(ffmpeg)))
    return lines
}

if sections.isEmpty || sections.contains("streaming") {
    print("")
    for line in try streamingBenchmarks() { print(line) }
}
if sections.isEmpty || sections.contains("streaming") || sections.contains("hls") {
    print("")
    for line in try hlsBenchmarks() { print(line) }
}

// MARK: 6. long run: one queue loops a file offline for hours of audio

func residentMiB() -> Double {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
          let kb = line.split(separator: " ").dropFirst().first.flatMap({ Double($0) }) else { return 0 }
    return kb / 1024
}

/// Loops a 60-second MP3 through one queue, offline, for `hours` of audio: each loop enqueues the
/// file's packets with its priming and remainder trims and flushes, as `AudioFileRenderer` does.
func longRun(hours: Double, format: String) throws -> [String] {
    MPG123Decoder.register()
    FAADDecoder.register()
    let path = try makeFile("sixty-seconds.\(format)", seconds: 60, in: NSTemporaryDirectory() + "aqbench-files")
    let file = try AudioFile(path: path)
    guard let table = file.packetTableInfo else { throw BenchError("\(path) has no gapless numbers") }
    let loops = Int((hours * 3600 * file.dataFormat.sampleRate / Double(table.validFrames)).rounded(.up))
    let queue = try AudioQueue(format: file.formatList.first ?? file.dataFormat, configuration: .init(decodeBufferFrames: 65536))
    if let cookie = file.magicCookie { try queue.setMagicCookie(cookie) }
    let perBuffer = 32
    var buffers: [AudioQueueBuffer] = []
    for _ in 0..<4 { buffers.append(try queue.allocateBuffer(capacity: (file.maximumPacketSize ?? 2048) * perBuffer, packetDescriptionCapacity: perBuffer)) }
    // One loop's buffers: (first packet, count, trim at start, trim at end).
    var plan: [(Int64, Int, Int, Int)] = []
    var first: Int64 = 0
    while first < file.packetCount {
        let count = Int(min(Int64(perBuffer), file.packetCount - first))
        plan.append((first, count, 0, 0))
        first += Int64(count)
    }
    let spf = file.dataFormat.framesPerPacket
    plan[0].2 = table.primingFrames                 // the priming lies within the first buffer
    plan[plan.count - 1].3 = table.remainderFrames   // and the remainder within the last
    precondition(table.primingFrames <= plan[0].1 * spf && table.remainderFrames <= plan[plan.count - 1].1 * spf)
    var scratch = [Float](repeating: 0, count: 8192 * 2)
    var rendered: Int64 = 0
    var memory: [Double] = []
    var loop = 0, step = 0
    var prepared = false
    let begin = ContinuousClock.now
    let loopsPerHour = max(loops / max(Int(hours.rounded(.up)), 1), 1)
    func pull() throws -> Int {
        let n = try scratch.withUnsafeMutableBytes { try queue.offlineRender(at: queue.offlineRenderPosition, into: $0, frames: 8192) }
        rendered += Int64(n)
        return n
    }
    while loop < loops {
        // Fill every free buffer, then render what is decoded.
        for buffer in buffers where !buffer.isInQueue && loop < loops {
            let (from, count, trimStart, trimEnd) = plan[step]
            let packets = try file.readPackets(from: from, count: count)
            try buffer.setData(packets.data)
            try queue.enqueue(buffer, packetDescriptions: packets.descriptions, trimFramesAtStart: trimStart, trimFramesAtEnd: trimEnd)
            step += 1
            if step == plan.count {
                try queue.flush()   // each loop decodes from a clean state: every loop is the same frames
                step = 0
                loop += 1
                if loop % loopsPerHour == 0 { memory.append(residentMiB()) }
            }
        }
        if !prepared {
            try queue.prime()
            try queue.setOfflineRenderFormat(queue.outputFormat)
            prepared = true
        }
        if try pull() == 0 { queue.waitForCallbacks() }
    }
    while buffers.contains(where: { $0.isInQueue }) { if try pull() == 0 { queue.waitForCallbacks() } }
    while try pull() > 0 {}
    let elapsed = seconds(ContinuousClock.now - begin)
    let expected = Int64(loops) * table.validFrames
    return [
        "long run: one queue loops a 60-second \(format.uppercased()) offline (\(loops) loops = \(String(format: "%.2f", Double(expected) / file.dataFormat.sampleRate / 3600)) hours of audio)",
        "  frames rendered : \(rendered)   expected \(loops) x \(table.validFrames) = \(expected)   \(rendered == expected ? "exact" : "MISMATCH")",
        String(format: "  time            : %.1f s (%.0fx real time)", elapsed, Double(expected) / file.dataFormat.sampleRate / elapsed),
        "  RSS each hour   : " + memory.map { String(format: "%.1f", $0) }.joined(separator: " ") + " MiB",
    ]
}

if sections.isEmpty || sections.contains("pipewire") {
    print("")
    for line in try await pipeWireBenchmarks() { print(line) }
}
if sections.contains("load") {
    print("")
    let index = CommandLine.arguments.firstIndex(of: "load") ?? 0
    let seconds = CommandLine.arguments.dropFirst(index + 1).first.flatMap { Int($0) } ?? 60
    for line in try loadBenchmarks(seconds: seconds) { print(line) }
    for line in try await pipeWireLoadBenchmarks(seconds: seconds) { print(line) }
}
if sections.contains("longrun") {
    let hours = CommandLine.arguments.compactMap { Double($0) }.first ?? 24
    let format = CommandLine.arguments.contains("m4a") ? "m4a" : "mp3"
    print("")
    for line in try longRun(hours: hours, format: format) { print(line) }
}
