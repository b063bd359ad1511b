import Testing
@testable import BufferQueue

/// The input queue's lifecycle as a value: every transition, with the actions it asks for.
@Suite struct InputLifecycleTests {
    typealias Action = InputLifecycle.Action

    static func running() throws -> InputLifecycle {
        var l = InputLifecycle()
        #expect(try l.start(sourceIsOpen: false) == [.openSource, .report(running: true), .startSource])
        return l
    }

    @Test func startOpensFromStoppedAndResumesFromPaused() throws {
        var l = try Self.running()
        #expect(l.phase == .running && l.isRunning)
        #expect(try l.start(sourceIsOpen: true) == [])
        #expect(try l.pause() == [.pauseSource, .report(running: false)])
        #expect(l.phase == .paused && !l.isRunning)
        #expect(try l.pause() == [])
        // From paused with the source still open: no reopening.
        #expect(try l.start(sourceIsOpen: true) == [.report(running: true), .startSource])
        // From paused after the source was closed (it ended): reopened.
        _ = try l.pause()
        #expect(try l.start(sourceIsOpen: false) == [.openSource, .report(running: true), .startSource])
    }

    @Test func aFailedStartGoesBack() throws {
        var unopened = InputLifecycle()
        _ = try unopened.start(sourceIsOpen: false)
        #expect(unopened.startFailed(restoring: .stopped, reported: false) == [])
        #expect(unopened.phase == .stopped)
        var unstarted = InputLifecycle()
        _ = try unstarted.start(sourceIsOpen: false)
        #expect(unstarted.startFailed(restoring: .stopped, reported: true) == [.report(running: false)])
        #expect(unstarted.startFailed(restoring: .stopped, reported: true) == [])
    }

    @Test func anAsynchronousStopRefusesEnqueuesUntilCaptureEnds() throws {
        var l = try Self.running()
        try l.checkEnqueue()
        #expect(try l.stop(immediately: false) == [.wakeWorker])
        #expect(l.phase == .stopping && l.isRunning)
        #expect(throws: AudioQueueError.self) { try l.checkEnqueue() }
        #expect(try l.start(sourceIsOpen: true) == [])
        #expect(l.captureEnded() == [.pauseSource, .drainAndClose, .report(running: false)])
        #expect(l.phase == .stopped)
        try l.checkEnqueue()
    }

    @Test func anImmediateStopReportsUnlessPaused() throws {
        var running = try Self.running()
        #expect(try running.stop(immediately: true) == [.pauseSource, .drainAndClose, .report(running: false)])
        #expect(try running.stop(immediately: true) == [])
        var stopping = try Self.running()
        _ = try stopping.stop(immediately: false)
        #expect(try stopping.stop(immediately: true) == [.pauseSource, .drainAndClose, .report(running: false)])
        var paused = try Self.running()
        _ = try paused.pause()
        #expect(try paused.stop(immediately: false) == [.pauseSource, .drainAndClose])
        #expect(paused.phase == .stopped)
    }

    @Test func captureEndingWhilePausedOrStoppedOnlyCloses() throws {
        var paused = try Self.running()
        _ = try paused.pause()
        #expect(paused.captureEnded() == [.pauseSource, .drainAndClose, .report(running: false)])
        var stopped = InputLifecycle()
        #expect(stopped.captureEnded() == [.pauseSource, .drainAndClose])
        #expect(stopped.phase == .stopped)
    }

    @Test func resetKeepsARunningQueueRunning() throws {
        let running = try Self.running()
        #expect(try running.reset() == [.pauseSource, .discardCaptured, .startSource])
        #expect(try InputLifecycle().reset() == [.discardCaptured])
    }

    @Test func disposalIsFinal() throws {
        var l = try Self.running()
        #expect(l.dispose(immediately: false) == [.pauseSource, .release(handBackFirst: true)])
        #expect(l.dispose(immediately: true) == [])
        #expect(l.phase == .disposed)
        #expect(throws: AudioQueueError.self) { try l.start(sourceIsOpen: true) }
        #expect(throws: AudioQueueError.self) { try l.pause() }
        #expect(throws: AudioQueueError.self) { try l.stop(immediately: true) }
        #expect(throws: AudioQueueError.self) { try l.reset() }
        #expect(throws: AudioQueueError.self) { try l.checkEnqueue() }
        var fresh = InputLifecycle()
        #expect(fresh.dispose(immediately: true) == [.pauseSource, .release(handBackFirst: false)])
    }
}
