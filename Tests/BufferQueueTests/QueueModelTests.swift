import Dispatch
import Foundation
import Testing
@testable import BufferQueue

/// A seeded random client of the queue's public API, checked against a model (issue 37): every
/// enqueued frame is heard once, in order, unless a reset or an immediate stop discarded it;
/// every enqueued buffer comes back once; `runningChanged` alternates; no call or wait exceeds a
/// deadline.
///
/// `AQ_MODEL_SEQUENCES` sets how many sequences run (default 150, a few seconds; the issue's
/// 10 000 on demand), `AQ_MODEL_SEED` the first seed. A failure names the seed and the calls
/// made, so `AQ_MODEL_SEED=<seed> AQ_MODEL_SEQUENCES=1` replays it.
@Suite struct QueueModelTests {
    enum Pacing: String, CustomTestStringConvertible {
        case unpaced, realTime
        var testDescription: String { rawValue }
    }

    static let environment = ProcessInfo.processInfo.environment
    static let sequences = environment["AQ_MODEL_SEQUENCES"].flatMap(Int.init) ?? 150
    static let firstSeed = environment["AQ_MODEL_SEED"].flatMap(UInt64.init) ?? 1

    @Test(arguments: [Pacing.unpaced, .realTime])
    func randomUseKeepsTheQueuesPromises(_ pacing: Pacing) async throws {
        // Real time plays its frames at their pace: fewer, shorter sequences.
        let count = pacing == .unpaced ? Self.sequences : max(Self.sequences / 30, 3)
        let failures: [String] = await withCheckedContinuation { continuation in
            // A thread of its own: the sequences block it while they wait on the queue.
            Thread {
                var failures: [String] = []
                for index in 0..<count where failures.count < 3 {
                    let seed = Self.firstSeed &+ UInt64(index)
                    if let failure = Self.run(seed: seed, pacing: pacing) { failures.append(failure) }
                }
                continuation.resume(returning: failures)
            }.start()
        }
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n\n"))")
    }

    /// One sequence; nil when every promise held, else what broke, with the calls made.
    static func run(seed: UInt64, pacing: Pacing) -> String? {
        var random = SplitMix(seed: seed)
        let channels = random.int(1...2)
        let format = AudioStreamDescription.float32(sampleRate: 48000, channels: channels)
        let maxFrames = pacing == .unpaced ? 2000 : 240
        let sink = NullSink(pacing: pacing == .unpaced ? .unpaced : .realTime, capturing: true)
        var log: [String] = ["seed \(seed), \(pacing.rawValue), \(channels) channel(s)"]
        func fail(_ why: String) -> String { (log + ["FAILED: " + why]).joined(separator: "\n") }

        let returned = Locked([Int: Int]())      // buffer id -> times returned
        let running = Locked([Bool]())
        let queue: AudioQueue
        do {
            queue = try AudioQueue(format: format, configuration: .init(sink: sink, decodeBufferFrames: random.int(256...4096))) { _, buffer in
                returned.withLock { $0[buffer.id, default: 0] += 1 }
            }
        } catch {
            return fail("creating the queue: \(error)")
        }
        let eventsDone = DispatchSemaphore(value: 0)
        let stream = queue.events()
        Task {
            for await event in stream { if case .runningChanged(let value) = event { running.withLock { $0.append(value) } } }
            eventsDone.signal()
        }

        var buffers: [AudioQueueBuffer] = []
        for _ in 0..<6 {
            guard let buffer = try? queue.allocateBuffer(capacity: maxFrames * channels * 4) else { return fail("allocating a buffer") }
            buffers.append(buffer)
        }
        var enqueued: [Int: Int] = [:]           // buffer id -> times enqueued
        // Whether the sink is pulling (started, not paused or stopped since): an asynchronous stop
        // ends only then.
        var playing = false
        var stopPending = false
        var nextID = 1                           // the value of the next frame (every channel)
        var kept: [(id: Int, discardable: Bool)] = []   // untrimmed frames, in order
        func markDiscardable() { for i in kept.indices { kept[i].discardable = true } }

        for _ in 0..<(pacing == .unpaced ? 40 : 16) {
            let op = random.int(0...13)
            do {
                switch op {
                case 0...4:
                    // Only a buffer the queue gave back (or never had) is enqueued.
                    let backs = returned.withLock { $0 }
                    guard let buffer = buffers.first(where: { enqueued[$0.id, default: 0] == backs[$0.id, default: 0] }) else {
                        log.append("enqueue: no free buffer")
                        continue
                    }
                    let frames = random.int(1...maxFrames)
                    var trimStart = 0, trimEnd = 0
                    if random.chance(30) {
                        trimStart = random.int(0...frames)
                        trimEnd = random.int(0...(frames - trimStart))
                    }
                    var samples = [Float](repeating: 0, count: frames * channels)
                    for frame in 0..<frames { for c in 0..<channels { samples[frame * channels + c] = Float(nextID + frame) } }
                    try samples.withUnsafeBytes { try buffer.setData($0) }
                    do {
                        try queue.enqueue(buffer, trimFramesAtStart: trimStart, trimFramesAtEnd: trimEnd)
                        enqueued[buffer.id, default: 0] += 1
                        for frame in trimStart..<(frames - trimEnd) { kept.append((nextID + frame, false)) }
                        log.append("enqueue \(buffer.id): \(frames) frames from \(nextID), trims \(trimStart)/\(trimEnd)")
                    } catch let error as AudioQueueError where error.code == .enqueueDuringReset {
                        guard stopPending else { return fail("enqueue refused (\(error)) with no stop asked for") }
                        log.append("enqueue \(buffer.id): refused during a stop")
                    }
                    nextID += frames
                case 5, 6:
                    log.append("start")
                    try queue.start()
                    playing = true
                case 7:
                    log.append("pause")
                    try queue.pause()
                    playing = false
                case 8:
                    log.append("stop(immediately: true)")
                    markDiscardable()
                    try queue.stop(immediately: true)
                    playing = false
                    stopPending = false
                case 9:
                    log.append("stop(immediately: false)")
                    try queue.stop(immediately: false)
                    stopPending = true
                case 10:
                    log.append("reset")
                    markDiscardable()
                    try queue.reset()
                    if stopPending {
                        // A reset during an asynchronous stop stops at once.
                        stopPending = false
                        playing = false
                    }
                case 11:
                    log.append("flush")
                    do { try queue.flush() } catch let error as AudioQueueError where error.code == .enqueueDuringReset {
                        guard stopPending else { return fail("flush refused (\(error)) with no stop asked for") }
                    }
                case 12:
                    let ready = try queue.prime()
                    log.append("prime: \(ready) ready")
                    if ready > queue.decodeBufferFrames { return fail("prime reported \(ready) frames, more than the decode buffer's \(queue.decodeBufferFrames)") }
                default:
                    // A stop under way ends once the sink has played what was enqueued before it;
                    // on a queue that is not playing (never started, paused, or stopped since: a
                    // stop(immediately: false) there marks the end for the next start) it waits
                    // for a start, so only a running queue is waited on.
                    guard playing, queue.isRunning else { continue }
                    log.append("wait while stopping")
                    if !queue.waitWhileStopping(until: .now() + 5, unless: { false }) { return fail("a stop did not end within 5 s") }
                    if stopPending {
                        stopPending = false
                        playing = false
                    }
                }
            } catch {
                return fail("\(log.last ?? "") threw \(error)")
            }
            if Self.environment["AQ_MODEL_TRACE"] != nil {
                log.append("    -> \(queue.control.withLock { String(describing: $0.lifecycle) })")
            }
        }

        // Play out everything left, then check. A start plays out a stop under way; the stop
        // asked for here may then find the queue stopped, and mark the end for the next start.
        log.append("end: start, stop(immediately: false), start until stopped")
        let deadline = DispatchTime.now() + (pacing == .unpaced ? 10 : 20)
        do {
            try queue.start()
            try queue.stop(immediately: false)
            var starts = 0
            while !queue.waitWhileStopping(until: min(deadline, .now() + 1), unless: { false }) {
                starts += 1
                if DispatchTime.now() >= deadline || starts > 5 {
                    let lifecycle = queue.control.withLock { String(describing: $0.lifecycle) }
                    return fail("the final stop did not end in time: running \(queue.isRunning), stopping \(queue.isStopping), \(lifecycle)")
                }
                if !queue.isRunning { try queue.start() }
            }
        } catch {
            return fail("ending threw \(error)")
        }
        queue.waitForCallbacks()
        queue.dispose(immediately: true)
        if eventsDone.wait(timeout: .now() + 5) == .timedOut { return fail("the event stream did not finish after dispose") }

        // 1. Heard frames: in order, each once, the model's.
        let captured = sink.capturedSamples()
        var heard: [Int] = []
        for frame in 0..<(captured.count / channels) where captured[frame * channels] != 0 {
            heard.append(Int(captured[frame * channels]))
        }
        for (a, b) in zip(heard, heard.dropFirst()) where b <= a {
            return fail("frame \(b) heard after frame \(a)")
        }
        let heardSet = Set(heard)
        let keptIDs = Set(kept.map(\.id))
        if let stray = heard.first(where: { !keptIDs.contains($0) }) { return fail("frame \(stray) was heard but trimmed or never enqueued") }
        if let lost = kept.first(where: { !$0.discardable && !heardSet.contains($0.id) }) {
            return fail("frame \(lost.id) was never heard, and no reset or immediate stop came after it (\(heard.count) of \(kept.count) frames heard)")
        }
        // 2. Every enqueued buffer came back once.
        let backs = returned.withLock { $0 }
        for buffer in buffers where backs[buffer.id, default: 0] != enqueued[buffer.id, default: 0] {
            return fail("buffer \(buffer.id) was enqueued \(enqueued[buffer.id, default: 0]) times and came back \(backs[buffer.id, default: 0]) times")
        }
        // 3. runningChanged alternates, from true.
        let changes = running.withLock { $0 }
        for (index, value) in changes.enumerated() where value != (index % 2 == 0) {
            return fail("runningChanged sequence \(changes) does not alternate from true")
        }
        return nil
    }
}
