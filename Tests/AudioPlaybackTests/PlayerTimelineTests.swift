import Testing
@testable import AudioPlayback
import BufferQueue

/// Where each item plays on the queue's timeline, as a value: every change, with what is heard.
@Suite struct PlayerTimelineTests {
    static let a = AudioPlayerItem(name: "a") { _ in throw AudioQueueError(.invalidParameter, "unused") }.id
    static let b = AudioPlayerItem(name: "b") { _ in throw AudioQueueError(.invalidParameter, "unused") }.id
    static let c = AudioPlayerItem(name: "c") { _ in throw AudioQueueError(.invalidParameter, "unused") }.id

    static func mark(_ id: AudioPlayerItem.ID, index: Int, start: Int64, offset: Int64 = 0, rate: Double = 1000,
                     seekable: Bool = true) -> PlayerTimeline.Mark {
        .init(start: start, index: index, id: id, offset: offset, rate: rate, frames: 5000, estimated: false, title: nil, seekable: seekable)
    }

    @Test func beforeAnyMarkTheItemBeingFedIsTheStatus() {
        var t = PlayerTimeline()
        t.feeding = .init(index: 2, id: Self.c, rate: 1000, frames: 3000, estimated: true, start: 1.5)
        let status = t.status(heard: nil, titles: [:], outputFormat: nil)
        #expect(status.itemIndex == 2 && status.itemID == Self.c && status.position == 1.5 && status.duration == 3 && status.durationIsEstimated)
        #expect(status.buffered == 0)
    }

    @Test func marksSayWhatIsHeardAndWhatComesNext() {
        var t = PlayerTimeline()
        t.add(Self.mark(Self.a, index: 0, start: 0, offset: 500))
        t.enqueued(upTo: 4000, heard: 0)
        t.add(Self.mark(Self.b, index: 1, start: 4000))
        t.enqueued(upTo: 6000, heard: 100)
        // Frame 1 000 of the timeline is 1.5 s into a (it started 500 frames in).
        let status = t.status(heard: 1000, titles: [Self.a: "A title"], outputFormat: nil)
        #expect(status.itemIndex == 0 && status.position == 1.5 && status.title == "A title" && status.buffered == 5)
        // Each mark is reached once, in order, and the next one to come is known.
        let first = t.reach(by: 1000)
        #expect(first.reached.map(\.id) == [Self.a] && first.next?.id == Self.b)
        #expect(t.reach(by: 1000).reached.isEmpty)
        let second = t.reach(by: 4000)
        #expect(second.reached.map(\.id) == [Self.b] && second.next == nil)
        #expect(t.mark(heardAt: 4500)?.id == Self.b)
        #expect(t.secondsAhead(of: 4500, rate: 44100) == 1.5)
        // Once b is heard, a's mark goes.
        t.enqueued(upTo: 7000, heard: 4001)
        #expect(t.marks.map(\.id) == [Self.b])
    }

    /// An unpaced sink plays past several items before any is reported: their marks stay until
    /// they are, and all are reached at once, in order.
    @Test func marksStayUntilTheyAreReported() {
        var t = PlayerTimeline()
        t.add(Self.mark(Self.a, index: 0, start: 0))
        t.add(Self.mark(Self.b, index: 1, start: 4000))
        t.add(Self.mark(Self.c, index: 2, start: 6000))
        t.enqueued(upTo: 9000, heard: 8000)
        #expect(t.marks.count == 3)
        #expect(t.reach(by: 9000).reached.map(\.id) == [Self.a, Self.b, Self.c])
        t.enqueued(upTo: 9000, heard: 9000)
        #expect(t.marks.map(\.id) == [Self.c])
    }

    /// Each item's first frame on the output: the timeline counts an item's frames at its rate,
    /// the output at the sink's.
    @Test func outputFramesFollowEachItemsRate() {
        var t = PlayerTimeline()
        t.restart(at: 0, output: 100)
        t.add(Self.mark(Self.a, index: 0, start: 0, rate: 1000), outputRate: 2000)
        t.add(Self.mark(Self.b, index: 1, start: 4000, rate: 500), outputRate: 2000)
        t.add(Self.mark(Self.c, index: 2, start: 5000, rate: 2000), outputRate: 2000)
        let expected: [Int64] = [100, 8_100, 12_100]   // a's 4 000 frames at 1 kHz are 8 000 at 2 kHz; b's 1 000 at 500 Hz, 4 000
        #expect(t.marks.map(\.outputStart) == expected)
    }

    @Test func aRestartDropsTheMarks() {
        var t = PlayerTimeline()
        t.add(Self.mark(Self.a, index: 0, start: 0))
        t.enqueued(upTo: 3000, heard: 0)
        t.restart(at: 1200)
        #expect(t.marks.isEmpty && t.enqueuedEnd == 1200)
        #expect(t.status(heard: 1300, titles: [:], outputFormat: nil).buffered == 0)
    }

    @Test func insertsAndRemovalsMoveTheIndices() {
        var t = PlayerTimeline()
        t.add(Self.mark(Self.a, index: 0, start: 0))
        t.add(Self.mark(Self.b, index: 1, start: 4000, seekable: false))
        t.feeding = .init(index: 2, id: Self.c, rate: 1000, frames: 0, estimated: false, start: 0)
        t.itemInserted(at: 1)
        #expect(t.marks.map(\.index) == [0, 2] && t.feeding?.index == 3)
        #expect(t.seekable(index: 2) == false && t.seekable(index: 0) == true && t.seekable(index: 7) == nil)
        t.itemRemoved(at: 1)
        #expect(t.marks.map(\.index) == [0, 1])
    }
}
