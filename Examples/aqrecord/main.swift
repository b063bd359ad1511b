// aqrecord: records from PulseAudio (a source or a sink's monitor) or a generated signal through an
// input audio queue into a WAV or CAF file, the way Apple's AudioQueueNewInput samples do: a few
// buffers, each written and enqueued again in the input callback.
import ArgumentParser
import AudioPlayback
import BufferQueue
import Dispatch
import Foundation
import PulseAudioSink
import SoxrConverter

@main
struct AQRecord: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "aqrecord",
        abstract: "Record into a WAV or CAF file through an input audio queue.",
        discussion: "Ctrl-C ends the recording and finishes the file (its header sizes are filled in).")

    enum SourceChoice: String, ExpressibleByArgument, CaseIterable { case pulse, null }
    enum SampleFormat: String, ExpressibleByArgument, CaseIterable { case s16, s24, f32 }

    @Argument(help: "The file to write: OUT.wav or OUT.caf.")
    var output: String?

    @Option(help: "Where the sound comes from: pulse (default) or null (a 440 Hz sine, for machines without a server).")
    var source: SourceChoice = .pulse

    @Option(help: "PulseAudio source name, or SINK.monitor to record what a sink plays (see --list-devices). Default: the server's default source.")
    var device: String?

    @Option(help: "PulseAudio server address (default: the usual one).")
    var server: String?

    @Option(help: "Stop after this many seconds (exactly that many frames are written).")
    var duration: Double?

    @Option(help: "Sample rate to record (default: the device's own).")
    var rate: Double?

    @Option(help: "Channels to record.")
    var channels: Int = 2

    @Option(help: "Sample format: s16, s24 or f32.")
    var format: SampleFormat = .s16

    @Flag(help: "With --source null: generate as fast as the file is written, not in real time.")
    var fast = false

    @Flag(help: "List PulseAudio's sources (monitors included) and exit.")
    var listDevices = false

    func validate() throws {
        if !listDevices && output == nil { throw ValidationError("give the file to write (OUT.wav or OUT.caf)") }
        if let duration, !(duration > 0 && duration.isFinite) { throw ValidationError("--duration must be a positive number of seconds") }
        if let rate, !(rate >= 1000 && rate <= 768_000) { throw ValidationError("--rate must be in 1000...768000") }
        guard (1...8).contains(channels) else { throw ValidationError("--channels must be 1...8") }
        if fast && source != .null { throw ValidationError("--fast only applies to --source null") }
    }

    func run() async throws {
        if listDevices {
            for device in try PulseAudioSource.devices(server: server) {
                print("\(device.isDefault ? "*" : " ") \(device.name)  (\(device.description); \(Int(device.sampleRate)) Hz, \(device.channels) ch\(device.isMonitor ? "; monitor" : ""))")
            }
            return
        }
        guard let output else { return }
        SoxrConverter.register()
        let audioSource: any AudioSource
        var sampleRate = rate ?? 48000
        switch source {
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
        let description: AudioStreamDescription
        switch format {
        case .s16: description = .linearPCM(sampleRate: sampleRate, channels: channels, bitsPerChannel: 16)
        case .s24: description = .linearPCM(sampleRate: sampleRate, channels: channels, bitsPerChannel: 24)
        case .f32: description = .float32(sampleRate: sampleRate, channels: channels)
        }
        let writer = try PCMFileWriter(path: output, format: description)
        let limit = duration.map { Int64(($0 * sampleRate).rounded()) }
        let state = RecordingState(writer: writer, limit: limit, meter: isatty(2) != 0)

        let queue = try AudioInputQueue(format: description, configuration: .init(source: audioSource)) { queue, buffer, frames in
            if state.take(buffer, frames: frames.frameCount, meters: queue.currentLevelMeters) {
                try? queue.enqueue(buffer)
            } else {
                try? queue.stop(immediately: true)
            }
        }
        queue.setLevelMeteringEnabled(true)
        let bufferBytes = max(Int(sampleRate / 10), 1) * description.bytesPerFrame
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
        for interrupt in interrupts {
            interrupt.setEventHandler { try? queue.stop(immediately: true) }
            interrupt.resume()
        }

        let events = queue.events()
        try queue.start()
        FileHandle.standardError.write(Data("aqrecord: recording \(description) to \(output) (Ctrl-C stops)\n".utf8))
        var failure: AudioQueueError?
        loop: for await event in events {
            switch event {
            case .runningChanged(false): break loop
            case .overrun(let lost, let at):
                // Frames past the duration, dropped by the stop, are not a loss.
                if state.remaining == 0 { continue }
                FileHandle.standardError.write(Data("\naqrecord: \(lost) frames lost at frame \(at) (the disk or the machine was too slow)\n".utf8))
            case .error(let error):
                failure = error
            default: break
            }
        }
        for interrupt in interrupts { interrupt.cancel() }
        queue.dispose(immediately: true)
        var writeError = state.writeError
        do { try writer.close() } catch { writeError = writeError ?? error }
        if state.meter { FileHandle.standardError.write(Data("\n".utf8)) }
        if let writeError {
            FileHandle.standardError.write(Data("aqrecord: \(output) could not be written completely: \(writeError)\n".utf8))
            throw ExitCode(1)
        }
        let seconds = Double(writer.framesWritten) / sampleRate
        print("Recorded \(writer.framesWritten) frames (\(String(format: "%.2f", seconds)) s) to \(output)")
        if let failure {
            FileHandle.standardError.write(Data("aqrecord: \(failure)\n".utf8))
            throw ExitCode(1)
        }
    }
}

/// What the input callback keeps: the file, the frames still wanted, the meter line. Used only on
/// the queue's callback queue (and after its last callback).
final class RecordingState: @unchecked Sendable {
    let writer: PCMFileWriter
    var remaining: Int64?
    let meter: Bool

    init(writer: PCMFileWriter, limit: Int64?, meter: Bool) {
        self.writer = writer
        remaining = limit
        self.meter = meter
    }

    /// The first error writing the file; the recording stops at it.
    var writeError: (any Error)?

    /// Writes the buffer's frames (no more than the duration asks); false once the duration is
    /// reached or the file cannot be written.
    func take(_ buffer: AudioQueueBuffer, frames: Int, meters: [AudioLevelMeter]) -> Bool {
        guard writeError == nil else { return false }
        var frames = Int64(frames)
        if let remaining { frames = min(frames, remaining) }
        let bytes = Int(frames) * writer.format.bytesPerFrame
        do {
            try buffer.withUnsafeBytes { try writer.write(UnsafeRawBufferPointer(rebasing: $0.prefix(bytes))) }
        } catch {
            writeError = error
            return false
        }
        if let remaining { self.remaining = remaining - frames }
        if meter { drawMeter(meters) }
        return (remaining ?? 1) > 0
    }

    private func drawMeter(_ meters: [AudioLevelMeter]) {
        let seconds = Double(writer.framesWritten) / writer.format.sampleRate
        var line = String(format: "\r\u{1B}[K● %02d:%05.2f ", Int(seconds) / 60, seconds.truncatingRemainder(dividingBy: 60))
        for meter in meters.prefix(2) {
            let peak = meter.decibels.peak
            let filled = max(0, min(30, Int((peak + 60) / 2)))
            line += "[" + String(repeating: "#", count: filled) + String(repeating: " ", count: 30 - filled) + "]" + String(format: " %6.1f dB ", peak)
        }
        FileHandle.standardError.write(Data(line.utf8))
    }
}
