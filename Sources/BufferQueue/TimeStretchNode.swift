#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Play rate with the pitch kept, in the time domain: WSOLA (waveform-similarity overlap-add, the
/// method of SoX's `tempo`, mpv's scaletempo2 and GStreamer's scaletempo). Apple calls the
/// algorithm `TimeDomain`.
///
/// Output is built from Hann-windowed frames of `2 × hop` input frames, overlapped by half: each
/// output hop advances the nominal input position by `hop × rate`, and each frame's exact start
/// is searched within ±`searchRadius` of that nominal position for the best match (normalised
/// cross-correlation) with the natural continuation of the previous frame, so periodic waveforms
/// join in phase and the pitch stays.
///
/// Properties the render path relies on:
/// - **Bypass is bit-exact**: at rate 1 the input is copied. Entering and leaving the stretch
///   joins without a step: the first frame overlaps a virtual frame that is the input itself,
///   and leaving resumes the input exactly where the last frame's second half reads it.
/// - **Lengths**: output frame E corresponds to input position `start + E × rate` (rates
///   integrated over time, in `Double`, so nothing drifts over hours). At a segment's end the
///   output stops at exactly that correspondence for the segment's last input frame.
/// - No allocation after `init`; rate changes take effect at the next hop (`hop` ≈ 15 ms).
final class TimeStretchNode {
    let channels: Int
    let hop: Int
    let frameLength: Int
    let searchRadius: Int
    /// The rate in effect (0.25...4); set it with ``setRate(_:)``.
    private(set) var rate: Double = 1

    /// Changes the rate from the next output hop on (the frames already made keep theirs).
    func setRate(_ newRate: Double) {
        rate = newRate
        // The next frame's position was advanced at the old rate: advance it again at the new one.
        if stretching && !virtualPrevious { nominal = mark + Double(hop) * effectiveRate - Double(hop) }
    }
    /// Passes input through whatever the rate (time-pitch bypass).
    var bypassed = false
    private var effectiveRate: Double { bypassed ? 1 : rate }

    /// Rate changes waiting for the input position where they apply (per-buffer rates).
    private static let scheduleCapacity = 32
    private let scheduledPositions: UnsafeMutablePointer<Int>
    private let scheduledRates: UnsafeMutablePointer<Double>
    private var scheduledCount = 0

    private let window: UnsafeMutablePointer<Float>
    private let fifoCapacity: Int
    private let fifo: UnsafeMutablePointer<Float>
    /// Input position (frames since the segment began) of `fifo[0]`.
    private var fifoStart = 0
    private var fifoCount = 0
    private var fifoEnd: Int { fifoStart + fifoCount }
    /// The source reported the end of the segment at ``fifoEnd`` (zeros past it are padding).
    private var inputEnded = false
    private var inputEnd = 0

    /// Overlap-add accumulator: `[0, hop)` final once a frame is added, `[hop, 2·hop)` pending.
    private let accumulator: UnsafeMutablePointer<Float>
    private var readyOffset = 0
    private var ready = 0
    private let monoCandidates: UnsafeMutablePointer<Float>
    private let monoTarget: UnsafeMutablePointer<Float>

    private var stretching = false
    /// Bypass: the next input frame to output.
    private var readPosition = 0
    /// Stretching: nominal input position of the next frame, and the previous frame's start.
    private var nominal = 0.0
    private var lastStart = 0
    /// The previous frame is virtual (the input itself from `lastStart + hop`).
    private var virtualPrevious = false
    /// The last frame sat exactly at its nominal position (ready to leave the stretch).
    private var alignedForLeaving = false
    /// Stretching: the input position of the output at the end of the ready block.
    private var mark = 0.0
    /// Output frames still to emit once the segment's input ended (nil before).
    private var remaining: Int?
    private var segmentEnded = false

    init(channels: Int, sampleRate: Double) {
        self.channels = channels
        hop = max(Int((sampleRate * 0.015).rounded()), 32)
        frameLength = 2 * hop
        searchRadius = max(Int((sampleRate * 0.012).rounded()), 16)
        window = .allocate(capacity: frameLength)
        for i in 0..<frameLength {
            // Periodic Hann: overlapping halves sum to exactly one.
            let phase: Double = 2 * Double.pi * Double(i) / Double(frameLength)
            window[i] = Float(0.5 - 0.5 * cos(phase))
        }
        fifoCapacity = 4 * frameLength + 2 * searchRadius + 4 * hop * 4 + 2048
        fifo = .allocate(capacity: fifoCapacity * channels)
        accumulator = .allocate(capacity: frameLength * channels)
        accumulator.initialize(repeating: 0, count: frameLength * channels)
        monoCandidates = .allocate(capacity: 2 * searchRadius + 2 * frameLength)
        monoTarget = .allocate(capacity: frameLength)
        scheduledPositions = .allocate(capacity: Self.scheduleCapacity)
        scheduledRates = .allocate(capacity: Self.scheduleCapacity)
    }

    deinit {
        window.deallocate()
        fifo.deallocate()
        accumulator.deallocate()
        monoCandidates.deallocate()
        monoTarget.deallocate()
        scheduledPositions.deallocate()
        scheduledRates.deallocate()
    }

    /// The input position the next frames pulled from the source will have.
    var pullPosition: Int { fifoEnd }

    /// Makes `rate` apply from input `position` on (a buffer's own rate, found when its first
    /// frame was pulled): exactly there while stretching, at the next frame in bypass.
    func scheduleRate(_ newRate: Double, at position: Int) {
        if scheduledCount == Self.scheduleCapacity {
            // Full: the oldest applies now.
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

    /// Input frames taken from the source whose output has not come out yet, as a source
    /// position: what the listener hears is this far behind what was pulled.
    var lookahead: Double {
        if !stretching { return Double(fifoEnd - readPosition) }
        return Double(fifoEnd) - (mark - Double(ready) * effectiveRate)
    }

    /// Writes up to `frames` frames, pulling input from `source`; ``PullEnd/boundary`` once the
    /// segment's last output frame is out (call ``passBoundary()`` before pulling on).
    func render(into out: UnsafeMutablePointer<Float>, frames: Int, from source: PullSource) -> (Int, PullEnd) {
        if segmentEnded { return (0, .boundary) }
        var done = 0
        while done < frames {
            if ready > 0 {
                var n = min(ready, frames - done)
                if let left = remaining { n = min(n, left) }
                if n > 0 {
                    (out + done * channels).update(from: accumulator + readyOffset * channels, count: n * channels)
                    ready -= n
                    readyOffset += n
                    done += n
                    if remaining != nil { remaining! -= n }
                }
            }
            if let left = remaining, left <= 0 {
                segmentEnded = true
                return (done, .boundary)
            }
            if done >= frames { break }
            if ready > 0 { continue }
            if !stretching {
                while scheduledCount > 0 && scheduledPositions[0] <= readPosition {
                    rate = scheduledRates[0]
                    dropScheduled()
                }
            }
            let wantStretch = effectiveRate != 1
            if wantStretch && !stretching { enterStretch() }
            if !wantStretch && stretching && remaining == nil {
                if alignedForLeaving {
                    leaveStretch()
                } else {
                    // One frame exactly at its nominal position first: leaving then resumes the
                    // input exactly where the output maps to, so the timeline does not jump.
                    let needed = max(Int(nominal.rounded(.down)) + frameLength + 1, lastStart + hop + frameLength)
                    if !fill(upTo: needed, from: source) { return (done, .starved) }
                    makeFrame(searching: false)
                    continue
                }
            }
            if !stretching {
                // Bypass: what the FIFO holds, then straight from the source (bit for bit).
                let held = fifoEnd - readPosition
                if held > 0 {
                    var n = min(held, frames - done)
                    if scheduledCount > 0 { n = min(n, max(scheduledPositions[0] - readPosition, 1)) }
                    (out + done * channels).update(from: fifo + (readPosition - fifoStart) * channels, count: n * channels)
                    readPosition += n
                    done += n
                    dropInput(before: readPosition)
                    continue
                }
                if inputEnded {
                    segmentEnded = true
                    return (done, .boundary)
                }
                // Not past a scheduled rate change: it applies exactly where it is.
                var wanted = frames - done
                if scheduledCount > 0 { wanted = min(wanted, max(scheduledPositions[0] - readPosition, 1)) }
                let (got, end) = source(out + done * channels, wanted)
                done += got
                readPosition += got
                fifoStart = readPosition
                fifoCount = 0
                if end == .boundary {
                    segmentEnded = true
                    return (done, .boundary)
                }
                if end == .starved { return (done, .starved) }
                continue
            }
            // Stretching: make the next frame once its input is here.
            let needed = max(Int(nominal.rounded(.down)) + searchRadius + frameLength + 1, lastStart + hop + frameLength)
            if !fill(upTo: needed, from: source) { return (done, .starved) }
            makeFrame(searching: true)
        }
        return (done, .filled)
    }

    /// After ``render(into:frames:from:)`` returned ``PullEnd/boundary``: a new segment begins
    /// (positions restart at 0).
    func passBoundary() { reset() }

    /// Forgets everything (a discard, a boundary).
    func reset() {
        fifoStart = 0
        fifoCount = 0
        inputEnded = false
        inputEnd = 0
        ready = 0
        readyOffset = 0
        stretching = false
        readPosition = 0
        remaining = nil
        segmentEnded = false
        virtualPrevious = false
        scheduledCount = 0
        accumulator.update(repeating: 0, count: frameLength * channels)
    }

    /// Pulls input until the FIFO reaches `position` (padding with zeros past the segment's end).
    /// Returns false when the source ran dry first.
    private func fill(upTo position: Int, from source: PullSource) -> Bool {
        while fifoEnd < position {
            // The FIFO always starts at storage index 0 (``dropInput(before:)`` moves it there).
            let room = min(fifoCapacity - fifoCount, position - fifoEnd + 1024)
            guard room > 0 else { return true }
            if inputEnded {
                (fifo + fifoCount * channels).update(repeating: 0, count: (position - fifoEnd) * channels)
                fifoCount += position - fifoEnd
                return true
            }
            let (got, end) = source(fifo + fifoCount * channels, room)
            fifoCount += got
            if end == .boundary {
                inputEnded = true
                inputEnd = fifoEnd
                // The segment's output ends where its last input frame is heard.
                let tail = stretching ? (Double(inputEnd) - mark) / effectiveRate : 0
                remaining = ready + max(Int(tail.rounded()), 0)
                continue
            }
            if end == .starved && fifoEnd < position { return false }
        }
        return true
    }

    /// Drops input before `position` (nothing needs it any more).
    private func dropInput(before position: Int) {
        let drop = min(max(position - fifoStart, 0), fifoCount)
        guard drop > 0 else { return }
        fifoCount -= drop
        if fifoCount > 0 { fifo.update(from: fifo + drop * channels, count: fifoCount * channels) }
        fifoStart += drop
    }

    private func enterStretch() {
        stretching = true
        virtualPrevious = true
        lastStart = readPosition - hop
        nominal = Double(lastStart)
        advanceNominal()
        mark = Double(readPosition)
        accumulator.update(repeating: 0, count: frameLength * channels)
        if inputEnded { remaining = max(Int(((Double(inputEnd) - mark) / effectiveRate).rounded()), 0) }
    }

    private func leaveStretch() {
        stretching = false
        alignedForLeaving = false
        readPosition = lastStart + hop
        ready = 0
        readyOffset = 0
        accumulator.update(repeating: 0, count: frameLength * channels)
    }

    /// Advances the nominal position by one output hop at the rates in effect: a scheduled change
    /// inside the hop splits it, so output time maps onto input time exactly.
    private func advanceNominal() {
        var outputLeft = Double(hop)
        var position = nominal + Double(hop)   // the input position at the hop's start, in output terms
        while scheduledCount > 0 {
            let change = Double(scheduledPositions[0])
            let reach = position + outputLeft * effectiveRate
            if change > reach { break }
            if change > position {
                outputLeft -= (change - position) / effectiveRate
                position = change
            }
            rate = scheduledRates[0]
            dropScheduled()
        }
        position += outputLeft * effectiveRate
        nominal = position - Double(hop)
    }

    /// Adds the next frame: the start within ±searchRadius of the nominal position that best
    /// continues the previous frame, windowed and overlapped onto the accumulator.
    private func makeFrame(searching: Bool) {
        alignedForLeaving = !searching
        let ch = channels
        // The previous frame's second half moves to the front.
        accumulator.update(from: accumulator + hop * ch, count: hop * ch)
        (accumulator + hop * ch).update(repeating: 0, count: hop * ch)
        let continuation = lastStart + hop
        if virtualPrevious {
            // The virtual previous frame is the input itself: its falling half is the input.
            let x = fifo + (continuation - fifoStart) * ch
            for i in 0..<hop {
                let w = window[hop + i]
                for c in 0..<ch { accumulator[i * ch + c] = x[i * ch + c] * w }
            }
            virtualPrevious = false
        }
        let center = Int(nominal.rounded())
        let lowest = max(center - searchRadius, fifoStart)
        let highest = max(min(center + searchRadius, fifoEnd - frameLength), lowest)
        let start = searching ? bestStart(in: lowest...highest, continuation: continuation, center: center)
            : min(max(Int(nominal.rounded()), fifoStart), max(fifoEnd - frameLength, fifoStart))
        let x = fifo + (start - fifoStart) * ch
        for i in 0..<frameLength {
            let w = window[i]
            for c in 0..<ch { accumulator[i * ch + c] += x[i * ch + c] * w }
        }
        lastStart = start
        mark = nominal + Double(hop)
        advanceNominal()
        ready = hop
        readyOffset = 0
        dropInput(before: min(lastStart + hop, Int(nominal.rounded(.down)) - searchRadius))
    }

    /// The start in `range` whose first half is most like the input at `continuation`: coarse
    /// steps over the range on every fourth sample, then every start near the best one.
    private func bestStart(in range: ClosedRange<Int>, continuation: Int, center: Int) -> Int {
        if range.lowerBound == range.upperBound { return range.lowerBound }
        let ch = channels
        let span = range.upperBound - range.lowerBound + hop
        // Mono views (the first two channels' average) of the candidates and the target.
        let candidates = fifo + (range.lowerBound - fifoStart) * ch
        let target = fifo + (continuation - fifoStart) * ch
        for i in 0..<span { monoCandidates[i] = ch == 1 ? candidates[i] : (candidates[i * ch] + candidates[i * ch + 1]) * 0.5 }
        for i in 0..<hop { monoTarget[i] = ch == 1 ? target[i] : (target[i * ch] + target[i * ch + 1]) * 0.5 }
        func score(_ offset: Int, step: Int) -> Float {
            var dot: Float = 0, energy: Float = 1e-9
            var i = 0
            while i < hop {
                let v = monoCandidates[offset + i]
                dot += v * monoTarget[i]
                energy += v * v
                i += step
            }
            let similarity = dot / energy.squareRoot()
            // Among near-equal matches (a periodic signal has one per period) prefer the nominal
            // position: a gentle parabolic tilt.
            let distance = Float(range.lowerBound + offset - center) / Float(searchRadius)
            return similarity - 0.25 * abs(similarity) * distance * distance
        }
        let width = range.upperBound - range.lowerBound
        var best = 0
        var bestScore = -Float.infinity
        var offset = 0
        while offset <= width {
            let s = score(offset, step: 4)
            if s > bestScore { bestScore = s; best = offset }
            offset += 4
        }
        let coarse = best
        bestScore = -Float.infinity
        for offset in max(coarse - 3, 0)...min(coarse + 3, width) {
            let s = score(offset, step: 1)
            if s > bestScore { bestScore = s; best = offset }
        }
        return range.lowerBound + best
    }
}
