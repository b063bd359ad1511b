import BufferQueue
#if canImport(Glibc)
import Glibc
#endif

/// Native FLAC (`fLaC`): the metadata blocks, then frames. A frame has no length field: its end
/// is where the CRC-16 of the bytes so far is 0 and the next frame's header follows (sync code,
/// CRC-8, the next frame or sample number). One pass keeps the running CRC, so a stream pushed a
/// byte at a time is scanned once. A frame whose CRC-16 fails is dropped with a warning at the
/// next header that continues the numbering; a cut last frame is dropped with a warning.
///
/// Every frame is one packet of its block size. There is no priming or padding: the frames'
/// count is the stream's, and a STREAMINFO total that disagrees is reported.
final class FLACParser: ContainerParser, PacketLocating {
    private enum State { case magic, metadata, frames }
    private var state = State.magic
    private(set) var info: FLACStreamInfo?
    /// SEEKTABLE points: sample number, byte offset from the first frame, samples in the frame.
    private(set) var seekPoints: [(sample: Int64, offset: Int64)] = []
    private var firstFrameOffset: Int64 = 0
    private var metadata = AudioFileMetadata()

    /// The frame being scanned: its header (at the input's read position), the bytes scanned and
    /// their CRC-16.
    private var current: FLACFrameHeader?
    private var scanned = 0
    private var crc: UInt16 = 0
    /// Bytes skipped looking for a frame header, reported once a frame is found.
    private var junk: (offset: Int64, count: Int)?

    /// Where each parsed frame starts and the frames before it (the frames from the first: after
    /// a seek by sample number, no more are added).
    private var offsets: [Int64] = []
    private var framesBefore = CumulativeFrames()
    private var indexIsWhole = true
    /// Frames emitted, before and after seeks.
    private var framesEmitted = 0
    /// Frames whose header did not continue the previous one's numbering (frames missing there).
    private var jumps = 0
    /// The read position is where a frame just ended (a header there may change the format).
    private var rightAfterFrame = false
    /// A resumed read expects its first frame to start at this sample.
    private var expectedSample: Int64?

    /// Largest metadata block read whole (a bigger PICTURE is skipped).
    static let metadataReadCap = 16 << 20

    func parse(_ input: ByteInput, _ out: StreamOutput) throws {
        while true {
            switch state {
            case .magic:
                guard input.available >= 4 else { return input.waitFor(4) }
                guard input.matches("fLaC", at: 0) else {
                    // A stream cut before a frame: its first header stands in for STREAMINFO.
                    switch FLACFrameHeader.parse({ input.u8($0) }, available: input.available) {
                    case .needMore where !input.atEnd:
                        return input.waitFor(16)
                    case .header(let header):
                        guard let made = FLACStreamInfo(firstFrame: header) else { fallthrough }
                        info = made
                        out.warn(AudioFileStreamError(.invalidData, .flac, input.position,
                            "no `fLaC` marker and no STREAMINFO: the stream starts at a frame; its format is read from the frame header"))
                        state = .frames
                        firstFrameOffset = input.position
                        announce(made, out, dataOffset: firstFrameOffset)
                        continue
                    default:
                        throw AudioFileStreamError(.invalidData, .flac, input.position, "no `fLaC` marker and no FLAC frame: not a FLAC stream")
                    }
                }
                input.consume(4)
                state = .metadata
            case .metadata:
                guard input.skipPending == 0 else { return }
                guard input.available >= 4 else { return input.waitFor(4) }
                let last = input.u8(0) & 0x80 != 0, type = input.u8(0) & 0x7F
                let length = Int(input.u8(1)) << 16 | Int(input.u8(2)) << 8 | Int(input.u8(3))
                let at = input.position
                if type == FLACMetadataType.picture.rawValue && length > Self.metadataReadCap || type == FLACMetadataType.padding.rawValue {
                    input.skip(Int64(4 + length))
                } else {
                    guard input.available >= 4 + length else { return input.waitFor(4 + length) }
                    let body = input.bytes(4, length)
                    input.consume(4 + length)
                    try readBlock(type: type, body, at: at, out)
                }
                if last {
                    guard let info else {
                        throw AudioFileStreamError(.invalidData, .flac, at, "the FLAC metadata ends without a STREAMINFO block")
                    }
                    state = .frames
                    firstFrameOffset = input.position + input.skipPending
                    announce(info, out, dataOffset: firstFrameOffset)
                }
            case .frames:
                guard input.skipPending == 0 else { return }
                guard try scanFrames(input, out) else { return }
            }
        }
    }

    private func readBlock(type: UInt8, _ body: [UInt8], at offset: Int64, _ out: StreamOutput) throws {
        switch FLACMetadataType(rawValue: type) {
        case .streamInfo:
            guard info == nil else { return }
            guard let parsed = FLACStreamInfo(body) else {
                throw AudioFileStreamError(.invalidData, .flac, offset, "the STREAMINFO block (\(body.count) bytes) is invalid")
            }
            info = parsed
        case .seekTable:
            seekPoints = stride(from: 0, to: body.count - 17, by: 18).compactMap { at in
                let sample = body[at..<(at + 8)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
                let byte = body[(at + 8)..<(at + 16)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
                // Placeholder points are all ones.
                return sample == .max ? nil : (Int64(bitPattern: sample), Int64(bitPattern: byte))
            }
        case .vorbisComment:
            if let fields = VorbisComment.fields(body) {
                let pictures = metadata.pictures, block = metadata.cueSheet
                metadata = VorbisComment.metadata(fields)
                metadata.pictures = pictures + metadata.pictures
                // A CUESHEET block's exact sample offsets win over a CUESHEET comment.
                if let block { metadata.cueSheet = block }
            }
        case .cueSheet:
            guard let sheet = CueSheet(flacBlock: body) else {
                out.warn(AudioFileStreamError(.invalidData, .flac, offset, "the CUESHEET block (\(body.count) bytes) is invalid; ignored"))
                return
            }
            metadata.cueSheet = sheet
        case .picture:
            if let picture = FLACPicture.parse(body) { metadata.pictures.append(picture) }
        default:
            break
        }
    }

    private func announce(_ info: FLACStreamInfo, _ out: StreamOutput, dataOffset: Int64) {
        out.dataFormat = info.format
        out.formatList = [info.format]
        out.magicCookie = info.magicCookie
        out.channelLayout = .wave(channels: info.channels)
        out.dataOffset = dataOffset
        if info.maximumFrameSize > 0 { out.maximumPacketSize = info.maximumFrameSize }
        if info.totalSamples > 0 {
            out.packetTableInfo = AudioFilePacketTableInfo(validFrames: info.totalSamples, primingFrames: 0, remainderFrames: 0,
                                                           source: .containerFrameCount, note: "STREAMINFO total samples")
        }
        out.metadata = metadata
        out.announceReady()
    }

    /// Finds and emits whole frames; false when more bytes are needed.
    private func scanFrames(_ input: ByteInput, _ out: StreamOutput) throws -> Bool {
        guard let info else { return false }
        while true {
            guard let header = current else {
                guard findHeader(input, info) else { return false }
                continue
            }
            // Scan on from where the last call stopped, keeping the CRC of the bytes so far.
            let available = input.available
            var end: Int?
            var damagedAt: Int?
            var wait = 0
            input.withBytes(available) { raw in
                let bytes = raw.bindMemory(to: UInt8.self)
                guard let base = bytes.baseAddress else { return }
                var position = scanned, sum = crc
                while position < available {
                    // The CRC runs on in bulk up to the next 0xFF past the header: a frame ends only
                    // where the next one's sync code begins.
                    let from = max(position, header.length + 2)
                    let candidate = from >= available ? available
                        : memchr(base + from, 0xFF, available - from).map { UnsafeRawPointer($0) - UnsafeRawPointer(base) } ?? available
                    if candidate > position {
                        sum = FLACFrameHeader.crc16(sum, base + position, count: candidate - position)
                        position = candidate
                        if position >= available { break }
                    }
                    if bytes[position] == 0xFF {
                        switch FLACFrameHeader.parse({ bytes[position + $0] }, available: available - position) {
                        case .needMore where !input.atEnd:
                            wait = position + 16
                            scanned = position
                            crc = sum
                            return
                        case .header(let next) where sum == 0 || follows(header, next, info):
                            // The CRC-16 of the bytes so far checks and a header follows: the frame
                            // ends here (its rate, channels or size may change: FLAC allows it).
                            // A header that continues the numbering where the CRC fails: damage.
                            if sum == 0 {
                                end = position
                                if !follows(header, next, info) { jumps += 1 }
                            } else {
                                damagedAt = position
                            }
                            scanned = position
                            crc = sum
                            return
                        default:
                            break
                        }
                    }
                    sum = FLACFrameHeader.crc16(sum, base + position, count: 1)
                    position += 1
                }
                scanned = position
                crc = sum
            }
            if wait > 0 {
                input.waitFor(wait)
                return false
            }
            if let damagedAt {
                out.warn(AudioFileStreamError(.invalidData, .flac, input.position,
                    "FLAC frame \(offsets.count) (\(damagedAt) bytes) fails its CRC-16; it was dropped and \(header.blockSize) frames of audio are missing"))
                input.consume(damagedAt)
                current = nil
                continue
            }
            guard let end else {
                if input.atEnd, available > 0 {
                    if crc == 0 {
                        emit(header, size: available, input, out)
                    } else {
                        out.warn(AudioFileStreamError(.truncated, .flac, input.position,
                            "the last FLAC frame (\(available) bytes from here) is cut or damaged: its CRC-16 fails; it was dropped"))
                        input.consume(available)
                        current = nil
                    }
                }
                return false
            }
            emit(header, size: end, input, out)
        }
    }

    /// Whether a frame header's number counts samples rather than frames: a variable block size
    /// stream's, and one of the old format (Flake before 2007), whose variable block sizes show
    /// only in STREAMINFO's differing minimum and maximum, as libFLAC reads it.
    static func numbersSamples(_ header: FLACFrameHeader, _ info: FLACStreamInfo) -> Bool {
        header.variableBlockSize || info.minimumBlockSize != info.maximumBlockSize
    }

    /// Whether `next` is the header that follows `header` in the same stream.
    private func follows(_ header: FLACFrameHeader, _ next: FLACFrameHeader, _ info: FLACStreamInfo) -> Bool {
        guard next.variableBlockSize == header.variableBlockSize else { return false }
        return next.number == header.number + (Self.numbersSamples(header, info) ? Int64(header.blockSize) : 1)
    }

    private func plausible(_ header: FLACFrameHeader, _ info: FLACStreamInfo) -> Bool {
        header.channels == info.channels && (header.sampleRate == 0 || header.sampleRate == info.sampleRate)
            && (header.bitsPerSample == 0 || header.bitsPerSample == info.bitsPerSample)
    }

    private func emit(_ header: FLACFrameHeader, size: Int, _ input: ByteInput, _ out: StreamOutput) {
        if let expected = expectedSample {
            expectedSample = nil
            let sample = info.map { Self.numbersSamples(header, $0) } ?? header.variableBlockSize
                ? header.number : header.number * Int64(info?.maximumBlockSize ?? header.blockSize)
            if sample != expected {
                out.warn(AudioFileStreamError(.invalidData, .flac, input.position,
                    "a seek expected the frame of sample \(expected) and found the frame of sample \(sample)"))
            }
        }
        framesEmitted += 1
        rightAfterFrame = true
        if indexIsWhole {
            offsets.append(input.position)
            framesBefore.append(header.blockSize)
        }
        out.emitPacket(from: input, size: size, frames: header.blockSize)
        current = nil
    }

    /// Finds the next frame header (skipping junk); false when more bytes are needed.
    private func findHeader(_ input: ByteInput, _ info: FLACStreamInfo) -> Bool {
        while input.available > 0 {
            if input.u8(0) == 0xFF {
                switch FLACFrameHeader.parse({ input.u8($0) }, available: input.available) {
                case .needMore:
                    if !input.atEnd {
                        input.waitFor(16)
                        return false
                    }
                case .header(let header) where plausible(header, info) || rightAfterFrame:
                    // Right after a frame the next header may change the rate, channels or size
                    // (FLAC allows it); where junk is searched, it must match STREAMINFO.
                    current = header
                    scanned = 0
                    crc = 0
                    return true
                default:
                    break
                }
            }
            rightAfterFrame = false
            let next = input.firstIndex(of: 0xFF, from: 1) ?? input.available
            if let last = junk, last.offset + Int64(last.count) == input.position {
                junk = (last.offset, last.count + next)
            } else {
                junk = (input.position, next)
            }
            input.consume(next)
        }
        return false
    }

    func finish(_ input: ByteInput, _ out: StreamOutput) throws {
        input.atEnd = true
        try parse(input, out)
        guard state == .frames, let info else {
            throw AudioFileStreamError(.truncated, .flac, input.position, "the FLAC stream ends inside its metadata")
        }
        if let junk {
            out.warn(AudioFileStreamError(.invalidData, .flac, junk.offset, "skipped \(junk.count) bytes that are not FLAC frames"))
        }
        if jumps > 0 {
            out.warn(AudioFileStreamError(.invalidData, .flac, 0, "\(jumps) frame header(s) do not continue the numbering of the frame before: frames are missing there"))
        }
        guard framesEmitted > 0 else {
            throw AudioFileStreamError(.noAudio, .flac, firstFrameOffset, "the FLAC stream holds no frame")
        }
        // After a seek by sample number the frames read are not the whole stream: nothing to count.
        guard indexIsWhole else { return }
        let total = framesBefore.total
        if info.totalSamples > 0, info.totalSamples != total {
            out.warn(AudioFileStreamError(.invalidData, .flac, 0,
                "STREAMINFO says \(info.totalSamples) samples but the frames hold \(total); the frames are played"))
        }
        out.packetTableInfo = AudioFilePacketTableInfo(validFrames: total, primingFrames: 0, remainderFrames: 0, source: .containerFrameCount,
                                                       note: "the frames' block sizes")
        out.announce(.packetTableInfo)
        out.audioDataPacketCount = Int64(offsets.count)
        out.announce(.audioDataPacketCount)
    }

    func seek(toPacket packet: Int64, _ input: ByteInput, _ out: StreamOutput) throws -> AudioFileStreamSeekResult {
        guard let result = byteOffset(forPacket: packet) else {
            throw AudioFileStreamError(.invalidOperation, .flac, input.position, "FLAC frame \(packet) has not been parsed yet")
        }
        input.reset(to: result.byteOffset)
        out.nextPacketIndex = packet
        offsets.removeSubrange(Int(packet)...)
        framesBefore.removeAll(from: Int(packet))
        current = nil
        rightAfterFrame = true   // a frame begins here
        return result
    }

    // MARK: seeking by sample number

    /// Where to look for sample `frame`: the frames read, then the seek table, narrow it.
    func seekPlan(forFrame frame: Int64) -> AudioStreamSeekPlan? {
        guard state == .frames else { return nil }
        var low: (offset: Int64, position: Int64) = (firstFrameOffset, 0)
        var found = false
        var high: Int64?
        if let (packet, _) = packet(forFrame: frame), indexIsWhole || packet < Int64(offsets.count) {
            low = (offsets[Int(packet)], framesBefore.frames(beforePacket: packet) ?? 0)
            found = true
            if Int(packet) + 1 < offsets.count { high = offsets[Int(packet) + 1] }
        }
        for point in seekPoints where point.sample <= frame && point.sample >= low.position {
            low = (firstFrameOffset + point.offset, point.sample)
            found = true
        }
        if high == nil, let next = seekPoints.first(where: { $0.sample > frame }) { high = firstFrameOffset + next.offset }
        return AudioStreamSeekPlan(serial: nil, target: frame, low: low, highOffset: high, lowIsFound: found)
    }

    /// The first frame header of this stream in `bytes` and the sample it starts at.
    func probe(_ bytes: [UInt8]) -> (offset: Int, position: Int64)? {
        guard let info else { return nil }
        var at = 0
        while at + 1 < bytes.count {
            guard let next = bytes[at...].firstIndex(of: 0xFF) else { return nil }
            at = next
            if case .header(let header) = FLACFrameHeader.parse({ bytes[at + $0] }, available: bytes.count - at), plausible(header, info),
               header.variableBlockSize || header.blockSize == info.maximumBlockSize || info.minimumBlockSize != info.maximumBlockSize {
                return (at, Self.numbersSamples(header, info) ? header.number : header.number * Int64(info.maximumBlockSize))
            }
            at += 1
        }
        return nil
    }

    /// Reading goes on at the frame at byte `offset`, which starts at sample `sample`.
    func resume(atFrame offset: Int64, sample: Int64, _ input: ByteInput, _ out: StreamOutput) -> Int64? {
        guard state == .frames, let info else { return nil }
        input.reset(to: offset)
        current = nil
        junk = nil
        rightAfterFrame = false
        if let (packet, _) = packet(forFrame: sample), indexIsWhole, packet < Int64(offsets.count), offsets[Int(packet)] == offset {
            // A frame already read: the index stays whole from there.
            offsets.removeSubrange(Int(packet)...)
            framesBefore.removeAll(from: Int(packet))
            out.nextPacketIndex = packet
        } else {
            indexIsWhole = false
            out.nextPacketIndex = sample / Int64(max(info.maximumBlockSize, 1))
        }
        expectedSample = sample
        return sample
    }

    func discontinuity(_ input: ByteInput, _ out: StreamOutput) {
        input.dropBuffered()
        current = nil
        rightAfterFrame = false
    }

    func byteOffset(forPacket packet: Int64) -> AudioFileStreamSeekResult? {
        guard packet >= 0, packet < Int64(offsets.count) else { return nil }
        return AudioFileStreamSeekResult(byteOffset: offsets[Int(packet)], isEstimated: false)
    }

    func frames(beforePacket packet: Int64) -> Int64? { framesBefore.frames(beforePacket: packet) }

    func packet(forFrame frame: Int64) -> (packet: Int64, frameOffset: Int)? { framesBefore.packet(forFrame: frame) }
}
