import Foundation
import Testing
import AVCodecAAC
import BufferQueue
import FLACEncoder
import OpusEncoder
import TestSupport

/// The Swift encoders against the Swift decoders: lossless is the source bit for bit, G.711 is
/// the nearest level, IMA ADPCM follows the source; packets carry the frames they decode to.
struct EncoderTests {
    /// Integer test signals at `bits` bits: two sines, noise, a silent stretch, full-scale steps.
    static func source(frames: Int, channels: Int, bits: Int, seed: UInt64 = 7) -> [Int32] {
        var random = SplitMix(seed: seed)
        let peak = Double((1 << (bits - 1)) - 1)
        var samples = [Int32](repeating: 0, count: frames * channels)
        for frame in 0..<frames {
            for channel in 0..<channels {
                let t = Double(frame) / 44100
                var value = 0.45 * sin(2 * .pi * (220 + 110 * Double(channel)) * t) + 0.2 * sin(2 * .pi * 3100 * t)
                value += Double(random.int(-1000...1000)) / 1000 * (channel % 2 == 0 ? 0.001 : 0.01)
                if frame % 9000 > 8500 { value = 0 }
                if frame % 20000 > 19990 { value = channel % 2 == 0 ? 1 : -1 }
                samples[frame * channels + channel] = Int32(max(min((value * peak).rounded(), peak), -peak - 1))
            }
        }
        return samples
    }

    /// Encodes full-scale 32-bit samples and decodes the packets with the registry's decoder.
    static func roundTrip(_ samples: [Int32], format: AudioStreamDescription, settings: AudioEncoderSettings = .init(),
                          chunk: Int = 1000) throws -> (decoded: [Float], packets: EncodedPackets, encoder: any AudioEncoder) {
        let encoder = try AudioEncoderRegistry.shared.makeEncoder(for: format, settings: settings)
        let channels = format.channelsPerFrame
        let packets = EncodedPackets()
        var offset = 0
        // What the encoder takes: 16-bit integers, or the full-scale 32-bit ones.
        let narrow = encoder.inputFormat.bitsPerChannel == 16 ? samples.map { Int16(truncatingIfNeeded: $0 >> 16) } : nil
        while offset < samples.count {
            let end = min(offset + chunk * channels, samples.count)
            if let narrow {
                try narrow[offset..<end].withUnsafeBytes { try encoder.encode($0, into: packets) }
            } else {
                try samples[offset..<end].withUnsafeBytes { try encoder.encode($0, into: packets) }
            }
            offset = end
        }
        try encoder.finish(into: packets)
        let decoder = try AudioDecoderRegistry.shared.makeDecoder(for: encoder.outputFormat, magicCookie: encoder.magicCookie)
        let out = DecodedAudio(format: decoder.outputFormat)
        for index in 0..<packets.count {
            try decoder.decode(packet: packets.bytes(of: index), frames: packets.packets[index].frames, into: out)
        }
        #expect(out.takeErrorsForTests().isEmpty)
        return (out.withUnsafeSamples { Array($0) }, packets, encoder)
    }

    @Test(arguments: [(16, 1), (16, 2), (20, 2), (24, 2), (24, 6), (16, 3), (16, 8), (32, 2)])
    func appleLosslessDecodesToTheSource(_ bits: Int, _ channels: Int) throws {
        let frames = 4096 * 3 + 1234
        let source = Self.source(frames: frames, channels: channels, bits: bits)
        let full = source.map { bits == 32 ? $0 : $0 << Int32(32 - bits) }
        let format = AudioStreamDescription(sampleRate: 44100, formatID: .appleLossless, bytesPerPacket: 0, framesPerPacket: 0,
                                            bytesPerFrame: 0, channelsPerFrame: channels, bitsPerChannel: bits)
        let (decoded, packets, encoder) = try Self.roundTrip(full, format: format)
        #expect(packets.count == 4)
        #expect(packets.packets.map(\.frames) == [4096, 4096, 4096, 1234])
        #expect(decoded.count == source.count)
        let scale = Float(sign: .plus, exponent: -(bits - 1), significand: 1)
        // 32-bit samples do not fit a float: compare what a float holds of them.
        let expected = source.map { Float($0) * scale }
        let differing = zip(decoded, expected).filter { $0 != $1 }.count
        #expect(differing == 0, "\(differing) of \(expected.count) samples differ")
        let raw = frames * channels * bits / 8
        #expect(packets.byteCount < (bits == 32 ? raw : raw * 4 / 5), "\(packets.byteCount) bytes for \(raw) bytes of PCM")
        #expect(packets.byteCount <= encoder.maximumPacketSize * packets.count)
    }

    /// A last packet shorter than every predictor order is coded with order 0 (the samples).
    @Test func appleLosslessOfATinyLastPacketIsExact() throws {
        let source = Self.source(frames: 4096 + 2, channels: 2, bits: 16)
        let format = AudioStreamDescription(sampleRate: 44100, formatID: .appleLossless, bytesPerPacket: 0, framesPerPacket: 0,
                                            bytesPerFrame: 0, channelsPerFrame: 2, bitsPerChannel: 16)
        let (decoded, packets, _) = try Self.roundTrip(source.map { $0 << 16 }, format: format)
        #expect(packets.packets.map(\.frames) == [4096, 2])
        #expect(decoded == source.map { Float($0) / 32768 })
    }

    @Test func appleLosslessOfNoiseFallsBackToUncompressedPackets() throws {
        var random = SplitMix(seed: 3)
        let source = (0..<(4096 * 2)).map { _ in Int32(random.int(-32768...32767)) << 16 }
        let format = AudioStreamDescription(sampleRate: 48000, formatID: .appleLossless, bytesPerPacket: 0, framesPerPacket: 0,
                                            bytesPerFrame: 0, channelsPerFrame: 2, bitsPerChannel: 16)
        let (decoded, packets, _) = try Self.roundTrip(source, format: format)
        #expect(decoded == source.map { Float($0 >> 16) / 32768 })
        #expect(packets.byteCount <= 4096 * 4 + 64)
    }

    @Test(arguments: [AudioFormatID.uLaw, .aLaw])
    func g711EncodesEachSampleToTheNearestLevel(_ id: AudioFormatID) throws {
        let source = (-32768...32767).map { Int32($0) << 16 }
        let int16 = source.map { Int16($0 >> 16) }
        let format = AudioStreamDescription(sampleRate: 8000, formatID: id, bytesPerPacket: 1, framesPerPacket: 1,
                                            bytesPerFrame: 1, channelsPerFrame: 1, bitsPerChannel: 8)
        let encoder = try G711Encoder(format: format)
        let packets = EncodedPackets()
        try int16.withUnsafeBytes { try encoder.encode($0, into: packets) }
        #expect(packets.byteCount == 65536 && packets.frameCount == 65536)
        let decoder = try G711Decoder(format: encoder.outputFormat)
        let out = DecodedAudio(format: decoder.outputFormat)
        try decoder.decode(packet: packets.allBytes, frames: 65536, into: out)
        let levels = Set(out.withUnsafeSamples { Array($0) })
        var worse = 0
        out.withUnsafeSamples { decoded in
            for (index, sample) in int16.enumerated() {
                let error = abs(decoded[index] * 32768 - Float(sample))
                if levels.contains(where: { abs($0 * 32768 - Float(sample)) < error }) { worse += 1 }
            }
        }
        #expect(worse == 0, "\(worse) samples were not coded to the nearest level")
    }

    @Test(arguments: [AudioFormatID.appleIMA4, .dviIntelIMA])
    func imaADPCMFollowsTheSource(_ id: AudioFormatID) throws {
        let frames = 44100
        let source = Self.source(frames: frames, channels: 2, bits: 16)
        let format = AudioStreamDescription(sampleRate: 44100, formatID: id, bytesPerPacket: 0, framesPerPacket: 0,
                                            bytesPerFrame: 0, channelsPerFrame: 2, bitsPerChannel: 0)
        let encoder = try IMAADPCMEncoder(format: format)
        let packets = EncodedPackets()
        let int16 = source.map { Int16($0) }
        try int16.withUnsafeBytes { try encoder.encode($0, into: packets) }
        try encoder.finish(into: packets)
        let perPacket = encoder.outputFormat.framesPerPacket
        #expect(perPacket == (id == .appleIMA4 ? 64 : 2041))
        #expect(packets.frameCount == (frames + perPacket - 1) / perPacket * perPacket)
        let decoder = try IMAADPCMDecoder(format: encoder.outputFormat)
        let out = DecodedAudio(format: decoder.outputFormat)
        for index in 0..<packets.count { try decoder.decode(packet: packets.bytes(of: index), frames: perPacket, into: out) }
        let decoded = out.withUnsafeSamples { Array($0) }
        var signal = 0.0, noise = 0.0
        for (index, sample) in int16.enumerated() {
            let value = Double(sample) / 32768
            signal += value * value
            noise += (Double(decoded[index]) - value) * (Double(decoded[index]) - value)
        }
        let snr = 10 * log10(signal / noise)
        #expect(snr > 18, "IMA ADPCM round trip at \(snr) dB SNR")
    }
}

extension DecodedAudio {
    func takeErrorsForTests() -> [AudioQueueError] { errors }
}

/// Every encoder, once finished, encodes a new stream as if it were new: the same input gives the
/// same packets again (the input queue and the writer reuse encoders so).
struct EncoderReuseTests {
    @Test(arguments: [AudioFormatID.appleLossless, .flac, .opus, .aacLC, .appleIMA4, .dviIntelIMA, .uLaw])
    func aFinishedEncoderEncodesTheSameStreamAgain(_ id: AudioFormatID) throws {
        FLACEncoder.register()
        OpusEncoder.register()
        AVCodecAAC.register(decoders: AudioDecoderRegistry())
        let format = AudioStreamDescription(sampleRate: 48000, formatID: id, bytesPerPacket: 0, framesPerPacket: 0, bytesPerFrame: 0,
                                            channelsPerFrame: 2, bitsPerChannel: 16)
        let converter = try AudioEncodingConverter(from: .int16(sampleRate: 48000, channels: 2), to: format)
        let source = EncoderTests.source(frames: 10_007, channels: 2, bits: 16).map { Int16($0) }
        var streams: [[UInt8]] = []
        for _ in 0..<2 {
            let packets = EncodedPackets()
            try source.withUnsafeBytes { try converter.convert($0, into: packets) }
            try converter.finish(into: packets)
            #expect(converter.validFrames == 10_007)
            streams.append(Array(packets.allBytes))
            converter.reset()
        }
        #expect(!streams[0].isEmpty)
        #expect(streams[0] == streams[1], "the second stream's packets differ from the first's")
    }
}
