#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the render stage needs of a play-rate stage (``TimeStretchNode``, ``VarispeedNode``).
protocol PlayRateNode: AnyObject {
    var bypassed: Bool { get set }
    var pullPosition: Int { get }
    var lookahead: Double { get }
    func setRate(_ rate: Double)
    /// Pitch shift in cents from the next block on (only the spectral node applies it).
    func setPitch(_ cents: Double)
    func scheduleRate(_ rate: Double, at position: Int)
    func render(into out: UnsafeMutablePointer<Float>, frames: Int, from source: PullSource) -> (Int, PullEnd)
    func passBoundary()
    func reset()
}

extension TimeStretchNode: PlayRateNode {}

extension PlayRateNode {
    func setPitch(_ cents: Double) {}
}

/// Rate changes waiting for the input position where they apply (a buffer's own rate, found when
/// its first frame was pulled), oldest first. Fixed capacity: nothing allocates after `init`.
final class RateSchedule {
    static let capacity = 32
    private let positions = UnsafeMutablePointer<Int>.allocate(capacity: RateSchedule.capacity)
    private let rates = UnsafeMutablePointer<Double>.allocate(capacity: RateSchedule.capacity)
    private var count = 0

    deinit {
        positions.deallocate()
        rates.deallocate()
    }

    var isEmpty: Bool { count == 0 }
    var nextPosition: Int { positions[0] }
    var nextRate: Double { rates[0] }

    /// Adds a change; when full, takes out the oldest and returns its rate, which applies now.
    func add(_ rate: Double, at position: Int) -> Double? {
        var now: Double?
        if count == Self.capacity {
            now = rates[0]
            removeFirst()
        }
        positions[count] = position
        rates[count] = rate
        count += 1
        return now
    }

    func removeFirst() {
        count -= 1
        if count > 0 {
            positions.update(from: positions + 1, count: count)
            rates.update(from: rates + 1, count: count)
        }
    }

    func removeAll() { count = 0 }

    /// The input position `outputFrames` output frames after `position`, moving at `rate` until
    /// each scheduled change it reaches (which then becomes `rate`): a change inside the step
    /// splits it, so output time maps onto input time exactly. Bypassed, every rate counts as 1.
    func advance(_ position: Double, by outputFrames: Double, rate: inout Double, bypassed: Bool) -> Double {
        var position = position, left = outputFrames
        while count > 0 {
            let effective = bypassed ? 1 : rate
            let change = Double(positions[0])
            if change > position + left * effective { break }
            if change > position {
                left -= (change - position) / effective
                position = change
            }
            rate = rates[0]
            removeFirst()
        }
        return position + left * (bypassed ? 1 : rate)
    }
}

/// Input frames a play-rate node holds, addressed by input position (frames since the segment
/// began). Once the source reports the segment's end, reads past it are zeros. Fixed capacity.
final class InputFIFO {
    let channels: Int
    let capacity: Int
    private let storage: UnsafeMutablePointer<Float>
    /// Input position of the first frame held.
    private(set) var start = 0
    private(set) var count = 0
    var end: Int { start + count }
    /// The source reported the segment's end, at ``endPosition``.
    private(set) var ended = false
    private(set) var endPosition = 0

    init(channels: Int, capacity: Int) {
        self.channels = channels
        self.capacity = capacity
        storage = .allocate(capacity: capacity * channels)
    }

    deinit { storage.deallocate() }

    /// The frame at input `position` (held).
    func frame(at position: Int) -> UnsafeMutablePointer<Float> { storage + (position - start) * channels }

    /// Empties it for a new segment.
    func reset() {
        start = 0
        count = 0
        ended = false
        endPosition = 0
    }

    /// Empties it within the segment: the next frame pulled has input position `position`.
    func restart(at position: Int) {
        start = position
        count = 0
    }

    /// Pulls from `source` until frames up to `target` are held (zeros past the segment's end).
    /// Returns false when the source ran dry first.
    func fill(upTo target: Int, from source: PullSource) -> Bool {
        while end < target {
            let room = min(capacity - count, target - end + 1024)
            guard room > 0 else { return true }
            if ended {
                let n = min(target - end, capacity - count)
                (storage + count * channels).update(repeating: 0, count: n * channels)
                count += n
                continue
            }
            let (got, why) = source(storage + count * channels, room)
            count += got
            if why == .boundary {
                ended = true
                endPosition = end
                continue
            }
            if why == .starved && end < target { return false }
        }
        return true
    }

    /// Pulls once, up to `frames` frames; returns why it stopped.
    func pull(_ frames: Int, from source: PullSource) -> (Int, PullEnd) {
        let (got, why) = source(storage + count * channels, min(frames, capacity - count))
        count += got
        if why == .boundary { ended = true; endPosition = end }
        return (got, why)
    }

    /// Drops the frames before input `position` (nothing needs them any more).
    func drop(before position: Int) {
        let n = min(max(position - start, 0), count)
        guard n > 0 else { return }
        count -= n
        if count > 0 { storage.update(from: storage + n * channels, count: count * channels) }
        start += n
    }
}

/// Play rate that changes the pitch with it, like a tape or turntable (Apple's `Varispeed`
/// time-pitch algorithm): band-limited interpolation of the input at a read position that moves
/// `rate` input frames per output frame.
///
/// The interpolator is a Kaiser-windowed sinc (16 zero crossings a side at rate ≤ 1, widened and
/// its cut-off lowered to `0.97 / rate` above 1, so playing faster does not alias), read from a
/// table with linear interpolation. Output frame E corresponds to input position `E × rate`
/// (integrated over rate changes in double precision); a segment of N frames at rate r makes
/// `round(N / r)` frames. At rate 1 on a whole-frame position (always, unless the rate changed
/// on the way) it copies, bit for bit; between frames it keeps interpolating. No allocation
/// after `init`.
final class VarispeedNode: PlayRateNode {
    let channels: Int
    var bypassed = false
    private(set) var rate: Double = 1
    private var effectiveRate: Double { bypassed ? 1 : rate }

    private static let zeroCrossings = 16
    private static let tableResolution = 512
    private static let maximumRate = 4.0
    private let table: UnsafeMutablePointer<Float>
    private let tableCount: Int
    private let maximumHalfWidth: Int

    private let fifo: InputFIFO
    private var segmentEnded = false
    /// The input position of the next output frame.
    private var position = 0.0

    /// Per-buffer rates waiting for their input positions.
    private let schedule = RateSchedule()

    init(channels: Int) {
        self.channels = channels
        let z = Self.zeroCrossings, resolution = Self.tableResolution
        tableCount = z * resolution + 2
        table = .allocate(capacity: tableCount)
        // Kaiser window, β = 9: sidelobes near −90 dB.
        func besselI0(_ x: Double) -> Double {
            var sum = 1.0, term = 1.0, k = 1.0
            while term > 1e-12 * sum { term *= (x / (2 * k)) * (x / (2 * k)); sum += term; k += 1 }
            return sum
        }
        let beta = 9.0
        for i in 0..<tableCount {
            let u = Double(i) / Double(resolution)
            let sinc = u == 0 ? 1 : sin(Double.pi * u) / (Double.pi * u)
            let ratio = u / Double(z)
            let window = ratio >= 1 ? 0 : besselI0(beta * (1 - ratio * ratio).squareRoot()) / besselI0(beta)
            table[i] = Float(sinc * window)
        }
        maximumHalfWidth = Int((Double(z) * Self.maximumRate / 0.97).rounded(.up)) + 1
        fifo = InputFIFO(channels: channels, capacity: 8 * maximumHalfWidth + 8192)
    }

    deinit {
        table.deallocate()
    }

    var pullPosition: Int { fifo.end }
    var lookahead: Double { Double(fifo.end) - position }

    func setRate(_ newRate: Double) { rate = newRate }

    func scheduleRate(_ newRate: Double, at position: Int) {
        if let now = schedule.add(newRate, at: position) { rate = now }
    }

    func passBoundary() { reset() }

    func reset() {
        fifo.reset()
        segmentEnded = false
        position = 0
        schedule.removeAll()
    }

    func render(into out: UnsafeMutablePointer<Float>, frames: Int, from source: PullSource) -> (Int, PullEnd) {
        if segmentEnded { return (0, .boundary) }
        let ch = channels
        var done = 0
        while done < frames {
            while !schedule.isEmpty && Double(schedule.nextPosition) <= position {
                rate = schedule.nextRate
                schedule.removeFirst()
            }
            let r = effectiveRate
            if fifo.ended && position > Double(fifo.endPosition) - 0.5 * r {
                // Past the segment's last frame: exactly round(N / r) frames came out.
                segmentEnded = true
                return (done, .boundary)
            }
            if r == 1 && position == position.rounded() {
                // As recorded, on a whole frame: copy. (A position left between frames by a rate
                // change keeps being interpolated, so that the timeline stays exact.)
                let index = Int(position)
                if index >= fifo.end {
                    if fifo.ended { segmentEnded = true; return (done, .boundary) }
                    // Through the FIFO, so that a later rate change has the history its kernel reads.
                    fifo.drop(before: index - maximumHalfWidth)
                    let (got, end) = fifo.pull(frames - done, from: source)
                    if end == .boundary { continue }
                    if got == 0 { return (done, .starved) }
                    continue
                }
                var n = min(fifo.end - index, frames - done)
                if !schedule.isEmpty { n = min(n, max(schedule.nextPosition - index, 1)) }
                (out + done * ch).update(from: fifo.frame(at: index), count: n * ch)
                done += n
                position += Double(n)
                fifo.drop(before: Int(position) - maximumHalfWidth)
                continue
            }
            // Interpolate: the kernel reaches `halfWidth` frames either side.
            let cutoff = min(1, 0.97 / r)
            let halfWidth = Int((Double(Self.zeroCrossings) / cutoff).rounded(.up)) + 1
            let needed = Int(position.rounded(.down)) + halfWidth + 1
            if !fifo.fill(upTo: needed, from: source) { return (done, .starved) }
            interpolate(into: out + done * ch, cutoff: cutoff, halfWidth: halfWidth)
            done += 1
            advance()
            if done % 64 == 0 { fifo.drop(before: Int(position) - halfWidth - 1) }
        }
        fifo.drop(before: Int(position) - maximumHalfWidth - 1)
        return (done, .filled)
    }

    /// Moves the read position on by one output frame at the rates in effect.
    private func advance() {
        position = schedule.advance(position, by: 1, rate: &rate, bypassed: bypassed)
    }

    /// One output frame at ``position``.
    private func interpolate(into frame: UnsafeMutablePointer<Float>, cutoff: Double, halfWidth: Int) {
        let ch = channels
        for c in 0..<ch { frame[c] = 0 }
        let base = Int(position.rounded(.down))
        let fraction = position - Double(base)
        let scale = Double(Self.tableResolution) * cutoff
        var gain: Float = 0
        for k in (base - halfWidth + 1)...(base + halfWidth) {
            let u = abs(Double(k - base) - fraction) * scale
            let i = Int(u)
            guard i + 1 < tableCount else { continue }
            let t = Float(u - Double(i))
            let w = table[i] + (table[i + 1] - table[i]) * t
            gain += w
            // Before the segment's start (or not held any more): silence.
            guard k >= fifo.start, k < fifo.end else { continue }
            let x = fifo.frame(at: k)
            for c in 0..<ch { frame[c] += w * x[c] }
        }
        // Normalise the kernel's DC gain (the table sum is exactly 1/cutoff only in the limit).
        if gain != 0 { for c in 0..<ch { frame[c] /= gain } }
    }
}
