/// One interleaved linear PCM sample layout the library reads and writes.
public enum PCMSampleLayout: Hashable, Sendable {
    /// 8-bit unsigned, 128 = silence (WAV).
    case unsigned8
    /// 8-bit signed, 0 = silence (AIFF and CAF, whose 8-bit samples are always signed).
    case signed8
    /// Signed integers of `bits` bits in containers of `bytes` bytes.
    case signed(bits: Int, bytes: Int, alignedHigh: Bool, bigEndian: Bool)
    /// IEEE float of 4 or 8 bytes.
    case float(bytes: Int, bigEndian: Bool)

    /// The layout of a stream description, or an error saying why it is not supported.
    public init(_ format: AudioStreamDescription) throws {
        guard format.isLinearPCM else {
            throw AudioQueueError(.codecNotFound, "\(format.formatID) is not linear PCM")
        }
        guard !format.formatFlags.contains(.isNonInterleaved) else {
            throw AudioQueueError(.codecNotFound, "non-interleaved PCM is not supported; interleave the channels")
        }
        let channels = format.channelsPerFrame
        guard channels > 0, channels <= 64 else {
            throw AudioQueueError(.invalidPropertyValue, "PCM with \(channels) channels is not supported (1...64)")
        }
        guard format.sampleRate > 0, format.sampleRate.isFinite, format.sampleRate <= 1_536_000 else {
            throw AudioQueueError(.invalidPropertyValue, "sample rate \(format.sampleRate) is out of range")
        }
        guard format.bytesPerFrame > 0, format.bytesPerFrame % channels == 0 else {
            throw AudioQueueError(.invalidPropertyValue,
                "bytes per frame \(format.bytesPerFrame) is not a multiple of \(channels) channels")
        }
        guard format.framesPerPacket == 1, format.bytesPerPacket == format.bytesPerFrame else {
            throw AudioQueueError(.invalidPropertyValue,
                "linear PCM needs 1 frame per packet and bytes per packet = bytes per frame (got \(format.framesPerPacket) and \(format.bytesPerPacket)/\(format.bytesPerFrame))")
        }
        let bytes = format.bytesPerFrame / channels
        let bits = format.bitsPerChannel
        let big = format.formatFlags.contains(.isBigEndian)
        if format.formatFlags.contains(.isFloat) {
            guard (bytes == 4 && bits == 32) || (bytes == 8 && bits == 64) else {
                throw AudioQueueError(.codecNotFound, "float PCM must be 32 or 64 bits (got \(bits) bits in \(bytes) bytes)")
            }
            self = .float(bytes: bytes, bigEndian: big)
        } else if bits == 8 && bytes == 1 {
            self = format.formatFlags.contains(.isSignedInteger) ? .signed8 : .unsigned8
        } else {
            guard format.formatFlags.contains(.isSignedInteger), [16, 24, 32].contains(bits),
                  bytes * 8 >= bits, bytes <= 4 else {
                throw AudioQueueError(.codecNotFound,
                    "integer PCM must be 8-bit or 16/24/32-bit signed (got \(bits) bits in \(bytes) bytes, flags \(format.formatFlags.rawValue))")
            }
            let packed = bytes * 8 == bits
            self = .signed(bits: bits, bytes: bytes, alignedHigh: packed || format.formatFlags.contains(.isAlignedHigh), bigEndian: big)
        }
    }

    /// Bytes one sample occupies.
    public var bytesPerSample: Int {
        switch self {
        case .unsigned8, .signed8: return 1
        case .signed(_, let bytes, _, _): return bytes
        case .float(let bytes, _): return bytes
        }
    }

    /// Whether this is native (little-endian) float32, which converts by copying.
    var isNativeFloat32: Bool {
        if case .float(4, false) = self { return true }
        return false
    }

    /// Converts `count` samples at `source` to float in `destination`.
    package func toFloat(_ source: UnsafeRawPointer, count: Int, into destination: UnsafeMutablePointer<Float>) {
        switch self {
        case .unsigned8:
            let bytes = source.assumingMemoryBound(to: UInt8.self)
            for i in 0..<count { destination[i] = Float(Int(bytes[i]) - 128) * (1.0 / 128.0) }
        case .signed8:
            let bytes = source.assumingMemoryBound(to: Int8.self)
            for i in 0..<count { destination[i] = Float(bytes[i]) * (1.0 / 128.0) }
        case .float(4, let big):
            if !big {
                destination.update(from: source.assumingMemoryBound(to: Float.self), count: count)
            } else {
                for i in 0..<count {
                    destination[i] = Float(bitPattern: UInt32(bigEndian: source.loadUnaligned(fromByteOffset: i * 4, as: UInt32.self)))
                }
            }
        case .float(_, let big):
            for i in 0..<count {
                let raw = source.loadUnaligned(fromByteOffset: i * 8, as: UInt64.self)
                destination[i] = Float(Double(bitPattern: big ? UInt64(bigEndian: raw) : UInt64(littleEndian: raw)))
            }
        case .signed(16, 2, _, let big):
            for i in 0..<count {
                let raw = source.loadUnaligned(fromByteOffset: i * 2, as: UInt16.self)
                let value = Int16(bitPattern: big ? UInt16(bigEndian: raw) : UInt16(littleEndian: raw))
                destination[i] = Float(value) * (1.0 / 32768.0)
            }
        case .signed(24, 3, _, let big):
            let bytes = source.assumingMemoryBound(to: UInt8.self)
            for i in 0..<count {
                let b = bytes + i * 3
                let word = big ? (UInt32(b[0]) << 24 | UInt32(b[1]) << 16 | UInt32(b[2]) << 8)
                               : (UInt32(b[2]) << 24 | UInt32(b[1]) << 16 | UInt32(b[0]) << 8)
                destination[i] = Float(Int32(bitPattern: word) >> 8) * (1.0 / 8_388_608.0)
            }
        case .signed(let bits, _, let alignedHigh, let big):
            // 32-bit containers: 32-bit samples, or 24 bits in the high or low bits.
            for i in 0..<count {
                let raw = source.loadUnaligned(fromByteOffset: i * 4, as: UInt32.self)
                var word = Int32(bitPattern: big ? UInt32(bigEndian: raw) : UInt32(littleEndian: raw))
                if bits == 24 { word = alignedHigh ? word >> 8 : (word << 8) >> 8 }
                destination[i] = Float(word) * (bits == 24 ? 1.0 / 8_388_608.0 : 1.0 / 2_147_483_648.0)
            }
        }
    }

    /// Converts `count` float samples to this layout at `destination`: integers are rounded to
    /// nearest, halves away from zero, and clamped to their range (NaN becomes 0). Used by the
    /// offline render, the input queue, the WAV writer and the ALSA sink.
    ///
    /// The integer loops have no branch and no library call (rounding is done with the
    /// round-to-nearest of an addition, corrected to halves away from zero), so the compiler
    /// vectorises them.
    public func fromFloat(_ source: UnsafePointer<Float>, count: Int, into destination: UnsafeMutableRawPointer) {
        switch self {
        case .unsigned8:
            let out = destination.assumingMemoryBound(to: UInt8.self)
            for i in 0..<count { out[i] = UInt8(truncatingIfNeeded: Self.quantizeShort(source[i], scale: 128) &+ 128) }
        case .signed8:
            let out = destination.assumingMemoryBound(to: UInt8.self)
            for i in 0..<count { out[i] = UInt8(truncatingIfNeeded: Self.quantizeShort(source[i], scale: 128)) }
        case .float(4, let big):
            if !big {
                destination.assumingMemoryBound(to: Float.self).update(from: source, count: count)
            } else {
                for i in 0..<count { destination.storeBytes(of: source[i].bitPattern.bigEndian, toByteOffset: i * 4, as: UInt32.self) }
            }
        case .float(_, let big):
            for i in 0..<count {
                let bits = Double(source[i]).bitPattern
                destination.storeBytes(of: big ? bits.bigEndian : bits.littleEndian, toByteOffset: i * 8, as: UInt64.self)
            }
        case .signed(16, 2, _, let big):
            if big {
                for i in 0..<count {
                    destination.storeBytes(of: UInt16(truncatingIfNeeded: Self.quantizeShort(source[i], scale: 32768)).bigEndian, toByteOffset: i * 2, as: UInt16.self)
                }
            } else {
                for i in 0..<count {
                    destination.storeBytes(of: UInt16(truncatingIfNeeded: Self.quantizeShort(source[i], scale: 32768)).littleEndian, toByteOffset: i * 2, as: UInt16.self)
                }
            }
        case .signed(24, 3, _, let big):
            let out = destination.assumingMemoryBound(to: UInt8.self)
            for i in 0..<count {
                let value = UInt32(bitPattern: Self.quantize32(source[i], bits: 24))
                let b0 = UInt8(truncatingIfNeeded: value), b1 = UInt8(truncatingIfNeeded: value >> 8), b2 = UInt8(truncatingIfNeeded: value >> 16)
                if big { out[i * 3] = b2; out[i * 3 + 1] = b1; out[i * 3 + 2] = b0 } else { out[i * 3] = b0; out[i * 3 + 1] = b1; out[i * 3 + 2] = b2 }
            }
        case .signed(let bits, _, let alignedHigh, let big):
            // 32-bit containers: 32-bit samples, or 24 bits in the high or low bits.
            let shift: Int32 = bits == 24 && alignedHigh ? 8 : 0
            let depth = bits == 24 ? 24 : 32
            for i in 0..<count {
                let raw = UInt32(bitPattern: Self.quantize32(source[i], bits: depth) << shift)
                destination.storeBytes(of: big ? raw.bigEndian : raw.littleEndian, toByteOffset: i * 4, as: UInt32.self)
            }
        }
    }

    /// A sample scaled by `scale` (2^7 or 2^15), rounded (halves away from zero) and clamped to
    /// -scale...scale-1; NaN is 0. Float arithmetic is exact here: the scale is a power of two
    /// and the values stay below 2^22.
    @inline(__always)
    static func quantizeShort(_ sample: Float, scale: Float) -> Int32 {
        var v = sample * scale
        v = v == v ? v : 0
        v = v > -scale ? v : -scale
        v = v < scale - 1 ? v : scale - 1
        let magic: Float = 12_582_912               // 1.5 × 2^23: adding it rounds to an integer
        var r = (v + magic) - magic                 // v rounded to nearest, halves to even
        let d = v - r                               // exact: ±0.5 only for a half
        r = d == 0.5 && v > 0 ? r + 1 : r           // halves away from zero instead
        r = d == -0.5 && v < 0 ? r - 1 : r
        return Int32(bitPattern: (r + magic).bitPattern) &- 0x4B40_0000
    }

    /// A sample scaled by 2^(bits-1), rounded (halves away from zero) and clamped to `bits`
    /// signed bits (24 or 32); NaN is 0. In Double, where all of it is exact.
    @inline(__always)
    static func quantize32(_ sample: Float, bits: Int) -> Int32 {
        let scale: Double = bits == 24 ? 8_388_608 : 2_147_483_648
        var v = Double(sample) * scale
        v = v == v ? v : 0
        v = v > -scale ? v : -scale
        v = v < scale - 1 ? v : scale - 1
        let magic: Double = 6_755_399_441_055_744   // 1.5 × 2^52
        var r = (v + magic) - magic
        let d = v - r
        r = d == 0.5 && v > 0 ? r + 1 : r
        r = d == -0.5 && v < 0 ? r - 1 : r
        return Int32(truncatingIfNeeded: (r + magic).bitPattern)
    }
}

/// Decodes interleaved linear PCM of any ``PCMSampleLayout`` to float32 at the source rate.
public final class PCMDecoder: AudioDecoder, DirectPacketDecoding {
    /// The linear PCM the packets hold.
    public let inputFormat: AudioStreamDescription
    public let outputFormat: AudioStreamDescription
    let layout: PCMSampleLayout

    /// - Throws: ``AudioQueueError/Code/codecNotFound`` for layouts that are not supported.
    public init(format: AudioStreamDescription) throws {
        layout = try PCMSampleLayout(format)
        inputFormat = format
        outputFormat = .float32(sampleRate: format.sampleRate, channels: format.channelsPerFrame)
    }

    /// The registry entry for linear PCM.
    /// No pre-roll; nothing to decode in parallel.
    public static let traits = AudioDecoderTraits(preRollPackets: { _ in 0 }, parallelRefusal: { _ in "linear PCM needs no decoding" })

    /// The factory registered from the start: linear PCM.
    public static let factory = AudioDecoderFactory(name: "linear PCM", formats: [.linearPCM], traits: traits) { format, _ in
        try PCMDecoder(format: format)
    }

    public func decode(packet: UnsafeRawBufferPointer, frames: Int, into output: DecodedAudio) throws {
        guard let base = packet.baseAddress else { return }
        let frameCount = packet.count / inputFormat.bytesPerFrame
        let space = output.reserve(frames: frameCount)
        guard let destination = space.baseAddress else { return }
        layout.toFloat(base, count: frameCount * inputFormat.channelsPerFrame, into: destination)
        output.commit(frames: frameCount)
    }

    public func finish(into output: DecodedAudio) throws {}
    public func reset() {}
    public var decodesPacketRuns: Bool { true }

    package func decode(packets: UnsafeRawBufferPointer, into destination: UnsafeMutablePointer<Float>,
                        gains: (left: Float, right: Float)?) -> Int {
        guard let base = packets.baseAddress else { return 0 }
        let channels = inputFormat.channelsPerFrame
        let frameCount = packets.count / inputFormat.bytesPerFrame
        let count = frameCount * channels
        guard let (left, right) = gains, channels <= 2 else {
            layout.toFloat(base, count: count, into: destination)
            return frameCount
        }
        // Native float32 is scaled as it is copied; other layouts are converted, then scaled
        // while the block is still in the cache.
        let source = layout.isNativeFloat32 ? UnsafePointer(base.assumingMemoryBound(to: Float.self)) : UnsafePointer(destination)
        if !layout.isNativeFloat32 { layout.toFloat(base, count: count, into: destination) }
        if channels == 1 || left == right {
            let gain = channels == 1 ? left : right
            for i in 0..<count { destination[i] = source[i] * gain }
        } else {
            for frame in 0..<frameCount {
                destination[2 * frame] = source[2 * frame] * left
                destination[2 * frame + 1] = source[2 * frame + 1] * right
            }
        }
        return frameCount
    }
}
