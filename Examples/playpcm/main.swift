// playpcm: plays raw PCM (or a WAV file, whose header it reads) through a BufferQueue, the way
// Apple's Audio Toolbox "playpcm" sample does: three buffers, refilled in the output callback.
#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import AudioFileStream
import BufferQueue
import Dispatch
import AudioOutput
import ExampleOptions

@main
struct PlayPCM: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "playpcm",
        abstract: "Play raw linear PCM, or a WAV file, through an audio queue.")

    enum SinkChoice: String, ExpressibleByArgument, CaseIterable {
        case pipewire, pulse, alsa, null
    }

    @Argument(help: "A raw PCM file, or a WAV file (its header gives the format).")
    var file: String

    @Option(help: "Sample rate of raw PCM.")
    var rate: Double = 44100

    @Option(help: "Channels of raw PCM.")
    var channels: Int = 1

    @Option(help: "Bits per sample of raw PCM: 16 (signed little-endian) or 8 (unsigned).")
    var bits: Int = 16

    @Option(help: "Volume, 0...1.")
    var volume: Float = 1

    @Option(help: "The device: a PipeWire node, a PulseAudio sink, or an ALSA PCM with --sink alsa (default, hw:0,0, plughw:1...).")
    var device: String?

    @Option(help: "Where the sound goes: pipewire, pulse, alsa or null; default: AQ_OUTPUT, else the first of PipeWire, PulseAudio and ALSA that answers, else a real-time null sink.")
    var sink: SinkChoice?

    @Flag(help: "Do not pace the null sink in real time: as fast as the queue decodes.")
    var fast = false

    func validate() throws {
        guard [8, 16].contains(bits) else { throw ValidationError("--bits must be 8 or 16") }
        guard (1...8).contains(channels) else { throw ValidationError("--channels must be 1...8") }
        guard rate > 0 && rate <= 384_000 else { throw ValidationError("--rate must be in 1...384000") }
        guard (0...1).contains(volume) else { throw ValidationError("--volume must be in 0...1") }
    }

    func run() async throws {
        let handle: FileDescriptor
        do { handle = try FileDescriptor.open(file, O_RDONLY) } catch {
            throw ValidationError("cannot open \(file): \(error.reason)")
        }
        let source: PCMSource
        do {
            source = try PCMSource(file: handle, raw: .linearPCM(sampleRate: rate, channels: channels, bitsPerChannel: bits))
        } catch {
            throw ValidationError("\(file): \(error)")
        }
        let format = source.format
        let chosen: AudioOutputDevice
        if fast {
            chosen = .null(unpaced: true)
        } else if let sink {
            chosen = try AudioOutputChoice.choose(setting: sink.rawValue + (device.map { ":" + $0 } ?? "")).device
        } else {
            chosen = AudioOutputChoice.fromEnvironment().device
            if case .null = chosen { writeError("playpcm: no PipeWire, PulseAudio or ALSA output answers; playing through the null sink\n") }
        }
        let output = chosen.makeSink(applicationName: "playpcm", streamName: String(file.split(separator: "/").last ?? Substring(file)))
        let queue = try AudioQueue(format: format, configuration: .init(sink: output)) { queue, buffer in
            source.refill(buffer, queue: queue)
        }
        try queue.setParameters(.init(volume: volume))
        let events = queue.events()

        // About half a second per buffer, a whole number of frames.
        let bytesPerBuffer = max(Int(format.sampleRate / 2), 1) * format.bytesPerFrame
        for _ in 0..<3 {
            source.refill(try queue.allocateBuffer(capacity: bytesPerBuffer), queue: queue)
        }
        let what = source.isWAV ? "WAV" : "raw PCM"
        print("Playing \(file) (\(what), \(format)) through \(chosen)")
        let started = ContinuousClock.now
        try queue.prime()
        try queue.start()
        for await event in events {
            switch event {
            case .runningChanged(false):
                let heard = queue.currentTime().sampleTime
                let seconds = Double(heard) / format.sampleRate
                let wall = ContinuousClock.now - started
                let wallSeconds = Double(wall.components.seconds) + Double(wall.components.attoseconds) * 1e-18
                print("Played \(heard) frames (\(formatted("%.3f", seconds)) s of audio) in \(formatted("%.3f", wallSeconds)) s")
                queue.dispose(immediately: true)
                return
            case .error(let error):
                writeError("playpcm: \(error)\n")
            default:
                break
            }
        }
    }
}

/// Reads PCM from a file in buffer-sized pieces; after the last piece it asks the queue to stop
/// once everything has played.
final class PCMSource: @unchecked Sendable {
    let format: AudioStreamDescription
    let isWAV: Bool
    private let file: FileDescriptor
    private struct Position {
        var offset: Int64
        var remaining: Int
        var finished = false
    }
    private let position: Lock<Position>

    init(file: FileDescriptor, raw: AudioStreamDescription) throws {
        self.file = file
        let fileSize = Int64(try file.status().st_size)
        let head = try Self.read(file, at: 0, count: 12)
        var start: Int64 = 0
        var remaining = Int(fileSize)
        if head.count == 12, head.prefix(4).elementsEqual("RIFF".utf8), head.suffix(4).elementsEqual("WAVE".utf8) {
            // The library's WAV parser reads the header (only as far as the data chunk).
            let stream = AudioFileStream(fileTypeHint: .wave)
            var chunk = head
            var next = Int64(head.count)
            while !stream.isReadyToProducePackets {
                _ = try stream.parse(chunk)
                guard !stream.isReadyToProducePackets else { break }
                chunk = try Self.read(file, at: next, count: 4096)
                next += Int64(chunk.count)
                if chunk.isEmpty { _ = try stream.finish(); break }
            }
            guard let wavFormat = stream.dataFormat, let offset = stream.dataOffset else {
                throw AudioFileStreamError(.noAudio, .wave, 0, "no data chunk")
            }
            format = wavFormat
            isWAV = true
            start = offset
            remaining = Int(stream.audioDataByteCount.map { min($0, fileSize - offset) } ?? (fileSize - offset))
        } else {
            format = raw
            isWAV = false
        }
        remaining -= remaining % format.bytesPerFrame
        position = Lock(Position(offset: start, remaining: remaining))
    }

    deinit { try? file.close() }

    private static func read(_ file: FileDescriptor, at offset: Int64, count: Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let got = try bytes.withUnsafeMutableBytes { buffer throws(SystemError) in try file.readAll(into: buffer, at: offset) }
        return Array(bytes.prefix(got))
    }

    /// Fills `buffer` with the next piece and enqueues it; at the end of the file, stops the queue
    /// asynchronously (everything enqueued still plays).
    func refill(_ buffer: AudioQueueBuffer, queue: AudioQueue) {
        position.withLock { position in
            guard !position.finished else { return }
            let wanted = min(buffer.capacity - buffer.capacity % format.bytesPerFrame, position.remaining)
            let data = (try? Self.read(file, at: position.offset, count: wanted)) ?? []
            let usable = data.count - data.count % format.bytesPerFrame
            if usable > 0 {
                do {
                    try buffer.setData(data.prefix(usable))
                    try queue.enqueue(buffer)
                    position.remaining -= usable
                    position.offset += Int64(usable)
                } catch {
                    writeError("playpcm: \(error)\n")
                    position.remaining = 0
                }
            } else {
                position.remaining = 0
            }
            if position.remaining == 0 {
                position.finished = true
                try? queue.stop(immediately: false)
            }
        }
    }
}
