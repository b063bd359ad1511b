import BufferQueue

/// Where each item plays on the player's queue timeline, as a plain value: the marks of the items
/// enqueued (the timeline frame of each one's first kept frame), the end of what is enqueued, and
/// the item being fed before any of it is heard. The player keeps it under its lock and asks it
/// what is heard at a timeline frame; nothing here touches a queue, so it is tested as a value.
struct PlayerTimeline: Equatable {
    /// An item's place on the timeline.
    struct Mark: Equatable {
        /// Timeline frame where this item's first kept frame plays.
        var start: Int64
        var index: Int
        var id: AudioPlayerItem.ID
        /// Position in the item of that frame, in timeline frames (nonzero after a seek).
        var offset: Int64
        /// The rate of the timeline's frames for this item.
        var rate: Double
        /// The item's length in timeline frames (0: unknown).
        var frames: Int64
        var estimated: Bool
        var title: String?
        /// Its source can seek (not a live stream).
        var seekable: Bool
        /// The gain the player applied to the item (linear).
        var gain: Float = 1
        /// Where its first frame plays on the output: frames handed to the sink before it.
        var outputStart: Int64 = 0
        /// Its first frame was reported heard.
        var heard = false
    }

    /// The item being fed, before its first frame is enqueued: its duration and rate once its
    /// source is ready, and the position it starts at.
    struct Feeding: Equatable {
        var index: Int
        var id: AudioPlayerItem.ID
        var rate: Double
        var frames: Int64
        var estimated: Bool
        /// Seconds into the item.
        var start: Double
    }

    /// The items enqueued whose marks may still be needed, oldest first.
    private(set) var marks: [Mark] = []
    /// The timeline frame after the last one enqueued.
    private(set) var enqueuedEnd: Int64 = 0
    var feeding: Feeding?
    /// The last place whose output frame is known: a timeline frame, the frames handed to the sink
    /// before it, and the rate of the timeline's frames from there (nil: the next mark's).
    private(set) var anchor = Anchor(timeline: 0, output: 0, rate: nil)
    struct Anchor: Equatable {
        var timeline: Int64
        var output: Int64
        var rate: Double?
    }

    /// Everything enqueued was dropped: the timeline goes on from `frame` (0 after a stop), which
    /// is where `output` frames had been handed to the sink.
    mutating func restart(at frame: Int64, output: Int64 = 0) {
        marks.removeAll()
        enqueuedEnd = frame
        anchor = Anchor(timeline: frame, output: output, rate: nil)
    }

    /// Frames up to `end` are enqueued; items heard to the end by `heard` lose their marks once
    /// reported (the list stays a few long).
    mutating func enqueued(upTo end: Int64, heard: Int64) {
        enqueuedEnd = end
        while marks.count > 1 && marks[0].heard && marks[1].start <= heard { marks.removeFirst() }
    }

    /// Adds an item's mark; its output frame follows from the last anchor at `outputRate` (the
    /// sink's rate: the timeline counts each item's frames at its own rate).
    mutating func add(_ mark: Mark, outputRate: Double? = nil) {
        var mark = mark
        let rate = anchor.rate ?? mark.rate
        let frames = mark.start - anchor.timeline
        let scale = (outputRate ?? rate) / rate
        mark.outputStart = anchor.output + (scale == 1 ? frames : Int64((Double(frames) * scale).rounded()))
        anchor = Anchor(timeline: mark.start, output: mark.outputStart, rate: mark.rate)
        marks.append(mark)
    }

    /// The marks first heard by `heard` (reported from now on), in order, and the next one to come.
    mutating func reach(by heard: Int64) -> (reached: [Mark], next: Mark?) {
        var reached: [Mark] = []
        for index in marks.indices where !marks[index].heard && marks[index].start <= heard {
            marks[index].heard = true
            reached.append(marks[index])
        }
        return (reached, marks.first { $0.start > heard })
    }

    /// The item heard at timeline frame `heard` (the first enqueued one before any is heard).
    func mark(heardAt heard: Int64) -> Mark? {
        marks.last { $0.start <= heard } ?? marks.first
    }

    /// Whether the item at list `index` can seek (nil: no mark of it).
    func seekable(index: Int?) -> Bool? {
        marks.last { $0.index == index }?.seekable
    }

    /// Seconds enqueued ahead of `heard` (at the last item's rate, else `rate`).
    func secondsAhead(of heard: Int64, rate: Double) -> Double {
        Double(enqueuedEnd - heard) / (marks.last?.rate ?? rate)
    }

    /// The list changed: an item was inserted at `index` (the ones from there move up one).
    mutating func itemInserted(at index: Int) {
        for i in marks.indices where marks[i].index >= index { marks[i].index += 1 }
        if let feeding, feeding.index >= index { self.feeding?.index = feeding.index + 1 }
    }

    /// The item at `index` left the list (the ones after it move down one).
    mutating func itemRemoved(at index: Int) {
        for i in marks.indices where marks[i].index > index { marks[i].index -= 1 }
    }

    /// The status at timeline frame `heard` (nil: no queue yet), with the streams' titles.
    func status(heard: Int64?, titles: [AudioPlayerItem.ID: String], outputFormat: AudioStreamDescription?) -> AudioPlayer.Status {
        guard let heard, !marks.isEmpty else {
            let duration = feeding.map { Double($0.frames) / $0.rate } ?? 0
            return AudioPlayer.Status(itemIndex: feeding?.index, itemID: feeding?.id, title: nil, position: feeding?.start ?? 0,
                                      duration: duration, durationIsEstimated: feeding?.estimated ?? false, buffered: 0,
                                      outputFormat: outputFormat)
        }
        let mark = mark(heardAt: heard)
        let position = mark.map { Double(heard - $0.start + $0.offset) / $0.rate } ?? 0
        let title = mark.flatMap { titles[$0.id] ?? $0.title }
        let rate = mark?.rate ?? feeding?.rate ?? 44100
        let duration = mark.map { Double($0.frames) / $0.rate } ?? feeding.map { Double($0.frames) / $0.rate } ?? 0
        return AudioPlayer.Status(itemIndex: mark?.index, itemID: mark?.id, title: title, position: max(position, 0),
                                  duration: duration, durationIsEstimated: mark?.estimated ?? feeding?.estimated ?? false,
                                  buffered: max(Double(enqueuedEnd - heard) / rate, 0), outputFormat: outputFormat)
    }
}
