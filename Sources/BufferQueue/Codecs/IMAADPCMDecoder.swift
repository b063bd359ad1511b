/// Decodes IMA ADPCM in its two common layouts: Apple's IMA4 (`'ima4'`, CAF and AIFC) and the
/// Microsoft/DVI block layout WAV files use (format tag 0x11, ``AudioFormatID/dviIntelIMA``).
///
/// - Apple IMA4: a packet is 34 bytes per channel, channel after channel, each a two-byte header
///   (the predictor's top nine bits and a seven-bit step index) and 32 bytes of 64 four-bit codes,
///   low nibble first. When a header agrees with where the previous packet left the channel (same
///   step index, predictor within the header's precision) decoding continues from the exact state,
///   as ffmpeg does, so a continuous decode keeps the full precision.
/// - WAV IMA ADPCM: a block starts with a four-byte header per channel (the first sample as a
///   16-bit little-endian value, the step index, a reserved byte), then groups of four bytes (eight
///   codes) per channel in turn. A block of `B` bytes holds `1 + (B − 4c) × 2 / c` frames.
///
/// Output is the 16-bit value each code gives, scaled by 1/32 768.
public final class IMAADPCMDecoder: AudioDecoder {
    public let outputFormat: AudioStreamDescription
    private let apple: Bool
    private let channels: Int
    private let bytesPerPacket: Int
    private let framesPerPacket: Int
    private var predictors: [Int32]
    private var stepIndices: [Int32]
    /// Whether `predictors`/`stepIndices` hold the state the previous packet left.
    private var continuing = false

    /// - Throws: ``AudioQueueError/Code/codecNotFound`` for another format, and
    ///   ``AudioQueueError/Code/invalidPropertyValue`` when the packet layout does not add up.
    public init(format: AudioStreamDescription) throws {
        let channels = format.channelsPerFrame
        guard format.formatID == .appleIMA4 || format.formatID == .dviIntelIMA else {
            throw AudioQueueError(.codecNotFound, "\(format.formatID) is not IMA ADPCM")
        }
        guard (1...64).contains(channels), format.sampleRate > 0, format.sampleRate.isFinite else {
            throw AudioQueueError(.invalidPropertyValue, "IMA ADPCM with \(channels) channels at \(format.sampleRate) Hz is not supported")
        }
        apple = format.formatID == .appleIMA4
        self.channels = channels
        if apple {
            guard format.bytesPerPacket == 34 * channels, format.framesPerPacket == 64 else {
                throw AudioQueueError(.invalidPropertyValue,
                    "IMA4 packets are 34 bytes per channel (\(34 * channels)) of 64 frames; the format says \(format.bytesPerPacket) bytes and \(format.framesPerPacket) frames")
            }
            framesPerPacket = 64
        } else {
            let body = format.bytesPerPacket - 4 * channels
            guard body > 0, body % (4 * channels) == 0, format.bitsPerChannel == 0 || format.bitsPerChannel == 4 else {
                throw AudioQueueError(.invalidPropertyValue,
                    "IMA ADPCM blocks of \(format.bytesPerPacket) bytes, \(format.bitsPerChannel) bits per sample, for \(channels) channels are not supported (4-bit codes, 4 header bytes and whole 4-byte groups per channel)")
            }
            let capacity = 1 + body * 2 / channels
            guard format.framesPerPacket <= capacity else {
                throw AudioQueueError(.invalidPropertyValue,
                    "IMA ADPCM blocks of \(format.bytesPerPacket) bytes hold at most \(capacity) frames; the format says \(format.framesPerPacket)")
            }
            framesPerPacket = format.framesPerPacket > 0 ? format.framesPerPacket : capacity
        }
        bytesPerPacket = format.bytesPerPacket
        predictors = Array(repeating: 0, count: channels)
        stepIndices = Array(repeating: 0, count: channels)
        outputFormat = .float32(sampleRate: format.sampleRate, channels: channels)
    }

    /// The registry entry for both layouts.
    /// No pre-roll (a packet's header restarts each channel); not split for parallel decoding: a
    /// continuous decode keeps the previous packet's finer predictor where the header agrees with
    /// it, so a start's first packets can differ from it by less than 128/32 768.
    public static let traits = AudioDecoderTraits(preRollPackets: { _ in 0 }, parallelRefusal: { _ in
        "IMA ADPCM: a packet's header restarts the predictor coarser than the continuous decode keeps it"
    })

    /// The factory registered from the start: Apple IMA4 and WAV's IMA ADPCM.
    public static let factory = AudioDecoderFactory(name: "IMA ADPCM", formats: [.appleIMA4, .dviIntelIMA], traits: traits) { format, _ in
        try IMAADPCMDecoder(format: format)
    }

    public var decodesPacketRuns: Bool { true }

    public func decode(packet: UnsafeRawBufferPointer, frames: Int, into output: DecodedAudio) throws {
        let bytes = packet.bindMemory(to: UInt8.self)
        var offset = 0
        while offset < bytes.count {
            let size = min(bytesPerPacket, bytes.count - offset)
            let block = UnsafeBufferPointer(rebasing: bytes[offset..<(offset + size)])
            if apple {
                guard size == bytesPerPacket else {
                    output.reportError(AudioQueueError(.decoderError, "an IMA4 packet of \(size) bytes is not whole (\(bytesPerPacket) bytes); its frames are silent"))
                    output.appendSilence(frames: framesPerPacket)
                    continuing = false
                    return
                }
                decodeApple(block, into: output)
            } else {
                decodeWAV(block, into: output)
            }
            offset += size
        }
    }

    public func finish(into output: DecodedAudio) throws { reset() }
    public func reset() { continuing = false }

    private func decodeApple(_ block: UnsafeBufferPointer<UInt8>, into output: DecodedAudio) {
        let space = output.reserve(frames: 64)
        for channel in 0..<channels {
            let base = channel * 34
            let header = Int32(Int16(bitPattern: UInt16(block[base]) << 8 | UInt16(block[base + 1])))
            let index = header & 0x7F, predictor = header & ~0x7F
            if !(continuing && stepIndices[channel] == index && abs(predictors[channel] - predictor) <= 0x7F) {
                predictors[channel] = predictor
                stepIndices[channel] = min(index, 88)
            }
            var state = State(predictor: predictors[channel], index: stepIndices[channel])
            var out = channel
            // Indices, not a slice's iterator: unoptimized builds iterate a slice through generic
            // code that allocates, and this runs on the rendering thread of an offline render.
            for at in (base + 2)..<(base + 34) {
                let byte = block[at]
                space[out] = Float(Self.expandBitwise(Int32(byte & 0x0F), &state)) / 32768
                out += channels
                space[out] = Float(Self.expandBitwise(Int32(byte >> 4), &state)) / 32768
                out += channels
            }
            predictors[channel] = state.predictor
            stepIndices[channel] = state.index
        }
        output.commit(frames: 64)
        continuing = true
    }

    private func decodeWAV(_ block: UnsafeBufferPointer<UInt8>, into output: DecodedAudio) {
        let headerBytes = 4 * channels
        guard block.count > headerBytes else {
            output.reportError(AudioQueueError(.decoderError, "an IMA ADPCM block of \(block.count) bytes holds no more than its headers; its frames are silent"))
            output.appendSilence(frames: framesPerPacket)
            return
        }
        let groups = (block.count - headerBytes) / headerBytes
        let frames = min(1 + groups * 8, framesPerPacket)
        let space = output.reserve(frames: frames)
        for channel in 0..<channels {
            let base = channel * 4
            var state = State(predictor: Int32(Int16(bitPattern: UInt16(block[base]) | UInt16(block[base + 1]) << 8)), index: Int32(block[base + 2]))
            if state.index > 88 {
                output.reportError(AudioQueueError(.decoderError, "an IMA ADPCM block header gives step index \(state.index) (at most 88); clamped"))
                state.index = 88
            }
            space[channel] = Float(state.predictor) / 32768
            var frame = 1
            for group in 0..<groups {
                let start = headerBytes + (group * channels + channel) * 4
                for at in start..<(start + 4) {
                    let byte = block[at]
                    let low = Self.expandMultiply(Int32(byte & 0x0F), &state)
                    if frame < frames { space[frame * channels + channel] = Float(low) / 32768 }
                    let high = Self.expandMultiply(Int32(byte >> 4), &state)
                    if frame + 1 < frames { space[(frame + 1) * channels + channel] = Float(high) / 32768 }
                    frame += 2
                }
            }
        }
        output.commit(frames: frames)
    }

    /// One code, the way Apple's IMA4 (and the IMA reference) adds it up: the step's fractions
    /// truncated separately.
    @inline(__always)
    static func expandBitwise(_ code: Int32, _ state: inout State) -> Int32 {
        let step = stepTable[Int(state.index)]
        var diff = step >> 3
        if code & 4 != 0 { diff += step }
        if code & 2 != 0 { diff += step >> 1 }
        if code & 1 != 0 { diff += step >> 2 }
        state.predictor = clamp16(code & 8 != 0 ? state.predictor - diff : state.predictor + diff)
        state.index = min(max(state.index + indexTable[Int(code)], 0), 88)
        return state.predictor
    }

    /// One code as WAV IMA ADPCM decoders compute it: (2 × magnitude + 1) × step / 8.
    @inline(__always)
    static func expandMultiply(_ code: Int32, _ state: inout State) -> Int32 {
        let step = stepTable[Int(state.index)]
        let diff = ((2 * (code & 7) + 1) * step) >> 3
        state.predictor = clamp16(code & 8 != 0 ? state.predictor - diff : state.predictor + diff)
        state.index = min(max(state.index + indexTable[Int(code)], 0), 88)
        return state.predictor
    }

    struct State {
        var predictor: Int32
        var index: Int32
    }

    @inline(__always)
    static func clamp16(_ value: Int32) -> Int32 { min(max(value, -32768), 32767) }

    static let indexTable: [Int32] = [-1, -1, -1, -1, 2, 4, 6, 8, -1, -1, -1, -1, 2, 4, 6, 8]

    /// The 89 quantizer steps of IMA ADPCM (each about 1.1 times the one before).
    static let stepTable: [Int32] = [
        7, 8, 9, 10, 11, 12, 13, 14, 16, 17, 19, 21, 23, 25, 28, 31, 34, 37, 41, 45,
        50, 55, 60, 66, 73, 80, 88, 97, 107, 118, 130, 143, 157, 173, 190, 209, 230, 253, 279, 307,
        337, 371, 408, 449, 494, 544, 598, 658, 724, 796, 876, 963, 1060, 1166, 1282, 1411, 1552, 1707, 1878, 2066,
        2272, 2499, 2749, 3024, 3327, 3660, 4026, 4428, 4871, 5358, 5894, 6484, 7132, 7845, 8630, 9493, 10442, 11487, 12635, 13899,
        15289, 16818, 18500, 20350, 22385, 24623, 27086, 29794, 32767,
    ]
}
