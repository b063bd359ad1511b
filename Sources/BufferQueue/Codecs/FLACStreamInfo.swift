/// FLAC's STREAMINFO metadata block (34 bytes), which the magic cookie of ``AudioFormatID/flac``
/// carries: the container layer reads the format and total from it, the decoder the MD5 and what
/// libFLAC is started with. One reader for both.
public struct FLACStreamInfo: Hashable, Sendable {
    /// The smallest block in the stream, in samples per channel.
    public var minimumBlockSize: Int
    /// The largest block in the stream, in samples per channel.
    public var maximumBlockSize: Int
    /// The smallest frame in bytes (0: not known).
    public var minimumFrameSize: Int
    /// The largest frame in bytes (0: not known).
    public var maximumFrameSize: Int
    /// Samples per second.
    public var sampleRate: Int
    /// Channels, 1–8.
    public var channels: Int
    /// Bits per sample, 4–32.
    public var bitsPerSample: Int
    /// Samples per channel in the stream; 0 when the encoder did not know.
    public var totalSamples: Int64
    /// The MD5 of the decoded samples (all zero: not computed).
    public var md5: [UInt8]
    /// The block's 34 bytes.
    public var bytes: [UInt8]

    /// Reads the block's 34 bytes (more are ignored); nil when they cannot be STREAMINFO.
    public init?(_ bytes: [UInt8]) {
        guard bytes.count >= 34 else { return nil }
        func be(_ at: Int, _ count: Int) -> Int { bytes[at..<(at + count)].reduce(0) { $0 << 8 | Int($1) } }
        minimumBlockSize = be(0, 2)
        maximumBlockSize = be(2, 2)
        minimumFrameSize = be(4, 3)
        maximumFrameSize = be(7, 3)
        sampleRate = be(10, 3) >> 4
        channels = Int(bytes[12] >> 1 & 7) + 1
        bitsPerSample = (Int(bytes[12] & 1) << 4 | Int(bytes[13] >> 4)) + 1
        totalSamples = Int64(bytes[13] & 0x0F) << 32 | Int64(be(14, 4))
        md5 = Array(bytes[18..<34])
        self.bytes = Array(bytes.prefix(34))
        guard sampleRate > 0, maximumBlockSize >= 16 || maximumBlockSize == minimumBlockSize else { return nil }
    }

    /// Reads the STREAMINFO a magic cookie carries, in any of the forms containers store it: `fLaC`
    /// and metadata blocks (a native stream's start, this library's cookie), an MP4 `dfLa` box's
    /// body (version and flags, then blocks), bare blocks, or the 34 bytes alone.
    public init?(magicCookie cookie: [UInt8]) {
        if cookie.count == 34 {
            self.init(cookie)
            return
        }
        // A STREAMINFO block header: type 0 (the last-block flag aside) and a length of 34.
        func isStreamInfoHeader(_ at: Int) -> Bool {
            cookie.count >= at + 4 + 34 && cookie[at] & 0x7F == 0 && cookie[at + 1] == 0 && cookie[at + 2] == 0 && cookie[at + 3] == 34
        }
        // After `fLaC`, after a whole dfLa box's header (size, type, version and flags: Apple's
        // CAF cookie), after a dfLa box's version and flags (four zero bytes), or at once.
        let wholeBox = cookie.count >= 12 && cookie[4..<8].elementsEqual("dfLa".utf8)
        guard let start = [cookie.starts(with: Array("fLaC".utf8)) ? 4 : nil, wholeBox ? 12 : nil, isStreamInfoHeader(0) ? 0 : nil,
                           cookie.prefix(4).allSatisfy({ $0 == 0 }) ? 4 : nil].compactMap({ $0 }).first,
              isStreamInfoHeader(start) else { return nil }
        self.init(Array(cookie[(start + 4)..<(start + 38)]))
    }

    /// The magic cookie of ``AudioFormatID/flac``: `fLaC` and this block as the last metadata block.
    public var magicCookie: [UInt8] { Array("fLaC".utf8) + [0x80, 0, 0, 34] + bytes }

    /// An MP4 `dfLa` box holding this block as the only metadata block: an MP4 sample entry's
    /// child, and the magic cookie Apple's CAF files carry.
    public var dfLaBox: [UInt8] {
        let size = 12 + 4 + bytes.count
        return [0, 0, UInt8(size >> 8), UInt8(size & 0xFF)] + Array("dfLa".utf8) + [0, 0, 0, 0, 0x80, 0, 0, 34] + bytes
    }

    /// The stream's format as packets of ``AudioFormatID/flac`` (frames per packet when constant).
    public var format: AudioStreamDescription {
        AudioStreamDescription(sampleRate: Double(sampleRate), formatID: .flac, bytesPerPacket: 0,
                               framesPerPacket: minimumBlockSize == maximumBlockSize ? maximumBlockSize : 0,
                               bytesPerFrame: 0, channelsPerFrame: channels, bitsPerChannel: bitsPerSample)
    }
}
