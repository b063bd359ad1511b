/// Opus's identification header, `OpusHead` (RFC 7845 §5.1), which is also the magic cookie of
/// ``AudioFormatID/opus``: the container layer reads the pre-skip and the channel mapping from it,
/// the decoder its streams and gain. One parser for both.
public struct OpusHeader: Hashable, Sendable {
    /// Output channels (1–255).
    public var channels: Int
    /// Samples at 48 kHz to drop at the start of the decoded stream.
    public var preSkip: Int
    /// The rate of the encoder's input, for information only (decoding is at 48 kHz).
    public var inputSampleRate: Int
    /// Output gain in Q7.8 dB (a 256th of a decibel), which a decoder must apply.
    public var outputGain: Int
    /// Channel mapping family: 0 (mono/stereo, one stream), 1 (Vorbis order, up to 8 channels),
    /// 255 (undefined order) and others.
    public var mappingFamily: Int
    /// Elementary Opus streams in each packet, and how many of them are coupled (stereo).
    public var streamCount: Int
    /// Streams that code two channels (coupled pairs).
    public var coupledCount: Int
    /// For each output channel the decoded channel it takes (255: silence).
    public var mapping: [UInt8]

    /// The sample rate every Opus stream decodes at here.
    public static let decodingRate = 48_000

    /// Reads an `OpusHead` packet; nil when it is not one, with `why` saying what is wrong.
    public init?(_ bytes: [UInt8], why: inout String) {
        guard bytes.count >= 19, bytes.starts(with: Array("OpusHead".utf8)) else {
            why = "not an OpusHead packet (\(bytes.count) bytes)"
            return nil
        }
        // Version: the major number (high nibble) must be 0; minor numbers are compatible.
        guard bytes[8] >> 4 == 0 else {
            why = "OpusHead version \(bytes[8]) is not one this decoder reads (major version 0)"
            return nil
        }
        func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
        channels = Int(bytes[9])
        preSkip = u16(10)
        inputSampleRate = u16(12) | u16(14) << 16
        outputGain = Int(Int16(bitPattern: UInt16(u16(16))))
        mappingFamily = Int(bytes[18])
        guard channels > 0 else {
            why = "OpusHead says 0 channels"
            return nil
        }
        if mappingFamily == 0 {
            guard channels <= 2 else {
                why = "OpusHead mapping family 0 with \(channels) channels (at most 2)"
                return nil
            }
            streamCount = 1
            coupledCount = channels - 1
            mapping = channels == 2 ? [0, 1] : [0]
        } else {
            guard bytes.count >= 21 + channels else {
                why = "OpusHead with mapping family \(mappingFamily) ends before its channel mapping table"
                return nil
            }
            streamCount = Int(bytes[19])
            coupledCount = Int(bytes[20])
            mapping = Array(bytes[21..<(21 + channels)])
            guard streamCount > 0, coupledCount <= streamCount, streamCount + coupledCount <= 255,
                  mapping.allSatisfy({ $0 == 255 || Int($0) < streamCount + coupledCount }) else {
                why = "OpusHead's channel mapping table is inconsistent (\(streamCount) streams, \(coupledCount) coupled, mapping \(mapping))"
                return nil
            }
        }
    }

    /// The header as an `OpusHead` packet (version 1).
    public var bytes: [UInt8] {
        var out = Array("OpusHead".utf8)
        out.append(1)
        out.append(UInt8(truncatingIfNeeded: channels))
        out += [UInt8(truncatingIfNeeded: preSkip), UInt8(truncatingIfNeeded: preSkip >> 8)]
        out += (0..<4).map { UInt8(truncatingIfNeeded: inputSampleRate >> (8 * $0)) }
        let gain = UInt16(bitPattern: Int16(truncatingIfNeeded: outputGain))
        out += [UInt8(truncatingIfNeeded: gain), UInt8(truncatingIfNeeded: gain >> 8)]
        out.append(UInt8(truncatingIfNeeded: mappingFamily))
        if mappingFamily != 0 {
            out += [UInt8(truncatingIfNeeded: streamCount), UInt8(truncatingIfNeeded: coupledCount)]
            out += mapping
        }
        return out
    }

    /// The memberwise form, for containers that state the fields another way (MP4's `dOps`).
    public init(channels: Int, preSkip: Int, inputSampleRate: Int, outputGain: Int, mappingFamily: Int,
                streamCount: Int, coupledCount: Int, mapping: [UInt8]) {
        self.channels = channels
        self.preSkip = preSkip
        self.inputSampleRate = inputSampleRate
        self.outputGain = outputGain
        self.mappingFamily = mappingFamily
        self.streamCount = streamCount
        self.coupledCount = coupledCount
        self.mapping = mapping
    }

    /// Samples at 48 kHz an Opus packet decodes to, from its table-of-contents byte and frame
    /// count (RFC 6716 §3.1); nil for a packet that is empty or malformed.
    public static func samples(inPacket packet: UnsafeRawBufferPointer) -> Int? {
        guard packet.count > 0 else { return nil }
        let toc = packet[0]
        let config = Int(toc >> 3)
        // Frame sizes in 48 kHz samples: SILK 10/20/40/60 ms, hybrid 10/20 ms, CELT 2.5/5/10/20 ms.
        let perFrame: Int
        switch config {
        case 0..<12: perFrame = [480, 960, 1920, 2880][config & 3]
        case 12..<16: perFrame = [480, 960][config & 1]
        default: perFrame = [120, 240, 480, 960][config & 3]
        }
        let frames: Int
        switch toc & 3 {
        case 0: frames = 1
        case 1, 2: frames = 2
        default:
            guard packet.count >= 2 else { return nil }
            frames = Int(packet[1] & 0x3F)
            guard frames > 0 else { return nil }
        }
        let total = perFrame * frames
        // A packet holds at most 120 ms.
        return total <= 5_760 ? total : nil
    }

    /// ``samples(inPacket:)`` for bytes in an array.
    public static func samples(inPacket packet: [UInt8]) -> Int? {
        packet.withUnsafeBytes { samples(inPacket: $0) }
    }
}
