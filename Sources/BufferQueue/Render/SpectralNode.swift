#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A phase-vocoder time-stretcher and pitch-shifter the queue drives for its
/// ``TimePitchAlgorithm/spectral`` algorithm, working on interleaved float32 frames in real-time
/// (streaming) mode. The core has none: import `RubberBandTimePitch` (GPL) and call its
/// `register()`.
///
/// The queue calls it from the render path, one thread at a time: after setup, no method should
/// lock or block for long, or allocate (``reset()`` runs on the render path only when the engine is
/// entered again after use).
public protocol TimePitchEngine: AnyObject {
    /// Output duration over input duration from the next frames processed on (1 / play rate).
    func setTimeRatio(_ ratio: Double)
    /// Frequency multiplier from the next frames processed on (2^(cents / 1200)).
    func setPitchScale(_ scale: Double)
    /// Input frames to process before the first real one after ``reset()`` (with the ratio and
    /// pitch set), so that the real input starts in a settled state.
    var startPad: Int { get }
    /// Output frames that come out before the output of the first real input frame, to discard.
    var startDelay: Int { get }
    /// The most frames one ``process(_:frames:)`` call takes.
    var maximumProcessFrames: Int { get }
    /// Takes `frames` interleaved frames.
    func process(_ input: UnsafePointer<Float>, frames: Int)
    /// Output frames ready to retrieve.
    var availableFrames: Int { get }
    /// Copies up to `frames` ready frames, interleaved; returns how many.
    func retrieve(into output: UnsafeMutablePointer<Float>, frames: Int) -> Int
    /// Forgets all input and output.
    func reset()
}

/// Makes time-pitch engines; registered with a ``TimePitchEngineRegistry``.
public struct TimePitchEngineFactory: Sendable {
    /// For messages.
    public var name: String
    /// The highest priority wins.
    public var priority: Int
    /// Makes an engine for a sample rate and channel count.
    public var make: @Sendable (_ sampleRate: Double, _ channels: Int) throws -> any TimePitchEngine

    /// A factory named `name`, tried before the factories of lower `priority`; `make` makes an engine for a rate and channel count.
    public init(name: String, priority: Int = 0, make: @escaping @Sendable (Double, Int) throws -> any TimePitchEngine) {
        self.name = name
        self.priority = priority
        self.make = make
    }
}

/// Where the ``TimePitchAlgorithm/spectral`` algorithm finds its engine, like
/// ``AudioResamplerRegistry`` for resamplers. The core registers none.
public final class TimePitchEngineRegistry: Sendable {
    /// The registry the library uses unless told otherwise.
    public static let shared = TimePitchEngineRegistry()
    private let factories = Lock<[TimePitchEngineFactory]>([])

    /// An empty registry (``shared`` is the one the library uses by default).
    public init() {}

    /// Adds a factory; the one with the highest priority is used.
    public func register(_ factory: TimePitchEngineFactory) {
        factories.withLock { list in
            list.removeAll { $0.name == factory.name }
            list.append(factory)
            list.sort { $0.priority > $1.priority }
        }
    }

    /// The factory in use, if any.
    public var factory: TimePitchEngineFactory? { factories.withLock { $0.first } }

    /// Makes an engine.
    /// - Throws: ``AudioQueueError/Code/codecNotFound`` when none is registered, or the factory's error.
    public func makeEngine(sampleRate: Double, channels: Int) throws -> any TimePitchEngine {
        guard let factory else {
            throw AudioQueueError(.codecNotFound,
                "the spectral time-pitch algorithm needs an engine: import RubberBandTimePitch and call RubberBandTimePitch.register()")
        }
        return try factory.make(sampleRate, channels)
    }
}

/// Play rate and pitch, independent of each other, through a ``TimePitchEngine`` (Apple's
/// `Spectral` algorithm).
///
/// - Until the rate or the pitch first differs from 1 and 0 (or while bypassed) it copies the
///   input, bit for bit. From the input position where they first differ it feeds the engine,
///   primed with the input before that position (so it enters without a fade), and keeps using
///   it until the segment ends, at rate 1 too (leaving it would click).
/// - Lengths: every input frame fed at rate r owes 1/r output frames; at the segment's end the
///   engine is fed silence until the output owed, rounded once, has come out, and nothing more.
/// - A buffer's own rate applies from its first frame (blocks are split there); a pitch applies
///   from the next block fed (≤ 1024 frames).
/// - Turning bypass on while the engine is in use resumes copying at the input the listener is
///   hearing (the engine's latency is accounted for); the join is not smoothed.
/// - The node allocates nothing after `init`. The engine may: Rubber Band's `reset` allocates
///   (two small blocks in 3.x, as another project measured), so entering the engine a second time
///   in a node's life (after a flush, a reset or a bypass) allocates on the render thread once.
///   `RubberBandEngine` runs itself once at creation so that the memory Rubber Band allocates on
///   first use is allocated there (its effect was not measured here).
final class SpectralNode: PlayRateNode {
    let channels: Int
    let engine: any TimePitchEngine
    var bypassed = false
    private var rate = 1.0
    private var pitchCents = 0.0
    private var engineRatio = 0.0
    private var enginePitch = 0.0
    private var effectiveRate: Double { bypassed ? 1 : rate }

    private let schedule = RateSchedule()
    private let fifo: InputFIFO
    private let scratch: UnsafeMutablePointer<Float>
    private let blockFrames: Int
    /// Input frames kept behind the read or feed position (to prime the engine on entry, and
    /// to resume copying after a bypass).
    private static let history = 16384

    /// The engine is in use.
    private var active = false
    /// The engine took input since it was made or last reset.
    private var engineUsed = false
    /// Copying: the next input frame to output.
    private var readPosition = 0
    /// Engine: the next input frame to feed.
    private var fed = 0
    /// Engine: output frames still to discard (its start delay).
    private var discardLeft = 0
    /// Engine: output owed for the real input fed since entry, and output given since entry.
    private var owed = 0.0
    private var emitted = 0
    /// Engine: once the segment's input is all fed, the output total (since entry) to give.
    private var target: Int?
    private var segmentEnded = false

    init(engine: any TimePitchEngine, channels: Int) {
        self.engine = engine
        self.channels = channels
        blockFrames = max(1, min(engine.maximumProcessFrames, 1024))
        fifo = InputFIFO(channels: channels, capacity: 3 * Self.history + 4096)
        scratch = .allocate(capacity: blockFrames * channels)
        scratch.initialize(repeating: 0, count: blockFrames * channels)
    }

    deinit { scratch.deallocate() }

    var pullPosition: Int { fifo.end }

    var lookahead: Double {
        if !active { return Double(fifo.end - readPosition) }
        return Double(fifo.end - fed) + max(owed - Double(emitted), 0) * effectiveRate
    }

    func setRate(_ newRate: Double) { rate = newRate }

    func setPitch(_ cents: Double) { pitchCents = cents }

    func scheduleRate(_ newRate: Double, at position: Int) {
        if let now = schedule.add(newRate, at: position) { rate = now }
    }

    func passBoundary() { reset() }

    func reset() {
        fifo.reset()
        schedule.removeAll()
        active = false
        readPosition = 0
        fed = 0
        discardLeft = 0
        owed = 0
        emitted = 0
        target = nil
        segmentEnded = false
    }

    func render(into out: UnsafeMutablePointer<Float>, frames: Int, from source: PullSource) -> (Int, PullEnd) {
        if segmentEnded { return (0, .boundary) }
        let ch = channels
        var done = 0
        while done < frames {
            if !active {
                while !schedule.isEmpty && schedule.nextPosition <= readPosition {
                    rate = schedule.nextRate
                    schedule.removeFirst()
                }
                if !bypassed && (rate != 1 || pitchCents != 0) {
                    enter()
                    continue
                }
                if readPosition >= fifo.end {
                    if fifo.ended {
                        segmentEnded = true
                        return (done, .boundary)
                    }
                    fifo.drop(before: readPosition - Self.history)
                    let (got, end) = fifo.pull(frames - done, from: source)
                    if end == .boundary { continue }
                    if got == 0 { return (done, .starved) }
                    continue
                }
                var n = min(fifo.end - readPosition, frames - done)
                if fifo.ended { n = min(n, fifo.endPosition - readPosition) }
                if !schedule.isEmpty { n = min(n, max(schedule.nextPosition - readPosition, 1)) }
                if n <= 0 {
                    segmentEnded = true
                    return (done, .boundary)
                }
                (out + done * ch).update(from: fifo.frame(at: readPosition), count: n * ch)
                readPosition += n
                done += n
                continue
            }
            if bypassed {
                leave()
                continue
            }
            if let target, emitted >= target {
                segmentEnded = true
                return (done, .boundary)
            }
            let available = engine.availableFrames
            if available > 0 {
                if discardLeft > 0 {
                    discardLeft -= engine.retrieve(into: scratch, frames: min(available, discardLeft, blockFrames))
                    continue
                }
                var n = min(available, frames - done)
                if let target { n = min(n, target - emitted) }
                let got = engine.retrieve(into: out + done * ch, frames: n)
                emitted += got
                done += got
                if got == 0 { break }
                continue
            }
            if let target, fed - fifo.endPosition > 4 * Self.history {
                // The engine keeps its last output back however much silence follows: silence
                // stands in for it, so the length stays exact.
                let n = min(target - emitted, frames - done)
                (out + done * ch).update(repeating: 0, count: n * ch)
                emitted += n
                done += n
                continue
            }
            if !feed(from: source) { return (done, .starved) }
        }
        return (done, .filled)
    }

    /// Tells the engine the rate and pitch in effect, when they changed.
    private func updateEngine() {
        let ratio = 1 / effectiveRate
        if ratio != engineRatio {
            engine.setTimeRatio(ratio)
            engineRatio = ratio
        }
        if pitchCents != enginePitch {
            engine.setPitchScale(pow(2, pitchCents / 1200))
            enginePitch = pitchCents
        }
    }

    /// Starts the engine at ``readPosition``, primed with the input before it.
    private func enter() {
        // The engine's state matters only while it is in use: it is reset here, once, and only
        // if it took input since it was made or last reset.
        if engineUsed { engine.reset() }
        engineUsed = true
        engineRatio = 0
        enginePitch = .nan
        updateEngine()
        let pad = engine.startPad
        let held = max(min(pad, readPosition - fifo.start), 0)
        scratch.update(repeating: 0, count: blockFrames * channels)
        var zeros = pad - held
        while zeros > 0 {
            let n = min(zeros, blockFrames)
            engine.process(scratch, frames: n)
            zeros -= n
        }
        var position = readPosition - held
        while position < readPosition {
            let n = min(readPosition - position, blockFrames)
            engine.process(fifo.frame(at: position), frames: n)
            position += n
        }
        discardLeft = engine.startDelay
        fed = readPosition
        owed = 0
        emitted = 0
        target = nil
        active = true
    }

    /// Resumes copying at the input being heard.
    private func leave() {
        let heard = Double(fed) - max(owed - Double(emitted), 0) * rate
        readPosition = min(max(Int(heard.rounded()), fifo.start), fed)
        active = false
    }

    /// Feeds one block (split where a buffer's rate applies); false when the source ran dry.
    private func feed(from source: PullSource) -> Bool {
        // Pulling first: a buffer's rate is scheduled when its first frame is pulled.
        if !fifo.fill(upTo: fed + blockFrames, from: source) { return false }
        while !schedule.isEmpty && schedule.nextPosition <= fed {
            rate = schedule.nextRate
            schedule.removeFirst()
        }
        var n = blockFrames
        if !schedule.isEmpty { n = min(n, schedule.nextPosition - fed) }
        let real = fifo.ended ? fifo.endPosition - fed : n
        if real > 0 { n = min(n, real) }
        updateEngine()
        engine.process(fifo.frame(at: fed), frames: n)
        if real > 0 { owed += Double(n) / effectiveRate }
        fed += n
        if fifo.ended && fed >= fifo.endPosition && target == nil { target = Int(owed.rounded()) }
        fifo.drop(before: fed - Self.history)
        return true
    }
}
