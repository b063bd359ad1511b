import AudioFileStream
import BufferQueue
import Synchronization

/// Records from an ``/BufferQueue/AudioSource`` into a file with one object: an ``/BufferQueue/AudioInputQueue`` that
/// encodes (``/AudioFileStream/AudioFileEncoding``), an ``/AudioFileStream/AudioFileWriter`` that lays the packets down as they come
/// (kept playable as it grows), and the order of the end, which is easy to get wrong by hand: the
/// queue stops, its last input callback has run, and only then is the file closed with the
/// encoder's final numbers (priming, remainder, valid frames) and cookie.
///
/// ```swift
/// let recorder = try AudioFileRecorder(path: "take.m4a", encoding: .aac(bitRate: 192_000),
///                                      sampleRate: 48_000, channels: 2, source: PulseAudioSource())
/// try recorder.start()
/// …
/// recorder.stop()
/// let recording = try await recorder.finished()   // the file is complete
/// ```
///
/// The writer is used only on the queue's callback queue and, after the last callback, by
/// ``finished()``: it is held in a `Mutex`, so the recorder is `Sendable` by construction and its
/// input callback needs no unchecked box. Works in Swift 6 mode.
public final class AudioFileRecorder: Sendable {
    /// What a finished recording holds.
    public struct Recording: Sendable {
        /// The file written.
        public var path: String
        /// The file's data format.
        public var format: AudioStreamDescription
        /// Frames in the file that play (gapless numbers applied).
        public var validFrames: Int64
        /// Frames captured that no buffer was there to take (the machine or the disk too slow).
        public var framesLost: Int
    }

    /// The queue that captures and encodes.
    public let queue: AudioInputQueue
    /// The file's path.
    public let path: String
    private let state: Guarded
    /// What ``finished()`` waits on: the queue's running changes, overruns and errors, and a stop
    /// while paused (the queue reports none: it was not running).
    private let ends: AsyncStream<End>
    private let endsInput: AsyncStream<End>.Continuation

    private enum End: Sendable {
        case queue(AudioInputQueueEvent)
        case stoppedWhilePaused
    }

    /// The state shared by the callback queue and ``finished()``, behind a lock.
    private final class Guarded: Sendable {
        let lock = Mutex(State())
        func withLock<R, E: Error>(_ body: (inout sending State) throws(E) -> sending R) throws(E) -> sending R { try lock.withLock(body) }
    }

    private struct State {
        var writer: AudioFileWriter?
        /// The first error writing the file: the recording stopped at it.
        var writeFailure: (any Error)?
        var queueFailure: AudioQueueError?
        var framesLost = 0
        var started = false
        /// Paused by ``pause()``: the queue's report that it stopped running is no end.
        var paused = false
        var stopRequested = false
        var result: Result<Recording, any Error>?
    }

    /// - Parameters:
    ///   - path: the file to create; its extension names the container.
    ///   - encoding: the codec (by default the container's usual one).
    ///   - sampleRate: the rate recorded (a source of another rate is converted).
    ///   - channels: the channels recorded.
    ///   - source: where frames come from (nil: a real-time ``/BufferQueue/NullSource`` of silence).
    ///   - frameLimit: frames after which the recording ends by itself, exactly; nil: until ``stop()``.
    ///   - encoders: where the encoder for `encoding` is found.
    ///   - resamplers: where a resampler is found when the source's rate is another.
    /// - Throws: ``/AudioFileStream/AudioFileWriterError`` for an extension this writer does not write;
    ///   ``/BufferQueue/AudioQueueError`` when no encoder makes the format or a setting is out of range.
    public init(path: String, encoding: AudioFileEncoding = .fromExtension, sampleRate: Double, channels: Int,
                source: (any AudioSource)? = nil, frameLimit: Int? = nil, encoders: AudioEncoderRegistry = .shared,
                resamplers: AudioResamplerRegistry = .shared) throws {
        guard let type = AudioFileWriter.fileType(forPath: path) else {
            throw AudioFileWriterError(.unsupportedFormat, path: path, "the extension names no file type this writer writes (.caf, .wav, .aif, .aiff, .aifc, .flac, .opus, .m4a)")
        }
        let encoding = encoding.resolved(for: type)
        let format = try encoding.dataFormat(for: type, sampleRate: sampleRate, channels: channels)
        let state = Guarded()
        self.state = state
        self.path = path
        let (ends, endsInput) = AsyncStream.makeStream(of: End.self)
        self.ends = ends
        self.endsInput = endsInput
        let configuration = AudioInputQueue.Configuration(
            source: source, resamplerRegistry: resamplers, encoderSettings: encoding.settings, encoderRegistry: encoders,
            frameLimit: frameLimit, eventHandler: { event in
                switch event {
                case .runningChanged, .overrun, .error: endsInput.yield(.queue(event))
                case .bufferFilled, .bufferReturned: break
                }
            })
        queue = try AudioInputQueue(format: format, configuration: configuration) { queue, buffer, frames in
            // On the queue's callback queue: the packets go into the file, the buffer back to the queue.
            let written = state.withLock { state -> Bool in
                guard let writer = state.writer, state.writeFailure == nil else { return false }
                do {
                    try buffer.withUnsafeBytes {
                        try writer.writePackets(UnsafeRawBufferPointer(rebasing: $0.prefix(buffer.byteSize)), descriptions: frames.packetDescriptions)
                    }
                    return true
                } catch {
                    state.writeFailure = error
                    return false
                }
            }
            if written { try? queue.enqueue(buffer) } else { try? queue.stop(immediately: true) }
        }
        let recorded = queue.streamDescription
        let (cookie, priming, largest) = (queue.magicCookie, queue.encodingTotals?.primingFrames ?? 0, queue.maximumPacketSize)
        try state.withLock { state in
            // Made here, so that it is the lock's alone.
            state.writer = try AudioFileWriter(path: path, fileType: type, packetFormat: recorded, magicCookie: cookie,
                                               channelLayout: channels > 2 ? .wave(channels: channels) : nil, primingFrames: priming,
                                               maximumPacketSize: largest, recording: true, expectedFrames: frameLimit.map(Int64.init))
        }
        // A tenth of a second a buffer (at least two packets), four of them.
        let bytes = max(max(Int(sampleRate / 10), 1) * (recorded.isLinearPCM ? recorded.bytesPerFrame : channels * 4), queue.maximumPacketSize * 2)
        for _ in 0..<4 { try queue.enqueue(queue.allocateBuffer(capacity: bytes)) }
    }

    /// Starts capturing.
    public func start() throws {
        try queue.start()
        state.withLock { $0.started = true }
    }

    /// Pauses capturing; ``resume()`` goes on in the same file (the pause is not in it).
    public func pause() throws {
        state.withLock { $0.paused = true }
        try queue.pause()
    }

    /// Goes on capturing after ``pause()``.
    public func resume() throws {
        state.withLock { $0.paused = false }
        try queue.start()
    }

    /// Stops capturing now; what was captured goes into the file. ``finished()`` closes it.
    public func stop() {
        let paused = state.withLock { state -> Bool in
            state.stopRequested = true
            return state.paused
        }
        try? queue.stop(immediately: true)
        if paused { endsInput.yield(.stoppedWhilePaused) }
    }

    /// Waits until the queue has stopped (``stop()``, the frame limit, the source's end or a
    /// failure) and its last callback has run, then closes the file with the encoder's final
    /// numbers and cookie. Called again once it returned, it gives the same result; called before
    /// ``start()``, it closes the file empty at once.
    /// - Throws: the first error writing the file, or the queue's failure (the file is closed
    ///   either way, with what was captured before it).
    @discardableResult
    public func finished() async throws -> Recording {
        let (done, started) = state.withLock { ($0.result, $0.started) }
        if let done { return try done.get() }
        if started {
            waiting: for await end in ends {
                switch end {
                case .queue(.overrun(let lost, _)): state.withLock { $0.framesLost += lost }
                case .queue(.error(let error)): state.withLock { if $0.queueFailure == nil { $0.queueFailure = error } }
                case .queue(.runningChanged(false)):
                    // A pause is no end, unless a stop came with it.
                    if state.withLock({ !$0.paused || $0.stopRequested }) { break waiting }
                case .stoppedWhilePaused: break waiting
                default: break
                }
            }
        }
        // Stopped: no input callback runs after the disposal returns.
        queue.dispose(immediately: true)
        let totals = queue.encodingTotals, cookie = queue.magicCookie
        let result = state.withLock { state -> Result<Recording, any Error> in
            if let result = state.result { return result }
            var failure = state.writeFailure ?? state.queueFailure
            var recording: Recording?
            if let writer = state.writer {
                do { try writer.close(totals: totals, magicCookie: cookie) } catch { failure = failure ?? error }
                recording = Recording(path: path, format: writer.dataFormat, validFrames: writer.validFrames, framesLost: state.framesLost)
            }
            let result: Result<Recording, any Error> = failure.map { .failure($0) }
                ?? recording.map { .success($0) } ?? .failure(AudioQueueError(.invalidRunState, "no file was opened"))
            state.result = result
            return result
        }
        return try result.get()
    }
}
