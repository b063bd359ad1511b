/// Encodes IMA ADPCM from 16-bit samples in the two layouts ``IMAADPCMDecoder`` reads.
///
/// Each sample becomes the four-bit code the IMA reference encoder picks (the sign, then the
/// step, half and quarter step compared in turn), and the encoder follows the value the decoder
/// will compute from it, so the error does not build up.
///
/// - Apple IMA4 (`'ima4'`): packets of 64 frames, 34 bytes per channel. The state runs on from
///   packet to packet; a header holds the predictor's top nine bits and the step index, which a
///   decoder that continues (ffmpeg, this library) passes over and a decoder that restarts from
///   it follows to within 127/32 768. Because of that carried state, pieces encoded apart do not
///   join into the bits of one encode.
/// - WAV IMA ADPCM (``AudioFormatID/dviIntelIMA``): blocks of 256 bytes per channel per 11 025 Hz
///   of rate (505 frames at 8–22 kHz, 2 041 at 44.1/48 kHz), as Microsoft's encoder sizes them.
///   A block's header holds its first sample exactly and a step index chosen from the block's
///   own samples, so every block encodes on its own.
///
/// The last packet is padded with silence; its padding is the stream's remainder.
public final class IMAADPCMEncoder: AudioEncoder {
    public let inputFormat: AudioStreamDescription
    public let outputFormat: AudioStreamDescription
    public var magicCookie: [UInt8]? { nil }
    public var primingFrames: Int { 0 }
    public var maximumPacketSize: Int { outputFormat.bytesPerPacket }
    private let apple: Bool
    private let channels: Int
    private let framesPerPacket: Int
    /// Frames waiting for a whole packet, interleaved.
    private let blocks: FrameBlocks
    private var states: [IMAADPCMDecoder.State]

    /// - Parameter format: `'ima4'` or ``AudioFormatID/dviIntelIMA``, with a rate and a channel
    ///   count; a WAV block size (`bytesPerPacket`) other than the default is taken when it holds
    ///   the 4-byte headers and whole 4-byte groups per channel.
    public init(format: AudioStreamDescription) throws {
        guard format.formatID == .appleIMA4 || format.formatID == .dviIntelIMA else {
            throw AudioQueueError(.codecNotFound, "\(format.formatID) is not IMA ADPCM")
        }
        let channels = format.channelsPerFrame
        guard (1...64).contains(channels), format.sampleRate > 0, format.sampleRate.isFinite else {
            throw AudioQueueError(.invalidPropertyValue, "IMA ADPCM with \(channels) channels at \(format.sampleRate) Hz is not encoded")
        }
        apple = format.formatID == .appleIMA4
        self.channels = channels
        let bytes: Int
        if apple {
            framesPerPacket = 64
            bytes = 34 * channels
        } else {
            let perChannel = 256 * max(1, Int(format.sampleRate / 11025))
            let requested = format.bytesPerPacket
            if requested > 0 {
                guard requested > 4 * channels, (requested - 4 * channels) % (4 * channels) == 0 else {
                    throw AudioQueueError(.invalidPropertyValue,
                        "an IMA ADPCM block of \(requested) bytes does not hold 4 header bytes and whole 4-byte groups for each of \(channels) channels")
                }
                bytes = requested
            } else {
                bytes = perChannel * channels
            }
            framesPerPacket = 1 + (bytes - 4 * channels) * 2 / channels
        }
        inputFormat = .int16(sampleRate: format.sampleRate, channels: channels)
        outputFormat = AudioStreamDescription(sampleRate: format.sampleRate, formatID: format.formatID, bytesPerPacket: bytes,
                                              framesPerPacket: framesPerPacket, bytesPerFrame: 0, channelsPerFrame: channels,
                                              bitsPerChannel: apple ? 0 : 4)
        blocks = FrameBlocks(framesPerBlock: framesPerPacket, bytesPerFrame: 2 * channels)
        states = Array(repeating: IMAADPCMDecoder.State(predictor: 0, index: 0), count: channels)
    }

    /// WAV blocks encode on their own; IMA4 packets carry the state on (see the type's notes).
    public static let factory = AudioEncoderFactory(name: "IMA ADPCM", formats: [.appleIMA4, .dviIntelIMA],
                                                    traits: AudioEncoderTraits(independentPackets: { $0.formatID == .dviIntelIMA })) { format, _ in
        try IMAADPCMEncoder(format: format)
    }

    public func encode(_ frames: UnsafeRawBufferPointer, into output: EncodedPackets) throws {
        blocks.add(frames) { encodePacket($0, into: output) }
    }

    public func finish(into output: EncodedPackets) throws {
        if let rest = blocks.takeRest(padded: true) { encodePacket(rest, into: output) }
        for channel in 0..<channels { states[channel] = IMAADPCMDecoder.State(predictor: 0, index: 0) }
    }

    private func encodePacket(_ block: UnsafeRawBufferPointer, into output: EncodedPackets) {
        let space = output.reserve(bytes: outputFormat.bytesPerPacket)
        let samples = block.bindMemory(to: Int16.self)
        if apple { encodeApple(samples, into: space) } else { encodeWAV(samples, into: space) }
        output.commit(bytes: outputFormat.bytesPerPacket, frames: framesPerPacket)
    }

    private func encodeApple(_ samples: UnsafeBufferPointer<Int16>, into space: UnsafeMutableRawBufferPointer) {
        for channel in 0..<channels {
            var state = states[channel]
            let base = channel * 34
            let header = UInt16(bitPattern: Int16(truncatingIfNeeded: state.predictor)) & 0xFF80 | UInt16(state.index)
            space[base] = UInt8(header >> 8)
            space[base + 1] = UInt8(header & 0xFF)
            var input = channel
            for byte in 0..<32 {
                let low = Self.code(Int32(samples[input]), &state, multiply: false)
                let high = Self.code(Int32(samples[input + channels]), &state, multiply: false)
                space[base + 2 + byte] = UInt8(low | high << 4)
                input += 2 * channels
            }
            states[channel] = state
        }
    }

    private func encodeWAV(_ samples: UnsafeBufferPointer<Int16>, into space: UnsafeMutableRawBufferPointer) {
        let groups = (outputFormat.bytesPerPacket - 4 * channels) / (4 * channels)
        for channel in 0..<channels {
            let first = samples[channel]
            var state = IMAADPCMDecoder.State(predictor: Int32(first), index: Self.startIndex(samples, channel: channel, channels: channels))
            let bits = UInt16(bitPattern: first)
            space[4 * channel] = UInt8(bits & 0xFF)
            space[4 * channel + 1] = UInt8(bits >> 8)
            space[4 * channel + 2] = UInt8(state.index)
            space[4 * channel + 3] = 0
            var input = channels + channel
            for group in 0..<groups {
                let start = 4 * channels + (group * channels + channel) * 4
                for byte in 0..<4 {
                    let low = Self.code(Int32(samples[input]), &state, multiply: true)
                    let high = Self.code(Int32(samples[input + channels]), &state, multiply: true)
                    space[start + byte] = UInt8(low | high << 4)
                    input += 2 * channels
                }
            }
        }
    }

    /// The step index a WAV block starts a channel with: the one whose step is nearest the mean
    /// difference between the block's first nine samples (a decision from the block alone).
    static func startIndex(_ samples: UnsafeBufferPointer<Int16>, channel: Int, channels: Int) -> Int32 {
        let frames = samples.count / channels
        let span = min(8, frames - 1)
        guard span > 0 else { return 0 }
        var total = 0
        for frame in 0..<span {
            total += abs(Int(samples[(frame + 1) * channels + channel]) - Int(samples[frame * channels + channel]))
        }
        let target = Int32(total / span)
        var best: Int32 = 0
        for index in 0..<Int32(IMAADPCMDecoder.stepTable.count)
        where abs(IMAADPCMDecoder.stepTable[Int(index)] - target) < abs(IMAADPCMDecoder.stepTable[Int(best)] - target) {
            best = index
        }
        return best
    }

    /// The code for `sample` from `state`, and the state the decoder reaches with it.
    @inline(__always)
    static func code(_ sample: Int32, _ state: inout IMAADPCMDecoder.State, multiply: Bool) -> UInt8 {
        var difference = sample - state.predictor
        var code: Int32 = 0
        if difference < 0 { code = 8; difference = -difference }
        let step = IMAADPCMDecoder.stepTable[Int(state.index)]
        if difference >= step { code |= 4; difference -= step }
        if difference >= step >> 1 { code |= 2; difference -= step >> 1 }
        if difference >= step >> 2 { code |= 1 }
        if multiply {
            _ = IMAADPCMDecoder.expandMultiply(code, &state)
        } else {
            _ = IMAADPCMDecoder.expandBitwise(code, &state)
        }
        return UInt8(code)
    }
}
