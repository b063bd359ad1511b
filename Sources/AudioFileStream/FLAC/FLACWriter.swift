import BufferQueue

/// Writes a native FLAC file: `fLaC`, STREAMINFO, a SEEKTABLE, a VORBIS_COMMENT naming the
/// writer, then the frames as they come.
///
/// At the end STREAMINFO gets the encoder's final values (the total samples, which is where FLAC
/// keeps the valid frames, the frame sizes and the MD5 of the samples) and the seek table its
/// points, one per ten seconds (or fewer for a long file: the table's size is reserved at the
/// start from the expected length, an hour when none is known, at most 1 000 points; unused
/// points stay placeholders, as the format allows). Until then STREAMINFO's total and MD5 are
/// 0 — "unknown" — so a recording that dies mid-way is a valid FLAC stream up to its last whole
/// frame.
package final class FLACWriter: ContainerWriter {
    private let output: AudioFileOutput
    private let stream: ContainerStream
    private static let streamInfoOffset: Int64 = 8
    private let seekTableOffset: Int64
    private let seekPoints: Int
    private let firstFrame: Int64
    /// Each frame's first sample and byte offset from the first frame.
    private var frames: [(sample: Int64, offset: Int64, count: Int)] = []
    private var samples: Int64 = 0
    private var bytes: Int64 = 0

    package init(output: AudioFileOutput, stream: ContainerStream) throws {
        guard stream.format.formatID == .flac, let cookie = stream.magicCookie, let info = FLACStreamInfo(magicCookie: cookie) else {
            throw AudioFileWriterError(.unsupportedFormat, path: output.path, "a FLAC file holds FLAC (with its STREAMINFO), not \(stream.format.formatID)")
        }
        self.output = output
        self.stream = stream
        let rate = max(stream.format.sampleRate, 1)
        let expected = stream.expectedFrames ?? Int64(rate * 3600)
        seekPoints = Int(min(max(Double(expected) / (rate * 10), 1), 1000))
        var header = ByteWriter()
        header.tag("fLaC")
        header.u8(0); header.u8(0); header.be16(34)
        header.append(info.bytes)
        seekTableOffset = Int64(header.bytes.count) + 4
        header.u8(3); header.u8((18 * seekPoints) >> 16); header.be16(18 * seekPoints & 0xFFFF)
        for _ in 0..<seekPoints { header.be64(UInt64.max); header.be64(Int64(0)); header.be16(0) }
        let vendor = Array("swift-audio-queue".utf8)
        header.u8(0x80 | 4); header.u8(0); header.be16(4 + vendor.count + 4)
        header.le32(vendor.count); header.append(vendor); header.le32(0)
        firstFrame = Int64(header.bytes.count)
        try output.append(header.bytes)
    }

    package func append(_ packets: EncodedPackets) throws {
        try output.append(packets.allBytes)
        for packet in packets.packets {
            frames.append((samples, bytes, packet.frames))
            samples += Int64(packet.frames)
            bytes += Int64(packet.byteCount)
        }
    }

    package func checkpoint(_ totals: ContainerTotals) throws { try output.flush() }

    package func finish(_ totals: ContainerTotals) throws {
        guard output.canSeek else { return }
        if let cookie = totals.magicCookie, let info = FLACStreamInfo(magicCookie: cookie) {
            try output.overwrite(info.bytes, at: Self.streamInfoOffset)
        }
        // Points at even spacing, each the frame holding its sample; duplicates dropped.
        var table = ByteWriter()
        var used = 0
        var lastFrame = -1
        var index = 0
        for point in 0..<seekPoints where samples > 0 {
            let target = samples * Int64(point) / Int64(seekPoints)
            while index + 1 < frames.count && frames[index + 1].sample <= target { index += 1 }
            guard index != lastFrame, index < frames.count else { continue }
            lastFrame = index
            table.be64(frames[index].sample); table.be64(frames[index].offset); table.be16(frames[index].count)
            used += 1
        }
        for _ in used..<seekPoints { table.be64(UInt64.max); table.be64(Int64(0)); table.be16(0) }
        try output.overwrite(table.bytes, at: seekTableOffset)
    }
}
