/// A buffer waiting to be decoded, as validated by `enqueue`.
struct PendingBuffer {
    let buffer: AudioQueueBuffer
    let packets: [AudioPacketDescription]
    let trimStart: Int
    let trimEnd: Int
    let volume: Float?
    let pan: Float?
    /// Timeline frame of the first untrimmed frame; nil = right after the previous buffer.
    let startTime: Int?
}

enum PendingEntry {
    case buffer(PendingBuffer)
    /// End of a run of buffers: drain the decoder and clear its state.
    case flush
    /// Like flush, then mark the end for an asynchronous stop.
    case endOfStream
}

/// What the producer hands back for delivery on the caller's executor.
enum Outgoing {
    case buffer(AudioQueueBuffer)
    case event(AudioQueueEvent)
}

/// The producer end of the queue: decodes pending buffers, applies trims and schedule gaps and
/// writes frames and markers into the render stage's rings. Used only under the queue's pipeline lock.
final class Producer {
    let format: AudioStreamDescription
    let registry: AudioDecoderRegistry
    var magicCookie: [UInt8]?
    private(set) var decoder: (any AudioDecoder)?
    let stage: RenderStage
    private let staging: DecodedAudio
    private var stagingRead = 0
    /// Samples of the staging area that may be written to the ring (the rest is held back for a
    /// trim at the end of the current buffer).
    private var emitLimit = 0

    private var current: PendingBuffer?
    private var nextPacket = 0
    private var trimStartLeft = 0
    private var decodedFrames = 0
    private var gapFrames = 0
    private var ended = false
    private var endPending = false

    /// The channel count and rate of what is written to the ring.
    private(set) var ringFormat: AudioStreamDescription
    /// Timeline frame of the next frame written to the ring.
    private(set) var writeTimeline = 0
    private(set) var epoch = 0
    private(set) var lastConverterError: AudioQueueError?
    /// Buffers and events to deliver, in order.
    var outbox: [Outgoing] = []
    /// Set when no decoder could be made; reported by `prime` and as an event.
    private(set) var decoderFailure: AudioQueueError?

    /// Float scratch space for offline rendering.
    var offlineScratch: [Float] = []

    /// Frames of PCM decoded per step, so that one huge buffer does not stall the ring.
    private let pcmChunkFrames = 4096

    init(format: AudioStreamDescription, registry: AudioDecoderRegistry, stage: RenderStage) {
        self.format = format
        self.registry = registry
        self.stage = stage
        ringFormat = .float32(sampleRate: format.sampleRate, channels: format.channelsPerFrame)
        staging = DecodedAudio(format: ringFormat)
    }

    /// The decoded format as far as known.
    var outputFormat: AudioStreamDescription { decoder?.outputFormat ?? ringFormat }

    /// Whether there is anything left to produce from what was taken so far.
    var isIdle: Bool { current == nil && gapFrames == 0 && stagingRead >= staging.sampleCount }

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

    /// Produces as much as the rings take. `next` supplies pending entries in order.
    /// Returns true when it wrote anything or changed state.
    @discardableResult
    func pump(next: () -> PendingEntry?) -> Bool {
        var progressed = false
        while true {
            let (emitted, blocked) = emitStaged()
            progressed = progressed || emitted
            if blocked { return progressed }
            if gapFrames > 0 {
                let channels = ringFormat.channelsPerFrame
                let frames = min(gapFrames, stage.ring.writable / channels)
                if frames > 0 {
                    stage.ring.writeZeros(count: frames * channels)
                    gapFrames -= frames
                    writeTimeline += frames
                    progressed = true
                }
                if gapFrames > 0 { return progressed }
            }
            if current != nil {
                step()
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
            case .flush: finishRun()
            case .endOfStream:
                finishRun()
                endPending = true
            }
        }
    }

    /// Starts a buffer: schedules its gap and queues the marker that applies its parameters.
    private func begin(_ pending: PendingBuffer) {
        current = pending
        nextPacket = 0
        trimStartLeft = pending.trimStart
        decodedFrames = 0
        staging.removeAll()
        stagingRead = 0
        emitLimit = 0
        if let start = pending.startTime, start > writeTimeline { gapFrames = start - writeTimeline }
        if decoder == nil {
            do { _ = try makeDecoderIfNeeded() } catch let error as AudioQueueError {
                report(error)
            } catch {}
        }
        let volume = pending.volume ?? .nan, pan = pending.pan ?? .nan
        if !volume.isNaN || !pan.isNaN {
            // Placed when the gap has been written: see `emitStaged`.
            pendingParameterMarker = RenderMarker(position: 0, epoch: epoch, kind: .bufferStart, volume: volume, pan: pan)
        }
    }

    private var pendingParameterMarker: RenderMarker?

    /// Decodes the next packet (or PCM chunk) of the current buffer, or finishes the buffer.
    private func step() {
        guard let pending = current else { return }
        let bytes = pending.buffer.storage.baseAddress.map { UnsafeRawBufferPointer(start: $0, count: pending.buffer.byteSize) }
            ?? UnsafeRawBufferPointer(start: nil, count: 0)
        let before = staging.sampleCount
        var finished = false
        if let decoder {
            do {
                if pending.packets.isEmpty {
                    // Constant bytes per packet: decode in chunks.
                    let packetBytes = max(format.bytesPerPacket, 1)
                    let packetsTotal = bytes.count / packetBytes
                    let perChunk = format.isLinearPCM ? pcmChunkFrames : 1
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
        let newFrames = framesIn(samplesFrom: before)
        decodedFrames += newFrames
        if trimStartLeft > 0 {
            let drop = min(trimStartLeft, newFrames)
            stagingRead += drop * staging.format.channelsPerFrame
            trimStartLeft -= drop
        }
        let holdBack = pending.trimEnd * staging.format.channelsPerFrame
        emitLimit = max(stagingRead, staging.sampleCount - holdBack)
        if finished { finishBuffer(pending) }
    }

    private func framesIn(samplesFrom start: Int) -> Int {
        (staging.sampleCount - start) / max(staging.format.channelsPerFrame, 1)
    }

    private func finishBuffer(_ pending: PendingBuffer) {
        let channels = max(staging.format.channelsPerFrame, 1)
        let unread = (staging.sampleCount - stagingRead) / channels
        if trimStartLeft > 0 || unread < pending.trimEnd {
            report(AudioQueueError(.invalidTrim,
                "buffer \(pending.buffer.id) decoded to \(decodedFrames) frames but asked to trim \(pending.trimStart) at the start and \(pending.trimEnd) at the end; its audio was removed"))
            staging.truncate(toSampleCount: stagingRead)
        } else {
            staging.truncate(toSampleCount: staging.sampleCount - pending.trimEnd * channels)
        }
        emitLimit = staging.sampleCount
        current = nil
        outbox.append(.buffer(pending.buffer))
    }

    /// Writes staged samples to the ring up to the emit limit, placing format-change and parameter
    /// markers at their sample positions. Returns (wrote anything, blocked by a full ring).
    private func emitStaged() -> (Bool, Bool) {
        var wrote = false
        if gapFrames == 0, let marker = pendingParameterMarker {
            if stage.markers.isFull { return (wrote, true) }
            pushMarker(marker)
            pendingParameterMarker = nil
            wrote = true
        }
        while true {
            if let change = staging.formatChanges.first, change.sampleOffset <= stagingRead {
                if stage.markers.isFull { return (wrote, true) }
                if change.format != ringFormat {
                    ringFormat = change.format
                    pushMarker(RenderMarker(position: 0, epoch: epoch, kind: .formatChange,
                                            sampleRate: change.format.sampleRate, channels: change.format.channelsPerFrame))
                    outbox.append(.event(.formatChanged(change.format)))
                }
                staging.removeFormatChange()
                wrote = true
                continue
            }
            var end = emitLimit
            if let change = staging.formatChanges.first { end = min(end, change.sampleOffset) }
            let channels = ringFormat.channelsPerFrame
            let available = max(end - stagingRead, 0)
            if available == 0 { break }
            let samples = min(available, stage.ring.writable) / channels * channels
            if samples == 0 { return (wrote, true) }
            stage.ring.write(staging.samples + stagingRead, count: samples)
            stagingRead += samples
            writeTimeline += samples / channels
            wrote = true
        }
        if stagingRead >= staging.sampleCount {
            staging.removeAll()
            stagingRead = 0
            emitLimit = 0
        } else if stagingRead > 65536 && stagingRead * 2 > staging.sampleCount {
            staging.compact(from: stagingRead)
            emitLimit -= stagingRead
            stagingRead = 0
        }
        return (wrote, false)
    }

    private func pushMarker(_ marker: RenderMarker) {
        var placed = marker
        placed.position = stage.ring.writePosition
        placed.epoch = epoch
        stage.markers.push(placed)
    }

    /// Drains the decoder at the end of a run and clears its state.
    private func finishRun() {
        guard let decoder else { return }
        do { try decoder.finish(into: staging) } catch {
            report(error as? AudioQueueError ?? AudioQueueError(.decoderError, "finishing the decoder failed: \(error)"))
        }
        for error in staging.takeErrors() { report(error) }
        decoder.reset()
        emitLimit = staging.sampleCount
    }

    private func report(_ error: AudioQueueError) {
        lastConverterError = error
        outbox.append(.event(.error(error)))
    }

    /// Throws away everything not yet rendered and publishes the discard to the render stage.
    /// Returns the buffer that was being decoded, if any (it goes back to the caller first).
    func discard(timelineContinuesAt timeline: Int) -> AudioQueueBuffer? {
        let interrupted = current?.buffer
        current = nil
        pendingParameterMarker = nil
        gapFrames = 0
        ended = false
        endPending = false
        staging.removeAll()
        stagingRead = 0
        emitLimit = 0
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

    /// Replaces the magic cookie; the next buffer gets a decoder made with it.
    func setMagicCookie(_ cookie: [UInt8]?) {
        magicCookie = cookie
        decoder = nil
        decoderFailure = nil
    }
}
