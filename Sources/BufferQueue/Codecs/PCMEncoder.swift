/// "Encodes" linear PCM: the packets are the frames in the file's layout, which
/// ``AudioEncodingConverter`` has already converted them to. It lets a file writer treat PCM like
/// every other format.
///
/// Packets of constant size come as runs: one entry of ``EncodedPackets`` may hold many frames.
public final class PCMEncoder: AudioEncoder {
    public let inputFormat: AudioStreamDescription
    public let outputFormat: AudioStreamDescription
    public var magicCookie: [UInt8]? { nil }
    public var primingFrames: Int { 0 }
    public var maximumPacketSize: Int { outputFormat.bytesPerPacket }

    /// - Throws: ``AudioQueueError/Code/codecNotFound`` for a layout the library does not write.
    public init(format: AudioStreamDescription) throws {
        _ = try PCMSampleLayout(format)
        inputFormat = format
        outputFormat = format
    }

    /// Every frame is its own packet.
    public static let factory = AudioEncoderFactory(name: "linear PCM", formats: [.linearPCM], traits: .independent) { format, _ in
        try PCMEncoder(format: format)
    }

    public func encode(_ frames: UnsafeRawBufferPointer, into output: EncodedPackets) throws {
        let count = frames.count / outputFormat.bytesPerFrame
        guard count > 0 else { return }
        output.append(UnsafeRawBufferPointer(rebasing: frames[0..<(count * outputFormat.bytesPerFrame)]), frames: count)
    }

    public func finish(into output: EncodedPackets) throws {}
}

/// Encodes ITU-T G.711 µ-law (`'ulaw'`) and A-law (`'alaw'`) from 16-bit samples: each sample
/// becomes the code whose value (as ``G711Decoder`` expands it) is nearest, through a 64 Ki-entry
/// table, so a decode of the output is the source rounded to the nearest G.711 level.
public final class G711Encoder: AudioEncoder {
    public let inputFormat: AudioStreamDescription
    public let outputFormat: AudioStreamDescription
    public var magicCookie: [UInt8]? { nil }
    public var primingFrames: Int { 0 }
    public var maximumPacketSize: Int { outputFormat.bytesPerPacket }
    private let table: [UInt8]

    /// - Throws: ``AudioQueueError/Code/invalidPropertyValue`` for a rate or channel count out of range.
    public init(format: AudioStreamDescription) throws {
        guard format.formatID == .uLaw || format.formatID == .aLaw else {
            throw AudioQueueError(.codecNotFound, "\(format.formatID) is not G.711 µ-law or A-law")
        }
        let channels = format.channelsPerFrame
        guard (1...64).contains(channels), format.sampleRate > 0, format.sampleRate.isFinite else {
            throw AudioQueueError(.invalidPropertyValue, "G.711 with \(channels) channels at \(format.sampleRate) Hz is not encoded")
        }
        inputFormat = .int16(sampleRate: format.sampleRate, channels: channels)
        outputFormat = AudioStreamDescription(sampleRate: format.sampleRate, formatID: format.formatID, bytesPerPacket: channels,
                                              framesPerPacket: 1, bytesPerFrame: channels, channelsPerFrame: channels, bitsPerChannel: 8)
        table = format.formatID == .uLaw ? Self.uLawCodes : Self.aLawCodes
    }

    /// Every sample is coded on its own.
    public static let factory = AudioEncoderFactory(name: "G.711", formats: [.uLaw, .aLaw], traits: .independent) { format, _ in
        try G711Encoder(format: format)
    }

    public func encode(_ frames: UnsafeRawBufferPointer, into output: EncodedPackets) throws {
        let channels = outputFormat.channelsPerFrame
        let count = frames.count / (2 * channels)
        guard count > 0 else { return }
        let samples = count * channels
        let space = output.reserve(bytes: samples)
        table.withUnsafeBufferPointer { table in
            for i in 0..<samples {
                let value = Int16(littleEndian: frames.loadUnaligned(fromByteOffset: 2 * i, as: Int16.self))
                space[i] = table[Int(UInt16(bitPattern: value))]
            }
        }
        output.commit(bytes: samples, frames: count)
    }

    public func finish(into output: EncodedPackets) throws {}

    /// For every 16-bit value (indexed by its bit pattern) the code whose expansion is nearest;
    /// a tie goes to the level of smaller magnitude, and µ-law's two zeros to 0xFF.
    static func codes(_ value: (UInt8) -> Int) -> [UInt8] {
        var pairs: [(value: Int, code: UInt8)] = []
        for code in 0...255 { pairs.append((value(UInt8(code)), UInt8(code))) }
        pairs.sort { first, second in first.value != second.value ? first.value < second.value : first.code > second.code }
        var levels: [(value: Int, code: UInt8)] = []
        for pair in pairs where levels.last?.value != pair.value { levels.append(pair) }
        var table = [UInt8](repeating: 0, count: 65536)
        var next = 0
        for sample in -32768...32767 {
            while next + 1 < levels.count {
                let here = abs(levels[next].value - sample), there = abs(levels[next + 1].value - sample)
                guard there < here || there == here && abs(levels[next + 1].value) < abs(levels[next].value) else { break }
                next += 1
            }
            table[Int(UInt16(bitPattern: Int16(sample)))] = levels[next].code
        }
        return table
    }

    static let uLawCodes = codes(G711Decoder.uLawValue)
    static let aLawCodes = codes(G711Decoder.aLawValue)
}
