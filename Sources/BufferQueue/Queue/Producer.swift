/// A buffer waiting to be decoded, as validated by `enqueue`.
struct PendingBuffer {
    let buffer: AudioQueueBuffer
    /// The byte size when it was enqueued (the buffer cannot change while queued; this is the
    /// size that was validated).
    let byteSize: Int
    let packets: [AudioPacketDescription]
    let trimStart: Int
    let trimEnd: Int
    let volume: Float?
    let pan: Float?
    let playRate: Float?
    let pitch: Float?
    let gain: Float?
    /// Timeline frame of the first untrimmed frame; nil = right after the previous buffer.
    let startTime: Int?
}

enum PendingEntry {
    case buffer(PendingBuffer)
    /// End of a run of buffers: drain the decoder and clear its state.
    case flush
    /// Like flush, then mark the end for an asynchronous stop.
    case endOfStream
    /// The buffers after it are another stream: drain the decoder (without a render-side flush)
    /// and decode what follows with a new decoder for this format and cookie.
    case newStream(AudioStreamDescription, magicCookie: [UInt8]?)
}

/// What the producer hands back for delivery on the caller's executor.
enum Outgoing {
    case buffer(AudioQueueBuffer)
    case event(AudioQueueEvent)
}

/// The producer end of the queue: decodes pending buffers, applies trims and schedule gaps and
/// writes frames and markers into the render stage's rings. Used only under the queue's pipeline lock.
///
/// Decoded frames are attributed to buffers by the frame counts the buffers declare (FIFO
/// "accounts"), not by which decode call produced them, so a decoder that holds a frame back
/// (libmpg123 waits for the next frame header at the start of a stream) still trims exactly.
/// When the decoder's output rate is a multiple of the stream's (SBR found in-band), declared
/// counts are scaled by it.
///
/// The state a render call reads and writes on every call is marked `@exclusivity(unchecked)`:
/// the pipeline lock already makes each access exclusive, and no method here lends one of these
/// properties out (`inout`, a `with…` closure) while calling code that could reach it again, so
/// the runtime's per-access bookkeeping (a thread-local access set) only cost time: about 15 % of
/// a profile of small offline render calls (issue 17, `Docs/Performance.md`).
final class Producer {
    /// The format of the buffers being decoded (changes at a ``PendingEntry/newStream(_:magicCookie:)``).
    @exclusivity(unchecked) private(set) var format: AudioStreamDescription
    let registry: AudioDecoderRegistry
    var magicCookie: [UInt8]?
    private(set) var decoder: (any AudioDecoder)? {
        didSet { directDecoder = decoder as? DirectPacketDecoding }
    }
    /// ``decoder`` when it converts packets directly (cast once, not per step).
    @exclusivity(unchecked) private var directDecoder: (any DirectPacketDecoding)?
    let stage: RenderStage
    private let staging: DecodedAudio
    @exclusivity(unchecked) private var stagingRead = 0

    /// A buffer's share of the decoded stream.
    private struct Account {
        let bufferID: Int
        /// Frames the buffer declares (in the stream's units); nil = unknown until decoded.
        var declared: Int?
        /// Frames to drop at the start, including what an earlier buffer's start trim carried over.
        var trimStart: Int
        let trimEnd: Int
        let startTime: Int?
        let volume: Float?
        let pan: Float?
        let playRate: Float?
        let pitch: Float?
        let gain: Float?
        /// Output frames of this account seen so far.
        var consumed = 0
        /// Its gap and parameters have been written.
        var started = false
        /// Output frames produced while its own packets were decoded (for unknown declarations).
        var producedDuringDecode = 0
        var excessReported = false
    }
    /// The open accounts, oldest first: a ring over memory of its own.
    ///
    /// An account opens and closes on the rendering thread of an offline render, and an array of
    /// this struct would allocate there in unoptimized builds (`first`, `removeFirst`, and the
    /// element accessors are generic calls whose frames are heap-allocated) and, once emptied, on
    /// regrowth in any build. The ring grows only past the most accounts ever open at once.
    private final class AccountLine {
        private var storage: UnsafeMutablePointer<Account>
        private var capacity: Int
        private var head = 0
        private(set) var count = 0

        init(capacity: Int = 64) {
            self.capacity = capacity
            storage = .allocate(capacity: capacity)
        }

        deinit {
            removeAll()
            storage.deallocate()
        }

        var isEmpty: Bool { count == 0 }
        var first: Account? { count > 0 ? at(0).pointee : nil }
        var last: Account? { count > 0 ? at(count - 1).pointee : nil }

        /// The account `index` places after the oldest.
        func at(_ index: Int) -> UnsafeMutablePointer<Account> { storage + (head + index) % capacity }

        func append(_ account: Account) {
            if count == capacity { grow() }
            (storage + (head + count) % capacity).initialize(to: account)
            count += 1
        }

        func removeFirst() {
            guard count > 0 else { return }
            (storage + head).deinitialize(count: 1)
            head = (head + 1) % capacity
            count -= 1
        }

        func removeAll() {
            while count > 0 { removeFirst() }
            head = 0
        }

        private func grow() {
            let larger = UnsafeMutablePointer<Account>.allocate(capacity: capacity * 2)
            for index in 0..<count { (larger + index).moveInitialize(from: at(index), count: 1) }
            storage.deallocate()
            storage = larger
            capacity *= 2
            head = 0
        }
    }
    private let accounts = AccountLine()
    /// Start-trim frames that exceeded a buffer (compressed formats): dropped from the next ones.
    @exclusivity(unchecked) private var carriedTrim = 0

    @exclusivity(unchecked) private var current: PendingBuffer?
    @exclusivity(unchecked) private var nextPacket = 0
    @exclusivity(unchecked) private var ended = false
    @exclusivity(unchecked) private var endPending = false

    /// The channel count and rate of what is written to the ring.
    @exclusivity(unchecked) private(set) var ringFormat: AudioStreamDescription
    /// Timeline frame of the next frame written to the ring.
    @exclusivity(unchecked) private(set) var writeTimeline = 0
    private(set) var epoch = 0
    private(set) var lastConverterError: AudioQueueError?
    /// Buffers and events to deliver, in order.
    @exclusivity(unchecked) var outbox: [Outgoing] = []
    /// Set when no decoder could be made; reported by `prime` and as an event.
    private(set) var decoderFailure: AudioQueueError?

    /// Frames an offline render took straight from enqueued buffers, past the ring (diagnostics).
    @exclusivity(unchecked) private(set) var framesRenderedStraight = 0

    /// Float scratch space for offline rendering.
    var offlineScratch: [Float] = []

    /// Frames of PCM decoded per step, so that one huge buffer does not stall the ring.
    private let pcmChunkFrames = 4096
    /// The most frames decoded ahead (``AudioQueue/decodeBufferFrames``): the ring behind them
    /// may be larger (it is rounded up, and holds two channels' worth for mono).
    let decodeBufferFrames: Int
    /// Samples the ring takes now, within ``decodeBufferFrames``.
    private var room: Int {
        let limit = decodeBufferFrames * max(ringFormat.channelsPerFrame, 1)
        return max(min(stage.ring.writable, limit - stage.ring.readable), 0)
    }

    init(format: AudioStreamDescription, registry: AudioDecoderRegistry, stage: RenderStage, decodeBufferFrames: Int) {
        self.decodeBufferFrames = decodeBufferFrames
        self.format = format
        self.registry = registry
        self.stage = stage
        ringFormat = .float32(sampleRate: format.sampleRate, channels: format.channelsPerFrame)
        staging = DecodedAudio(format: ringFormat)
        // Room for the buffers and events of many steps, so that the outbox does not grow while
        // an offline render steps on its rendering thread.
        outbox.reserveCapacity(64)
    }

    /// The decoded format as far as known.
    var outputFormat: AudioStreamDescription { decoder?.outputFormat ?? ringFormat }

    /// Whether there is anything left to produce from what was taken so far.
    var isIdle: Bool { current == nil && accounts.isEmpty && stagingRead >= staging.sampleCount }

    /// Output frames per declared frame: 2 when the decoder found SBR the stream did not declare.
    private var scale: Int {
        let ratio = staging.format.sampleRate / format.sampleRate
        return ratio >= 1.9 && ratio <= 2.1 ? 2 : 1
    }

    func makeDecoderIfNeeded() throws -> any AudioDecoder {
        if let decoder { return decoder }
        do {
            let made = try registry.makeDecoder(for: format, magicCookie: magicCookie)
            decoder = made
            decoderFailure = nil
            staging.changeFormat(made.outputFormat)
            return made
        } catch let error as AudioQueueError {
            decoderFailure = error
            throw error
        } catch {
            let wrapped = AudioQueueError(.codecNotFound, "cannot make a decoder for \(format.formatID): \(error)")
            decoderFailure = wrapped
            throw wrapped
        }
    }

    /// Produces as much as the rings take, or until `readySamples` samples are ready to render.
    /// With `yieldingStraight` (an offline render that reads the stage) it also stops where the
    /// current buffer's frames can go straight to the render's output (``renderStraight(into:frames:gains:)``).
    /// `next` supplies pending entries in order. Returns true when it wrote anything or changed state.
    @discardableResult
    func pump(readySamples: Int? = nil, yieldingStraight: Bool = false, next: () -> PendingEntry?) -> Bool {
        var progressed = false
        while true {
            if let readySamples, stage.ring.readable >= readySamples { return progressed }
            // Decoded frames that can go straight to the output are left staged for it: the
            // current buffer's next packets first, up to what the render still needs (at most
            // 4096 frames, which stay in cache), so that it takes them a few packets at a time.
            if yieldingStraight, let staged = stagedStraightFrames() {
                let wanted = min((readySamples ?? 0) / max(ringFormat.channelsPerFrame, 1), 4096)
                if staged >= wanted || current == nil { return progressed }
                guard step(waitForRoom: true) else { return progressed }
                progressed = true
                continue
            }
            let (emitted, blocked) = emitStaged()
            progressed = progressed || emitted
            if blocked { return progressed }
            if runEndPending && stagingRead >= staging.sampleCount {
                // The run is over and everything the decoder gave is written: close what is left.
                accounts.removeAll()
                runEndPending = false
                dropCarriedTrim()
            }
            if let next = pendingStream, !runEndPending {
                // The previous stream is drained and written: decode what follows with a new decoder.
                format = next.format
                magicCookie = next.cookie
                decoder = nil
                decoderFailure = nil
                pendingStream = nil
                progressed = true
            }
            if flushMarkerPending && !runEndPending {
                // After the run's last frame: a converter on the render path drains there.
                if stage.markers.isFull { return progressed }
                pushMarker(RenderMarker(position: 0, epoch: epoch, kind: .flush))
                flushMarkerPending = false
                progressed = true
            }
            if pendingStream != nil { continue }
            if yieldingStraight && straightReady { return progressed }
            if current != nil {
                guard step(waitForRoom: yieldingStraight) else { return progressed }
                progressed = true
                continue
            }
            if ended { return progressed }
            if endPending {
                if stage.markers.isFull { return progressed }
                pushMarker(RenderMarker(position: 0, epoch: epoch, kind: .endOfStream))
                endPending = false
                ended = true
                return true
            }
            guard let entry = next() else { return progressed }
            progressed = true
            switch entry {
            case .buffer(let pending): begin(pending)
            case .flush:
                finishRun()
                flushMarkerPending = true
            case .endOfStream:
                finishRun()
                endPending = true
            case .newStream(let newFormat, let cookie):
                finishRun()
                pendingStream = (newFormat, cookie)
            }
        }
    }

    /// Starts decoding a buffer and opens its account.
    private func begin(_ pending: PendingBuffer) {
        current = pending
        nextPacket = 0
        if decoder == nil {
            do { _ = try makeDecoderIfNeeded() } catch let error as AudioQueueError {
                report(error)
            } catch {}
        }
        let trimStart = pending.trimStart + carriedTrim
        carriedTrim = 0
        accounts.append(Account(bufferID: pending.buffer.id, declared: declaredFrames(pending), trimStart: trimStart,
                                trimEnd: pending.trimEnd, startTime: pending.startTime, volume: pending.volume, pan: pending.pan,
                                playRate: pending.playRate, pitch: pending.pitch, gain: pending.gain))
    }

    /// Frames a buffer declares in the stream's units, nil when a packet does not say.
    private func declaredFrames(_ pending: PendingBuffer) -> Int? {
        if pending.packets.isEmpty {
            guard format.bytesPerPacket > 0, format.framesPerPacket > 0 else { return nil }
            return pending.byteSize / format.bytesPerPacket * format.framesPerPacket
        }
        var total = 0
        // By index: an array's iterator is generic code that allocates in unoptimized builds.
        for index in 0..<pending.packets.count {
            let packet = pending.packets[index]
            let frames = packet.variableFramesInPacket > 0 ? packet.variableFramesInPacket : format.framesPerPacket
            if frames == 0 { return nil }
            total += frames
        }
        return total
    }

    /// How many of the current buffer's next frames may be converted without the staging block: a
    /// direct decoder, nothing staged, the buffer's account the only one and inside its kept
    /// frames (the account is begun here when it needs no gap and no parameter marker). Returns nil
    /// when the staged path must take them. (It reads `current` in place: no copy of the entry.)
    private func directFrames() -> Int? {
        guard let byteSize = current?.byteSize, current?.packets.isEmpty == true, directDecoder != nil,
              stagingRead >= staging.sampleCount, staging.firstFormatChange == nil, accounts.count == 1,
              let account = accounts.first, scale == 1, staging.format == ringFormat, let kept = plainFramesLeft(account) else { return nil }
        accounts.at(0).pointee.started = true
        let packetsLeft = byteSize / max(format.bytesPerPacket, 1) - nextPacket
        return min(packetsLeft * max(format.framesPerPacket, 1), kept)
    }

    /// The kept frames left of `account` when its next frames may go out as they are: past its
    /// start trim, before its end trim, and — before its first frame — with no schedule gap and
    /// no parameter marker to write first (the staged path writes those). nil otherwise.
    private func plainFramesLeft(_ account: Account) -> Int? {
        guard let total = total(account) else { return nil }
        let keepEnd = total - account.trimEnd
        guard account.consumed >= account.trimStart, account.consumed < keepEnd else { return nil }
        if !account.started {
            if let start = account.startTime, start > writeTimeline { return nil }
            guard account.volume == nil, account.pan == nil, account.playRate == nil, account.pitch == nil, account.gain == nil else { return nil }
        }
        return keepEnd - account.consumed
    }

    /// Converts up to `frames` frames (whole packets) of the current buffer into `destination`
    /// (scaled by `gains`, see ``DirectPacketDecoding``) and counts them; finishes the buffer at
    /// its last packet. Only after ``directFrames()`` allowed them. Returns the frames written.
    private func convertDirect(frames: Int, into destination: UnsafeMutablePointer<Float>,
                               gains: (left: Float, right: Float)? = nil) -> Int {
        let packetBytes = max(format.bytesPerPacket, 1), framesPerPacket = max(format.framesPerPacket, 1)
        let packets = frames / framesPerPacket
        guard packets > 0, let byteSize = current?.byteSize, let base = current?.buffer.storage.baseAddress,
              let direct = directDecoder else { return 0 }
        let slice = UnsafeRawBufferPointer(start: base + nextPacket * packetBytes, count: packets * packetBytes)
        let written = direct.decode(packets: slice, into: destination, gains: gains)
        nextPacket += packets
        accounts.at(0).pointee.consumed += written
        accounts.at(0).pointee.producedDuringDecode += written
        writeTimeline += written
        if nextPacket >= byteSize / packetBytes, let buffer = current?.buffer {
            current = nil
            outbox.append(.buffer(buffer))
        }
        return written
    }

    /// What ``stepDirect(waitForRoom:)`` did.
    private enum DirectStep { case wrote, noRoom, notDirect }

    /// Converts the current buffer's next packets straight into the ring when nothing needs the
    /// staging block (see ``directFrames()``). A packet that would straddle the ring's wrap goes
    /// through the staging block (`.notDirect`), and so does one the ring has no room for, so that
    /// the buffer is done with and goes back early, unless `waitForRoom` (an offline render that
    /// takes frames straight: decoding ahead there would only add a copy; `.noRoom`).
    private func stepDirect(waitForRoom: Bool) -> DirectStep {
        guard let allowed = directFrames() else { return .notDirect }
        let channels = max(ringFormat.channelsPerFrame, 1)
        let packetSamples = max(format.framesPerPacket, 1) * channels
        if room < packetSamples { return waitForRoom ? .noRoom : .notDirect }
        let space = stage.ring.contiguousWritable(upTo: min(min(pcmChunkFrames, allowed) * channels, room / channels * channels))
        guard space.count >= packetSamples, let destination = space.baseAddress else { return .notDirect }
        let written = convertDirect(frames: space.count / channels, into: destination)
        stage.ring.commitWrite(count: written * channels)
        return .wrote
    }

    /// How many of the current buffer's next frames can go straight to an offline render's output:
    /// the ring is empty, no marker waits, and ``directFrames()`` allows them (nil: none now).
    private func straightFrames() -> Int? {
        guard stage.ring.readable == 0, stage.markers.peek() == nil else { return nil }
        return directFrames()
    }

    private var straightReady: Bool { straightFrames() != nil || stagedStraightFrames() != nil }

    /// How many decoded frames waiting in the staging block can go straight to an offline
    /// render's output, past the ring: the ring is empty, no marker waits, and the next staged
    /// frames are kept frames of a buffer that needs no gap and no parameter marker before them,
    /// in the ring's format (nil: none now; ``emitStaged()`` takes them).
    private func stagedStraightFrames() -> Int? {
        guard stage.ring.readable == 0, stage.markers.peek() == nil, stagingRead < staging.sampleCount,
              staging.format == ringFormat, let account = accounts.first, let kept = plainFramesLeft(account) else { return nil }
        var end = staging.sampleCount
        if let change = staging.firstFormatChange {
            guard change.sampleOffset > stagingRead else { return nil }
            end = min(end, change.sampleOffset)
        }
        let frames = min((end - stagingRead) / max(ringFormat.channelsPerFrame, 1), kept)
        return frames > 0 ? frames : nil
    }

    /// Offline render: converts up to `frames` frames of the current buffer straight into the
    /// render's output, or copies decoded frames from the staging block there, past the ring
    /// (which is empty, so order and positions are kept), scaled by `gains` (mono or stereo).
    /// Only for the stage's reader holding the pipeline lock. Returns the frames written (0: not
    /// possible now).
    func renderStraight(into destination: UnsafeMutablePointer<Float>, frames: Int, gains: (left: Float, right: Float)?) -> Int {
        if let allowed = straightFrames() {
            let written = convertDirect(frames: min(frames, allowed), into: destination, gains: gains)
            framesRenderedStraight += written
            return written
        }
        guard let allowed = stagedStraightFrames() else { return 0 }
        let count = min(frames, allowed), channels = max(ringFormat.channelsPerFrame, 1)
        let source = staging.samples + stagingRead
        if let (left, right) = gains {
            if channels == 1 {
                for i in 0..<count { destination[i] = source[i] * left }
            } else {
                for i in 0..<count {
                    destination[2 * i] = source[2 * i] * left
                    destination[2 * i + 1] = source[2 * i + 1] * right
                }
            }
        } else {
            destination.update(from: source, count: count * channels)
        }
        accounts.at(0).pointee.started = true
        accounts.at(0).pointee.consumed += count
        stagingRead += count * channels
        writeTimeline += count
        framesRenderedStraight += count
        if stagingRead >= staging.sampleCount && staging.firstFormatChange == nil {
            // All read (a format change at its end stays for ``emitStaged()``).
            staging.removeAll()
            stagingRead = 0
        }
        return count
    }

    /// Decodes the next packet (or PCM chunk) of the current buffer, or finishes the buffer.
    /// Returns false when it could do nothing until the ring has room (only with `waitForRoom`,
    /// see ``stepDirect(waitForRoom:)``).
    private func step(waitForRoom: Bool) -> Bool {
        switch stepDirect(waitForRoom: waitForRoom) {
        case .wrote: return true
        case .noRoom: return false
        case .notDirect: break
        }
        guard let pending = current else { return false }
        let bytes = pending.buffer.storage.baseAddress.map { UnsafeRawBufferPointer(start: $0, count: pending.byteSize) }
            ?? UnsafeRawBufferPointer(start: nil, count: 0)
        let before = staging.frameCount
        var finished = false
        if let decoder {
            do {
                if pending.packets.isEmpty {
                    // Constant bytes per packet: decode in chunks.
                    let packetBytes = max(format.bytesPerPacket, 1)
                    let packetsTotal = bytes.count / packetBytes
                    let perChunk = decoder.decodesPacketRuns ? max(pcmChunkFrames / max(format.framesPerPacket, 1), 1) : 1
                    let count = min(perChunk, packetsTotal - nextPacket)
                    if count > 0 {
                        let slice = UnsafeRawBufferPointer(rebasing: bytes[(nextPacket * packetBytes)..<((nextPacket + count) * packetBytes)])
                        try decoder.decode(packet: slice, frames: count * max(format.framesPerPacket, 1), into: staging)
                        nextPacket += count
                    }
                    finished = nextPacket >= packetsTotal
                } else {
                    let packet = pending.packets[nextPacket]
                    let slice = UnsafeRawBufferPointer(rebasing: bytes[packet.startOffset..<(packet.startOffset + packet.dataByteSize)])
                    let frames = packet.variableFramesInPacket > 0 ? packet.variableFramesInPacket : format.framesPerPacket
                    try decoder.decode(packet: slice, frames: frames, into: staging)
                    nextPacket += 1
                    finished = nextPacket >= pending.packets.count
                }
            } catch {
                let wrapped = error as? AudioQueueError
                    ?? AudioQueueError(.decoderError, "decoding buffer \(pending.buffer.id) failed: \(error)")
                report(wrapped)
                // The decoder cannot go on: drop the rest of this buffer and start clean.
                decoder.reset()
                finished = true
            }
        } else {
            finished = true
        }
        for error in staging.takeErrors() { report(error) }
        if !accounts.isEmpty { accounts.at(accounts.count - 1).pointee.producedDuringDecode += staging.frameCount - before }
        if finished {
            // A buffer whose packets did not declare their frames ends with what its decoding produced.
            if accounts.last?.declared == nil, !accounts.isEmpty {
                let produced = accounts.at(accounts.count - 1).pointee.producedDuringDecode
                accounts.at(accounts.count - 1).pointee.declared = max(produced / scale, 0)
            }
            current = nil
            outbox.append(.buffer(pending.buffer))
        }
        return true
    }

    /// Writes staged frames to the ring, account by account: trimmed frames are dropped, each
    /// buffer's gap and parameters go in before its first kept frame, and format changes are
    /// placed at their sample positions. Returns (wrote anything, blocked by a full ring).
    private func emitStaged() -> (Bool, Bool) {
        var wrote = false
        while true {
            if let change = staging.firstFormatChange, change.sampleOffset <= stagingRead {
                if stage.markers.isFull { return (wrote, true) }
                if change.format != ringFormat {
                    ringFormat = change.format
                    // A sink that keeps its format gets the converter for this one made now, here.
                    stage.prepareNodes(sampleRate: change.format.sampleRate, channels: change.format.channelsPerFrame, epoch: epoch)
                    pushMarker(RenderMarker(position: 0, epoch: epoch, kind: .formatChange,
                                            sampleRate: change.format.sampleRate, channels: change.format.channelsPerFrame))
                    outbox.append(.event(.formatChanged(change.format)))
                }
                staging.removeFormatChange()
                wrote = true
                continue
            }
            let channels = max(ringFormat.channelsPerFrame, 1)
            var end = staging.sampleCount
            if let change = staging.firstFormatChange { end = min(end, change.sampleOffset) }
            let unread = max(end - stagingRead, 0) / channels
            // An account whose frames are all seen is done. One that kept none still holds its
            // place on the timeline: the silence up to its start time was scheduled, and plays.
            if let account = accounts.first, let total = total(account), account.consumed >= total {
                if !account.started, let start = account.startTime, start > writeTimeline {
                    guard writeSilence(until: start, channels: channels) else { return (wrote, true) }
                    wrote = true
                    continue
                }
                finishAccount()
                wrote = true
                continue
            }
            if unread == 0 { break }
            guard var account = accounts.first, let total = total(account) else {
                if accounts.first != nil { break }   // its size is not known until its decoding ends
                // Frames no buffer declared (a decoder's tail): they play as they are.
                let written = write(frames: unread, channels: channels)
                if written == 0 { return (wrote, true) }
                wrote = true
                continue
            }
            if account.trimEnd == 0 && account.trimStart > total {
                // A start trim longer than the buffer (priming spanning several one-packet
                // buffers): the buffer is dropped whole and the rest is trimmed from the next.
                carry(account.trimStart - total)
                accounts.at(0).pointee.trimStart = total
                continue
            }
            let keepStart = account.trimStart, keepEnd = total - account.trimEnd
            if keepStart > keepEnd && !account.excessReported {
                accounts.at(0).pointee.excessReported = true
                report(AudioQueueError(.invalidTrim,
                    "buffer \(account.bufferID) decoded to \(total) frames but asked to trim \(account.trimStart) at the start and \(account.trimEnd) at the end; its audio was removed"))
            }
            let available = min(unread, total - account.consumed)
            if account.consumed < keepStart || account.consumed >= keepEnd {
                // Trimmed frames: drop them.
                let limit = account.consumed < keepStart ? min(keepStart, total) : total
                let drop = min(available, limit - account.consumed)
                stagingRead += drop * channels
                accounts.at(0).pointee.consumed += drop
                wrote = true
                continue
            }
            if !account.started {
                if let start = account.startTime, start > writeTimeline {
                    guard writeSilence(until: start, channels: channels) else { return (wrote, true) }
                    wrote = true
                    continue
                }
                if account.volume != nil || account.pan != nil || account.playRate != nil || account.pitch != nil || account.gain != nil {
                    if stage.markers.isFull { return (wrote, true) }
                    pushMarker(RenderMarker(position: 0, epoch: epoch, kind: .bufferStart, volume: account.volume ?? .nan, pan: account.pan ?? .nan,
                                            rate: account.playRate ?? .nan, pitch: account.pitch ?? .nan, gain: account.gain ?? .nan))
                }
                account.started = true
                accounts.at(0).pointee.started = true
            }
            let written = write(frames: min(available, keepEnd - account.consumed), channels: channels)
            if written == 0 { return (wrote, true) }
            accounts.at(0).pointee.consumed += written
            wrote = true
        }
        if stagingRead >= staging.sampleCount {
            // (Format changes up to here were taken above and errors are taken after each decode,
            // so an empty block that nothing was read from has nothing to clear.)
            if stagingRead > 0 || staging.sampleCount > 0 {
                staging.removeAll()
                stagingRead = 0
            }
        } else if stagingRead > 65536 && stagingRead * 2 > staging.sampleCount {
            staging.compact(from: stagingRead)
            stagingRead = 0
        }
        return (wrote, false)
    }

    /// Output frames of an account, once known.
    private func total(_ account: Account) -> Int? { account.declared.map { $0 * scale } }

    private func finishAccount() {
        accounts.removeFirst()
    }

    /// A run ended with start-trim frames still to drop: there was nothing left to trim.
    private func dropCarriedTrim() {
        guard carriedTrim > 0 else { return }
        report(AudioQueueError(.invalidTrim,
            "a start trim ran \(carriedTrim) frames past the last buffer before a flush or stop; there was nothing left to trim"))
        carriedTrim = 0
    }

    /// Moves start-trim frames on to the next buffer: one already begun, or the next to begin.
    private func carry(_ frames: Int) {
        if accounts.count > 1 { accounts.at(1).pointee.trimStart += frames } else { carriedTrim += frames }
    }

    /// Writes the silence of a scheduled gap up to timeline frame `start`, as much as the ring
    /// takes; false when it took none.
    private func writeSilence(until start: Int, channels: Int) -> Bool {
        let gap = min(start - writeTimeline, room / channels)
        guard gap > 0 else { return false }
        stage.ring.writeZeros(count: gap * channels)
        writeTimeline += gap
        return true
    }

    /// Writes up to `frames` staged frames; returns how many the ring took.
    private func write(frames: Int, channels: Int) -> Int {
        let count = min(frames, room / channels)
        guard count > 0 else { return 0 }
        stage.ring.write(staging.samples + stagingRead, count: count * channels)
        stagingRead += count * channels
        writeTimeline += count
        return count
    }

    private func pushMarker(_ marker: RenderMarker) {
        var placed = marker
        placed.position = stage.ring.writePosition
        placed.epoch = epoch
        stage.markers.push(placed)
    }

    /// Drains the decoder at the end of a run and clears its state. Accounts the decoder did not
    /// fill (it produced fewer frames than declared) are closed: nothing waits for them.
    private func finishRun() {
        if let decoder {
            do { try decoder.finish(into: staging) } catch {
                report(error as? AudioQueueError ?? AudioQueueError(.decoderError, "finishing the decoder failed: \(error)"))
            }
            for error in staging.takeErrors() { report(error) }
            decoder.reset()
        }
        runEndPending = true
    }

    /// A new stream waits for the previous one to be drained and written.
    @exclusivity(unchecked) private var pendingStream: (format: AudioStreamDescription, cookie: [UInt8]?)?
    /// Set by a flush: once the staged frames are written, unfilled accounts are closed.
    @exclusivity(unchecked) private var runEndPending = false
    /// Set by a flush: a flush marker follows the run's last frame.
    @exclusivity(unchecked) private var flushMarkerPending = false

    /// Keeps a problem found outside decoding (the render path's resampler) as the last converter
    /// error; the caller delivers the event.
    func recordConverterError(_ error: AudioQueueError) { lastConverterError = error }

    private func report(_ error: AudioQueueError) {
        lastConverterError = error
        outbox.append(.event(.error(error)))
    }

    /// Throws away everything not yet rendered and publishes the discard to the render stage
    /// (the caller applies it as the stage's reader). Returns the buffer that was being decoded,
    /// if any (it goes back to the caller first).
    func discard(timelineContinuesAt timeline: Int) -> AudioQueueBuffer? {
        let interrupted = current?.buffer
        current = nil
        accounts.removeAll()
        carriedTrim = 0
        runEndPending = false
        flushMarkerPending = false
        ended = false
        endPending = false
        if let next = pendingStream {
            // The stream switch was taken already: what comes next is of the new format.
            format = next.format
            magicCookie = next.cookie
            decoder = nil
            pendingStream = nil
        }
        staging.removeAll()
        stagingRead = 0
        decoder?.reset()
        epoch += 1
        stage.discardPosition.store(stage.ring.writePosition, ordering: .releasing)
        stage.discardTimeline.store(timeline, ordering: .releasing)
        stage.discardEpoch.store(epoch, ordering: .releasing)
        writeTimeline = timeline
        return interrupted
    }

    /// After an asynchronous stop has played out: take entries again, from timeline zero.
    func restartAfterEnd() {
        ended = false
        writeTimeline = 0
    }

    /// A stream switch that a reset removed from the input before it was taken: it still applies
    /// to what is enqueued next.
    func adoptStream(_ newFormat: AudioStreamDescription, magicCookie cookie: [UInt8]?) {
        format = newFormat
        magicCookie = cookie
        decoder = nil
        decoderFailure = nil
        pendingStream = nil
    }

    /// Replaces the magic cookie; the next buffer gets a decoder made with it.
    func setMagicCookie(_ cookie: [UInt8]?) {
        magicCookie = cookie
        decoder = nil
        decoderFailure = nil
    }
}
