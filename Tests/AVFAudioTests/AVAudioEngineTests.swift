import AudioCodecs
import AudioFileStream
import AudioPlayback
import BufferQueue
import Foundation
import Testing
import TestSupport
import AVFAudio

/// `avengine`, a program written against Apple's AVFAudio only (Swift 6 mode), builds
/// AVAudioEngine graphs; each output is checked against the library's own graph (`AudioGraph`)
/// rendering the same thing, bit for bit where the path is lossless.
@Suite(.timeLimit(.minutes(3)))
struct AVAudioEngineTests {
    static var avengine: String { AVFAudioClientTests.directory.appendingPathComponent("avengine").path }
    static var built: Bool { FileManager.default.isExecutableFile(atPath: avengine) }

    /// The client's EQ as the library's bands: a bandwidth of 1 octave is a Q of √2.
    static let bands = [AudioEQBand(.parametric, frequency: 1000, gain: -6, q: 2.0.squareRoot()),
                        AudioEQBand(.highPass, frequency: 80, q: 0.5.squareRoot())]

    /// Renders `graph` to its end, 4096 frames at a time.
    static func renderAll(_ graph: AudioGraph) throws -> [Float] {
        var all: [Float] = []
        var block = [Float](repeating: 0, count: 4096 * graph.outputFormat.channelsPerFrame)
        while case let n = try block.withUnsafeMutableBufferPointer({ try graph.render(into: $0) }), n > 0 {
            all += block[0..<(n * graph.outputFormat.channelsPerFrame)]
        }
        return all
    }

    static func fileSource(_ path: String, sampleRate: Double? = nil, channels: Int? = nil) throws -> AudioPullSourceNode {
        try AudioPullSourceNode(name: path, source: AudioFileRenderer(file: AudioFile(path: path), sampleRate: sampleRate, channels: channels))
    }

    static func makeMP3(_ path: String, frames: Int) async throws {
        try await AVFAudioFileTests.make(path, frames: frames, codec: ["-c:a", "libmp3lame", "-b:a", "160k"])
    }

    @Test(.enabled(if: built, "avengine is not built beside the tests"))
    func anOfflineRendererMatchesTheGraphBitForBit() async throws {
        AudioCodecs.registerAll()
        let folder = try AVFAudioFileTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let input = folder + "/in.mp3", output = folder + "/out.wav", stretched = folder + "/stretched.wav"
        try await Self.makeMP3(input, frames: 70_000)
        let valid = try #require(AudioFileRenderer(file: AudioFile(path: input)).expectedFrames)

        let run = try await runTool(Self.avengine, ["render", input, output])
        let printed = String(decoding: run.output, as: UTF8.self)
        #expect(run.status == 0 && printed == "rendered \(valid) frames\n", "\(printed) \(String(decoding: run.errorOutput, as: UTF8.self))")

        // The same graph in the Swift API: the file's render → the equaliser → the main mixer.
        let graph = try AudioGraph(sampleRate: 44_100, channels: 2)
        let eq = try AudioEQNode(bands: Self.bands, sampleRate: 44_100, channels: 2)
        try graph.connect(Self.fileSource(input), to: eq)
        try graph.connect(eq, to: graph.mainMixer)
        let expected = try Self.renderAll(graph)
        #expect(expected.count == Int(valid) * 2)
        #expect(difference(try await AVFAudioFileTests.reference(output), expected) == nil)

        // With a time-pitch unit after the equaliser: round(N / 1.25) frames, as the graph's node gives them.
        let faster = try await runTool(Self.avengine, ["render", input, stretched, "1.25"])
        let length = Int((Double(valid) / 1.25).rounded())
        #expect(faster.status == 0 && String(decoding: faster.output, as: UTF8.self) == "rendered \(length) frames\n",
                "\(String(decoding: faster.output, as: UTF8.self)) \(String(decoding: faster.errorOutput, as: UTF8.self))")
        let reference = try AudioGraph(sampleRate: 44_100, channels: 2)
        let eq2 = try AudioEQNode(bands: Self.bands, sampleRate: 44_100, channels: 2)
        let stretch = try AudioTimePitchNode(rate: 1.25, sampleRate: 44_100, channels: 2)
        try reference.connect(Self.fileSource(input), to: eq2)
        try reference.connect(eq2, to: stretch)
        try reference.connect(stretch, to: reference.mainMixer)
        let stretchedExpected = try Self.renderAll(reference)
        let rendered = try await AVFAudioFileTests.reference(stretched)
        #expect(abs(stretchedExpected.count / 2 - length) <= 1_000, "the graph's time-pitch gave \(stretchedExpected.count / 2) frames for \(length)")
        // Exact until the input's end reaches the stretcher: there the graph's node aligns the end of
        // an input that ended, and the engine's goes on into the player's silence (a player never ends).
        let exact = min(rendered.count, stretchedExpected.count) - 4096 * 2
        #expect(difference(Array(rendered[0..<exact]), Array(stretchedExpected[0..<exact])) == nil)
    }

    @Test(.enabled(if: built, "avengine is not built beside the tests"))
    func aSegmentAndABufferJoinGaplesslyAndCompleteInOrder() async throws {
        let folder = try AVFAudioFileTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let input = folder + "/in.wav", output = folder + "/out.wav"
        try await AVFAudioFileTests.make(input, frames: 30_011, codec: ["-c:a", "pcm_s16le"])
        let run = try await runTool(Self.avengine, ["schedule", input, output])
        let printed = String(decoding: run.output, as: UTF8.self)
        // 31 011 frames rendered 1024 at a time: the last render began at 30 720.
        #expect(run.status == 0 && printed == "segment 1\nbuffer 2\nplayer time 30720 at node time 30720\nplaying false\n",
                "\(printed) \(String(decoding: run.errorOutput, as: UTF8.self))")
        let file = try await AVFAudioFileTests.reference(input)
        let rendered = try await AVFAudioFileTests.reference(output)
        #expect(rendered.count == (30_011 + 1_000) * 2)
        #expect(difference(Array(rendered.prefix(file.count)), file) == nil)
        #expect(rendered.dropFirst(file.count).allSatisfy { $0 == 0 })
    }

    @Test(.enabled(if: built, "avengine is not built beside the tests"))
    func aSourceNodeToneIsExactAndItsTapContiguous() async throws {
        let folder = try AVFAudioFileTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let output = folder + "/tone.wav"
        let run = try await runTool(Self.avengine, ["tone", output, "440", "1"])
        let printed = String(decoding: run.output, as: UTF8.self)
        #expect(run.status == 0 && printed == "rendered 48000 frames; tap 48000 frames from 0, contiguous true\n",
                "\(printed) \(String(decoding: run.errorOutput, as: UTF8.self))")
        let tone = try await AVFAudioFileTests.reference(output)
        let expected = (0..<48_000).map { Float(0.5 * sin(2 * Double.pi * 440 * Double($0) / 48_000)) }
        #expect(difference(tone, expected) == nil)
    }

    @Test(.enabled(if: built, "avengine is not built beside the tests"))
    func playersMixedInRealTimeManualRenderingMakeAnAACOfTheGraphsMix() async throws {
        AudioCodecs.registerAll()
        let folder = try AVFAudioFileTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let first = folder + "/a.wav", second = folder + "/b.mp3", output = folder + "/mix.m4a"
        try await AVFAudioFileTests.make(first, frames: 40_000, codec: ["-c:a", "pcm_s16le"])
        let made = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-f", "lavfi", "-i", "sine=frequency=550:sample_rate=48000:duration=1",
                                                          "-ac", "1", "-c:a", "libmp3lame", "-b:a", "96k", second])
        try #require(made.status == 0)
        let run = try await runTool(Self.avengine, ["mix", output, first, second])
        let printed = String(decoding: run.output, as: UTF8.self)
        let secondFrames = try #require(AudioFileRenderer(file: AudioFile(path: second)).expectedFrames)
        let longest = max(40_000, Int((Double(secondFrames) * 44_100 / 48_000).rounded()))
        #expect(run.status == 0 && printed == "mixed 2 inputs into \(longest) frames\n", "\(printed) \(String(decoding: run.errorOutput, as: UTF8.self))")

        // The graph's mix: a 48 kHz mono MP3 converted by the mixer, volumes ½, pans hard left and right.
        let graph = try AudioGraph(sampleRate: 44_100, channels: 2)
        let mixer = try AudioMixerNode(sampleRate: 44_100, channels: 2)
        try graph.connect(mixer, to: graph.mainMixer)
        try graph.connect(Self.fileSource(first), to: mixer, volume: 0.5, pan: -1)
        try graph.connect(Self.fileSource(second), to: mixer, volume: 0.5, pan: 1)
        let expected = try Self.renderAll(graph)
        #expect(expected.count == longest * 2)

        // Read back through AVAudioFile (gapless): the AAC holds exactly that many frames, close to the mix.
        let file = try AVAudioFile(forReading: URL(fileURLWithPath: output))
        #expect(file.length == AVAudioFramePosition(longest))
        let buffer = try #require(AVAudioPCMBuffer(pcmFormat: file.processingFormat, frameCapacity: AVAudioFrameCount(file.length)))
        try file.read(into: buffer)
        var signal = 0.0, noise = 0.0
        for frame in 0..<Int(buffer.frameLength) {
            for channel in 0..<2 {
                let want = Double(expected[frame * 2 + channel]), got = Double(buffer.floatChannelData![channel][frame])
                signal += want * want
                noise += (got - want) * (got - want)
            }
        }
        let snr = 10 * log10(signal / max(noise, 1e-20))
        #expect(snr > 20, "the AAC is \(snr) dB from the graph's mix")
    }

    @Test(.enabled(if: built && !PrivateServer.missing, "avengine or PulseAudio is missing"))
    func aPlayerPlaysBitForBitThroughPulseAudio() async throws {
        let folder = try AVFAudioFileTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/sound.wav"
        try await AVFAudioFileTests.make(path, frames: 30_011, codec: ["-c:a", "pcm_s16le"])
        let reference = trimSilence(try await AVFAudioFileTests.reference(path), channels: 2)
        let server = try await PrivateServer.start(rate: 44_100, channels: 2)
        defer { Task { await server.kill() } }
        try await server.startRecording()
        let run = try await runTool(Self.avengine, ["live", path], environment: server.environment(["AQ_OUTPUT": "pulse"]))
        let printed = String(decoding: run.output, as: UTF8.self)
        #expect(run.status == 0 && printed.hasPrefix("played back after ") && printed.hasSuffix("running true\n"),
                "\(printed) \(String(decoding: run.errorOutput, as: UTF8.self))")
        // Played back no earlier than its length (0.681 s).
        let seconds = printed.split(separator: " ").dropFirst(3).first.flatMap { Double($0) } ?? 0
        #expect(seconds >= 0.68, "\(printed)")
        // Only the silence before and after is cut: a gap inside would be a difference.
        let captured = trimSilence(await server.stopRecording(soundFrames: reference.count / 2), channels: 2)
        #expect(captured.count == reference.count, "\(captured.count / 2) frames between the first and last sound, \(reference.count / 2) in the file")
        #expect(difference(captured, reference) == nil)
    }

    /// The output moves when the user picks another default device: the engine posts
    /// `AVAudioEngineConfigurationChange`, and (unlike a Mac's) it plays on, on the new device.
    @Test(.enabled(if: built && !PrivateServer.missing, "avengine or PulseAudio is missing"))
    func aMoveOfTheOutputIsAConfigurationChange() async throws {
        let folder = try AVFAudioFileTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/sound.wav"
        try await AVFAudioFileTests.make(path, frames: 8_000, codec: ["-c:a", "pcm_s16le"])
        let server = try await PrivateServer.start(rate: 44_100, channels: 2)
        defer { Task { await server.kill() } }
        _ = try await server.addSink("two")
        let (lines, exit) = try startReadingLines(Self.avengine, ["follow", path], environment: server.environment(["AQ_OUTPUT": "pulse"]))
        #expect(await lines.wait(timeout: .seconds(20)) { $0.contains("playing") }, "\(lines.current)")
        try await server.startRecording(sink: "out")
        #expect(await server.waitForSound(frames: 4_410, sink: "out"))
        _ = await server.stopRecording(soundFrames: 1, sink: "out")
        try await server.pactl(["set-default-sink", "two"])
        #expect(await exit.wait(timeout: .seconds(40)) == 0)
        #expect(await lines.wait(timeout: .seconds(5)) { $0.contains("configuration changed; running true") }, "\(lines.current)")
    }

    /// A tap on the input node, converted to 16 kHz mono Int16 (a voice app's shape), while paplay
    /// plays a tone into a private server whose monitor is the input: exactly the frames asked, the
    /// tone in them.
    @Test(.enabled(if: built && !PrivateServer.missing && AVAudioRecorderTests.canPlay, "avengine, PulseAudio or paplay is missing"))
    func aMicrophoneTapConvertsTo16kHzInt16() async throws {
        let folder = try AVFAudioFileTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let server = try await PrivateServer.start(rate: 44100, channels: 2)
        defer { Task { await server.kill() } }
        let environment = server.environment(["AQ_INPUT": "pulse:out.monitor"])
        let tone = folder + "/tone.wav", path = folder + "/voice.wav"
        let made = try await runTool("/usr/bin/sox", ["-n", "-r", "44100", "-c", "2", "-b", "16", tone, "synth", "3", "sine", "440", "vol", "0.5"])
        try #require(made.status == 0)
        let (lines, exit) = try startReadingLines(Self.avengine, ["listen", path, "2"], environment: environment)
        #expect(await lines.wait(timeout: .seconds(10)) { $0.contains("listening at 44100 Hz, 2 ch") }, "\(lines.current)")
        let playing = try await runTool(AVAudioRecorderTests.paplay, [tone], environment: environment, timeout: .seconds(20))
        #expect(playing.status == 0, "\(String(decoding: playing.errorOutput, as: UTF8.self))")
        #expect(await exit.wait(timeout: .seconds(20)) == 0)
        #expect(await lines.wait(timeout: .seconds(5)) { $0.contains("file 32000 frames") }, "\(lines.current)")
        let probe = try await runTool("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,sample_rate,channels",
                                                           "-of", "csv=p=0", path])
        #expect(String(decoding: probe.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == "pcm_s16le,16000,1")
        let recorded = try await AVFAudioFileTests.reference(path)
        #expect(recorded.count == 32_000)
        let peak = recorded.map(abs).max() ?? 0
        #expect(peak > 0.45 && peak < 0.55, "the recording's peak is \(peak)")
    }

    /// `avseek`, a seeking file player written for a Mac in Swift 5 mode: its position around the
    /// seek is what `playerTime(forNodeTime:)` gives, and what it played is the FLAC up to the seek,
    /// then from the frame sought, exactly.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: AVFAudioClientTests.directory.appendingPathComponent("avseek").path),
                   "avseek is not built beside the tests"))
    func aSeekingPlayerPlaysWhatItSays() async throws {
        let folder = try AVFAudioFileTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let input = folder + "/in.flac", output = folder + "/out.wav"
        try await AVFAudioFileTests.make(input, frames: 50_000, codec: ["-c:a", "flac"])
        let run = try await runTool(AVFAudioClientTests.directory.appendingPathComponent("avseek").path, [input, output, "12345", "31000"])
        let printed = String(decoding: run.output, as: UTF8.self)
        #expect(run.status == 0 && printed == "before the seek at 12345\nafter the seek at 31001\nplayed 31345 frames\n",
                "\(printed) \(String(decoding: run.errorOutput, as: UTF8.self))")
        let file = try await AVFAudioFileTests.reference(input)
        let played = try await AVFAudioFileTests.reference(output)
        #expect(difference(played, Array(file[0..<(12_345 * 2)]) + Array(file[(31_000 * 2)...])) == nil)
    }

    /// Through a private PipeWire (48 kHz): the engine takes the device's rate, and a 48 kHz file
    /// plays bit for bit (pw-record records float32).
    @Test(.enabled(if: built && !PrivatePipeWire.missing, "avengine or PipeWire is missing"))
    func aPlayerPlaysBitForBitThroughPipeWire() async throws {
        let folder = try AVFAudioFileTests.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/sound.wav"
        let made = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-f", "lavfi", "-i", "sine=frequency=330:sample_rate=48000",
            "-f", "lavfi", "-i", "anoisesrc=color=white:amplitude=0.3:seed=5:sample_rate=48000",
            "-filter_complex", "[0][1]amerge=inputs=2,atrim=end_sample=24001", "-c:a", "pcm_s16le", path])
        try #require(made.status == 0)
        let reference = trimSilence(try await AVFAudioFileTests.reference(path), channels: 2)
        let server = try await PrivatePipeWire.start()
        defer { Task { await server.kill() } }
        try await server.startRecording()
        let run = try await runTool(Self.avengine, ["live", path], environment: server.environment.merging(["AQ_OUTPUT": "pipewire"]) { $1 })
        let printed = String(decoding: run.output, as: UTF8.self)
        #expect(run.status == 0 && printed.hasPrefix("played back after "), "\(printed) \(String(decoding: run.errorOutput, as: UTF8.self))")
        // Only the silence before and after is cut: a gap inside (a render that found nothing
        // decoded) would be a difference.
        let captured = trimSilence(await server.stopRecording(soundFrames: reference.count / 2), channels: 2)
        #expect(captured.count == reference.count, "\(captured.count / 2) frames between the first and last sound, \(reference.count / 2) in the file")
        #expect(difference(captured, reference) == nil)
    }
}
