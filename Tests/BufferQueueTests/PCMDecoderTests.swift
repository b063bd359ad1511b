import Testing
@testable import BufferQueue

@Suite struct PCMDecoderTests {
    /// Decodes `bytes` in `format` through a queue rendered offline.
    func decode(_ bytes: [UInt8], _ format: AudioStreamDescription) throws -> [Float] {
        let queue = try AudioQueue(format: format)
        let buffer = try queue.allocateBuffer(capacity: bytes.count)
        try buffer.setData(bytes)
        try queue.enqueue(buffer)
        return try queue.renderAllOffline()
    }

    @Test func unsigned8() throws {
        let format = AudioStreamDescription.linearPCM(sampleRate: 8000, channels: 1, bitsPerChannel: 8)
        #expect(try decode([0, 64, 128, 192, 255], format) == [-1, -0.5, 0, 0.5, 127.0 / 128])
    }

    @Test(arguments: [false, true])
    func signed16(bigEndian: Bool) throws {
        let format = AudioStreamDescription.linearPCM(sampleRate: 44100, channels: 2, bitsPerChannel: 16, isBigEndian: bigEndian)
        let values: [Int16] = [0, 16384, -16384, 32767, -32768, 1]
        let bytes = values.flatMap { v -> [UInt8] in
            let u = UInt16(bitPattern: v)
            let lo = UInt8(u & 0xFF), hi = UInt8(u >> 8)
            return bigEndian ? [hi, lo] : [lo, hi]
        }
        #expect(try decode(bytes, format) == values.map { Float($0) / 32768 })
    }

    @Test(arguments: [false, true])
    func signed24Packed(bigEndian: Bool) throws {
        let format = AudioStreamDescription.linearPCM(sampleRate: 48000, channels: 1, bitsPerChannel: 24, isBigEndian: bigEndian)
        let values: [Int32] = [0, 4_194_304, -4_194_304, 8_388_607, -8_388_608]
        let bytes = values.flatMap { v -> [UInt8] in
            let u = UInt32(bitPattern: v)
            let b = [UInt8(u & 0xFF), UInt8((u >> 8) & 0xFF), UInt8((u >> 16) & 0xFF)]
            return bigEndian ? b.reversed() : b
        }
        #expect(try decode(bytes, format) == values.map { Float($0) / 8_388_608 })
    }

    @Test func signed24InHighAndLowBitsOf32() throws {
        var high = AudioStreamDescription.linearPCM(sampleRate: 48000, channels: 1, bitsPerChannel: 24, bytesPerSample: 4)
        high.formatFlags.insert(.isAlignedHigh)
        let low = AudioStreamDescription.linearPCM(sampleRate: 48000, channels: 1, bitsPerChannel: 24, bytesPerSample: 4)
        let value: Int32 = -4_194_304
        let highBytes = withUnsafeBytes(of: (value << 8).littleEndian, Array.init)
        let lowBytes = withUnsafeBytes(of: value.littleEndian, Array.init)
        #expect(try decode(highBytes, high) == [-0.5])
        #expect(try decode(lowBytes, low) == [-0.5])
    }

    @Test func signed32() throws {
        let format = AudioStreamDescription.linearPCM(sampleRate: 96000, channels: 1, bitsPerChannel: 32)
        let values: [Int32] = [0, 1 << 30, -(1 << 30), Int32.min]
        let bytes = values.flatMap { withUnsafeBytes(of: $0.littleEndian, Array.init) }
        #expect(try decode(bytes, format) == [0, 0.5, -0.5, -1])
    }

    @Test func floatBigEndianAnd64() throws {
        let f32be = AudioStreamDescription.linearPCM(sampleRate: 44100, channels: 1, bitsPerChannel: 32, isFloat: true, isBigEndian: true)
        let values: [Float] = [0.25, -0.75, 1]
        #expect(try decode(values.flatMap { withUnsafeBytes(of: $0.bitPattern.bigEndian, Array.init) }, f32be) == values)
        let f64 = AudioStreamDescription.linearPCM(sampleRate: 44100, channels: 2, bitsPerChannel: 64, isFloat: true)
        let doubles: [Double] = [0.5, -0.125, 0.75, 0]
        #expect(try decode(doubles.flatMap { withUnsafeBytes(of: $0.bitPattern.littleEndian, Array.init) }, f64) == doubles.map(Float.init))
    }

    @Test func unsupportedLayoutsAreRejected() throws {
        var nonInterleaved = AudioStreamDescription.float32(sampleRate: 44100, channels: 2)
        nonInterleaved.formatFlags.insert(.isNonInterleaved)
        expectError(.codecNotFound) { _ = try AudioQueue(format: nonInterleaved) }
        let twelveBit = AudioStreamDescription(sampleRate: 44100, formatID: .linearPCM, formatFlags: [.isSignedInteger],
                                               bytesPerPacket: 2, framesPerPacket: 1, bytesPerFrame: 2, channelsPerFrame: 1, bitsPerChannel: 12)
        expectError(.codecNotFound) { _ = try AudioQueue(format: twelveBit) }
        expectError(.invalidPropertyValue) { _ = try AudioQueue(format: .float32(sampleRate: 0, channels: 2)) }
        expectError(.invalidPropertyValue) { _ = try AudioQueue(format: .float32(sampleRate: 44100, channels: 0)) }
        let mp3 = AudioStreamDescription(sampleRate: 44100, formatID: .mpegLayer3, bytesPerPacket: 0, framesPerPacket: 1152,
                                         bytesPerFrame: 0, channelsPerFrame: 2, bitsPerChannel: 0)
        expectError(.codecNotFound) { _ = try AudioQueue(format: mp3, configuration: .init(decoderRegistry: AudioDecoderRegistry())) }
    }

    @Test func offlineRenderConvertsToInteger16() throws {
        let format = AudioStreamDescription.float32(sampleRate: 44100, channels: 1)
        let queue = try AudioQueue(format: format)
        try queue.enqueue(try queue.makeBuffer([0, 0.5, -0.5, 1.5, -1, 0.25]))
        try queue.setOfflineRenderFormat(.linearPCM(sampleRate: 44100, channels: 1, bitsPerChannel: 16))
        let out = try queue.allocateBuffer(capacity: 12)
        #expect(try queue.offlineRender(at: 0, into: out, frames: 6) == 6)
        #expect(out.byteSize == 12)
        let values = out.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
        #expect(values == [0, 16384, -16384, 32767, -32768, 8192])
    }
}

@Suite struct EnqueueValidationTests {
    let format = AudioStreamDescription.linearPCM(sampleRate: 44100, channels: 2, bitsPerChannel: 16)

    @Test func badBuffersAreRejectedWithClearErrors() throws {
        let queue = try AudioQueue(format: format, configuration: .init(decodeBufferFrames: 256))
        let other = try AudioQueue(format: format)
        let empty = try queue.allocateBuffer(capacity: 16)
        expectError(.bufferEmpty) { try queue.enqueue(empty) }
        let foreign = try other.allocateBuffer(capacity: 8)
        try foreign.setData([1, 2, 3, 4])
        expectError(.invalidBuffer) { try queue.enqueue(foreign) }
        let odd = try queue.allocateBuffer(capacity: 16)
        try odd.setData([1, 2, 3, 4, 5, 6])  // 1.5 frames
        expectError(.invalidBuffer) { try queue.enqueue(odd) }
        // Larger than the decode-ahead, so it stays in the queue until the queue plays it.
        let good = try queue.allocateBuffer(capacity: 40000)
        try good.setData([UInt8](repeating: 0, count: 40000))
        try queue.enqueue(good)
        expectError(.bufferInQueue) { try queue.enqueue(good) }
        expectError(.bufferInQueue) { try good.setData([1, 1, 1, 1]) }
        expectError(.invalidBuffer) { try odd.setData([UInt8](repeating: 0, count: 17)) }
        expectError(.invalidParameter) { _ = try queue.allocateBuffer(capacity: 0) }
    }

    @Test func packetDescriptionsAreChecked() throws {
        let queue = try AudioQueue(format: format)
        let buffer = try queue.allocateBuffer(capacity: 16, packetDescriptionCapacity: 2)
        try buffer.setData([UInt8](repeating: 0, count: 12))
        expectError(.invalidPacketDescription) {
            try queue.enqueue(buffer, packetDescriptions: [.init(startOffset: 8, dataByteSize: 8)])
        }
        expectError(.invalidPacketDescription) {
            try queue.enqueue(buffer, packetDescriptions: [.init(startOffset: 0, dataByteSize: 4), .init(startOffset: 4, dataByteSize: 4), .init(startOffset: 8, dataByteSize: 4)])
        }
        expectError(.invalidPacketDescription) {
            try queue.enqueue(buffer, packetDescriptions: [.init(startOffset: 0, dataByteSize: 2)])
        }
        #expect(!buffer.isInQueue)
    }

    @Test func offlineRenderMisuseIsAnError() throws {
        // No resampler registered: another rate cannot be rendered, and says why.
        let queue = try AudioQueue(format: .float32(sampleRate: 44100, channels: 2),
                                   configuration: .init(resamplerRegistry: AudioResamplerRegistry()))
        let out = try queue.allocateBuffer(capacity: 800)
        expectError(.invalidOfflineMode) { try queue.offlineRender(at: 0, into: out, frames: 100) }
        expectError(.codecNotFound) { try queue.setOfflineRenderFormat(.float32(sampleRate: 48000, channels: 2)) }
        expectError(.invalidPropertyValue) { try queue.setOfflineRenderFormat(.float32(sampleRate: 44100, channels: 65)) }
        try queue.setOfflineRenderFormat(.float32(sampleRate: 44100, channels: 2))
        expectError(.invalidBuffer) { try queue.offlineRender(at: 0, into: out, frames: 101) }
        #expect(try queue.offlineRender(at: 0, into: out, frames: 100) == 0)  // nothing enqueued: nothing invented
        try queue.enqueue(try queue.makeBuffer(ramp(frames: 50, channels: 2)))
        expectError(.invalidOfflineMode) { try queue.offlineRender(at: 7, into: out, frames: 100) }
        #expect(try queue.offlineRender(at: 0, into: out, frames: 0) == 0)
        #expect(try queue.offlineRender(at: 0, into: out, frames: 100) == 50)
        #expect(try queue.offlineRender(at: 50, into: out, frames: 100) == 0)
    }

    @Test func channelLayoutAndCookieProperties() throws {
        let queue = try AudioQueue(format: format, configuration: .init(decodeBufferFrames: 256))
        #expect(queue.channelLayout == .stereo)
        expectError(.invalidPropertyValue) { try queue.setChannelLayout(.mono) }
        try queue.setChannelLayout(AudioChannelLayout(channelLabels: [.right, .left]))
        #expect(queue.channelLayout.channelLabels == [.right, .left])
        try queue.setMagicCookie([1, 2, 3])
        #expect(queue.magicCookie == [1, 2, 3])
        let big = try queue.allocateBuffer(capacity: 40000)
        try big.setData([UInt8](repeating: 0, count: 40000))
        try queue.enqueue(big)
        expectError(.invalidRunState) { try queue.setMagicCookie(nil) }
        #expect(queue.decodeBufferFrames == 256)
        #expect(queue.streamDescription == format)
        #expect(queue.outputFormat == .float32(sampleRate: 44100, channels: 2))
    }
}

/// The branch-free quantiser against the plain formula: round half away from zero in Double,
/// clamp, NaN to 0 — on edge values, every exact half between them, and a long random run.
@Suite struct QuantiserTests {
    func reference(_ x: Float, scale: Double) -> Int64 {
        let scaled = (Double(x) * scale).rounded()
        if scaled.isNaN { return 0 }
        return Int64(min(max(scaled, -scale), scale - 1))
    }

    var samples: [Float] {
        var values: [Float] = [0, -0, 1, -1, 2, -2, .nan, .infinity, -.infinity, .greatestFiniteMagnitude, -.greatestFiniteMagnitude,
                               .leastNonzeroMagnitude, -.leastNonzeroMagnitude, 1 - .ulpOfOne, -1 + .ulpOfOne, 0.99999, -0.99999]
        // Exact halves of every depth's step, and their neighbours.
        for scale in [128.0, 32768.0, 8_388_608.0, 2_147_483_648.0] {
            for k in [0.5, 1.5, 2.5, 100.5, -0.5, -1.5, -2.5, -100.5, scale - 1.5, scale - 0.5, -scale + 0.5, -scale - 0.5] {
                let x = Float(k / scale)
                values += [x, x.nextUp, x.nextDown]
            }
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200_000 { values.append(Float.random(in: -1.2...1.2, using: &generator)) }
        // Halves as a decoder's float output produces them: n / 2^16 for int16.
        for n in stride(from: -65_537, through: 65_537, by: 7) { values.append(Float(n) / 65536) }
        return values
    }

    func check(_ format: AudioStreamDescription, bytes: Int, scale: Double, read: (UnsafeRawPointer) -> Int64) throws {
        let layout = try PCMSampleLayout(format)
        let input = samples
        var output = [UInt8](repeating: 0, count: input.count * bytes)
        input.withUnsafeBufferPointer { source in
            output.withUnsafeMutableBytes { layout.fromFloat(source.baseAddress!, count: input.count, into: $0.baseAddress!) }
        }
        var mismatches: [String] = []
        output.withUnsafeBytes { raw in
            for (i, x) in input.enumerated() where read(raw.baseAddress! + i * bytes) != reference(x, scale: scale) {
                if mismatches.count < 5 { mismatches.append("\(x) → \(read(raw.baseAddress! + i * bytes)), expected \(reference(x, scale: scale))") }
            }
        }
        #expect(mismatches.isEmpty, "\(format.bitsPerChannel)-bit: \(mismatches)")
    }

    @Test func unsigned8() throws {
        try check(.linearPCM(sampleRate: 44100, channels: 1, bitsPerChannel: 8), bytes: 1, scale: 128) {
            Int64($0.load(as: UInt8.self)) - 128
        }
    }

    @Test func signed16() throws {
        try check(.linearPCM(sampleRate: 44100, channels: 1, bitsPerChannel: 16), bytes: 2, scale: 32768) {
            Int64(Int16(littleEndian: $0.loadUnaligned(as: Int16.self)))
        }
    }

    @Test func signed24Packed() throws {
        try check(.linearPCM(sampleRate: 44100, channels: 1, bitsPerChannel: 24), bytes: 3, scale: 8_388_608) {
            let b = $0.assumingMemoryBound(to: UInt8.self)
            return Int64(Int32(bitPattern: UInt32(b[0]) << 8 | UInt32(b[1]) << 16 | UInt32(b[2]) << 24) >> 8)
        }
    }

    @Test func signed32() throws {
        try check(.linearPCM(sampleRate: 44100, channels: 1, bitsPerChannel: 32), bytes: 4, scale: 2_147_483_648) {
            Int64(Int32(littleEndian: $0.loadUnaligned(as: Int32.self)))
        }
    }
}
