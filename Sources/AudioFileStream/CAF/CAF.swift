import BufferQueue

/// Core Audio Format: `desc`, `kuki`, `pakt`, `chan`, `data` chunks (big-endian, 64-bit sizes).
final class CAFParser: ContainerParser, PacketLocating {
    private let seekable: Bool
    private var headerDone = false
    private var format: AudioStreamDescription?
    private var pending: (type: String, size: Int, start: Int64)?
    /// Packet sizes and frame counts from `pakt` (variable-size formats).
    private var packetSizes: [Int32] = []
    private var packetFrames: [Int32] = []
    private var packetOffsets: [Int64] = []
    private var paktSeen = false
    private var dataStart: Int64?
    private var dataEnd: Int64?
    private var inData = false
    private var nextPacket = 0
    private var constantPacketsSeen: Int64 = 0
    /// A data chunk met before the packet table it needs (ffmpeg writes `pakt` after `data` for
    /// ALAC): where its packets start and end, to come back to once `pakt` is read.
    private var deferredData: (start: Int64, end: Int64)?
    /// Largest chunk (other than `data`) read into memory.
    static let chunkCap = 64 << 20

    init(seekable: Bool) { self.seekable = seekable }

    func parse(_ input: ByteInput, _ out: StreamOutput) throws {
        if !headerDone {
            guard input.available >= 8 else { return }
            let version = input.u16be(4)
            guard version == 1 else {
                throw AudioFileStreamError(.unsupportedFileType, .caf, 4, "CAF version \(version) is not supported (1 is)")
            }
            input.consume(8)
            headerDone = true
        }
        while true {
            if input.skipPending > 0 { return }   // the next decision needs the bytes after the skip
            if inData {
                try emitData(input, out)
                if inData { return }
                continue
            }
            if let chunk = pending {
                guard input.available >= chunk.size else { return }
                let body = input.bytes(0, chunk.size)
                input.consume(chunk.size)
                pending = nil
                try read(chunk.type, body, at: chunk.start, out)
                if chunk.type == "pakt", let deferred = deferredData, let format {
                    // The table came after the audio: go back to the first packet, once.
                    deferredData = nil
                    dataStart = deferred.start
                    dataEnd = deferred.end
                    inData = true
                    announce(format, out)
                    input.reset(to: deferred.start)
                    out.requestSeek(to: deferred.start)
                    return
                }
                continue
            }
            guard input.available >= 12 else { return }
            let type = input.tag(0)
            let size = Int64(bitPattern: input.u64be(4))
            let start = input.position
            input.consume(12)
            if type == "data" {
                guard let format else {
                    throw AudioFileStreamError(.invalidData, .caf, start, "the data chunk comes before the desc chunk")
                }
                guard size == -1 || (size >= 4 && size < 1 << 52) else {
                    throw AudioFileStreamError(.invalidData, .caf, start, "the data chunk is \(size) bytes, shorter than its edit count")
                }
                if format.bytesPerPacket == 0 && !paktSeen {
                    guard seekable, size != -1 else {
                        throw AudioFileStreamError(.indexAfterMediaData, .caf, start, seekable
                            ? "the data chunk runs to the end of the file and no packet table (pakt) came before it; packets of varying size cannot be found without it"
                            : "the packet table (pakt) follows the audio data; packets of varying size cannot be found without it, and the source cannot seek. Read it from a seekable source")
                    }
                    deferredData = (start + 16, start + 12 + size)
                    input.reset(to: start + 12 + size)
                    out.requestSeek(to: start + 12 + size)
                    return
                }
                input.skip(4)   // edit count
                dataStart = start + 16
                dataEnd = size == -1 ? nil : start + 12 + size
                inData = true
                announce(format, out)
                continue
            }
            guard size >= 0, size < 1 << 52 else {
                throw AudioFileStreamError(.invalidData, .caf, start, "the \(type) chunk has an impossible size (\(size))")
            }
            switch type {
            case "pakt" where paktSeen:
                input.skip(size)   // read already: it followed the data chunk
            case "desc", "kuki", "pakt", "chan", "info":
                guard size <= Int64(Self.chunkCap) else {
                    throw AudioFileStreamError(.tooLarge, .caf, start, "the \(type) chunk claims \(size) bytes; at most \(Self.chunkCap) are read")
                }
                pending = (type, Int(size), start)
            default:
                input.skip(size)
            }
        }
    }

    private func read(_ type: String, _ body: [UInt8], at start: Int64, _ out: StreamOutput) throws {
        var r = FieldReader(body, base: start + 12, container: .caf)
        switch type {
        case "desc":
            let rate = Double(bitPattern: try r.u64be("the sample rate"))
            let formatID = AudioFormatID(rawValue: try r.u32be("the format id"))
            let flags = try r.u32be("the format flags")
            let bytesPerPacket = Int(try r.u32be()), framesPerPacket = Int(try r.u32be())
            let channels = Int(try r.u32be()), bits = Int(try r.u32be())
            guard rate > 0, rate <= 1_536_000, (1...64).contains(channels) else {
                throw AudioFileStreamError(.invalidData, .caf, start, "desc says \(rate) Hz and \(channels) channels")
            }
            var format: AudioStreamDescription
            if formatID == .linearPCM {
                format = .linearPCM(sampleRate: rate, channels: channels, bitsPerChannel: bits, isFloat: flags & 1 != 0, isBigEndian: flags & 2 == 0, // integers are always signed in CAF
                                    bytesPerSample: channels > 0 ? bytesPerPacket / channels : nil, isSigned8: true)
            } else {
                format = AudioStreamDescription(sampleRate: rate, formatID: formatID, bytesPerPacket: bytesPerPacket,
                                                framesPerPacket: framesPerPacket, bytesPerFrame: 0, channelsPerFrame: channels, bitsPerChannel: 0)
            }
            self.format = format
            out.dataFormat = format
            out.formatList = [format]
            out.channelLayout = .default(channels: channels)
        case "chan":
            // Core Audio's layout: channel descriptions, a bitmap (WAVE's speaker bits, the
            // channels in bit order), or a named layout (its channel count in the low 16 bits).
            guard let form = body.withUnsafeBytes({ CoreAudioChannelLayout(bytes: $0, bigEndian: true) }) else {
                throw AudioFileStreamError(.invalidData, .caf, start, "the chan chunk's \(body.count) bytes are fewer than its channel descriptions need")
            }
            let channels = format?.channelsPerFrame ?? 0
            if let layout = form.layout(channels: channels), layout.channelCount == channels { out.channelLayout = layout }
        case "kuki":
            let isAAC = format.map { [.aacLC, .heAAC, .heAACv2].contains($0.formatID) } ?? false
            if isAAC, let (_, config) = audioSpecificConfig(fromESDescriptor: body) { out.magicCookie = config } else { out.magicCookie = body }
            if let format, format.formatID == .appleLossless, let config = ALACSpecificConfig(cookie: body) {
                var described = format
                described.bitsPerChannel = 0
                described.formatFlags = AudioFormatFlags(rawValue: UInt32(Self.alacFlag(bitDepth: config.bitDepth)))
                self.format = described
                out.dataFormat = described
                out.formatList = [described]
            }
            if isAAC, let cookie = out.magicCookie,
               let asc = AudioSpecificConfig(cookie), asc.sbrPresent == true {
                out.formatList = asc.formatList
            }
        case "pakt":
            let packets = try r.u64be("the packet count")
            let valid = Int64(bitPattern: try r.u64be("the valid frame count"))
            let priming = Int(Int32(bitPattern: try r.u32be("the priming frames")))
            let remainder = Int(Int32(bitPattern: try r.u32be("the remainder frames")))
            let variableSize = (format?.bytesPerPacket ?? 0) == 0, variableFrames = (format?.framesPerPacket ?? 0) == 0
            // Every entry takes at least one byte: a count beyond the chunk is a lie, not an allocation.
            guard packets <= UInt64(r.remaining) || !(variableSize || variableFrames), packets <= UInt64(Int32.max) else {
                throw AudioFileStreamError(.invalidData, .caf, start, "pakt claims \(packets) packets but holds only \(r.remaining) bytes of entries")
            }
            if variableSize || variableFrames {
                packetSizes.reserveCapacity(Int(packets))
                for index in 0..<Int(packets) {
                    let size = variableSize ? try r.varint("the size of packet \(index)") : Int64(format?.bytesPerPacket ?? 0)
                    let frames = variableFrames ? try r.varint("the frames of packet \(index)") : Int64(format?.framesPerPacket ?? 0)
                    // ffmpeg ends a FLAC packet table with an entry of 0 bytes after the last frame: no packet.
                    if size == 0, index == Int(packets) - 1, index > 0 {
                        out.warn(AudioFileStreamError(.invalidData, .caf, r.absoluteOffset, "the last pakt entry claims 0 bytes; it is not a packet"))
                        break
                    }
                    guard size > 0, size <= 1 << 20, frames >= 0, frames <= 1 << 20 else {
                        throw AudioFileStreamError(.invalidData, .caf, r.absoluteOffset, "packet \(index) claims \(size) bytes and \(frames) frames")
                    }
                    packetSizes.append(Int32(size))
                    packetFrames.append(Int32(frames))
                }
            }
            paktSeen = true
            if valid > 0 || priming > 0 || remainder > 0 {
                guard priming >= 0, remainder >= 0, valid >= 0 else {
                    throw AudioFileStreamError(.invalidData, .caf, start, "pakt has negative frame counts (\(valid), \(priming), \(remainder))")
                }
                out.packetTableInfo = AudioFilePacketTableInfo(validFrames: valid, primingFrames: priming, remainderFrames: remainder, source: .pakt)
            }
            if packets > 0 { out.audioDataPacketCount = Int64(packets) }
        default:
            break
        }
    }

    /// Opus and FLAC cookies in the form their decoders take (``AudioFormatID/opus``,
    /// ``AudioFormatID/flac``). A CAF without one (as ffmpeg writes them) gets an `OpusHead` made
    /// from the description for mono and stereo, its pre-skip the pakt's priming; FLAC decodes
    /// without STREAMINFO when its frame headers carry the rate and sample size.
    private func normalizeCookie(_ format: AudioStreamDescription, _ out: StreamOutput) {
        switch format.formatID {
        case .opus:
            if let cookie = out.magicCookie, cookie.starts(with: Array("OpusHead".utf8)) { return }
            guard format.channelsPerFrame <= 2 else { return }
            let priming = out.packetTableInfo?.primingFrames ?? 0
            out.magicCookie = OpusHeader(channels: max(format.channelsPerFrame, 1), preSkip: priming, inputSampleRate: Int(format.sampleRate),
                                         outputGain: 0, mappingFamily: 0, streamCount: 1, coupledCount: max(format.channelsPerFrame, 1) - 1,
                                         mapping: format.channelsPerFrame == 2 ? [0, 1] : [0]).bytes
            out.channelLayout = out.channelLayout ?? .vorbis(channels: format.channelsPerFrame)
        case .flac:
            if let cookie = out.magicCookie, let info = FLACStreamInfo(magicCookie: cookie) { out.magicCookie = info.magicCookie }
        default:
            break
        }
    }

    /// Core Audio's format flags for ALAC: the source bit depth (1 = 16, 2 = 20, 3 = 24, 4 = 32).
    static func alacFlag(bitDepth: Int) -> Int { [16: 1, 20: 2, 24: 3, 32: 4][bitDepth] ?? 0 }

    private func announce(_ format: AudioStreamDescription, _ out: StreamOutput) {
        guard !out.isReady else { return }
        normalizeCookie(format, out)
        out.dataOffset = dataStart
        if let dataEnd, let dataStart { out.audioDataByteCount = dataEnd - dataStart }
        if !packetSizes.isEmpty, let dataStart {
            packetOffsets.reserveCapacity(packetSizes.count)
            var offset = dataStart
            for size in packetSizes { packetOffsets.append(offset); offset += Int64(size) }
            out.maximumPacketSize = Int(packetSizes.max() ?? 0)
            let frames = packetFrames.reduce(Int64(0)) { $0 + Int64($1) }
            let totalFrames = format.framesPerPacket > 0 ? Int64(packetSizes.count * format.framesPerPacket) : frames
            if totalFrames > 0 { out.bitRate = Int(Double(offset - dataStart) * 8 * format.sampleRate / Double(totalFrames)) }
        } else if format.bytesPerPacket > 0 {
            out.maximumPacketSize = format.bytesPerPacket
            if let bytes = out.audioDataByteCount {
                out.audioDataPacketCount = bytes / Int64(format.bytesPerPacket)
                let frames = Double(bytes / Int64(format.bytesPerPacket)) * Double(max(format.framesPerPacket, 1))
                if frames > 0 { out.bitRate = Int(Double(bytes) * 8 * format.sampleRate / frames) }
            }
        }
        out.announceReady()
    }

    /// Frames of the packets emitted, as the pakt or the codec counts them.
    private var emittedFrames: Int64 = 0

    private func emitData(_ input: ByteInput, _ out: StreamOutput) throws {
        guard let format else { return }
        if format.bytesPerPacket > 0 {
            var count = input.available / format.bytesPerPacket
            if let dataEnd { count = min(count, Int((dataEnd - input.position) / Int64(format.bytesPerPacket))) }
            out.emitConstantPackets(from: input, count: count, bytesPerPacket: format.bytesPerPacket)
            constantPacketsSeen += Int64(count)
            if let dataEnd, dataEnd - input.position < Int64(format.bytesPerPacket) {
                input.skip(dataEnd - input.position)
                inData = false
            }
            return
        }
        while nextPacket < packetSizes.count {
            let offset = packetOffsets[nextPacket], size = Int(packetSizes[nextPacket])
            if input.position < offset { input.skip(offset - input.position); if input.position < offset { return } }
            guard input.available >= size else { return }
            var frames = Int(packetFrames[nextPacket]) > 0 ? Int(packetFrames[nextPacket]) : format.framesPerPacket
            switch format.formatID {
            case .appleLossless: frames = input.alacPacketFrames(size: size, full: frames)
            case .amr, .amrWideband: frames = input.amrPacketFrames(size: size, wideband: format.formatID == .amrWideband, fallback: frames)
            case .flac: frames = input.withBytes(min(size, 16)) { bytes in FLACFrameHeader.parse({ bytes[$0] }, available: bytes.count) }.blockSize ?? frames
            default: break
            }
            out.emitPacket(from: input, size: size, frames: frames)
            emittedFrames += Int64(frames)
            nextPacket += 1
        }
        if let dataEnd { input.skip(max(dataEnd - input.position, 0)) } else { input.skip(Int64(input.available)) }
        inData = dataEnd == nil
    }

    func finish(_ input: ByteInput, _ out: StreamOutput) throws {
        input.atEnd = true
        try parse(input, out)
        guard format != nil else { throw AudioFileStreamError(.invalidData, .caf, input.position, "no desc chunk") }
        if let deferred = deferredData {
            throw AudioFileStreamError(.noAudio, .caf, deferred.start - 16,
                "the data chunk holds packets of varying size and no packet table (pakt) follows it")
        }
        guard dataStart != nil else { throw AudioFileStreamError(.noAudio, .caf, input.position, "no data chunk") }
        if !packetSizes.isEmpty && nextPacket < packetSizes.count {
            throw AudioFileStreamError(.truncated, .caf, input.position, "pakt lists \(packetSizes.count) packets but the stream ends after \(nextPacket)")
        }
        // FLAC frames say how many samples they hold. A pakt whose remainder counts to whole
        // packets of the nominal size (Apple's convention, which this library writes) keeps its
        // valid frames, the remainder made what the short last frame leaves; one that counts
        // more valid frames than the frames hold (ffmpeg writes an average frame count as
        // constant) is corrected to them.
        if format?.formatID == .flac, nextPacket == packetSizes.count, var table = out.packetTableInfo,
           Int64(table.primingFrames) + table.validFrames + Int64(table.remainderFrames) != emittedFrames {
            if Int64(table.primingFrames) + table.validFrames <= emittedFrames {
                table.remainderFrames = Int(emittedFrames - Int64(table.primingFrames) - table.validFrames)
            } else {
                out.warn(AudioFileStreamError(.invalidData, .caf, 0,
                    "the pakt counts \(Int64(table.primingFrames) + table.validFrames) frames but the FLAC frames hold \(emittedFrames); the frames are played"))
                table.validFrames = max(emittedFrames - Int64(table.primingFrames), 0)
                table.remainderFrames = 0
            }
            out.packetTableInfo = table
            out.announce(.packetTableInfo)
        }
        if packetSizes.isEmpty, out.audioDataPacketCount == nil || inData {
            out.audioDataPacketCount = constantPacketsSeen
            out.announce(.audioDataPacketCount)
        }
    }

    func byteOffset(forPacket packet: Int64) -> AudioFileStreamSeekResult? {
        guard let format, let dataStart else { return nil }
        if format.bytesPerPacket > 0 { return AudioFileStreamSeekResult(byteOffset: dataStart + packet * Int64(format.bytesPerPacket), isEstimated: false) }
        guard packet >= 0, packet < Int64(packetOffsets.count) else { return nil }
        return AudioFileStreamSeekResult(byteOffset: packetOffsets[Int(packet)], isEstimated: false)
    }

    func seek(toPacket packet: Int64, _ input: ByteInput, _ out: StreamOutput) throws -> AudioFileStreamSeekResult {
        guard let result = byteOffset(forPacket: packet) else {
            throw AudioFileStreamError(.invalidOperation, .caf, input.position, "packet \(packet) is not in the packet table")
        }
        input.reset(to: result.byteOffset)
        nextPacket = Int(packet)
        constantPacketsSeen = packet
        inData = true
        out.nextPacketIndex = packet
        return result
    }

    func discontinuity(_ input: ByteInput, _ out: StreamOutput) { input.dropBuffered() }

    func frames(beforePacket packet: Int64) -> Int64? {
        guard let format else { return nil }
        if format.framesPerPacket > 0 { return packet * Int64(format.framesPerPacket) }
        return packetFrames.prefix(Int(min(packet, Int64(packetFrames.count)))).reduce(Int64(0)) { $0 + Int64($1) }
    }

    func packet(forFrame frame: Int64) -> (packet: Int64, frameOffset: Int)? {
        guard let format else { return nil }
        if format.framesPerPacket > 0 { return (frame / Int64(format.framesPerPacket), Int(frame % Int64(format.framesPerPacket))) }
        var total: Int64 = 0
        for (index, frames) in packetFrames.enumerated() {
            if frame < total + Int64(frames) { return (Int64(index), Int(frame - total)) }
            total += Int64(frames)
        }
        return nil
    }
}
