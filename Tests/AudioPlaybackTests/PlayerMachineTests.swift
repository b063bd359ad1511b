import Testing
@testable import AudioPlayback
import BufferQueue

/// The player's lifecycle as a value: every transition, with the actions it asks for.
@Suite struct PlayerMachineTests {
    typealias Action = PlayerMachine.Action
    static let a = AudioPlayerItem(name: "a") { _ in throw AudioQueueError(.invalidParameter, "unused") }.id
    static let b = AudioPlayerItem(name: "b") { _ in throw AudioQueueError(.invalidParameter, "unused") }.id
    static let buffering = AudioPlayer.Buffering(startSeconds: 1, restartSeconds: 2, maximumSeconds: 3)
    static let boom = AudioPlayerError(.read, itemIndex: 1, itemName: "b", underlying: AudioQueueError(.decoderError, "boom"))

    /// Begun with two items, the first opened and fed.
    static func running() -> PlayerMachine {
        var m = PlayerMachine(items: [a, b])
        #expect(m.begin(hasItems: true) == [.openItem])
        #expect(m.itemOpened(a) == [.publishItem(id: a, .loading)])
        return m
    }

    /// A skipped item (`onItemFailure: .skip`) is failed, the player plays on, and the run ends
    /// finished once another item was heard (the report lists the skip): the item heard last is finished.
    @Test func aSkippedItemFailsItselfNotTheRunWhenAnotherPlays() {
        var m = Self.running()
        #expect(m.itemSkipped(Self.a, Self.boom) == [.publishItem(id: Self.a, .failed(Self.boom))])
        // Nothing heard yet: were the run to end now, nothing could play, and the skip says why.
        #expect(m.phase == .running && m.failure == nil && m.outcomeFailure == Self.boom)
        #expect(m.itemOpened(Self.b) == [.publishItem(id: Self.b, .loading)])
        #expect(m.itemHeard(Self.b).contains(.publishItem(id: Self.b, .playing)))
        #expect(m.outcomeFailure == nil)
        #expect(m.inputFinished(hasQueue: true) == [.finishQueue])
        #expect(m.allDecoded() == [.stopQueue])
        let end = m.runningChanged(false, queueStopping: false)
        #expect(end.contains(.publishItem(id: Self.b, .finished)) && end.contains(.publish(.finished)) && end.last == .complete, "\(end)")
        #expect(m.itemStates[Self.a] == .failed(Self.boom), "a failed item stays failed")
    }

    /// Every item skipped: the run fails with the first one's error.
    @Test func aRunWhereEveryItemWasSkippedFailsWithTheFirst() {
        var m = Self.running()
        let other = AudioPlayerError(.read, itemIndex: 1, underlying: AudioQueueError(.invalidParameter, "other"))
        _ = m.itemSkipped(Self.a, Self.boom)
        _ = m.itemSkipped(Self.b, other)
        let end = m.inputFinished(hasQueue: false)
        #expect(end.contains(.publish(.failed(Self.boom))) && end.last == .complete, "\(end)")
    }

    @Test func beginOpensTheFirstItemOnce() {
        var m = PlayerMachine(items: [Self.a])
        #expect(m.phase == .ready && m.state == .buffering && m.itemStates[Self.a] == .queued)
        #expect(m.begin(hasItems: true) == [.openItem])
        #expect(m.phase == .running)
        #expect(m.begin(hasItems: true) == [])
    }

    @Test func beginWithNothingToPlayEndsAtOnce() {
        var empty = PlayerMachine()
        #expect(empty.begin(hasItems: false) == [.publish(.finished), .complete])
        var stopped = PlayerMachine(items: [Self.a])
        stopped.requestStop()
        #expect(stopped.begin(hasItems: true) == [.publish(.finished), .complete])
        #expect(stopped.phase == .ended)
    }

    @Test func playbackStartsWhenEnoughIsBuffered() {
        var m = Self.running()
        // Not enough, not waiting: nothing yet.
        #expect(m.buffered(enough: false, ahead: 0.5, waiting: false, buffering: Self.buffering) == [])
        // The source waits and the start amount is there: start.
        #expect(m.buffered(enough: false, ahead: 1.0, waiting: true, buffering: Self.buffering) == [.startQueue(play: true)])
        #expect(m.queueStarted)
        // Started: more buffering changes nothing.
        #expect(m.buffered(enough: true, ahead: 3, waiting: false, buffering: Self.buffering) == [])
        #expect(m.runningChanged(true, queueStopping: false) == [.publish(.playing)])
        #expect(m.runningChanged(true, queueStopping: false) == [])
    }

    @Test func aPausedPlayerPrimesWithoutPlaying() {
        var m = Self.running()
        #expect(m.pause() == [.pauseQueue, .publish(.paused)])
        #expect(m.buffered(enough: true, ahead: 1, waiting: false, buffering: Self.buffering) == [.startQueue(play: false)])
        // Sound reported while paused does not make it playing.
        #expect(m.runningChanged(true, queueStopping: false) == [])
        #expect(m.resume() == [.resumeQueue, .publish(.playing)])
        #expect(m.resume() == [])
    }

    @Test func resumeBeforeTheQueueStartedOnlyRestatesPlaying() {
        var m = Self.running()
        _ = m.pause()
        #expect(m.resume() == [.publish(.playing)])
    }

    @Test func anUnderrunHoldsUntilTheRestartAmount() {
        var m = Self.running()
        _ = m.buffered(enough: true, ahead: 3, waiting: false, buffering: Self.buffering)
        _ = m.runningChanged(true, queueStopping: false)
        #expect(m.underran() == [.pauseQueue, .publish(.buffering)])
        #expect(m.underrun)
        #expect(m.runningChanged(true, queueStopping: false) == [])
        #expect(m.buffered(enough: false, ahead: 1.5, waiting: true, buffering: Self.buffering) == [])
        #expect(m.buffered(enough: false, ahead: 2.0, waiting: true, buffering: Self.buffering) == [.resumeQueue, .publish(.playing)])
        #expect(!m.underrun)
    }

    @Test func underrunsAfterTheInputOrWhilePausedAreIgnored() {
        var done = Self.running()
        _ = done.buffered(enough: true, ahead: 3, waiting: false, buffering: Self.buffering)
        _ = done.inputFinished(hasQueue: true)
        #expect(done.underran() == [])
        var paused = Self.running()
        _ = paused.pause()
        #expect(paused.underran() == [])
    }

    @Test func theStateIsTheHeardItemsAPrefetchedItemsIsItsOwn() {
        var m = Self.running()
        // Before anything is heard the first item's connection state is the player's.
        #expect(m.sourceReported(.connecting, item: Self.a) == [.publishItem(id: Self.a, .connecting), .publish(.connecting)])
        _ = m.buffered(enough: true, ahead: 3, waiting: false, buffering: Self.buffering)
        _ = m.runningChanged(true, queueStopping: false)
        #expect(m.itemHeard(Self.a) == [.publishItem(id: Self.a, .playing)])
        #expect(m.itemHeard(Self.a) == [])
        // The second item, prefetched, buffers: its state changes, the player's does not.
        #expect(m.itemOpened(Self.b) == [.publishItem(id: Self.b, .loading)])
        #expect(m.sourceReported(.reconnecting, item: Self.b) == [.publishItem(id: Self.b, .reconnecting)])
        #expect(m.state == .playing)
        // Heard: it plays, the first is finished.
        #expect(m.itemHeard(Self.b) == [.publishItem(id: Self.a, .finished), .publishItem(id: Self.b, .playing)])
        // Now its reconnect is the player's.
        #expect(m.sourceReported(.reconnecting, item: Self.b) == [.publish(.reconnecting)])
    }

    @Test func theEndComesWhenEverythingFedIsHeard() {
        var m = Self.running()
        _ = m.buffered(enough: true, ahead: 3, waiting: false, buffering: Self.buffering)
        _ = m.runningChanged(true, queueStopping: false)
        _ = m.itemHeard(Self.a)
        #expect(m.inputFinished(hasQueue: true) == [.finishQueue])
        #expect(m.inputFinished(hasQueue: true) == [])
        #expect(m.allDecoded() == [.stopQueue])
        #expect(m.allDecoded() == [])
        // A stop in progress (a seek's) is not the end.
        #expect(m.runningChanged(false, queueStopping: true) == [])
        #expect(m.runningChanged(false, queueStopping: false) == [.publishItem(id: Self.a, .finished), .publish(.finished), .complete])
        #expect(m.phase == .ended && m.state == .finished)
        // Final: nothing moves it.
        #expect(m.pause() == [] && m.stop() == [] && m.underran() == [])
    }

    @Test func inputEndingWithoutAQueueEndsAtOnce() {
        var m = Self.running()
        #expect(m.inputFinished(hasQueue: false) == [.publish(.finished), .complete])
    }

    @Test func anItemAddedBeforeTheStopIsFedOnAfterItIsFedAfterTheDrain() {
        var early = Self.running()
        _ = early.inputFinished(hasQueue: true)
        #expect(early.moreInput() == [.openItem])
        #expect(!early.inputDone)
        var late = Self.running()
        _ = late.inputFinished(hasQueue: true)
        _ = late.allDecoded()
        #expect(late.moreInput() == [])
        #expect(late.restartAfterDrain)
        #expect(late.runningChanged(false, queueStopping: false) == [.restartRun])
        #expect(!late.inputDone && !late.stopIssued && !late.queueStarted && late.phase == .running)
    }

    @Test func stopEndsNowAndOnce() {
        var m = Self.running()
        #expect(m.stop() == [.disposeQueue, .publish(.finished), .complete])
        #expect(m.stop() == [])
    }

    @Test func aSourceFailurePlaysOutThenFails() {
        var m = Self.running()
        _ = m.itemOpened(Self.b)
        #expect(m.itemFailed(Self.b, Self.boom) == [.publishItem(id: Self.b, .failed(Self.boom)), .finishQueue])
        #expect(m.failure == Self.boom)
        // A second failure keeps the first.
        let other = AudioPlayerError(.sink, underlying: AudioQueueError(.sinkError, "gone"))
        #expect(m.failed(other, playOut: true) == [.disposeQueue, .publish(.failed(Self.boom)), .complete])
        #expect(m.state == .failed(Self.boom))
        // An item that failed stays failed.
        #expect(m.itemHeard(Self.b) == [])
    }

    @Test func aSinkFailureEndsAtOnce() {
        var m = Self.running()
        let gone = AudioPlayerError(.sink, underlying: AudioQueueError(.sinkError, "gone"))
        #expect(m.failed(gone, playOut: false) == [.disposeQueue, .publish(.failed(gone)), .complete])
    }

    @Test func aSeekRestartsFeedingAndPriming() {
        var m = Self.running()
        _ = m.buffered(enough: true, ahead: 3, waiting: false, buffering: Self.buffering)
        _ = m.inputFinished(hasQueue: true)
        _ = m.allDecoded()
        #expect(m.seekBegan() == [.publish(.seeking)])
        #expect(!m.queueStarted && !m.inputDone && !m.stopIssued)
        #expect(m.buffered(enough: true, ahead: 1, waiting: false, buffering: Self.buffering) == [.startQueue(play: true)])
        #expect(m.runningChanged(true, queueStopping: false) == [.publish(.playing)])
        var ended = Self.running()
        _ = ended.stop()
        #expect(ended.seekBegan() == [])
    }

    /// The input and the queue's run are one enum each: every transition moves them together.
    @Test func theInputAndTheRunMoveAsEnums() {
        var m = Self.running()
        #expect(m.input == .feeding && m.run == .notStarted && !m.soundRunning)
        #expect(m.buffered(enough: true, ahead: 3, waiting: false, buffering: Self.buffering) == [.startQueue(play: true)])
        #expect(m.run == .started(underrun: false))
        #expect(m.runningChanged(true, queueStopping: false) == [.publish(.playing)])
        #expect(m.soundRunning)
        #expect(m.underran() == [.pauseQueue, .publish(.buffering)])
        #expect(m.run == .started(underrun: true) && !m.soundRunning)
        #expect(m.buffered(enough: false, ahead: 2, waiting: false, buffering: Self.buffering) == [.resumeQueue, .publish(.playing)])
        #expect(m.run == .started(underrun: false))
        #expect(m.inputFinished(hasQueue: true) == [.finishQueue])
        #expect(m.input == .done)
        #expect(m.allDecoded() == [.stopQueue])
        #expect(m.input == .stopIssued(restartAfterDrain: false))
        #expect(m.moreInput() == [])
        #expect(m.input == .stopIssued(restartAfterDrain: true))
        #expect(m.runningChanged(false, queueStopping: false) == [.restartRun])
        #expect(m.input == .feeding && m.run == .notStarted && !m.soundRunning)
    }

    /// The pause or stop a seek makes is reported by the queue later: that report is not the end,
    /// even when the input was all fed again meanwhile; the next one is.
    @Test func aSeeksStopReportIsNotTheEnd() {
        var m = Self.running()
        _ = m.buffered(enough: true, ahead: 3, waiting: false, buffering: Self.buffering)
        _ = m.runningChanged(true, queueStopping: false)
        #expect(m.seekBegan(queueWillReportStop: true) == [.publish(.seeking)])
        #expect(m.staleStops == 1 && !m.soundRunning)
        #expect(m.inputFinished(hasQueue: true) == [.finishQueue])
        #expect(m.runningChanged(false, queueStopping: false) == [])
        #expect(m.phase == .running && m.staleStops == 0)
        _ = m.buffered(enough: true, ahead: 3, waiting: false, buffering: Self.buffering)
        _ = m.runningChanged(true, queueStopping: false)
        _ = m.allDecoded()
        #expect(m.runningChanged(false, queueStopping: false) == [.publish(.finished), .complete])
    }

    /// `stop()` before `play()` began: the begin ends at once.
    @Test func aStopRequestedBeforeTheBeginEndsIt() {
        var m = PlayerMachine(items: [Self.a])
        m.requestStop()
        #expect(m.stopRequested)
        #expect(m.begin(hasItems: true) == [.publish(.finished), .complete])
    }

    @Test func itemsAddedAndRemoved() {
        var m = Self.running()
        let c = AudioPlayerItem(name: "c") { _ in throw AudioQueueError(.invalidParameter, "unused") }.id
        #expect(m.itemAdded(c) == [.publishItem(id: c, .queued)])
        #expect(m.itemRemoved(c) == [.publishItem(id: c, .removed)])
        #expect(m.itemRemoved(c) == [])
        #expect(m.itemStates[c] == nil)
        _ = m.itemHeard(Self.a)
        #expect(m.itemRemoved(Self.a) == [.publishItem(id: Self.a, .removed)])
        #expect(m.heard == nil)
    }

    @Test func replayStartsAfresh() {
        var m = Self.running()
        _ = m.stop()
        m.reset(items: [Self.a, Self.b])
        #expect(m == PlayerMachine(items: [Self.a, Self.b]))
        #expect(m.begin(hasItems: true) == [.openItem])
    }
}
