import Dispatch
import Testing
@testable import BufferQueue

@Suite struct LifecycleTests {
    let format = AudioStreamDescription.float32(sampleRate: 48000, channels: 2)

    @Test func stopImmediatelyReturnsEveryBufferInOrder() async throws {
        let sink = NullSink(pacing: .realTime, capturing: true)
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink, decodeBufferFrames: 1024))
        let log = EventLog(queue)
        var ids: [Int] = []
        for i in 0..<6 {
            let buffer = try queue.makeBuffer(ramp(frames: 48000, channels: 2, offset: i))
            ids.append(buffer.id)
            try queue.enqueue(buffer)
        }
        try queue.start()
        #expect(await log.waitForRunning([true]))
        try queue.stop(immediately: true)
        #expect(!queue.isRunning)
        #expect(await log.wait { EventLog.returnedIDs($0).count == 6 && EventLog.runningChanges($0).count == 2 })
        #expect(log.returnedIDs == ids)
        #expect(log.runningChanges == [true, false])
        // Nothing more is pulled from the queue after the stop: a paced sink would have pulled
        // 480 frames in 100 ms.
        let heard = sink.framesReceived
        #expect(await !sink.waitForFrames(heard + 1, timeout: .milliseconds(100)))
    }

    @Test func callbacksForPrimePauseFlushAndResume() async throws {
        let sink = NullSink(pacing: .realTime, capturing: true)
        // The decode-ahead holds 2 of the 5 buffers of 1000 frames.
        let called = Locked([Int]())
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink, decodeBufferFrames: 2048)) { _, buffer in
            called.withLock { $0.append(buffer.id) }
        }
        let log = EventLog(queue)
        var ids: [Int] = []
        var input: [Float] = []
        for i in 0..<5 {
            let part = ramp(frames: 1000, channels: 2, offset: i * 1000 + 1)
            let buffer = try queue.makeBuffer(part)
            ids.append(buffer.id)
            input += part
            try queue.enqueue(buffer)
        }
        // prime decodes as far as the decode-ahead allows and returns the buffers whose bytes it
        // no longer needs, in order: the two that fit and the one partly in the ring.
        #expect(try queue.prime() == 2048)
        #expect(await log.waitForReturned(3))
        #expect(log.returnedIDs == Array(ids.prefix(3)))
        try queue.flush()         // returns nothing, discards nothing
        try queue.pause()         // not started: nothing happens
        try queue.start()
        #expect(await sink.waitForFrames(1440))
        try queue.pause()
        // Decode-ahead may still fill what the sink freed before the pause; once that is done and
        // delivered, a paused queue decodes nothing more and calls back for nothing more.
        queue.waitForCallbacks()
        let returnedWhilePaused = called.value.count            // the callback runs before waitForCallbacks returns
        #expect(await !log.wait(seconds: 0.1) { EventLog.returnedIDs($0).count > returnedWhilePaused })
        #expect(!queue.isRunning)
        try queue.start()
        try queue.stop(immediately: false)
        #expect(await log.waitForRunning([true, false, true, false]))
        #expect(log.returnedIDs == ids)                    // each buffer exactly once, in order
        #expect(called.value == ids)
        // On a loaded machine the real-time sink may run dry (an underrun event): the silence it
        // played then is not input. The ramp has no zero sample, so only inserted silence is dropped.
        let underran = log.all.contains { if case .underrun = $0 { return true } else { return false } }
        #expect(difference(heardInput(sink.capturedSamples(), channels: 2, underran: underran), input) == nil)
    }

    @Test func resetDiscardsReturnsBuffersAndKeepsRunning() async throws {
        let sink = NullSink(pacing: .realTime, capturing: true)
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink, decodeBufferFrames: 2048))
        let log = EventLog(queue)
        let timeline = try queue.makeTimeline()
        for i in 0..<4 { try queue.enqueue(try queue.makeBuffer(ramp(frames: 24000, channels: 2, offset: i * 24000))) }
        try queue.prime()
        try queue.start()
        #expect(await log.waitForRunning([true]))
        #expect(await sink.waitForFrames(4800))
        try queue.reset()
        #expect(queue.isRunning)
        #expect(await log.waitForReturned(4))
        #expect(queue.currentTime(in: timeline).discontinuity)
        #expect(!queue.currentTime(in: timeline).discontinuity)   // told once per timeline
        // After the reset the queue plays new buffers without a restart.
        let after = ramp(frames: 4800, channels: 2, offset: 777)
        let before = sink.capturedSamples().count
        try queue.enqueue(try queue.makeBuffer(after))
        #expect(await sink.waitForFrames(before / 2 + 4800 + 960))
        #expect(difference(trimSilence(Array(sink.capturedSamples()[before...]), channels: 2), after) == nil)
        #expect(queue.isRunning)
        #expect(log.runningChanges == [true])
        queue.dispose(immediately: true)
    }

    @Test func asyncStopPlaysEverythingFirst() async throws {
        let sink = NullSink(pacing: .realTime, latency: .milliseconds(20), capturing: true)
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink, decodeBufferFrames: 2048))
        let log = EventLog(queue)
        let parts = (0..<3).map { ramp(frames: 4800, channels: 2, offset: $0 * 4800 + 1) }
        for part in parts { try queue.enqueue(try queue.makeBuffer(part)) }
        try queue.prime()
        try queue.start()
        try queue.stop(immediately: false)
        #expect(queue.isStopping)
        expectError(.enqueueDuringReset) { try queue.enqueue(try queue.makeBuffer(parts[0])) }
        expectError(.enqueueDuringReset) { try queue.flush() }
        #expect(await log.waitForRunning([true, false]))
        #expect(!queue.isStopping)
        #expect(log.returnedIDs.count == 3)
        #expect(difference(trimSilence(sink.capturedSamples(), channels: 2), Array(parts.joined())) == nil)
        // Everything was heard, and enqueuing works again once stopped.
        #expect(queue.currentTime().sampleTime == 3 * 4800)
        try queue.enqueue(try queue.makeBuffer(parts[1]))
    }

    @Test func pauseStandsTimeStillAndResumesWithoutLoss() async throws {
        let sink = NullSink(pacing: .realTime, capturing: true)
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink, decodeBufferFrames: 4096))
        // 60 s that is never zero, so silence in the capture can only be padding: nothing here
        // depends on how promptly this task runs, however loaded the machine.
        let frames = 48000 * 60
        var input = [Float](repeating: 0, count: frames * 2)
        for i in input.indices { input[i] = Float(i % 997 + 1) / 1000 }
        try queue.enqueue(try queue.makeBuffer(input))
        try queue.prime()
        try queue.start()
        #expect(await sink.waitForFrames(4800, timeout: .seconds(30)))
        try queue.pause()
        #expect(!queue.isRunning)
        let t1 = queue.currentTime().sampleTime
        // Paused: the sink pulls nothing, so queue time cannot move.
        #expect(await !sink.waitForFrames(sink.framesReceived + 1, timeout: .milliseconds(100)))
        #expect(queue.currentTime().sampleTime == t1)
        #expect(t1 > 0 && t1 < Int64(frames))
        let capturedAtPause = sink.capturedSamples().count
        try queue.start()
        #expect(await sink.waitForFrames(capturedAtPause / 2 + 9600, timeout: .seconds(30)))
        try queue.stop(immediately: true)
        // What was heard, padding removed, is the input from its first frame on: nothing lost or repeated.
        let captured = sink.capturedSamples()
        var heard: [Float] = []
        for f in 0..<(captured.count / 2) where captured[2 * f] != 0 || captured[2 * f + 1] != 0 {
            heard += captured[(2 * f)..<(2 * f + 2)]
        }
        #expect(heard.count > capturedAtPause)
        #expect(difference(heard, Array(input[0..<heard.count])) == nil)
    }

    @Test func currentTimeFollowsTheSinkLatency() async throws {
        let sink = NullSink(pacing: .realTime, latency: .milliseconds(50), capturing: false)
        // 30 s, all decoded ahead by prime: neither a starved worker nor the end of the input can
        // come into play, however late this task resumes (under TSan the CPU-heavy codec tests
        // have held both cooperative threads for over 10 s).
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink, decodeBufferFrames: 1_440_000))
        try queue.enqueue(try queue.makeBuffer(ramp(frames: 1_440_000, channels: 2)))
        try queue.prime()
        try queue.start()
        // Past the first 100 ms, the simulated device buffer is full.
        #expect(await sink.waitForFrames(4800))
        try queue.pause()
        let heard = Int(queue.currentTime().sampleTime)
        let rendered = Int(queue.offlineRenderPosition)
        // The heard position trails what was rendered by the simulated device buffer (2400 frames).
        #expect(rendered > 2400)
        #expect(abs(rendered - heard - 2400) <= 480)
        queue.dispose(immediately: true)
    }

    @Test func flushDrainsTheDecoderWithoutDiscarding() throws {
        let queue = try AudioQueue(format: format)
        let a = ramp(frames: 300, channels: 2), b = ramp(frames: 200, channels: 2, offset: 300)
        try queue.enqueue(try queue.makeBuffer(a))
        try queue.flush()
        try queue.enqueue(try queue.makeBuffer(b))
        #expect(difference(try queue.renderAllOffline(), a + b) == nil)
    }

    @Test func disposeStopsCallbacksEvenFromInsideOne() async throws {
        let calls = Watched(0)
        let afterDispose = Locked(false)
        let disposed = Watched(false)
        let armed = Locked(false)
        let queue = try AudioQueue(format: format, configuration: .init(decodeBufferFrames: 256)) { queue, _ in
            if disposed.current { afterDispose.withLock { $0 = true } }
            calls.update { $0 += 1 }
            guard armed.value else { return }
            queue.dispose(immediately: true)   // from inside a callback: must not deadlock
            disposed.update { $0 = true }
        }
        for i in 0..<20 { try queue.enqueue(try queue.makeBuffer(ramp(frames: 200, channels: 2, offset: i))) }
        armed.withLock { $0 = true }
        try queue.start()
        #expect(await disposed.wait { $0 })
        let count = calls.current
        #expect(await !calls.wait(timeout: .milliseconds(100)) { $0 > count })
        #expect(count < 20)
        #expect(!afterDispose.value)
        expectError(.disposalPending) { try queue.start() }
        expectError(.disposalPending) { _ = try queue.allocateBuffer(capacity: 10) }
    }

    @Test func noCallbackAfterDisposeReturns() async throws {
        let late = Watched(false)
        let disposedFlag = Locked(false)
        let calls = Watched(0)
        let queue = try AudioQueue(format: format, configuration: .init(decodeBufferFrames: 256)) { _, _ in
            if disposedFlag.value { late.update { $0 = true } }
            calls.update { $0 += 1 }
        }
        // 200 buffers (2.3 s): the dispose lands mid-play even when this machine is busy.
        let buffers = try (0..<200).map { try queue.makeBuffer(ramp(frames: 512, channels: 2, offset: $0)) }
        for buffer in buffers { try queue.enqueue(buffer) }
        try queue.start()
        #expect(await calls.wait { $0 >= 3 })                   // mid-play, callbacks flowing
        queue.dispose(immediately: true)
        disposedFlag.withLock { $0 = true }
        #expect(await !late.wait(timeout: .milliseconds(100)) { $0 })
        #expect(calls.current < 200)
        #expect(buffers.allSatisfy { !$0.isInQueue })           // handed back, without a callback
    }

    @Test func asyncDisposeReleasesAfterPlaying() async throws {
        let sink = NullSink(pacing: .unpaced, capturing: true)
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink))
        let input = ramp(frames: 10000, channels: 2)
        try queue.enqueue(try queue.makeBuffer(input))
        let log = EventLog(queue)
        try queue.start()
        queue.dispose(immediately: false)
        expectError(.disposalPending) { _ = try queue.allocateBuffer(capacity: 8) }
        #expect(await log.waitUntilFinished())
        #expect(difference(sink.capturedSamples(), input) == nil)
    }

    @Test func invalidRunStatesAreErrors() async throws {
        let queue = try AudioQueue(format: format, configuration: .init(sink: NullSink(pacing: .realTime)))
        try queue.enqueue(try queue.makeBuffer(ramp(frames: 48000, channels: 2)))
        try queue.start()
        try queue.stop(immediately: false)
        try queue.start()   // already playing towards the stop: nothing to do
        let big = try queue.allocateBuffer(capacity: 8)
        try big.setData([0, 0, 0, 0, 0, 0, 0, 0])
        expectError(.enqueueDuringReset) { try queue.enqueue(big) }
        try queue.stop(immediately: true)
        try queue.enqueue(big)
        try queue.start()
        queue.dispose(immediately: true)
        expectError(.disposalPending) { try queue.reset() }
        expectError(.disposalPending) { try queue.stop(immediately: true) }
        expectError(.disposalPending) { try queue.flush() }
    }

    @Test func asyncStopBeforeStartTakesEffectOnceEverythingPlayed() async throws {
        let sink = NullSink(pacing: .realTime, capturing: true)
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink))
        let log = EventLog(queue)
        let input = ramp(frames: 2400, channels: 2, offset: 3)
        try queue.enqueue(try queue.makeBuffer(input))
        try queue.stop(immediately: false)    // at end of file before playback started, as playpcm does
        #expect(!queue.isRunning)
        try queue.start()
        #expect(await log.waitForRunning([true, false]))
        #expect(difference(trimSilence(sink.capturedSamples(), channels: 2), input) == nil)
        #expect(queue.currentTime().sampleTime == 2400)
    }

    @Test func deferredStartBeginsLater() async throws {
        let sink = NullSink(pacing: .unpaced, capturing: true)
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink))
        let log = EventLog(queue)
        try queue.enqueue(try queue.makeBuffer(ramp(frames: 100, channels: 2)))
        let began = ContinuousClock.now
        try queue.start(at: .now() + .milliseconds(150))
        #expect(queue.isRunning == false)
        #expect(await sink.waitForFrames(100))
        // Nothing can have been pulled before the start time.
        #expect(ContinuousClock.now - began >= .milliseconds(149))
        #expect(await log.waitForRunning([true]))
    }
}

@Suite struct RunningFollowsTheSinkTests {
    @Test func isRunningWaitsForTheSinkToReportPlayback() async throws {
        let sink = ScriptedSink(reportsPlaybackStart: true)
        let queue = try AudioQueue(format: .float32(sampleRate: 48000, channels: 2), configuration: .init(sink: sink))
        let log = EventLog(queue)
        try queue.enqueue(try queue.makeBuffer(ramp(frames: 4800, channels: 2)))
        try queue.prime()
        try queue.start()
        // Frames were rendered (written), but the sink has not said they are being played.
        #expect(sink.pull(frames: 480) == 480)
        // The worker handles the render at once; isRunning must still wait for the report.
        queue.waitForCallbacks()
        #expect(await !log.wait(seconds: 0.1) { !EventLog.runningChanges($0).isEmpty })
        #expect(!queue.isRunning)
        sink.reportHeard()
        #expect(await log.waitForRunning([true]))
        #expect(queue.isRunning)
        // A pause and a new start need a new report.
        try queue.pause()
        try queue.start()
        #expect(sink.pull(frames: 480) == 480)
        queue.waitForCallbacks()
        #expect(await !log.wait(seconds: 0.1) { EventLog.runningChanges($0).count > 2 })
        #expect(log.runningChanges == [true, false])
        sink.reportHeard()
        #expect(await log.waitForRunning([true, false, true]))
        queue.dispose(immediately: true)
    }
}
