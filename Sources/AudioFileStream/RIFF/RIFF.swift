import BufferQueue

/// WAV (RIFF/WAVE, including WAVE_FORMAT_EXTENSIBLE) and AIFF/AIFC: linear PCM, G.711 µ-law and
/// A-law, and IMA ADPCM (WAV's block layout, AIFC's `ima4`) in chunks of constant-size packets.
final class RIFFParser: ContainerParser, PacketLocating {
    private let type: AudioFileType
    private var bigEndian: Bool { type != .wave }
    private var headerDone = false
    private var format: AudioStreamDescription?
    /// Absolute end of the data chunk (nil: to the end of the stream).
    private var dataEnd: Int64?
    private var dataStart: Int64?
    /// A pad byte after an odd-sized data chunk.
    private var dataPad: Int64 = 0
    private var inData = false
    /// A chunk's body being collected (fmt/COMM), with its id and absolute start.
    private var pending: (id: String, size: Int, start: Int64)?
    private var packetsSeen: Int64 = 0
    /// WAV's `fact` frame count (compressed formats).
    private var factFrames: Int64?
    /// AIFF's `numSampleFrames` (COMM): the frames the file holds, however long SSND is.
    private var commFrames: Int64?
    /// A data chunk met before the format chunk (AIFF allows SSND anywhere): its header's offset,
    /// to come back to once the format is known.
    private var earlyData: Int64?
    private let seekable: Bool

    init(type: AudioFileType, seekable: Bool = true) {
        self.type = type
        self.seekable = seekable
    }

    func parse(_ input: ByteInput, _ out: StreamOutput) throws {
        if !headerDone {
            guard input.available >= 12 else { return }
            input.consume(12)
            headerDone = true
        }
        while true {
            if input.skipPending > 0 { return }   // the next decision needs the bytes after the skip
            if inData {
                guard let format else { return }
                let packetBytes = format.bytesPerPacket
                var packets = input.available / packetBytes
                if let dataEnd { packets = min(packets, Int((dataEnd - input.position) / Int64(packetBytes))) }
                if packets > 0 {
                    out.emitConstantPackets(from: input, count: packets, bytesPerPacket: packetBytes)
                    packetsSeen += Int64(packets)
                }
                if let dataEnd, dataEnd - input.position < Int64(packetBytes) {
                    let left = max(dataEnd - input.position, 0)
                    if left > 0 && format.framesPerPacket > 1 {
                        out.warn(AudioFileStreamError(.truncated, type, input.position,
                            "the data chunk ends with \(left) bytes of a \(packetBytes)-byte block; they are not played"))
                    }
                    input.skip(left + dataPad)
                    inData = false
                    continue
                }
                return
            }
            if let chunk = pending {
                guard input.available >= chunk.size else { return }
                let body = input.bytes(0, chunk.size)
                input.consume(chunk.size)
                pending = nil
                try readFormatChunk(chunk.id, body, at: chunk.start, out)
                if let early = earlyData, format != nil {
                    // The format came after the sound data: go back to the data chunk, once.
                    earlyData = nil
                    input.reset(to: early)
                    out.requestSeek(to: early)
                    return
                }
                continue
            }
            guard input.available >= 8 else { return }
            let id = input.tag(0)
            // SSND starts with its own offset and block-size fields: take them with the header.
            if id == "SSND" && input.available < 16 { return }
            let size = bigEndian ? Int64(input.u32be(4)) : Int64(input.u32be(4).byteSwapped)
            let ssndOffset = id == "SSND" ? Int64(input.u32be(8)) : 0
            let start = input.position
            input.consume(8)
            switch id {
            case "fmt ", "COMM", "fact":
                guard size <= 4096 else {
                    throw AudioFileStreamError(.tooLarge, type, start, "the \(id) chunk claims \(size) bytes; at most 4096 are plausible")
                }
                pending = (id, Int(size + (size & 1)), start)
            case "data", "SSND":
                let streamed = size == 0 || size == 0xFFFF_FFFF
                guard let format else {
                    let formatChunk = type == .wave ? "fmt" : "COMM"
                    guard seekable, !streamed, earlyData == nil else {
                        throw AudioFileStreamError(.invalidData, type, start, seekable || streamed
                            ? "the \(id) chunk comes before the \(formatChunk) chunk and its size is not known, so the format cannot be found"
                            : "the \(id) chunk comes before the \(formatChunk) chunk; the source cannot seek back to it. Read it from a seekable source")
                    }
                    // Find the format after the data, then come back (as for an MP4 whose moov follows mdat).
                    earlyData = start
                    let end = start + 8 + size + (size & 1)
                    input.reset(to: end)
                    out.requestSeek(to: end)
                    return
                }
                let skipFirst: Int64 = id == "SSND" ? 8 + ssndOffset : 0
                dataPad = size & 1
                dataStart = start + 8 + skipFirst
                dataEnd = streamed ? nil : start + 8 + size
                if let end = dataEnd, let begin = dataStart, begin > end {
                    throw AudioFileStreamError(.invalidData, type, start, "the SSND offset (\(ssndOffset)) points past the end of its chunk (\(size) bytes)")
                }
                // AIFF's COMM counts the sample frames: bytes of SSND beyond them (trailing
                // bytes, or an offset that shifts the block) are not sound, as in Apple's AudioFile.
                if let frames = commFrames, format.framesPerPacket == 1, let begin = dataStart {
                    let end = begin + frames * Int64(format.bytesPerPacket)
                    if let chunkEnd = dataEnd, end < chunkEnd {
                        dataEnd = end
                        dataPad = chunkEnd - end + (size & 1)
                    } else if dataEnd == nil {
                        dataEnd = end
                    }
                }
                input.skip(skipFirst)
                inData = true
                if !out.isReady {
                    out.dataOffset = dataStart
                    if let dataEnd, let dataStart {
                        out.audioDataByteCount = dataEnd - dataStart
                        let packets = (dataEnd - dataStart) / Int64(format.bytesPerPacket)
                        out.audioDataPacketCount = packets
                        // WAV's fact chunk counts the frames of a compressed stream: the last
                        // block's padding is the remainder.
                        let coded = packets * Int64(format.framesPerPacket)
                        if let factFrames, format.framesPerPacket > 1, factFrames > 0, factFrames <= coded {
                            out.packetTableInfo = AudioFilePacketTableInfo(validFrames: factFrames, primingFrames: 0,
                                                                           remainderFrames: Int(coded - factFrames), source: .containerFrameCount)
                        }
                    }
                    out.bitRate = Int((format.sampleRate * Double(format.bytesPerPacket * 8) / Double(format.framesPerPacket)).rounded())
                    out.maximumPacketSize = format.bytesPerPacket
                    out.announceReady()
                }
            default:
                input.skip(size + (size & 1))
            }
        }
    }

    private func readFormatChunk(_ id: String, _ body: [UInt8], at start: Int64, _ out: StreamOutput) throws {
        var r = FieldReader(body, base: start + 8, container: type)
        if id == "fact" {
            factFrames = Int64(try r.u32le("the fact frame count"))
            return
        }
        if id == "fmt " {
            var code = try r.u16le("the format code")
            let channels = Int(try r.u16le("the channel count"))
            let rate = Double(try r.u32le("the sample rate"))
            _ = try r.u32le()
            let blockAlign = Int(try r.u16le("the block alignment"))
            let bits = Int(try r.u16le("the bits per sample"))
            let extraSize = r.remaining >= 2 ? Int(try r.u16le()) : 0
            var extra = r.remaining >= 2 ? Int(try r.u16le()) : nil   // IMA ADPCM: samples per block
            var waveMask: UInt32?
            if code == 0xFFFE {
                guard extraSize >= 22 else {
                    throw AudioFileStreamError(.invalidData, type, start, "WAVE_FORMAT_EXTENSIBLE needs 22 extra bytes; the chunk has \(extraSize)")
                }
                waveMask = try r.u32le("the channel mask")
                code = try r.u16le("the extensible sub-format")
                extra = nil
            }
            try checkShape(channels: channels, rate: rate, at: start)
            switch code {
            case 1, 3:
                try setFormat(rate: rate, channels: channels, bits: bits, float: code == 3, bigEndian: false, at: start, out)
            case 6, 7:
                guard bits == 8, blockAlign == channels else {
                    throw AudioFileStreamError(.invalidData, type, start, "G.711 (format code \(code)) needs 8 bits and \(channels)-byte blocks; fmt says \(bits) bits, \(blockAlign)-byte blocks")
                }
                publish(AudioStreamDescription(sampleRate: rate, formatID: code == 7 ? .uLaw : .aLaw, bytesPerPacket: channels, framesPerPacket: 1,
                                               bytesPerFrame: channels, channelsPerFrame: channels, bitsPerChannel: 8), out)
            case 0x11:
                let body = blockAlign - 4 * channels
                guard bits == 4, body > 0, body % (4 * channels) == 0 else {
                    throw AudioFileStreamError(.unsupportedDataFormat, type, start,
                        "IMA ADPCM with \(bits)-bit codes in \(blockAlign)-byte blocks for \(channels) channels is not supported (4-bit codes, whole 4-byte groups per channel)")
                }
                let capacity = 1 + body * 2 / channels
                let frames = extra.map { $0 > 0 && $0 <= capacity ? $0 : capacity } ?? capacity
                publish(AudioStreamDescription(sampleRate: rate, formatID: .dviIntelIMA, bytesPerPacket: blockAlign, framesPerPacket: frames,
                                               bytesPerFrame: 0, channelsPerFrame: channels, bitsPerChannel: 4), out)
            default:
                throw AudioFileStreamError(.unsupportedDataFormat, type, start,
                    "WAV format code \(code) is not supported (PCM 1, IEEE float 3, A-law 6, µ-law 7, IMA ADPCM 0x11 are)")
            }
            // WAVE's channel order: the mask's speakers in bit order, else its default for the count.
            out.channelLayout = waveMask.flatMap { AudioChannelLayout(waveChannelMask: $0, channels: channels) } ?? .wave(channels: channels)
        } else {
            let channels = Int(try r.u16be("the channel count"))
            let frames = Int64(try r.u32be("the frame count"))
            // 0 is what streaming writers leave when they cannot come back: unknown, not empty.
            commFrames = frames > 0 ? frames : nil
            let bits = Int(try r.u16be("the sample size"))
            let rate = extended80(try r.take(10, "the sample rate"))
            try checkShape(channels: channels, rate: rate, at: start)
            var float = false, big = true
            if type == .aifc {
                let compression = try r.tag("the compression type")
                switch compression {
                case "NONE", "twos": break
                case "sowt": big = false
                case "fl32", "FL32", "fl64", "FL64": float = true
                case "ulaw", "ULAW", "alaw", "ALAW":
                    let id: AudioFormatID = compression.lowercased() == "ulaw" ? .uLaw : .aLaw
                    publish(AudioStreamDescription(sampleRate: rate, formatID: id, bytesPerPacket: channels, framesPerPacket: 1,
                                                   bytesPerFrame: channels, channelsPerFrame: channels, bitsPerChannel: 8), out)
                    return
                case "ima4":
                    publish(AudioStreamDescription(sampleRate: rate, formatID: .appleIMA4, bytesPerPacket: 34 * channels, framesPerPacket: 64,
                                                   bytesPerFrame: 0, channelsPerFrame: channels, bitsPerChannel: 0), out)
                    return
                default:
                    throw AudioFileStreamError(.unsupportedDataFormat, type, start,
                        "AIFC compression '\(compression)' is not supported (NONE, twos, sowt, fl32, fl64, ulaw, alaw, ima4 are)")
                }
            }
            try setFormat(rate: rate, channels: channels, bits: bits, float: float, bigEndian: big, at: start, out)
        }
    }

    private func checkShape(channels: Int, rate: Double, at start: Int64) throws {
        guard (1...64).contains(channels), rate > 0, rate <= 1_536_000 else {
            throw AudioFileStreamError(.invalidData, type, start, "the format chunk says \(channels) channels at \(rate) Hz")
        }
    }

    private func setFormat(rate: Double, channels: Int, bits: Int, float: Bool, bigEndian: Bool, at start: Int64, _ out: StreamOutput) throws {
        guard [8, 16, 24, 32, 64].contains(bits) else {
            throw AudioFileStreamError(.invalidData, type, start, "the format chunk says \(bits) bits per sample")
        }
        // WAV's 8-bit samples are unsigned; AIFF's are signed.
        publish(.linearPCM(sampleRate: rate, channels: channels, bitsPerChannel: bits, isFloat: float, isBigEndian: bigEndian,
                           isSigned8: type != .wave), out)
    }

    private func publish(_ format: AudioStreamDescription, _ out: StreamOutput) {
        self.format = format
        out.dataFormat = format
        out.formatList = [format]
        out.channelLayout = .default(channels: format.channelsPerFrame)
    }

    /// An 80-bit IEEE extended float (AIFF sample rates).
    private func extended80(_ b: [UInt8]) -> Double {
        let exponent = Int(b[0] & 0x7F) << 8 | Int(b[1])
        let mantissa = b[2...9].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard exponent != 0 || mantissa != 0 else { return 0 }
        let value = Double(mantissa) * Double(sign: .plus, exponent: exponent - 16383 - 63, significand: 1)
        return b[0] & 0x80 != 0 ? -value : value
    }

    func finish(_ input: ByteInput, _ out: StreamOutput) throws {
        input.atEnd = true
        try parse(input, out)
        guard format != nil else {
            throw AudioFileStreamError(.invalidData, type, input.position, "no format chunk")
        }
        guard dataStart != nil else {
            throw AudioFileStreamError(.noAudio, type, input.position, "no data chunk")
        }
        if let promised = out.audioDataPacketCount, packetsSeen < promised, inData {
            throw AudioFileStreamError(.truncated, type, input.position, "the data chunk promises \(promised) packets but the stream ends after \(packetsSeen)")
        }
        if out.audioDataPacketCount == nil {
            out.audioDataPacketCount = packetsSeen
            out.announce(.audioDataPacketCount)
        }
    }

    func byteOffset(forPacket packet: Int64) -> AudioFileStreamSeekResult? {
        guard let format, let dataStart else { return nil }
        return AudioFileStreamSeekResult(byteOffset: dataStart + packet * Int64(format.bytesPerPacket), isEstimated: false)
    }

    func seek(toPacket packet: Int64, _ input: ByteInput, _ out: StreamOutput) throws -> AudioFileStreamSeekResult {
        guard let result = byteOffset(forPacket: packet) else {
            throw AudioFileStreamError(.invalidOperation, type, input.position, "the data chunk has not been reached")
        }
        input.reset(to: result.byteOffset)
        inData = true
        pending = nil
        out.nextPacketIndex = packet
        packetsSeen = packet
        return result
    }

    func discontinuity(_ input: ByteInput, _ out: StreamOutput) { input.dropBuffered() }
    func frames(beforePacket packet: Int64) -> Int64? { packet * Int64(max(format?.framesPerPacket ?? 1, 1)) }
    func packet(forFrame frame: Int64) -> (packet: Int64, frameOffset: Int)? {
        let per = Int64(max(format?.framesPerPacket ?? 1, 1))
        return (frame / per, Int(frame % per))
    }
}
