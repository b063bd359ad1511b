internal import BufferQueue
internal import AudioCodecs
internal import PulseAudioSink
internal import ALSASink
import Foundation

/// What every entry point needs before it runs: the decoders, encoders and resampler registered
/// once (libmpg123, libavcodec's AAC, opencore-amr, libopus, libvorbis, libFLAC, libsoxr: no GPL
/// library, so a program that imports only `AudioToolbox` stays LGPL).
enum Setup {
    private static let registered: Bool = {
        AudioCodecs.registerAll()
        return true
    }()

    static func once() { _ = registered }
}

/// Where a queue plays or records, from `AQ_OUTPUT` / `AQ_INPUT`:
/// - `null` — the null device, paced in real time (`null:unpaced`: as fast as the queue decodes);
/// - `pulse` or `pulse:SINK` — PulseAudio (the default server, or `PULSE_SERVER`'s);
/// - `alsa` or `alsa:PCM` — ALSA (`default`, `hw:0,0`, or a PCM of `~/.asoundrc`).
/// Unset: PulseAudio when a server answers, else the null device.
enum Device: Equatable {
    case null(unpaced: Bool)
    case pulse(String?)
    case alsa(String)

    init(setting: String?) {
        guard let setting, !setting.isEmpty else {
            self = Self.serverAnswers ? .pulse(nil) : .null(unpaced: false)
            return
        }
        let parts = setting.split(separator: ":", maxSplits: 1).map(String.init)
        let detail = parts.count > 1 ? parts[1] : nil
        switch parts[0].lowercased() {
        case "pulse", "pulseaudio": self = .pulse(detail)
        case "alsa": self = .alsa(detail ?? "default")
        case "null": self = .null(unpaced: detail == "unpaced")
        default:
            FileHandle.standardError.write(Data("AudioToolbox: AQ_OUTPUT/AQ_INPUT '\(setting)' is not null, pulse[:name] or alsa[:pcm]; using the null device\n".utf8))
            self = .null(unpaced: false)
        }
    }

    /// Whether a PulseAudio server answers, asked once per process.
    private static let serverAnswers: Bool = PulseAudioSink.serverIsReachable()

    static var output: Device { Device(setting: ProcessInfo.processInfo.environment["AQ_OUTPUT"]) }
    static var input: Device { Device(setting: ProcessInfo.processInfo.environment["AQ_INPUT"]) }

    func makeSink() -> any AudioSink {
        switch self {
        case .null(let unpaced): return NullSink(pacing: unpaced ? .unpaced : .realTime)
        case .pulse(let name):
            return PulseAudioSink(configuration: .init(device: name, applicationName: Self.programName, streamName: Self.programName))
        case .alsa(let pcm): return ALSASink(configuration: .init(device: pcm))
        }
    }

    func makeSource() -> (any AudioSource)? {
        switch self {
        case .null: return nil
        case .pulse(let name):
            return PulseAudioSource(configuration: .init(device: name, applicationName: Self.programName, streamName: Self.programName))
        case .alsa:
            FileHandle.standardError.write(Data("AudioToolbox: recording from ALSA is not supported; recording from the null device\n".utf8))
            return nil
        }
    }

    static let programName = ProcessInfo.processInfo.processName
}
