import AudioToolbox
import Foundation
import Testing
import CodecTestSupport

/// Reads a file's packets for a converter's input procedure (what a C client keeps in its user data).
final class PacketReader {
    let file: AudioFileID
    var format = AudioStreamBasicDescription()
    var next: Int64 = 0
    var data = [UInt8](repeating: 0, count: 1 << 16)
    var descriptions = [AudioStreamPacketDescription](repeating: AudioStreamPacketDescription(), count: 256)

    init(_ path: String) throws {
        var file: AudioFileID?
        try #require(AudioFileOpenURL(URL(fileURLWithPath: path) as CFURL, .readPermission, 0, &file) == noErr)
        self.file = try #require(file)
        var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
        try #require(AudioFileGetProperty(self.file, kAudioFilePropertyDataFormat, &size, &format) == noErr)
    }

    deinit { AudioFileClose(file) }

    var packetTable: AudioFilePacketTableInfo? {
        var table = AudioFilePacketTableInfo()
        var size = UInt32(MemoryLayout<AudioFilePacketTableInfo>.size)
        return AudioFileGetProperty(file, kAudioFilePropertyPacketTableInfo, &size, &table) == noErr ? table : nil
    }

    var cookie: [UInt8]? {
        var size: UInt32 = 0
        guard AudioFileGetPropertyInfo(file, kAudioFilePropertyMagicCookieData, &size, nil) == noErr else { return nil }
        var cookie = [UInt8](repeating: 0, count: Int(size))
        return AudioFileGetProperty(file, kAudioFilePropertyMagicCookieData, &size, &cookie) == noErr ? cookie : nil
    }
}

/// The input procedure: up to the packets asked for, with their descriptions.
let readPackets: AudioConverterComplexInputDataProc = { _, packets, data, descriptions, userData in
    let reader = Unmanaged<PacketReader>.fromOpaque(userData!).takeUnretainedValue()
    var bytes = UInt32(reader.data.count)
    var count = min(packets.pointee, UInt32(reader.descriptions.count))
    let status = reader.data.withUnsafeMutableBytes { buffer in
        reader.descriptions.withUnsafeMutableBufferPointer {
            AudioFileReadPacketData(reader.file, false, &bytes, $0.baseAddress, reader.next, &count, buffer.baseAddress)
        }
    }
    guard status == noErr else { return status }
    reader.next += Int64(count)
    packets.pointee = count
    data.pointee.mNumberBuffers = 1
    data.pointee.mBuffers.mNumberChannels = reader.format.mChannelsPerFrame
    data.pointee.mBuffers.mDataByteSize = bytes
    data.pointee.mBuffers.mData = reader.data.withUnsafeMutableBytes { $0.baseAddress }
    if let descriptions {
        descriptions.pointee = reader.descriptions.withUnsafeMutableBufferPointer { $0.baseAddress }
    }
    return noErr
}

func float32(rate: Double, channels: UInt32) -> AudioStreamBasicDescription {
    AudioStreamBasicDescription(mSampleRate: rate, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagsNativeFloatPacked,
                                mBytesPerPacket: 4 * channels, mFramesPerPacket: 1, mBytesPerFrame: 4 * channels, mChannelsPerFrame: channels,
                                mBitsPerChannel: 32, mReserved: 0)
}

/// Pulls a converter to the end into float32 frames.
func drain(_ converter: AudioConverterRef, _ userData: UnsafeMutableRawPointer, channels: Int, chunk: UInt32 = 1000) throws -> [Float] {
    var all: [Float] = []
    var block = [Float](repeating: 0, count: Int(chunk) * channels)
    while true {
        var frames = chunk
        let status = block.withUnsafeMutableBytes { bytes -> OSStatus in
            var list = AudioBufferList(mNumberBuffers: 1, mBuffers: AudioBuffer(mNumberChannels: UInt32(channels), mDataByteSize: UInt32(bytes.count),
                                                                                 mData: bytes.baseAddress))
            return AudioConverterFillComplexBuffer(converter, readPackets, userData, &frames, &list, nil)
        }
        try #require(status == noErr, "AudioConverterFillComplexBuffer: \(status)")
        if frames == 0 { return all }
        all += block[0..<(Int(frames) * channels)]
    }
}

@Suite struct AudioConverterTests {
    /// Decoding through the converter, trimmed by the packet table, is the Swift API's render.
    @Test(arguments: ["lame-vbr-v2-44k-stereo.mp3", "alac-44k-stereo.m4a", "ima4-22k-mono.caf"])
    func decodingIsTheSwiftAPIsRender(_ name: String) async throws {
        let path = Where.fixture(name)
        let reference = try await rendered(path)
        let reader = try PacketReader(path)
        let channels = reader.format.mChannelsPerFrame
        var output = float32(rate: reader.format.mSampleRate, channels: channels)
        var converter: AudioConverterRef?
        try #require(AudioConverterNew(&reader.format, &output, &converter) == noErr)
        defer { if let converter { AudioConverterDispose(converter) } }
        if let cookie = reader.cookie {
            #expect(AudioConverterSetProperty(try #require(converter), kAudioConverterDecompressionMagicCookie, UInt32(cookie.count), cookie) == noErr)
        }
        let decoded = try drain(try #require(converter), Unmanaged.passUnretained(reader).toOpaque(), channels: Int(channels))
        let table = reader.packetTable
        let start = Int(table?.mPrimingFrames ?? 0) * Int(channels)
        let count = table.map { Int($0.mNumberValidFrames) * Int(channels) } ?? (decoded.count - start)
        try #require(decoded.count >= start + count, "\(decoded.count) samples decoded")
        let trimmed = Array(decoded[start..<(start + count)])
        #expect(trimmed.count == reference.samples.count)
        let firstDifference = zip(trimmed, reference.samples).enumerated().first { $0.element.0 != $0.element.1 }?.offset
        #expect(firstDifference == nil, "\(name): the converter's decode differs at sample \(firstDifference ?? -1)")
    }

    /// A rate conversion has the exact length and is the queue's conversion.
    @Test func aRateConversionHasTheExactLength() async throws {
        let path = Where.fixture("pcm-s16-22k-mono.wav")
        let reader = try PacketReader(path)
        var output = float32(rate: 48000, channels: 1)
        var converter: AudioConverterRef?
        try #require(AudioConverterNew(&reader.format, &output, &converter) == noErr)
        defer { if let converter { AudioConverterDispose(converter) } }
        let converted = try drain(try #require(converter), Unmanaged.passUnretained(reader).toOpaque(), channels: 1, chunk: 777)
        let reference = try await rendered(path, sampleRate: 48000)
        #expect(converted.count == Int((24255.0 * 48000 / 22050).rounded()))
        #expect(converted.count == reference.samples.count)
        #expect(snr(converted[...], reference.samples[...]) > 100)
    }

    /// Encoding to AAC: the packets, with the converter's priming and the valid frames in the
    /// file's packet table, read back at exactly the source's length.
    @Test func encodingWritesAFileOfTheSourcesLength() async throws {
        let path = Where.fixture("pcm-s16-22k-mono.wav")
        let reader = try PacketReader(path)
        var aac = AudioStreamBasicDescription()
        aac.mFormatID = kAudioFormatMPEG4AAC
        aac.mSampleRate = reader.format.mSampleRate
        aac.mChannelsPerFrame = 1
        var converter: AudioConverterRef?
        try #require(AudioConverterNew(&reader.format, &aac, &converter) == noErr)
        let encoder = try #require(converter)
        defer { AudioConverterDispose(encoder) }
        var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
        #expect(AudioConverterGetProperty(encoder, kAudioConverterCurrentOutputStreamDescription, &size, &aac) == noErr)
        #expect(aac.mFramesPerPacket == 1024)
        var prime = AudioConverterPrimeInfo()
        size = UInt32(MemoryLayout<AudioConverterPrimeInfo>.size)
        #expect(AudioConverterGetProperty(encoder, kAudioConverterPrimeInfo, &size, &prime) == noErr)
        #expect(prime.leadingFrames == 1024)
        var maxPacket: UInt32 = 0
        size = 4
        #expect(AudioConverterGetProperty(encoder, kAudioConverterPropertyMaximumOutputPacketSize, &size, &maxPacket) == noErr)

        let output = FileManager.default.temporaryDirectory.appendingPathComponent("aq-converter-\(UUID().uuidString.prefix(8)).m4a").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        var file: AudioFileID?
        try #require(AudioFileCreateWithURL(URL(fileURLWithPath: output) as CFURL, kAudioFileM4AType, &aac, .eraseFile, &file) == noErr)
        let out = try #require(file)
        var cookieSize: UInt32 = 0
        #expect(AudioConverterGetPropertyInfo(encoder, kAudioConverterCompressionMagicCookie, &cookieSize, nil) == noErr)
        var cookie = [UInt8](repeating: 0, count: Int(cookieSize))
        #expect(AudioConverterGetProperty(encoder, kAudioConverterCompressionMagicCookie, &cookieSize, &cookie) == noErr)
        #expect(AudioFileSetProperty(out, kAudioFilePropertyMagicCookieData, cookieSize, cookie) == noErr)

        var packetsWritten: Int64 = 0
        var data = [UInt8](repeating: 0, count: Int(maxPacket) * 8)
        var descriptions = [AudioStreamPacketDescription](repeating: AudioStreamPacketDescription(), count: 8)
        while true {
            var packets: UInt32 = 8
            let status = data.withUnsafeMutableBytes { bytes in
                var list = AudioBufferList(mNumberBuffers: 1, mBuffers: AudioBuffer(mNumberChannels: 1, mDataByteSize: UInt32(bytes.count), mData: bytes.baseAddress))
                return descriptions.withUnsafeMutableBufferPointer { described in
                    let status = AudioConverterFillComplexBuffer(encoder, readPackets, Unmanaged.passUnretained(reader).toOpaque(), &packets,
                                                                 &list, described.baseAddress)
                    if status == noErr, packets > 0 {
                        AudioFileWritePackets(out, false, list.mBuffers.mDataByteSize, described.baseAddress, packetsWritten, &packets, bytes.baseAddress!)
                    }
                    return status
                }
            }
            try #require(status == noErr)
            if packets == 0 { break }
            packetsWritten += Int64(packets)
        }
        let valid: Int64 = 24255
        var table = AudioFilePacketTableInfo(mNumberValidFrames: valid, mPrimingFrames: Int32(prime.leadingFrames),
                                             mRemainderFrames: Int32(packetsWritten * 1024 - valid - Int64(prime.leadingFrames)))
        #expect(AudioFileSetProperty(out, kAudioFilePropertyPacketTableInfo, UInt32(MemoryLayout<AudioFilePacketTableInfo>.size), &table) == noErr)
        #expect(AudioFileClose(out) == noErr)
        let readBack = try await AACDecoderChoice.$current.withValue(.avcodec) { try await rendered(output) }
        #expect(readBack.samples.count == Int(valid))
    }

    /// Sample layouts convert at once with AudioConverterConvertBuffer; what it cannot do is refused.
    @Test func bufferConversionAndRefusals() throws {
        var int16 = AudioStreamBasicDescription(mSampleRate: 44100, mFormatID: kAudioFormatLinearPCM,
                                                mFormatFlags: kAudioFormatFlagIsSignedInteger | kAudioFormatFlagIsPacked, mBytesPerPacket: 4,
                                                mFramesPerPacket: 1, mBytesPerFrame: 4, mChannelsPerFrame: 2, mBitsPerChannel: 16, mReserved: 0)
        var float = float32(rate: 44100, channels: 2)
        var converter: AudioConverterRef?
        try #require(AudioConverterNew(&int16, &float, &converter) == noErr)
        let pcm = try #require(converter)
        defer { AudioConverterDispose(pcm) }
        let samples: [Int16] = [0, 1, -1, 16384, -32768, 32767]
        var out = [Float](repeating: 9, count: samples.count)
        var outSize = UInt32(out.count * 4)
        let status = samples.withUnsafeBytes { input in
            out.withUnsafeMutableBytes { AudioConverterConvertBuffer(pcm, UInt32(input.count), input.baseAddress!, &outSize, $0.baseAddress!) }
        }
        #expect(status == noErr)
        #expect(outSize == UInt32(samples.count * 4))
        #expect(out == samples.map { Float($0) / 32768 })

        var float48 = float32(rate: 48000, channels: 2)
        var resampling: AudioConverterRef?
        try #require(AudioConverterNew(&float, &float48, &resampling) == noErr)
        let resampler = try #require(resampling)
        defer { AudioConverterDispose(resampler) }
        var size = UInt32(16)
        var data = [Float](repeating: 0, count: 4)
        let refused = data.withUnsafeMutableBytes { AudioConverterConvertBuffer(resampler, 16, $0.baseAddress!, &size, $0.baseAddress!) }
        #expect(refused == kAudioConverterErr_OperationNotSupported)

        var mp3 = AudioStreamBasicDescription()
        mp3.mFormatID = kAudioFormatMPEGLayer3
        mp3.mSampleRate = 44100
        mp3.mChannelsPerFrame = 2
        var aac = AudioStreamBasicDescription()
        aac.mFormatID = kAudioFormatMPEG4AAC
        var none: AudioConverterRef?
        #expect(AudioConverterNew(&mp3, &aac, &none) == kAudioConverterErr_FormatNotSupported)
        var ac3 = AudioStreamBasicDescription()
        ac3.mFormatID = kAudioFormatAC3
        ac3.mSampleRate = 48000
        ac3.mChannelsPerFrame = 2
        #expect(AudioConverterNew(&float, &ac3, &none) == kAudioConverterErr_FormatNotSupported, "nothing encodes AC-3 here")
        // Opus is made at 48 kHz: the converter resamples, and says so in its output format.
        var opus = AudioStreamBasicDescription()
        opus.mFormatID = kAudioFormatOpus
        opus.mSampleRate = 44100
        opus.mChannelsPerFrame = 2
        var opusConverter: AudioConverterRef?
        #expect(AudioConverterNew(&float, &opus, &opusConverter) == noErr)
        if let opusConverter {
            var made = AudioStreamBasicDescription()
            var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
            #expect(AudioConverterGetProperty(opusConverter, kAudioConverterCurrentOutputStreamDescription, &size, &made) == noErr)
            #expect(made.mSampleRate == 48000 && made.mFramesPerPacket == 960)
            AudioConverterDispose(opusConverter)
        }
    }
}
