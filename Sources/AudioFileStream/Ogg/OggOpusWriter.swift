import BufferQueue

/// Writes Ogg Opus (RFC 7845): the `OpusHead` page (its pre-skip the encoder's priming), the
/// `OpusTags` page, then audio pages whose granule positions count 48 kHz samples from the start
/// of the decoded stream, pre-skip included. The last page is marked end-of-stream and its
/// granule position is pre-skip + valid frames, which trims the padding of the last packet.
///
/// Pages are closed at about 4 KiB or 255 segments (as libogg does) and at every checkpoint of a
/// recording, so a process killed mid-way leaves pages that play to the last checkpoint (a
/// stream without its end-of-stream page, which readers accept). When nothing is left to put on
/// the end-of-stream page, the last page written is marked instead (its header rewritten).
package final class OggOpusWriter: ContainerWriter {
    private let output: AudioFileOutput
    private let stream: ContainerStream
    private let preSkip: Int
    private let serial: UInt32
    private var sequence: UInt32 = 0
    /// The page being filled: lacing values, body, and the granule after its last packet.
    private var lacing: [UInt8] = []
    private var body: [UInt8] = []
    private var granule: Int64 = 0
    /// The last page written, to mark it as the end when the stream ends on a page boundary.
    private var lastPage: (offset: Int64, bytes: [UInt8])?
    private static let targetBody = 4096

    package init(output: AudioFileOutput, stream: ContainerStream) throws {
        guard stream.format.formatID == .opus, let cookie = stream.magicCookie, cookie.starts(with: Array("OpusHead".utf8)) else {
            throw AudioFileWriterError(.unsupportedFormat, path: output.path, "an Ogg file is written for Opus (with its OpusHead), not \(stream.format.formatID)")
        }
        self.output = output
        self.stream = stream
        var why = ""
        preSkip = OpusHeader(cookie, why: &why)?.preSkip ?? stream.primingFrames
        // A serial number that differs between files (streams are told apart by it when chained).
        var seed = SystemRandomNumberGenerator()
        serial = UInt32.random(in: 1...UInt32.max, using: &seed)
        let vendor = Array("swift-audio-queue".utf8)
        var tags = ByteWriter()
        tags.tag("OpusTags"); tags.le32(vendor.count); tags.append(vendor); tags.le32(0)
        try writePage(segments: [cookie], granule: 0, flags: 0x02)
        try writePage(segments: [tags.bytes], granule: 0, flags: 0)
        lastPage = nil
    }

    package func append(_ packets: EncodedPackets) throws {
        for index in 0..<packets.count {
            let packet = packets.bytes(of: index)
            let values = packet.count / 255 + 1
            guard values <= 255 else {
                throw AudioFileWriterError(.unsupportedFormat, path: output.path, "an Opus packet of \(packet.count) bytes does not fit an Ogg page")
            }
            if lacing.count + values > 255 { try closePage(flags: 0) }
            lacing += [UInt8](repeating: 255, count: values - 1) + [UInt8(packet.count % 255)]
            body += packet
            granule += Int64(packets.packets[index].frames)
            if body.count >= Self.targetBody { try closePage(flags: 0) }
        }
    }

    package func checkpoint(_ totals: ContainerTotals) throws {
        if !lacing.isEmpty { try closePage(flags: 0) }
        try output.flush()
    }

    package func finish(_ totals: ContainerTotals) throws {
        let end = Int64(preSkip) + totals.validFrames
        if !lacing.isEmpty {
            granule = end
            try closePage(flags: 0x04)
        } else if var last = lastPage, output.canSeek {
            // The stream ended on a page boundary: that page becomes the last.
            last.bytes[5] |= 0x04
            withUnsafeBytes(of: end.littleEndian) { for index in 0..<8 { last.bytes[6 + index] = $0[index] } }
            Self.seal(&last.bytes)
            try output.overwrite(last.bytes, at: last.offset)
        }
    }

    private func closePage(flags: UInt8) throws {
        try writePage(lacing: lacing, body: body, granule: granule, flags: flags)
        lacing.removeAll(keepingCapacity: true)
        body.removeAll(keepingCapacity: true)
    }

    private func writePage(segments: [[UInt8]], granule: Int64, flags: UInt8) throws {
        var values: [UInt8] = []
        for segment in segments { values += [UInt8](repeating: 255, count: segment.count / 255) + [UInt8(segment.count % 255)] }
        try writePage(lacing: values, body: segments.flatMap { $0 }, granule: granule, flags: flags)
    }

    private func writePage(lacing: [UInt8], body: [UInt8], granule: Int64, flags: UInt8) throws {
        var page = ByteWriter()
        page.tag("OggS"); page.u8(0); page.u8(Int(flags))
        page.le64(granule)
        page.le32(Int64(serial)); page.le32(Int64(sequence)); page.le32(0)
        page.u8(lacing.count); page.append(lacing); page.append(body)
        Self.seal(&page.bytes)
        lastPage = (output.length, page.bytes)
        try output.append(page.bytes)
        sequence &+= 1
    }

    /// Puts the page's CRC (computed with its CRC field as zero) in place.
    static func seal(_ page: inout [UInt8]) {
        let crc = page.withUnsafeBytes { MPEGCRC32.checksum($0, initial: 0, zeroing: 22..<26) }
        withUnsafeBytes(of: crc.littleEndian) { for index in 0..<4 { page[22 + index] = $0[index] } }
    }
}
