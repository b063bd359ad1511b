// aqrecord: records from PipeWire or PulseAudio (a source or what a sink plays) or a generated signal through an
// input audio queue into a file, the way Apple's AudioQueueNewInput samples do: a few buffers,
// each written and enqueued again in the input callback. The queue encodes (AAC, ALAC, FLAC, Opus
// …) and hands out packets; the file is kept playable as it grows.
#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import AudioFileStream
import AudioPlayback
import BufferQueue
import AudioCodecs
import Dispatch
import ExampleOptions
import PipeWireSink
import PulseAudioSink
import Synchronization

@main
struct AQRecord: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "aqrecord",
        abstract: "Record into a file through an input audio queue that encodes.",
        discussion: """
            The extension picks the container and its usual codec: .m4a (AAC), .opus (Opus), .flac (FLAC), .caf, .wav, .aif (PCM). \
            Ctrl-C (SIGINT) or SIGTERM ends the recording and finishes the file. A recording that is killed keeps a playable file \
            up to the last second written (fragmented MP4, Ogg pages, FLAC frames, WAV and CAF sizes).
            """)

    enum SourceChoice: String, ExpressibleByArgument, CaseIterable { case pipewire, pulse, null }
    enum SampleFormat: String, ExpressibleByArgument, CaseIterable { case s16, s24, f32 }
    @Argument(help: "The file to write: OUT.m4a, OUT.opus, OUT.flac, OUT.caf, OUT.wav or OUT.aif.")
    var output: String?

    @Option(help: "What the file holds (default: the extension's usual codec): pcm, aac, alac, flac, opus, ima4, ulaw, alaw.")
    var codec: CodecChoice?

    @Option(help: "Bit rate of AAC or Opus, in bits per second.")
    var bitrate: Int?

    @Option(help: "Encoder quality 0...10 (FLAC's level, Opus's complexity).")
    var quality: Int?

    @Option(help: "Where the sound comes from: pipewire, pulse or null (a 440 Hz sine, for machines without a server). Default: pulse with --server, else AQ_INPUT, else PipeWire where it serves audio, else PulseAudio.")
    var source: SourceChoice?

    @Option(help: "Source name (PipeWire node or PulseAudio source), or SINK.monitor to record what a sink plays (see --list-devices). Default: the server's default source.")
    var device: String?

    @Option(help: "PulseAudio server address (default: the usual one).")
    var server: String?

    @Option(help: "Stop after this many seconds (exactly that many frames are written).")
    var duration: Double?

    @Option(help: "Sample rate to record (default: the device's own).")
    var rate: Double?

    @Option(help: "Channels to record.")
    var channels: Int = 2

    @Option(help: "Sample format of PCM (s16, s24 or f32), and the bit depth of ALAC and FLAC (s16 or s24).")
    var format: SampleFormat = .s16

    @Flag(help: "With --source null: generate as fast as the file is written, not in real time.")
    var fast = false

    @Flag(help: "List PulseAudio's sources (monitors included) and exit.")
    var listDevices = false

    func validate() throws {
        if !listDevices && output == nil { throw ValidationError("give the file to write (OUT.m4a, OUT.opus, OUT.flac, OUT.caf, OUT.wav)") }
        if let output, AudioFileWriter.fileType(forPath: output) == nil {
            throw ValidationError("\(output): the extension names no container written (.m4a, .opus, .flac, .caf, .wav, .aif, .aifc)")
        }
        if let quality, !(0...10).contains(quality) { throw ValidationError("--quality must be 0...10") }
        if let duration, !(duration > 0 && duration.isFinite) { throw ValidationError("--duration must be a positive number of seconds") }
        if let rate, !(rate >= 1000 && rate <= 768_000) { throw ValidationError("--rate must be in 1000...768000") }
        guard (1...8).contains(channels) else { throw ValidationError("--channels must be 1...8") }
        if fast && source != .null { throw ValidationError("--fast only applies to --source null") }
        if let setting = getenv("AQ_INPUT").map({ String(cString: $0) }), !setting.isEmpty, source == nil,
           SourceChoice(rawValue: String(setting.split(separator: ":").first ?? "")) == nil {
            throw ValidationError("AQ_INPUT '\(setting)' is not pipewire, pulse or null")
        }
    }

    /// --source, else PulseAudio when --server names one of its servers, else AQ_INPUT, else
    /// PipeWire where it serves audio, else PulseAudio.
    var chosenSource: SourceChoice {
        if let source { return source }
        if server != nil { return .pulse }
        if let setting = getenv("AQ_INPUT").map({ String(cString: $0) }), let named = SourceChoice(rawValue: String(setting.split(separator: ":").first ?? "")) {
            return named
        }
        if case .success = PipeWireSink.probe() { return .pipewire }
        return .pulse
    }

    func run() async throws {
        let source = chosenSource
        if listDevices {
            let devices = source == .pipewire ? try PipeWireSource.devices() : try PulseAudioSource.devices(server: server)
            for device in devices {
                let rate = device.sampleRate > 0 ? "; \(Int(device.sampleRate)) Hz" : ""
                let channels = device.channels > 0 ? ", \(device.channels) ch" : ""
                print("\(device.isDefault ? "*" : " ") \(device.name)  (\(device.description)\(rate)\(channels)\(device.isMonitor ? "; monitor" : ""))")
            }
            if source == .pipewire { print("  (SINK.monitor records what a sink plays: see aqplay --sink pipewire --list-devices)") }
            return
        }
        guard let output, let type = AudioFileWriter.fileType(forPath: output) else { return }
        AudioCodecs.registerAll()
        let audioSource: any AudioSource
        var sampleRate = rate ?? 48000
        switch source {
        case .pipewire:
            // SINK.monitor: what the sink plays; else a source (nil: the default one).
            let monitor = device?.hasSuffix(".monitor") == true
            let target = monitor ? device.map { String($0.dropLast(".monitor".count)) } : device
            if rate == nil, let target {
                let node = try PipeWireSink.nodes().first { $0.name == target }
                guard let node else { throw ValidationError("PipeWire has no node named \(target); see --list-devices") }
                if node.sampleRate > 0 { sampleRate = node.sampleRate }
            }
            audioSource = PipeWireSource(configuration: .init(target: target, monitor: monitor, applicationName: "aqrecord"))
        case .pulse:
            let configuration = PulseAudioSource.Configuration(server: server, device: device, applicationName: "aqrecord")
            if rate == nil {
                let devices = try PulseAudioSource.devices(server: server)
                let chosen = devices.first { $0.name == device } ?? devices.first { device == nil && $0.isDefault }
                guard let chosen else { throw ValidationError("PulseAudio has no source named \(device ?? "(default)"); see --list-devices") }
                sampleRate = chosen.sampleRate
            }
            audioSource = PulseAudioSource(configuration: configuration)
        case .null:
            audioSource = NullSource(signal: .sine(frequency: 440, amplitude: 0.5), pacing: fast ? .unpaced : .realTime)
        }
        let codec = self.codec ?? CodecChoice.usual(for: type, cafLossless: false)
        let bigEndian = type == .aiff || type == .aifc
        let description: AudioStreamDescription
        switch (codec, format) {
        case (.pcm, .s16): description = .linearPCM(sampleRate: sampleRate, channels: channels, bitsPerChannel: 16, isBigEndian: bigEndian)
        case (.pcm, .s24): description = .linearPCM(sampleRate: sampleRate, channels: channels, bitsPerChannel: 24, isBigEndian: bigEndian)
        case (.pcm, .f32): description = .linearPCM(sampleRate: sampleRate, channels: channels, bitsPerChannel: 32, isFloat: true, isBigEndian: bigEndian)
        default:
            description = AudioStreamDescription(sampleRate: sampleRate, formatID: codec.formatID, bytesPerPacket: 0, framesPerPacket: 0, bytesPerFrame: 0,
                                                 channelsPerFrame: channels, bitsPerChannel: format == .s24 ? 24 : 16)
        }
        let limit = duration.map { Int(($0 * sampleRate).rounded()) }
        let settings = AudioEncoderSettings(bitRate: bitrate, quality: quality)
        let holder = WriterHolder()
        let queue = try AudioInputQueue(format: description, configuration: .init(source: audioSource, encoderSettings: settings, frameLimit: limit)) { queue, buffer, frames in
            if holder.take(buffer, frames: frames, meters: queue.currentLevelMeters) {
                try? queue.enqueue(buffer)
            } else {
                try? queue.stop(immediately: true)
            }
        }
        let recorded = queue.streamDescription
        let writer = try AudioFileWriter(path: output, fileType: type, packetFormat: recorded, magicCookie: queue.magicCookie,
                                         channelLayout: channels > 2 ? .wave(channels: channels) : nil,
                                         primingFrames: queue.encodingTotals?.primingFrames ?? 0, maximumPacketSize: queue.maximumPacketSize,
                                         recording: true, expectedFrames: limit.map(Int64.init))
        let state = RecordingState(writer: writer, meter: isatty(2) != 0)
        holder.state = state
        queue.setLevelMeteringEnabled(true)
        let bufferBytes = max(max(Int(sampleRate / 10), 1) * (recorded.isLinearPCM ? recorded.bytesPerFrame : channels * 4), queue.maximumPacketSize * 2)
        for _ in 0..<4 { try queue.enqueue(queue.allocateBuffer(capacity: bufferBytes)) }

        // Ctrl-C: stop now; what was captured is written, the header finished.
        var unblock = sigset_t()
        sigemptyset(&unblock)
        sigaddset(&unblock, SIGINT)
        sigaddset(&unblock, SIGTERM)
        pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        let interrupts = [SIGINT, SIGTERM].map { DispatchSource.makeSignalSource(signal: $0, queue: .global()) }
        let interrupted = Interrupted()
        for interrupt in interrupts {
            interrupt.setEventHandler {
                interrupted.flag.withLock { $0 = true }
                try? queue.stop(immediately: true)
            }
            interrupt.resume()
        }

        let events = queue.events()
        try queue.start()
        writeError("aqrecord: recording \(recorded) to \(output) (Ctrl-C stops)\n")
        var failure: AudioQueueError?
        loop: for await event in events {
            switch event {
            case .runningChanged(false): break loop
            case .overrun(let lost, let at):
                if interrupted.flag.withLock({ $0 }) {
                    // Every buffer was still being written when the stop came.
                    writeError("\naqrecord: the last \(lost) frames captured (from frame \(at)) had no free buffer when the recording stopped\n")
                } else {
                    writeError("\naqrecord: \(lost) frames lost at frame \(at) (the disk or the machine was too slow)\n")
                }
            case .error(let error):
                failure = error
            default: break
            }
        }
        for interrupt in interrupts { interrupt.cancel() }
        queue.dispose(immediately: true)
        var writeFailure = state.writeFailure
        do { try writer.close(totals: queue.encodingTotals, magicCookie: queue.magicCookie) } catch { writeFailure = writeFailure ?? error }
        if state.meter { writeError("\n") }
        if let writeFailure {
            writeError("aqrecord: \(output) could not be written completely: \(writeFailure)\n")
            throw ExitCode(1)
        }
        let seconds = Double(writer.validFrames) / recorded.sampleRate
        print("Recorded \(writer.validFrames) frames (\(formatted("%.2f", seconds)) s) to \(output)")
        if let failure {
            writeError("aqrecord: \(failure)\n")
            throw ExitCode(1)
        }
    }
}

/// Set when Ctrl-C or SIGTERM stops the recording.
final class Interrupted: Sendable {
    let flag = Mutex(false)
}

/// Hands the input callback the recording state once the writer exists (the queue is made first:
/// the writer needs its format and cookie).
final class WriterHolder: @unchecked Sendable {
    var state: RecordingState?
    func take(_ buffer: AudioQueueBuffer, frames: AudioCapturedFrames, meters: [AudioLevelMeter]) -> Bool {
        state?.take(buffer, frames: frames, meters: meters) ?? false
    }
}

/// What the input callback keeps: the file, the meter line. Used only on the queue's callback
/// queue (and after its last callback).
final class RecordingState: @unchecked Sendable {
    let writer: AudioFileWriter
    let meter: Bool

    init(writer: AudioFileWriter, meter: Bool) {
        self.writer = writer
        self.meter = meter
    }

    /// The first error writing the file; the recording stops at it.
    var writeFailure: (any Error)?

    /// Writes the buffer's packets; false once the file cannot be written.
    func take(_ buffer: AudioQueueBuffer, frames: AudioCapturedFrames, meters: [AudioLevelMeter]) -> Bool {
        guard writeFailure == nil else { return false }
        do {
            try buffer.withUnsafeBytes { try writer.writePackets(UnsafeRawBufferPointer(rebasing: $0.prefix(buffer.byteSize)), descriptions: frames.packetDescriptions) }
        } catch {
            writeFailure = error
            return false
        }
        if meter { drawMeter(meters) }
        return true
    }

    private func drawMeter(_ meters: [AudioLevelMeter]) {
        let seconds = Double(writer.validFrames) / writer.dataFormat.sampleRate
        var line = formatted("\r\u{1B}[K● %02d:%05.2f ", Int(seconds) / 60, seconds.truncatingRemainder(dividingBy: 60))
        for meter in meters.prefix(2) {
            let peak = meter.decibels.peak
            let filled = max(0, min(30, Int((peak + 60) / 2)))
            line += "[" + String(repeating: "#", count: filled) + String(repeating: " ", count: 30 - filled) + "]" + formatted(" %6.1f dB ", peak)
        }
        writeError(line)
    }
}
