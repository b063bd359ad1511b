// aqbench: measures the queue against the simplest thing that moves the same bytes, in the same run.
// Run with `make bench` (release build). Nothing here is a pass/fail check.
import BufferQueue
import Dispatch
import Foundation

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

struct RenderResult { let memcpy: Duration; let queue: Duration; let bytes: Int; let audioSeconds: Int }

func renderBenchmark() throws -> RenderResult {
let rate = 44100.0, channels = 2
let audioSeconds = 120
let totalFrames = Int(rate) * audioSeconds
let framesPerBuffer = 16384
let format = AudioStreamDescription.float32(sampleRate: rate, channels: channels)
var source = [Float](repeating: 0, count: totalFrames * channels)
for i in 0..<totalFrames {
    let v = Float(sin(Double(i) * 2 * Double.pi * 440 / rate)) * 0.5
    source[2 * i] = v
    source[2 * i + 1] = -v
}
let byteCount = source.count * 4
var destination = [Float](repeating: 0, count: source.count)

let memcpyTime = measure(repeats: 7) {
    source.withUnsafeBytes { src in
        destination.withUnsafeMutableBytes { dst in
            dst.baseAddress!.copyMemory(from: src.baseAddress!, byteCount: byteCount)
        }
    }
}

let trimStart = 2112, trimEnd = 970
var renderedFrames = 0
let queueTime = try measure(repeats: 7) {
    let queue = try AudioQueue(format: format, configuration: .init(decodeBufferFrames: 16384))
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
            let want = min(8192, totalFrames - done)
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
guard renderedFrames == totalFrames - trimStart - trimEnd else {
    print("aqbench: rendered \(renderedFrames) frames, expected \(totalFrames - trimStart - trimEnd)")
    exit(1)
}
return RenderResult(memcpy: memcpyTime, queue: queueTime, bytes: byteCount, audioSeconds: audioSeconds)
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

// MARK: report

let render = try renderBenchmark()
let roundTrips = 50_000
let loopTime = try callbackBenchmark(roundTrips: roundTrips)
let mb = Double(render.bytes) / 1_048_576
let memcpyTime = render.memcpy, queueTime = render.queue, audioSeconds = render.audioSeconds
let ratio = seconds(queueTime) / seconds(memcpyTime)
print("aqbench — \(machine())")
print("")
print("offline render, float32 stereo 44.1 kHz, \(audioSeconds) s (\(String(format: "%.1f", mb)) MiB), trims 2112/970, volume 0.8")
print(String(format: "  memcpy of the same bytes : %8.2f ms  (%7.0f MiB/s)", seconds(memcpyTime) * 1000, mb / seconds(memcpyTime)))
print(String(format: "  queue offline render     : %8.2f ms  (%7.0f MiB/s, %.0fx real time)", seconds(queueTime) * 1000, mb / seconds(queueTime), Double(audioSeconds) / seconds(queueTime)))
print(String(format: "  ratio queue / memcpy     : %8.2f", ratio))
print("")
print("output callback round trips (enqueue -> decode -> unpaced null sink -> callback -> enqueue), 2 buffers of 64 frames")
print(String(format: "  %d round trips in %.1f ms : %.0f per second", roundTrips, seconds(loopTime) * 1000, Double(roundTrips) / seconds(loopTime)))
