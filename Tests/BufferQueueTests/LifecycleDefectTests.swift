import Dispatch
import Foundation
import Synchronization
import Testing
@testable import BufferQueue

/// One test per lifecycle defect of issue 11; each failed (or hung, within its bound) on the
/// queue before the state machine.
@Suite struct LifecycleDefectTests {
    let format = AudioStreamDescription.float32(sampleRate: 48000, channels: 2)

    /// 1. `start(at: later)` then `stop(immediately: false)`: the start happens and the stop completes.
    @Test func deferredStartThenAsynchronousStopCompletes() async throws {
        let sink = NullSink(pacing: .unpaced, capturing: true)
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink))
        let log = EventLog(queue)
        let input = ramp(frames: 2400, channels: 2, offset: 1)
        try queue.enqueue(try queue.makeBuffer(input))
        try queue.start(at: .now() + .milliseconds(50))
        try queue.stop(immediately: false)
        #expect(await log.waitForRunning([true, false]))
        #expect(difference(sink.capturedSamples(), input) == nil)
        #expect(!queue.isStopping)
        try queue.enqueue(try queue.makeBuffer(input))        // enqueues work again
        queue.dispose(immediately: true)
    }

    /// 1. `start(at: later)` then `dispose(immediately: false)`: the queue is disposed of.
    @Test func deferredStartThenAsynchronousDisposeDisposes() async throws {
        let sink = NullSink(pacing: .unpaced, capturing: true)
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink))
        let log = EventLog(queue)
        let input = ramp(frames: 2400, channels: 2, offset: 5)
        let buffer = try queue.makeBuffer(input)
        try queue.enqueue(buffer)
        try queue.start(at: .now() + .milliseconds(50))
        queue.dispose(immediately: false)
        #expect(await log.waitUntilFinished())
        #expect(difference(sink.capturedSamples(), input) == nil)
        #expect(!buffer.isInQueue)
        expectError(.disposalPending) { try queue.start() }
    }

    /// 2. Offline render on one thread while another resets and stops: one reader at a time, so
    /// every render continues exactly where the last one ended and the timeline counts exactly
    /// the frames rendered (a second reader broke both, and ThreadSanitizer reported the race).
    @Test(.timeLimit(.minutes(1)))
    func offlineRenderAndResetOnTwoThreads() async throws {
        let queue = try AudioQueue(format: format, configuration: .init(sink: NullSink(pacing: .unpaced), decodeBufferFrames: 1024))
        try queue.setOfflineRenderFormat(format)
        let resetsDone = Atomic<Bool>(false)
        // The resets begin once a render has been made, so that the two threads overlap: a
        // resetter that finished before the renderer's thread ran left nothing rendered (seen
        // once in a full run).
        let rendering = DispatchSemaphore(value: 0)
        async let resetter = onOwnThread { () -> Int in
            guard rendering.wait(timeout: .now() + 30) == .success else { return -1 }
            for resets in 0..<300 {
                let part = ramp(frames: 700, channels: 2, offset: resets)
                if let buffer = try? queue.makeBuffer(part) { _ = try? queue.enqueue(buffer) }
                try? queue.reset()
            }
            resetsDone.store(true, ordering: .releasing)
            return 300
        }
        let (renderedTotal, positionOK) = await onOwnThread { () -> (Int, Bool) in
            var total = 0, ok = true, signalled = false
            var out = [Float](repeating: 0, count: 512 * 2)
            // Render for as long as the resets go on (bounded, so a stuck resetter cannot hang it).
            for _ in 0..<2_000_000 where !resetsDone.load(ordering: .acquiring) {
                let before = queue.offlineRenderPosition
                let n = (try? out.withUnsafeMutableBytes { try queue.offlineRender(at: before, into: $0, frames: 512) }) ?? -1
                if n < 0 { continue }  // the position moved between reading it and rendering: a reset ran
                if !signalled { rendering.signal(); signalled = true }
                total += n
                if queue.offlineRenderPosition < before + Int64(n) { ok = false }
            }
            return (total, ok)
        }
        let resets = await resetter
        #expect(resets == 300)
        #expect(renderedTotal > 0)
        #expect(positionOK)
        // Resets continue the timeline, so it counts exactly the frames rendered.
        #expect(queue.offlineRenderPosition == Int64(renderedTotal))
        queue.dispose(immediately: true)
    }

    /// 3. After an asynchronous stop, `reset()` then a buffer scheduled at sample S plays at S.
    @Test func scheduledTimeAfterAStopAndResetIsKept() async throws {
        let sink = NullSink(pacing: .unpaced, capturing: true)
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink))
        let log = EventLog(queue)
        try queue.enqueue(try queue.makeBuffer(ramp(frames: 4800, channels: 2, offset: 1)))
        try queue.start()
        try queue.stop(immediately: false)
        #expect(await log.waitForRunning([true, false]))
        #expect(queue.currentTime().sampleTime == 4800)          // where the run ended
        sink.clearCapture()
        try queue.reset()
        let second = ramp(frames: 600, channels: 2, offset: 9)
        let at = try queue.enqueue(try queue.makeBuffer(second), startTime: 1000)
        #expect(at == 1000)
        try queue.start()
        try queue.stop(immediately: false)
        #expect(await log.waitForRunning([true, false, true, false]))
        #expect(difference(sink.capturedSamples(), [Float](repeating: 0, count: 2000) + second) == nil)
        #expect(queue.currentTime().sampleTime == 1600)
    }

    /// 4. A volume set before anything rendered applies at once, even with a ramp time: a fade-in
    /// from silence starts silent and then glides up.
    @Test func volumeSetBeforeTheFirstRenderDoesNotRamp() throws {
        let mono = AudioStreamDescription.float32(sampleRate: 1000, channels: 1)
        let queue = try AudioQueue(format: mono)
        try queue.setVolumeRampTime(0.1)                           // 100 frames at 1 kHz
        try queue.setParameters(.init(volume: 0))
        try queue.enqueue(try queue.makeBuffer([Float](repeating: 1, count: 400)))
        try queue.setOfflineRenderFormat(mono)
        var first = [Float](repeating: 9, count: 50)
        _ = try first.withUnsafeMutableBytes { try queue.offlineRender(at: 0, into: $0, frames: 50) }
        #expect(first == [Float](repeating: 0, count: 50))
        try queue.setParameters(.init(volume: 1))
        var rest = [Float](repeating: 9, count: 200)
        _ = try rest.withUnsafeMutableBytes { try queue.offlineRender(at: 50, into: $0, frames: 200) }
        #expect(abs(rest[0] - 0.01) < 1e-4)                        // the glide starts from silence
        #expect(zip(rest, rest.dropFirst()).prefix(99).allSatisfy { $0 < $1 })
        #expect(rest[99...].allSatisfy { $0 == 1 })
    }

    /// 5. A sink whose start fails is closed again; the queue is not running and a later start retries.
    @Test func failedSinkStartClosesTheSinkAndALaterStartRetries() async throws {
        let sink = ScriptedSink()
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink))
        try queue.enqueue(try queue.makeBuffer(ramp(frames: 480, channels: 2)))
        sink.failStarts.withLock { $0 = 1 }
        expectError(.cannotStart) { try queue.start() }
        #expect(sink.calls.current.opens == 1 && sink.calls.current.closes == 1)
        #expect(!queue.isRunning)
        sink.failOpens.withLock { $0 = 1 }
        expectError(.cannotStart) { try queue.start() }
        #expect(sink.calls.current.opens == 2 && sink.calls.current.closes == 1)   // never opened: nothing to close
        try queue.start()
        #expect(await sink.calls.wait { $0.opens == 3 && $0.starts == 2 })
        queue.dispose(immediately: true)
    }

    /// 5. A sink that cannot reopen after a format change: an error, the queue is not running,
    /// and a later start opens it again with the new format.
    @Test func failedReopenAfterAFormatChangeStopsRunning() async throws {
        let registry = AudioDecoderRegistry()
        registry.register(AudioDecoderFactory(name: "toy", formats: [.toy]) { format, _ in ToyDecoder(format: format) })
        let toy = AudioStreamDescription(sampleRate: 1000, formatID: .toy, bytesPerPacket: 0, framesPerPacket: 100,
                                         bytesPerFrame: 0, channelsPerFrame: 1, bitsPerChannel: 0)
        let sink = ScriptedSink()
        let queue = try AudioQueue(format: toy, configuration: .init(sink: sink, decoderRegistry: registry))
        let log = EventLog(queue)
        let buffer = try queue.allocateBuffer(capacity: 3, packetDescriptionCapacity: 3)
        try buffer.setData([10, 0xFE, 20])                           // 0xFE: 2000 Hz stereo from here
        try queue.enqueue(buffer, packetDescriptions: (0..<3).map { AudioPacketDescription(startOffset: $0, dataByteSize: 1) })
        try queue.prime()
        try queue.start()
        #expect(sink.pull(frames: 100) == 100)
        #expect(await log.waitForRunning([true]))
        sink.failOpens.withLock { $0 = 1 }
        _ = sink.pull(frames: 100)                                  // reaches the format change
        #expect(await log.wait { events in
            EventLog.runningChanges(events) == [true, false] && events.contains { if case .error(let e) = $0 { return e.code == .sinkError } else { return false } }
        })
        #expect(!queue.isRunning)
        try queue.start()                                            // opens with the new format
        #expect(sink.calls.current.formats.last == .float32(sampleRate: 2000, channels: 2))
        #expect(sink.pull(frames: 100) == 100)
        queue.dispose(immediately: true)
    }

    /// 6. Enqueue racing dispose: a buffer is either refused or handed back, never left queued.
    @Test(.timeLimit(.minutes(1)))
    func enqueueRacingDisposeLeavesNoBufferQueued() async throws {
        for round in 0..<60 {
            let queue = try AudioQueue(format: format, configuration: .init(sink: NullSink(pacing: .unpaced)))
            let buffers = try (0..<8).map { try queue.makeBuffer(ramp(frames: 64, channels: 2, offset: $0 + round)) }
            async let enqueuer: Void = onOwnThread { for buffer in buffers { _ = try? queue.enqueue(buffer) } }
            async let disposer: Void = onOwnThread { queue.dispose(immediately: true) }
            _ = await (enqueuer, disposer)
            #expect(buffers.allSatisfy { !$0.isInQueue }, "round \(round)")
        }
    }

    /// 7. The drain of an earlier asynchronous stop cannot end a later one.
    @Test func staleDrainCompletionDoesNotEndALaterStop() async throws {
        let sink = ScriptedSink()
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink))
        let log = EventLog(queue)
        try queue.enqueue(try queue.makeBuffer(ramp(frames: 480, channels: 2)))
        try queue.start()
        try queue.stop(immediately: false)
        queue.waitForCallbacks()                                     // the end is decoded
        #expect(sink.pull(frames: 1000) == 480)                      // renders the end
        #expect(await sink.calls.wait { $0.drains == 1 })
        #expect(await log.waitForRunning([true]))
        try queue.stop(immediately: true)
        try queue.enqueue(try queue.makeBuffer(ramp(frames: 480, channels: 2)))
        try queue.start()
        try queue.stop(immediately: false)
        queue.waitForCallbacks()
        #expect(sink.pull(frames: 1000) == 480)
        #expect(await sink.calls.wait { $0.drains == 2 })
        #expect(await log.waitForRunning([true, false, true]))
        sink.completeDrain(0)                                        // the old stop's drain
        queue.waitForCallbacks()
        #expect(queue.isStopping)
        sink.completeDrain(1)
        #expect(await log.waitForRunning([true, false, true, false]))
        #expect(!queue.isStopping)
        queue.dispose(immediately: true)
    }

    /// 8. A queued buffer cannot be written: its bytes and its size belong to the queue.
    @Test func writingAQueuedBufferIsAnError() async throws {
        let queue = try AudioQueue(format: format, configuration: .init(decodeBufferFrames: 256))
        let log = EventLog(queue)
        let buffer = try queue.makeBuffer(ramp(frames: 100, channels: 2))
        try queue.enqueue(buffer)
        expectError(.bufferInQueue) { try buffer.setByteSize(8) }
        expectError(.bufferInQueue) { try buffer.withUnsafeMutableBytes { $0[0] = 1 } }
        expectError(.bufferInQueue) { try buffer.setData([0, 0, 0, 0]) }
        expectError(.bufferInQueue) { try [UInt8](repeating: 0, count: 4).withUnsafeBytes { try buffer.setData($0) } }
        #expect(buffer.byteSize == 800)
        try queue.setOfflineRenderFormat(format)
        #expect(difference(try queue.renderAllOffline(), ramp(frames: 100, channels: 2)) == nil)
        #expect(await log.waitForReturned(1))
        try buffer.setByteSize(8)                                    // the caller's again
        expectError(.invalidBuffer) { try buffer.setByteSize(801) }
    }

    /// 9. A reset that lands while the sink is inside a render call loses no frame from the timeline.
    @Test(.timeLimit(.minutes(1)))
    func resetDuringARenderCallKeepsTheTimeline() async throws {
        let sink = ScriptedSink()
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink))
        try queue.enqueue(try queue.makeBuffer(ramp(frames: 4800, channels: 2)))
        try queue.prime()
        try queue.start()
        let midRender = Watched(false)
        let gate = DispatchSemaphore(value: 0)
        let armed = Atomic<Bool>(true)
        queue.stage.afterConsumeHook = {
            guard armed.exchange(false, ordering: .relaxed) else { return }
            midRender.update { $0 = true }
            _ = gate.wait(timeout: .now() + 5)
        }
        async let pulled = onOwnThread { sink.pull(frames: 480) }
        #expect(await midRender.wait { $0 })
        async let resetDone: Void = onOwnThread { try? queue.reset() }
        // The reset waits for the render in progress (the sink's pause); release the render then.
        _ = await sink.pauseRequested.wait(timeout: .seconds(2)) { $0 > 0 }
        gate.signal()
        let frames = await pulled
        await resetDone
        #expect(frames == 480)
        #expect(sink.pull(frames: 480) == 0)                         // nothing left after the reset
        #expect(queue.offlineRenderPosition == 480)
        #expect(queue.currentTime().sampleTime == 480)
        queue.dispose(immediately: true)
    }

    /// 10. `dispose(immediately: false)` on a queue that is not playing keeps its buffers until
    /// they have played; with nothing queued it disposes at once.
    @Test func asynchronousDisposeOfAnIdleQueueWaitsForItsBuffers() async throws {
        let sink = NullSink(pacing: .unpaced, capturing: true)
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink))
        let log = EventLog(queue)
        let input = ramp(frames: 1200, channels: 2, offset: 3)
        let buffer = try queue.makeBuffer(input)
        try queue.enqueue(buffer)
        queue.dispose(immediately: false)
        queue.waitForCallbacks()
        #expect(log.returnedIDs.isEmpty && buffer.isInQueue)         // nothing discarded
        expectError(.disposalPending) { try queue.enqueue(try queue.allocateBuffer(capacity: 8)) }
        try queue.start()
        #expect(await log.waitUntilFinished())
        #expect(difference(sink.capturedSamples(), input) == nil)
        #expect(!buffer.isInQueue)

        let empty = try AudioQueue(format: format)
        let emptyLog = EventLog(empty)
        empty.dispose(immediately: false)
        #expect(await emptyLog.waitUntilFinished())
    }

    /// 10. `prime(frames:)` prepares what was asked (whole buffers of PCM), not everything.
    @Test func primeHonoursTheFrameCount() async throws {
        let queue = try AudioQueue(format: format, configuration: .init(decodeBufferFrames: 16384))
        let log = EventLog(queue)
        for i in 0..<5 { try queue.enqueue(try queue.makeBuffer(ramp(frames: 1000, channels: 2, offset: i * 1000))) }
        #expect(try queue.prime(frames: 1500) == 2000)
        #expect(await log.waitForReturned(2))
        #expect(await !log.wait(seconds: 0.1) { EventLog.returnedIDs($0).count > 2 })
        #expect(try queue.prime() == 5000)
    }

    /// 10. The channel layout reaches the sink when it opens.
    @Test func channelLayoutReachesTheSink() throws {
        let sink = ScriptedSink()
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink))
        let swapped = AudioChannelLayout(channelLabels: [.right, .left])
        try queue.setChannelLayout(swapped)
        try queue.enqueue(try queue.makeBuffer(ramp(frames: 100, channels: 2)))
        try queue.start()
        #expect(sink.calls.current.layouts == [swapped])
        queue.dispose(immediately: true)
    }

    /// 10. Each timeline has its own discontinuity flag: one observer reading it does not hide it
    /// from another.
    @Test func eachTimelineSeesEachDiscontinuity() throws {
        let queue = try AudioQueue(format: format)
        let a = try queue.makeTimeline(), b = try queue.makeTimeline()
        #expect(!queue.currentTime(in: a).discontinuity && !queue.currentTime(in: b).discontinuity)
        try queue.enqueue(try queue.makeBuffer(ramp(frames: 100, channels: 2)))
        try queue.reset()
        #expect(queue.currentTime(in: a).discontinuity)
        #expect(!queue.currentTime(in: a).discontinuity)
        #expect(queue.currentTime(in: b).discontinuity)
        #expect(!queue.currentTime().discontinuity)                  // no timeline: not reported
        let late = try queue.makeTimeline()
        #expect(!queue.currentTime(in: late).discontinuity)          // from its creation on
    }
}

/// Class 19 of issue 37: once an asynchronous stop has ended (`isStopping` false), a flush or an
/// enqueue is never refused by it, however soon it comes.
@Suite struct StopEndRefusalTests {
    @Test func aFlushJustAfterAStopEndsIsTaken() async throws {
        let format = AudioStreamDescription.float32(sampleRate: 48000, channels: 2)
        let failures: [String] = await withCheckedContinuation { continuation in
            // A thread of its own: the waits below block it.
            DispatchQueue.global().async {
                var failures: [String] = []
                do {
                    let queue = try AudioQueue(format: format, configuration: .init(sink: NullSink(pacing: .unpaced)))
                    for round in 0..<200 {
                        try queue.enqueue(try queue.makeBuffer(ramp(frames: 480, channels: 2, offset: 1)))
                        try queue.start()
                        try queue.stop(immediately: false)
                        // Woken by the lifecycle change that ends the stop; then at once:
                        guard queue.waitWhileStopping(until: .now() + 5, unless: { false }) else {
                            failures.append("round \(round): the stop did not end")
                            break
                        }
                        do { try queue.flush() } catch { failures.append("round \(round): flush: \(error)") }
                        do { try queue.enqueue(try queue.makeBuffer(ramp(frames: 48, channels: 2, offset: 2))) } catch {
                            failures.append("round \(round): enqueue: \(error)")
                        }
                        try queue.reset()
                    }
                    queue.dispose(immediately: true)
                } catch {
                    failures.append("\(error)")
                }
                continuation.resume(returning: failures)
            }
        }
        #expect(failures.isEmpty, "\(failures.prefix(5))")
    }
}

/// Class 18 of issue 37: `stop(immediately: false)` (or an asynchronous dispose) followed by a
/// `prime()` completes on an unpaced sink: what prime decodes on the caller's thread (the
/// end-of-stream marker among it) wakes the sink as the worker's decoding does.
@Suite struct PrimeAfterAsynchronousStopTests {
    @Test func anAsynchronousStopThenPrimeCompletes() async throws {
        let format = AudioStreamDescription.float32(sampleRate: 48000, channels: 2)
        let failures: [String] = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                var failures: [String] = []
                do {
                    for round in 0..<300 {
                        let queue = try AudioQueue(format: format, configuration: .init(sink: NullSink(pacing: .unpaced)))
                        for _ in 0..<3 { try queue.enqueue(try queue.makeBuffer(ramp(frames: 480, channels: 2, offset: 1))) }
                        try queue.start()
                        try queue.stop(immediately: false)
                        _ = try queue.prime()
                        if !queue.waitWhileStopping(until: .now() + 3, unless: { false }) {
                            failures.append("round \(round): still stopping after 3 s")
                        }
                        if round % 2 == 0 {
                            // The same with an asynchronous disposal.
                            let other = try AudioQueue(format: format, configuration: .init(sink: NullSink(pacing: .unpaced)))
                            try other.enqueue(try other.makeBuffer(ramp(frames: 480, channels: 2, offset: 1)))
                            try other.start()
                            other.dispose(immediately: false)
                            _ = try? other.prime()
                            if !other.waitWhileStopping(until: .now() + 3, unless: { false }) {
                                failures.append("round \(round): the disposal still pending after 3 s")
                            }
                        }
                        queue.dispose(immediately: true)
                    }
                } catch {
                    failures.append("\(error)")
                }
                continuation.resume(returning: failures)
            }
        }
        #expect(failures.isEmpty, "\(failures.prefix(5))")
    }
}

/// Class 20 of issue 37: `prime()` never reports more than `decodeBufferFrames` ready (a mono
/// queue's ring holds twice that), nor more than was scheduled.
@Suite struct PrimeBoundTests {
    @Test(arguments: [1, 2])
    func primeStaysWithinTheDecodeBufferAndWhatWasScheduled(_ channels: Int) throws {
        let format = AudioStreamDescription.float32(sampleRate: 48000, channels: channels)
        let queue = try AudioQueue(format: format, configuration: .init(sink: NullSink(pacing: .unpaced), decodeBufferFrames: 1024))
        defer { queue.dispose(immediately: true) }
        try queue.enqueue(try queue.makeBuffer(ramp(frames: 155, channels: channels, offset: 1)))
        #expect(try queue.prime() == 155)
        try queue.reset()
        try queue.enqueue(try queue.makeBuffer(ramp(frames: 155, channels: channels, offset: 1)))
        #expect(try queue.prime() == 155)
        for _ in 0..<20 { try queue.enqueue(try queue.makeBuffer(ramp(frames: 155, channels: channels, offset: 1))) }
        #expect(try queue.prime() == 1024)
        #expect(try queue.prime(frames: 5000) == 1024)
        // What prime left behind plays in order after what it prepared: the queue renders every frame.
        try queue.setOfflineRenderFormat(format)
        var scratch = [Float](repeating: 0, count: 4096 * channels)
        var rendered = 0
        while true {
            let n = try scratch.withUnsafeMutableBytes { try queue.offlineRender(at: queue.offlineRenderPosition, into: $0, frames: 4096) }
            if n == 0 { break }
            rendered += n
        }
        #expect(rendered == 21 * 155)
    }
}

/// Class 21 of issue 37: a buffer trimmed to nothing but given a start time ahead still holds its
/// place: the silence up to its start time, which the enqueue reported scheduled, is rendered.
@Suite struct EmptyScheduledBufferTests {
    @Test func aBufferTrimmedToNothingAtAStartTimeRendersTheSilenceBeforeIt() throws {
        let format = AudioStreamDescription.float32(sampleRate: 48000, channels: 2)
        let queue = try AudioQueue(format: format, configuration: .init(sink: NullSink(pacing: .unpaced)))
        defer { queue.dispose(immediately: true) }
        try queue.enqueue(try queue.makeBuffer(ramp(frames: 100, channels: 2, offset: 1)))
        let at = try queue.enqueue(try queue.makeBuffer(ramp(frames: 64, channels: 2, offset: 7)), trimFramesAtStart: 64, startTime: 2967)
        #expect(at == 2967)
        try queue.setOfflineRenderFormat(format)
        try queue.flush()
        var scratch = [Float](repeating: 0, count: 4096 * 2)
        var out: [Float] = []
        while true {
            let n = try scratch.withUnsafeMutableBytes { try queue.offlineRender(at: queue.offlineRenderPosition, into: $0, frames: 1000) }
            if n == 0 { break }
            out += scratch[0..<(n * 2)]
        }
        #expect(out.count / 2 == 2967, "\(out.count / 2) frames rendered")
        #expect(Array(out.prefix(200)) == ramp(frames: 100, channels: 2, offset: 1))
        #expect(out.dropFirst(200).allSatisfy { $0 == 0 })
    }
}
