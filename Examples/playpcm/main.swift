// playpcm: plays raw PCM (or a WAV file, whose header it reads) through a BufferQueue, the way
// Apple's Audio Toolbox "playpcm" sample does: three buffers, refilled in the output callback.
import ArgumentParser
import AudioFileStream
import BufferQueue
import Dispatch
import Foundation
import ALSASink
import PulseAudioSink

@main
struct PlayPCM: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "playpcm",
        abstract: "Play raw linear PCM, or a WAV file, through an audio queue.")

    enum SinkChoice: String, ExpressibleByArgument, CaseIterable {
        case pulse, alsa, null
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

    @Option(help: "ALSA PCM name with --sink alsa (default, hw:0,0, plughw:1...).")
    var device: String = "default"

    @Option(help: "Where the sound goes: pulse, alsa or null; default: PulseAudio when a server answers, else a real-time null sink.")
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
        guard let handle = FileHandle(forReadingAtPath: file) else {
            throw ValidationError("cannot open \(file)")
        }
        let source: PCMSource
        do {
            source = try PCMSource(handle: handle, raw: .linearPCM(sampleRate: rate, channels: channels, bitsPerChannel: bits))
        } catch {
            throw ValidationError("\(file): \(error)")
        }
        let format = source.format
        var choice = fast ? .null : sink
        if choice == nil {
            choice = PulseAudioSink.serverIsReachable() ? .pulse : .null
            if choice == .null { FileHandle.standardError.write(Data("playpcm: no PulseAudio server answers; playing through the null sink\n".utf8)) }
        }
        let output: any AudioSink
        switch choice {
        case .pulse: output = PulseAudioSink(configuration: .init(applicationName: "playpcm", streamName: (file as NSString).lastPathComponent))
        case .alsa: output = ALSASink(configuration: .init(device: device))
        default: output = NullSink(pacing: fast ? .unpaced : .realTime)
        }
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
        print("Playing \(file) (\(what), \(format)) through the \(choice == .pulse ? "PulseAudio" : fast ? "unpaced null" : "null") sink")
        let started = ContinuousClock.now
        try queue.prime()
        try queue.start()
        for await event in events {
            switch event {
            case .runningChanged(false):
                let heard = queue.currentTime().sampleTime
                let seconds = Double(heard) / format.sampleRate
                let wall = ContinuousClock.now - started
                print("Played \(heard) frames (\(String(format: "%.3f", seconds)) s of audio) in \(wall.formatted(.units(allowed: [.seconds, .milliseconds], width: .narrow)))")
                queue.dispose(immediately: true)
                return
            case .error(let error):
                FileHandle.standardError.write(Data("playpcm: \(error)\n".utf8))
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
    private let handle: FileHandle
    private let lock = NSLock()
    private var remaining: Int
    private var finished = false

    init(handle: FileHandle, raw: AudioStreamDescription) throws {
        self.handle = handle
        let head = try handle.read(upToCount: 12) ?? Data()
        if head.count == 12, head.prefix(4) == Data("RIFF".utf8), head.suffix(4) == Data("WAVE".utf8) {
            // The library's WAV parser reads the header (only as far as the data chunk).
            let stream = AudioFileStream(fileTypeHint: .wave)
            var chunk = head
            while !stream.isReadyToProducePackets {
                _ = try stream.parse(chunk)
                guard !stream.isReadyToProducePackets else { break }
                chunk = try handle.read(upToCount: 4096) ?? Data()
                if chunk.isEmpty { _ = try stream.finish(); break }
            }
            guard let wavFormat = stream.dataFormat, let offset = stream.dataOffset else {
                throw AudioFileStreamError(.noAudio, .wave, 0, "no data chunk")
            }
            format = wavFormat
            isWAV = true
            let fileSize = Int64(try handle.seekToEnd())
            try handle.seek(toOffset: UInt64(offset))
            remaining = Int(stream.audioDataByteCount.map { min($0, fileSize - offset) } ?? (fileSize - offset))
        } else {
            format = raw
            isWAV = false
            let fileSize = Int(try handle.seekToEnd())
            try handle.seek(toOffset: 0)
            remaining = fileSize
        }
        remaining -= remaining % format.bytesPerFrame
    }

    /// Fills `buffer` with the next piece and enqueues it; at the end of the file, stops the queue
    /// asynchronously (everything enqueued still plays).
    func refill(_ buffer: AudioQueueBuffer, queue: AudioQueue) {
        lock.lock()
        defer { lock.unlock() }
        guard !finished else { return }
        let wanted = min(buffer.capacity - buffer.capacity % format.bytesPerFrame, remaining)
        let data = (try? handle.read(upToCount: wanted)) ?? Data()
        let usable = data.count - data.count % format.bytesPerFrame
        if usable > 0 {
            do {
                try buffer.setData(data.prefix(usable))
                try queue.enqueue(buffer)
                remaining -= usable
            } catch {
                FileHandle.standardError.write(Data("playpcm: \(error)\n".utf8))
                remaining = 0
            }
        } else {
            remaining = 0
        }
        if remaining == 0 {
            finished = true
            try? queue.stop(immediately: false)
        }
    }
}
