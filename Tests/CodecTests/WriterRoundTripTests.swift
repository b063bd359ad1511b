import Foundation
import Testing
import AudioFileStream
import AudioPlayback
import BufferQueue
import CodecTestSupport
import AVCodecAAC
import FLACEncoder
import OpusEncoder
import SoxrConverter
import TestSupport

/// Every file the writer makes, read back by ffmpeg and by this library: the source's frame count,
/// lossless formats bit for bit, lossy ones no further from the source than ffmpeg's own encode.
@Suite(.enabled(if: Where.tool("ffmpeg") != nil, "ffmpeg is missing (make deps installs it): writer round trips skipped"))
struct WriterRoundTripTests {
    /// An odd-length source made by ffmpeg: `channels` at `rate`, as interleaved little-endian
    /// integers of `bits` (16 or 32; 24-bit content is in 32-bit words).
    static func source(channels: Int, rate: Int, bits: Int, frames: Int) async throws -> [UInt8] {
        let tones = (0..<channels).map { "0.3*sin(2*PI*\(200 + 170 * $0)*t)+0.05*sin(2*PI*\(2500 + 300 * $0)*t)" }.joined(separator: "|")
        let layout = [1: "mono", 2: "stereo", 6: "5.1"][channels] ?? "\(channels)c"
        let ffmpeg = try #require(Where.tool("ffmpeg"))
        var arguments = ["-v", "error", "-f", "lavfi", "-i", "aevalsrc=\(tones):s=\(rate):c=\(layout)",
                         "-f", "lavfi", "-i", "anoisesrc=c=pink:r=\(rate):a=0.02:s=5",
                         "-filter_complex", "[1]aformat=channel_layouts=\(layout)[n];[0][n]amix=inputs=2:normalize=0,aformat=sample_fmts=\(bits == 16 ? "s16" : "s32")",
                         "-frames:a", "\(frames)", "-t", "\(Double(frames) / Double(rate) + 1)"]
        if bits == 24 {
            arguments += ["-c:a", "pcm_s32le", "-f", "s32le", "-"]
        } else {
            arguments += ["-c:a", "pcm_s\(bits)le", "-f", "s\(bits)le", "-"]
        }
        var data = [UInt8](try await run(ffmpeg, arguments))
        let frameBytes = channels * (bits == 16 ? 2 : 4)
        data = Array(data[0..<min(data.count, frames * frameBytes)])
        if bits == 24 {
            // 24 bits of content: the low byte of every word cleared.
            for index in stride(from: 0, to: data.count, by: 4) { data[index] = 0 }
        }
        return data
    }

    static func write(_ path: String, source: [UInt8], channels: Int, rate: Int, bits: Int, format: AudioStreamDescription,
                      layout: AudioChannelLayout? = nil, settings: AudioEncoderSettings = .init()) throws -> AudioFileWriter {
        let client = AudioStreamDescription.linearPCM(sampleRate: Double(rate), channels: channels, bitsPerChannel: bits == 16 ? 16 : 32)
        let writer = try AudioFileWriter(path: path, format: format, clientFormat: client, clientLayout: layout ?? .wave(channels: channels),
                                         settings: settings)
        // In uneven pieces, as a recorder hands them over.
        var offset = 0, piece = 1
        while offset < source.count {
            let end = min(source.count, offset + (997 * piece % 5000 + 1) * client.bytesPerFrame)
            try source[offset..<end].withUnsafeBytes { try writer.write($0) }
            offset = end
            piece += 1
        }
        try writer.close()
        return writer
    }

    static func compressed(_ id: AudioFormatID, bits: Int = 0) -> AudioStreamDescription {
        AudioStreamDescription(sampleRate: 0, formatID: id, bytesPerPacket: 0, framesPerPacket: 0, bytesPerFrame: 0, channelsPerFrame: 0, bitsPerChannel: bits)
    }

    /// ffmpeg's decode as integers of the source's width, in WAVE's channel order.
    static func ffmpegIntegers(_ path: String, bits: Int) async throws -> [UInt8] {
        let ffmpeg = try #require(Where.tool("ffmpeg"))
        let codec = bits == 16 ? "s16le" : "s32le"
        return [UInt8](try await run(ffmpeg, ["-v", "error", "-i", path, "-c:a", "pcm_\(codec)", "-f", codec, "-"]))
    }

    struct Lossless: CustomTestStringConvertible, Sendable {
        let file: String, channels: Int, rate: Int, bits: Int, id: AudioFormatID
        var testDescription: String { "\(file) \(channels) ch \(rate) Hz \(bits)-bit" }
    }

    static let lossless: [Lossless] = [
        Lossless(file: "alac.caf", channels: 2, rate: 44100, bits: 16, id: .appleLossless),
        Lossless(file: "alac.caf", channels: 1, rate: 48000, bits: 24, id: .appleLossless),
        Lossless(file: "alac.caf", channels: 6, rate: 44100, bits: 16, id: .appleLossless),
        Lossless(file: "pcm.caf", channels: 6, rate: 48000, bits: 24, id: .linearPCM),
        Lossless(file: "flac.flac", channels: 2, rate: 44100, bits: 16, id: .flac),
        Lossless(file: "flac.flac", channels: 6, rate: 48000, bits: 24, id: .flac),
        Lossless(file: "flac.flac", channels: 1, rate: 48000, bits: 16, id: .flac),
        Lossless(file: "flac.caf", channels: 2, rate: 48000, bits: 24, id: .flac),
        Lossless(file: "alac.m4a", channels: 2, rate: 44100, bits: 16, id: .appleLossless),
        Lossless(file: "alac.m4a", channels: 6, rate: 48000, bits: 24, id: .appleLossless),
        Lossless(file: "flac.m4a", channels: 2, rate: 48000, bits: 16, id: .flac),
        Lossless(file: "pcm.wav", channels: 6, rate: 44100, bits: 16, id: .linearPCM),
        Lossless(file: "pcm.wav", channels: 1, rate: 48000, bits: 24, id: .linearPCM),
        Lossless(file: "pcm.aif", channels: 2, rate: 44100, bits: 16, id: .linearPCM),
        Lossless(file: "pcm.aifc", channels: 2, rate: 48000, bits: 24, id: .linearPCM),
    ]

    @Test(arguments: lossless)
    func losslessFilesHoldTheSourceExactly(_ c: Lossless) async throws {
        let frames = 44_321
        let source = try await Self.source(channels: c.channels, rate: c.rate, bits: c.bits, frames: frames)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("writer-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent(c.file).path
        let big = c.file.hasSuffix(".aif") || c.file.hasSuffix(".aifc")
        let format = c.id == .linearPCM
            ? AudioStreamDescription.linearPCM(sampleRate: Double(c.rate), channels: c.channels, bitsPerChannel: c.bits, isBigEndian: big)
            : Self.compressed(c.id, bits: c.bits)
        FLACEncoder.register()
        let writer = try Self.write(path, source: source, channels: c.channels, rate: c.rate, bits: c.bits, format: format)
        #expect(writer.validFrames == Int64(frames))
        if c.file.hasSuffix(".flac"), let flac = Where.tool("flac"), let metaflac = Where.tool("metaflac") {
            // The reference decoder checks the MD5 the writer put back; STREAMINFO counts the frames.
            let test = try await runTool(flac, ["-t", "-s", path])
            #expect(test.status == 0, "flac -t: \(String(decoding: test.errorOutput, as: UTF8.self))")
            let total = String(decoding: try await run(metaflac, ["--show-total-samples", path]), as: UTF8.self)
            #expect(total.trimmingCharacters(in: .whitespacesAndNewlines) == "\(frames)")
        }

        // ffmpeg: the source's integers (its channel order is WAVE's; our ALAC 5.1 is stored in
        // ALAC's order and says so, which ffmpeg maps back).
        let reference = try await Self.ffmpegIntegers(path, bits: c.bits)
        #expect(reference.count == source.count, "ffmpeg decodes \(reference.count) bytes, the source has \(source.count)")
        #expect(reference == source, "ffmpeg's decode differs from the source")

        // This library: the frame count, and the source's values.
        let (ours, format2, _) = try await rendered(path)
        #expect(format2.channelsPerFrame == c.channels)
        #expect(ours.count == frames * c.channels, "\(ours.count / c.channels) frames rendered, \(frames) written")
        let file = try AudioFile(path: path)
        let order = file.channelLayout?.waveOrder?.source ?? Array(0..<c.channels)
        let scale = Float(sign: .plus, exponent: -(c.bits == 16 ? 15 : 31), significand: 1)
        var differing = 0
        source.withUnsafeBytes { raw in
            for frame in 0..<min(frames, ours.count / c.channels) {
                for channel in 0..<c.channels {
                    let value: Float = c.bits == 16
                        ? Float(raw.loadUnaligned(fromByteOffset: 2 * (frame * c.channels + channel), as: Int16.self))
                        : Float(raw.loadUnaligned(fromByteOffset: 4 * (frame * c.channels + channel), as: Int32.self) >> 8) * 256
                    if ours[frame * c.channels + order[channel]] != value * scale { differing += 1 }
                }
            }
        }
        #expect(differing == 0, "\(differing) samples differ from the source")
    }

    struct Lossy: CustomTestStringConvertible, Sendable {
        let file: String, id: AudioFormatID, ffmpegCodec: String
        /// Frames ffmpeg plays past the source's end: it ignores WAV's fact and CAF's remainder
        /// for ADPCM, and AIFC has no place for it.
        let ffmpegPadding: Bool, ourPadding: Bool
        var testDescription: String { file }
    }

    static let lossy: [Lossy] = [
        Lossy(file: "ulaw.wav", id: .uLaw, ffmpegCodec: "pcm_mulaw", ffmpegPadding: false, ourPadding: false),
        Lossy(file: "alaw.caf", id: .aLaw, ffmpegCodec: "pcm_alaw", ffmpegPadding: false, ourPadding: false),
        Lossy(file: "ulaw.aifc", id: .uLaw, ffmpegCodec: "pcm_mulaw", ffmpegPadding: false, ourPadding: false),
        Lossy(file: "ima4.caf", id: .appleIMA4, ffmpegCodec: "adpcm_ima_qt", ffmpegPadding: true, ourPadding: false),
        Lossy(file: "ima4.aifc", id: .appleIMA4, ffmpegCodec: "adpcm_ima_qt", ffmpegPadding: true, ourPadding: true),
        Lossy(file: "ima.wav", id: .dviIntelIMA, ffmpegCodec: "adpcm_ima_wav", ffmpegPadding: true, ourPadding: false),
    ]

    @Test(arguments: lossy)
    func lossyFilesHaveTheSourceLengthAndFFmpegsQuality(_ c: Lossy) async throws {
        let frames = 30_011, rate = 44100
        let source = try await Self.source(channels: 2, rate: rate, bits: 16, frames: frames)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("writer-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent(c.file).path
        let writer = try Self.write(path, source: source, channels: 2, rate: rate, bits: 16, format: Self.compressed(c.id))
        #expect(writer.validFrames == Int64(frames))
        let perPacket = writer.dataFormat.framesPerPacket
        let padded = (frames + perPacket - 1) / perPacket * perPacket

        let theirs = try await ffmpegFloats(path)
        #expect(theirs.count / 2 == (c.ffmpegPadding ? padded : frames), "ffmpeg plays \(theirs.count / 2) frames")
        let (ours, _, _) = try await rendered(path)
        #expect(ours.count / 2 == (c.ourPadding ? padded : frames), "\(ours.count / 2) frames rendered, \(frames) written")
        let compared = min(ours.count, theirs.count, frames * 2)
        let differing = zip(ours[0..<compared], theirs[0..<compared]).filter { $0 != $1 }.count
        #expect(differing == 0, "our decode and ffmpeg's differ in \(differing) samples")

        // ffmpeg's own encode of the same source, decoded by ffmpeg, as the yardstick.
        let ffmpeg = try #require(Where.tool("ffmpeg"))
        let raw = directory.appendingPathComponent("source.raw")
        try Data(source).write(to: raw)
        let reference = directory.appendingPathComponent("ffmpeg-" + c.file).path
        _ = try await run(ffmpeg, ["-v", "error", "-f", "s16le", "-ar", "\(rate)", "-ac", "2", "-i", raw.path, "-c:a", c.ffmpegCodec, reference])
        let yardstick = try await ffmpegFloats(reference)
        let original = source.withUnsafeBytes { $0.bindMemory(to: Int16.self).map { Float($0) / 32768 } }
        for channel in 0..<2 {
            func plane(_ samples: [Float]) -> [Float] { stride(from: channel, to: min(samples.count, frames * 2), by: 2).map { samples[$0] } }
            let ourDistance = logSpectralDistance(plane(original), plane(ours))
            let theirDistance = logSpectralDistance(plane(original), plane(yardstick))
            #expect(ourDistance <= theirDistance + 1, "channel \(channel): \(ourDistance) dB from the source; ffmpeg's encode \(theirDistance) dB")
        }
    }

    struct OpusCase: CustomTestStringConvertible, Sendable {
        let channels: Int, rate: Int, bitRate: Int
        var testDescription: String { "\(channels) ch \(rate) Hz \(bitRate / 1000) kbit/s" }
    }

    /// Opus decodes at 48 kHz: a source at another rate comes out resampled, with exactly
    /// `round(N × 48 000 / rate)` frames, from opusdec, ffmpeg and this library alike.
    @Test(arguments: [OpusCase(channels: 2, rate: 48000, bitRate: 64000), OpusCase(channels: 1, rate: 44100, bitRate: 48000),
                      OpusCase(channels: 6, rate: 48000, bitRate: 192_000)])
    func opusFilesHaveTheExactLengthAndLibopusQuality(_ c: OpusCase) async throws {
        OpusEncoder.register()
        SoxrConverter.register()
        let frames = 40_013
        let source = try await Self.source(channels: c.channels, rate: c.rate, bits: 16, frames: frames)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("writer-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("out.opus").path
        let writer = try Self.write(path, source: source, channels: c.channels, rate: c.rate, bits: 16, format: Self.compressed(.opus),
                                    settings: AudioEncoderSettings(bitRate: c.bitRate))
        let expected = Int((Double(frames) * 48000 / Double(c.rate)).rounded())
        #expect(writer.validFrames == Int64(expected))

        let theirs = try await ffmpegFloats(path)
        #expect(theirs.count == expected * c.channels, "ffmpeg plays \(theirs.count / c.channels) frames, \(expected) expected")
        if let opusdec = Where.tool("opusdec") {
            let wav = directory.appendingPathComponent("opusdec.wav").path
            _ = try await run(opusdec, ["--quiet", "--float", "--rate", "48000", path, wav])
            let decoded = try await ffmpegFloats(wav)
            #expect(decoded.count == expected * c.channels, "opusdec plays \(decoded.count / c.channels) frames, \(expected) expected")
        }
        let (ours, format, _) = try await rendered(path)
        #expect(format.sampleRate == 48000)
        #expect(ours.count == expected * c.channels, "\(ours.count / c.channels) frames rendered, \(expected) expected")

        // ffmpeg's libopus encode at the same bit rate, decoded by ffmpeg, is the yardstick; both
        // are measured against the source at 48 kHz as ffmpeg resamples it.
        let ffmpeg = try #require(Where.tool("ffmpeg"))
        let raw = directory.appendingPathComponent("source.raw")
        try Data(source).write(to: raw)
        let reference = directory.appendingPathComponent("ffmpeg.opus").path
        let input = ["-v", "error", "-f", "s16le", "-ar", "\(c.rate)", "-ac", "\(c.channels)", "-i", raw.path]
        _ = try await run(ffmpeg, input + ["-c:a", "libopus", "-b:a", "\(c.bitRate)", reference])
        let yardstick = try await ffmpegFloats(reference)
        let original48 = directory.appendingPathComponent("source48.wav").path
        _ = try await run(ffmpeg, input + ["-ar", "48000", "-c:a", "pcm_f32le", original48])
        let original = try await ffmpegFloats(original48)
        // Our decode is in Vorbis order, as the file's layout says; ffmpeg's are in WAVE's.
        try Self.expectNoFurther(ours, theirs: theirs, than: yardstick, from: original, frames: expected, channels: c.channels, path: path)
    }

    /// Each channel of our decode (in the order the file's layout gives, as WAVE's) and of ffmpeg's
    /// decode of our file is no further from the source (log-spectral distance) than ffmpeg's own
    /// encode at the same settings, + 1 dB.
    static func expectNoFurther(_ ours: [Float], theirs: [Float]?, than yardstick: [Float], from original: [Float], frames: Int,
                                channels: Int, path: String) throws {
        let order = try AudioFile(path: path).channelLayout?.waveOrder?.source ?? Array(0..<channels)
        func plane(_ samples: [Float], _ index: Int) -> [Float] {
            stride(from: index, to: min(samples.count, frames * channels), by: channels).map { samples[$0] }
        }
        for channel in 0..<channels {
            let ourDistance = logSpectralDistance(plane(original, channel), plane(ours, order[channel]))
            let theirDistance = logSpectralDistance(plane(original, channel), plane(yardstick, channel))
            #expect(ourDistance <= theirDistance + 1, "channel \(channel): \(ourDistance) dB from the source; ffmpeg's own encode \(theirDistance) dB")
            if let theirs {
                let ffmpegReadingOurs = logSpectralDistance(plane(original, channel), plane(theirs, channel))
                #expect(ffmpegReadingOurs <= theirDistance + 1, "channel \(channel) as ffmpeg decodes our file: \(ffmpegReadingOurs) dB")
            }
        }
    }

    struct AACCase: CustomTestStringConvertible, Sendable {
        let file: String, channels: Int, rate: Int, bitRate: Int
        var testDescription: String { "\(file) \(channels) ch \(rate) Hz \(bitRate / 1000) kbit/s" }
    }

    /// AAC from libavcodec's encoder in M4A and CAF: this library plays exactly the source's frames
    /// (with either AAC decoder); ffmpeg and faad trim an M4A's priming and keep the last packet's
    /// padding, as they do for ffmpeg's own files (ffmpeg plays a CAF's every coded frame); the
    /// quality is ffmpeg's own encode's.
    @Test(.bothAACDecoders, arguments: [AACCase(file: "aac.m4a", channels: 2, rate: 44100, bitRate: 128_000),
                                        AACCase(file: "aac.m4a", channels: 1, rate: 48000, bitRate: 64000),
                                        AACCase(file: "aac.caf", channels: 2, rate: 48000, bitRate: 128_000),
                                        AACCase(file: "aac.m4a", channels: 6, rate: 48000, bitRate: 320_000)])
    func aacFilesHaveTheSourceLengthAndFFmpegsQuality(_ c: AACCase) async throws {
        AVCodecAAC.register(decoders: AudioDecoderRegistry())
        let frames = 50_001
        let source = try await Self.source(channels: c.channels, rate: c.rate, bits: 16, frames: frames)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("writer-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent(c.file).path
        let writer = try Self.write(path, source: source, channels: c.channels, rate: c.rate, bits: 16, format: Self.compressed(.aacLC),
                                    settings: AudioEncoderSettings(bitRate: c.bitRate))
        #expect(writer.validFrames == Int64(frames))
        #expect(writer.primingFrames == 1024)
        let coded = Int(writer.validFrames) + writer.primingFrames + writer.remainderFrames
        #expect(coded % 1024 == 0 && writer.remainderFrames < 1024)

        let (ours, _, _) = try await rendered(path)
        #expect(ours.count == frames * c.channels, "\(ours.count / c.channels) frames rendered, \(frames) written")
        let theirs = try await ffmpegFloats(path)
        let ffmpegFrames = c.file.hasSuffix(".caf") ? coded : frames + writer.remainderFrames
        #expect(theirs.count == ffmpegFrames * c.channels, "ffmpeg plays \(theirs.count / c.channels) frames")
        if c.file.hasSuffix(".m4a"), let faad = Where.tool("faad") {
            let wav = directory.appendingPathComponent("faad.wav").path
            _ = try await run(faad, ["-q", "-o", wav, path])
            let decoded = try await ffmpegFloats(wav)
            // faad's tool writes mono as two channels.
            let faadChannels = max(c.channels, 2)
            #expect(decoded.count == (frames + writer.remainderFrames) * faadChannels, "faad plays \(decoded.count / faadChannels) frames")
        }

        let ffmpeg = try #require(Where.tool("ffmpeg"))
        let raw = directory.appendingPathComponent("source.raw")
        try Data(source).write(to: raw)
        let reference = directory.appendingPathComponent("ffmpeg.m4a").path
        _ = try await run(ffmpeg, ["-v", "error", "-f", "s16le", "-ar", "\(c.rate)", "-ac", "\(c.channels)", "-i", raw.path,
                                   "-c:a", "aac", "-b:a", "\(c.bitRate)", reference])
        let yardstick = try await ffmpegFloats(reference)
        let original = source.withUnsafeBytes { $0.bindMemory(to: Int16.self).map { Float($0) / 32768 } }
        try Self.expectNoFurther(ours, theirs: nil, than: yardstick, from: original, frames: frames, channels: c.channels, path: path)
    }

    /// Formats whose packets encode on their own are encoded by several encoders at once, into
    /// the same bytes as one encoder's; the others (FLAC: libFLAC numbers its frames) ignore `jobs`.
    @Test(arguments: [("alac.caf", AudioFormatID.appleLossless), ("alac.m4a", .appleLossless), ("ima.wav", .dviIntelIMA), ("flac.flac", .flac)])
    func aParallelEncodeIsTheSameFile(_ name: String, _ id: AudioFormatID) async throws {
        FLACEncoder.register()
        let frames = 300_017
        let source = try await Self.source(channels: 2, rate: 44100, bits: 16, frames: frames)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("writer-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var files: [Data] = []
        for jobs in [1, 2, 3] {
            let path = directory.appendingPathComponent("\(jobs)-\(name)").path
            let client = AudioStreamDescription.int16(sampleRate: 44100, channels: 2)
            let writer = try AudioFileWriter(path: path, format: Self.compressed(id, bits: 16), clientFormat: client, jobs: jobs)
            var offset = 0
            while offset < source.count {
                let end = min(source.count, offset + 7_001 * 4)
                try source[offset..<end].withUnsafeBytes { try writer.write($0) }
                offset = end
            }
            try writer.close()
            #expect(writer.validFrames == Int64(frames))
            files.append(try Data(contentsOf: URL(fileURLWithPath: path)))
        }
        #expect(files[1] == files[0], "two jobs wrote other bytes than one")
        #expect(files[2] == files[0], "three jobs wrote other bytes than one")
    }
}
