import BufferQueue

/// An MPEG-2 transport stream as a container: ``MPEGTransportStreamDemuxer`` takes out the audio
/// elementary stream, which the ADTS or MPEG audio parser reads into the same output. Offsets of
/// packets are positions in that elementary stream; the stream has no index to seek with.
final class TransportStreamParser: ContainerParser {
    private let demuxer = MPEGTransportStreamDemuxer()
    /// The audio elementary stream, as its parser reads it.
    private let es = ByteInput()
    private var inner: (any ContainerParser)?
    private var warningsTaken = 0

    /// Bytes that show three packets in step.
    static let bytesToSniff = 2 * MPEGTransportStreamDemuxer.packetSize + 1

    /// Whether the input starts with three transport packets in step (or, at its end, with whole
    /// packets only).
    static func isSynced(_ input: ByteInput) -> Bool {
        let size = MPEGTransportStreamDemuxer.packetSize
        if input.available >= bytesToSniff {
            return input.u8(0) == 0x47 && input.u8(size) == 0x47 && input.u8(2 * size) == 0x47
        }
        guard input.atEnd, input.available >= size, input.available % size == 0 else { return false }
        return stride(from: 0, to: input.available, by: size).allSatisfy { input.u8($0) == 0x47 }
    }

    func parse(_ input: ByteInput, _ out: StreamOutput) throws {
        let count = input.available
        if count > 0 {
            try input.withBytes(count) { bytes in
                try demuxer.push(bytes) { try take($0, out) }
            }
            input.consume(count)
        }
        takeWarnings(out)
        try runInner(out)
    }

    func finish(_ input: ByteInput, _ out: StreamOutput) throws {
        try parse(input, out)
        defer { takeWarnings(out) }
        try demuxer.finish { try take($0, out) }
        guard let inner else {
            throw AudioFileStreamError(.noAudio, .mpegTransportStream, input.position, "no audio stream in the transport stream")
        }
        es.atEnd = true
        try inner.finish(es, out)
    }

    func seek(toPacket packet: Int64, _ input: ByteInput, _ out: StreamOutput) throws -> AudioFileStreamSeekResult {
        throw AudioFileStreamError(.invalidOperation, .mpegTransportStream, input.position,
            "an MPEG transport stream has no packet index: it cannot seek to packet \(packet)")
    }

    func discontinuity(_ input: ByteInput, _ out: StreamOutput) {
        demuxer.discontinuity()
        inner?.discontinuity(es, out)
    }

    func frames(beforePacket packet: Int64) -> Int64? { inner?.frames(beforePacket: packet) }
    /// Continuity counters may restart at a segment (packagers differ).
    func beginSegment() { demuxer.segmentBoundary() }
    var elementaryStreamType: AudioFileType? { innerType }
    func packet(forFrame frame: Int64) -> (packet: Int64, frameOffset: Int)? { inner?.packet(forFrame: frame) }

    private func runInner(_ out: StreamOutput) throws {
        guard let inner, !es.mustWait else { return }
        try inner.parse(es, out)
    }

    private func take(_ event: MPEGTransportStreamDemuxer.Event, _ out: StreamOutput) throws {
        switch event {
        case .program:
            guard inner == nil else {
                if demuxer.audioFileType != innerType {
                    throw AudioFileStreamError(.unsupportedDataFormat, .mpegTransportStream, demuxer.position,
                        "the program's audio changed to \(MPEGTransportStreamDemuxer.describe(demuxer.audio?.streamType ?? 0))")
                }
                return
            }
            innerType = demuxer.audioFileType
            switch innerType {
            case .adts: inner = ADTSParser()
            case .mp3: inner = MPEGAudioParser(iTunSMPB: nil)
            default: break
            }
        case .audio(let bytes):
            bytes.withUnsafeBytes { es.append($0) }
        case .discontinuity:
            // Frames complete before the gap are kept (read as if the stream ended there, so the
            // last one needs no next header to confirm it); the one cut by the gap is dropped.
            es.atEnd = true
            defer { es.atEnd = false }
            try runInner(out)
            inner?.discontinuity(es, out)
        case .pesStart(_, let pts):
            if let pts { out.segmentTimestamp(AudioStreamTimestamp(ticks: pts, perSecond: 90_000, source: .pesPTS)) }
        case .metadata(_, let bytes):
            guard let metadata = AudioFileMetadata(id3v2: bytes) else { return }
            out.metadata = metadata
            if out.isReady { out.announce(.metadata) }
            out.timedMetadata(metadata)
        }
    }
    private var innerType: AudioFileType?

    private func takeWarnings(_ out: StreamOutput) {
        let all = demuxer.warnings
        while warningsTaken < all.count {
            out.warn(all[warningsTaken])
            warningsTaken += 1
        }
    }
}
