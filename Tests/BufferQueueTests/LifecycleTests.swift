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
        #expect(await log.wait { $0.contains { if case .runningChanged(true) = $0 { return true } else { return false } } })
        try queue.stop(immediately: true)
        #expect(!queue.isRunning)
        #expect(await log.wait { _ in log.returnedIDs.count == 6 && log.runningChanges.count == 2 })
        #expect(log.returnedIDs == ids)
        #expect(log.runningChanges == [true, false])
        // Nothing more is pulled from the queue after the stop.
        let heard = sink.capturedSamples().count
        try await Task.sleep(for: .milliseconds(50))
        #expect(sink.capturedSamples().count == heard)
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
        queue.waitForCallbacks()
        #expect(await log.wait { _ in log.returnedIDs == Array(ids.prefix(3)) })
        try queue.flush()         // returns nothing, discards nothing
        try queue.pause()         // not started: nothing happens
        try queue.start()
        try await Task.sleep(for: .milliseconds(30))
        try queue.pause()
        // Decode-ahead may still fill what the sink freed before the pause; once that is done and
        // delivered, a paused queue decodes nothing more and calls back for nothing more.
        queue.waitForCallbacks()
        let returnedWhilePaused = called.value
        try await Task.sleep(for: .milliseconds(60))
        queue.waitForCallbacks()
        #expect(called.value == returnedWhilePaused)
        try queue.start()
        try queue.stop(immediately: false)
        #expect(await log.wait { _ in log.runningChanges == [true, false, true, false] })
        #expect(log.returnedIDs == ids)                    // each buffer exactly once, in order
        #expect(called.value == ids)
        #expect(difference(trimSilence(sink.capturedSamples(), channels: 2), input) == nil)
    }

    @Test func resetDiscardsReturnsBuffersAndKeepsRunning() async throws {
        let sink = NullSink(pacing: .realTime, capturing: true)
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink, decodeBufferFrames: 2048))
        let log = EventLog(queue)
        let timeline = try queue.makeTimeline()
        for i in 0..<4 { try queue.enqueue(try queue.makeBuffer(ramp(frames: 24000, channels: 2, offset: i * 24000))) }
        try queue.prime()
        try queue.start()
        try await Task.sleep(for: .milliseconds(100))
        try queue.reset()
        #expect(queue.isRunning)
        #expect(await log.wait { _ in log.returnedIDs.count == 4 })
        #expect(queue.currentTime(in: timeline).discontinuity)
        #expect(!queue.currentTime(in: timeline).discontinuity)   // told once per timeline
        // After the reset the queue plays new buffers without a restart.
        let after = ramp(frames: 4800, channels: 2, offset: 777)
        let before = sink.capturedSamples().count
        try queue.enqueue(try queue.makeBuffer(after))
        #expect(await eventually { difference(trimSilence(Array(sink.capturedSamples()[before...]), channels: 2), after) == nil })
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
        #expect(queue.isRunning || log.runningChanges.isEmpty)
        expectError(.enqueueDuringReset) { try queue.enqueue(try queue.makeBuffer(parts[0])) }
        #expect(await log.wait { $0.contains { if case .runningChanged(false) = $0 { return true } else { return false } } })
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
        #expect(await eventually(seconds: 30) { queue.currentTime().sampleTime > 0 })
        try queue.pause()
        #expect(!queue.isRunning)
        let t1 = queue.currentTime().sampleTime
        try await Task.sleep(for: .milliseconds(100))
        #expect(queue.currentTime().sampleTime == t1)
        #expect(t1 > 0 && t1 < Int64(frames))
        let capturedAtPause = sink.capturedSamples().count
        try queue.start()
        #expect(await eventually(seconds: 30) { sink.capturedSamples().count > capturedAtPause + 9600 })
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
        // Past the first 50 ms, the simulated device buffer is full.
        #expect(await eventually { queue.stage.timelineFrames.load(ordering: .relaxed) > 4800 })
        try queue.pause()
        let heard = Int(queue.currentTime().sampleTime)
        let rendered = queue.stage.timelineFrames.load(ordering: .relaxed)
        // The heard position trails what was rendered by the simulated device buffer (2400 frames).
        #expect(rendered - heard == sink.latencyFrames)
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
        let calls = Locked(0)
        let afterDispose = Locked(false)
        let disposed = Locked(false)
        let armed = Locked(false)
        let queue = try AudioQueue(format: format, configuration: .init(decodeBufferFrames: 256)) { queue, _ in
            if disposed.value { afterDispose.withLock { $0 = true } }
            calls.withLock { $0 += 1 }
            guard armed.value else { return }
            queue.dispose(immediately: true)   // from inside a callback: must not deadlock
            disposed.withLock { $0 = true }
        }
        for i in 0..<20 { try queue.enqueue(try queue.makeBuffer(ramp(frames: 200, channels: 2, offset: i))) }
        armed.withLock { $0 = true }
        try queue.start()
        #expect(await eventually { disposed.value })
        let count = calls.value
        try await Task.sleep(for: .milliseconds(50))
        #expect(calls.value == count)
        #expect(count < 20)
        #expect(!afterDispose.value)
        expectError(.disposalPending) { try queue.start() }
        expectError(.disposalPending) { _ = try queue.allocateBuffer(capacity: 10) }
    }

    @Test func noCallbackAfterDisposeReturns() async throws {
        let late = Locked(false)
        let disposedFlag = Locked(false)
        let queue = try AudioQueue(format: format, configuration: .init(decodeBufferFrames: 256)) { _, _ in
            if disposedFlag.value { late.withLock { $0 = true } }
        }
        for i in 0..<50 { try queue.enqueue(try queue.makeBuffer(ramp(frames: 512, channels: 2, offset: i))) }
        try queue.start()
        try await Task.sleep(for: .milliseconds(30))
        queue.dispose(immediately: true)
        disposedFlag.withLock { $0 = true }
        try await Task.sleep(for: .milliseconds(100))
        #expect(!late.value)
    }

    @Test func asyncDisposeReleasesAfterPlaying() async throws {
        let sink = NullSink(pacing: .unpaced, capturing: true)
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink))
        let input = ramp(frames: 10000, channels: 2)
        try queue.enqueue(try queue.makeBuffer(input))
        try queue.start()
        queue.dispose(immediately: false)
        expectError(.disposalPending) { try queue.enqueue(try queue.allocateBuffer(capacity: 8)) }
        #expect(await eventually { difference(sink.capturedSamples(), input) == nil })
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
        #expect(await log.wait { _ in log.runningChanges == [true, false] })
        #expect(difference(trimSilence(sink.capturedSamples(), channels: 2), input) == nil)
        #expect(queue.currentTime().sampleTime == 2400)
    }

    @Test func deferredStartBeginsLater() async throws {
        let sink = NullSink(pacing: .unpaced, capturing: true)
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink))
        try queue.enqueue(try queue.makeBuffer(ramp(frames: 100, channels: 2)))
        let began = ContinuousClock.now
        try queue.start(at: .now() + .milliseconds(150))
        #expect(queue.isRunning == false)
        #expect(await eventually { sink.capturedSamples().count == 200 })
        // Nothing can have been pulled before the start time.
        #expect(ContinuousClock.now - began >= .milliseconds(149))
        #expect(queue.isRunning)
    }
}

/// A sink driven by hand that, like the PulseAudio sink, says when playback really began.
private final class HandDrivenSink: AudioSink, @unchecked Sendable {
    private let source = Locked<AudioRenderSource?>(nil)
    func open(format: AudioStreamDescription, source: AudioRenderSource) throws { self.source.withLock { $0 = source } }
    func start() throws {}
    func pause() {}
    func flush() {}
    func drain(_ completion: @escaping @Sendable () -> Void) { completion() }
    func close() {}
    var latencyFrames: Int { 0 }
    var reportsPlaybackStart: Bool { true }
    func pull(frames: Int) -> Int {
        guard let source = source.value else { return 0 }
        var out = [Float](repeating: 0, count: frames * 2)
        return out.withUnsafeMutableBufferPointer { $0.baseAddress.map { source.render(into: $0, frames: frames, fillSilence: true) } ?? 0 }
    }
    func reportHeard() { source.value?.reportPlaybackStarted() }
}

@Suite struct RunningFollowsTheSinkTests {
    @Test func isRunningWaitsForTheSinkToReportPlayback() async throws {
        let sink = HandDrivenSink()
        let queue = try AudioQueue(format: .float32(sampleRate: 48000, channels: 2), configuration: .init(sink: sink))
        let log = EventLog(queue)
        try queue.enqueue(try queue.makeBuffer(ramp(frames: 4800, channels: 2)))
        try queue.prime()
        try queue.start()
        // Frames were rendered (written), but the sink has not said they are being played.
        #expect(sink.pull(frames: 480) == 480)
        try await Task.sleep(for: .milliseconds(100))
        #expect(!queue.isRunning)
        #expect(log.runningChanges.isEmpty)
        sink.reportHeard()
        #expect(await log.wait { _ in log.runningChanges == [true] })
        #expect(queue.isRunning)
        // A pause and a new start need a new report.
        try queue.pause()
        try queue.start()
        #expect(sink.pull(frames: 480) == 480)
        try await Task.sleep(for: .milliseconds(100))
        #expect(log.runningChanges == [true, false])
        sink.reportHeard()
        #expect(await log.wait { _ in log.runningChanges == [true, false, true] })
        queue.dispose(immediately: true)
    }
}
