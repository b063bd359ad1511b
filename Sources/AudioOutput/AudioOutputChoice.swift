import BufferQueue
import ALSASink
import PipeWireSink
import PulseAudioSink

/// An output a program can play through.
public enum AudioOutputDevice: Sendable, Hashable, CustomStringConvertible {
    /// PipeWire itself; `target` pins the stream to a node (nil: the default sink, followed).
    case pipeWire(target: String?)
    /// PulseAudio (or PipeWire's PulseAudio layer); `sink` nil: the server's default.
    case pulseAudio(sink: String?)
    /// An ALSA PCM (`default`, `hw:0,0`, a PCM of `~/.asoundrc`).
    case alsa(pcm: String)
    /// The null sink, paced in real time or (`unpaced`) as fast as the queue decodes.
    case null(unpaced: Bool)

    public var description: String {
        switch self {
        case .pipeWire(let target): return "PipeWire" + (target.map { " (\($0))" } ?? "")
        case .pulseAudio(let sink): return "PulseAudio" + (sink.map { " (\($0))" } ?? "")
        case .alsa(let pcm): return "ALSA (\(pcm))"
        case .null(let unpaced): return unpaced ? "the unpaced null sink" : "the null sink"
        }
    }

    /// A sink for this output.
    /// - Parameters:
    ///   - applicationName: the program's name, as the sound server shows it.
    ///   - streamName: the stream's name (what is playing), as the sound server shows it.
    ///   - latency: the target latency (nil: each sink's default).
    public func makeSink(applicationName: String, streamName: String, latency: Duration? = nil) -> any AudioSink {
        switch self {
        case .pipeWire(let target):
            var configuration = PipeWireSink.Configuration(target: target, applicationName: applicationName, streamName: streamName)
            if let latency { configuration.targetLatency = latency }
            return PipeWireSink(configuration: configuration)
        case .pulseAudio(let sink):
            var configuration = PulseAudioSink.Configuration(device: sink, applicationName: applicationName, streamName: streamName)
            if let latency { configuration.targetLatency = latency }
            return PulseAudioSink(configuration: configuration)
        case .alsa(let pcm):
            var configuration = ALSASink.Configuration(device: pcm)
            if let latency { configuration.targetLatency = latency }
            return ALSASink(configuration: configuration)
        case .null(let unpaced):
            return NullSink(pacing: unpaced ? .unpaced : .realTime)
        }
    }
}

/// Which output to play through, and why: named by a setting (`AQ_OUTPUT`, a `--sink` option)
/// or found by probing PipeWire, PulseAudio, ALSA and the null sink in that order — each one
/// asked, not assumed from what is installed: a PipeWire that runs without an audio sink, a
/// PulseAudio socket with no server behind it, an ALSA `default` with no card are passed over.
public struct AudioOutputChoice: Sendable {
    /// The output chosen.
    public var device: AudioOutputDevice
    /// Why: each output probed before it, with why it was not used, then why this one was.
    public var explanation: [String]

    /// The output a setting names, or (nil or empty) the first that answers a probe.
    ///
    /// Settings: `pipewire` or `pipewire:TARGET`, `pulse` or `pulse:SINK`, `alsa` or `alsa:PCM`,
    /// `null` or `null:unpaced`. (`pulseaudio` and `pw` are taken too.)
    /// - Parameters:
    ///   - setting: the setting (nil or empty: probe).
    ///   - timeout: how long each server may take to answer its probe.
    /// - Throws: ``/BufferQueue/AudioQueueError`` naming the setting when it names no output.
    public static func choose(setting: String?, timeout: Duration = .milliseconds(500)) throws -> AudioOutputChoice {
        guard let setting, !setting.isEmpty else { return probe(timeout: timeout) }
        let parts = setting.split(separator: ":", maxSplits: 1).map(String.init)
        let detail = parts.count > 1 && !parts[1].isEmpty ? parts[1] : nil
        let device: AudioOutputDevice
        switch parts[0].lowercased() {
        case "pipewire", "pw": device = .pipeWire(target: detail)
        case "pulse", "pulseaudio": device = .pulseAudio(sink: detail)
        case "alsa": device = .alsa(pcm: detail ?? "default")
        case "null": device = .null(unpaced: detail == "unpaced")
        default:
            throw AudioQueueError(.invalidPropertyValue, "the output '\(setting)' is not pipewire[:target], pulse[:sink], alsa[:pcm] or null[:unpaced]")
        }
        return AudioOutputChoice(device: device, explanation: ["\(device): as asked (\(setting))"])
    }

    /// The first of PipeWire, PulseAudio, ALSA's `default` that answers, else the null sink.
    public static func probe(timeout: Duration = .milliseconds(500)) -> AudioOutputChoice {
        var explanation: [String] = []
        switch PipeWireSink.probe(timeout: timeout) {
        case .success: return AudioOutputChoice(device: .pipeWire(target: nil), explanation: ["PipeWire: a server answers and has an audio sink"])
        case .failure(let error): explanation.append("PipeWire: not used: \(error.message)")
        }
        if PulseAudioSink.serverIsReachable() {
            return AudioOutputChoice(device: .pulseAudio(sink: nil), explanation: explanation + ["PulseAudio: a server answers"])
        }
        explanation.append("PulseAudio: not used: no server answers")
        switch ALSASink.probe(device: "default") {
        case .success: return AudioOutputChoice(device: .alsa(pcm: "default"), explanation: explanation + ["ALSA: the PCM default opens"])
        case .failure(let error): explanation.append("ALSA: not used: \(error.message)")
        }
        return AudioOutputChoice(device: .null(unpaced: false), explanation: explanation + ["the null sink: nothing else answers (nothing is heard)"])
    }

    /// The output `AQ_OUTPUT` names, or the first that answers; a setting that names no output
    /// is reported in the explanation and probing decides.
    public static func fromEnvironment(variable: String = "AQ_OUTPUT", timeout: Duration = .milliseconds(500)) -> AudioOutputChoice {
        let setting = getenv(variable).map { String(cString: $0) }
        do { return try choose(setting: setting, timeout: timeout) } catch {
            var choice = probe(timeout: timeout)
            choice.explanation.insert("\(variable): \(error)", at: 0)
            return choice
        }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension AudioOutputDevice {
    /// The device this output plays to, as its server lists it (name, description, rate,
    /// channels): the named target, sink or PCM, else the server's default; nil for the null sink
    /// and when the server cannot be asked.
    /// - Parameters:
    ///   - pipeWireRemote: the PipeWire server to ask (nil: the default, `PIPEWIRE_REMOTE`).
    ///   - pulseServer: the PulseAudio server to ask (nil: the default, `PULSE_SERVER`).
    public func playbackDevice(pipeWireRemote: String? = nil, pulseServer: String? = nil) -> AudioDeviceInfo? {
        func pick(_ devices: [AudioDeviceInfo], _ name: String?) -> AudioDeviceInfo? {
            if let name { return devices.first { $0.name == name } }
            return devices.first { $0.isDefault } ?? devices.first
        }
        switch self {
        case .pipeWire(let target):
            return (try? PipeWireSink.devices(remote: pipeWireRemote)).flatMap { pick($0, target) }
        case .pulseAudio(let sink):
            return (try? PulseAudioSink.devices(server: pulseServer)).flatMap { pick($0, sink) }
        case .alsa(let pcm):
            return pick(ALSASink.devices(), pcm) ?? AudioDeviceInfo(name: pcm, description: "ALSA PCM \(pcm)")
        case .null:
            return nil
        }
    }

    /// The devices this output's server records from (its sources; a PulseAudio server's sinks'
    /// monitors too), with the default marked; none for ALSA (recording from ALSA is not done
    /// here) and the null device.
    /// - Parameters:
    ///   - pipeWireRemote: the PipeWire server to ask (nil: the default, `PIPEWIRE_REMOTE`).
    ///   - pulseServer: the PulseAudio server to ask (nil: the default, `PULSE_SERVER`).
    public func recordingDevices(pipeWireRemote: String? = nil, pulseServer: String? = nil) -> [AudioDeviceInfo] {
        switch self {
        case .pipeWire: return (try? PipeWireSource.devices(remote: pipeWireRemote)) ?? []
        case .pulseAudio: return (try? PulseAudioSource.devices(server: pulseServer)) ?? []
        case .alsa, .null: return []
        }
    }

    /// The device a recording from this input takes: the one it names (its `sink` or `target`
    /// is then a source's name), else the server's default source; nil when there is none.
    public func recordingDevice(pipeWireRemote: String? = nil, pulseServer: String? = nil) -> AudioDeviceInfo? {
        recordingDevice(among: recordingDevices(pipeWireRemote: pipeWireRemote, pulseServer: pulseServer))
    }

    /// Of `devices` (this input's server's, as ``recordingDevices(pipeWireRemote:pulseServer:)``
    /// lists them), the one a recording takes: the one it names, else the default.
    public func recordingDevice(among devices: [AudioDeviceInfo]) -> AudioDeviceInfo? {
        let named: String?
        switch self {
        case .pipeWire(let target): named = target
        case .pulseAudio(let source): named = source
        case .alsa, .null: return nil
        }
        if let named { return devices.first { $0.name == named } }
        return devices.first { $0.isDefault } ?? devices.first
    }

    /// The same output pinned to the device named `name` (the null sink stays itself).
    public func pinned(to name: String) -> AudioOutputDevice {
        switch self {
        case .pipeWire: .pipeWire(target: name)
        case .pulseAudio: .pulseAudio(sink: name)
        case .alsa: .alsa(pcm: name)
        case .null: self
        }
    }

    /// The latency a sink of this output aims for when none is asked (each sink's default).
    public var defaultLatency: Duration {
        switch self {
        case .pipeWire: PipeWireSink.Configuration().targetLatency
        case .pulseAudio: PulseAudioSink.Configuration().targetLatency
        case .alsa: ALSASink.Configuration().targetLatency
        case .null: .zero   // the null sink's default: it plays at once
        }
    }
}
