import Dispatch
import PropertyBased
import Testing
@testable import BufferQueue

enum LifecycleOp: CaseIterable, Sendable {
    case enqueue, enqueueTimed, prime, start, pause, flush, stopNow, stopLater, reset, volume, time, meters
}

@Suite struct ConcurrencyTests {
    @Test(.timeLimit(.minutes(1)))
    func manyQueuesRenderOfflineAtOnce() async throws {
        let results = try await withThrowingTaskGroup(of: Bool.self) { group in
            for q in 0..<64 {
                group.addTask {
                    let format = AudioStreamDescription.float32(sampleRate: 44100, channels: 2)
                    let queue = try AudioQueue(format: format, configuration: .init(decodeBufferFrames: 512))
                    var expected: [Float] = []
                    for b in 0..<5 {
                        let part = ramp(frames: 3000, channels: 2, offset: q * 1000 + b * 3000)
                        try queue.enqueue(try queue.makeBuffer(part), trimFramesAtStart: b == 0 ? 100 : 0)
                        expected += b == 0 ? Array(part[200...]) : part
                    }
                    let output = try queue.renderAllOffline(chunk: 777)
                    queue.dispose(immediately: true)
                    return output == expected
                }
            }
            var all: [Bool] = []
            for try await ok in group { all.append(ok) }
            return all
        }
        #expect(results.count == 64)
        #expect(results.allSatisfy { $0 })
    }

    @Test(.timeLimit(.minutes(1)))
    func manyQueuesPlayThroughPacedSinksAtOnce() async throws {
        let format = AudioStreamDescription.float32(sampleRate: 48000, channels: 1)
        var queues: [(AudioQueue, NullSink, [Float])] = []
        for q in 0..<16 {
            let sink = NullSink(pacing: .realTime, capturing: true)
            let queue = try AudioQueue(format: format, configuration: .init(sink: sink, decodeBufferFrames: 1024))
            let input = ramp(frames: 4800, channels: 1, offset: q * 10 + 1)
            try queue.enqueue(try queue.makeBuffer(input))
            try queue.prime()
            try queue.start()
            try queue.stop(immediately: false)
            queues.append((queue, sink, input))
        }
        for (queue, sink, input) in queues {
            #expect(await eventually { !queue.isRunning && difference(trimSilence(sink.capturedSamples(), channels: 1), input) == nil })
        }
    }

    /// Random lifecycle calls from several tasks at once: no crash, no deadlock, every buffer
    /// returned at most once, and no callback after `dispose` returns.
    @Test(.timeLimit(.minutes(2)))
    func randomLifecycleSequencesFromSeveralTasks() async {
        let ops = Gen<LifecycleOp>.case.array(of: 10...40)
        await propertyCheck(count: 40, input: ops, ops, Gen.bool) { first, second, paced in
            let format = AudioStreamDescription.float32(sampleRate: 48000, channels: 2)
            let sink = NullSink(pacing: paced ? .realTime : .unpaced, latency: .milliseconds(5))
            let returned = Locked([Int: Int]())
            let disposed = Locked(false)
            let late = Locked(0)
            guard let queue = try? AudioQueue(format: format, configuration: .init(sink: sink, decodeBufferFrames: 512), outputCallback: { _, buffer in
                if disposed.value { late.withLock { $0 += 1 } }
                returned.withLock { $0[buffer.id, default: 0] += 1 }
            }) else { Issue.record("queue creation failed"); return }
            let buffers = (0..<6).compactMap { i in try? queue.makeBuffer(ramp(frames: 600, channels: 2, offset: i)) }
            let timeline = Locked(Int64(0))
            let enqueued = Locked([Int: Int]())
            await withTaskGroup(of: Void.self) { group in
                for sequence in [first, second] {
                    group.addTask {
                        for (step, op) in sequence.enumerated() {
                            let buffer = buffers[step % buffers.count]
                            switch op {
                            case .enqueue:
                                if (try? queue.enqueue(buffer, trimFramesAtStart: step % 3 * 10)) != nil { enqueued.withLock { $0[buffer.id, default: 0] += 1 } }
                            case .enqueueTimed:
                                let at = timeline.withLock { t -> Int64 in t += 700; return t }
                                if (try? queue.enqueue(buffer, startTime: at)) != nil { enqueued.withLock { $0[buffer.id, default: 0] += 1 } }
                            case .prime: _ = try? queue.prime()
                            case .start: try? queue.start()
                            case .pause: try? queue.pause()
                            case .flush: try? queue.flush()
                            case .stopNow: try? queue.stop(immediately: true)
                            case .stopLater: try? queue.stop(immediately: false)
                            case .reset: try? queue.reset()
                            case .volume: try? queue.setParameters(.init(volume: Float(step % 10) / 10))
                            case .time: _ = queue.currentTime()
                            case .meters: queue.isLevelMeteringEnabled.toggle(); _ = queue.currentLevelMeters
                            }
                            if step % 7 == 0 { try? await Task.sleep(for: .milliseconds(1)) }
                        }
                    }
                }
            }
            queue.dispose(immediately: true)
            disposed.withLock { $0 = true }
            try? await Task.sleep(for: .milliseconds(20))
            #expect(late.value == 0)
            let counts = returned.value, sent = enqueued.value
            for (id, count) in counts { #expect(count <= sent[id, default: 0], "buffer \(id) returned \(count) times, enqueued \(sent[id, default: 0])") }
        }
    }
}
