import BufferQueue

/// What parsers produce: property values, events in order, and the packet batch being built.
final class StreamOutput {
    var fileType: AudioFileType?
    var dataFormat: AudioStreamDescription?
    var formatList: [AudioStreamDescription] = []
    var magicCookie: [UInt8]?
    var dataOffset: Int64?
    var audioDataByteCount: Int64?
    var audioDataPacketCount: Int64?
    var bitRate: Int?
    var maximumPacketSize: Int?
    var channelLayout: AudioChannelLayout?
    var packetTableInfo: AudioFilePacketTableInfo?
    var metadata = AudioFileMetadata()
    var packetRollDistance: Int?
    /// The links of a chained stream so far (Ogg), the first included.
    var links: [AudioStreamLink] = []
    var isReady = false
    var warnings: [AudioFileStreamError] = []

    private(set) var events: [AudioFileStreamEvent] = []
    /// Set when the format changed mid-stream: the parser returns so the caller reads the new
    /// values while handling that event, not later ones.
    var pauseRequested = false
    /// True inside ``AudioFileStream/finish()``: changes are announced even after other events
    /// (the caller gets one list; the last value wins for reads).
    var finishing = false

    /// Whether this call has produced events already; a format change then waits for the next call.
    var mustDeferChange: Bool {
        guard !finishing else { return false }
        if !events.isEmpty { return true }
        if let batch, batch.packetCount > 0 { return true }
        return false
    }
    private var batch: AudioFilePackets?
    /// False while indexing a file (``AudioFile``): packets are described (offset, size, frames)
    /// but their bytes are not copied. A transport stream's and an Ogg stream's packets are kept
    /// whole either way: their bytes are spread over transport packets or pages, so the file
    /// offset cannot find them again.
    var keepsPacketBytes = true
    /// Bytes the current batch describes (its data's length when bytes are kept).
    private var batchBytes = 0
    /// Interleaved packet bytes are copied even while indexing, unless the parser says where their
    /// pieces lie instead (``pieces``).
    private var copiesBytes: Bool {
        keepsPacketBytes || (fileType.map { $0.interleavesPacketBytes && !$0.locatesPacketPieces } ?? false)
    }
    /// While indexing (bytes not kept), where the bytes of the packets emitted lie in the file, in
    /// order, for containers that interleave them with their own (Ogg pages): a packet's bytes
    /// are the next pieces adding up to its size. ``takePieces()`` hands them over.
    private(set) var pieces: [(offset: Int64, length: Int)] = []

    /// The pieces recorded since the last call.
    func takePieces() -> [(offset: Int64, length: Int)] {
        defer { pieces.removeAll(keepingCapacity: true) }
        return pieces
    }
    /// Index of the next packet to emit.
    var nextPacketIndex: Int64 = 0
    /// Frames per packet of the current format (0 when packets carry their own count).
    var framesPerPacket = 0

    func announce(_ property: AudioFileStreamProperty) {
        flushBatch()
        events.append(.property(property))
    }

    /// Segmented mode is on (timed metadata is reported as events).
    var segmented = false
    /// A segment began and its first timestamp is still to be reported.
    var wantsSegmentTimestamp = false

    /// Reports a timestamp the container states, if it is the first of a segment.
    func segmentTimestamp(_ timestamp: AudioStreamTimestamp) {
        guard wantsSegmentTimestamp else { return }
        wantsSegmentTimestamp = false
        flushBatch()
        events.append(.segmentTimestamp(timestamp))
    }

    /// Reports timed metadata (segmented mode only).
    func timedMetadata(_ metadata: AudioFileMetadata) {
        guard segmented, !metadata.isEmpty else { return }
        flushBatch()
        events.append(.timedMetadata(metadata))
    }

    /// Reports what is known of a link (see ``AudioFileStreamEvent/link(_:)``).
    func link(_ link: AudioStreamLink) {
        flushBatch()
        events.append(.link(link))
    }

    func requestSeek(to offset: Int64) {
        flushBatch()
        events.append(.seekRequired(byteOffset: offset))
    }

    /// Announces everything known, in the documented order, then ready-to-produce-packets.
    func announceReady() {
        guard !isReady else { return }
        announce(.fileFormat)
        announce(.dataFormat)
        announce(.formatList)
        if magicCookie != nil { announce(.magicCookie) }
        if channelLayout != nil { announce(.channelLayout) }
        if dataOffset != nil { announce(.dataOffset) }
        if audioDataByteCount != nil { announce(.audioDataByteCount) }
        if audioDataPacketCount != nil { announce(.audioDataPacketCount) }
        if bitRate != nil { announce(.bitRate) }
        if maximumPacketSize != nil { announce(.maximumPacketSize) }
        if packetTableInfo != nil { announce(.packetTableInfo) }
        if !metadata.isEmpty { announce(.metadata) }
        isReady = true
        announce(.readyToProducePackets)
        framesPerPacket = dataFormat?.framesPerPacket ?? 0
    }

    /// Emits the next `size` bytes of `input` as a packet of `frames` frames and consumes them.
    func emitPacket(from input: ByteInput, size: Int, frames: Int) {
        let offset = input.position
        appendToBatch(frames: frames, fileOffset: offset, size: size) { input.copy(size, into: &$0) }
        input.consume(size)
    }

    /// Emits a packet from bytes already in hand; `pieces`, where they lie in the file when they
    /// are spread over it (recorded while indexing instead of the bytes).
    func emitPacket(_ bytes: [UInt8], frames: Int, fileOffset: Int64, pieces: [OggPiece] = []) {
        appendToBatch(frames: frames, fileOffset: fileOffset, size: bytes.count) { $0.append(contentsOf: bytes) }
        if !copiesBytes {
            for piece in pieces { self.pieces.append((piece.offset, piece.length)) }
        }
    }

    /// Emits `count` constant-size packets of `bytesPerPacket` from `input` and consumes them.
    func emitConstantPackets(from input: ByteInput, count: Int, bytesPerPacket: Int) {
        guard count > 0 else { return }
        if let current = batch, !current.descriptions.isEmpty { flushBatch() }
        if batch == nil {
            batch = AudioFilePackets(data: [], descriptions: [], fileOffsets: [input.position], firstPacketIndex: nextPacketIndex, packetCount: 0)
        }
        if copiesBytes { input.copy(count * bytesPerPacket, into: &batch!.data) }
        batch!.packetCount += count
        input.consume(count * bytesPerPacket)
        nextPacketIndex += Int64(count)
    }

    private func appendToBatch(frames: Int, fileOffset: Int64, size: Int, _ fill: (inout [UInt8]) -> Void) {
        if let current = batch, current.descriptions.isEmpty, current.packetCount > 0 { flushBatch() }
        if batch == nil {
            batch = AudioFilePackets(data: [], descriptions: [], fileOffsets: [], firstPacketIndex: nextPacketIndex, packetCount: 0)
        }
        batch!.packetCount += 1
        let start = batchBytes
        if copiesBytes { fill(&batch!.data) }
        batchBytes += size
        let variable = frames != framesPerPacket ? frames : 0
        batch!.descriptions.append(AudioPacketDescription(startOffset: start, variableFramesInPacket: variable, dataByteSize: size))
        batch!.fileOffsets.append(fileOffset)
        nextPacketIndex += 1
    }

    func flushBatch() {
        if let batch, batch.packetCount > 0 { events.append(.packets(batch)) }
        batch = nil
        batchBytes = 0
    }

    func takeEvents() -> [AudioFileStreamEvent] {
        flushBatch()
        defer { events.removeAll() }
        return events
    }

    func warn(_ warning: AudioFileStreamError) { warnings.append(warning) }
}

/// One container's push parser.
protocol ContainerParser: AnyObject {
    /// Consumes what it can from `input`; returns when it needs more bytes.
    func parse(_ input: ByteInput, _ out: StreamOutput) throws
    /// No more bytes will come: finish or report what is missing.
    func finish(_ input: ByteInput, _ out: StreamOutput) throws
    /// Where packet `packet` starts; the parser expects the next bytes from there.
    func seek(toPacket packet: Int64, _ input: ByteInput, _ out: StreamOutput) throws -> AudioFileStreamSeekResult
    /// The next bytes do not follow the previous ones.
    func discontinuity(_ input: ByteInput, _ out: StreamOutput)
    /// Frames before packet `packet` (exact where the container has a table).
    func frames(beforePacket packet: Int64) -> Int64?
    /// The packet holding frame `frame` and the frame's offset in it.
    func packet(forFrame frame: Int64) -> (packet: Int64, frameOffset: Int)?
    /// The next bytes begin a new segment of the same stream (segmented mode).
    func beginSegment()
    /// The container of the audio inside, for containers that carry another (a transport stream).
    var elementaryStreamType: AudioFileType? { get }
}

extension ContainerParser {
    func beginSegment() {}
    var elementaryStreamType: AudioFileType? { nil }
}
