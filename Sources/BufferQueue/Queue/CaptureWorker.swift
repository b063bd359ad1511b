/// The input queue's worker state: takes frames out of the capture ring, converts them when the
/// source runs at another rate or channel count, and writes them into the caller's buffers in the
/// queue's sample format. Used only on the queue's work queue: the queue holds it in a
/// ``QueueBound``, which checks so at every access.
final class CaptureWorker {
    enum Outgoing {
        case filled(AudioQueueBuffer, AudioCapturedFrames, [AudioLevelMeter]?)
        case overrun(Int, Int64)
        case error(AudioQueueError)
    }

    static let chunkFrames = 4096

    let format: AudioStreamDescription
    let layout: PCMSampleLayout
    private(set) var target: AudioCaptureTarget?
    private(set) var sourceFormat: AudioStreamDescription?
    private var converter: AudioConverter?
    private var converterFinished = false
    private var scratch: UnsafeMutablePointer<Float>?
    private var staging: DecodedAudio
    private var stagingOffset = 0
    private var pendingGap = 0
    private(set) var current: AudioQueueBuffer?
    private var currentFill = 0
    private var currentStart = 0
    /// Timeline position (queue frames) of the next frame placed in a buffer.
    private var timeline = 0
    var metering = false
    private var sumSquares: [Double]
    private var peaks: [Float]
    var sourceEnded = false
    /// Compressed recording: the encoder the frames go through, the packets not yet in a buffer,
    /// and what the buffer being filled holds.
    let encoder: AudioEncodingConverter?
    private let packets = EncodedPackets()
    private var encoderFinished = false
    private var currentDescriptions: [AudioPacketDescription] = []
    private var currentBytes = 0
    private var currentPacketFrames = 0
    /// Frames of packets handed back so far (the compressed timeline).
    private var packetTimeline = 0
    /// Frames of encoded packets dropped (no buffer at a stop, or a reset): those after the last
    /// packet handed back cut the stream's end; the others are holes inside it.
    private var droppedAtEnd = 0
    private var droppedInside = 0
    /// Frames after which capture ends as if the source had (nil: no limit).
    let frameLimit: Int?
    private var limitReached: Bool { frameLimit.map { timeline >= $0 } ?? false }

    init(format: AudioStreamDescription, layout: PCMSampleLayout, encoder: AudioEncodingConverter? = nil, frameLimit: Int? = nil) {
        self.format = format
        self.layout = layout
        self.encoder = encoder
        self.frameLimit = frameLimit
        staging = DecodedAudio(format: .float32(sampleRate: format.sampleRate, channels: format.channelsPerFrame))
        sumSquares = Array(repeating: 0, count: format.channelsPerFrame)
        peaks = Array(repeating: 0, count: format.channelsPerFrame)
    }

    deinit { scratch?.deallocate() }

    func open(target: AudioCaptureTarget, sourceFormat: AudioStreamDescription, configuration: AudioInputQueue.Configuration) throws {
        if sourceFormat.sampleRate != format.sampleRate || sourceFormat.channelsPerFrame != format.channelsPerFrame {
            converter = try AudioConverter(from: sourceFormat, to: format, quality: configuration.converterQuality,
                                           registry: configuration.resamplerRegistry)
        } else {
            converter = nil
        }
        scratch?.deallocate()
        scratch = .allocate(capacity: Self.chunkFrames * sourceFormat.channelsPerFrame)
        self.target = target
        self.sourceFormat = sourceFormat
        converterFinished = false
        staging.truncate(toSampleCount: 0)
        stagingOffset = 0
        pendingGap = 0
        timeline = 0
        packetTimeline = 0
        droppedAtEnd = 0
        droppedInside = 0
        // A new recording: the encoder's counts start again (it was finished by the last stop).
        encoder?.reset()
        encoderFinished = false
        packets.removeAll()
        sourceEnded = false
    }

    /// Forgets the source. Returns the buffer being filled when it holds nothing (it goes back to
    /// the queue's list).
    func close() -> AudioQueueBuffer? {
        target = nil
        converter = nil
        sourceEnded = false
        staging.truncate(toSampleCount: 0)
        stagingOffset = 0
        pendingGap = 0
        defer { current = nil }
        return currentFill == 0 ? current : nil
    }

    /// A compressed recording's gapless numbers for the packets handed back: the encoder's, less
    /// what was dropped. A cut end loses the last packet's padding first, then valid frames; a
    /// hole inside loses valid frames.
    var encodingTotals: AudioEncodingTotals? {
        guard var totals = encoder?.totals else { return nil }
        let padding = min(droppedAtEnd, totals.remainderFrames)
        totals.remainderFrames -= padding
        totals.validFrames = max(totals.validFrames - Int64(droppedAtEnd - padding + droppedInside), 0)
        return totals
    }

    /// Queue frames the source has captured (or lost) since the start.
    var capturedOutputFrames: Int {
        guard let target, let sourceFormat else { return 0 }
        let captured = target.ring.framesCaptured
        return converter == nil ? captured : Int((Double(captured) * format.sampleRate / sourceFormat.sampleRate).rounded())
    }

    /// Whether nothing captured is waiting anywhere.
    var isDrained: Bool {
        guard let target else { return true }
        return (target.ring.isEmpty || limitReached) && stagingAvailable == 0 && pendingGap == 0 && currentFill == 0
            && packets.isEmpty && currentBytes == 0 && (encoder == nil || encoderFinished)
    }

    private var stagingAvailable: Int { (staging.sampleCount - stagingOffset) / format.channelsPerFrame }

    /// Moves what is captured into buffers. With `finishing` (the source no longer writes) it also
    /// ends the converter's stream, hands back the buffer being filled even if short, and reports
    /// frames no buffer could take as an overrun.
    func run(takeBuffer: () -> AudioQueueBuffer?, into out: inout [Outgoing], finishing: Bool = false) {
        guard let target, let scratch else { return }
        let ring = target.ring
        let channels = format.channelsPerFrame
        var unplaced = 0
        // Frames no buffer can take are dropped only when stopping; at the source's end they wait
        // for the caller's buffers like any others.
        let ending = finishing
        loop: while true {
            if encoder != nil && !packets.isEmpty {
                guard ensureCurrent(takeBuffer) else {
                    if ending {
                        unplaced += packets.frameCount
                        droppedAtEnd += packets.frameCount
                        packets.removeAll()
                        continue
                    }
                    break
                }
                fillPackets(into: &out)
                continue
            }
            if stagingAvailable > 0 {
                guard ensureCurrent(takeBuffer) else {
                    if ending {
                        unplaced += stagingAvailable
                        stagingOffset = staging.sampleCount
                        continue
                    }
                    break
                }
                let take = min(stagingAvailable, room)
                staging.withUnsafeSamples { samples in
                    if let base = samples.baseAddress { place(base + stagingOffset, frames: take, into: &out) }
                }
                stagingOffset += take * channels
                if stagingOffset == staging.sampleCount {
                    staging.truncate(toSampleCount: 0)
                    stagingOffset = 0
                }
                continue
            }
            if pendingGap > 0 {
                if let encoder {
                    // A compressed stream has no gaps: the lost frames are coded as silence, so
                    // its timeline stays the capture's.
                    out.append(.overrun(pendingGap, Int64(timeline)))
                    var silence = [Float](repeating: 0, count: min(pendingGap, Self.chunkFrames) * channels)
                    var left = frameLimit.map { min(pendingGap, max($0 - timeline, 0)) } ?? pendingGap
                    while left > 0 {
                        let count = min(left, Self.chunkFrames)
                        if silence.count < count * channels { silence = [Float](repeating: 0, count: count * channels) }
                        do { try silence.withUnsafeBufferPointer { try encoder.convert(floats: UnsafeBufferPointer(rebasing: $0[0..<(count * channels)]), into: packets) } } catch {
                            out.append(.error(error as? AudioQueueError ?? AudioQueueError(.decoderError, "the encoder failed: \(error)")))
                        }
                        left -= count
                        timeline += count
                    }
                    pendingGap = 0
                    continue
                }
                deliverCurrent(into: &out)
                out.append(.overrun(pendingGap, Int64(timeline)))
                timeline += pendingGap
                pendingGap = 0
                continue
            }
            switch limitReached ? .empty(ended: true) : ring.next() {
            case .gap(let lost):
                if let converter, let sourceFormat {
                    finishConverter(converter, into: &out)
                    converterFinished = false
                    pendingGap = Int((Double(lost) * format.sampleRate / sourceFormat.sampleRate).rounded())
                } else {
                    pendingGap = lost
                }
            case .frames(let available):
                if let converter {
                    guard ensureCurrent(takeBuffer) || ending else { break loop }
                    let take = ring.read(into: scratch, frames: min(available, Self.chunkFrames))
                    do {
                        try converter.convert(UnsafeBufferPointer(start: scratch, count: take * ring.channels), into: staging)
                    } catch {
                        out.append(.error(error as? AudioQueueError ?? AudioQueueError(.decoderError, "the converter failed: \(error)")))
                    }
                    converterFinished = false
                } else {
                    guard ensureCurrent(takeBuffer) else {
                        if ending {
                            unplaced += ring.read(into: scratch, frames: min(available, Self.chunkFrames))
                            continue
                        }
                        break loop
                    }
                    let take = ring.read(into: scratch, frames: min(available, room, Self.chunkFrames))
                    place(scratch, frames: take, into: &out)
                }
            case .empty:
                if finishing || sourceEnded || limitReached {
                    if let converter, !converterFinished {
                        finishConverter(converter, into: &out)
                        continue
                    }
                    if let encoder, !encoderFinished {
                        do { try encoder.finish(into: packets) } catch {
                            out.append(.error(error as? AudioQueueError ?? AudioQueueError(.decoderError, "the encoder failed: \(error)")))
                        }
                        encoderFinished = true
                        continue
                    }
                    deliverCurrent(into: &out)
                    if limitReached { sourceEnded = true }
                }
                break loop
            }
        }
        if unplaced > 0 {
            out.append(.overrun(unplaced, Int64(timeline)))
            timeline += unplaced
        }
    }

    /// Discards everything captured and not handed back; returns the buffer being filled.
    func discardAll() -> [AudioQueueBuffer] {
        if let target { _ = target.ring.discardReadable() }
        converter?.reset()
        converterFinished = false
        staging.truncate(toSampleCount: 0)
        stagingOffset = 0
        pendingGap = 0
        timeline = capturedOutputFrames
        droppedAtEnd += packets.frameCount + currentPacketFrames
        packets.removeAll()
        currentDescriptions.removeAll()
        currentBytes = 0
        currentPacketFrames = 0
        defer { current = nil; currentFill = 0 }
        return current.map { [$0] } ?? []
    }

    private func finishConverter(_ converter: AudioConverter, into out: inout [Outgoing]) {
        do { try converter.finish(into: staging) } catch {
            out.append(.error(error as? AudioQueueError ?? AudioQueueError(.decoderError, "the converter failed: \(error)")))
        }
        converterFinished = true
    }

    private var room: Int {
        guard let current else { return 0 }
        if encoder != nil { return Self.chunkFrames }
        return current.capacity / format.bytesPerFrame - currentFill
    }

    private func ensureCurrent(_ takeBuffer: () -> AudioQueueBuffer?) -> Bool {
        if current != nil { return true }
        guard let buffer = takeBuffer() else { return false }
        current = buffer
        currentFill = 0
        currentStart = encoder == nil ? timeline : packetTimeline
        for channel in 0..<sumSquares.count { sumSquares[channel] = 0; peaks[channel] = 0 }
        return true
    }

    /// Writes `frames` float frames (the queue's channel count) into the current buffer, or into
    /// the encoder for a compressed queue (at most up to the frame limit).
    private func place(_ samples: UnsafePointer<Float>, frames: Int, into out: inout [Outgoing]) {
        let frames = frameLimit.map { min(frames, max($0 - timeline, 0)) } ?? frames
        guard let current, frames > 0 else { return }
        let channels = format.channelsPerFrame
        if let encoder {
            do { try encoder.convert(floats: UnsafeBufferPointer(start: samples, count: frames * channels), into: packets) } catch {
                out.append(.error(error as? AudioQueueError ?? AudioQueueError(.decoderError, "the encoder failed: \(error)")))
            }
        } else {
            current.withStorage { storage in
                if let base = storage.baseAddress {
                    layout.fromFloat(samples, count: frames * channels, into: base + currentFill * format.bytesPerFrame)
                }
            }
        }
        if metering {
            // On local buffers: a stored array touched per sample costs an exclusivity check and
            // a uniqueness check each time (most of a recording's CPU).
            var sums: [Double] = [], highs: [Float] = []
            swap(&sums, &sumSquares)
            swap(&highs, &peaks)
            sums.withUnsafeMutableBufferPointer { sums in
                highs.withUnsafeMutableBufferPointer { highs in
                    var index = 0
                    for _ in 0..<frames {
                        for channel in 0..<channels {
                            let value = samples[index]
                            sums[channel] += Double(value) * Double(value)
                            highs[channel] = max(highs[channel], abs(value))
                            index += 1
                        }
                    }
                }
            }
            swap(&sums, &sumSquares)
            swap(&highs, &peaks)
        }
        currentFill += frames
        timeline += frames
        if encoder == nil && room == 0 { deliverCurrent(into: &out) }
    }

    /// Moves whole packets into the current buffer (with their descriptions); hands it back when
    /// the next packet does not fit, or when it holds as many packets as the largest would fill it
    /// with (so a buffer sized for N packets comes back after N, however small silence makes them).
    private func fillPackets(into out: inout [Outgoing]) {
        guard let current, let encoder else { return }
        let sizedFor = max(current.capacity / max(encoder.maximumPacketSize, 1), 1)
        var taken = 0
        current.withStorage { storage in
            guard let base = storage.baseAddress else { return }
            while taken < packets.count && currentDescriptions.count < sizedFor {
                let packet = packets.packets[taken]
                guard currentBytes + packet.byteCount <= current.capacity else { break }
                (base + currentBytes).copyMemory(from: packets.bytes(of: taken).baseAddress ?? UnsafeRawPointer(base), byteCount: packet.byteCount)
                currentDescriptions.append(AudioPacketDescription(startOffset: currentBytes, variableFramesInPacket: packet.frames, dataByteSize: packet.byteCount))
                currentBytes += packet.byteCount
                currentPacketFrames += packet.frames
                taken += 1
            }
        }
        packets.removeFirst(taken)
        if !packets.isEmpty || taken == 0 || currentDescriptions.count >= sizedFor {
            if currentBytes == 0 {
                // Cannot happen: buffers are allocated to hold the largest packet.
                out.append(.error(AudioQueueError(.invalidBuffer, "a \(packets.packets.first?.byteCount ?? 0)-byte packet does not fit buffer \(current.id) of \(current.capacity) bytes; it is dropped")))
                packets.removeFirst(1)
                return
            }
            deliverCurrent(into: &out)
        }
    }

    private func deliverCurrent(into out: inout [Outgoing]) {
        guard let current else { return }
        if encoder != nil {
            guard currentBytes > 0 else { return }
            current.setByteSizeInternal(currentBytes)
            out.append(.filled(current, AudioCapturedFrames(startSampleTime: Int64(currentStart), frameCount: currentPacketFrames,
                                                            packetDescriptions: currentDescriptions), levels()))
            packetTimeline += currentPacketFrames
            droppedInside += droppedAtEnd
            droppedAtEnd = 0
            currentDescriptions.removeAll(keepingCapacity: true)
            currentBytes = 0
            currentPacketFrames = 0
            self.current = nil
            currentFill = 0
            return
        }
        guard currentFill > 0 else { return }
        current.setByteSizeInternal(currentFill * format.bytesPerFrame)
        out.append(.filled(current, AudioCapturedFrames(startSampleTime: Int64(currentStart), frameCount: currentFill), levels()))
        self.current = nil
        currentFill = 0
    }

    /// The meters over the frames placed while the current buffer was being filled.
    private func levels() -> [AudioLevelMeter]? {
        guard metering, currentFill > 0 else { return nil }
        return (0..<format.channelsPerFrame).map {
            AudioLevelMeter(average: Float((sumSquares[$0] / Double(currentFill)).squareRoot()), peak: peaks[$0])
        }
    }
}
