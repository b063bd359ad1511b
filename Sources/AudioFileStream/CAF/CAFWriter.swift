import BufferQueue

/// Writes a Core Audio Format file: `desc`, `chan` (channel descriptions), `kuki`, `data`, and after
/// the data a `pakt` chunk (packet count, valid frames, priming, remainder, and the sizes — and
/// frames — of packets that vary), as Apple's and ffmpeg's writers lay it out.
///
/// The `data` chunk's size is −1 until the end. A recording of constant-size packets (PCM,
/// G.711, IMA4) is therefore playable whenever the process dies, as Apple's recorders leave it.
/// A recording of packets of varying size (AAC, ALAC, FLAC, Opus) reserves room before the data
/// for its packet table (for the expected length, or an hour), keeps the `pakt` chunk there up to
/// date at every checkpoint and marks the rest `free`: a process that dies leaves the packets up
/// to the last checkpoint described. A recording that outgrows the room gets its table after the
/// data at the end (the room becomes `free`), as a file that is not a recording does.
/// For a format of constant frames per packet the remainder counts to whole packets
/// (`packets × framesPerPacket = priming + valid + remainder`), Apple's convention for ALAC.
package final class CAFWriter: ContainerWriter {
    private let output: AudioFileOutput
    private let stream: ContainerStream
    private var cookieOffset: Int64?
    private let dataSizeOffset: Int64
    private let dataStart: Int64
    private var packetCount: Int64 = 0
    private var codedFrames: Int64 = 0
    /// The packet table's entries: each packet's size and frames, as variable-length integers.
    private var table = ByteWriter()
    private let variableBytes: Bool
    private let variableFrames: Bool
    /// A recording's room for its packet table before the data: where it starts, how many bytes.
    private var reserved: (offset: Int64, bytes: Int)?
    private var outgrown = false

    package init(output: AudioFileOutput, stream: ContainerStream) throws {
        self.output = output
        self.stream = stream
        let format = stream.format
        variableBytes = format.bytesPerPacket == 0
        variableFrames = format.framesPerPacket == 0
        if (variableBytes || variableFrames) && !output.canSeek {
            throw AudioFileWriterError(.unsupportedFormat, path: output.path,
                "a CAF of \(format.formatID) packets needs its packet table after the data, which an output that cannot seek cannot have")
        }
        if case .unsigned8? = try? PCMSampleLayout(format) {
            throw AudioFileWriterError(.unsupportedFormat, path: output.path, "CAF's 8-bit samples are signed; unsigned 8-bit PCM is not written to a CAF")
        }
        var header = ByteWriter()
        header.append(Self.fileHeader(format))
        if let mask = stream.waveChannelMask {
            // A channel bitmap (its bits are WAVE's), no descriptions.
            let chan = CoreAudioChannelLayout(tag: CoreAudioChannelLayout.useChannelBitmap, bitmap: mask).bytes(bigEndian: true)
            header.tag("chan"); header.be64(Int64(chan.count))
            header.append(chan)
        } else if let layout = stream.channelLayout, layout.isLabelled, layout.channelCount == format.channelsPerFrame {
            // kCAFChannelLayoutTag_UseChannelDescriptions: a label per channel, no coordinates.
            let chan = CoreAudioChannelLayout(layout, namedTags: false).bytes(bigEndian: true)
            header.tag("chan"); header.be64(Int64(chan.count))
            header.append(chan)
        }
        if let cookie = Self.cookie(stream.magicCookie, format: format), !cookie.isEmpty {
            header.tag("kuki"); header.be64(Int64(cookie.count))
            cookieOffset = Int64(header.bytes.count)
            header.append(cookie)
        }
        if stream.recording && (variableBytes || variableFrames) {
            // Room for an hour's table (or the expected length's): a few bytes a packet.
            let rate = max(format.sampleRate, 1)
            let frames = Double(stream.expectedFrames ?? Int64(rate * 3600))
            let packets = Int(frames / Double(max(format.framesPerPacket, 960))) + 16
            let bytes = 24 + 12 + packets * ((variableBytes ? 3 : 0) + (variableFrames ? 3 : 0)) + 64
            reserved = (Int64(header.bytes.count), bytes)
            header.append(Self.reservedRegion(table: [], packets: 0, valid: 0, priming: stream.primingFrames, remainder: 0, bytes: bytes))
        }
        header.tag("data")
        dataSizeOffset = Int64(header.bytes.count)
        header.be64(Int64(-1))
        header.be32(0)   // edit count
        dataStart = Int64(header.bytes.count)
        try output.append(header.bytes)
    }

    /// The file header and the `desc` chunk: the stream description as CAF states it (linear PCM's
    /// flags as CAF's own: float, little-endian).
    static func fileHeader(_ format: AudioStreamDescription) -> [UInt8] {
        var header = ByteWriter()
        header.tag("caff"); header.be16(1); header.be16(0)
        header.tag("desc"); header.be64(Int64(32))
        header.be64(format.sampleRate.bitPattern)
        header.be32(format.formatID.rawValue)
        if format.isLinearPCM {
            // kCAFLinearPCMFormatFlagIsFloat, …IsLittleEndian.
            header.be32((format.formatFlags.contains(.isFloat) ? 1 : 0) | (format.formatFlags.contains(.isBigEndian) ? 0 : 2))
        } else {
            header.be32(format.formatFlags.rawValue)
        }
        header.be32(format.bytesPerPacket); header.be32(format.framesPerPacket)
        header.be32(format.channelsPerFrame); header.be32(format.bitsPerChannel)
        return header.bytes
    }

    /// The cookie in the form CAF files carry it: FLAC's as a whole `dfLa` box (Apple's form,
    /// which ffmpeg requires), AAC's AudioSpecificConfig in an MPEG-4 ES descriptor (as Apple's
    /// `esds`); the others as the encoder gives them.
    static func cookie(_ cookie: [UInt8]?, format: AudioStreamDescription) -> [UInt8]? {
        guard let cookie else { return nil }
        if format.formatID == .flac, let info = FLACStreamInfo(magicCookie: cookie) { return info.dfLaBox }
        if format.formatID == .aacLC { return MP4Box.esDescriptor(config: cookie, maximumPacketSize: 6144 / 8 * format.channelsPerFrame, bitRate: 0) }
        return cookie
    }

    package func append(_ packets: EncodedPackets) throws {
        try output.append(packets.allBytes)
        for packet in packets.packets {
            if variableBytes { table.vlq(Int64(packet.byteCount)) }
            if variableFrames { table.vlq(Int64(packet.frames)) }
            codedFrames += Int64(packet.frames)
        }
        if variableBytes || variableFrames { packetCount += Int64(packets.count) }
    }

    /// The packets written: counted as they come where they vary; otherwise what the data holds
    /// (``PCMFileWriter`` appends PCM to the output itself, or writes it at positions).
    private var packetsWritten: Int64 {
        variableBytes || variableFrames ? packetCount : (output.length - dataStart) / Int64(max(stream.format.bytesPerPacket, 1))
    }

    package func checkpoint(_ totals: ContainerTotals) throws {
        try output.flush()
        guard let reserved, !outgrown, output.canSeek else { return }
        guard table.bytes.count + 24 + 12 <= reserved.bytes else {
            outgrown = true
            return
        }
        // Packets before the table, as it says: the file plays them if the process dies now.
        try output.overwrite(Self.reservedRegion(table: table.bytes, packets: packetCount, valid: totals.validFrames,
                                                 priming: totals.primingFrames, remainder: 0, bytes: reserved.bytes), at: reserved.offset)
    }

    /// The `pakt` chunk: packets, valid frames, priming, remainder, then the table's entries.
    static func paktChunk(table: [UInt8], packets: Int64, valid: Int64, priming: Int, remainder: Int) -> [UInt8] {
        var pakt = ByteWriter()
        pakt.tag("pakt"); pakt.be64(Int64(24 + table.count))
        pakt.be64(packets); pakt.be64(valid); pakt.be32(priming); pakt.be32(remainder)
        pakt.append(table)
        return pakt.bytes
    }

    /// A `pakt` chunk and a `free` chunk filling `bytes` bytes.
    static func reservedRegion(table: [UInt8], packets: Int64, valid: Int64, priming: Int, remainder: Int, bytes: Int) -> [UInt8] {
        var region = ByteWriter()
        region.append(paktChunk(table: table, packets: packets, valid: valid, priming: priming, remainder: remainder))
        let rest = bytes - region.bytes.count - 12
        region.tag("free"); region.be64(Int64(rest))
        region.append([UInt8](repeating: 0, count: rest))
        return region.bytes
    }

    package func finish(_ totals: ContainerTotals) throws {
        let format = stream.format
        let dataBytes = output.length - dataStart
        let packetCount = packetsWritten
        let nominal = variableFrames ? codedFrames : packetCount * Int64(format.framesPerPacket)
        let remainder = max(0, nominal - Int64(totals.primingFrames) - totals.validFrames)
        let needsTable = variableBytes || variableFrames || totals.primingFrames > 0 || remainder > 0
        if let reserved, output.canSeek {
            if !outgrown && table.bytes.count + 24 + 12 <= reserved.bytes {
                try output.overwrite(Self.reservedRegion(table: table.bytes, packets: packetCount, valid: totals.validFrames,
                                                         priming: totals.primingFrames, remainder: Int(remainder), bytes: reserved.bytes),
                                     at: reserved.offset)
            } else {
                // The table outgrew its room: the room is free space, the table follows the data.
                var free = ByteWriter()
                free.tag("free"); free.be64(Int64(reserved.bytes - 12))
                try output.overwrite(free.bytes, at: reserved.offset)
                try output.append(Self.paktChunk(table: table.bytes, packets: packetCount, valid: totals.validFrames,
                                                 priming: totals.primingFrames, remainder: Int(remainder)))
            }
        } else if needsTable && !format.isLinearPCM && output.canSeek {
            try output.append(Self.paktChunk(table: table.bytes, packets: packetCount, valid: totals.validFrames,
                                             priming: totals.primingFrames, remainder: Int(remainder)))
        }
        if output.canSeek {
            var size = ByteWriter()
            size.be64(dataBytes + 4)
            try output.overwrite(size.bytes, at: dataSizeOffset)
            if let cookieOffset, let cookie = Self.cookie(totals.magicCookie, format: format),
               cookie.count == Self.cookie(stream.magicCookie, format: format)?.count {
                try output.overwrite(cookie, at: cookieOffset)
            }
        }
    }
}
