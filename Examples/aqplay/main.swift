// aqplay: plays files in order, gaplessly, through PipeWire, PulseAudio, ALSA (or the null sink).
import ArgumentParser
import AudioFileStream
import AudioPlayback
import AudioStreaming
import BufferQueue
import AudioCodecsGPL
import ExampleOptions
import Dispatch
import Foundation
import ALSASink
import AudioOutput
import PipeWireSink
import PulseAudioSink

@main
struct AQPlay: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "aqplay",
        abstract: "Play audio files in order, gaplessly, through PipeWire, PulseAudio, ALSA or the null sink.",
        discussion: """
            With no input it plays the short sample in Fixtures/ (the repository's demo).

            Exit status: 0 when every item played; 2 when some were skipped (they could not be \
            opened or read: the others played, each skip is reported); 1 when nothing could play \
            (or the output failed, or the arguments were wrong); 128 + the signal's number after \
            Ctrl-C (130) or SIGTERM (143).

            --events writes one JSON object per line on standard output, per item in this order: \
            {"event": "opened", "item": I, "name": …, "sampleRate": …, "channels": …}, \
            {"event": "warning", "item": I, "message": …}, \
            {"event": "started", "item": I, "outputFrame": F, "gain": DB}, \
            {"event": "finished", "item": I} — or {"event": "skipped", "item": I, "error": …}; \
            then {"event": "loudness", "integrated": LUFS, "range": LU, "truePeak": DBTP} with \
            --loudness, and last {"event": "end", "framesPlayed": N, "itemsPlayed": N, "skipped": N}. \
            I is the item's place in the list (from 0); F the output frame its first frame plays at; \
            DB the gain applied to it (ReplayGain and --volume aside).
            """)

    enum SinkChoice: String, ExpressibleByArgument, CaseIterable { case pipewire, pulse, alsa, null }

    @Argument(help: "Audio files (MP3, AAC, ALAC, AMR, IMA4, G.711 or PCM in MP3/ADTS/MP4/CAF/WAV/AIFF/AMR/MPEG-TS), or http(s):// URLs of them, of live streams or of HLS playlists (.m3u8).")
    var inputs: [String] = []
    @Option(help: "pipewire, pulse, alsa or null; default: AQ_OUTPUT (pipewire[:target], pulse[:sink], alsa[:pcm], null), else the first of PipeWire, PulseAudio and ALSA that answers, else null (--verbose says why).")
    var sink: SinkChoice?
    @Option(help: "The device: a PipeWire node name, a PulseAudio sink name, or an ALSA PCM (default, hw:0,0, plughw:1...) with --sink alsa.")
    var device: String?
    @Flag(help: "List the devices of the chosen sink (PipeWire's or PulseAudio's sinks, or ALSA's PCMs with --sink alsa) and exit.")
    var listDevices = false
    @Option(help: "Play the list this many times.")
    var loops: Int = 1
    @Option(help: "Volume, 0...1.")
    var volume: Float = 1
    @Option(help: "The sink's target latency in milliseconds (PipeWire, PulseAudio, ALSA): lower reacts sooner, wakes more often.")
    var latency: Int = 200
    @Option(help: "Start this many seconds into the first file (frame-exact).")
    var seek: Double = 0
    @Option(help: "Write exactly the frames handed to the sink to this float32 WAV file.")
    var record: String?
    @Flag(help: "Use the null sink, unpaced: as fast as decoding goes.")
    var fast = false
    @Option(help: "Keep what is fetched from URLs in this folder and play from it when it holds the bytes (HLS VOD segments too).")
    var cache: String?
    @Option(help: "The cache's size cap in megabytes (least recently used resources are evicted).")
    var cacheSize: Int64 = 1024
    @Flag(help: "Say which output was chosen and why the others were not, and how the sink's render thread is scheduled (real-time where the system allows it).")
    var verbose = false

    @OptionGroup var timePitchOptions: TimePitchOptions
    @Option(name: .customLong("eq"), help: ArgumentHelp(stringLiteral: EQOption.help + " Bands must be below 22050 Hz (checked at 44.1 kHz; output rates are at least that for music)."))
    var eq: [EQOption] = []
    @Option(help: "Join items with a crossfade of this many seconds (at natural ends and on skip; 0: gapless, bit for bit).")
    var crossfade: Double = 0
    @Option(help: "Milliseconds of the fade out and in at a stop (Ctrl-C) or any pause or seek, so the sound does not end with a click (0...100; 0: none, the frames exactly as decoded).")
    var fade: Double = 10
    @Option(help: "The crossfade's curve: linear or equal-power.")
    var crossfadeCurve: AudioFadeCurve = .equalPower
    @Option(help: "Apply each item's ReplayGain tags (Opus: R128 tags): off (the default), track, album (the track's gain where there is no album gain), or auto (album among items of the same album, track otherwise). The tagged peak is kept at or under full scale.")
    var replaygain: ReplayGainSettings.Mode = .off
    @Option(parsing: .unconditional, help: "With --replaygain: dB added to every tagged gain.")
    var preamp: Double = 0
    @Flag(help: "Write what happens to each item as JSON Lines on standard output (see below); the status line and the summary go to standard error.")
    var events = false
    @Flag(help: "Meter what is played (after gains, crossfades, volume and --eq) and say its loudness at the end: integrated (LUFS), range (LU) and true peak (dBTP).")
    var loudness = false

    func validate() throws {
        guard loops >= 1 else { throw ValidationError("--loops must be at least 1") }
        guard (0...1).contains(volume) else { throw ValidationError("--volume must be in 0...1") }
        guard seek >= 0 else { throw ValidationError("--seek must not be negative") }
        guard (5...2000).contains(latency) else { throw ValidationError("--latency must be in 5...2000 ms") }
        guard cacheSize > 0 else { throw ValidationError("--cache-size must be positive") }
        guard crossfade.isFinite, (0...60).contains(crossfade) else { throw ValidationError("--crossfade must be in 0...60 seconds") }
        guard fade.isFinite, (0...100).contains(fade) else { throw ValidationError("--fade must be in 0...100 ms") }
        guard preamp.isFinite, (-30...30).contains(preamp) else { throw ValidationError("--preamp must be in -30...30 dB") }
        do { try AudioEqualizer(bands: eq.map(\.band)).validate(sampleRate: 44_100) } catch { throw ValidationError("--eq: \(error)") }
    }

    func run() throws {
        // Every codec this program links; libavcodec's AAC decoder ahead of libfaad2's, as in aqrender:
        // what aqrender writes is what aqplay plays, to the bit (the two differ on noise substitution).
        AudioCodecsGPL.registerAll(aac: .libavcodec)
        var paths = inputs
        if paths.isEmpty {
            let demo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("Fixtures/demo-melody.m4a").path
            paths = [FileManager.default.fileExists(atPath: demo) ? demo : "Fixtures/demo-melody.m4a"]
        }
        let output: AudioOutputDevice
        let explanation: [String]
        if fast {
            (output, explanation) = (.null(unpaced: true), ["the unpaced null sink: --fast"])
        } else if let sink {
            let named = try AudioOutputChoice.choose(setting: sink.rawValue + (device.map { ":" + $0 } ?? ""))
            (output, explanation) = (named.device, named.explanation)
        } else {
            var chosen = AudioOutputChoice.fromEnvironment()
            // --device names a device of the output found.
            if let device {
                switch chosen.device {
                case .pipeWire: chosen.device = .pipeWire(target: device)
                case .pulseAudio: chosen.device = .pulseAudio(sink: device)
                case .alsa: chosen.device = .alsa(pcm: device)
                case .null: break
                }
            }
            (output, explanation) = (chosen.device, chosen.explanation)
            if case .null = output, !verbose, !listDevices {
                FileHandle.standardError.write(Data("aqplay: no PipeWire, PulseAudio or ALSA output answers; playing through the null sink (--verbose says why)\n".utf8))
            }
        }
        if verbose { for line in explanation { print("Output: \(line)") } }
        if listDevices {
            let devices: [AudioDeviceInfo]
            switch output {
            case .pipeWire: devices = try PipeWireSink.devices()
            case .alsa: devices = ALSASink.devices()
            case .pulseAudio: devices = try PulseAudioSink.devices()
            case .null: devices = [AudioDeviceInfo(name: "null", description: "the null sink: nothing is heard", isDefault: true)]
            }
            for device in devices {
                let details = device.sampleRate > 0 ? "; \(Int(device.sampleRate)) Hz, \(device.channels) ch" : ""
                print("\(device.isDefault ? "*" : " ") \(device.name)  (\(device.description)\(details))")
            }
            return
        }
        let writer = Recorder(path: record)
        // A file player needs no 50 ms latency; 200 ms (the default) means fewer wake-ups.
        let latency = Duration.milliseconds(self.latency)
        // The sinks made, for --verbose.
        let sinks = Lock<[any AudioSink]>([])
        let makeSink: @Sendable () -> any AudioSink = {
            let sink = output.makeSink(applicationName: "aqplay", streamName: "aqplay", latency: latency)
            sinks.withLock { $0.append(sink) }
            return sink
        }
        var recording: (@Sendable (UnsafeBufferPointer<Float>, AudioStreamDescription) -> Void)?
        if record != nil { recording = { samples, format in writer.write(samples, format) } }
        var http = HTTPStreamConfiguration()
        if let cache {
            do { http.cache = try AudioDiskCache(directory: cache, capacity: cacheSize << 20) } catch {
                throw ValidationError("--cache \(cache): \(error.localizedDescription)")
            }
        }
        let items: [AudioPlayerItem]
        // A cue sheet's tracks are items of their own (the album gapless, seeks by track).
        do {
            items = try paths.flatMap { path -> [AudioPlayerItem] in
                AudioSniffer.pathExtension(of: path) == "cue" && !path.contains("://")
                    ? try AudioPlayerItem.tracks(ofCueSheet: path) : [try AudioPlayerItem.location(path, configuration: http)]
            }
        } catch {
            throw ValidationError("\(error)")
        }
        let algorithm = timePitchOptions.requested
        let names = items.map(\.name)
        let json = events
        // Everything the player does, in one value (what is not set keeps its default).
        var configuration = AudioPlayer.Configuration(loops: loops, startSeconds: seek, volume: volume, record: recording)
        configuration.crossfade = crossfade > 0 ? try AudioPlayerCrossfade(seconds: crossfade, curve: crossfadeCurve) : nil
        configuration.transitionFade = fade / 1000
        configuration.replayGain = replaygain == .off ? nil : ReplayGainSettings(mode: replaygain, preamp: preamp)
        configuration.effects = eq.isEmpty ? [] : [.init(position: .postEffects, callback: AudioEqualizer(bands: eq.map(\.band)).processingTapCallback)]
        configuration.timePitch = algorithm
        configuration.playRate = Float(timePitchOptions.rate ?? 1)
        configuration.pitch = Float(timePitchOptions.pitch ?? 0)
        configuration.onEvent = { event in
            if json, let line = JSONLine(event, names: names) { line.write() }
            // Stream events on their own line (the status line is redrawn after them).
            switch event {
            case .streamTitle(let title, _): FileHandle.standardError.write(Data("\naqplay: now playing: \(title)\n".utf8))
            case .property(let name, let value, _): FileHandle.standardError.write(Data("aqplay: \(name): \(value)\n".utf8))
            case .state(.reconnecting): FileHandle.standardError.write(Data("\naqplay: connection lost, reconnecting\n".utf8))
            case .itemWarning(let index, _, let text):
                // A file's warnings name it already; a stream's do not.
                let name = names.indices.contains(index) ? names[index] : "item \(index + 1)"
                let where_ = text.hasPrefix(name + ": ") ? "" : name + ": "
                FileHandle.standardError.write(Data("\naqplay: warning: \(where_)\(text)\n".utf8))
            case .itemState(_, _, .failed(let error)):
                FileHandle.standardError.write(Data("\naqplay: \(error) — skipped\n".utf8))
            case .crossfadeShortened(let index, _, let frames, _):
                let name = names.indices.contains(index) ? (names[index] as NSString).lastPathComponent : "item \(index + 1)"
                FileHandle.standardError.write(Data("\naqplay: the crossfade into \(name) is \(frames) frames: an item is shorter than --crossfade\n".utf8))
            default: break
            }
        }
        let player = AudioPlayer(items: items, configuration: configuration, makeSink: makeSink)

        writer.takeChannelLayout { [weak player] in player?.channelLayout }
        // Ctrl-C or SIGTERM: stop at once, finish the --record file, exit 130 or 143.
        // (A parent may have left them blocked: a process started from a Swift program is.)
        var unblock = sigset_t()
        sigemptyset(&unblock)
        sigaddset(&unblock, SIGINT)
        sigaddset(&unblock, SIGTERM)
        pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
        let interrupted = InterruptFlag()
        let interrupts = [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { interrupted.set(number); player.stop() }
            source.resume()
            return source
        }

        // A status line on a terminal.
        // (A dispatch source that was never activated must not be released: make it only when used.)
        let status: DispatchSourceTimer? = isatty(1) != 0 && !events ? DispatchSource.makeTimerSource(queue: .global()) : nil
        if let status {
            status.schedule(deadline: .now() + .milliseconds(250), repeating: .milliseconds(250))
            status.setEventHandler {
                let s = player.status
                let name = s.title ?? (s.itemIndex.map { (paths[$0] as NSString).lastPathComponent } ?? "")
                let line = "\r\u{1B}[K▶ \(clock(s.position)) / \(s.duration > 0 ? (s.durationIsEstimated ? "~" : "") + clock(s.duration) : "live")  \(name)  "
                    + "[\(player.playerState) · buffered \(String(format: "%.1f", s.buffered)) s]"
                FileHandle.standardOutput.write(Data(line.utf8))
            }
            status.resume()
        }
        let meter = loudness ? player.installLoudnessMeter() : nil
        let started = ContinuousClock.now
        let report: AudioPlayer.Report
        do { report = try player.run() } catch {
            status?.cancel()
            if let recordError = writer.close() { FileHandle.standardError.write(Data("\naqplay: --record: \(recordError)".utf8)) }
            FileHandle.standardError.write(Data("\naqplay: \(error)\n".utf8))
            if events { JSONLine(["event": .text("end"), "framesPlayed": .integer(0), "itemsPlayed": .integer(0), "error": .text("\(error)")]).write() }
            throw ExitCode(1)
        }
        status?.cancel()
        interrupts.forEach { $0.cancel() }
        let recordError = writer.close()
        if isatty(1) != 0 && !events { print("") }
        if let recordError {
            FileHandle.standardError.write(Data("aqplay: --record: \(recordError)\n".utf8))
            throw ExitCode(1)
        }
        if let number = interrupted.signal { throw ExitCode(128 + number) }
        if verbose {
            let scheduling = sinks.withLock { $0.compactMap(\.renderThreadScheduling) }
            print("The sink's render thread: \(scheduling.first.map(String.init(describing:)) ?? "the null sink's timer (no thread of its own)")")
        }
        let summary = "Played \(report.framesPlayed) frames through \(output) in \(String(format: "%.2f", (ContinuousClock.now - started) / .seconds(1))) s"
        if let meter {
            let reading = meter.reading
            if events {
                JSONLine(["event": .text("loudness"), "integrated": .number(reading.integrated), "range": .number(reading.range),
                          "truePeak": .number(reading.truePeak)]).write()
            } else {
                print(String(format: "Loudness of what played: %.2f LUFS integrated, %.2f LU range, %.2f dBTP true peak",
                             reading.integrated, reading.range, reading.truePeak))
            }
        }
        if events {
            JSONLine(["event": .text("end"), "framesPlayed": .integer(report.framesPlayed), "itemsPlayed": .integer(Int64(report.itemsPlayed)),
                      "skipped": .integer(Int64(report.skipped.count))]).write()
            FileHandle.standardError.write(Data((summary + "\n").utf8))
        } else {
            print(summary)
        }
        // As mpv does: an item that could not be played makes the exit status 2.
        if !report.skipped.isEmpty {
            let count = items.count
            FileHandle.standardError.write(Data("aqplay: \(report.skipped.count) of \(count) item\(count == 1 ? "" : "s") could not be played\n".utf8))
            throw ExitCode(2)
        }
    }
}

/// One line of --events: a JSON object whose keys keep their order ("event" first).
struct JSONLine {
    enum Value {
        case text(String), integer(Int64), number(Double)
        var json: String {
            switch self {
            case .integer(let value): return "\(value)"
            // JSON has no infinities: -infinity (silence, a gain of 0) is null.
            case .number(let value): return value.isFinite ? String(format: "%.4f", value) : "null"
            case .text(let text):
                var out = "\""
                for scalar in text.unicodeScalars {
                    switch scalar {
                    case "\"": out += "\\\""
                    case "\\": out += "\\\\"
                    case "\n": out += "\\n"
                    case "\r": out += "\\r"
                    case "\t": out += "\\t"
                    case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
                    default: out.unicodeScalars.append(scalar)
                    }
                }
                return out + "\""
            }
        }
    }
    let fields: KeyValuePairs<String, Value>

    init(_ fields: KeyValuePairs<String, Value>) { self.fields = fields }

    /// The line for a player event (nil for the events --events does not write).
    init?(_ event: AudioPlayerEvent, names: [String]) {
        func name(_ index: Int) -> Value { .text(names.indices.contains(index) ? names[index] : "item \(index)") }
        switch event {
        case let .itemOpened(index, _, format, metadata):
            fields = ["event": .text("opened"), "item": .integer(Int64(index)), "name": name(index), "sampleRate": .number(format.sampleRate),
                      "channels": .integer(Int64(format.channelsPerFrame)), "title": .text(metadata?.title ?? "")]
        case let .itemStarted(index, _, frame, gain):
            fields = ["event": .text("started"), "item": .integer(Int64(index)), "name": name(index), "outputFrame": .integer(frame), "gain": .number(gain)]
        case let .itemState(index, _, .finished):
            fields = ["event": .text("finished"), "item": .integer(Int64(index)), "name": name(index)]
        case let .itemSkipped(index, _, error):
            fields = ["event": .text("skipped"), "item": .integer(Int64(index)), "name": name(index), "error": .text("\(error)")]
        case let .itemWarning(index, _, text):
            fields = ["event": .text("warning"), "item": .integer(Int64(index)), "name": name(index), "message": .text(text)]
        case let .crossfadeShortened(index, _, frames, requested):
            fields = ["event": .text("crossfadeShortened"), "item": .integer(Int64(index)), "frames": .integer(Int64(frames)),
                      "requested": .integer(Int64(requested))]
        default:
            return nil
        }
    }

    func write() {
        let text = "{" + fields.map { "\(Value.text($0.key).json): \($0.value.json)" }.joined(separator: ", ") + "}\n"
        FileHandle.standardOutput.write(Data(text.utf8))
    }
}

func clock(_ seconds: Double) -> String {
    String(format: "%d:%04.1f", Int(seconds) / 60, seconds.truncatingRemainder(dividingBy: 60))
}

/// The first signal that stopped playback.
final class InterruptFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Int32?
    func set(_ number: Int32) { lock.lock(); value = value ?? number; lock.unlock() }
    var signal: Int32? { lock.lock(); defer { lock.unlock() }; return value }
}

/// The --record file, opened at the first frames (their format decides the header). The first
/// error creating or writing it is kept, and nothing more is written after it.
final class Recorder: @unchecked Sendable {
    let path: String?
    private let lock = NSLock()
    private var writer: WAVFileWriter?
    private var error: (any Error)?
    /// The speakers of the channels (the player's, once it plays): more than two are written in
    /// WAVE's order with a channel mask.
    private var channelLayout: @Sendable () -> AudioChannelLayout? = { nil }
    func takeChannelLayout(from source: @escaping @Sendable () -> AudioChannelLayout?) {
        lock.lock(); defer { lock.unlock() }
        channelLayout = source
    }
    init(path: String?) { self.path = path }
    func write(_ samples: UnsafeBufferPointer<Float>, _ format: AudioStreamDescription) {
        lock.lock(); defer { lock.unlock() }
        guard let path, error == nil else { return }
        do {
            if writer == nil {
                writer = try WAVFileWriter(path: path, sampleRate: Int(format.sampleRate), channels: format.channelsPerFrame,
                                           channelLayout: channelLayout())
            }
            try writer?.write(samples)
        } catch {
            self.error = error
        }
    }
    /// Closes the file; the first error creating, writing or closing it, if any.
    func close() -> (any Error)? {
        lock.lock(); defer { lock.unlock() }
        do { try writer?.close() } catch { if self.error == nil { self.error = error } }
        return error
    }
}

extension AudioFadeCurve: ExpressibleByArgument {}
extension ReplayGainSettings.Mode: ExpressibleByArgument {}
