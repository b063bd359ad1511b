// playpcm: plays raw PCM (or a WAV file, whose header it reads) through a BufferQueue, the way
// Apple's Audio Toolbox "playpcm" sample does: three buffers, refilled in the output callback.
import ArgumentParser
import BufferQueue
import Dispatch
import Foundation

@main
struct PlayPCM: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "playpcm",
        abstract: "Play raw linear PCM, or a WAV file, through an audio queue.")

    enum SinkChoice: String, ExpressibleByArgument, CaseIterable {
        case null
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

    @Option(help: "Where the sound goes: null (a real-time paced null sink).")
    var sink: SinkChoice = .null

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
        } catch let error as WAVHeaderError {
            throw ValidationError("\(file): \(error.message)")
        }
        let format = source.format
        let nullSink = NullSink(pacing: fast ? .unpaced : .realTime)
        let queue = try AudioQueue(format: format, configuration: .init(sink: nullSink)) { queue, buffer in
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
        print("Playing \(file) (\(what), \(format)) through the \(fast ? "unpaced " : "")null sink")
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

struct WAVHeaderError: Error { let message: String }

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
        let head = try handle.read(upToCount: 4096) ?? Data()
        if let wav = try Self.parseWAV(Array(head)) {
            format = wav.format
            isWAV = true
            try handle.seek(toOffset: UInt64(wav.dataOffset))
            let fileSize = Int(try handle.seekToEnd())
            try handle.seek(toOffset: UInt64(wav.dataOffset))
            remaining = min(wav.dataSize ?? Int.max, fileSize - wav.dataOffset)
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

    /// The format and data chunk of a RIFF/WAVE header, or nil when `bytes` is not one.
    static func parseWAV(_ bytes: [UInt8]) throws -> (format: AudioStreamDescription, dataOffset: Int, dataSize: Int?)? {
        func u32(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2]) << 16 | Int(bytes[at + 3]) << 24 }
        func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
        func tag(_ at: Int) -> String { String(decoding: bytes[at..<(at + 4)], as: UTF8.self) }
        guard bytes.count >= 12, tag(0) == "RIFF", tag(8) == "WAVE" else { return nil }
        var offset = 12
        var format: AudioStreamDescription?
        while offset + 8 <= bytes.count {
            let id = tag(offset), size = u32(offset + 4), body = offset + 8
            if id == "fmt " {
                guard size >= 16, body + 16 <= bytes.count else {
                    throw WAVHeaderError(message: "the fmt chunk at byte \(offset) is \(size) bytes, too short")
                }
                var code = u16(body)
                if code == 0xFFFE && size >= 26 && body + 26 <= bytes.count { code = u16(body + 24) }
                let channels = u16(body + 2), rate = u32(body + 4), bits = u16(body + 14)
                guard code == 1 || code == 3 else {
                    throw WAVHeaderError(message: "WAV format code \(code) is not PCM (1) or float (3)")
                }
                guard channels > 0, rate > 0, bits > 0 else {
                    throw WAVHeaderError(message: "the fmt chunk at byte \(offset) says \(channels) channels, \(rate) Hz, \(bits) bits")
                }
                format = .linearPCM(sampleRate: Double(rate), channels: channels, bitsPerChannel: bits, isFloat: code == 3)
            } else if id == "data" {
                guard let format else { throw WAVHeaderError(message: "the data chunk at byte \(offset) comes before any fmt chunk") }
                return (format, body, size == 0xFFFF_FFFF ? nil : size)
            }
            offset = body + size + (size & 1)
        }
        throw WAVHeaderError(message: "no data chunk in the first \(bytes.count) bytes")
    }
}
