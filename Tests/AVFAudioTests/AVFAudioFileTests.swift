import Foundation
import Testing
import AVFAudio
import TestSupport

/// AVFAudio's formats, buffers and files, used as Apple's documentation says, checked against
/// ffmpeg's decoding and ffprobe's reading.
@Suite(.timeLimit(.minutes(2)))
struct AVFAudioFileTests {
    static func folder() throws -> String {
        let directory = NSTemporaryDirectory() + "avf-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory
    }

    /// A stereo file of `frames` frames made by ffmpeg: a tone in one channel, noise in the other.
    static func make(_ path: String, frames: Int, codec: [String]) async throws {
        let made = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y",
            "-f", "lavfi", "-i", "sine=frequency=330:sample_rate=44100", "-f", "lavfi", "-i", "anoisesrc=color=white:amplitude=0.3:seed=5:sample_rate=44100",
            "-filter_complex", "[0][1]amerge=inputs=2,atrim=end_sample=\(frames)", "-ar", "44100"] + codec + [path])
        try #require(made.status == 0, "\(String(decoding: made.errorOutput, as: UTF8.self))")
    }

    /// ffmpeg's decoding of `path` as interleaved float32.
    static func reference(_ path: String) async throws -> [Float] {
        let run = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-i", path, "-f", "f32le", "-c:a", "pcm_f32le", "-"])
        try #require(run.status == 0)
        return run.output.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
    }

    /// Reads the whole file from its position in buffers of `chunk` frames, interleaved.
    static func readAll(_ file: AVAudioFile, chunk: AVAudioFrameCount = 4096) throws -> [Float] {
        let buffer = try #require(AVAudioPCMBuffer(pcmFormat: file.processingFormat, frameCapacity: chunk))
        var samples: [Float] = []
        while true {
            try file.read(into: buffer)
            if buffer.frameLength == 0 { break }
            let channels = Int(file.processingFormat.channelCount)
            let data = try #require(buffer.floatChannelData)
            for frame in 0..<Int(buffer.frameLength) {
                for channel in 0..<channels { samples.append(data[channel][frame]) }
            }
        }
        return samples
    }

    @Test func formatsAndBuffersAreApples() throws {
        let standard = try #require(AVAudioFormat(standardFormatWithSampleRate: 44_100, channels: 2))
        #expect(standard.isStandard && !standard.isInterleaved && standard.commonFormat == .pcmFormatFloat32)
        let asbd = standard.streamDescription.pointee
        #expect(asbd.mFormatID == kAudioFormatLinearPCM && asbd.mBytesPerFrame == 4 && asbd.mBitsPerChannel == 32)
        #expect(asbd.mFormatFlags & kAudioFormatFlagIsNonInterleaved != 0 && asbd.mFormatFlags & kAudioFormatFlagIsFloat != 0)
        #expect(AVAudioFormat(standardFormatWithSampleRate: 0, channels: 2) == nil)
        #expect(AVAudioFormat(commonFormat: .otherFormat, sampleRate: 44_100, channels: 2, interleaved: true) == nil)

        let settings: [String: Any] = [AVFormatIDKey: kAudioFormatLinearPCM, AVSampleRateKey: 48_000.0, AVNumberOfChannelsKey: 2,
                                       AVLinearPCMBitDepthKey: 16, AVLinearPCMIsFloatKey: false, AVLinearPCMIsBigEndianKey: false,
                                       AVLinearPCMIsNonInterleaved: false]
        let int16 = try #require(AVAudioFormat(settings: settings))
        #expect(int16.commonFormat == .pcmFormatInt16 && int16.isInterleaved && int16.sampleRate == 48_000 && int16.channelCount == 2)
        #expect(int16.streamDescription.pointee.mBytesPerFrame == 4)
        #expect(int16.settings[AVLinearPCMBitDepthKey] as? Int == 16 && int16.settings[AVNumberOfChannelsKey] as? Int == 2)
        #expect(AVAudioFormat(settings: int16.settings)?.isEqual(int16) == true)
        #expect(int16.isEqual(AVAudioFormat(commonFormat: .pcmFormatInt16, sampleRate: 48_000, channels: 2, interleaved: true)))
        #expect(!int16.isEqual(standard))

        let surround = try #require(AVAudioChannelLayout(layoutTag: kAudioChannelLayoutTag_MPEG_5_1_A))
        #expect(surround.channelCount == 6)
        #expect(AVAudioChannelLayout(layoutTag: kAudioChannelLayoutTag_UseChannelDescriptions) == nil)
        let sixChannels = AVAudioFormat(standardFormatWithSampleRate: 48_000, channelLayout: surround)
        #expect(sixChannels.channelCount == 6 && sixChannels.channelLayout?.layoutTag == kAudioChannelLayoutTag_MPEG_5_1_A)

        // Buffers: zero-filled, one buffer per channel when deinterleaved, one when interleaved.
        let buffer = try #require(AVAudioPCMBuffer(pcmFormat: standard, frameCapacity: 1000))
        #expect(buffer.frameCapacity == 1000 && buffer.frameLength == 0 && buffer.stride == 1)
        let channels = try #require(buffer.floatChannelData)
        #expect((0..<1000).allSatisfy { channels[0][$0] == 0 && channels[1][$0] == 0 })
        #expect(buffer.int16ChannelData == nil && buffer.audioBufferList.pointee.mNumberBuffers == 2)
        buffer.frameLength = 10
        #expect(buffer.audioBufferList.pointee.mBuffers.mDataByteSize == 40)
        let interleaved = try #require(AVAudioPCMBuffer(pcmFormat: int16, frameCapacity: 64))
        #expect(interleaved.stride == 2 && interleaved.int16ChannelData != nil && interleaved.floatChannelData == nil)
        #expect(interleaved.audioBufferList.pointee.mNumberBuffers == 1 && interleaved.audioBufferList.pointee.mBuffers.mNumberChannels == 2)
        let aac = try #require(AVAudioFormat(settings: [AVFormatIDKey: kAudioFormatMPEG4AAC, AVSampleRateKey: 44_100.0, AVNumberOfChannelsKey: 2]))
        #expect(aac.commonFormat == .otherFormat && AVAudioPCMBuffer(pcmFormat: aac, frameCapacity: 10) == nil)
    }

    /// A FLAC (lossless) reads as ffmpeg decodes it, every sample, in any chunking; a seek by
    /// `framePosition` lands on its frame.
    @Test func aFLACReadsAsFFmpegDecodesIt() async throws {
        let directory = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/a.flac"
        let frames = 66_157
        try await Self.make(path, frames: frames, codec: ["-c:a", "flac"])
        let expected = try await Self.reference(path)
        let file = try AVAudioFile(forReading: URL(fileURLWithPath: path))
        #expect(file.length == AVAudioFramePosition(frames))
        #expect(file.processingFormat.isStandard && file.processingFormat.sampleRate == 44_100 && file.processingFormat.channelCount == 2)
        #expect(file.fileFormat.streamDescription.pointee.mFormatID == kAudioFormatFLAC)
        #expect(difference(try Self.readAll(file, chunk: 1000), expected) == nil)
        #expect(file.framePosition == AVAudioFramePosition(frames))
        file.framePosition = 40_000
        #expect(difference(try Self.readAll(file, chunk: 777), Array(expected[80_000...])) == nil)

        // Interleaved 16-bit: the same samples, as integers.
        let integers = try AVAudioFile(forReading: URL(fileURLWithPath: path), commonFormat: .pcmFormatInt16, interleaved: true)
        let buffer = try #require(AVAudioPCMBuffer(pcmFormat: integers.processingFormat, frameCapacity: 4096))
        try integers.read(into: buffer, frameCount: 100)
        let data = try #require(buffer.int16ChannelData)
        #expect(buffer.frameLength == 100 && (0..<200).allSatisfy { Float(data[0][$0]) / 32_768 == expected[$0] })

        // A buffer of another format is refused.
        let otherFormat = try #require(AVAudioFormat(standardFormatWithSampleRate: 48_000, channels: 2))
        let other = try #require(AVAudioPCMBuffer(pcmFormat: otherFormat, frameCapacity: 16))
        #expect(throws: NSError.self) { try file.read(into: other) }
    }

    /// An MP3 with its encoder's delay and padding in its LAME tag reads exactly its source's frames.
    @Test func anMP3ReadsItsSourcesFrames() async throws {
        let directory = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/a.mp3"
        try await Self.make(path, frames: 50_001, codec: ["-c:a", "libmp3lame", "-b:a", "192k"])
        let file = try AVAudioFile(forReading: URL(fileURLWithPath: path))
        #expect(file.length == 50_001)
        #expect(file.fileFormat.streamDescription.pointee.mFormatID == kAudioFormatMPEGLayer3)
        #expect(try Self.readAll(file).count == 50_001 * 2)
    }

    /// Files written from buffers as the settings ask: 16-bit WAV (ffprobe reads it; the samples
    /// come back as written, to 16 bits) and FLAC (`flac -t` passes; read back exactly).
    @Test func filesAreWrittenAsTheSettingsSay() async throws {
        let directory = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let format = try #require(AVAudioFormat(standardFormatWithSampleRate: 44_100, channels: 2))
        let buffer = try #require(AVAudioPCMBuffer(pcmFormat: format, frameCapacity: 10_000))
        buffer.frameLength = 10_000
        let channels = try #require(buffer.floatChannelData)
        for frame in 0..<10_000 {
            channels[0][frame] = Float(sin(Double(frame) * 0.05) * 0.5)
            channels[1][frame] = Float(frame % 100) / 200 - 0.25
        }
        for (name, formatID) in [("w.wav", kAudioFormatLinearPCM), ("f.flac", kAudioFormatFLAC)] {
            let path = directory + "/" + name
            let file = try AVAudioFile(forWriting: URL(fileURLWithPath: path), settings: [
                AVFormatIDKey: formatID, AVSampleRateKey: 44_100.0, AVNumberOfChannelsKey: 2, AVLinearPCMBitDepthKey: 16])
            #expect(file.processingFormat.isStandard)
            for _ in 0..<3 { try file.write(from: buffer) }
            #expect(file.length == 30_000 && file.framePosition == 30_000)
            file.close()
            #expect(throws: NSError.self) { try file.write(from: buffer) }

            let probe = try await runTool("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,sample_rate,channels",
                                                                "-of", "csv=p=0", path])
            let codec = name.hasSuffix(".wav") ? "pcm_s16le" : "flac"
            #expect(String(decoding: probe.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == "\(codec),44100,2")
            if name.hasSuffix(".flac") {
                let check = try await runTool("/usr/bin/flac", ["-t", "-s", path])
                #expect(check.status == 0, "\(String(decoding: check.errorOutput, as: UTF8.self))")
            }
            let read = try AVAudioFile(forReading: URL(fileURLWithPath: path))
            #expect(read.length == 30_000)
            let samples = try Self.readAll(read)
            #expect(samples.count == 60_000)
            // 16-bit: each sample within half a step of what was written.
            let worst = (0..<60_000).map { index -> Float in
                let frame = (index / 2) % 10_000
                return abs(samples[index] - channels[index % 2][frame])
            }.max() ?? 1
            #expect(worst <= 1.0 / 32_768, "\(worst)")
        }
    }

    /// A file that is not there, and one that is not audio: NSErrors in NSOSStatusErrorDomain
    /// whose description says why.
    @Test func badFilesThrowStatusErrors() throws {
        let directory = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        do {
            _ = try AVAudioFile(forReading: URL(fileURLWithPath: directory + "/missing.wav"))
            Issue.record("a missing file opened")
        } catch let error as NSError {
            #expect(error.domain == NSOSStatusErrorDomain && error.code != 0)
            #expect(error.localizedDescription.contains("missing.wav"), "\(error.localizedDescription)")
        }
        let text = directory + "/notes.wav"
        try Data("not audio at all, just words".utf8).write(to: URL(fileURLWithPath: text))
        #expect(throws: NSError.self) { try AVAudioFile(forReading: URL(fileURLWithPath: text)) }
        #expect(throws: NSError.self) {
            try AVAudioFile(forWriting: URL(fileURLWithPath: directory + "/x.wav"), settings: [AVFormatIDKey: kAudioFormatLinearPCM])
        }
    }
}
