import AudioFileStream
import BufferQueue
import Dispatch

/// The feeding: items opened, packets enqueued into free buffers, the queue made and started. All on `work`.
extension AudioPlayer {
    // MARK: feeding (on `work`)

    func begin() {
        work.async { [self] in
            if record != nil && outputFormat == .itemFormat && shared.withLock({ $0.machine.phase == .ready }) {
                // The recording has one format; with the sink reopened per item it would change under it.
                return fail(AudioPlayerError(.request, underlying: AudioQueueError(.invalidParameter,
                    "record needs one output format: use .firstItem or .fixed, not .itemFormat")), playOut: false)
            }
            if feed.join != nil && outputFormat == .itemFormat {
                return fail(AudioPlayerError(.request, underlying: AudioQueueError(.invalidParameter,
                    "a crossfade mixes two items into one output format: use .firstItem or .fixed, not .itemFormat")), playOut: false)
            }
            let hasItems = shared.withLock { !$0.items.isEmpty }
            act { $0.begin(hasItems: hasItems) }
        }
    }

    /// Opens the item at `itemIndex`, `nextStart` seconds in; a failure to open ends the input there.
    func openItem(fadingOut: Bool = false) {
        let item = shared.withLock { s in s.items.indices.contains(feed.itemIndex) ? s.items[feed.itemIndex] : nil }
        guard let item else { return finishInput() }
        let seconds = feed.nextStart
        feed.nextStart = 0
        do {
            let source = try item.open(context(forItem: item.id))
            let neighbours = replayGain?.mode == .auto ? albumNeighbours(of: feed.itemIndex) : []
            if let join = feed.join {
                feed.feeder = crossfadeFeeder(source, item: item, seconds: seconds, join: join, fadingOut: fadingOut, neighbours: neighbours)
            } else {
                let packets = PacketFeeder(source: source, startSeconds: seconds, registry: decoders)
                // Every item sets its gain (the one before it stays in force otherwise); its tags'
                // gain once the source knows them.
                let (gain, settings, ownKey) = (item.gain, replayGain, item.albumKey)
                packets.parametersAtStart = { source in
                    AudioQueueParameters(gain: Self.gain(gain, settings, source, amongItsAlbum: Self.amongItsAlbum(ownKey, source, neighbours)))
                }
                feed.feeder = packets
            }
            feed.feedingID = item.id
            feed.needsNewStream = queue != nil
            feed.openedReported = false
            shared.withLock { $0.timeline.feeding = nil }
            act { $0.itemOpened(item.id) }
            // A file is ready now; a stream once its header came (``noteSource(_:)``).
            if source.isReady { reportOpened(source) }
        } catch {
            feed.feedingID = item.id
            feed.openedReported = true
            let failure = AudioPlayerError(.open, itemIndex: feed.itemIndex, itemName: item.name, underlying: error)
            if skipFailedItem(failure) { return }
            fail(failure, item: item.id)
        }
        pump()
    }

    /// The item being fed was opened and its source is ready: its format and tags, then the
    /// problems found opening it (once per item).
    func reportOpened(_ source: any PacketSource) {
        guard !feed.openedReported, let id = feed.feedingID else { return }
        feed.openedReported = true
        emit(.itemOpened(index: feed.itemIndex, id: id, format: source.format, metadata: source.metadata))
        for warning in source.warnings { emit(.itemWarning(index: feed.itemIndex, id: id, warning)) }
    }

    /// An item's gain: its own times what its tags say for `settings` (at most 16).
    static func gain(_ own: Float, _ settings: ReplayGainSettings?, _ source: any PacketSource, amongItsAlbum: Bool = false) -> Float {
        guard let settings, settings.mode != .off else { return own }
        let tags = source.metadata.flatMap { ReplayGain(metadata: $0, format: source.format.formatID) }
        return min(own * settings.linearGain(tags, amongItsAlbum: amongItsAlbum), 16)
    }

    /// The album keys of the items before and after `index` in the list, as far as they can be
    /// read ahead (ReplayGain's `auto` mode). On `work`.
    func albumNeighbours(of index: Int) -> [String] {
        let around = shared.withLock { s in [index - 1, index + 1].filter { s.items.indices.contains($0) }.map { s.items[$0].albumKey } }
        return around.compactMap { $0?() }
    }

    /// Whether an item is among its album: its key (read ahead, else its source's tags) is a neighbour's.
    static func amongItsAlbum(_ own: (@Sendable () -> String?)?, _ source: any PacketSource, _ neighbours: [String]) -> Bool {
        guard !neighbours.isEmpty, let key = own?() ?? source.metadata?.albumKey else { return false }
        return neighbours.contains(key)
    }

    /// A crossfading item's feeder: decoded and converted to the output format (the first item's,
    /// or the fixed one); `fadingOut`: only its next D frames (the item heard, on a skip).
    func crossfadeFeeder(_ source: any PacketSource, item: AudioPlayerItem, seconds: Double, join: CrossfadeJoin,
                                 fadingOut: Bool, neighbours: [String] = []) -> CrossfadeItemFeeder {
        var target: (rate: Double, channels: Int)?
        if let format = join.format {
            target = (format.sampleRate, format.channelsPerFrame)
        } else if case .fixed(let rate, let channels) = outputFormat {
            target = (rate, channels)
        }
        let index = feed.itemIndex, id = item.id
        let (decoders, resamplers, engines) = (self.decoders, self.resamplers, timePitchEngines)
        // Decided once the source is ready (a stream's tags come with its header), before its first frame.
        let (own, settings, key) = (item.gain, replayGain, item.albumKey)
        let gain: (any PacketSource) -> Float = { source in
            Self.gain(own, settings, source, amongItsAlbum: Self.amongItsAlbum(key, source, neighbours))
        }
        return CrossfadeItemFeeder(source: source, join: join, gain: gain, limit: fadingOut ? Int64(join.frames) : nil, registry: decoders,
                                   hasNext: { [unowned self] in feed.itemIndex + 1 < shared.withLock { $0.items.count } || feed.loop + 1 < loops },
                                   shortened: { [unowned self] frames in
                                       emit(.crossfadeShortened(index: index, id: id, frames: frames, requested: join.frames))
                                   }) { source, frame in
            try PacketSourceRenderer(source: source, name: item.name, maximumPacketSize: source.maximumPacketSize,
                                     start: frame.map { .frame($0) } ?? .seconds(seconds), sampleRate: target?.rate, channels: target?.channels,
                                     registry: decoders, resamplers: resamplers, timePitchEngines: engines)
        }
    }

    /// After the last item of a crossfading player: what its join still holds is enqueued (true), if anything.
    /// `previous` is nil when the last item failed to open: the held frames are the item's before it.
    func crossfadeTail(after previous: (any ItemFeeding)?) -> Bool {
        guard let join = feed.join, join.heldFrames > 0, let source = previous?.source ?? join.heldSource else { return false }
        feed.feeder = CrossfadeItemFeeder(tailOf: source, join: join)
        return true
    }

    /// With ``AudioPlayerItemFailurePolicy/skip``, reports the item being fed as failed and goes on
    /// with the next one (true); false when the policy stops, or no item is being fed.
    func skipFailedItem(_ error: AudioPlayerError) -> Bool {
        guard onItemFailure == .skip, let id = feed.feedingID, shared.withLock({ $0.result == nil }) else { return false }
        // Nothing of a failed item's source is read again: its enqueued frames play, the next item follows.
        emit(.itemSkipped(index: feed.itemIndex, id: id, error))
        act { $0.itemSkipped(id, error) }
        if advance() {
            pump()
        } else if queue == nil {
            // Every item failed before any audio: that is no success; the first one's error says why.
            fail(shared.withLock { $0.machine.skipped } ?? error, playOut: false)
        } else {
            finishInput()
        }
        return true
    }

    /// Moves to the next item (or the next loop); false at the end.
    func advance() -> Bool {
        let previous = feed.feeder
        if let feeder = feed.feeder { feed.timelineBeforeItem += feeder.framesKept }
        feed.feeder = nil
        feed.feedingID = nil
        feed.itemIndex += 1
        let count = shared.withLock { $0.items.count }
        if feed.itemIndex >= count {
            feed.loop += 1
            guard feed.loop < loops else { return crossfadeTail(after: previous) }
            feed.itemIndex = 0
        }
        openItem()
        return feed.feeder != nil
    }

    /// Enqueues into free buffers until they are all in the queue, the source waits, or the input ends.
    func pump() {
        guard !shared.withLock({ $0.machine.inputDone }) else { return allDecodedIfSo() }
        do {
            while let feeder = feed.feeder {
                let source = feeder.source
                if queue == nil {
                    guard source.isReady else { return }
                    do { try makeQueue(for: source, feeder: feeder) } catch {
                        throw AudioPlayerError(.decode, itemIndex: feed.itemIndex, itemName: currentName, underlying: error)
                    }
                }
                guard let queue, let buffer = feed.free.last else { break }
                if feed.needsNewStream && feed.join == nil {
                    guard source.isReady else { return }
                    try queue.beginStream(format: source.format, magicCookie: source.magicCookie)
                    feed.needsNewStream = false
                }
                let before = feeder.framesKept
                let progress = try feeder.enqueueNext(buffer, on: queue)
                noteSource(feeder)
                if progress == .enqueued {
                    feed.free.removeLast()
                    noteEnqueued(feeder, before: before)
                }
                resolveSeeks()
                switch progress {
                case .enqueued:
                    break
                case .waiting:
                    evaluateBuffer(waiting: true)
                    return
                case .finished:
                    if feeder.isTail || !advance() { finishInput() }
                }
            }
        } catch {
            let failure = error as? AudioPlayerError ?? AudioPlayerError(.read, itemIndex: feed.itemIndex, itemName: currentName, underlying: error)
            if skipFailedItem(failure) { return }
            fail(failure, item: feed.feedingID)
            return
        }
        evaluateBuffer(waiting: false)
    }

    var currentName: String? { shared.withLock { s in s.items.indices.contains(feed.itemIndex) ? s.items[feed.itemIndex].name : nil } }

    /// The item being fed: its duration and rate, once its source is ready.
    func noteSource(_ feeder: any ItemFeeding) {
        guard let id = feed.feedingID, feeder.source.isReady else { return }
        let source = feeder.source
        if !feeder.isTail { reportOpened(source) }
        shared.withLock { s in
            let feeding = s.timeline.feeding
            guard feeding?.id != id || (feeder.started && feeding?.start == 0 && feeder.startFrame > 0) else { return }
            let duration = source.duration
            s.timeline.feeding = .init(index: feed.itemIndex, id: id, rate: source.format.sampleRate, frames: duration?.frames ?? 0,
                                       estimated: duration?.isEstimated ?? false, start: Double(feeder.startFrame) / source.format.sampleRate)
        }
    }

    /// Records where the item's first kept frame plays, once known.
    func noteEnqueued(_ feeder: any ItemFeeding, before: Int64) {
        let source = feeder.source
        let end = feed.timelineBeforeItem + feeder.framesKept
        let heard = queue?.currentTime().sampleTime ?? 0
        // The output's rate (an item's own when the sink follows each item's format).
        let outputRate = outputFormat == .itemFormat ? nil : queue?.sinkStreamFormat?.sampleRate
        let added = shared.withLock { s -> Bool in
            s.timeline.enqueued(upTo: end, heard: heard)
            guard before == 0 && feeder.framesKept > 0, let id = feed.feedingID else { return false }
            let duration = source.duration
            // On the timeline's frames (the output's when crossfading, each item's own otherwise).
            let scale = feeder.timelineRate / source.format.sampleRate
            func onTimeline(_ frames: Int64) -> Int64 { scale == 1 ? frames : Int64((Double(frames) * scale).rounded()) }
            s.timeline.add(.init(start: feed.timelineBeforeItem + feeder.leadFrames, index: feed.itemIndex, id: id, offset: onTimeline(feeder.startFrame),
                                rate: feeder.timelineRate, frames: onTimeline(duration?.frames ?? 0),
                                estimated: duration?.isEstimated ?? false, title: source.title, seekable: source.isSeekable,
                                gain: feeder.gain), outputRate: outputRate)
            return true
        }
        if added { scheduleHeardCheck() }
    }

    /// Seeks waiting for their position: answered once the feeder has planned its start.
    func resolveSeeks() {
        guard !feed.pendingSeeks.isEmpty, let feeder = feed.feeder, feeder.started else { return }
        feed.resolvePendingSeeks(with: .success(Double(feeder.startFrame) / feeder.source.format.sampleRate))
    }

    func makeQueue(for source: any PacketSource, feeder: any ItemFeeding) throws {
        let sinkFormat: AudioQueue.SinkFormat
        switch outputFormat {
        case .firstItem: sinkFormat = .keepFirst
        case .fixed(let rate, let channels): sinkFormat = .fixed(sampleRate: rate, channels: channels)
        case .itemFormat: sinkFormat = .followDecoded
        }
        // A crossfading player enqueues PCM of the output format, which its first item decided.
        let crossfading = try (feeder as? CrossfadeItemFeeder).map { feeder in
            try feeder.prepare()
            guard let format = feeder.outputFormat else { throw AudioQueueError(.invalidRunState, "the first item decided no output format") }
            return format
        }
        // Events come on `work` in one order with the output callbacks (not through an event
        // stream read by a task that hops back to `work` for each returned buffer).
        let origin = WeakReference<AudioQueue>()
        let made = try AudioQueue(format: crossfading ?? source.format,
                                  configuration: .init(sink: makeSink(), decodeBufferFrames: 65536, callbackQueue: work,
                                                       decoderRegistry: decoders, resamplerRegistry: resamplers,
                                                       timePitchRegistry: timePitchEngines, sinkFormat: sinkFormat,
                                                       eventHandler: { [weak self] event in
                                                           guard let self, let queue = origin.object else { return }
                                                           self.handle(event, from: queue)
                                                       })) { [weak self] _, buffer in
            // On `work`: the buffer is free again.
            guard let self else { return }
            self.feed.free.append(buffer)
            self.noteHeard()
            self.pump()
        }
        if crossfading == nil, let cookie = source.magicCookie { try made.setMagicCookie(cookie) }
        // The sink (and a recording) learn which speaker each channel is for.
        if let layout = source.channelLayout, layout.channelCount == source.format.channelsPerFrame, (try? made.setChannelLayout(layout)) != nil {
            shared.withLock { $0.channelLayout = layout }
        }
        let (volume, pan, metering) = shared.withLock { ($0.volume, $0.pan, $0.metering) }
        if volume != 1 || pan != 0 { try made.setParameters(.init(volume: volume, pan: pan)) }
        if metering { made.isLevelMeteringEnabled = true }
        if let timePitch {
            try made.setTimePitch(timePitch)
            let (rate, pitch) = shared.withLock { ($0.playRate, $0.pitch) }
            try made.setParameters(.init(playRate: rate, pitch: pitch))
        }
        // Compressed buffers hold about half a second. A crossfading player's buffers take the
        // PCM of its joins (a quarter of a second each: below the size from which an allocation
        // of the packets read is mapped afresh each time) and the packets of its items' middles.
        let bufferSeconds = crossfading == nil ? 0.5 : 0.25
        feed.bufferCount = max(4, Int((buffering.maximumSeconds / bufferSeconds).rounded(.up)))
        // 32 KiB holds many packets of most formats; a format with larger packets (multichannel
        // ALAC) gets buffers that hold two of its largest, or four times a decoded packet's PCM.
        let largest = source.maximumPacketSize ?? source.format.framesPerPacket * source.format.channelsPerFrame * 4
        let pcm = crossfading.map { Int(($0.sampleRate * bufferSeconds).rounded(.up)) * $0.channelsPerFrame * 4 } ?? 0
        let capacity = max(pcm, 1 << 15, 2 * min(max(largest, 0), 1 << 22))
        for _ in 0..<feed.bufferCount { feed.free.append(try made.allocateBuffer(capacity: capacity, packetDescriptionCapacity: 128)) }
        origin.object = made
        shared.withLock { $0.queue = made }
    }

    /// Starts playback once enough is enqueued (or nothing more will come for now).
    func evaluateBuffer(waiting: Bool) {
        guard let queue else { return }
        let ahead = shared.withLock { s -> Double in
            let heard = queue.currentTime().sampleTime
            return s.timeline.secondsAhead(of: heard, rate: queue.streamDescription.sampleRate)
        }
        // Every buffer in the queue (not merely none returned yet, as right after a seek), or
        // nothing more to come.
        let (inputDone, started) = shared.withLock { ($0.machine.inputDone, $0.machine.queueStarted) }
        if feed.free.isEmpty, ahead <= 0, !inputDone, !started {
            // Every buffer is in the queue and none holds a frame to hear (a long pre-roll after a
            // seek, all trimmed): the queue decodes them now, so they come back for more packets.
            // (Waiting for audible frames in them would wait forever.)
            _ = try? queue.prime()
        }
        let enough = (feed.free.isEmpty && ahead > 0) || inputDone
        act { $0.buffered(enough: enough, ahead: ahead, waiting: waiting, buffering: buffering) }
    }

    /// Primes the queue and starts it (`play`), installing the frame count and the caller's tap first.
    func startQueue(play: Bool) {
        guard let queue else { return }
        do {
            try queue.prime()
            // Counts (and hands to `record`, through a ring and a thread of its own) exactly
            // what goes to the sink.
            if !feed.tapInstalled {
                feed.tapInstalled = true
                let handed = framesHanded, box = recorderBox, meter = loudnessSlot
                // An observer, not a tap: the caller's processing taps keep their places.
                let format = try queue.setOutputObserver { output, frames in
                    box.object?.push(output, frames: frames)
                    meter.object?.measure(output, frames: frames)
                    handed.frames.add(Int64(frames), ordering: .relaxed)
                }
                // Set before the first start, so before the first render.
                if let record { box.set(SiphonRecorder(format: format, record: record)) }
                feed.observedFormat = format
                startLoudnessMeter()
                // The caller's effects, in order at each position (an equaliser and a meter together).
                for effect in configuration.effects { try queue.addProcessingTap(effect.position, callback: effect.callback) }
            }
            if play { try queue.start() }
        } catch {
            fail(AudioPlayerError(.sink, underlying: error), playOut: false)
        }
    }

    func handle(_ event: AudioQueueEvent, from source: AudioQueue) {
        guard source === queue else { return }
        switch event {
        case .error(let error) where error.code == .sinkError:
            fail(AudioPlayerError(.sink, underlying: error), playOut: false)
        case .underrun:
            // A stream that has not caught up: hold until enough is enqueued again.
            act { $0.underran() }
            schedulePositionTicks()
        case .runningChanged(let running):
            // What was heard by the end is reported before the end (an unpaced sink's run is over
            // before any clock would have said).
            if !running { noteHeard() }
            act { $0.runningChanged(running, queueStopping: source.isStopping) }
            if soundRunning { scheduleHeardCheck() }
            schedulePositionTicks()
        default:
            break
        }
    }
}
