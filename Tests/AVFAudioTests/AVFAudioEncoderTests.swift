import Foundation
import Testing
import AVFAudio
import TestSupport

/// AVAudioConverter encoding PCM into compressed packets, as Apple's code drives it: an output
/// AVAudioCompressedBuffer sized by `maximumOutputPacketSize`, the input block handing PCM, the
/// packets decoded back through another converter with the encoder's `magicCookie`.
@Suite struct AVFAudioEncoderTests {
    /// A packet as the encoder handed it out.
    struct Packet {
        var bytes: Data
        var frames: UInt32
    }

    /// Encodes `source` (interleaved, `input`'s channels) in blocks of 1000 frames into packets
    /// of `output`'s format, 8 packets per conversion.
    static func encode(_ source: [Float], from input: AVAudioFormat, to output: AVAudioFormat,
                       bitRate: Int = 0) throws -> (packets: [Packet], cookie: Data?, priming: Int) {
        let converter = try #require(AVAudioConverter(from: input, to: output))
        converter.bitRate = bitRate
        let maximum = converter.maximumOutputPacketSize
        #expect(maximum > 0)
        let channels = Int(input.channelCount), frames = source.count / channels
        var next = 0
        var packets: [Packet] = []
        let buffer = AVAudioCompressedBuffer(format: output, packetCapacity: 8, maximumPacketSize: maximum)
        var status = AVAudioConverterOutputStatus.haveData
        var calls = 0
        while status == .haveData {
            var error: NSError?
            status = converter.convert(to: buffer, error: &error) { _, inputStatus in
                guard next < frames else {
                    inputStatus.pointee = .endOfStream
                    return nil
                }
                let count = min(1000, frames - next)
                defer { next += count }
                inputStatus.pointee = .haveData
                return try? AVFAudioConverterTests.buffer(input, Array(source[(next * channels)..<((next + count) * channels)]))
            }
            #expect(error == nil, "\(String(describing: error))")
            for index in 0..<Int(buffer.packetCount) {
                let description = try #require(buffer.packetDescriptions?[index])
                packets.append(Packet(bytes: Data(bytes: buffer.data + Int(description.mStartOffset), count: Int(description.mDataByteSize)),
                                      frames: description.mVariableFramesInPacket))
            }
            calls += 1
            try #require(calls < 10_000)
        }
        #expect(status == .endOfStream)
        return (packets, converter.magicCookie, Int(converter.primeInfo.leadingFrames))
    }

    /// Decodes `packets` of `format` (configured by `cookie`) to interleaved float32 at `rate`.
    static func decode(_ packets: [Packet], format: AVAudioFormat, cookie: Data?) throws -> [Float] {
        format.magicCookie = cookie
        let output = try #require(AVAudioFormat(standardFormatWithSampleRate: format.sampleRate, channels: format.channelCount))
        let converter = try #require(AVAudioConverter(from: format, to: output))
        let maximum = max(packets.map(\.bytes.count).max() ?? 1, 1)
        var next = 0
        var decoded: [Float] = []
        let out = try #require(AVAudioPCMBuffer(pcmFormat: output, frameCapacity: 4096))
        var status = AVAudioConverterOutputStatus.haveData
        while status == .haveData {
            var error: NSError?
            status = converter.convert(to: out, error: &error) { _, inputStatus in
                guard next < packets.count else {
                    inputStatus.pointee = .endOfStream
                    return nil
                }
                let batch = packets[next..<min(next + 10, packets.count)]
                next += batch.count
                var data: [UInt8] = [], descriptions: [AudioStreamPacketDescription] = []
                for packet in batch {
                    descriptions.append(AudioStreamPacketDescription(mStartOffset: Int64(data.count), mVariableFramesInPacket: packet.frames,
                                                                     mDataByteSize: UInt32(packet.bytes.count)))
                    data.append(contentsOf: packet.bytes)
                }
                inputStatus.pointee = .haveData
                return AVFAudioConverterTests.compressedBuffer(format, data: data, capacity: 10, maximumPacketSize: maximum, descriptions: descriptions)
            }
            #expect(error == nil, "\(String(describing: error))")
            decoded += try AVFAudioConverterTests.interleaved(out)
        }
        return decoded
    }

    /// 16-bit values (so that a 24-bit FLAC holds them exactly), two channels that differ.
    static func source(frames: Int) -> [Float] {
        (0..<(frames * 2)).map { index in
            let frame = Double(index / 2)
            let value = index % 2 == 0 ? 0.5 * sin(2 * Double.pi * 440 * frame / 48_000) : 0.3 * sin(2 * Double.pi * 660 * frame / 48_000)
            return Float((value * 32_768).rounded()) / 32_768
        }
    }

    /// FLAC is lossless: what decodes is the source, frame for frame; encoding at another rate
    /// gives exactly round(N × out / in) frames.
    @Test func flacEncodesLosslesslyAndToExactLengths() throws {
        let standard = try #require(AVAudioFormat(standardFormatWithSampleRate: 48_000, channels: 2))
        let source = Self.source(frames: 48_000)
        let flac = try #require(AVAudioFormat(settings: [AVFormatIDKey: kAudioFormatFLAC, AVSampleRateKey: 48_000, AVNumberOfChannelsKey: 2]))
        let (packets, cookie, priming) = try Self.encode(source, from: standard, to: flac)
        #expect(priming == 0)
        #expect(cookie != nil)
        let decoded = try Self.decode(packets, format: flac, cookie: cookie)
        #expect(decoded.count == source.count)
        #expect(difference(decoded, source) == nil)

        let at44 = try #require(AVAudioFormat(settings: [AVFormatIDKey: kAudioFormatFLAC, AVSampleRateKey: 44_100, AVNumberOfChannelsKey: 2]))
        let resampled = try Self.encode(source, from: standard, to: at44)
        #expect(try Self.decode(resampled.packets, format: at44, cookie: resampled.cookie).count == 44_100 * 2)
    }

    /// AAC: the packets decode back to the source after the encoder's priming (primeInfo), a
    /// tone within the codec's loss; the bit rate asked changes the size.
    @Test func aacEncodesWhatDecodesBack() throws {
        let rate = 48_000.0
        let standard = try #require(AVAudioFormat(standardFormatWithSampleRate: rate, channels: 2))
        let source = Self.source(frames: 48_000)
        let aac = try #require(AVAudioFormat(settings: [AVFormatIDKey: kAudioFormatMPEG4AAC, AVSampleRateKey: rate, AVNumberOfChannelsKey: 2]))
        let (packets, cookie, priming) = try Self.encode(source, from: standard, to: aac, bitRate: 192_000)
        #expect(priming > 0)
        #expect(packets.count * 1024 >= priming + 48_000)
        let decoded = try Self.decode(packets, format: aac, cookie: cookie)
        try #require(decoded.count >= (priming + 48_000) * 2)
        let aligned = Array(decoded[(priming * 2)..<((priming + 48_000) * 2)])
        var signal = 0.0, noise = 0.0
        for index in 2048..<(46_000 * 2) {   // the middle: no edge of the block transform
            signal += Double(source[index] * source[index])
            noise += Double((aligned[index] - source[index]) * (aligned[index] - source[index]))
        }
        let snr = 10 * log10(signal / max(noise, 1e-30))
        #expect(snr > 25, "AAC at 192 kb/s decoded back with an SNR of \(snr) dB")

        let smaller = try Self.encode(source, from: standard, to: aac, bitRate: 64_000)
        #expect(smaller.packets.reduce(0) { $0 + $1.bytes.count } < packets.reduce(0) { $0 + $1.bytes.count })
    }

    /// Too small an output buffer is an error naming the size to use; a PCM output buffer for a
    /// compressed format is refused; a format no encoder makes gives no converter.
    @Test func wrongBuffersAreErrors() throws {
        let standard = try #require(AVAudioFormat(standardFormatWithSampleRate: 48_000, channels: 2))
        let flac = try #require(AVAudioFormat(settings: [AVFormatIDKey: kAudioFormatFLAC, AVSampleRateKey: 48_000, AVNumberOfChannelsKey: 2]))
        let converter = try #require(AVAudioConverter(from: standard, to: flac))
        let tiny = AVAudioCompressedBuffer(format: flac, packetCapacity: 1, maximumPacketSize: 16)
        let source = try AVFAudioConverterTests.buffer(standard, Self.source(frames: 8192))
        var given = false
        var error: NSError?
        let status = converter.convert(to: tiny, error: &error) { _, inputStatus in
            if given {
                inputStatus.pointee = .endOfStream
                return nil
            }
            given = true
            inputStatus.pointee = .haveData
            return source
        }
        #expect(status == .error)
        #expect(error?.localizedDescription.contains("maximumOutputPacketSize") == true, "\(String(describing: error))")

        let pcm = try #require(AVAudioPCMBuffer(pcmFormat: standard, frameCapacity: 100))
        var refused: NSError?
        #expect(converter.convert(to: pcm, error: &refused) { _, inputStatus in
            inputStatus.pointee = .endOfStream
            return nil
        } == .error)
        #expect(refused != nil)

        let ac3 = try #require(AVAudioFormat(settings: [AVFormatIDKey: kAudioFormatAC3, AVSampleRateKey: 48_000, AVNumberOfChannelsKey: 2]))
        #expect(AVAudioConverter(from: standard, to: ac3) == nil)
    }
}
