import BufferQueue

/// Writes WAV (RIFF/WAVE), AIFF and AIFC: linear PCM, G.711 µ-law and A-law, and IMA ADPCM
/// (WAV's blocks, AIFC's `ima4`).
///
/// - WAV: a plain `fmt ` for mono and stereo PCM, WAVE_FORMAT_EXTENSIBLE with the channel mask
///   for more channels of known speakers (frames in WAVE's order); format
///   codes 7 (µ-law), 6 (A-law) and 0x11 (IMA ADPCM, with its frames per block), each with a
///   `fact` chunk counting the valid frames, which this library and sox honour.
/// - AIFF for big-endian integer PCM; AIFC for the rest (`sowt`, `fl32`, `fl64`, `ulaw`, `alaw`,
///   `ima4`). AIFC's `ima4` counts packets and has no place for the valid frames: the last
///   packet's padding (at most 63 frames) plays.
///
/// The sizes are filled in at the end. A recording rewrites them at every checkpoint, so a
/// process that dies leaves a file that plays what the last checkpoint counted. An output that
/// cannot seek gets WAV's streaming sizes (`0xFFFFFFFF`, as ffmpeg writes to a pipe).
package final class RIFFWriter: ContainerWriter {
    package enum Kind { case wav, aiff, aifc }

    private let output: AudioFileOutput
    private let stream: ContainerStream
    private let kind: Kind
    /// Offsets of the size fields to fill in.
    private let formSizeOffset: Int64 = 4
    private var dataSizeOffset: Int64 = 0
    private var factOffset: Int64?
    private var frameCountOffset: Int64?
    private let dataStart: Int64

    package init(output: AudioFileOutput, stream: ContainerStream, kind: Kind) throws {
        self.output = output
        self.stream = stream
        self.kind = kind
        let format = stream.format
        var header = ByteWriter()
        switch kind {
        case .wav:
            try Self.checkWAV(format, path: output.path)
            header.tag("RIFF"); header.le32(output.canSeek ? 0 : 0xFFFF_FFFF); header.tag("WAVE")
            header.append(Self.waveFormatChunk(format, channelMask: Self.waveMask(stream)))
            if !format.isLinearPCM {
                header.tag("fact"); header.le32(4)
                factOffset = Int64(header.bytes.count)
                header.le32(0)
            }
            header.tag("data")
            dataSizeOffset = Int64(header.bytes.count)
            header.le32(output.canSeek ? 0 : 0xFFFF_FFFF)
        case .aiff, .aifc:
            let compression = try Self.aifcCompression(format, aifc: kind == .aifc, path: output.path)
            header.tag("FORM"); header.be32(0); header.tag(kind == .aifc ? "AIFC" : "AIFF")
            if kind == .aifc { header.tag("FVER"); header.be32(4); header.be32(UInt32(0xA280_5140)) }
            let name = compression.name
            let nameBytes = 1 + name.utf8.count + ((1 + name.utf8.count) % 2)
            header.tag("COMM"); header.be32(kind == .aifc ? 22 + nameBytes : 18)
            header.be16(format.channelsPerFrame)
            frameCountOffset = Int64(header.bytes.count)
            header.be32(0)
            header.be16(format.isLinearPCM ? format.bitsPerChannel : 16)
            header.extended80(format.sampleRate)
            if kind == .aifc {
                header.tag(compression.type)
                header.u8(name.utf8.count); header.append(Array(name.utf8))
                if (1 + name.utf8.count) % 2 == 1 { header.u8(0) }
            }
            header.tag("SSND")
            dataSizeOffset = Int64(header.bytes.count)
            header.be32(8); header.be32(0); header.be32(0)   // size, offset, block size
        }
        dataStart = Int64(header.bytes.count)
        try output.append(header.bytes)
    }

    /// The file's channel mask: WAVE_FORMAT_EXTENSIBLE's, for PCM of more than two channels of
    /// known speakers (the frames arrive in WAVE's order).
    static func waveMask(_ stream: ContainerStream) -> UInt32? {
        if let mask = stream.waveChannelMask { return mask }
        guard stream.format.isLinearPCM, stream.format.channelsPerFrame > 2, let order = stream.channelLayout?.waveOrder else { return nil }
        return order.mask
    }

    /// The `fmt ` chunk of a WAV: PCM (plain, or extensible with a mask),
    /// G.711, or IMA ADPCM.
    static func waveFormatChunk(_ format: AudioStreamDescription, channelMask: UInt32?) -> [UInt8] {
        var chunk = ByteWriter()
        let channels = format.channelsPerFrame, rate = Int64(format.sampleRate)
        chunk.tag("fmt ")
        switch format.formatID {
        case .uLaw, .aLaw:
            chunk.le32(18)
            chunk.le16(format.formatID == .uLaw ? 7 : 6); chunk.le16(channels); chunk.le32(rate)
            chunk.le32(rate * Int64(channels)); chunk.le16(channels); chunk.le16(8); chunk.le16(0)
        case .dviIntelIMA:
            chunk.le32(20)
            chunk.le16(0x11); chunk.le16(channels); chunk.le32(rate)
            chunk.le32(rate * Int64(format.bytesPerPacket) / Int64(max(format.framesPerPacket, 1)))
            chunk.le16(format.bytesPerPacket); chunk.le16(4)
            chunk.le16(2); chunk.le16(format.framesPerPacket)
        default:
            let isFloat = format.formatFlags.contains(.isFloat)
            let bytesPerSample = format.bytesPerFrame / max(channels, 1)
            let extensible = channelMask != nil
            chunk.le32(extensible ? 40 : isFloat ? 18 : 16)
            chunk.le16(extensible ? 0xFFFE : isFloat ? 3 : 1); chunk.le16(channels); chunk.le32(rate)
            chunk.le32(rate * Int64(format.bytesPerFrame)); chunk.le16(format.bytesPerFrame); chunk.le16(bytesPerSample * 8)
            if extensible {
                chunk.le16(22); chunk.le16(format.bitsPerChannel); chunk.le32(Int64(channelMask ?? 0))
                // The sub-format GUID: the format code in KSDATAFORMAT's base GUID.
                chunk.le16(isFloat ? 3 : 1)
                chunk.append([0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71])
            } else if isFloat {
                chunk.le16(0)
            }
        }
        return chunk.bytes
    }

    static func checkWAV(_ format: AudioStreamDescription, path: String) throws {
        switch format.formatID {
        case .uLaw, .aLaw, .dviIntelIMA: return
        case .linearPCM:
            let layout = try? PCMSampleLayout(format)
            switch layout {
            case .unsigned8?: return
            case .signed(let bits, let bytes, _, false)? where bits == bytes * 8: return
            case .float(_, false)?: return
            default: break
            }
        default: break
        }
        throw AudioFileWriterError(.unsupportedFormat, path: path,
            "a WAV holds little-endian PCM (8-bit unsigned, packed signed integers, float), µ-law, A-law or IMA ADPCM, not \(format)")
    }

    /// AIFC's compression type and name for a format; AIFF takes only big-endian integers.
    static func aifcCompression(_ format: AudioStreamDescription, aifc: Bool, path: String) throws -> (type: String, name: String) {
        var found: (String, String)?
        switch format.formatID {
        case .uLaw: found = ("ulaw", "µLaw 2:1")
        case .aLaw: found = ("alaw", "ALaw 2:1")
        case .appleIMA4: found = ("ima4", "IMA 4:1")
        case .linearPCM:
            switch try? PCMSampleLayout(format) {
            case .signed8?: found = ("NONE", "not compressed")
            case .signed(let bits, let bytes, _, true)? where bits == bytes * 8: found = ("NONE", "not compressed")
            case .signed(16, 2, _, false)?: found = ("sowt", "")
            case .float(4, true)?: found = ("fl32", "32-bit floating point")
            case .float(8, true)?: found = ("fl64", "64-bit floating point")
            default: break
            }
        default: break
        }
        guard let (type, name) = found, aifc || type == "NONE" else {
            throw AudioFileWriterError(.unsupportedFormat, path: path, aifc
                ? "an AIFC holds big-endian PCM, little-endian 16-bit PCM, big-endian float, µ-law, A-law or IMA4, not \(format)"
                : "an AIFF holds big-endian signed integer PCM (8-bit signed); use AIFC for \(format)")
        }
        return (type, name)
    }

    /// Appends packets. (``PCMFileWriter`` appends PCM to the output itself, or writes it at
    /// positions: the data is whatever the output holds after the header.)
    package func append(_ packets: EncodedPackets) throws {
        try output.append(packets.allBytes)
    }

    package func checkpoint(_ totals: ContainerTotals) throws {
        try output.flush()
        if output.canSeek { try writeSizes(totals, dataBytes: output.length - dataStart) }
    }

    package func finish(_ totals: ContainerTotals) throws {
        let dataBytes = output.length - dataStart
        if dataBytes % 2 == 1 { try output.append([0]) }
        if output.canSeek { try writeSizes(totals, dataBytes: dataBytes) }
    }

    /// Fills in the sizes (and the counts) for `dataBytes` of data: the form's size as if the
    /// pad byte of odd data were there, the data's own size without it.
    private func writeSizes(_ totals: ContainerTotals, dataBytes: Int64) throws {
        // Every format a RIFF holds has packets of one size.
        let packetCount = dataBytes / Int64(max(stream.format.bytesPerPacket, 1))
        let formSize = dataStart - 8 + dataBytes + dataBytes % 2
        var field = ByteWriter()
        switch kind {
        case .wav:
            field.le32(formSize)
            try output.overwrite(field.bytes, at: formSizeOffset)
            field = ByteWriter(); field.le32(dataBytes)
            try output.overwrite(field.bytes, at: dataSizeOffset)
            if let factOffset {
                field = ByteWriter(); field.le32(totals.validFrames)
                try output.overwrite(field.bytes, at: factOffset)
            }
        case .aiff, .aifc:
            field.be32(formSize)
            try output.overwrite(field.bytes, at: formSizeOffset)
            field = ByteWriter(); field.be32(dataBytes + 8)
            try output.overwrite(field.bytes, at: dataSizeOffset)
            if let frameCountOffset {
                // AIFC's ima4 counts packets; the others, frames.
                let count = stream.format.formatID == .appleIMA4 ? packetCount : totals.validFrames
                field = ByteWriter(); field.be32(count)
                try output.overwrite(field.bytes, at: frameCountOffset)
            }
        }
    }
}
