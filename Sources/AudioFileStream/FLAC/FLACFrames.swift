import BufferQueue

extension FLACStreamInfo {
    /// A STREAMINFO for a stream that has none (one cut before its first frame): what the first
    /// frame's header says, no total, no MD5.
    init?(firstFrame header: FLACFrameHeader) {
        guard header.sampleRate > 0, header.bitsPerSample > 0 else { return nil }
        let minimum = header.variableBlockSize ? 16 : header.blockSize, maximum = header.variableBlockSize ? 65_535 : header.blockSize
        var bytes = [UInt8(minimum >> 8), UInt8(minimum & 0xFF), UInt8(maximum >> 8), UInt8(maximum & 0xFF), 0, 0, 0, 0, 0, 0]
        bytes += [UInt8(header.sampleRate >> 12 & 0xFF), UInt8(header.sampleRate >> 4 & 0xFF),
                  UInt8((header.sampleRate & 0x0F) << 4 | (header.channels - 1) << 1 | (header.bitsPerSample - 1) >> 4),
                  UInt8(((header.bitsPerSample - 1) & 0x0F) << 4)]
        bytes += [UInt8](repeating: 0, count: 20)
        self.init(bytes)
    }

}

/// A FLAC frame header: what it says and how long it is.
struct FLACFrameHeader: Equatable {
    var blockSize: Int
    /// 0 when the header defers to STREAMINFO.
    var sampleRate: Int
    var channels: Int
    /// 0 when the header defers to STREAMINFO.
    var bitsPerSample: Int
    var variableBlockSize: Bool
    /// The frame number (fixed block size) or the first sample's number (variable).
    var number: Int64
    /// Header bytes, its CRC-8 included.
    var length: Int

    /// The header at the start of `bytes`: `.needMore` when too few bytes to tell.
    enum Parse: Equatable {
        case header(FLACFrameHeader)
        case needMore
        case invalid
    }

    static func parse(_ byte: (Int) -> UInt8, available: Int) -> Parse {
        guard available >= 4 else { return .needMore }
        guard byte(0) == 0xFF, byte(1) & 0xFE == 0xF8 else { return .invalid }
        let variable = byte(1) & 1 == 1
        let blockCode = Int(byte(2) >> 4), rateCode = Int(byte(2) & 0x0F)
        let channelCode = Int(byte(3) >> 4), sizeCode = Int(byte(3) >> 1 & 7)
        guard blockCode != 0, rateCode != 15, channelCode <= 10, sizeCode != 3, byte(3) & 1 == 0 else { return .invalid }
        // The coded number: UTF-8-like, up to 7 bytes (36 bits).
        var at = 4
        guard available > at else { return .needMore }
        let lead = byte(at)
        let extra: Int
        switch lead {
        case 0x00..<0x80: extra = 0
        case 0xC0..<0xE0: extra = 1
        case 0xE0..<0xF0: extra = 2
        case 0xF0..<0xF8: extra = 3
        case 0xF8..<0xFC: extra = 4
        case 0xFC..<0xFE: extra = 5
        case 0xFE: extra = 6
        default: return .invalid
        }
        guard extra == 0 || variable || extra <= 5 else { return .invalid }
        var number = extra == 0 ? Int64(lead) : Int64(lead & (0x3F >> UInt8(extra)))
        at += 1
        guard available >= at + extra else { return .needMore }
        for _ in 0..<extra {
            let next = byte(at)
            guard next & 0xC0 == 0x80 else { return .invalid }
            number = number << 6 | Int64(next & 0x3F)
            at += 1
        }
        var blockSize: Int
        switch blockCode {
        case 1: blockSize = 192
        case 2...5: blockSize = 576 << (blockCode - 2)
        case 6:
            guard available > at else { return .needMore }
            blockSize = Int(byte(at)) + 1
            at += 1
        case 7:
            guard available > at + 1 else { return .needMore }
            blockSize = (Int(byte(at)) << 8 | Int(byte(at + 1))) + 1
            at += 2
        default: blockSize = 256 << (blockCode - 8)
        }
        var rate: Int
        switch rateCode {
        case 0: rate = 0
        case 12:
            guard available > at else { return .needMore }
            rate = Int(byte(at)) * 1000
            at += 1
        case 13, 14:
            guard available > at + 1 else { return .needMore }
            rate = (Int(byte(at)) << 8 | Int(byte(at + 1))) * (rateCode == 14 ? 10 : 1)
            at += 2
        default: rate = [0, 88_200, 176_400, 192_000, 8_000, 16_000, 22_050, 24_000, 32_000, 44_100, 48_000, 96_000][rateCode]
        }
        guard available > at else { return .needMore }
        var crc: UInt8 = 0
        for index in 0..<at { crc = crc8Table[Int(crc ^ byte(index))] }
        guard crc == byte(at) else { return .invalid }
        let bits = [0, 8, 12, 0, 16, 20, 24, 32][sizeCode]
        return .header(FLACFrameHeader(blockSize: blockSize, sampleRate: rate, channels: channelCode < 8 ? channelCode + 1 : 2,
                                       bitsPerSample: bits, variableBlockSize: variable, number: number, length: at + 1))
    }


    static func parse(_ bytes: [UInt8]) -> FLACFrameHeader? {
        if case .header(let header) = parse({ bytes[$0] }, available: bytes.count) { return header }
        return nil
    }

    /// CRC-8, polynomial 0x07 (frame headers).
    static let crc8Table: [UInt8] = (0..<256).map { index -> UInt8 in
        var crc = UInt8(index)
        for _ in 0..<8 { crc = crc & 0x80 != 0 ? (crc << 1) ^ 0x07 : crc << 1 }
        return crc
    }

    /// CRC-16, polynomial 0x8005 (whole frames; over a frame with its CRC the result is 0).
    static let crc16Table: [UInt16] = (0..<256).map { index -> UInt16 in
        var crc = UInt16(index) << 8
        for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x8005 : crc << 1 }
        return crc
    }

    /// Eight tables for eight bytes a step: table `k` is a byte's CRC followed by `k` zero bytes.
    static let crc16Slices: [UInt16] = {
        var tables = crc16Table
        for k in 1..<8 {
            for index in 0..<256 {
                let previous = tables[(k - 1) * 256 + index]
                tables.append((previous << 8) ^ crc16Table[Int(previous >> 8)])
            }
        }
        return tables
    }()

    /// The CRC-16 of `count` bytes at `bytes` continued from `crc`, eight bytes a step.
    static func crc16(_ crc: UInt16, _ bytes: UnsafePointer<UInt8>, count: Int) -> UInt16 {
        var crc = crc, at = 0
        crc16Slices.withUnsafeBufferPointer { t in
            while at + 8 <= count {
                let x0 = Int(bytes[at] ^ UInt8(truncatingIfNeeded: crc >> 8)), x1 = Int(bytes[at + 1] ^ UInt8(truncatingIfNeeded: crc))
                crc = t[7 * 256 + x0] ^ t[6 * 256 + x1] ^ t[5 * 256 + Int(bytes[at + 2])] ^ t[4 * 256 + Int(bytes[at + 3])]
                    ^ t[3 * 256 + Int(bytes[at + 4])] ^ t[2 * 256 + Int(bytes[at + 5])] ^ t[256 + Int(bytes[at + 6])] ^ t[Int(bytes[at + 7])]
                at += 8
            }
            while at < count {
                crc = (crc << 8) ^ t[Int(UInt8(truncatingIfNeeded: crc >> 8) ^ bytes[at])]
                at += 1
            }
        }
        return crc
    }
}

extension FLACFrameHeader {
    /// Whether a FLAC stream without its `fLaC` header (cut before a frame) starts `offset` bytes
    /// ahead: a frame header that states its rate and sample size, whose frame the next header
    /// ends with a matching CRC-16. Undecided while the bytes that decide have not come.
    static func confirmHeaderless(_ input: ByteInput, at offset: Int) -> (yes: Bool, needMore: Int?) {
        guard case .header(let header) = parse({ input.u8(offset + $0) }, available: input.available - offset),
              header.sampleRate > 0, header.bitsPerSample > 0 else {
            if case .needMore = parse({ input.u8(offset + $0) }, available: input.available - offset), !input.atEnd { return (false, offset + 16) }
            return (false, nil)
        }
        let limit = min(input.available, offset + (1 << 18))
        return input.withBytes(limit) { raw -> (Bool, Int?) in
            let bytes = raw.bindMemory(to: UInt8.self)
            guard let base = bytes.baseAddress else { return (false, nil) }
            var crc: UInt16 = 0, at = offset
            while at < limit {
                if at >= offset + header.length + 2, bytes[at] == 0xFF, crc == 0 {
                    if case .header = parse({ bytes[at + $0] }, available: limit - at) { return (true, nil) }
                }
                crc = crc16(crc, base + at, count: 1)
                at += 1
            }
            if input.atEnd { return (crc == 0 && limit == input.available, nil) }
            return (false, limit < offset + (1 << 18) ? limit + 4096 : nil)
        }
    }
}

/// FLAC's metadata block types.
enum FLACMetadataType: UInt8 {
    case streamInfo = 0, padding = 1, application = 2, seekTable = 3, vorbisComment = 4, cueSheet = 5, picture = 6
}

extension FLACFrameHeader.Parse {
    /// The header's block size, when a header was found.
    var blockSize: Int? {
        if case .header(let header) = self { return header.blockSize }
        return nil
    }
}
