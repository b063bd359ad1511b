import BufferQueue

/// WAV (RIFF/WAVE, including WAVE_FORMAT_EXTENSIBLE) and AIFF/AIFC: linear PCM in chunks.
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
    private var framesSeen: Int64 = 0

    init(type: AudioFileType) { self.type = type }

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
                let frameBytes = format.bytesPerFrame
                var frames = input.available / frameBytes
                if let dataEnd { frames = min(frames, Int((dataEnd - input.position) / Int64(frameBytes))) }
                if frames > 0 {
                    out.emitConstantPackets(from: input, count: frames, bytesPerPacket: frameBytes)
                    framesSeen += Int64(frames)
                }
                if let dataEnd, dataEnd - input.position < Int64(frameBytes) {
                    input.skip(max(dataEnd - input.position, 0) + dataPad)
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
            case "fmt ", "COMM":
                guard size <= 4096 else {
                    throw AudioFileStreamError(.tooLarge, type, start, "the \(id) chunk claims \(size) bytes; at most 4096 are plausible")
                }
                pending = (id, Int(size + (size & 1)), start)
            case "data", "SSND":
                guard let format else {
                    throw AudioFileStreamError(.invalidData, type, start, "the \(id) chunk comes before the format chunk")
                }
                let skipFirst: Int64 = id == "SSND" ? 8 + ssndOffset : 0
                let streamed = size == 0 || size == 0xFFFF_FFFF
                dataStart = start + 8 + skipFirst
                dataEnd = streamed ? nil : start + 8 + size
                if let end = dataEnd, let begin = dataStart, begin > end {
                    throw AudioFileStreamError(.invalidData, type, start, "the SSND offset (\(ssndOffset)) points past the end of its chunk (\(size) bytes)")
                }
                dataPad = size & 1
                input.skip(skipFirst)
                inData = true
                if !out.isReady {
                    out.dataOffset = dataStart
                    if let dataEnd, let dataStart {
                        out.audioDataByteCount = dataEnd - dataStart
                        out.audioDataPacketCount = (dataEnd - dataStart) / Int64(format.bytesPerFrame)
                    }
                    out.bitRate = Int(format.sampleRate) * format.bytesPerFrame * 8
                    out.maximumPacketSize = format.bytesPerFrame
                    out.announceReady()
                }
            default:
                input.skip(size + (size & 1))
            }
        }
    }

    private func readFormatChunk(_ id: String, _ body: [UInt8], at start: Int64, _ out: StreamOutput) throws {
        if id == "fmt " {
            var r = FieldReader(body, base: start + 8, container: type)
            var code = try r.u16le("the format code")
            let channels = Int(try r.u16le("the channel count"))
            let rate = Int(try r.u32le("the sample rate"))
            _ = try r.u32le(); _ = try r.u16le()
            let bits = Int(try r.u16le("the bits per sample"))
            if code == 0xFFFE {
                try r.skip(8, "the WAVE_FORMAT_EXTENSIBLE fields")
                code = try r.u16le("the extensible sub-format")
            }
            guard code == 1 || code == 3 else {
                throw AudioFileStreamError(.unsupportedDataFormat, type, start, "WAV format code \(code) is not PCM (1) or IEEE float (3)")
            }
            try setFormat(rate: Double(rate), channels: channels, bits: bits, float: code == 3, bigEndian: false, at: start, out)
        } else {
            var r = FieldReader(body, base: start + 8, container: type)
            let channels = Int(try r.u16be("the channel count"))
            _ = try r.u32be("the frame count")
            let bits = Int(try r.u16be("the sample size"))
            let rate = extended80(try r.take(10, "the sample rate"))
            var float = false, big = true
            if type == .aifc {
                let compression = try r.tag("the compression type")
                switch compression {
                case "NONE", "twos": break
                case "sowt": big = false
                case "fl32", "FL32", "fl64", "FL64": float = true
                default:
                    throw AudioFileStreamError(.unsupportedDataFormat, type, start, "AIFC compression '\(compression)' is not supported (NONE, sowt, fl32, fl64 are)")
                }
            }
            if bits == 8 && !float {
                throw AudioFileStreamError(.unsupportedDataFormat, type, start, "8-bit AIFF samples are signed; only unsigned 8-bit PCM is supported")
            }
            try setFormat(rate: rate, channels: channels, bits: bits, float: float, bigEndian: big, at: start, out)
        }
    }

    private func setFormat(rate: Double, channels: Int, bits: Int, float: Bool, bigEndian: Bool, at start: Int64, _ out: StreamOutput) throws {
        guard (1...64).contains(channels), rate > 0, rate <= 1_536_000, [8, 16, 24, 32, 64].contains(bits) else {
            throw AudioFileStreamError(.invalidData, type, start, "format chunk says \(channels) channels, \(rate) Hz, \(bits) bits")
        }
        let format = AudioStreamDescription.linearPCM(sampleRate: rate, channels: channels, bitsPerChannel: bits, isFloat: float, isBigEndian: bigEndian)
        self.format = format
        out.dataFormat = format
        out.formatList = [format]
        out.channelLayout = .default(channels: channels)
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
        if let promised = out.audioDataPacketCount, framesSeen < promised, inData {
            throw AudioFileStreamError(.truncated, type, input.position, "the data chunk promises \(promised) frames but the stream ends after \(framesSeen)")
        }
        if out.audioDataPacketCount == nil {
            out.audioDataPacketCount = framesSeen
            out.announce(.audioDataPacketCount)
        }
    }

    func byteOffset(forPacket packet: Int64) -> AudioFileStreamSeekResult? {
        guard let format, let dataStart else { return nil }
        return AudioFileStreamSeekResult(byteOffset: dataStart + packet * Int64(format.bytesPerFrame), isEstimated: false)
    }

    func seek(toPacket packet: Int64, _ input: ByteInput, _ out: StreamOutput) throws -> AudioFileStreamSeekResult {
        guard let result = byteOffset(forPacket: packet) else {
            throw AudioFileStreamError(.invalidOperation, type, input.position, "the data chunk has not been reached")
        }
        input.reset(to: result.byteOffset)
        inData = true
        pending = nil
        out.nextPacketIndex = packet
        framesSeen = packet
        return result
    }

    func discontinuity(_ input: ByteInput, _ out: StreamOutput) { input.dropBuffered() }
    func frames(beforePacket packet: Int64) -> Int64? { packet }
    func packet(forFrame frame: Int64) -> (packet: Int64, frameOffset: Int)? { (frame, 0) }
}
