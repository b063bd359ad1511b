import Foundation
import Testing
import CodecTestSupport
import TestSupport
import AudioFileStream

/// Programs written against Apple's C API (Tests/AudioToolboxClients, Swift 5 mode, no
/// Linux-specific line) run as their own processes: through the null device (frame counts), and
/// through a private PulseAudio server, which must play exactly what the library's Swift API
/// renders for the same input.
enum Clients {
    static let directory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
    static func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
    static func built(_ name: String) -> Bool { FileManager.default.isExecutableFile(atPath: path(name)) }

    /// Runs a client program; returns its standard output, expecting it to succeed.
    static func run(_ name: String, _ arguments: [String], environment: [String: String]) async throws -> String {
        let result = try await runTool(path(name), arguments, environment: environment, timeout: .seconds(60))
        let errors = String(decoding: result.errorOutput, as: UTF8.self)
        #expect(result.status == 0, "\(name) \(arguments.joined(separator: " ")) exited with \(result.status): \(errors)")
        return String(decoding: result.output, as: UTF8.self)
    }

    /// The number in a line "… N frames".
    static func frames(in output: String, after word: String) -> Int? {
        for line in output.split(separator: "\n") where line.hasPrefix(word) {
            let fields = line.split(separator: " ")
            if let index = fields.firstIndex(of: "frames"), index > 0 { return Int(fields[index - 1]) }
        }
        return nil
    }
}

/// What a client played through a private PulseAudio server (float32 at the stream's rate, so
/// bit-exact) is what the Swift API renders; silent frames (the server's before and after, and
/// any in the file) are left out on both sides.
func expectPlayedThroughPulseAudio(_ client: String, _ arguments: [String], reference: [Float], channels: Int, rate: Int,
                                   _ what: String) async throws {
    let server = try await PrivateServer.start(rate: rate, channels: channels)
    defer { Task { await server.kill() } }
    try await server.startRecording()
    let output = try await Clients.run(client, arguments, environment: server.environment(["AQ_OUTPUT": "pulse"]))
    let expected = withoutSilence(reference, channels: channels)
    let captured = withoutSilence(await server.stopRecording(soundFrames: expected.count / channels), channels: channels)
    #expect(captured.count == expected.count, "\(what): \(captured.count / channels) frames of sound played, \(expected.count / channels) rendered; \(output)")
    let firstDifference = zip(captured, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset
    #expect(firstDifference == nil, "\(what): what played differs from the render at sample \(firstDifference ?? -1)")
}

@Suite(.serialized) struct FilePlayerClientTests {
    static let files = ["lame-cbr128-44k-stereo.mp3", "alac-44k-stereo.m4a", "ffmpeg-aac-44k-moov-last.m4a", "pcm-s16-22k-mono.wav",
                        "ima4-22k-mono.caf", "ulaw-8k-mono.caf", "amr-nb-8k-mono.amr"]

    @Test(.enabled(if: Clients.built("atplayfile") && !PrivateServer.missing, "atplayfile or PulseAudio is missing"), arguments: files)
    func theBookPlayerPlaysWhatTheSwiftAPIRenders(_ name: String) async throws {
        let path = Where.fixture(name)
        let reference = try await AACDecoderChoice.$current.withValue(.avcodec) { try await rendered(path) }
        try await expectPlayedThroughPulseAudio("atplayfile", [path], reference: reference.samples,
                                                channels: reference.format.channelsPerFrame, rate: Int(reference.format.sampleRate), name)
    }

    @Test(.enabled(if: Clients.built("atplayfile"), "atplayfile is not built beside the tests"),
          arguments: ["lame-vbr-v2-44k-stereo.mp3", "alac-44k-stereo.m4a", "ima4-22k-mono.caf"])
    func theNullDeviceCountsTheRenderedFrames(_ name: String) async throws {
        let path = Where.fixture(name)
        let reference = try await AACDecoderChoice.$current.withValue(.avcodec) { try await rendered(path) }
        let frames = reference.samples.count / reference.format.channelsPerFrame
        for pacing in ["null", "null:unpaced"] {
            let output = try await Clients.run("atplayfile", [path], environment: ["AQ_OUTPUT": pacing])
            #expect(Clients.frames(in: output, after: "played") == frames, "\(pacing): \(output)")
        }
    }
}

@Suite(.serialized) struct StreamingClientTests {
    static let files = ["lame-vbr-v2-44k-stereo.mp3", "ffmpeg-aac-44k-moov-first.m4a", "ffmpeg-aac-48k.aac", "pcm-s16be-8k-mono.aiff",
                        "ulaw-8k-mono.caf"]

    @Test(.enabled(if: Clients.built("atstream") && !PrivateServer.missing, "atstream or PulseAudio is missing"), arguments: files)
    func theStreamingPlayerPlaysWhatTheSwiftAPIRenders(_ name: String) async throws {
        let path = Where.fixture(name)
        let reference = try await AACDecoderChoice.$current.withValue(.avcodec) { try await rendered(path) }
        try await expectPlayedThroughPulseAudio("atstream", [path, "\(name.utf8.count)"], reference: reference.samples,
                                                channels: reference.format.channelsPerFrame, rate: Int(reference.format.sampleRate), name)
    }

    @Test(.enabled(if: Clients.built("atstream"), "atstream is not built beside the tests"),
          arguments: ["lame-cbr128-44k-stereo.mp3", "ffmpeg-aac-48k.aac"])
    func chunkingChangesNothingOnTheNullDevice(_ name: String) async throws {
        let path = Where.fixture(name)
        let reference = try await AACDecoderChoice.$current.withValue(.avcodec) { try await rendered(path) }
        let frames = reference.samples.count / reference.format.channelsPerFrame
        for seed in ["1", "2", "3"] {
            let output = try await Clients.run("atstream", [path, seed], environment: ["AQ_OUTPUT": "null:unpaced"])
            #expect(Clients.frames(in: output, after: "played") == frames, "seed \(seed): \(output)")
        }
    }

    @Test(.enabled(if: Clients.built("atstream"), "atstream is not built beside the tests"))
    func anIndexAfterTheMediaDataIsNotOptimized() async throws {
        let result = try await runTool(Clients.path("atstream"), [Where.fixture("alac-44k-stereo.m4a")], environment: ["AQ_OUTPUT": "null"])
        #expect(result.status == 1)
        let errors = String(decoding: result.errorOutput, as: UTF8.self)
        // kAudioFileStreamError_NotOptimized, 'optm'.
        #expect(errors.contains("AudioFileStreamParseBytes failed: 1869640813"), "\(errors)")
    }
}

/// A 16-bit WAV file of `samples` (interleaved, already on the 16-bit grid).
func writeWAV16(_ samples: [Int16], channels: Int, rate: Int, to path: String) throws {
    var data = Data()
    func put<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.littleEndian) { data.append(contentsOf: $0) } }
    data.append(contentsOf: Array("RIFF".utf8)); put(UInt32(36 + samples.count * 2)); data.append(contentsOf: Array("WAVEfmt ".utf8))
    put(UInt32(16)); put(UInt16(1)); put(UInt16(channels)); put(UInt32(rate)); put(UInt32(rate * channels * 2)); put(UInt16(channels * 2)); put(UInt16(16))
    data.append(contentsOf: Array("data".utf8)); put(UInt32(samples.count * 2))
    for sample in samples { put(sample) }
    try data.write(to: URL(fileURLWithPath: path))
}

@Suite(.serialized) struct RecorderClientTests {
    static func temporary(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("aq-atrecord-\(UUID().uuidString.prefix(8))-\(name)").path
    }

    /// From the null device (silence): the CAF holds exactly the frames the recorder wrote, for
    /// this library and for ffmpeg.
    @Test(.enabled(if: Clients.built("atrecord"), "atrecord is not built beside the tests"), arguments: ["lpcm", "alac", "aac"])
    func theRecordedFileHoldsWhatWasWritten(_ format: String) async throws {
        let path = Self.temporary("\(format).caf")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let output = try await Clients.run("atrecord", [path, format, "0.6"], environment: ["AQ_INPUT": "null"])
        let written = try #require(Clients.frames(in: output, after: "recorded"), "\(output)")
        #expect(written > 0)
        let file = try AudioFile(path: path)
        #expect(file.totalFrames * Int64(file.indexFrameScale) == Int64(written))
        #expect(file.fileType == .caf)
        if format != "aac" {
            let decoded = try await rendered(path)
            #expect(decoded.samples.count / 2 == written)
        }
        if Where.tool("ffmpeg") != nil {
            // ffmpeg decodes every coded frame (it keeps AAC's priming: none was declared here).
            let decoded = try await ffmpegFloats(path)
            #expect(decoded.count / 2 == written, "ffmpeg decodes \(decoded.count / 2) frames of \(format), the recorder wrote \(written)")
        }
    }

    /// From a private PulseAudio server's monitor while paplay plays a signal: the ALAC file holds
    /// the signal's 16-bit samples exactly, in one piece.
    @Test(.enabled(if: Clients.built("atrecord") && !PrivateServer.missing && Where.tool("paplay") != nil,
                   "atrecord, PulseAudio or paplay is missing"))
    func aRecordingFromPulseAudioIsBitExact() async throws {
        let server = try await PrivateServer.start(rate: 44100, channels: 2)
        defer { Task { await server.kill() } }
        let environment = server.environment(["AQ_INPUT": "pulse:out.monitor"])
        let signalPath = Self.temporary("signal.wav"), path = Self.temporary("alac.caf")
        defer {
            try? FileManager.default.removeItem(atPath: signalPath)
            try? FileManager.default.removeItem(atPath: path)
        }
        let played = signal(frames: 22050, channels: 2).map { Int16(($0 * 32768).rounded()) }
        try writeWAV16(played, channels: 2, rate: 44100, to: signalPath)

        // The recorder runs for 2.5 s; the signal is played once it says it records.
        let (lines, exit) = try startReadingLines(Clients.path("atrecord"), [path, "alac", "2.5"], environment: environment)
        #expect(await lines.wait(timeout: .seconds(10)) { $0.contains("recording") })
        let playing = try await runTool(try #require(Where.tool("paplay")), [signalPath], environment: environment, timeout: .seconds(20))
        #expect(playing.status == 0, "\(String(decoding: playing.errorOutput, as: UTF8.self))")
        #expect(await exit.wait(timeout: .seconds(20)) == 0)
        #expect(await lines.wait(timeout: .seconds(5)) { $0.contains { $0.hasPrefix("recorded") } })

        let recorded = try await rendered(path).samples.map { Int16(($0 * 32768).rounded()) }
        // The signal is never silent: find its first frame, then compare it whole.
        let start = try #require(stride(from: 0, to: recorded.count - 1, by: 2).first { recorded[$0] != 0 || recorded[$0 + 1] != 0 })
        #expect(recorded.count - start >= played.count, "the recording ends \(recorded.count - start) samples into the signal")
        let segment = recorded[start..<min(recorded.count, start + played.count)]
        let firstDifference = zip(segment, played).enumerated().first { $0.element.0 != $0.element.1 }?.offset
        #expect(firstDifference == nil, "the recording differs from the signal at sample \(firstDifference ?? -1)")
    }
}

@Suite(.serialized) struct ToneGeneratorClientTests {
    /// attone's tone, computed as it computes it.
    static let tone: [Float] = (0..<33075).flatMap { frame -> [Float] in
        [Float(0.4 * sin(2 * Double.pi * 440 * Double(frame) / 44100)), Float(0.3 * sin(2 * Double.pi * 660 * Double(frame) / 44100))]
    }

    @Test(.enabled(if: Clients.built("attone") && !PrivateServer.missing, "attone or PulseAudio is missing"))
    func theToneReachesPulseAudioBitForBit() async throws {
        try await expectPlayedThroughPulseAudio("attone", [], reference: Self.tone, channels: 2, rate: 44100, "attone")
    }

    @Test(.enabled(if: Clients.built("attone"), "attone is not built beside the tests"))
    func theNullDeviceCountsTheTone() async throws {
        for pacing in ["null", "null:unpaced"] {
            let output = try await Clients.run("attone", [], environment: ["AQ_OUTPUT": pacing])
            #expect(Clients.frames(in: output, after: "played") == 33075, "\(pacing): \(output)")
        }
    }
}

@Suite struct OfflineRendererClientTests {
    static let files = ["lame-vbr-v2-44k-stereo.mp3", "alac-44k-stereo.m4a", "ffmpeg-aac-44k-moov-last.m4a", "pcm-s16-22k-mono.wav",
                        "ulaw-8k-mono.caf", "amr-nb-8k-mono.amr"]

    @Test(.enabled(if: Clients.built("atoffline"), "atoffline is not built beside the tests"), arguments: files)
    func theOfflineRenderIsTheSwiftAPIsRender(_ name: String) async throws {
        let path = Where.fixture(name)
        let reference = try await AACDecoderChoice.$current.withValue(.avcodec) { try await rendered(path) }
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("aq-atoffline-\(UUID().uuidString.prefix(8)).wav").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        let printed = try await Clients.run("atoffline", [path, output], environment: ["AQ_OUTPUT": "null"])
        let frames = reference.samples.count / reference.format.channelsPerFrame
        #expect(Clients.frames(in: printed, after: "rendered") == frames, "\(printed)")
        let written = try await rendered(output)
        #expect(written.format.channelsPerFrame == reference.format.channelsPerFrame)
        #expect(written.format.sampleRate == reference.format.sampleRate)
        #expect(written.samples.count == reference.samples.count)
        let firstDifference = zip(written.samples, reference.samples).enumerated().first { $0.element.0 != $0.element.1 }?.offset
        #expect(firstDifference == nil, "\(name): the offline render differs from the Swift API's at sample \(firstDifference ?? -1)")
    }

    /// Issue 52, class 6a: an AAC queue given no magic cookie decodes from its stream description
    /// alone, as on a Mac (a player that sets the cookie only when its parser offers one): an ADTS
    /// file renders the same without the cookie as with it. (Priming failed: "AAC needs its
    /// AudioSpecificConfig as the magic cookie (got 0 bytes)".)
    @Test(.enabled(if: Clients.built("atoffline") && Where.tool("ffmpeg") != nil, "atoffline or ffmpeg is missing"))
    func anAACQueueWithoutACookieDecodesFromItsDescription() async throws {
        let adts = FileManager.default.temporaryDirectory.appendingPathComponent("aq-nocookie-\(UUID().uuidString.prefix(8)).aac").path
        let with = adts + ".with.wav", without = adts + ".without.wav"
        defer { for path in [adts, with, without] { try? FileManager.default.removeItem(atPath: path) } }
        _ = try await run(try #require(Where.tool("ffmpeg")), ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=f=440:d=1:r=44100",
                                                               "-ac", "2", "-c:a", "aac", "-b:a", "96k", adts])
        let printedWith = try await Clients.run("atoffline", [adts, with], environment: ["AQ_OUTPUT": "null"])
        let printedWithout = try await Clients.run("atoffline", [adts, without, "--no-cookie"], environment: ["AQ_OUTPUT": "null"])
        let frames = Clients.frames(in: printedWith, after: "rendered")
        #expect((frames ?? 0) > 44_100, "\(printedWith)")
        #expect(Clients.frames(in: printedWithout, after: "rendered") == frames, "\(printedWithout)")
        let a = try await rendered(with).samples, b = try await rendered(without).samples
        #expect(a.count == b.count && a == b)
    }
}

@Suite(.serialized) struct ProcessingTapClientTests {
    @Test(.enabled(if: Clients.built("attap") && !PrivateServer.missing, "attap or PulseAudio is missing"),
          arguments: ["lame-cbr128-44k-stereo.mp3", "pcm-s16-22k-mono.wav"])
    func aPreEffectsTapHalvesWhatPlays(_ name: String) async throws {
        let path = Where.fixture(name)
        let reference = try await rendered(path)
        // Halving a float is exact: what plays is the render halved, bit for bit.
        try await expectPlayedThroughPulseAudio("attap", [path], reference: reference.samples.map { $0 * 0.5 },
                                                channels: reference.format.channelsPerFrame, rate: Int(reference.format.sampleRate), name)
    }
}

@Suite struct ConverterClientTests {
    static func temporary(_ ext: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("aq-atconvert-\(UUID().uuidString.prefix(8)).\(ext)").path
    }

    /// 16-bit conversions (ALAC in M4A, WAV) hold the source's render on the 16-bit grid; float32
    /// CAF holds it exactly; AAC keeps the exact length. Read back by this library and by ffmpeg.
    @Test(.enabled(if: Clients.built("atconvert"), "atconvert is not built beside the tests"),
          arguments: [("lame-vbr-v2-44k-stereo.mp3", "alac", "m4a"), ("alac-44k-stereo.m4a", "wav16", "wav"),
                      ("ulaw-8k-mono.caf", "caf32", "caf"), ("pcm-s16-22k-mono.wav", "aac", "m4a")])
    func extAudioFileConvertsWithTheExactLength(_ name: String, _ codec: String, _ ext: String) async throws {
        let path = Where.fixture(name)
        let reference = try await AACDecoderChoice.$current.withValue(.avcodec) { try await rendered(path) }
        let frames = reference.samples.count / reference.format.channelsPerFrame
        let output = Self.temporary(ext)
        defer { try? FileManager.default.removeItem(atPath: output) }
        let printed = try await Clients.run("atconvert", [path, output, codec], environment: ["AQ_OUTPUT": "null"])
        #expect(printed.contains("converted \(frames) frames of \(frames), ended at \(frames)"), "\(printed)")
        let written = try await AACDecoderChoice.$current.withValue(.avcodec) { try await rendered(output) }
        #expect(written.samples.count == reference.samples.count, "\(codec): \(written.samples.count) samples, \(reference.samples.count) in the source")
        switch codec {
        case "caf32":
            #expect(written.samples == reference.samples)
        case "alac", "wav16":
            let grid = reference.samples.map { Float(Int16(clamping: Int(($0 * 32768).rounded()))) / 32768 }
            let firstDifference = zip(written.samples, grid).enumerated().first { $0.element.0 != $0.element.1 }?.offset
            #expect(firstDifference == nil, "\(codec): differs from the 16-bit source at sample \(firstDifference ?? -1)")
        default:
            break
        }
        if codec != "aac", Where.tool("ffmpeg") != nil {
            let decoded = try await ffmpegFloats(output)
            #expect(decoded.count == reference.samples.count, "ffmpeg decodes \(decoded.count) samples of the \(codec) file")
        }
    }
}
