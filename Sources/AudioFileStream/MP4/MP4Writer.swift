import BufferQueue

/// Writes an MPEG-4 audio file (`.m4a`): one track of AAC (`mp4a`/`esds`), Apple Lossless
/// (`alac`), Opus (`Opus`/`dOps`) or FLAC (`fLaC`/`dfLa`), with the gapless numbers put down
/// twice, as iTunes does: an edit list (media time = priming, duration = valid frames, the media
/// duration priming + valid, the last sample's duration shortened to end there) and an iTunes
/// `iTunSMPB` tag (priming, remainder, valid frames). Timescales are the sample rate, so every
/// number is exact.
///
/// - Plain: `ftyp`, `wide`, `mdat` as packets come, `moov` with the sample tables at the end (chunks of
///   about a second; `co64` past 4 GiB).
/// - Fragmented (for recordings): `ftyp`, a `moov` with `mvex`, then a `moof` + `mdat` per
///   checkpoint. The `moov`'s durations, edit and `iTunSMPB` are rewritten in place at every
///   checkpoint and at the end, so a process killed mid-way leaves a file that plays, exactly
///   trimmed, up to its last fragment.
package final class MP4Writer: ContainerWriter {
    private let output: AudioFileOutput
    private let stream: ContainerStream
    private let fragmented: Bool
    private let timescale: Int
    /// Per packet: size and frames (plain mode keeps all; fragmented mode those since the last fragment).
    private var sizes: [UInt32] = []
    private var durations: [UInt32] = []
    /// Plain mode: chunk offsets and their sample counts; where mdat's size goes.
    private var chunks: [(offset: Int64, samples: Int)] = []
    private var chunkFrames = 0
    private var mdatStart: Int64 = 0
    private var dataBytes: Int64 = 0
    /// Fragmented mode: the packets of the fragment being collected, and the decode time it starts at.
    private var fragment: [UInt8] = []
    private var fragmentStart: Int64 = 0
    private var sequence: UInt32 = 0
    /// Where the moov's fields that change are (fragmented mode), and the frames coded so far.
    private var patches = MovieFields()
    private var codedFrames: Int64 = 0

    /// Offsets in the file of the moov fields rewritten at checkpoints.
    struct MovieFields {
        var movieDuration: Int64?, trackDuration: Int64?, mediaDuration: Int64?, editDuration: Int64?, smpbText: Int64?
    }

    /// The formats an M4A is written with.
    package static let formats: [AudioFormatID] = [.aacLC, .appleLossless, .opus, .flac]

    package init(output: AudioFileOutput, stream: ContainerStream, fragmented: Bool) throws {
        let id = stream.format.formatID
        guard Self.formats.contains(id) else {
            throw AudioFileWriterError(.unsupportedFormat, path: output.path, "an M4A holds AAC, Apple Lossless, Opus or FLAC, not \(id)")
        }
        guard output.canSeek || fragmented else {
            throw AudioFileWriterError(.unsupportedFormat, path: output.path, "a plain M4A needs its sizes filled in at the end; an output that cannot seek needs the fragmented form")
        }
        self.output = output
        self.stream = stream
        self.fragmented = fragmented
        timescale = Int(stream.format.sampleRate)
        var head = MP4Box.box("ftyp", Array("M4A ".utf8) + [0, 0, 2, 0] + Array("M4A mp42isom".utf8) + (fragmented ? Array("iso6".utf8) : []))
        if fragmented {
            let (moov, fields) = movie(valid: 0, remainder: 0, duration: 0, base: Int64(head.count))
            patches = fields
            head += moov
            try output.append(head)
        } else {
            // A `wide` box, then mdat with a 32-bit size filled in at the end; past 4 GiB the two
            // become one mdat header with a 64-bit size (as ffmpeg does: readers such as faad's
            // do not take a 64-bit size they need not).
            mdatStart = Int64(head.count)
            head += [0, 0, 0, 8] + Array("wide".utf8) + [0, 0, 0, 0] + Array("mdat".utf8)
            try output.append(head)
            chunks.append((output.length, 0))
        }
    }

    package func append(_ packets: EncodedPackets) throws {
        for index in 0..<packets.count {
            let packet = packets.packets[index]
            sizes.append(UInt32(packet.byteCount))
            durations.append(UInt32(packet.frames))
            codedFrames += Int64(packet.frames)
            if fragmented {
                fragment += packets.bytes(of: index)
            } else {
                if chunkFrames >= timescale, let last = chunks.last, last.samples > 0 {
                    chunks.append((output.length + Int64(packets.packets[index].offset - packets.packets[0].offset), 0))
                    chunkFrames = 0
                }
                chunks[chunks.count - 1].samples += 1
                chunkFrames += packet.frames
            }
        }
        if !fragmented {
            try output.append(packets.allBytes)
            dataBytes += Int64(packets.byteCount)
        } else if fragment.count > 1 << 20 {
            try writeFragment(lastDuration: nil)
        }
    }

    package func checkpoint(_ totals: ContainerTotals) throws {
        guard fragmented else { return try output.flush() }
        try writeFragment(lastDuration: nil)
        try patchMovie(totals, final: false)
        try output.flush()
    }

    package func finish(_ totals: ContainerTotals) throws {
        let end = Int64(totals.primingFrames) + totals.validFrames
        let remainder = max(codedFrames - end, 0)
        if fragmented {
            // The last sample ends where the valid frames do.
            try writeFragment(lastDuration: remainder)
            try patchMovie(totals, final: true)
            return
        }
        if let last = durations.indices.last { durations[last] = UInt32(max(Int64(durations[last]) - remainder, 0)) }
        var size = ByteWriter()
        if dataBytes + 8 <= Int64(UInt32.max) {
            size.be32(dataBytes + 8)
            try output.overwrite(size.bytes, at: mdatStart + 8)
        } else {
            size.be32(1); size.tag("mdat"); size.be64(dataBytes + 16)
            try output.overwrite(size.bytes, at: mdatStart)
        }
        let (moov, _) = movie(valid: totals.validFrames, remainder: Int(remainder), duration: end, base: output.length, cookie: totals.magicCookie)
        try output.append(moov)
    }

    // MARK: fragments

    private func writeFragment(lastDuration trimmed: Int64?) throws {
        guard !sizes.isEmpty else { return }
        if let trimmed, let last = durations.indices.last { durations[last] = UInt32(max(Int64(durations[last]) - trimmed, 0)) }
        sequence += 1
        var mfhd = ByteWriter(); mfhd.be32(sequence)
        // tfhd: track 1, default-base-is-moof.
        var tfhd = ByteWriter(); tfhd.be32(1)
        var tfdt = ByteWriter(); tfdt.be64(fragmentStart)
        // trun: data offset, per-sample duration and size.
        var trun = ByteWriter()
        trun.be32(sizes.count); trun.be32(0)   // data offset, filled in below
        for (size, duration) in zip(sizes, durations) { trun.be32(duration); trun.be32(size) }
        let trunBox = MP4Box.full("trun", version: 0, flags: 0x000301, trun.bytes)
        let traf = MP4Box.box("traf", MP4Box.full("tfhd", version: 0, flags: 0x020000, tfhd.bytes)
                              + MP4Box.full("tfdt", version: 1, flags: 0, tfdt.bytes) + trunBox)
        var moof = MP4Box.box("moof", MP4Box.full("mfhd", version: 0, flags: 0, mfhd.bytes) + traf)
        // The data offset: from the moof's start to the mdat's first byte.
        let offsetField = moof.count - trunBox.count + 16
        let dataOffset = moof.count + 8
        for index in 0..<4 { moof[offsetField + index] = UInt8(truncatingIfNeeded: dataOffset >> (24 - 8 * index)) }
        try output.append(moof + MP4Box.box("mdat", fragment))
        fragmentStart += durations.reduce(Int64(0)) { $0 + Int64($1) }
        sizes.removeAll(keepingCapacity: true)
        durations.removeAll(keepingCapacity: true)
        fragment.removeAll(keepingCapacity: true)
    }

    /// Rewrites the moov's durations, edit and iTunSMPB for what the fragments hold.
    private func patchMovie(_ totals: ContainerTotals, final: Bool) throws {
        guard output.canSeek else { return }
        let end = final ? Int64(totals.primingFrames) + totals.validFrames : fragmentStart
        let valid = max(end - Int64(totals.primingFrames), 0)
        for offset in [patches.movieDuration, patches.trackDuration, patches.mediaDuration].compactMap({ $0 }) {
            var field = ByteWriter(); field.be64(end)
            try output.overwrite(field.bytes, at: offset)
        }
        if let offset = patches.editDuration {
            var field = ByteWriter(); field.be64(valid)
            try output.overwrite(field.bytes, at: offset)
        }
        if let offset = patches.smpbText {
            let remainder = final ? max(codedFrames - end, 0) : 0
            try output.overwrite(MP4Box.iTunSMPB(priming: totals.primingFrames, remainder: Int(remainder), valid: valid), at: offset)
        }
    }

    // MARK: the movie box

    /// The `moov` box, and where its changing fields are when it starts at file offset `base`.
    private func movie(valid: Int64, remainder: Int, duration: Int64, base: Int64, cookie: [UInt8]? = nil) -> ([UInt8], MovieFields) {
        var fields = MovieFields()
        var parts: [(bytes: [UInt8], durationAt: Int?, kind: Int)] = []
        // mvhd (version 1): times, timescale, duration, rate, volume, matrix, next track id.
        var mvhd = ByteWriter()
        mvhd.be64(Int64(0)); mvhd.be64(Int64(0)); mvhd.be32(timescale)
        let mvhdDuration = mvhd.bytes.count; mvhd.be64(duration)
        mvhd.be32(0x0001_0000); mvhd.be16(0x0100); mvhd.append([UInt8](repeating: 0, count: 10))
        for value: UInt32 in [0x0001_0000, 0, 0, 0, 0x0001_0000, 0, 0, 0, 0x4000_0000] { mvhd.be32(value) }
        mvhd.append([UInt8](repeating: 0, count: 24)); mvhd.be32(2)
        parts.append((MP4Box.full("mvhd", version: 1, flags: 0, mvhd.bytes), 12 + mvhdDuration, 0))

        // The track.
        var tkhd = ByteWriter()
        tkhd.be64(Int64(0)); tkhd.be64(Int64(0)); tkhd.be32(1); tkhd.be32(0)
        let tkhdDuration = tkhd.bytes.count; tkhd.be64(duration)
        tkhd.append([UInt8](repeating: 0, count: 8)); tkhd.be16(0); tkhd.be16(0); tkhd.be16(0x0100); tkhd.be16(0)
        for value: UInt32 in [0x0001_0000, 0, 0, 0, 0x0001_0000, 0, 0, 0, 0x4000_0000] { tkhd.be32(value) }
        tkhd.be32(0); tkhd.be32(0)
        let tkhdBox = MP4Box.full("tkhd", version: 1, flags: 7, tkhd.bytes)

        var elst = ByteWriter()
        elst.be32(1)
        let elstDuration = elst.bytes.count; elst.be64(valid)
        elst.be64(Int64(stream.primingFrames)); elst.be32(0x0001_0000)
        let elstBox = MP4Box.full("elst", version: 1, flags: 0, elst.bytes)
        let edts = MP4Box.box("edts", elstBox)

        var mdhd = ByteWriter()
        mdhd.be64(Int64(0)); mdhd.be64(Int64(0)); mdhd.be32(timescale)
        let mdhdDuration = mdhd.bytes.count; mdhd.be64(duration)
        mdhd.be16(0x55C4); mdhd.be16(0)   // language "und"
        let mdhdBox = MP4Box.full("mdhd", version: 1, flags: 0, mdhd.bytes)
        var hdlr = ByteWriter()
        hdlr.be32(0); hdlr.tag("soun"); hdlr.append([UInt8](repeating: 0, count: 12)); hdlr.append(Array("SoundHandler".utf8) + [0])
        let hdlrBox = MP4Box.full("hdlr", version: 0, flags: 0, hdlr.bytes)
        let smhd = MP4Box.full("smhd", version: 0, flags: 0, [0, 0, 0, 0])
        let dinf = MP4Box.box("dinf", MP4Box.full("dref", version: 0, flags: 0, [0, 0, 0, 1] + MP4Box.full("url ", version: 0, flags: 1, [])))
        let stbl = MP4Box.box("stbl", sampleTables(cookie: cookie ?? stream.magicCookie))
        let minf = MP4Box.box("minf", smhd + dinf + stbl)
        let mdiaHead = mdhdBox + hdlrBox
        let mdia = MP4Box.box("mdia", mdiaHead + minf)
        let trak = MP4Box.box("trak", tkhdBox + edts + mdia)

        let smpb = MP4Box.iTunSMPB(priming: stream.primingFrames, remainder: remainder, valid: valid)
        let (udta, smpbAt) = MP4Box.udta(iTunSMPB: smpb)
        var mvex: [UInt8] = []
        if fragmented {
            // trex: track 1, sample description 1, no other defaults.
            mvex = MP4Box.box("mvex", MP4Box.full("trex", version: 0, flags: 0, [0, 0, 0, 1, 0, 0, 0, 1] + [UInt8](repeating: 0, count: 12)))
        }
        let body = parts[0].bytes + trak + mvex + udta
        let moov = MP4Box.box("moov", body)
        // Offsets: moov header 8, mvhd first; the trak after it.
        let mvhdStart = base + 8
        fields.movieDuration = mvhdStart + Int64(parts[0].durationAt ?? 0)
        let trakStart = mvhdStart + Int64(parts[0].bytes.count)
        fields.trackDuration = trakStart + 8 + 12 + Int64(tkhdDuration)
        let edtsStart = trakStart + 8 + Int64(tkhdBox.count)
        fields.editDuration = edtsStart + 8 + 12 + Int64(elstDuration)
        let mdiaStart = edtsStart + Int64(edts.count)
        fields.mediaDuration = mdiaStart + 8 + 12 + Int64(mdhdDuration)
        fields.smpbText = trakStart + Int64(trak.count + mvex.count) + Int64(smpbAt)
        return (moov, fields)
    }

    /// `stsd`, `stts`, `stsc`, `stsz`, `stco`/`co64` (empty tables in fragmented mode).
    private func sampleTables(cookie: [UInt8]?) -> [UInt8] {
        let stsd = MP4Box.full("stsd", version: 0, flags: 0, [0, 0, 0, 1] + sampleEntry(cookie: cookie))
        var stts = ByteWriter(), stsc = ByteWriter(), stsz = ByteWriter(), stco = ByteWriter()
        var runs: [(count: Int, duration: UInt32)] = []
        for duration in durations {
            if let last = runs.last, last.duration == duration { runs[runs.count - 1].count += 1 } else { runs.append((1, duration)) }
        }
        if fragmented { runs = [] }
        stts.be32(runs.count)
        for run in runs { stts.be32(run.count); stts.be32(run.duration) }
        let chunkList = fragmented ? [] : chunks.filter { $0.samples > 0 }
        var chunkRuns: [(first: Int, samples: Int)] = []
        for (index, chunk) in chunkList.enumerated() where chunkRuns.last?.samples != chunk.samples {
            chunkRuns.append((index + 1, chunk.samples))
        }
        stsc.be32(chunkRuns.count)
        for run in chunkRuns { stsc.be32(run.first); stsc.be32(run.samples); stsc.be32(1) }
        stsz.be32(0); stsz.be32(fragmented ? 0 : sizes.count)
        if !fragmented { for size in sizes { stsz.be32(size) } }
        let wide = chunkList.contains { $0.offset > Int64(UInt32.max) }
        stco.be32(chunkList.count)
        for chunk in chunkList { if wide { stco.be64(chunk.offset) } else { stco.be32(chunk.offset) } }
        return stsd + MP4Box.full("stts", version: 0, flags: 0, stts.bytes) + MP4Box.full("stsc", version: 0, flags: 0, stsc.bytes)
            + MP4Box.full("stsz", version: 0, flags: 0, stsz.bytes) + MP4Box.full(wide ? "co64" : "stco", version: 0, flags: 0, stco.bytes)
    }

    /// The sample entry of the format, with its decoder configuration box.
    private func sampleEntry(cookie: [UInt8]?) -> [UInt8] {
        let format = stream.format
        var entry = ByteWriter()
        entry.append([0, 0, 0, 0, 0, 0]); entry.be16(1)          // reserved, data reference index
        entry.append([UInt8](repeating: 0, count: 8))            // version, revision, vendor
        entry.be16(format.channelsPerFrame); entry.be16(16)
        entry.be16(0); entry.be16(0)
        entry.be32(timescale < 65536 ? UInt32(timescale) << 16 : 0)
        switch format.formatID {
        case .appleLossless:
            return MP4Box.box("alac", entry.bytes + MP4Box.full("alac", version: 0, flags: 0, Array((cookie ?? []).suffix(24))))
        case .opus:
            var why = ""
            let header = cookie.flatMap { OpusHeader($0, why: &why) }
            var dOps = ByteWriter()
            dOps.u8(0); dOps.u8(format.channelsPerFrame); dOps.be16(header?.preSkip ?? stream.primingFrames)
            dOps.be32(header?.inputSampleRate ?? 48000); dOps.be16(header?.outputGain ?? 0); dOps.u8(header?.mappingFamily ?? 0)
            if let header, header.mappingFamily != 0 {
                dOps.u8(header.streamCount); dOps.u8(header.coupledCount); dOps.append(header.mapping)
            }
            return MP4Box.box("Opus", entry.bytes + MP4Box.box("dOps", dOps.bytes))
        case .flac:
            let box = cookie.flatMap(FLACStreamInfo.init(magicCookie:))?.dfLaBox ?? []
            return MP4Box.box("fLaC", entry.bytes + box)
        default:
            return MP4Box.box("mp4a", entry.bytes + MP4Box.esds(config: cookie ?? [], maximumPacketSize: stream.maximumPacketSize,
                                                               bitRate: 0))
        }
    }
}

/// Building MPEG-4 boxes.
enum MP4Box {
    static func box(_ type: String, _ body: [UInt8]) -> [UInt8] {
        var out = ByteWriter()
        out.be32(8 + body.count); out.tag(type); out.append(body)
        return out.bytes
    }

    static func full(_ type: String, version: UInt8, flags: UInt32, _ body: [UInt8]) -> [UInt8] {
        box(type, [version, UInt8(flags >> 16 & 0xFF), UInt8(flags >> 8 & 0xFF), UInt8(flags & 0xFF)] + body)
    }

    /// An MPEG-4 descriptor: tag, size in the 4-byte form, body.
    static func descriptor(_ tag: UInt8, _ body: [UInt8]) -> [UInt8] {
        let size = body.count
        return [tag, 0x80 | UInt8(size >> 21 & 0x7F), 0x80 | UInt8(size >> 14 & 0x7F), 0x80 | UInt8(size >> 7 & 0x7F), UInt8(size & 0x7F)] + body
    }

    /// `esds` for AAC: ES descriptor, decoder configuration (MPEG-4 audio, buffer size, bit rates),
    /// the AudioSpecificConfig, SL configuration.
    static func esds(config: [UInt8], maximumPacketSize: Int, bitRate: Int) -> [UInt8] {
        full("esds", version: 0, flags: 0, esDescriptor(config: config, maximumPacketSize: maximumPacketSize, bitRate: bitRate))
    }

    /// The ES descriptor alone: the body of `esds`, and the magic cookie of AAC in CAF.
    static func esDescriptor(config: [UInt8], maximumPacketSize: Int, bitRate: Int) -> [UInt8] {
        var decoderConfig = ByteWriter()
        decoderConfig.u8(0x40); decoderConfig.u8(0x15)
        decoderConfig.u8(maximumPacketSize >> 16); decoderConfig.be16(maximumPacketSize & 0xFFFF)
        decoderConfig.be32(bitRate); decoderConfig.be32(bitRate)
        return descriptor(3, [0, 1, 0] + descriptor(4, decoderConfig.bytes + descriptor(5, config)) + descriptor(6, [2]))
    }

    /// iTunSMPB's text as iTunes writes it: twelve hexadecimal words, the second the priming, the
    /// third the remainder, the fourth (64-bit) the valid frames.
    static func iTunSMPB(priming: Int, remainder: Int, valid: Int64) -> [UInt8] {
        func hex(_ value: UInt64, _ digits: Int) -> String {
            let text = String(value, radix: 16, uppercase: true)
            return String(repeating: "0", count: max(digits - text.count, 0)) + text
        }
        let words = [hex(0, 8), hex(UInt64(priming), 8), hex(UInt64(remainder), 8), hex(UInt64(max(valid, 0)), 16)] + Array(repeating: hex(0, 8), count: 8)
        return Array((" " + words.joined(separator: " ")).utf8)
    }

    /// `udta` with an iTunes `meta`/`ilst` holding the `iTunSMPB` freeform tag, and the offset of
    /// the tag's text in it.
    static func udta(iTunSMPB text: [UInt8]) -> ([UInt8], Int) {
        let mean = full("mean", version: 0, flags: 0, Array("com.apple.iTunes".utf8))
        let name = full("name", version: 0, flags: 0, Array("iTunSMPB".utf8))
        let data = box("data", [0, 0, 0, 1, 0, 0, 0, 0] + text)
        let freeform = box("----", mean + name + data)
        let ilst = box("ilst", freeform)
        var hdlr = ByteWriter()
        hdlr.be32(0); hdlr.tag("mdir"); hdlr.tag("appl"); hdlr.be32(0); hdlr.be32(0); hdlr.u8(0)
        let meta = full("meta", version: 0, flags: 0, full("hdlr", version: 0, flags: 0, hdlr.bytes) + ilst)
        let udta = box("udta", meta)
        return (udta, udta.count - text.count)
    }
}
