internal import BufferQueue
internal import AudioCodecs
internal import PulseAudioSink
internal import ALSASink
package import AudioOutput
internal import PipeWireSink
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
/// - `pipewire` or `pipewire:TARGET` — PipeWire itself (for input, `TARGET.monitor` records
///   what the sink TARGET plays);
/// - `null` — the null device, paced in real time (`null:unpaced`: as fast as the queue decodes);
/// - `pulse` or `pulse:SINK` — PulseAudio (the default server, or `PULSE_SERVER`'s);
/// - `alsa` or `alsa:PCM` — ALSA (`default`, `hw:0,0`, or a PCM of `~/.asoundrc`).
/// Unset: for output the first of PipeWire, PulseAudio and ALSA that answers a probe
/// (AudioOutput's order), else the null device; for input PipeWire where it was found for
/// output, else PulseAudio when a server answers.
enum Device: Equatable {
    case null(unpaced: Bool)
    case pipeWire(String?)
    case pulse(String?)
    case alsa(String)

    init(_ output: AudioOutputDevice) {
        switch output {
        case .pipeWire(let target): self = .pipeWire(target)
        case .pulseAudio(let sink): self = .pulse(sink)
        case .alsa(let pcm): self = .alsa(pcm)
        case .null(let unpaced): self = .null(unpaced: unpaced)
        }
    }

    var outputDevice: AudioOutputDevice {
        switch self {
        case .pipeWire(let target): return .pipeWire(target: target)
        case .pulse(let sink): return .pulseAudio(sink: sink)
        case .alsa(let pcm): return .alsa(pcm: pcm)
        case .null(let unpaced): return .null(unpaced: unpaced)
        }
    }

    /// An input setting.
    init(inputSetting setting: String?) {
        guard let setting, !setting.isEmpty else {
            if case .pipeWire = Self.probedOutput { self = .pipeWire(nil) } else { self = Self.serverAnswers ? .pulse(nil) : .null(unpaced: false) }
            return
        }
        guard let named = try? AudioOutputChoice.choose(setting: setting).device else {
            FileHandle.standardError.write(Data("AudioToolbox: AQ_INPUT '\(setting)' is not null, pipewire, pulse[:name] or alsa[:pcm]; using the null device\n".utf8))
            self = .null(unpaced: false)
            return
        }
        self = Device(named)
    }

    /// Whether a PulseAudio server answers, asked once per process.
    private static let serverAnswers: Bool = PulseAudioSink.serverIsReachable()
    /// The output found by probing, asked once per process.
    static let probedOutput = AudioOutputChoice.probe().device

    static var output: Device {
        let setting = ProcessInfo.processInfo.environment["AQ_OUTPUT"]
        guard let setting, !setting.isEmpty else { return Device(probedOutput) }
        do { return Device(try AudioOutputChoice.choose(setting: setting).device) } catch {
            FileHandle.standardError.write(Data("AudioToolbox: AQ_OUTPUT: \(error); using the null device\n".utf8))
            return .null(unpaced: false)
        }
    }
    static var input: Device { Device(inputSetting: ProcessInfo.processInfo.environment["AQ_INPUT"]) }


    func makeSink() -> any AudioSink {
        outputDevice.makeSink(applicationName: Self.programName, streamName: Self.programName)
    }

    func makeSource() -> (any AudioSource)? {
        switch self {
        case .null: return nil
        case .pipeWire(let target):
            // TARGET.monitor: what the sink TARGET plays.
            let monitor = target?.hasSuffix(".monitor") == true
            return PipeWireSource(configuration: .init(target: monitor ? target.map { String($0.dropLast(".monitor".count)) } : target,
                                                       monitor: monitor, applicationName: Self.programName, streamName: Self.programName))
        case .pulse(let name):
            return PulseAudioSource(configuration: .init(device: name, applicationName: Self.programName, streamName: Self.programName))
        case .alsa:
            FileHandle.standardError.write(Data("AudioToolbox: recording from ALSA is not supported; recording from the null device\n".utf8))
            return nil
        }
    }

    static let programName = ProcessInfo.processInfo.processName
}

/// The output AudioToolbox's queues play through (`AQ_OUTPUT`, else the first that answers), and
/// its moves to another device, for the layers above that describe it (AVFAudio's session).
package enum OutputRoute {
    /// The output queues made now play through.
    package static var output: AudioOutputDevice { Device.output.outputDevice }

    private static let observers = Lock<[@Sendable (String) -> Void]>([])

    /// Calls `observer` with the new device's name each time a queue's output moves to another
    /// device (the default device changed), on the thread that reports the move.
    package static func observe(_ observer: @escaping @Sendable (String) -> Void) {
        observers.withLock { $0.append(observer) }
    }

    /// A queue's output moved to the device named `name`.
    package static func changed(to name: String) {
        for observer in observers.withLock({ $0 }) { observer(name) }
    }
}
