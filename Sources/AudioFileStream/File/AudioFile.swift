#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import BufferQueue

/// A random-access reader over an audio file: Apple's AudioFile, read-only.
///
/// Opening parses the whole file once with ``AudioFileStream`` (seeking where the container asks,
/// so MP4 files with the index at the end work) and keeps an index of where every packet lies, not
/// the audio itself. ``readPackets(from:count:)`` then reads any run of packets. (An Ogg file's
/// packets are spread over pages: where each stretch of them lies is indexed, about one entry a
/// page. A transport stream's audio is kept in memory.)
///
/// It does not change once opened and reads with `pread`, so several threads may read one file at
/// once (AudioPlayback's `ConcurrentFileRenderer` does).
public final class AudioFile: Sendable {
    /// The path opened, or the name given to ``init(name:size:fileTypeHint:read:)``.
    public let path: String
    /// The container.
    public let fileType: AudioFileType
    /// The file's size in bytes.
    public let fileSize: Int64
    /// The format of the packets; for AAC the core (LC) reading, see ``formatList``.
    public let dataFormat: AudioStreamDescription
    /// Every reading of the format, best first (HE-AAC v2, HE-AAC, AAC-LC for an AAC file).
    public let formatList: [AudioStreamDescription]
    /// What the decoder needs besides the packets.
    public let magicCookie: [UInt8]?
    /// The byte offset of the first audio packet.
    public let dataOffset: Int64?
    /// Bytes of audio data.
    public let audioDataByteCount: Int64
    /// Bits per second, when the container says or it can be computed.
    public let bitRate: Int?
    /// The largest packet in bytes.
    public let maximumPacketSize: Int?
    /// The speakers of the channels, when the container or the codec says.
    public let channelLayout: AudioChannelLayout?
    /// The valid frames, priming and remainder; nil for linear PCM, whose valid frames are all its frames (``AudioFile/totalFrames``).
    public let packetTableInfo: AudioFilePacketTableInfo?
    /// Packets a decoder needs before a packet, when the container says (MP4 `roll`; negative: before).
    public let packetRollDistance: Int?
    /// Tags, pictures and cue sheet.
    public let metadata: AudioFileMetadata
    /// The links of a chained stream (Ogg), the first included; empty for other containers.
    /// Each link is its own encode: ``AudioStreamLink/primingFrames`` and
    /// ``AudioStreamLink/validFrames`` trim it, and the overall ``packetTableInfo`` counts all
    /// links' valid frames.
    public let links: [AudioStreamLink]
    /// Problems that did not stop reading (skipped junk, a cut last frame, a header that miscounts).
    public let warnings: [AudioFileStreamError]
    /// The problem that ended parsing early, if any; the packets before it are readable.
    public let damage: AudioFileStreamError?

    private let source: Bytes
    /// Variable-size packets: offset, size, frames.
    private let index: PacketIndex
    /// Constant-size packets: runs of (first packet, offset, count).
    private let runs: [(first: Int64, offset: Int64, count: Int64)]
    /// The packets' bytes when the file does not hold them contiguously (a transport stream);
    /// `index` then points into this.
    private let resident: [UInt8]?
    /// Where an Ogg file's packets lie: `index` then holds offsets into their bytes back to back,
    /// and this maps those to the stretches of the file's pages.
    private let pieces: PieceTable?
    /// Packets in the file.
    public let packetCount: Int64

    /// Opens and indexes a file.
    /// - Throws: ``AudioFileStreamError`` when the file cannot be read or holds no audio that can
    ///   be played. Damage after some packets is reported in ``damage`` instead.
    public convenience init(path: String, fileTypeHint: AudioFileType? = nil) throws {
        let fd: FileDescriptor
        do { fd = try FileDescriptor.open(path, O_RDONLY) } catch {
            throw AudioFileStreamError(.invalidOperation, fileTypeHint, 0, "cannot open the file: \(error.reason)").about(path)
        }
        let size: Int64
        do { size = Int64(try fd.status().st_size) } catch {
            try? fd.close()
            throw AudioFileStreamError(.invalidOperation, fileTypeHint, 0, "cannot read the file's size: \(error.reason)").about(path)
        }
        try self.init(name: path, size: size, bytes: .file(fd), fileTypeHint: fileTypeHint)
    }

    /// Opens and indexes audio that another reader holds (a resource in memory, a file of the
    /// caller's, Apple's `AudioFileOpenWithCallbacks`): `read` copies up to `into.count` bytes
    /// from `offset` and returns how many (0 at the end); it is called again for packets as they
    /// are read, from any thread, so it must be safe to call concurrently.
    /// - Parameters:
    ///   - name: how messages name the audio (``path``).
    ///   - size: the audio's size in bytes.
    ///   - fileTypeHint: the container to try first (the sniffer still checks the bytes).
    ///   - read: copies bytes from an offset into a buffer and returns how many.
    /// - Throws: what `read` throws (as an ``AudioFileStreamError``), and what ``init(path:fileTypeHint:)`` does.
    public convenience init(name: String, size: Int64, fileTypeHint: AudioFileType? = nil,
                            read: @escaping @Sendable (_ offset: Int64, _ into: UnsafeMutableRawBufferPointer) throws -> Int) throws {
        try self.init(name: name, size: size, bytes: .reader(read), fileTypeHint: fileTypeHint)
    }

    /// Where the bytes come from.
    private enum Bytes: Sendable {
        case file(FileDescriptor)
        case reader(@Sendable (Int64, UnsafeMutableRawBufferPointer) throws -> Int)

        func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws -> Int {
            switch self {
            case .file(let fd):
                return try fd.read(into: buffer, at: offset)
            case .reader(let read): return try read(offset, buffer)
            }
        }

        /// Fills `buffer` unless the bytes end first; returns how many were read.
        func readAll(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws -> Int {
            switch self {
            case .file(let fd):
                return try fd.readAll(into: buffer, at: offset)
            case .reader(let read):
                var done = 0
                while done < buffer.count {
                    let count = try read(offset + Int64(done), UnsafeMutableRawBufferPointer(rebasing: buffer[done...]))
                    if count <= 0 { break }
                    done += count
                }
                return done
            }
        }

        func close() {
            if case .file(let fd) = self { try? fd.close() }
        }
    }

    private init(name path: String, size: Int64, bytes source: Bytes, fileTypeHint: AudioFileType?) throws {
        self.path = path
        self.source = source
        fileSize = size

        let driver = AudioFileStreamDriver(fileTypeHint: fileTypeHint)
        let stream = driver.stream
        // Only where each packet is: its bytes are read again when played.
        stream.keepsPacketBytes = false
        var index = PacketIndex()
        let sizeOfFile = fileSize
        var runs: [(Int64, Int64, Int64)] = []
        var damage: AudioFileStreamError?
        var resident: [UInt8] = []
        var pieces = PieceTable()
        // The packets' bytes back to back so far (Ogg): the offset of the next packet among them.
        var packetBytes: Int64 = 0
        func handle(_ event: AudioFileStreamEvent) {
            guard case .packets(let packets) = event else { return }
            if stream.fileType?.locatesPacketPieces == true {
                // (The pieces taken may run ahead of this batch, into batches still to come: only
                // their order matters.)
                for piece in stream.takePacketPieces() { pieces.append(fileOffset: piece.offset, length: piece.length) }
                let perPacket = stream.dataFormat?.framesPerPacket ?? 0
                for description in packets.descriptions {
                    index.append(offset: packetBytes, size: description.dataByteSize,
                                 frames: description.variableFramesInPacket > 0 ? description.variableFramesInPacket : perPacket)
                    packetBytes += Int64(description.dataByteSize)
                }
                return
            }
            if stream.fileType?.interleavesPacketBytes == true {
                // Packet bytes are spread over transport packets or Ogg pages: keep them.
                let base = Int64(resident.count)
                resident.append(contentsOf: packets.data)
                let perPacket = stream.dataFormat?.framesPerPacket ?? 0
                for description in packets.descriptions {
                    index.append(offset: base + Int64(description.startOffset), size: description.dataByteSize,
                                 frames: description.variableFramesInPacket > 0 ? description.variableFramesInPacket : perPacket)
                }
                return
            }
            if packets.descriptions.isEmpty {
                let offset = packets.fileOffsets.first ?? 0
                let count = Int64(packets.packetCount)
                // The stream hands packets over chunk by chunk: contiguous chunks make one run,
                // so a plain data chunk is one run however large the file.
                if let last = runs.last, last.0 + last.2 == packets.firstPacketIndex,
                   last.1 + last.2 * Int64(stream.dataFormat?.bytesPerPacket ?? -1) == offset {
                    runs[runs.count - 1].2 += count
                } else {
                    runs.append((packets.firstPacketIndex, offset, count))
                }
            } else {
                // The container's packet count, when it gives one, sizes the index once (a packet
                // takes at least a byte, so a count beyond the file's size is not believed).
                if index.isEmpty, let expected = stream.audioDataPacketCount, expected > 0, expected <= sizeOfFile {
                    index.reserve(Int(expected))
                }
                let perPacket = stream.dataFormat?.framesPerPacket ?? 0
                for (description, offset) in zip(packets.descriptions, packets.fileOffsets) {
                    index.append(offset: offset, size: description.dataByteSize,
                                 frames: description.variableFramesInPacket > 0 ? description.variableFramesInPacket : perPacket)
                }
            }
        }
        do {
            try driver.run(read: { offset, into in
                do { return try source.read(into: UnsafeMutableRawBufferPointer(into), at: offset) } catch let error as SystemError {
                    throw AudioFileStreamError(.invalidOperation, stream.fileType, offset, "reading failed: \(error.reason)")
                } catch let error as AudioFileStreamError {
                    throw error
                } catch {
                    throw AudioFileStreamError(.invalidOperation, stream.fileType, offset, "reading failed: \(error)")
                }
            }, handle)
        } catch let error as AudioFileStreamError {
            guard stream.isReadyToProducePackets, !(index.isEmpty && runs.isEmpty) else {
                source.close()
                throw error.about(path)
            }
            damage = error.about(path)
        } catch {
            source.close()
            throw error
        }
        guard let format = stream.dataFormat, let type = stream.fileType else {
            source.close()
            throw AudioFileStreamError(.noAudio, stream.fileType, 0, "no audio format found").about(path)
        }
        fileType = type
        dataFormat = format
        formatList = stream.formatList
        magicCookie = stream.magicCookie
        dataOffset = stream.dataOffset
        bitRate = stream.bitRate
        // The whole file was read: the largest packet is known (a fragmented MP4 cannot say up front).
        maximumPacketSize = max(stream.maximumPacketSize ?? 0, index.largestSize, format.bytesPerPacket)
        channelLayout = stream.channelLayout
        packetTableInfo = stream.packetTableInfo
        packetRollDistance = stream.packetRollDistance
        metadata = stream.metadata
        links = stream.links
        warnings = stream.warnings.map { $0.about(path) }
        self.damage = damage
        self.index = index
        self.runs = runs
        self.resident = type.interleavesPacketBytes && !type.locatesPacketPieces ? resident : nil
        self.pieces = type.locatesPacketPieces ? pieces : nil
        packetCount = index.isEmpty ? runs.reduce(0) { $0 + $1.2 } : Int64(index.count)
        audioDataByteCount = index.isEmpty ? packetCount * Int64(max(format.bytesPerPacket, 0)) : index.totalBytes
    }

    deinit { source.close() }

    /// Decoded frames of every packet together (priming and remainder included).
    public var totalFrames: Int64 {
        index.isEmpty ? packetCount * Int64(max(dataFormat.framesPerPacket, 1)) : index.totalFrames
    }

    /// Decoded frames of the best reading (`formatList.first`) per frame the index counts: 2 for
    /// HE-AAC whose container counts at the core rate (ADTS: 1 024 a packet, where the decoder
    /// gives 2 048), else 1. An MP4 counts in the output rate it found signalled, so 1.
    public var indexFrameScale: Int {
        Self.frameScale(of: formatList.first ?? dataFormat, counted: packetCount > 0 ? frames(ofPacket: 0) : dataFormat.framesPerPacket)
    }

    /// The decoded frames of `format` per frame of a count made in `counted` frames per packet:
    /// 2 for HE-AAC (2048 frames a packet) counted at the core rate (1024), else 1.
    public static func frameScale(of format: AudioStreamDescription, counted: Int) -> Int {
        let declared = format.framesPerPacket
        return declared > counted && counted > 0 && declared % counted == 0 ? declared / counted : 1
    }

    /// Frames of packet `index`.
    public func frames(ofPacket packet: Int64) -> Int {
        index.isEmpty ? max(dataFormat.framesPerPacket, 1) : index.frames(Int(packet))
    }

    /// Decoded frames before packet `index` (priming included), in the container's frames.
    public func frame(forPacket packet: Int64) -> Int64 {
        let end = min(max(packet, 0), packetCount)
        if index.isEmpty { return end * Int64(max(dataFormat.framesPerPacket, 1)) }
        return index.frames(before: Int(end))
    }

    /// The packet holding decoded frame `frame` (priming included, the container's frames) and
    /// the frame's offset in it; nil past the last packet.
    public func packet(forFrame frame: Int64) -> (packet: Int64, frameOffset: Int)? {
        guard frame >= 0 else { return nil }
        if index.isEmpty {
            let perPacket = Int64(max(dataFormat.framesPerPacket, 1))
            let packet = frame / perPacket
            return packet < packetCount ? (packet, Int(frame % perPacket)) : nil
        }
        return index.packet(forFrame: frame)
    }

    /// Byte offset of packet `index` in the file.
    public func byteOffset(ofPacket packet: Int64) -> Int64? {
        guard packet >= 0, packet < packetCount else { return nil }
        if !index.isEmpty { return index.offset(Int(packet)) }
        return run(containing: packet)?.offset
    }

    /// Constant-size packets: the byte offset of packet `index` and the packet after its run.
    private func run(containing index: Int64) -> (offset: Int64, end: Int64)? {
        // Runs are in packet order: binary search.
        var low = 0, high = runs.count
        while low < high {
            let middle = (low + high) / 2
            if runs[middle].first + runs[middle].count <= index { low = middle + 1 } else { high = middle }
        }
        guard low < runs.count, index >= runs[low].first else { return nil }
        return (runs[low].offset + (index - runs[low].first) * Int64(dataFormat.bytesPerPacket), runs[low].first + runs[low].count)
    }

    /// Reads `count` packets from `first` (fewer at the end of the file).
    public func readPackets(from first: Int64, count: Int) throws -> AudioFilePackets {
        let end = min(first + Int64(max(count, 0)), packetCount)
        guard first >= 0, first <= packetCount else {
            throw AudioFileStreamError(.invalidOperation, fileType, 0, "packet \(first) is past the last packet (\(packetCount))").about(path)
        }
        var packets = AudioFilePackets(data: [], descriptions: [], fileOffsets: [], firstPacketIndex: first, packetCount: Int(end - first))
        guard end > first else { return packets }
        if index.isEmpty {
            let bytesPerPacket = Int64(dataFormat.bytesPerPacket)
            var packet = first
            while packet < end {
                guard let (offset, runEnd) = run(containing: packet) else { break }
                let run = min(end, runEnd) - 1
                try read(at: offset, count: Int((run - packet + 1) * bytesPerPacket), into: &packets.data)
                if packets.fileOffsets.isEmpty { packets.fileOffsets.append(offset) }
                packet = run + 1
            }
            return packets
        }
        let perPacket = dataFormat.framesPerPacket
        var packet = Int(first)
        while packet < Int(end) {
            // Packets that follow each other are read in one call; their offsets are counted on.
            let last = min(Int(end), index.nextBreak(after: packet) ?? Int(end)) - 1
            var offset = index.offset(packet), bytes = 0
            for current in packet...last { bytes += index.size(current) }
            let start = packets.data.count
            try read(at: offset, count: bytes, into: &packets.data)
            var position = start
            for current in packet...last {
                let frameCount = index.frames(current), size = index.size(current)
                packets.descriptions.append(AudioPacketDescription(startOffset: position, variableFramesInPacket: frameCount != perPacket ? frameCount : 0,
                                                                   dataByteSize: size))
                packets.fileOffsets.append(offset)
                position += size
                offset += Int64(size)
            }
            packet = last + 1
        }
        return packets
    }

    /// Up to `count` bytes of the file from `offset` (fewer at its end): the C API's
    /// `AudioFileReadBytes`. A file whose packets are interleaved with the container's own bytes
    /// (Ogg, a transport stream) reads its packets' bytes back to back.
    package func readBytes(at offset: Int64, count: Int) throws -> [UInt8] {
        guard offset >= 0, count > 0 else { return [] }
        if let resident {
            guard offset < Int64(resident.count) else { return [] }
            return Array(resident[Int(offset)..<min(resident.count, Int(offset) + count)])
        }
        if let pieces {
            guard offset < pieces.totalLength else { return [] }
            var data: [UInt8] = []
            try read(at: offset, count: Int(min(Int64(count), pieces.totalLength - offset)), into: &data)
            return data
        }
        let available = Int(max(0, min(Int64(count), fileSize - offset)))
        var data: [UInt8] = []
        if available > 0 { try read(at: offset, count: available, into: &data) }
        return data
    }

    private func read(at offset: Int64, count: Int, into data: inout [UInt8]) throws {
        if let resident {
            data.append(contentsOf: resident[Int(offset)..<(Int(offset) + count)])
            return
        }
        if let pieces {
            // The packets' bytes back to back: each stretch read from its page.
            for stretch in pieces.stretches(from: offset, count: count) {
                try readFile(at: stretch.fileOffset, count: stretch.length, into: &data)
            }
            return
        }
        try readFile(at: offset, count: count, into: &data)
    }

    private func readFile(at offset: Int64, count: Int, into data: inout [UInt8]) throws {
        let start = data.count
        data.append(contentsOf: repeatElement(0, count: count))
        var done = 0
        var failure: String?
        data.withUnsafeMutableBytes { bytes in
            do {
                done = try source.readAll(into: UnsafeMutableRawBufferPointer(rebasing: bytes[start...]), at: offset)
            } catch let error as SystemError {
                failure = error.reason
            } catch {
                failure = "\(error)"
            }
        }
        if let failure {
            throw AudioFileStreamError(.invalidOperation, fileType, offset, "reading \(count) bytes at \(offset) failed: \(failure)").about(path)
        }
        if done < count {
            throw AudioFileStreamError(.truncated, fileType, offset + Int64(done), "reading \(count) bytes at \(offset): the file ends after \(done)").about(path)
        }
    }
}

/// Where an Ogg file's packets lie: their bytes back to back (a "packet offset") mapped to the
/// stretches of the file's pages that hold them. Stretches that follow each other in both are one
/// entry, so a file costs about one entry a page.
struct PieceTable: Sendable {
    /// Packet offset, file offset and length of each stretch, in packet-offset order.
    private var starts: [Int64] = []
    private var fileOffsets: [Int64] = []
    private var lengths: [Int32] = []
    private(set) var totalLength: Int64 = 0

    mutating func append(fileOffset: Int64, length: Int) {
        guard length > 0 else { return }
        if let last = lengths.indices.last, fileOffsets[last] + Int64(lengths[last]) == fileOffset, Int64(lengths[last]) + Int64(length) <= Int64(Int32.max) {
            lengths[last] += Int32(length)
        } else {
            starts.append(totalLength)
            fileOffsets.append(fileOffset)
            lengths.append(Int32(length))
        }
        totalLength += Int64(length)
    }

    /// The file stretches holding `count` bytes from packet offset `offset`, in order.
    func stretches(from offset: Int64, count: Int) -> [(fileOffset: Int64, length: Int)] {
        guard count > 0, offset >= 0, offset < totalLength else { return [] }
        // The last stretch starting at or before `offset`.
        var low = 0, high = starts.count
        while low + 1 < high {
            let middle = (low + high) / 2
            if starts[middle] <= offset { low = middle } else { high = middle }
        }
        var out: [(fileOffset: Int64, length: Int)] = []
        var at = offset, left = Int64(count), k = low
        while left > 0, k < starts.count {
            let into = at - starts[k]
            let take = min(Int64(lengths[k]) - into, left)
            out.append((fileOffsets[k] + into, Int(take)))
            left -= take
            at += take
            k += 1
        }
        return out
    }
}

