#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the render stage needs of a play-rate stage (``TimeStretchNode``, ``VarispeedNode``).
protocol PlayRateNode: AnyObject {
    var channels: Int { get }
    var bypassed: Bool { get set }
    var pullPosition: Int { get }
    var lookahead: Double { get }
    func setRate(_ rate: Double)
    func scheduleRate(_ rate: Double, at position: Int)
    func render(into out: UnsafeMutablePointer<Float>, frames: Int, from source: PullSource) -> (Int, PullEnd)
    func passBoundary()
    func reset()
}

extension TimeStretchNode: PlayRateNode {}

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

    private let fifoCapacity: Int
    private let fifo: UnsafeMutablePointer<Float>
    private var fifoStart = 0
    private var fifoCount = 0
    private var fifoEnd: Int { fifoStart + fifoCount }
    private var inputEnded = false
    private var inputEnd = 0
    private var segmentEnded = false
    /// The input position of the next output frame.
    private var position = 0.0

    private static let scheduleCapacity = 32
    private let scheduledPositions: UnsafeMutablePointer<Int>
    private let scheduledRates: UnsafeMutablePointer<Double>
    private var scheduledCount = 0

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
        fifoCapacity = 8 * maximumHalfWidth + 8192
        fifo = .allocate(capacity: fifoCapacity * channels)
        scheduledPositions = .allocate(capacity: Self.scheduleCapacity)
        scheduledRates = .allocate(capacity: Self.scheduleCapacity)
    }

    deinit {
        table.deallocate()
        fifo.deallocate()
        scheduledPositions.deallocate()
        scheduledRates.deallocate()
    }

    var pullPosition: Int { fifoEnd }
    var lookahead: Double { Double(fifoEnd) - position }

    func setRate(_ newRate: Double) { rate = newRate }

    func scheduleRate(_ newRate: Double, at position: Int) {
        if scheduledCount == Self.scheduleCapacity {
            rate = scheduledRates[0]
            dropScheduled()
        }
        scheduledPositions[scheduledCount] = position
        scheduledRates[scheduledCount] = newRate
        scheduledCount += 1
    }

    private func dropScheduled() {
        scheduledCount -= 1
        if scheduledCount > 0 {
            scheduledPositions.update(from: scheduledPositions + 1, count: scheduledCount)
            scheduledRates.update(from: scheduledRates + 1, count: scheduledCount)
        }
    }

    func passBoundary() { reset() }

    func reset() {
        fifoStart = 0
        fifoCount = 0
        inputEnded = false
        inputEnd = 0
        segmentEnded = false
        position = 0
        scheduledCount = 0
    }

    func render(into out: UnsafeMutablePointer<Float>, frames: Int, from source: PullSource) -> (Int, PullEnd) {
        if segmentEnded { return (0, .boundary) }
        let ch = channels
        var done = 0
        while done < frames {
            while scheduledCount > 0 && Double(scheduledPositions[0]) <= position {
                rate = scheduledRates[0]
                dropScheduled()
            }
            let r = effectiveRate
            if inputEnded && position > Double(inputEnd) - 0.5 * r {
                // Past the segment's last frame: exactly round(N / r) frames came out.
                segmentEnded = true
                return (done, .boundary)
            }
            if r == 1 && position == position.rounded() {
                // As recorded, on a whole frame: copy. (A position left between frames by a rate
                // change keeps being interpolated, so that the timeline stays exact.)
                let index = Int(position)
                if index >= fifoEnd {
                    if inputEnded { segmentEnded = true; return (done, .boundary) }
                    // Through the FIFO, so that a later rate change has the history its kernel reads.
                    drop(before: index - maximumHalfWidth)
                    let wanted = min(frames - done, fifoCapacity - fifoCount)
                    let (got, end) = source(fifo + fifoCount * ch, wanted)
                    fifoCount += got
                    if end == .boundary {
                        inputEnded = true
                        inputEnd = fifoEnd
                        continue
                    }
                    if got == 0 { return (done, .starved) }
                    continue
                }
                var n = min(fifoEnd - index, frames - done)
                if scheduledCount > 0 { n = min(n, max(scheduledPositions[0] - index, 1)) }
                (out + done * ch).update(from: fifo + (index - fifoStart) * ch, count: n * ch)
                done += n
                position += Double(n)
                drop(before: Int(position) - maximumHalfWidth)
                continue
            }
            // Interpolate: the kernel reaches `halfWidth` frames either side.
            let cutoff = min(1, 0.97 / r)
            let halfWidth = Int((Double(Self.zeroCrossings) / cutoff).rounded(.up)) + 1
            let needed = Int(position.rounded(.down)) + halfWidth + 1
            if !fill(upTo: needed, from: source) { return (done, .starved) }
            interpolate(into: out + done * ch, cutoff: cutoff, halfWidth: halfWidth)
            done += 1
            advance()
            if done % 64 == 0 { drop(before: Int(position) - halfWidth - 1) }
        }
        drop(before: Int(position) - maximumHalfWidth - 1)
        return (done, .filled)
    }

    /// Moves the read position on by one output frame at the rates in effect: a scheduled change
    /// inside the step splits it, so output time maps onto input time exactly.
    private func advance() {
        var step = 1.0   // output frames left to move
        while scheduledCount > 0 {
            let change = Double(scheduledPositions[0])
            let reach = position + step * effectiveRate
            if change > reach { break }
            if change > position {
                step -= (change - position) / effectiveRate
                position = change
            }
            rate = scheduledRates[0]
            dropScheduled()
        }
        position += step * effectiveRate
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
            guard k >= fifoStart, k < fifoEnd else { continue }
            let x = fifo + (k - fifoStart) * ch
            for c in 0..<ch { frame[c] += w * x[c] }
        }
        // Normalise the kernel's DC gain (the table sum is exactly 1/cutoff only in the limit).
        if gain != 0 { for c in 0..<ch { frame[c] /= gain } }
    }

    /// Pulls input until the FIFO reaches `target` (zeros past the segment's end).
    private func fill(upTo target: Int, from source: PullSource) -> Bool {
        while fifoEnd < target {
            let room = min(fifoCapacity - fifoCount, target - fifoEnd + 1024)
            guard room > 0 else { return true }
            if inputEnded {
                let n = min(target - fifoEnd, fifoCapacity - fifoCount)
                (fifo + fifoCount * channels).update(repeating: 0, count: n * channels)
                fifoCount += n
                continue
            }
            let (got, end) = source(fifo + fifoCount * channels, room)
            fifoCount += got
            if end == .boundary {
                inputEnded = true
                inputEnd = fifoEnd
                continue
            }
            if end == .starved && fifoEnd < target { return false }
        }
        return true
    }

    private func drop(before frame: Int) {
        let count = min(max(frame - fifoStart, 0), fifoCount)
        guard count > 0 else { return }
        fifoCount -= count
        if fifoCount > 0 { fifo.update(from: fifo + count * channels, count: fifoCount * channels) }
        fifoStart += count
    }
}
