import Testing
@testable import BufferQueue

/// The lifecycle as plain values: no sink, no thread, no queue.
@Suite struct LifecycleStateMachineTests {
    typealias L = QueueLifecycle

    /// A queue that played, was stopped asynchronously and whose end was rendered: draining.
    func drainingAfterPlaying() throws -> L {
        var l = L()
        _ = try l.start(deferred: false)
        _ = l.playbackObserved()
        _ = try l.stop(immediately: false, heard: 0)
        _ = l.endRendered(heard: 0)
        return l
    }

    @Test func startPlayStopAsynchronously() throws {
        var l = L()
        #expect(try l.start(deferred: false) == [.activateSink])
        #expect(l.state == .playing(ending: nil))
        #expect(!l.isRunning)                                   // not until the sink plays
        #expect(l.playbackObserved() == [.reportRunning(true)])
        #expect(l.playbackObserved() == [])
        #expect(try l.stop(immediately: false, heard: 0) == [.appendEnd(refusal: .enqueueDuringReset)])
        #expect(l.isStopping)
        #expect(try l.stop(immediately: false, heard: 0) == [])   // asked once is enough
        #expect(l.endRendered(heard: 900) == [.drainSink(token: 1)])
        #expect(l.drainCompleted(token: 1, heard: 900) == [.pauseSink, .closeSink, .restartTimeline, .reportRunning(false)])
        #expect(l.state == .idle(ending: nil, lastRunEnd: 900))
        #expect(!l.isStopping && !l.isRunning)
    }

    /// Defect 1 as values: a deferred start survives an asynchronous stop and completes it.
    @Test func deferredStartThenAsynchronousStopStillPlaysAndStops() throws {
        var l = L()
        #expect(try l.start(deferred: true) == [.scheduleStart(token: 1)])
        #expect(try l.stop(immediately: false, heard: 0) == [.appendEnd(refusal: .enqueueDuringReset)])
        #expect(l.state == .waiting(token: 1, ending: .stop))
        #expect(l.deferredStartFired(token: 2) == [])           // not this start's token
        #expect(l.deferredStartFired(token: 1) == [.activateSink])
        #expect(l.endRendered(heard: 10) == [.drainSink(token: 2)])
        #expect(l.drainCompleted(token: 2, heard: 10).contains(.restartTimeline))
        #expect(l.state == .idle(ending: nil, lastRunEnd: 10))
    }

    @Test func deferredStartThenAsynchronousDisposeDisposes() throws {
        var l = L()
        _ = try l.start(deferred: true)
        #expect(l.dispose(immediately: false) == [.appendEnd(refusal: .disposalPending)])
        #expect(l.deferredStartFired(token: 1) == [.activateSink])
        _ = l.endRendered(heard: 0)
        #expect(l.drainCompleted(token: 2, heard: 0) == [.pauseSink, .closeSink, .discard(returnBuffers: false), .release])
        #expect(l.isDisposed)
    }

    /// Defect 7 as values: the drain of an earlier stop cannot end a later one.
    @Test func staleDrainCompletionIsIgnored() throws {
        var l = L()
        _ = try l.start(deferred: false)
        _ = try l.stop(immediately: false, heard: 0)
        #expect(l.endRendered(heard: 0) == [.drainSink(token: 1)])
        _ = try l.stop(immediately: true, heard: 0)
        _ = try l.start(deferred: false)
        _ = try l.stop(immediately: false, heard: 0)
        #expect(l.endRendered(heard: 0) == [.drainSink(token: 2)])
        #expect(l.drainCompleted(token: 1, heard: 0) == [])
        #expect(l.isStopping)
        #expect(!l.drainCompleted(token: 2, heard: 0).isEmpty)
        #expect(!l.isStopping)
    }

    /// Defect 5 as values: a failed activation closes an opened sink and goes back.
    @Test func failedActivationClosesTheSinkAndGoesBack() throws {
        var l = L()
        _ = try l.start(deferred: false)
        #expect(l.activationFailed(opened: true) == [.closeSink])
        #expect(l.state == .idle(ending: nil, lastRunEnd: nil))
        #expect(l.sink == .closed && !l.isRunning)
        #expect(try l.start(deferred: false) == [.activateSink])   // a later start tries again
    }

    /// Defect 5 as values: a sink that cannot follow a format change leaves the queue paused.
    @Test func failedReopenPausesAndTheNextStartReopens() throws {
        var l = L()
        _ = try l.start(deferred: false)
        _ = l.playbackObserved()
        #expect(l.formatChangeReached() == [.reopenSink])
        #expect(l.reopenFailed() == [.closeSink, .reportRunning(false)])
        #expect(l.state == .paused(ending: nil, endRendered: false))
        #expect(try l.start(deferred: false) == [.activateSink])
    }

    @Test func pauseWhileDrainingResumesTheDrain() throws {
        var l = try drainingAfterPlaying()
        #expect(try l.pause() == [.pauseSink, .reportRunning(false)])
        #expect(l.state == .paused(ending: .stop, endRendered: true))
        #expect(l.isStopping)
        #expect(l.drainCompleted(token: 1, heard: 0) == [])        // that drain was abandoned
        #expect(try l.start(deferred: false) == [.activateSink, .drainSink(token: 2)])
    }

    @Test func pauseBeforeTheEndKeepsTheStopPending() throws {
        var l = L()
        _ = try l.start(deferred: false)
        _ = try l.stop(immediately: false, heard: 0)
        _ = try l.pause()
        #expect(l.state == .paused(ending: .stop, endRendered: false))
        #expect(try l.start(deferred: false) == [.activateSink])
        #expect(l.endRendered(heard: 0) == [.drainSink(token: 1)])
    }

    @Test func resetWhilePlayingPausesTheSinkForTheDiscard() throws {
        var l = L()
        _ = try l.start(deferred: false)
        #expect(try l.reset(heard: 0) == [.pauseSink, .discard(returnBuffers: true), .flushSink, .activateSink])
        #expect(l.state == .playing(ending: nil))
        var paused = L()
        #expect(try paused.reset(heard: 0) == [.discard(returnBuffers: true)])
    }

    @Test func resetDuringAnAsynchronousStopStopsNow() throws {
        var l = L()
        _ = try l.start(deferred: false)
        _ = try l.stop(immediately: false, heard: 0)
        let actions = try l.reset(heard: 42)
        #expect(actions == [.pauseSink, .closeSink, .discard(returnBuffers: true), .restartTimeline])
        #expect(l.state == .idle(ending: nil, lastRunEnd: 42))
    }

    /// Defect 10: an asynchronous disposal of an idle queue waits for its buffers to play.
    @Test func asynchronousDisposeOfAnIdleQueue() throws {
        var l = L()
        #expect(l.dispose(immediately: false, nothingQueued: false) == [.appendEnd(refusal: .disposalPending)])
        #expect(!l.isDisposed)
        #expect(try l.start(deferred: false) == [.activateSink])   // playing it out is allowed
        var empty = L()
        #expect(empty.dispose(immediately: false, nothingQueued: true) == [.discard(returnBuffers: false), .release])
        #expect(empty.isDisposed)
    }

    @Test func stopImmediatelyDuringAnAsynchronousDisposeDisposes() throws {
        var l = L()
        _ = try l.start(deferred: false)
        _ = l.dispose(immediately: false)
        #expect(try l.stop(immediately: true, heard: 0).last == .release)
        #expect(l.isDisposed)
    }

    @Test func offlineRenderingCompletesTheStopWithoutASink() throws {
        var l = L()
        #expect(try l.setOffline(true) == [])
        #expect(try l.start(deferred: true) == [.reportRunning(true)])   // offline: nothing to wait for
        _ = try l.stop(immediately: false, heard: 0)
        #expect(l.endRendered(heard: 5) == [.restartTimeline, .reportRunning(false)])
        // Offline rendering without a start completes a stop as well.
        var unstarted = L()
        _ = try unstarted.setOffline(true)
        _ = try unstarted.stop(immediately: false, heard: 0)
        #expect(unstarted.endRendered(heard: 3) == [.restartTimeline])
        #expect(unstarted.state == .idle(ending: nil, lastRunEnd: 3))
    }

    @Test func switchingOfflineClosesAndReopensTheSink() throws {
        var l = L()
        _ = try l.start(deferred: false)
        #expect(try l.setOffline(true) == [.pauseSink, .closeSink])
        #expect(try l.setOffline(false) == [.activateSink])
    }

    @Test func switchingOfflineDuringADrainCompletesTheStop() throws {
        var l = try drainingAfterPlaying()
        #expect(try l.setOffline(true, heard: 77) == [.pauseSink, .closeSink, .restartTimeline, .reportRunning(false)])
        #expect(l.state == .idle(ending: nil, lastRunEnd: 77))
        #expect(l.drainCompleted(token: 1, heard: 0) == [])      // the abandoned drain changes nothing
    }

    @Test func sinkFailureWhileDrainingResumesTheDrainOnStart() throws {
        var l = try drainingAfterPlaying()
        #expect(l.sinkFailed() == [.pauseSink, .closeSink, .reportRunning(false)])
        #expect(try l.start(deferred: false) == [.activateSink, .drainSink(token: 2)])
    }

    @Test func everyCallOnADisposedQueueFails() throws {
        var l = L()
        _ = l.dispose(immediately: true)
        for call in [{ try l.start(deferred: false) }, { try l.pause() }, { try l.stop(immediately: true, heard: 0) },
                     { try l.reset(heard: 0) }, { try l.setOffline(true) }] as [() throws -> [L.Action]] {
            #expect(throws: AudioQueueError.self) { _ = try call() }
        }
        #expect(l.dispose(immediately: true) == [])
        #expect(l.endRendered(heard: 0) == [] && l.drainCompleted(token: 1, heard: 0) == [] && l.sinkFailed() == [])
    }
}
