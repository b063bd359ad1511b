import Foundation
import Testing
import AudioFileStream
import AudioPlayback
import BufferQueue
import CodecTestSupport
import TestSupport

/// The PCM file writer: appended frames go out in aligned blocks with nothing lost or added at
/// their joins, a pipe gets a streaming header and nothing after the frames, and a full disk is an
/// error that names the file.
@Suite struct FileWriterTests {
    /// Deterministic piece sizes and samples (a linear congruential generator).
    struct Numbers {
        var state: UInt64
        mutating func next(_ range: ClosedRange<Int>) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return range.lowerBound + Int((state >> 33) % UInt64(range.count))
        }
    }

    /// Stereo samples with out-of-range values, halves and NaN among them, to exercise clipping and
    /// rounding at every block join.
    static func samples(_ count: Int) -> [Float] {
        var numbers = Numbers(state: 7)
        return (0..<count).map { i in
            switch i % 97 {
            case 0: return 1.5
            case 1: return -1.25
            case 2: return .nan
            case 3: return 0.5 / 32768 * Float(numbers.next(-300...300) | 1)   // halves of a 16-bit step
            default: return Float(numbers.next(-1_000_000...1_000_000)) / 1_000_000
            }
        }
    }

    /// A new empty directory under the temporary one (the caller removes it).
    static func makeDirectory(_ prefix: String) throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    /// `samples` converted to `format` in one call: what a file of them must hold after its header.
    static func converted(_ samples: [Float], to format: AudioStreamDescription) throws -> Data {
        let layout = try PCMSampleLayout(format)
        var expected = Data(count: samples.count / format.channelsPerFrame * format.bytesPerFrame)
        expected.withUnsafeMutableBytes { out in
            samples.withUnsafeBufferPointer { layout.fromFloat($0.baseAddress!, count: samples.count, into: out.baseAddress!) }
        }
        return expected
    }

    /// Writes `samples` in uneven pieces (1 to 5 000 frames) and returns the file's bytes.
    static func writtenInPieces(_ samples: [Float], channels: Int, to path: String,
                                write: (UnsafeBufferPointer<Float>) throws -> Void, close: () throws -> Void) throws -> Data {
        var numbers = Numbers(state: 11)
        var start = 0
        try samples.withUnsafeBufferPointer { all in
            while start < all.count {
                let count = min(numbers.next(1...5000) * channels, all.count - start)
                try write(UnsafeBufferPointer(rebasing: all[start..<(start + count)]))
                start += count
            }
        }
        try close()
        return try Data(contentsOf: URL(fileURLWithPath: path))
    }

    /// What one written file held.
    struct Written: Sendable {
        let path: String, framesWritten: Int64, header: Int, expectedHeader: Int, same: Bool, parsedFrames: Int64
    }

    /// 8, 16 and 24-bit integer and float32 WAV and CAF files written in uneven pieces hold exactly
    /// the header and the conversion of all the samples at once; the library's parser reads them at
    /// their length, and sox reads `WAVFileWriter`'s at theirs.
    @Test func piecesJoinExactlyInEveryLayout() async throws {
        let directory = try Self.makeDirectory("writer")
        defer { try? FileManager.default.removeItem(at: directory) }
        let channels = 2, frames = 150_001
        let samples = Self.samples(frames * channels)
        // The writing and comparing run on a thread of their own, off Swift's cooperative pool.
        let written = try await onOwnThread { () throws -> [Written] in
            let formats: [AudioStreamDescription] = [
                .linearPCM(sampleRate: 44100, channels: channels, bitsPerChannel: 16),
                .linearPCM(sampleRate: 44100, channels: channels, bitsPerChannel: 24),
                .linearPCM(sampleRate: 44100, channels: channels, bitsPerChannel: 8),
                .float32(sampleRate: 44100, channels: channels),
            ]
            var written: [Written] = []
            for wavFormat in formats {
                for container in [PCMFileWriter.Container.wav, .caf] {
                    // CAF's 8-bit samples are signed, WAV's unsigned.
                    var format = wavFormat
                    if container == .caf && format.bitsPerChannel == 8 { format.formatFlags.insert(.isSignedInteger) }
                    let layout = try PCMSampleLayout(format)
                    let expected = try Self.converted(samples, to: format)
                    let path = directory.appendingPathComponent("out-\(format.bytesPerFrame)-\(container).\(container == .wav ? "wav" : "caf")").path
                    let writer = try PCMFileWriter(path: path, format: format)
                    let bytes = try Self.writtenInPieces(samples, channels: channels, to: path,
                                                         write: { try writer.write(converting: $0.baseAddress!, count: $0.count, layout: layout) },
                                                         close: { try writer.close() })
                    let pad = container == .wav && expected.count % 2 == 1 ? 1 : 0
                    let header = bytes.count - expected.count - pad
                    let isFloat = format.formatFlags.contains(.isFloat)
                    written.append(Written(path: path, framesWritten: writer.framesWritten, header: header,
                                           expectedHeader: container == .caf ? 68 : isFloat ? 46 : 44,
                                           same: header >= 0 && bytes.subdata(in: header..<(header + expected.count)) == expected,
                                           parsedFrames: try AudioFile(path: path).totalFrames))
                }
            }
            return written
        }
        #expect(written.count == 8)
        for file in written {
            #expect(file.framesWritten == Int64(frames) && file.parsedFrames == Int64(frames), "\(file.path): \(file.framesWritten) written, \(file.parsedFrames) parsed")
            #expect(file.header == file.expectedHeader, "\(file.path): \(file.header) bytes before the frames")
            #expect(file.same, "\(file.path): the frames differ from one conversion of all the samples")
        }
        // The float32 front end (WAVFileWriter), and sox reading its 16-bit file.
        guard let soxi = Where.tool("soxi") else { return }
        for float in [false, true] {
            let path = directory.appendingPathComponent("front-\(float).wav").path
            let bytes = try await onOwnThread {
                let writer = try WAVFileWriter(path: path, sampleRate: 44100, channels: channels, float: float)
                return try Self.writtenInPieces(samples, channels: channels, to: path, write: { try writer.write($0) }, close: { try writer.close() })
            }
            #expect(bytes.count == (float ? 46 : 44) + frames * channels * (float ? 4 : 2))
            let output = try await run(soxi, ["-s", path])
            #expect(String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == "\(frames)")
        }
    }

    /// `aqrender` to a pipe (its standard output) writes the streaming header — sizes of
    /// 0xFFFFFFFF, as ffmpeg does — then exactly the frames it writes to a file, and nothing after
    /// them (it used to append a second header at the end, 11 frames of noise).
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: ConcurrentRenderTests.aqrender) && TestPaths.sharedFixtures != nil,
                   "aqrender is not built beside the tests, or the shared fixtures are absent"))
    func aPipeGetsAStreamingHeaderAndOnlyTheFrames() async throws {
        let input = try #require(TestPaths.sharedFixtures).appendingPathComponent("mp3-vbr-lame3.99-xing-mono-44k.mp3").path
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("piped-\(UUID()).wav").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let piped = try await runTool(ConcurrentRenderTests.aqrender, [input, "/dev/stdout", "--format", "s16"])
        let written = try await runTool(ConcurrentRenderTests.aqrender, [input, path, "--format", "s16"])
        #expect(piped.status == 0 && written.status == 0, "\(String(decoding: piped.errorOutput, as: UTF8.self))")
        let file = try Data(contentsOf: URL(fileURLWithPath: path))
        let stream = piped.output
        #expect(file.count > 44 + 65536 * 2, "the render should span several write blocks")
        #expect(stream.count == file.count, "\(stream.count) bytes through the pipe, \(file.count) in the file")
        guard stream.count == file.count, file.count > 44 else { return }
        #expect(stream.subdata(in: 44..<stream.count) == file.subdata(in: 44..<file.count), "the frames differ")
        #expect(Array(stream[4..<8]) == [0xFF, 0xFF, 0xFF, 0xFF] && Array(stream[40..<44]) == [0xFF, 0xFF, 0xFF, 0xFF])
        let frames = (file.count - 44) / 2
        #expect(Array(file[40..<44]) == withUnsafeBytes(of: UInt32(frames * 2).littleEndian, Array.init))
    }

    /// A full disk (`/dev/full`) is an error naming the file and the reason, from the writer and
    /// from `aqrender` whichever way it renders, instead of a render that reports success.
    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/dev/full"), "this system has no /dev/full"))
    func aFullDiskIsAnError() async throws {
        let writer = try WAVFileWriter(path: "/dev/full", sampleRate: 44100, channels: 2, float: false)
        let second = [Float](repeating: 0.25, count: 44100 * 2)
        let thrown = #expect(throws: AudioFileWriterError.self) {
            try second.withUnsafeBufferPointer { try writer.write($0) }
        }
        #expect(thrown?.code == .writeFailed && thrown?.path == "/dev/full" && thrown?.underlying?.isNoSpace == true)
        #expect(thrown.map { "\($0)" }?.contains("No space left on device") == true, "\(thrown.map { "\($0)" } ?? "")")
        #expect(throws: AudioFileWriterError.self) { try writer.close() }

        guard FileManager.default.isExecutableFile(atPath: ConcurrentRenderTests.aqrender), let fixtures = TestPaths.sharedFixtures else { return }
        let input = fixtures.appendingPathComponent("mp3-vbr-lame3.99-xing-mono-44k.mp3").path
        for jobs in ["1", "2"] {
            let result = try await runTool(ConcurrentRenderTests.aqrender, [input, "/dev/full", "--format", "s16", "--jobs", jobs])
            let message = String(decoding: result.errorOutput, as: UTF8.self)
            #expect(result.status == 1 && message.contains("cannot write /dev/full") && message.contains("No space left on device"),
                    "--jobs \(jobs): exit \(result.status): \(message)")
        }
    }

    /// Written over a longer existing file (which the writer cuts to its header, not to zero), a
    /// file holds exactly the new header and frames, appended or written by position, and
    /// nothing of the old file.
    @Test func aLongerFileIsReplacedExactly() async throws {
        let directory = try Self.makeDirectory("overwrite")
        defer { try? FileManager.default.removeItem(at: directory) }
        let channels = 2, frames = 70_001
        let samples = Self.samples(frames * channels)
        let results = try await onOwnThread { () throws -> [(Int, Int, Int64, Bool)] in
            var results: [(Int, Int, Int64, Bool)] = []
            for positional in [false, true] {
                let path = directory.appendingPathComponent("out-\(positional).wav").path
                // The old file: three times as long, of bytes no conversion gives.
                try Data(repeating: 0x7F, count: 44 + frames * channels * 2 * 3).write(to: URL(fileURLWithPath: path))
                let writer = try WAVFileWriter(path: path, sampleRate: 44100, channels: channels, float: false)
                try samples.withUnsafeBufferPointer { all in
                    if positional {
                        // Second half first, from another position than the end.
                        let half = frames / 2 * channels
                        try writer.write(UnsafeBufferPointer(rebasing: all[half...]), atFrame: Int64(frames / 2))
                        try writer.write(UnsafeBufferPointer(rebasing: all[..<half]), atFrame: 0)
                        writer.truncate(toFrames: Int64(frames))
                    } else {
                        try writer.write(all)
                    }
                }
                try writer.close()
                let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
                let expected = try Self.converted(samples, to: .linearPCM(sampleRate: 44100, channels: channels, bitsPerChannel: 16))
                let same = bytes.count == 44 + expected.count && bytes.subdata(in: 44..<bytes.count) == expected
                results.append((bytes.count, 44 + expected.count, try AudioFile(path: path).totalFrames, same))
            }
            return results
        }
        #expect(results.count == 2)
        for (size, expectedSize, parsed, same) in results {
            #expect(size == expectedSize, "\(size) bytes, expected \(expectedSize)")
            #expect(parsed == Int64(frames))
            #expect(same, "the frames differ from one conversion of all the samples")
        }
    }
}

/// A writer of packets closed with totals that claim more frames than its packets hold (an input
/// queue whose last packets were dropped) writes what the packets hold: the padding goes first,
/// then valid frames.
@Suite struct PacketWriterTotalsTests {
    @Test(arguments: [(AudioEncodingTotals(validFrames: 700, primingFrames: 0, remainderFrames: 12), 640, 0),
                      (AudioEncodingTotals(validFrames: 600, primingFrames: 0, remainderFrames: 64), 600, 40),
                      (AudioEncodingTotals(validFrames: 630, primingFrames: 0, remainderFrames: 10), 630, 10)])
    func totalsAreCutToThePacketsWritten(_ given: AudioEncodingTotals, valid: Int64, remainder: Int) throws {
        let directory = try FileWriterTests.makeDirectory("cut")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("ima.caf").path
        let format = AudioStreamDescription(sampleRate: 22050, formatID: .appleIMA4, bytesPerPacket: 34, framesPerPacket: 64,
                                            bytesPerFrame: 0, channelsPerFrame: 1, bitsPerChannel: 0)
        let writer = try AudioFileWriter(path: path, packetFormat: format, magicCookie: nil)
        // Ten packets (640 frames) of IMA4: any bytes are valid packets.
        let packets = [UInt8](repeating: 0, count: 34 * 10)
        try packets.withUnsafeBytes { try writer.writePackets($0, descriptions: []) }
        try writer.close(totals: given, magicCookie: nil)
        #expect(writer.validFrames == valid)
        #expect(writer.remainderFrames == remainder)
        let file = try AudioFile(path: path)
        // A CAF without priming or padding has no packet table: its frames are the packets'.
        #expect((file.packetTableInfo?.validFrames ?? file.totalFrames) == valid, "\(file.packetTableInfo.map { "\($0)" } ?? "no table")")
        #expect((file.packetTableInfo?.remainderFrames ?? 0) == remainder)
    }
}

/// Class 9b of issue 37: multichannel audio lands in the right speakers. A 5.1 source with a
/// different tone in each channel, encoded by ffmpeg to ALAC and AAC: `aqrender` writes a WAV in
/// WAVE's order (L R C LFE Ls Rs) with a channel mask, where the decoders give C L R Ls Rs LFE.
@Suite(.enabled(if: FileManager.default.isExecutableFile(atPath: ConcurrentRenderTests.aqrender) && Where.tool("ffmpeg") != nil,
                "aqrender is not built beside the tests, or ffmpeg is missing"))
struct MultichannelOrderTests {
    /// Each channel's strongest tone among 300, 500 … 1300 Hz (Goertzel over 4000 frames).
    static func tones(_ samples: [Float], channels: Int) -> [Int] {
        (0..<channels).map { channel in
            let x = stride(from: 4000, to: 8000, by: 1).map { Double(samples[$0 * channels + channel]) }
            return stride(from: 300, through: 1300, by: 200).max { a, b in
                func power(_ f: Int) -> Double {
                    var re = 0.0, im = 0.0
                    for (i, v) in x.enumerated() { re += v * cos(2 * .pi * Double(f) * Double(i) / 48000); im += v * sin(2 * .pi * Double(f) * Double(i) / 48000) }
                    return re * re + im * im
                }
                return power(a) < power(b)
            } ?? 0
        }
    }

    @Test(arguments: ["alac", "aac"])
    func fivePointOneIsWrittenInWAVEOrder(_ codec: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("order-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let ffmpeg = try #require(Where.tool("ffmpeg"))
        // FL FR FC LFE BL BR: 300, 500, 700, 900, 1100, 1300 Hz.
        let source = "aevalsrc=0.3*sin(2*PI*300*t)|0.3*sin(2*PI*500*t)|0.3*sin(2*PI*700*t)|0.3*sin(2*PI*900*t)|0.3*sin(2*PI*1100*t)|0.3*sin(2*PI*1300*t):s=48000:d=1:c=5.1"
        let encoded = directory + "/in.m4a", output = directory + "/out.wav"
        _ = try await run(ffmpeg, ["-v", "error", "-f", "lavfi", "-i", source, "-c:a", codec] + (codec == "aac" ? ["-b:a", "384k"] : []) + [encoded])
        let result = try await runTool(ConcurrentRenderTests.aqrender, [encoded, output])
        try #require(result.status == 0, "aqrender exited with \(result.status)")
        let file = try AudioFile(path: output)
        #expect(file.channelLayout == AudioChannelLayout(waveChannelMask: 0x3F, channels: 6), "\(String(describing: file.channelLayout))")
        let ours = try await rendered(output).samples
        let reference = try await ffmpegFloats(encoded)   // ffmpeg's order is WAVE's
        if codec == "alac" {
            #expect(ours == reference, "lossless: the samples of ffmpeg's decode, channel for channel")
        } else {
            // AAC's LFE channel is low-passed: its 900 Hz tone is gone.
            let tones = Self.tones(ours, channels: 6)
            #expect(tones[0..<3] == [300, 500, 700] && tones[4...] == [1100, 1300], "\(tones)")
            #expect(Self.tones(reference, channels: 6) == tones)
        }
        // ffprobe reads the mask as 5.1.
        let probe = try await run(try #require(Where.tool("ffprobe")), ["-v", "error", "-show_entries", "stream=channel_layout", "-of", "csv=p=0", output])
        #expect(String(decoding: probe, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == "5.1")
        // aqplay --record writes the player's channels the same way.
        if codec == "alac", FileManager.default.isExecutableFile(atPath: AQPlaySignalTests.aqplay) {
            let recorded = directory + "/recorded.wav"
            let played = try await runTool(AQPlaySignalTests.aqplay, ["--fast", "--record", recorded, encoded])
            try #require(played.status == 0, "aqplay exited with \(played.status)")
            #expect(try AudioFile(path: recorded).channelLayout == AudioChannelLayout(waveChannelMask: 0x3F, channels: 6))
            let heard = try await rendered(recorded).samples
            #expect(heard == reference, "aqplay --record: the samples of ffmpeg's decode, channel for channel")
        }
    }
}

extension MultichannelOrderTests {
    /// A 5.1 CAF written with WAVE's speaker bits carries a `chan` bitmap, which the parser and
    /// ffprobe read back as 5.1.
    @Test func aCAFCarriesItsChannelBitmap() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("chan-\(UUID()).caf").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let format = AudioStreamDescription.linearPCM(sampleRate: 48000, channels: 6, bitsPerChannel: 16)
        let writer = try PCMFileWriter(path: path, format: format, container: .caf, channelMask: 0x3F)
        let frames = (0..<4800).flatMap { frame in (0..<6).map { Int16(truncatingIfNeeded: frame * 6 + $0) } }
        try frames.withUnsafeBytes { try writer.write($0) }
        try writer.close()
        let file = try AudioFile(path: path)
        #expect(file.channelLayout == AudioChannelLayout(waveChannelMask: 0x3F, channels: 6))
        #expect(file.packetCount == 4800)
        // The frames read back are the ones written, in their order.
        #expect(try await rendered(path).samples == frames.map { Float($0) / 32768 })
        let probe = try await run(try #require(Where.tool("ffprobe")), ["-v", "error", "-show_entries", "stream=channel_layout", "-of", "csv=p=0", path])
        #expect(String(decoding: probe, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == "5.1")
    }
}
