import Testing
@testable import ALSASink

/// The ALSA device thread's commands and steps as a value: every transition.
@Suite struct DeviceControlTests {
    static func open() -> DeviceControl {
        var c = DeviceControl()
        c.opened()
        return c
    }

    @Test func nothingIsAcceptedBeforeOpen() {
        var c = DeviceControl()
        let accepted = [c.start(), c.pause(), c.requestFlush(), c.close(), c.drain({})]
        #expect(accepted == [false, false, false, false, false])
        #expect(c.threadEnded && c.pauseTookEffect && c.flushTookEffect)
    }

    @Test func aPausedThreadParksAndStartPlays() {
        var c = Self.open()
        #expect(c.wanted == .paused && c.threadRunning)
        #expect(c.nextStep(applied: .paused, failed: false) == .park)
        let started = c.start()
        #expect(started)
        #expect(c.nextStep(applied: .paused, failed: false) == .play(draining: false))
        let rendering = c.beginRender()
        #expect(rendering && c.inRender)
        c.endRender()
        #expect(!c.inRender)
    }

    @Test func pauseWaitsUntilTheThreadParks() {
        var c = Self.open()
        _ = c.start()
        let rendering = c.beginRender(), pausing = c.pause()
        #expect(rendering && pausing)
        #expect(c.wanted == .paused)
        #expect(!c.pauseTookEffect)                       // a render is in progress
        c.endRender()
        #expect(!c.pauseTookEffect)                       // not parked yet
        #expect(c.nextStep(applied: .running, failed: false) == .pause)
        #expect(c.nextStep(applied: .paused, failed: false) == .park)
        c.setParked(true)
        #expect(c.pauseTookEffect)
        // A render asked for after the pause is not made.
        let late = c.beginRender()
        #expect(!late)
    }

    @Test func aFlushComesFirstAndIsWaitedFor() {
        var c = Self.open()
        _ = c.start()
        let flushing = c.requestFlush()
        #expect(flushing && !c.flushTookEffect)
        #expect(c.nextStep(applied: .running, failed: true) == .flush)
        c.flushed()
        #expect(c.flushTookEffect)
    }

    @Test func aDrainPlaysOutThenPausesAndCompletes() {
        var c = Self.open()
        _ = c.start()
        let drains = [c.drain({}), c.drain({})]
        #expect(drains == [true, true])
        #expect(c.nextStep(applied: .running, failed: false) == .play(draining: true))
        let rendering = c.beginRender()
        #expect(!rendering)                               // nothing more is rendered while draining
        let done = c.drained()
        #expect(done.count == 2)
        #expect(c.wanted == .paused && c.completions.isEmpty)
    }

    @Test func aFailedDeviceParksUntilClosed() {
        var c = Self.open()
        _ = c.start()
        #expect(c.nextStep(applied: .running, failed: true) == .park)
        let closing = c.close()
        #expect(closing && c.nextStep(applied: .running, failed: true) == .close)
        #expect(!c.threadEnded)
        c.threadExited()
        #expect(c.threadEnded)
    }

    @Test func closeHandsBackTheDrainsStillOwed() {
        var c = Self.open()
        _ = c.drain({})
        _ = c.close()
        c.threadExited()
        let owed = c.takeCompletions().count, again = c.takeCompletions().count
        #expect(owed == 1 && again == 0)
    }
}
