/// Decodes ITU-T G.711 µ-law (`'ulaw'`) and A-law (`'alaw'`): one byte per sample, interleaved.
///
/// Each byte expands to the 16-bit value G.711 assigns it (µ-law up to ±32 124, A-law up to
/// ±32 256), scaled by 1/32 768, through a 256-entry table; so the output equals a 16-bit decode
/// converted to float, and decoding runs at memory speed.
public final class G711Decoder: AudioDecoder {
    public let outputFormat: AudioStreamDescription
    private let table: [Float]
    private let channels: Int

    /// - Throws: ``AudioQueueError/Code/codecNotFound`` for another format, and
    ///   ``AudioQueueError/Code/invalidPropertyValue`` when packets are not one byte per channel.
    public init(format: AudioStreamDescription) throws {
        guard format.formatID == .uLaw || format.formatID == .aLaw else {
            throw AudioQueueError(.codecNotFound, "\(format.formatID) is not G.711 µ-law or A-law")
        }
        let channels = format.channelsPerFrame
        guard (1...64).contains(channels), format.sampleRate > 0, format.sampleRate.isFinite else {
            throw AudioQueueError(.invalidPropertyValue, "G.711 with \(channels) channels at \(format.sampleRate) Hz is not supported")
        }
        guard format.bytesPerPacket == channels, format.framesPerPacket == 1 else {
            throw AudioQueueError(.invalidPropertyValue,
                "G.711 packets are one frame of one byte per channel (\(channels) bytes); the format says \(format.bytesPerPacket) bytes and \(format.framesPerPacket) frames")
        }
        self.channels = channels
        table = format.formatID == .uLaw ? Self.uLawTable : Self.aLawTable
        outputFormat = .float32(sampleRate: format.sampleRate, channels: channels)
    }

    /// The registry entry for µ-law and A-law.
    /// Every sample decodes on its own: no pre-roll, and pieces decoded apart join exactly.
    public static let factory = AudioDecoderFactory(name: "G.711", formats: [.uLaw, .aLaw], traits: .independentPackets) { format, _ in
        try G711Decoder(format: format)
    }

    public var decodesPacketRuns: Bool { true }

    public func decode(packet: UnsafeRawBufferPointer, frames: Int, into output: DecodedAudio) throws {
        let frameCount = packet.count / channels
        guard frameCount > 0 else { return }
        let space = output.reserve(frames: frameCount)
        let bytes = packet.bindMemory(to: UInt8.self)
        table.withUnsafeBufferPointer { table in
            for i in 0..<(frameCount * channels) { space[i] = table[Int(bytes[i])] }
        }
        output.commit(frames: frameCount)
    }

    public func finish(into output: DecodedAudio) throws {}
    public func reset() {}

    /// The 16-bit value of a µ-law byte: the bits are inverted; 3 exponent bits and 4 mantissa
    /// bits give ((mantissa << 3) + 132) << exponent, less the bias of 132.
    static func uLawValue(_ byte: UInt8) -> Int {
        let code = Int(~byte)
        let exponent = (code >> 4) & 7, mantissa = code & 0x0F
        let magnitude = (((mantissa << 3) + 0x84) << exponent) - 0x84
        return code & 0x80 != 0 ? -magnitude : magnitude
    }

    /// The 16-bit value of an A-law byte: even bits are inverted (XOR 0x55); segment 0 is linear,
    /// the others double per segment; a set sign bit means positive.
    static func aLawValue(_ byte: UInt8) -> Int {
        let code = Int(byte ^ 0x55)
        let segment = (code >> 4) & 7
        var magnitude = (code & 0x0F) << 4
        switch segment {
        case 0: magnitude += 8
        case 1: magnitude += 0x108
        default: magnitude = (magnitude + 0x108) << (segment - 1)
        }
        return code & 0x80 != 0 ? magnitude : -magnitude
    }

    static let uLawTable: [Float] = (0...255).map { Float(uLawValue(UInt8($0))) / 32768 }
    static let aLawTable: [Float] = (0...255).map { Float(aLawValue(UInt8($0))) / 32768 }
}
