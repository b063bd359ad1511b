import Foundation
import Testing
import CodecTestSupport
import TestSupport

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
    let output = try await Clients.run(client, arguments, environment: [
        "AQ_OUTPUT": "pulse", "PULSE_SERVER": server.address, "HOME": server.runtime, "XDG_RUNTIME_DIR": server.runtime,
    ])
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
