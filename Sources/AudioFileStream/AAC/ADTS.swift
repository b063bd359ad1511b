import BufferQueue

/// An ADTS frame header (7 bytes, 9 with CRC).
struct ADTSHeader: Equatable {
    let isMPEG2: Bool
    let hasCRC: Bool
    let profile: Int         // object type - 1
    let rateIndex: Int
    let channelConfiguration: Int
    let frameLength: Int     // header included
    let rawDataBlocks: Int   // frames of 1024 samples - 1

    /// Parses 7 bytes; nil when they are not a plausible ADTS header. A reserved sampling index is
    /// reported separately by `reservedRateIndex`.
    init?(_ b: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8)) {
        guard b.0 == 0xFF, b.1 & 0xF6 == 0xF0 else { return nil }
        isMPEG2 = b.1 & 0x08 != 0
        hasCRC = b.1 & 0x01 == 0
        profile = Int(b.2 >> 6)
        rateIndex = Int(b.2 >> 2) & 0x0F
        channelConfiguration = Int(b.2 & 1) << 2 | Int(b.3 >> 6)
        frameLength = Int(b.3 & 3) << 11 | Int(b.4) << 3 | Int(b.5 >> 5)
        rawDataBlocks = Int(b.6 & 3)
        guard frameLength >= headerLength else { return nil }
    }

    var headerLength: Int { hasCRC ? 9 : 7 }
    var reservedRateIndex: Bool { rateIndex >= 13 }
    var sampleRate: Int { AudioSpecificConfig.sampleRates[rateIndex] }

    func sameStream(_ other: ADTSHeader) -> Bool {
        profile == other.profile && rateIndex == other.rateIndex && channelConfiguration == other.channelConfiguration
    }

    static func at(_ input: ByteInput, _ o: Int) -> ADTSHeader? {
        guard o + 7 <= input.available else { return nil }
        return ADTSHeader((input.u8(o), input.u8(o + 1), input.u8(o + 2), input.u8(o + 3), input.u8(o + 4), input.u8(o + 5), input.u8(o + 6)))
    }

    /// A frame here is real when the next header follows it, a tag follows it (ID3v2, ID3v1, APE,
    /// Lyrics3: the tags found around MPEG audio frames), or it ends exactly at the end of data.
    static func confirm(_ input: ByteInput, at offset: Int, matching lock: ADTSHeader?) -> Confirmation<ADTSHeader> {
        guard offset + 7 <= input.available else { return input.atEnd ? .no : .needMore(offset + 7) }
        guard let header = at(input, offset) else { return .no }
        // A reserved index at the start is reported as an error by the parser; later it is junk.
        if header.reservedRateIndex { return lock == nil ? .yes(header) : .no }
        if let lock, !lock.sameStream(header) { return .no }
        let next = offset + header.frameLength
        if next + 7 <= input.available {
            if let following = at(input, next), following.sameStream(header) { return .yes(header) }
            if MPEGHeader.tagFollows(input, at: next) { return .yes(header) }
            return .no
        }
        if !input.atEnd { return .needMore(next + 7) }
        return next == input.available ? .yes(header) : .no
    }
}

/// The push parser for ADTS (AAC in an MPEG transport-like framing). Packets are the raw AAC
/// frames without their ADTS headers; the magic cookie is built from the first header.
final class ADTSParser: ContainerParser, PacketLocating {
    private var lock: ADTSHeader?
    private var resyncing = true
    private var skippedJunk = 0
    private var framesSeen: Int64 = 0
    private var frameOffsets: [Int64] = []

    func parse(_ input: ByteInput, _ out: StreamOutput) throws {
        while true {
            if input.skipPending > 0 || out.pauseRequested { return }   // the next decision needs the bytes after the skip
            if resyncing {
                guard try resync(input, out) else { return }
            }
            guard input.available >= 7 else { return }
            if input.matches("TAG", at: 0) { input.skip(128); continue }
            if input.available >= 10, input.matches("ID3", at: 0), let size = ID3v2.totalSize(header: input.bytes(0, 10)) { input.skip(Int64(size)); continue }
            guard let header = ADTSHeader.at(input, 0) else { resyncing = true; continue }
            // Once the stream is known, a header unlike its frames is junk (a sync word in a tag
            // or in damage between frames) unless the next frame confirms it.
            if let lock, header.reservedRateIndex || header.rawDataBlocks > 0 || !lock.sameStream(header) {
                switch ADTSHeader.confirm(input, at: 0, matching: header) {
                case .needMore(let count):
                    input.waitFor(count)
                    return
                case .no: resyncing = true; continue
                case .yes: break
                }
            }
            if header.reservedRateIndex {
                throw AudioFileStreamError(.invalidData, .adts, input.position,
                    "sampling frequency index \(header.rateIndex) is reserved; this is not a valid ADTS stream")
            }
            if header.rawDataBlocks > 0 {
                throw AudioFileStreamError(.unsupportedDataFormat, .adts, input.position,
                    "ADTS frames holding \(header.rawDataBlocks + 1) raw data blocks are not supported")
            }
            guard input.available >= header.frameLength else {
                input.waitFor(header.frameLength)
                return
            }
            switch input.dropCutFrame(header.frameLength, headerBytes: 7, out, .adts, isHeader: { ADTSHeader.at(input, $0) != nil },
                                      confirms: { ADTSHeader.confirm(input, at: $0, matching: lock ?? header) }) {
            case .needMore: return
            case .dropped: continue
            case .whole: break
            }
            if let lock, !lock.sameStream(header) {
                // A format change: announced at the start of a call, so reads see its values.
                if out.mustDeferChange { out.pauseRequested = true; return }
                announce(header, input, out)
            }
            if lock == nil {
                guard let packets = packetsToScan(input, header) else { return }
                announce(header, input, out, inBand: AACExtensionScan.scan(packets, monoCore: header.channelConfiguration == 1))
            }
            frameOffsets.append(input.position)
            framesSeen += 1
            input.consume(header.headerLength)
            out.emitPacket(from: input, size: header.frameLength - header.headerLength, frames: 1024)
        }
    }

    /// The payloads of the first frames, for the SBR/PS scan: nil while more bytes must come.
    private func packetsToScan(_ input: ByteInput, _ first: ADTSHeader) -> [[UInt8]]? {
        // Find the frames first and copy them only when all have arrived.
        var frames: [(start: Int, length: Int)] = [], offset = 0
        while frames.count < AACExtensionScan.packetsToScan {
            guard offset + 7 <= input.available else {
                if input.atEnd { break }
                input.waitFor(offset + 7)
                return nil
            }
            guard let header = ADTSHeader.at(input, offset), header.sameStream(first), header.rawDataBlocks == 0 else { break }
            guard offset + header.frameLength <= input.available else {
                if input.atEnd { break }
                input.waitFor(offset + header.frameLength)
                return nil
            }
            frames.append((offset + header.headerLength, header.frameLength - header.headerLength))
            offset += header.frameLength
        }
        return frames.map { input.bytes($0.start, $0.length) }
    }

    private func announce(_ header: ADTSHeader, _ input: ByteInput, _ out: StreamOutput, inBand: AACExtensionScan.Finding? = nil) {
        var objectType = header.profile + 1
        if objectType == 3 {
            // AAC SSR is all but unused; a header that says it on a stream whose frames are LC is a
            // packager's mistake, and faad and ffmpeg decode it as LC. So does this library.
            objectType = 2
            if lock == nil || lock?.profile != header.profile {
                out.warn(AudioFileStreamError(.invalidData, .adts, input.position, "the ADTS header says AAC SSR (profile 2); decoded as AAC LC, as faad and ffmpeg do"))
            }
        }
        let cookie = AudioSpecificConfig.bytes(objectType: objectType, rateIndex: header.rateIndex, channels: header.channelConfiguration)
        var config = AudioSpecificConfig(cookie)
        // SBR and PS found in the first frames: HE-AAC readings at the head of the list.
        if let inBand, let found = config?.withInBand(inBand) { config = found }
        out.magicCookie = cookie
        out.formatList = config?.formatList ?? []
        out.dataFormat = out.formatList.last
        out.maximumPacketSize = 8191
        if lock == nil {
            out.dataOffset = input.position
            out.channelLayout = .default(channels: max(header.channelConfiguration, 1))
            lock = header
            out.announceReady()
        } else {
            lock = header
            out.warn(AudioFileStreamError(.invalidData, .adts, input.position, "the stream changes to \(header.sampleRate) Hz, channel configuration \(header.channelConfiguration) here"))
            out.announce(.dataFormat)
            out.announce(.magicCookie)
        }
        out.framesPerPacket = 1024
    }

    private func resync(_ input: ByteInput, _ out: StreamOutput) throws -> Bool {
        var offset = 0
        while true {
            if skippedJunk + offset > MPEGAudioParser.resyncBudget {
                throw AudioFileStreamError(.noAudio, .adts, input.position + Int64(offset), "no ADTS frame in \(skippedJunk + offset) bytes; giving up")
            }
            if offset + 7 > input.available {
                if input.atEnd { input.consume(input.available); return false }
                input.consume(offset); skippedJunk += offset
                return false
            }
            if input.u8(offset) != 0xFF {   // jump to the next sync byte
                offset = input.firstIndex(of: 0xFF, from: offset, to: input.available - 6) ?? input.available - 6
                continue
            }
            switch ADTSHeader.confirm(input, at: offset, matching: lock) {
            case .needMore(let count):
                input.consume(offset); skippedJunk += offset
                input.waitFor(count - offset)
                return false
            case .yes:
                input.consume(offset); skippedJunk += offset
                if skippedJunk > 0 && lock != nil {
                    out.warn(AudioFileStreamError(.invalidData, .adts, input.position - Int64(skippedJunk), "skipped \(skippedJunk) bytes that are not ADTS frames"))
                }
                skippedJunk = 0
                resyncing = false
                return true
            case .no: break
            }
            offset += 1
        }
    }

    func finish(_ input: ByteInput, _ out: StreamOutput) throws {
        input.atEnd = true
        try parse(input, out)
        if framesSeen == 0 {
            throw AudioFileStreamError(lock == nil ? .noAudio : .truncated, .adts, input.position,
                lock == nil ? "no ADTS frame in the stream" : "the only ADTS frame is incomplete")
        }
        if input.available > 0, let header = ADTSHeader.at(input, 0) {
            out.warn(AudioFileStreamError(.truncated, .adts, input.position,
                "the last frame needs \(header.frameLength) bytes but the stream ends after \(input.available); it was dropped"))
        }
        out.audioDataPacketCount = framesSeen
        out.announce(.audioDataPacketCount)
    }

    func seek(toPacket packet: Int64, _ input: ByteInput, _ out: StreamOutput) throws -> AudioFileStreamSeekResult {
        guard packet >= 0, packet < Int64(frameOffsets.count) else {
            throw AudioFileStreamError(.invalidOperation, .adts, input.position,
                "packet \(packet) has not been parsed yet; ADTS has no index to seek ahead with")
        }
        let offset = frameOffsets[Int(packet)]
        input.reset(to: offset)
        out.nextPacketIndex = packet
        frameOffsets.removeSubrange(Int(packet)...)
        framesSeen = packet
        return AudioFileStreamSeekResult(byteOffset: offset, isEstimated: false)
    }

    func discontinuity(_ input: ByteInput, _ out: StreamOutput) {
        input.dropBuffered()
        resyncing = true
    }

    /// Exact for frames already parsed; ADTS has no index for the rest.
    func byteOffset(forPacket packet: Int64) -> AudioFileStreamSeekResult? {
        guard packet >= 0, packet < Int64(frameOffsets.count) else { return nil }
        return AudioFileStreamSeekResult(byteOffset: frameOffsets[Int(packet)], isEstimated: false)
    }

    func frames(beforePacket packet: Int64) -> Int64? { packet * 1024 }
    func packet(forFrame frame: Int64) -> (packet: Int64, frameOffset: Int)? { (frame / 1024, Int(frame % 1024)) }
}
