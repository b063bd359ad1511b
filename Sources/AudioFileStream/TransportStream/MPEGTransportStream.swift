/// Demultiplexes the audio of an MPEG-2 transport stream (ISO/IEC 13818-1): the format of HLS
/// segments (`.ts`) and of broadcast captures.
///
/// Push the stream's bytes in any chunking. The demuxer finds the program in the PAT and PMT,
/// picks its first audio stream (ADTS AAC, stream type `0x0F`; MPEG audio, `0x03`/`0x04`), and
/// hands over that stream's bytes (the PES payloads, in order), the presentation time of each PES,
/// and the ID3 timed metadata of a metadata stream (`0x15`). Feed the audio bytes to an
/// ``AudioFileStream`` with the matching type hint (``audioFileType``); ``AudioFileStream`` does
/// that itself for a `.ts` file (``AudioFileType/mpegTransportStream``).
///
/// Checked as it goes: the PSI sections' CRC-32, the continuity counter of every PID with a
/// payload (a gap is reported as ``Event/discontinuity(esOffset:lostPackets:)``, a repeated
/// packet is dropped), lost sync (skipped up to the next three packets in step, with a warning).
/// Not thread-safe: one demuxer from one thread at a time.
public final class MPEGTransportStreamDemuxer {
    /// One elementary stream the PMT lists.
    public struct ElementaryStream: Sendable, Equatable {
        /// The PID its packets carry.
        public var pid: Int
        /// `stream_type` from the PMT (`0x0F` ADTS AAC, `0x03`/`0x04` MPEG audio, `0x15` metadata…).
        public var streamType: UInt8
        /// The codec its descriptors name, for PES private data (`0x06`) that carries audio: an
        /// AC-3 (`0x6A`) or enhanced AC-3 (`0x7A`) descriptor, or a registration descriptor
        /// (`AC-3`, `EAC3`, `DTS1`…, `Opus`).
        public var describedCodec: String?

        /// A stream of `pid` with `streamType` (from the PMT), and the codec its descriptors name.
        public init(pid: Int, streamType: UInt8, describedCodec: String? = nil) {
            self.pid = pid
            self.streamType = streamType
            self.describedCodec = describedCodec
        }
    }

    /// What the demuxer found.
    public enum Event: Sendable, Equatable {
        /// The program's audio stream is known (once, before its first bytes).
        case program(audio: ElementaryStream, metadata: ElementaryStream?)
        /// A PES of the audio stream starts: its first payload byte is at `esOffset` in the
        /// elementary stream, and it is presented at `pts` (90 kHz, unwrapped past 2^33) if it says.
        case pesStart(esOffset: Int64, pts: Int64?)
        /// The audio stream's next bytes.
        case audio([UInt8])
        /// Packets of the audio stream were lost (a continuity counter skipped): the bytes after
        /// `esOffset` do not follow the ones before.
        case discontinuity(esOffset: Int64, lostPackets: Int)
        /// A whole PES of the metadata stream (usually an ID3v2 tag), with its presentation time.
        case metadata(pts: Int64?, bytes: [UInt8])
    }

    /// The transport packet size.
    public static let packetSize = 188
    /// Stream types of audio that this library decodes.
    public static let supportedAudioTypes: Set<UInt8> = [0x03, 0x04, 0x0F]

    /// The audio stream chosen from the PMT.
    public private(set) var audio: ElementaryStream?
    /// The ID3 timed-metadata stream, if the program has one.
    public private(set) var metadataStream: ElementaryStream?
    /// The container of the audio bytes: ADTS or MPEG audio (nil before the PMT).
    public var audioFileType: AudioFileType? {
        switch audio?.streamType {
        case 0x0F: return .adts
        case 0x03, 0x04: return .mp3
        default: return nil
        }
    }
    /// Problems that did not stop demultiplexing (lost sync, lost packets).
    public private(set) var warnings: [AudioFileStreamError] = []
    /// Bytes of the audio elementary stream handed over so far.
    public private(set) var esOffset: Int64 = 0
    /// Transport-stream bytes consumed so far (the offset of the next packet).
    public private(set) var position: Int64 = 0

    /// Bytes held back: part of a packet, or what a lost sync has not been decided on yet.
    private var held: [UInt8] = []
    private var pmtPID: Int?
    private var sections: [Int: SectionAssembler] = [:]
    private var counters: [Int: UInt8] = [:]
    private var audioPES = PESReader()
    private var metadataPES = PESReader()
    private var lastPTS: Int64?
    private var packetsWithoutProgram = 0
    /// Packets met before the program map named the audio PID, with their positions: a stream
    /// cut mid-way (an HLS segment) carries audio before its PAT/PMT, and the PMT says which of
    /// them is the audio (as ffmpeg finds them). At most ``packetsToFindProgram``.
    private var beforeProgram: [(position: Int64, packet: [UInt8])] = []
    private var skippedSince: Int64?
    private var skippedBytes = 0
    private var failure: AudioFileStreamError?
    /// Every stream of the last PMT (for the message when none is audio that can be decoded).
    private var programStreams: [ElementaryStream] = []

    /// Packets read without finding a program before the stream is declared not a transport stream
    /// of audio (PAT and PMT are repeated every 100 ms or so in practice).
    public static let packetsToFindProgram = 4096

    /// Sync was lost and not yet found again (what is held starts at an undecided candidate).
    private var resyncing = false

    /// An empty demultiplexer.
    public init() {}

    /// Demultiplexes more bytes, handing every event to `handle` in order.
    /// - Throws: ``AudioFileStreamError`` when the bytes are not a transport stream, the program
    ///   has no audio stream that can be decoded, or a PSI section is damaged beyond use.
    public func push(_ bytes: UnsafeRawBufferPointer, _ handle: (Event) throws -> Void) throws {
        if let failure { throw failure }
        do {
            if held.isEmpty {
                let used = try demux(bytes, atEnd: false, handle)
                if used < bytes.count { held.append(contentsOf: bytes[used...]) }
            } else {
                held.append(contentsOf: bytes)
                let all = held
                let used = try all.withUnsafeBytes { try demux($0, atEnd: false, handle) }
                held.removeFirst(used)
            }
        } catch let error as AudioFileStreamError {
            failure = error
            throw error
        }
    }

    /// ``push(_:_:)`` for an array.
    public func push(_ bytes: [UInt8], _ handle: (Event) throws -> Void) throws {
        try bytes.withUnsafeBytes { try push($0, handle) }
    }

    /// No more bytes come: hands over a metadata PES still being gathered and reports what is missing.
    public func finish(_ handle: (Event) throws -> Void) throws {
        if let failure { throw failure }
        let all = held
        held.removeAll()
        _ = try all.withUnsafeBytes { try demux($0, atEnd: true, handle) }
        if !all.isEmpty, all.count % Self.packetSize != 0, audio != nil {
            warn(.truncated, position, "the stream ends inside a transport packet (\(all.count % Self.packetSize) of 188 bytes)")
        }
        try flushMetadata(handle)
        guard audio != nil else {
            throw AudioFileStreamError(.noAudio, .mpegTransportStream, position, programMissing())
        }
    }

    /// The next bytes do not follow the previous ones (a seek, or a new segment that restarts its
    /// counters): partial packets and PES are dropped, and continuity counters start afresh.
    public func discontinuity() {
        held.removeAll()
        resyncing = false
        counters.removeAll()
        sections.removeAll()
        beforeProgram.removeAll()
        audioPES = PESReader()
        metadataPES = PESReader()
        skippedSince = nil
        skippedBytes = 0
    }

    /// Expects the next bytes to be a new segment of the same stream: continuity counters may
    /// restart (packagers differ), but nothing else is dropped.
    public func segmentBoundary() {
        counters.removeAll()
    }

    // MARK: packets

    /// Demultiplexes the whole packets of `bytes` (and, at the end, what remains); returns how many
    /// bytes were used (the rest waits for more).
    private func demux(_ bytes: UnsafeRawBufferPointer, atEnd: Bool, _ handle: (Event) throws -> Void) throws -> Int {
        let size = Self.packetSize
        var offset = 0
        while bytes.count - offset >= size || (atEnd && offset < bytes.count) {
            if bytes[offset] != 0x47 || resyncing {
                // Lost sync: the next offset where three packets (or what is left) start with 0x47.
                // Until one is found, a 0x47 at the start of what was kept proves nothing either
                // (so the outcome does not depend on where the bytes were cut).
                guard let found = resync(bytes, from: offset, includingStart: bytes[offset] == 0x47, atEnd: atEnd) else {
                    // Undecided: keep from the last 2 packets' worth, or drop all at the end.
                    let keep = atEnd ? bytes.count : max(offset, bytes.count - 2 * size)
                    resyncing = !atEnd
                    noteSkipped(keep - offset)
                    try checkJunk()
                    return keep
                }
                resyncing = false
                noteSkipped(found - offset)
                try checkJunk()
                offset = found
                continue
            }
            guard bytes.count - offset >= size else {
                // At the end with less than a packet: nothing to do with it.
                position += Int64(bytes.count - offset)
                return bytes.count
            }
            endSkip()
            try packet(UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + size)]), handle)
            offset += size
            position += Int64(size)
        }
        return offset
    }

    private func resync(_ bytes: UnsafeRawBufferPointer, from: Int, includingStart: Bool, atEnd: Bool) -> Int? {
        let size = Self.packetSize
        var candidate = includingStart ? from : from + 1
        while candidate < bytes.count {
            if bytes[candidate] == 0x47 {
                var inStep = true
                var k = 1
                while k < 3 {
                    let at = candidate + k * size
                    if at >= bytes.count {
                        if !atEnd { return nil }   // undecided until more arrives
                        break
                    }
                    if bytes[at] != 0x47 { inStep = false; break }
                    k += 1
                }
                if inStep { return candidate }
            }
            candidate += 1
        }
        return nil
    }

    private func noteSkipped(_ count: Int) {
        guard count > 0 else { return }
        if skippedSince == nil { skippedSince = position }
        skippedBytes += count
        position += Int64(count)
    }

    private func checkJunk() throws {
        if skippedBytes > 64 * 1024 {
            throw AudioFileStreamError(.unsupportedFileType, .mpegTransportStream, skippedSince ?? position,
                "no transport packet sync (0x47 every 188 bytes) in \(skippedBytes) bytes")
        }
    }

    private func endSkip() {
        guard let since = skippedSince else { return }
        warn(.invalidData, since, "lost sync: skipped \(skippedBytes) bytes to the next transport packet")
        skippedSince = nil
        skippedBytes = 0
    }

    private func packet(_ p: UnsafeRawBufferPointer, _ handle: (Event) throws -> Void) throws {
        let errorIndicator = p[1] & 0x80 != 0
        let unitStart = p[1] & 0x40 != 0
        let pid = Int(p[1] & 0x1F) << 8 | Int(p[2])
        let scrambling = p[3] >> 6
        let adaptation = (p[3] >> 4) & 3
        let counter = p[3] & 0x0F
        if audio == nil {
            packetsWithoutProgram += 1
            if packetsWithoutProgram > Self.packetsToFindProgram {
                throw AudioFileStreamError(.noAudio, .mpegTransportStream, position, programMissing())
            }
        }
        guard pid != 0x1FFF else { return }   // null packets
        if audio == nil && pid != 0 && pid != pmtPID {
            beforeProgram.append((position, Array(p)))
            return
        }
        var payloadStart = 4
        var discontinuityIndicator = false
        if adaptation & 2 != 0 {
            let length = Int(p[4])
            if length > 0 { discontinuityIndicator = p[5] & 0x80 != 0 }
            payloadStart = 5 + length
            if payloadStart > 188 {
                warn(.invalidData, position, "PID \(pid): adaptation field of \(length) bytes does not fit its packet; packet dropped")
                return
            }
        }
        let hasPayload = adaptation & 1 != 0 && payloadStart < 188
        // Continuity: counted on packets with a payload.
        if adaptation & 1 != 0 {
            if let last = counters[pid], !discontinuityIndicator {
                if counter == last { return }   // a repeated packet
                let expected = (last + 1) & 0x0F
                if counter != expected {
                    let lost = Int((counter &- expected) & 0x0F)
                    warn(.invalidData, position, "PID \(pid): continuity counter \(counter) after \(last): \(lost) packet(s) lost")
                    try lostPackets(pid: pid, count: lost, handle)
                }
            }
            counters[pid] = counter
        }
        if errorIndicator {
            warn(.invalidData, position, "PID \(pid): the transport error indicator is set; packet dropped")
            try lostPackets(pid: pid, count: 1, handle)
            return
        }
        guard hasPayload else { return }
        let payload = UnsafeRawBufferPointer(rebasing: p[payloadStart...])
        if pid == 0 || pid == pmtPID {
            try section(pid: pid, unitStart: unitStart, payload, handle)
        } else if pid == audio?.pid {
            if scrambling != 0 {
                throw AudioFileStreamError(.unsupportedDataFormat, .mpegTransportStream, position,
                    "the audio stream (PID \(pid)) is scrambled (transport_scrambling_control \(scrambling))")
            }
            try audioPayload(unitStart: unitStart, payload, handle)
        } else if pid == metadataStream?.pid {
            try metadataPayload(unitStart: unitStart, payload, handle)
        }
    }

    private func lostPackets(pid: Int, count: Int, _ handle: (Event) throws -> Void) throws {
        if pid == audio?.pid {
            // The rest of the PES in progress still follows (the audio parser finds the next frame
            // in it), but its declared length no longer tells where it ends; a PES whose header was
            // cut is dropped up to the next one.
            audioPES.lostBytes()
            try handle(.discontinuity(esOffset: esOffset, lostPackets: count))
        } else if pid == metadataStream?.pid {
            metadataPES.reset()
        } else {
            sections[pid] = nil
        }
    }

    private func audioPayload(unitStart: Bool, _ payload: UnsafeRawBufferPointer, _ handle: (Event) throws -> Void) throws {
        let progress: PESHeader
        if unitStart {
            progress = audioPES.start(payload)
        } else {
            switch audioPES.state {
            case .idle: return   // the rest of a PES whose start was lost
            case .header: progress = audioPES.continueHeader(payload)
            case .payload:
                let bytes = audioPES.clip(Array(payload))
                try emitAudio(bytes, handle)
                return
            }
        }
        switch progress {
        case .needMore:
            return
        case .invalid(let why):
            warn(.invalidData, position, "audio PES (PID \(audio?.pid ?? 0)): \(why); its bytes were dropped")
            try handle(.discontinuity(esOffset: esOffset, lostPackets: 0))
        case .header(_, let pts, _):
            try handle(.pesStart(esOffset: esOffset, pts: pts.map(unwrap)))
            try emitAudio(audioPES.takePayload(), handle)
        }
    }

    private func emitAudio(_ bytes: [UInt8], _ handle: (Event) throws -> Void) throws {
        guard !bytes.isEmpty else { return }
        esOffset += Int64(bytes.count)
        try handle(.audio(bytes))
    }

    private func metadataPayload(unitStart: Bool, _ payload: UnsafeRawBufferPointer, _ handle: (Event) throws -> Void) throws {
        if unitStart {
            try flushMetadata(handle)
            _ = metadataPES.start(payload)
        } else {
            switch metadataPES.state {
            case .idle: return
            case .header: _ = metadataPES.continueHeader(payload)
            case .payload: metadataPES.gather(payload)
            }
        }
        if metadataPES.state == .idle { return }
        if metadataPES.isComplete { try flushMetadata(handle) }
    }

    private func flushMetadata(_ handle: (Event) throws -> Void) throws {
        if metadataPES.state == .payload {
            let pts = metadataPES.pts.map(unwrap)
            let bytes = metadataPES.takePayload()
            if !bytes.isEmpty { try handle(.metadata(pts: pts, bytes: bytes)) }
        }
        metadataPES.reset()
    }

    /// A 33-bit timestamp made monotonic across its wrap (every 26.5 hours).
    private func unwrap(_ pts: Int64) -> Int64 {
        guard let last = lastPTS else { lastPTS = pts; return pts }
        let period: Int64 = 1 << 33
        var value = (last / period) * period + pts
        if value < last - period / 2 { value += period } else if value > last + period / 2 { value -= period }
        if value < 0 { value += period }
        lastPTS = value
        return value
    }

    // MARK: PSI

    private func section(pid: Int, unitStart: Bool, _ payload: UnsafeRawBufferPointer, _ handle: (Event) throws -> Void) throws {
        var assembler = sections[pid] ?? SectionAssembler()
        defer { sections[pid] = assembler }
        var data = payload[...]
        if unitStart {
            guard let pointer = data.first else { return }
            data = data.dropFirst()
            let pointerEnd = data.startIndex + Int(pointer)
            guard pointerEnd <= data.endIndex else {
                warn(.invalidData, position, "PID \(pid): pointer field \(pointer) points past its packet; section dropped")
                assembler = SectionAssembler()
                return
            }
            // The bytes before the pointer finish the section in progress.
            if assembler.isGathering {
                assembler.append(UnsafeRawBufferPointer(rebasing: data[..<pointerEnd]))
                if let complete = assembler.take() { try table(pid: pid, complete, handle) }
            }
            assembler = SectionAssembler()
            data = data[pointerEnd...]
            assembler.begin()
        } else if !assembler.isGathering {
            return
        }
        assembler.append(UnsafeRawBufferPointer(rebasing: data))
        // One payload can hold several sections, then stuffing (0xFF).
        while let complete = assembler.take() {
            try table(pid: pid, complete, handle)
        }
    }

    private func table(pid: Int, _ section: [UInt8], _ handle: (Event) throws -> Void) throws {
        guard section.count >= 12 else { return }
        guard MPEGCRC32.checksum(section) == 0 else {
            warn(.invalidData, position, "PID \(pid): a PSI section (table \(section[0])) fails its CRC-32; ignored")
            return
        }
        guard section[5] & 0x01 != 0 else { return }   // not yet applicable (current_next_indicator 0)
        let end = section.count - 4
        if pid == 0, section[0] == 0x00 {
            // PAT: the first program's PMT PID.
            var i = 8
            while i + 4 <= end {
                let program = Int(section[i]) << 8 | Int(section[i + 1])
                let mapPID = Int(section[i + 2] & 0x1F) << 8 | Int(section[i + 3])
                if program != 0 {
                    if pmtPID != mapPID { sections[mapPID] = nil }
                    pmtPID = mapPID
                    try replayBeforeProgram(pids: [mapPID], handle)   // a PMT that came before the PAT
                    return
                }
                i += 4
            }
        } else if pid == pmtPID, section[0] == 0x02 {
            try programMap(section, end: end, handle)
        }
    }

    private func programMap(_ s: [UInt8], end: Int, _ handle: (Event) throws -> Void) throws {
        let infoLength = Int(s[10] & 0x0F) << 8 | Int(s[11])
        var i = 12 + infoLength
        var streams: [ElementaryStream] = []
        while i + 5 <= end {
            let type = s[i]
            let pid = Int(s[i + 1] & 0x1F) << 8 | Int(s[i + 2])
            let esInfo = Int(s[i + 3] & 0x0F) << 8 | Int(s[i + 4])
            let descriptors = (i + 5)..<min(i + 5 + esInfo, end)
            streams.append(ElementaryStream(pid: pid, streamType: type, describedCodec: Self.describedCodec(s, descriptors)))
            i += 5 + esInfo
        }
        programStreams = streams
        let chosen = streams.first { Self.supportedAudioTypes.contains($0.streamType) }
        let metadata = streams.first { $0.streamType == 0x15 }
        guard let chosen else {
            throw AudioFileStreamError(.unsupportedDataFormat, .mpegTransportStream, position, programMissing())
        }
        if chosen != audio {
            if audio != nil {
                warn(.invalidData, position, "the program's audio moved from PID \(audio?.pid ?? 0) to PID \(chosen.pid)")
                try handle(.discontinuity(esOffset: esOffset, lostPackets: 0))
            }
            audio = chosen
            metadataStream = metadata
            audioPES = PESReader()
            try handle(.program(audio: chosen, metadata: metadata))
        }
        metadataStream = metadata
        try replayBeforeProgram(pids: Set([chosen.pid] + (metadata.map { [$0.pid] } ?? [])), handle)
        beforeProgram = []
    }

    /// The held packets of `pids` (see ``beforeProgram``), in order; the others stay held. The
    /// audio's count from its first PES start: what precedes that cannot be placed.
    private func replayBeforeProgram(pids: Set<Int>, _ handle: (Event) throws -> Void) throws {
        guard !beforeProgram.isEmpty else { return }
        var replay: [(position: Int64, packet: [UInt8])] = []
        beforeProgram.removeAll { item in
            let pid = Int(item.packet[1] & 0x1F) << 8 | Int(item.packet[2])
            guard pids.contains(pid) else { return false }
            replay.append(item)
            return true
        }
        let resume = position
        defer { position = resume }
        for (at, bytes) in replay {
            position = at
            try bytes.withUnsafeBytes { try packet($0, handle) }
        }
    }

    private func programMissing() -> String {
        if let known = programStreams.first(where: { $0.describedCodec != nil || [0x81, 0x87, 0x11].contains($0.streamType) }) {
            return "the program's audio is \(Self.describe(known)): recognised, but no decoder in this library plays it"
        }
        if !programStreams.isEmpty {
            let types = programStreams.map { Self.describe($0) }.joined(separator: ", ")
            return "the program holds no MPEG audio or ADTS AAC stream (it has: \(types))"
        }
        if pmtPID != nil { return "no program map table (PMT) on PID \(pmtPID ?? 0) in \(position) bytes" }
        return "no program association table (PAT) in \(position) bytes of transport stream"
    }

    /// The audio codec an elementary stream's descriptors name, if any.
    static func describedCodec(_ s: [UInt8], _ range: Range<Int>) -> String? {
        var i = range.lowerBound
        while i + 2 <= range.upperBound {
            let tag = s[i], length = Int(s[i + 1])
            guard i + 2 + length <= range.upperBound else { return nil }
            switch tag {
            case 0x6A: return "AC-3"
            case 0x7A: return "E-AC-3"
            case 0x7B: return "DTS"
            case 0x05 where length >= 4:
                switch String(decoding: s[(i + 2)..<(i + 6)], as: UTF8.self) {
                case "AC-3": return "AC-3"
                case "EAC3": return "E-AC-3"
                case "DTS1", "DTS2", "DTS3": return "DTS"
                case "Opus": return "Opus"
                default: break
                }
            default: break
            }
            i += 2 + length
        }
        return nil
    }

    /// An elementary stream for messages: its type, and the codec its descriptors name.
    public static func describe(_ stream: ElementaryStream) -> String {
        guard let codec = stream.describedCodec else { return describe(stream.streamType) }
        return "0x\(String(stream.streamType, radix: 16)) \(codec) (not supported)"
    }

    /// A stream type for messages.
    public static func describe(_ type: UInt8) -> String {
        let hex = "0x" + String(type, radix: 16)
        switch type {
        case 0x01, 0x02: return "\(hex) MPEG video"
        case 0x03, 0x04: return "\(hex) MPEG audio"
        case 0x0F: return "\(hex) ADTS AAC"
        case 0x11: return "\(hex) LATM AAC (not supported)"
        case 0x15: return "\(hex) ID3 metadata"
        case 0x1B: return "\(hex) H.264 video"
        case 0x24: return "\(hex) HEVC video"
        case 0x81: return "\(hex) AC-3 (not supported)"
        case 0x87: return "\(hex) E-AC-3 (not supported)"
        case 0xCF: return "\(hex) SAMPLE-AES ADTS AAC (encrypted; not supported)"
        case 0xC1, 0xC2: return "\(hex) SAMPLE-AES AC-3 (encrypted; not supported)"
        case 0xDB: return "\(hex) SAMPLE-AES H.264 video"
        default: return hex
        }
    }

    private func warn(_ code: AudioFileStreamError.Code, _ at: Int64, _ message: String) {
        guard warnings.count < 64 else { return }
        warnings.append(AudioFileStreamError(code, .mpegTransportStream, at, message))
    }
}

/// Gathers one PSI section across packets.
private struct SectionAssembler {
    private var bytes: [UInt8] = []
    private(set) var isGathering = false

    mutating func begin() {
        bytes.removeAll(keepingCapacity: true)
        isGathering = true
    }

    mutating func append(_ data: UnsafeRawBufferPointer) {
        guard isGathering else { return }
        bytes.append(contentsOf: data)
        if bytes.count > 4096 + 3 { isGathering = false; bytes.removeAll() }   // longer than any PSI section
    }

    /// The next complete section, if one has arrived; stops at stuffing.
    mutating func take() -> [UInt8]? {
        guard isGathering, bytes.count >= 3 else { return nil }
        if bytes[0] == 0xFF { isGathering = false; bytes.removeAll(); return nil }
        let length = 3 + (Int(bytes[1] & 0x0F) << 8 | Int(bytes[2]))
        guard bytes.count >= length else { return nil }
        let section = Array(bytes[..<length])
        bytes.removeFirst(length)
        if bytes.isEmpty { isGathering = false }
        return section
    }
}

/// What a PES header says, once enough of it has arrived.
enum PESHeader: Equatable {
    case needMore
    case invalid(String)
    /// The header's length, the presentation time (90 kHz, 33 bits) and the whole PES's length
    /// when declared (0 = unbounded).
    case header(length: Int, pts: Int64?, total: Int?)

    static func parse(_ b: [UInt8]) -> PESHeader {
        guard b.count >= 6 else { return .needMore }
        guard b[0] == 0, b[1] == 0, b[2] == 1 else { return .invalid("no PES start code") }
        let declared = Int(b[4]) << 8 | Int(b[5])
        let total = declared > 0 ? declared + 6 : nil
        // Stream ids without the optional header (padding, private 2, ECM, EMM, DSM-CC, H.222.1 E).
        if [0xBC, 0xBE, 0xBF, 0xF0, 0xF1, 0xF2, 0xF8, 0xFF].contains(b[3]) { return .header(length: 6, pts: nil, total: total) }
        guard b.count >= 9 else { return .needMore }
        guard b[6] & 0xC0 == 0x80 else { return .invalid("the PES header's marker bits are wrong") }
        let length = 9 + Int(b[8])
        if let total, total < length { return .invalid("the PES is shorter (\(total) bytes) than its header (\(length))") }
        guard b.count >= length else { return .needMore }
        var pts: Int64?
        if b[7] & 0x80 != 0 {
            guard length >= 14 else { return .invalid("the PES header says it has a PTS but is only \(length) bytes") }
            pts = Int64(b[9] >> 1 & 0x07) << 30 | Int64(b[10]) << 22 | Int64(b[11] >> 1) << 15 | Int64(b[12]) << 7 | Int64(b[13] >> 1)
        }
        return .header(length: length, pts: pts, total: total)
    }
}

/// One PES being read: its header gathered until complete, then its payload (handed over as it
/// comes for audio, gathered for metadata).
struct PESReader {
    enum State { case idle, header, payload }
    private(set) var state = State.idle
    /// Header bytes so far, or (when gathering) the payload.
    private(set) var bytes: [UInt8] = []
    private(set) var pts: Int64?
    /// Payload bytes still to come when the PES declared its length.
    private var remaining: Int?

    /// A new PES starts with `data`; returns the payload that came with a complete header.
    mutating func start(_ data: UnsafeRawBufferPointer) -> PESHeader {
        state = .header
        bytes = Array(data)
        pts = nil
        remaining = nil
        return headerProgress()
    }

    /// More of the header (state `.header`).
    mutating func continueHeader(_ data: UnsafeRawBufferPointer) -> PESHeader {
        bytes.append(contentsOf: data)
        return headerProgress()
    }

    private mutating func headerProgress() -> PESHeader {
        let result = PESHeader.parse(bytes)
        switch result {
        case .needMore:
            if bytes.count > 9 + 255 { state = .idle; return .invalid("the PES header never completes") }
        case .invalid:
            state = .idle
            bytes.removeAll()
        case .header(let length, let pts, let total):
            self.pts = pts
            state = .payload
            bytes.removeFirst(min(length, bytes.count))
            if let total { remaining = total - length }
            bytes = clip(bytes)
        }
        return result
    }

    /// Limits payload bytes to what the PES declared (anything after is not this stream's).
    mutating func clip(_ data: [UInt8]) -> [UInt8] {
        guard let left = remaining else { return data }
        let kept = min(left, data.count)
        remaining = left - kept
        return kept == data.count ? data : Array(data[..<kept])
    }

    /// Whether the declared length has all arrived.
    var isComplete: Bool { state == .payload && remaining == 0 }

    /// Takes the payload gathered so far (clearing it).
    mutating func takePayload() -> [UInt8] {
        defer { bytes.removeAll() }
        return bytes
    }

    mutating func gather(_ data: UnsafeRawBufferPointer) {
        bytes.append(contentsOf: clip(Array(data)))
    }

    mutating func reset() {
        self = PESReader()
    }

    /// Bytes of this PES were lost: its payload goes on unbounded (the next PES ends it); one
    /// whose header was not complete is dropped.
    mutating func lostBytes() {
        if state == .payload { remaining = nil } else { reset() }
    }
}
