import Foundation
import Testing
import AudioOutput
import BufferQueue
import TestSupport

/// The output is found by probing PipeWire, PulseAudio and ALSA in that order (real servers,
/// started here; aqplay run with each one's address), or named by a setting.
@Suite(.serialized, .enabled(if: !PrivatePipeWire.missing && !PrivateServer.missing, "PipeWire or PulseAudio is missing (make deps installs them): output choice tests skipped"))
struct OutputChoiceTests {
    static let aqplay = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        .appendingPathComponent("aqplay").path

    /// aqplay's account of its choice (`--verbose --list-devices`: it chooses, says why, lists
    /// the chosen output's devices and exits) with these servers' addresses and no ALSA card.
    func choice(pipeWire: String, pulse: String) async throws -> String {
        let emptyALSA = NSTemporaryDirectory() + "aq-alsa-empty-\(UUID().uuidString.prefix(8)).conf"
        try Data().write(to: URL(fileURLWithPath: emptyALSA))
        defer { try? FileManager.default.removeItem(atPath: emptyALSA) }
        let result = try await runTool(Self.aqplay, ["--verbose", "--list-devices"],
                                       environment: ["PIPEWIRE_REMOTE": pipeWire, "PULSE_SERVER": pulse, "ALSA_CONFIG_PATH": emptyALSA, "AQ_OUTPUT": ""],
                                       timeout: .seconds(30))
        #expect(result.status == 0, "\(String(decoding: result.errorOutput, as: UTF8.self))")
        return String(decoding: result.output, as: UTF8.self)
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: aqplay), "aqplay is not built beside the tests"))
    func pipeWireFirstThenPulseAudioThenTheNullSink() async throws {
        let pipeWire = try await PrivatePipeWire.start()
        let pulse = try await PrivateServer.start()
        let nowhere = pipeWire.runtime + "/nothing-listens-here"

        let both = try await choice(pipeWire: pipeWire.remote, pulse: pulse.address)
        #expect(both.contains("Output: PipeWire: a server answers and has an audio sink"), "\(both)")
        #expect(both.contains("* out"), "the private PipeWire's default sink is listed: \(both)")

        let onlyPulse = try await choice(pipeWire: nowhere, pulse: pulse.address)
        #expect(onlyPulse.contains("Output: PipeWire: not used: no PipeWire server at \(nowhere) (no socket there)"), "\(onlyPulse)")
        #expect(onlyPulse.contains("Output: PulseAudio: a server answers"), "\(onlyPulse)")

        let neither = try await choice(pipeWire: nowhere, pulse: "unix:" + nowhere)
        #expect(neither.contains("Output: PulseAudio: not used: no server answers"), "\(neither)")
        #expect(neither.contains("Output: ALSA: not used: ALSA could not open the PCM default"), "\(neither)")
        #expect(neither.contains("Output: the null sink: nothing else answers"), "\(neither)")
        await pulse.kill()
        await pipeWire.kill()
    }

    /// A PipeWire that runs but has no audio sink (no device, as where it serves screen sharing
    /// only) is passed over: installed and running is not serving audio.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: aqplay), "aqplay is not built beside the tests"))
    func aPipeWireWithoutAnAudioSinkIsPassedOver() async throws {
        let pipeWire = try await PrivatePipeWire.start(sinks: [])
        let pulse = try await PrivateServer.start()
        let said = try await choice(pipeWire: pipeWire.remote, pulse: pulse.address)
        #expect(said.contains("Output: PipeWire: not used: the PipeWire server at \(pipeWire.remote) has no audio sink"), "\(said)")
        #expect(said.contains("Output: PulseAudio: a server answers"), "\(said)")
        await pulse.kill()
        await pipeWire.kill()
    }

    /// `aqplay --sink pipewire --device out`: what the sink plays is the file, bit for bit, and
    /// `aqrecord --source pipewire --device out.monitor` records it as a float WAV, bit for bit.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: aqplay), "aqplay is not built beside the tests"))
    func aqplayAndAqrecordThroughPipeWire() async throws {
        let server = try await PrivatePipeWire.start()
        let samples = signal(frames: 24_000)
        let file = server.runtime + "/tone.wav", recorded = server.runtime + "/recorded.wav"
        try PipeWireSourceTests.floatWAV(samples, rate: 48000, channels: 2).write(to: URL(fileURLWithPath: file))
        try await server.startRecording()
        let aqrecord = URL(fileURLWithPath: Self.aqplay).deletingLastPathComponent().appendingPathComponent("aqrecord").path
        // aqrecord captures once its file holds a first buffer (0.1 s: it writes only what it captured).
        let capturing = Watched(false)
        let watcher = try DirectoryWatcher(server.runtime, everyWrite: true) { name in
            guard name == "recorded.wav" else { return }
            let size = (try? FileManager.default.attributesOfItem(atPath: recorded)[.size] as? Int) ?? 0
            if size > 38_400 { capturing.update { $0 = true } }
        }
        defer { watcher.stop() }
        let recording = Task {
            try await runTool(aqrecord, ["--source", "pipewire", "--device", "out.monitor", "--duration", "4", "--format", "f32", recorded],
                              environment: ["PIPEWIRE_REMOTE": server.remote], timeout: .seconds(30))
        }
        #expect(await capturing.wait(timeout: .seconds(15), until: { $0 }), "aqrecord wrote nothing")
        let played = try await runTool(Self.aqplay, ["--sink", "pipewire", "--device", "out", "--latency", "20", "--fade", "0", file],
                                       environment: ["PIPEWIRE_REMOTE": server.remote], timeout: .seconds(30))
        #expect(played.status == 0, "\(String(decoding: played.errorOutput, as: UTF8.self))")
        #expect(String(decoding: played.output, as: UTF8.self).contains("through PipeWire (out)"))
        let heard = trimSilence(await server.stopRecording(soundFrames: 24_000), channels: 2)
        #expect(difference(heard, samples) == nil)
        let wrote = try await recording.value
        #expect(wrote.status == 0, "\(String(decoding: wrote.errorOutput, as: UTF8.self))")
        let data = try Data(contentsOf: URL(fileURLWithPath: recorded))
        // The float WAV's samples after its header's data chunk.
        guard let chunk = data.range(of: Data("data".utf8)) else { Issue.record("no data chunk in \(recorded)"); return }
        let body = data[(chunk.upperBound + 4)...]
        let floats = body.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
        #expect(floats.count == 192_000 * 2, "exactly --duration's frames")
        #expect(difference(trimSilence(floats, channels: 2), samples) == nil)
    }

    @Test func settingsNameTheirOutput() throws {
        #expect(try AudioOutputChoice.choose(setting: "pipewire").device == .pipeWire(target: nil))
        #expect(try AudioOutputChoice.choose(setting: "pipewire:alsa_output.usb").device == .pipeWire(target: "alsa_output.usb"))
        #expect(try AudioOutputChoice.choose(setting: "pulse:out").device == .pulseAudio(sink: "out"))
        #expect(try AudioOutputChoice.choose(setting: "alsa").device == .alsa(pcm: "default"))
        #expect(try AudioOutputChoice.choose(setting: "alsa:hw:0,0").device == .alsa(pcm: "hw:0,0"))
        #expect(try AudioOutputChoice.choose(setting: "null:unpaced").device == .null(unpaced: true))
        #expect(throws: AudioQueueError.self) { try AudioOutputChoice.choose(setting: "jack") }
    }
}
