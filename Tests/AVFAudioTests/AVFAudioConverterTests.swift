import Foundation
import Testing
import AVFAudio
import BufferQueue
import AudioCodecs
import AudioFileStream
import AudioPlayback
import TestSupport

/// AVAudioConverter over the library's converter: formats, channels and rates, the input
/// block's statuses as Apple documents them.
@Suite struct AVFAudioConverterTests {
    static func ramp(_ frames: Int, channels: Int) -> [Float] {
        (0..<(frames * channels)).map { Float(($0 * 7919) % 2001 - 1000) / 1024 }
    }

    /// A buffer of `format` holding interleaved `samples`.
    static func buffer(_ format: AVAudioFormat, _ samples: [Float]) throws -> AVAudioPCMBuffer {
        let channels = Int(format.channelCount), frames = samples.count / channels
        let buffer = try #require(AVAudioPCMBuffer(pcmFormat: format, frameCapacity: AVAudioFrameCount(frames)))
        buffer.frameLength = AVAudioFrameCount(frames)
        let data = try #require(buffer.floatChannelData)
        for frame in 0..<frames { for channel in 0..<channels { data[channel][frame * buffer.stride] = samples[frame * channels + channel] } }
        return buffer
    }

    /// A compressed buffer of `format` holding the packets `descriptions` lay out in `data`.
    static func compressedBuffer(_ format: AVAudioFormat, data: [UInt8], capacity: Int, maximumPacketSize: Int,
                                 descriptions: [AudioStreamPacketDescription]) -> AVAudioCompressedBuffer {
        let buffer = AVAudioCompressedBuffer(format: format, packetCapacity: AVAudioPacketCount(capacity), maximumPacketSize: maximumPacketSize)
        data.withUnsafeBytes { raw in if let base = raw.baseAddress { buffer.data.copyMemory(from: base, byteCount: raw.count) } }
        for (index, description) in descriptions.enumerated() { buffer.packetDescriptions?[index] = description }
        buffer.packetCount = AVAudioPacketCount(descriptions.count)
        buffer.byteLength = UInt32(data.count)
        return buffer
    }

    static func interleaved(_ buffer: AVAudioPCMBuffer) throws -> [Float] {
        let channels = Int(buffer.format.channelCount)
        let data = try #require(buffer.floatChannelData)
        return (0..<(Int(buffer.frameLength) * channels)).map { data[$0 % channels][($0 / channels) * buffer.stride] }
    }

    /// Int16 interleaved to the standard format, and stereo to mono: (L + R) / 2.
    @Test func formatsAndChannelsConvertInOneCall() throws {
        let int16 = try #require(AVAudioFormat(commonFormat: .pcmFormatInt16, sampleRate: 44_100, channels: 2, interleaved: true))
        let standard = try #require(AVAudioFormat(standardFormatWithSampleRate: 44_100, channels: 2))
        let input = try #require(AVAudioPCMBuffer(pcmFormat: int16, frameCapacity: 100))
        input.frameLength = 100
        let data = try #require(input.int16ChannelData)
        for index in 0..<200 { data[0][index] = Int16(truncatingIfNeeded: index * 300 - 30_000) }
        let converter = try #require(AVAudioConverter(from: int16, to: standard))
        let output = try #require(AVAudioPCMBuffer(pcmFormat: standard, frameCapacity: 100))
        try converter.convert(to: output, from: input)
        #expect(output.frameLength == 100)
        #expect(try Self.interleaved(output) == (0..<200).map { Float(Int16(truncatingIfNeeded: $0 * 300 - 30_000)) / 32_768 })

        let mono = try #require(AVAudioFormat(standardFormatWithSampleRate: 44_100, channels: 1))
        let down = try #require(AVAudioConverter(from: standard, to: mono))
        let source = Self.ramp(500, channels: 2)
        let monoOut = try #require(AVAudioPCMBuffer(pcmFormat: mono, frameCapacity: 500))
        try down.convert(to: monoOut, from: try Self.buffer(standard, source))
        #expect(try Self.interleaved(monoOut) == (0..<500).map { (source[2 * $0] + source[2 * $0 + 1]) / 2 })

        // No rate conversion in this call, as Apple's; too small an output is refused.
        let other = try #require(AVAudioFormat(standardFormatWithSampleRate: 48_000, channels: 2))
        let resampling = try #require(AVAudioConverter(from: standard, to: other))
        let bigger = try #require(AVAudioPCMBuffer(pcmFormat: other, frameCapacity: 1000))
        #expect(throws: NSError.self) { try resampling.convert(to: bigger, from: try Self.buffer(standard, source)) }
        let small = try #require(AVAudioPCMBuffer(pcmFormat: mono, frameCapacity: 10))
        #expect(throws: NSError.self) { try down.convert(to: small, from: try Self.buffer(standard, source)) }
        let aac = try #require(AVAudioFormat(settings: [AVFormatIDKey: kAudioFormatMPEG4AAC, AVSampleRateKey: 44_100.0, AVNumberOfChannelsKey: 2]))
        // Compressed to compressed is no converter (as Apple's: decode to PCM, then encode).
        #expect(AVAudioConverter(from: standard, to: aac) != nil)
        #expect(AVAudioConverter(from: aac, to: aac) == nil)
    }

    /// 44.1 to 48 kHz through the input block, fed in odd chunks and pulled in buffers of 4096:
    /// exactly round(N × 48000 / 44100) frames, equal to the library's converter bit for bit; then
    /// `.endOfStream`, and after `reset()` a new stream.
    @Test func ratesConvertThroughTheInputBlock() throws {
        let from = try #require(AVAudioFormat(standardFormatWithSampleRate: 44_100, channels: 2))
        let to = try #require(AVAudioFormat(standardFormatWithSampleRate: 48_000, channels: 2))
        let source = Self.ramp(44_100, channels: 2)
        let converter = try #require(AVAudioConverter(from: from, to: to))
        let output = try #require(AVAudioPCMBuffer(pcmFormat: to, frameCapacity: 4096))

        func run(dryAt: Int?) throws -> ([Float], [AVAudioConverterOutputStatus]) {
            var offset = 0, dried = false
            var produced: [Float] = [], statuses: [AVAudioConverterOutputStatus] = []
            while true {
                var error: NSError?
                let status = converter.convert(to: output, error: &error) { _, inputStatus in
                    if let dryAt, offset >= dryAt, !dried {
                        dried = true
                        inputStatus.pointee = .noDataNow
                        return nil
                    }
                    guard offset < 44_100 else {
                        inputStatus.pointee = .endOfStream
                        return nil
                    }
                    let count = min(1_237, 44_100 - offset)
                    defer { offset += count }
                    inputStatus.pointee = .haveData
                    return try? Self.buffer(from, Array(source[(offset * 2)..<((offset + count) * 2)]))
                }
                #expect(error == nil)
                statuses.append(status)
                produced += try Self.interleaved(output)
                if status == .endOfStream || status == .error { break }
            }
            return (produced, statuses)
        }
        let (produced, statuses) = try run(dryAt: nil)
        #expect(produced.count / 2 == 48_000)
        #expect(statuses.last == .endOfStream && statuses.dropLast().allSatisfy { $0 == .haveData })

        let library = try BufferQueue.AudioConverter(from: .float32(sampleRate: 44_100, channels: 2), to: .float32(sampleRate: 48_000, channels: 2))
        let decoded = DecodedAudio(format: .float32(sampleRate: 48_000, channels: 2))
        try source.withUnsafeBufferPointer { try library.convert($0, into: decoded) }
        try library.finish(into: decoded)
        let expected = decoded.withUnsafeSamples { Array($0) }
        #expect(produced == expected)

        // The same stream again after reset, with the input running dry once on the way.
        converter.reset()
        let (again, statusesAgain) = try run(dryAt: 20_000)
        #expect(statusesAgain.contains(.inputRanDry) && again == expected)
    }
}

/// AVAudioTime's sample and host times, and extrapolation from an anchor.
@Suite struct AVFAudioTimeTests {
    @Test func timesAndExtrapolation() throws {
        let sample = AVAudioTime(sampleTime: 44_100, atRate: 44_100)
        #expect(sample.isSampleTimeValid && !sample.isHostTimeValid && sample.sampleTime == 44_100 && sample.sampleRate == 44_100)
        let host = AVAudioTime(hostTime: AVAudioTime.hostTime(forSeconds: 2.5))
        #expect(host.isHostTimeValid && !host.isSampleTimeValid && AVAudioTime.seconds(forHostTime: host.hostTime) == 2.5)
        let anchor = AVAudioTime(hostTime: AVAudioTime.hostTime(forSeconds: 1), sampleTime: 0, atRate: 48_000)
        // One second of samples after the anchor is one second of host time after it, and back.
        let later = try #require(AVAudioTime(sampleTime: 48_000, atRate: 48_000).extrapolateTime(fromAnchor: anchor))
        #expect(later.isHostTimeValid && later.hostTime == AVAudioTime.hostTime(forSeconds: 2))
        let fromHost = try #require(host.extrapolateTime(fromAnchor: anchor))
        #expect(fromHost.isSampleTimeValid && fromHost.sampleTime == 72_000)
        #expect(sample.extrapolateTime(fromAnchor: sample) == nil, "an anchor needs both times")
        #expect(sample.audioTimeStamp.mFlags.contains(.sampleTimeValid))
    }
}

/// AVAudioConverter decoding compressed packets handed in AVAudioCompressedBuffers: an M4A's
/// AAC packets, read by the library, come out as the library's render of the file — after the
/// encoder's priming, which a converter does not trim (as Apple's does not).
@Suite(.timeLimit(.minutes(2)))
struct AVFAudioDecodingTests {
    @Test func aacPacketsDecodeAsTheFileRenders() async throws {
        let folder = try AVFAudioFileTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/a.m4a"
        try await AVFAudioFileTests.make(path, frames: 50_000, codec: ["-c:a", "aac", "-b:a", "128k"])
        AudioCodecs.registerAll()
        let file = try AudioFile(path: path)
        let priming = Int(try #require(file.packetTableInfo).primingFrames)
        var asbd = AudioStreamBasicDescription(file.dataFormat)
        let input = try #require(AVAudioFormat(streamDescription: &asbd))
        input.magicCookie = file.magicCookie.map { Data($0) }
        let output = try #require(AVAudioFormat(standardFormatWithSampleRate: 44_100, channels: 2))
        let converter = try #require(AVAudioConverter(from: input, to: output))
        let maximum = try #require(file.maximumPacketSize)

        var next: Int64 = 0
        var decoded: [Float] = []
        let out = try #require(AVAudioPCMBuffer(pcmFormat: output, frameCapacity: 4096))
        var status = AVAudioConverterOutputStatus.haveData
        while status == .haveData {
            var error: NSError?
            status = converter.convert(to: out, error: &error) { _, inputStatus in
                guard next < file.packetCount else {
                    inputStatus.pointee = .endOfStream
                    return nil
                }
                let count = Int(min(20, file.packetCount - next))
                guard let packets = try? file.readPackets(from: next, count: count) else {
                    inputStatus.pointee = .endOfStream
                    return nil
                }
                next += Int64(count)
                inputStatus.pointee = .haveData
                return AVFAudioConverterTests.compressedBuffer(input, data: packets.data, capacity: 20, maximumPacketSize: maximum,
                                                              descriptions: packets.descriptions.map {
                    AudioStreamPacketDescription(mStartOffset: Int64($0.startOffset), mVariableFramesInPacket: UInt32($0.variableFramesInPacket),
                                                 mDataByteSize: UInt32($0.dataByteSize))
                })
            }
            #expect(error == nil, "\(String(describing: error))")
            decoded += try AVFAudioConverterTests.interleaved(out)
        }
        #expect(status == .endOfStream)

        let renderer = try AudioFileRenderer(file: file)
        var rendered = [Float](repeating: 0, count: 60_000 * 2)
        let frames = try rendered.withUnsafeMutableBufferPointer { samples -> Int in
            var total = 0
            while true {
                let n = try renderer.render(into: UnsafeMutableBufferPointer(rebasing: samples[(total * 2)...]), frames: 60_000 - total)
                if n == 0 { return total }
                total += n
            }
        }
        #expect(frames == 50_000)
        try #require(decoded.count >= (priming + frames) * 2)
        #expect(difference(Array(decoded[(priming * 2)..<((priming + frames) * 2)]), Array(rendered[0..<(frames * 2)])) == nil)
    }
}
