#if canImport(Glibc)
import Glibc
#endif
import BufferQueue
import Dispatch
import Synchronization

/// Plays a list of files through one ``AudioSink``, gaplessly.
///
/// Each file is decoded through an ``AudioFileRenderer`` (so its priming and padding are trimmed
/// exactly) and its float32 frames are fed to a single playback ``AudioQueue``: consecutive files
/// join sample-exactly, whatever their codecs, as long as their output rate and channel count
/// match. When those change, the player lets the current queue play out and opens a new queue
/// (and sink) at the new format — there is a gap at that point; it does not resample.
///
/// `run()` blocks until everything has played (or ``stop()`` is called); call it off the main thread.
public final class AudioFilePlayer: @unchecked Sendable {
    /// What is playing now.
    public struct Status: Sendable {
        /// Index in the file list, or nil before the first frame is heard.
        public var fileIndex: Int?
        public var title: String?
        /// Seconds into the current file (as heard, latency-corrected).
        public var position: Double
        public var duration: Double
        /// Seconds decoded ahead of what is heard.
        public var buffered: Double
    }

    public let paths: [String]
    public let loops: Int
    public let volume: Float
    public let startSeconds: Double
    private let makeSink: @Sendable () -> any AudioSink
    private let record: (@Sendable (UnsafeBufferPointer<Float>, AudioStreamDescription) -> Void)?
    private let stopped = Atomic<Bool>(false)
    private let state = Lock(PlayState())

    private struct PlayState {
        var queue: AudioQueue?
        var queueStartFrame: Int64 = 0
        /// (global frame where a file starts, file index, its duration in frames, title)
        var marks: [(start: Int64, index: Int, frames: Int64, title: String?)] = []
        var rate: Double = 44100
        var enqueued: Int64 = 0
        var failure: AudioQueueError?
    }

    /// - Parameters:
    ///   - startSeconds: where in the first file to start (frame-exact).
    ///   - makeSink: a new sink for each playback queue.
    ///   - record: receives exactly the frames handed to the sink, in order.
    public init(paths: [String], loops: Int = 1, volume: Float = 1, startSeconds: Double = 0,
                makeSink: @escaping @Sendable () -> any AudioSink,
                record: (@Sendable (UnsafeBufferPointer<Float>, AudioStreamDescription) -> Void)? = nil) {
        self.paths = paths
        self.loops = max(loops, 1)
        self.volume = volume
        self.startSeconds = max(startSeconds, 0)
        self.makeSink = makeSink
        self.record = record
    }

    /// Stops now (from any thread); ``run()`` returns soon after.
    public func stop() {
        stopped.store(true, ordering: .releasing)
        let queue = state.withLock { $0.queue }
        try? queue?.stop(immediately: true)
    }

    /// What is heard now.
    public var status: Status {
        state.withLock { s in
            guard let queue = s.queue else { return Status(fileIndex: nil, title: nil, position: 0, duration: 0, buffered: 0) }
            let heard = s.queueStartFrame + queue.currentTime().sampleTime
            let mark = s.marks.last { $0.start <= heard } ?? s.marks.first
            let position = mark.map { Double(heard - $0.start) / s.rate } ?? 0
            return Status(fileIndex: mark?.index, title: mark?.title, position: max(position, 0),
                          duration: mark.map { Double($0.frames) / s.rate } ?? 0,
                          buffered: Double(s.enqueued - heard) / s.rate)
        }
    }

    /// Plays every file `loops` times. Returns the frames handed to the sink.
    /// - Throws: what opening, decoding or the sink reported; frames before it have played.
    @discardableResult
    public func run() throws -> Int64 {
        var format: AudioStreamDescription?
        var queue: AudioQueue?
        var pool: BufferPool?
        var total: Int64 = 0
        defer { if let queue { finish(queue) } }
        // Each file is opened and indexed once, however many loops.
        let files = try paths.map { try AudioFile(path: $0) }
        for loop in 0..<loops {
            for (index, file) in files.enumerated() {
                if stopped.load(ordering: .acquiring) { return total }
                let start = loop == 0 && index == 0 ? Int64(startSeconds * (file.formatList.first ?? file.dataFormat).sampleRate) : 0
                let renderer = try AudioFileRenderer(file: file, startFrame: start)
                let out = renderer.outputFormat
                if queue == nil || format != out {
                    if let old = queue { finish(old) }
                    let made = BufferPool()
                    let newQueue = try AudioQueue(format: out, configuration: .init(sink: makeSink(), decodeBufferFrames: 16384)) { _, buffer in
                        made.returned(buffer)
                    }
                    for _ in 0..<6 { made.add(try newQueue.allocateBuffer(capacity: 4096 * out.channelsPerFrame * 4)) }
                    let events = newQueue.events()
                    let failures = state
                    Task.detached { for await event in events { if case .error(let e) = event, e.code == .sinkError { failures.withLock { $0.failure = e } } } }
                    state.withLock { s in
                        s.queue = newQueue
                        s.queueStartFrame = total
                        s.rate = out.sampleRate
                    }
                    queue = newQueue
                    pool = made
                    format = out
                }
                guard let queue, let pool else { return total }
                state.withLock { $0.marks.append((total, index, renderer.expectedFrames ?? 0, file.metadata.title)) }
                var scratch = [Float](repeating: 0, count: 4096 * out.channelsPerFrame)
                var started = queue.isRunning
                while !stopped.load(ordering: .acquiring) {
                    if let failure = state.withLock({ $0.failure }) { throw failure }
                    let n = try scratch.withUnsafeMutableBufferPointer { try renderer.render(into: $0, frames: 4096) }
                    if n == 0 { break }
                    let samples = n * out.channelsPerFrame
                    if volume != 1 { for i in 0..<samples { scratch[i] *= volume } }
                    scratch.withUnsafeBufferPointer { record?(UnsafeBufferPointer(rebasing: $0[0..<samples]), out) }
                    guard let buffer = pool.take(until: { self.stopped.load(ordering: .acquiring) }) else { break }
                    try scratch.withUnsafeBytes { try buffer.setData($0.prefix(samples * 4)) }
                    try queue.enqueue(buffer)
                    total += Int64(n)
                    state.withLock { $0.enqueued = total }
                    if !started && pool.inFlight >= 3 {
                        try queue.prime()
                        try queue.start()
                        started = true
                    }
                }
                if !started && !stopped.load(ordering: .acquiring) { try queue.start() }
            }
        }
        if let failure = state.withLock({ $0.failure }) { throw failure }
        return total
    }

    /// Lets a queue play out what it has, then releases it.
    private func finish(_ queue: AudioQueue) {
        if !stopped.load(ordering: .acquiring) {
            if !queue.isRunning { try? queue.start() }
            try? queue.stop(immediately: false)
            // Wait for the stop to complete: the queue reports not running once drained.
            var waited = 0
            while waited < 60_000 && !stopped.load(ordering: .acquiring) {
                if !queue.isStopping { break }
                usleep(50_000)
                waited += 50
                if state.withLock({ $0.failure }) != nil { break }
            }
        }
        queue.dispose(immediately: true)
    }
}

/// Free playback buffers, handed back by the output callback.
private final class BufferPool: @unchecked Sendable {
    private let lock = Lock([AudioQueueBuffer]())
    private let available = DispatchSemaphore(value: 0)
    private let count = Atomic<Int>(0)

    func add(_ buffer: AudioQueueBuffer) {
        count.add(1, ordering: .relaxed)
        returned(buffer)
    }

    func returned(_ buffer: AudioQueueBuffer) {
        lock.withLock { $0.append(buffer) }
        available.signal()
    }

    var inFlight: Int { count.load(ordering: .relaxed) - lock.withLock { $0.count } }

    /// A free buffer, waiting for one; nil when `cancelled` turns true.
    func take(until cancelled: () -> Bool) -> AudioQueueBuffer? {
        while !cancelled() {
            if available.wait(timeout: .now() + .milliseconds(50)) == .success {
                return lock.withLock { $0.popLast() }
            }
        }
        return nil
    }
}
