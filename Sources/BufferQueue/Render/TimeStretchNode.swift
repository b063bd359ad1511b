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

    /// Per-buffer rates waiting for their input positions.
    private let schedule = RateSchedule()

    private let window: UnsafeMutablePointer<Float>
    private let fifo: InputFIFO

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
    /// (Fractional: frames are placed to a fraction of a sample, so tones join in phase.)
    private var lastStart = 0.0
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
        fifo = InputFIFO(channels: channels, capacity: 4 * frameLength + 2 * searchRadius + 4 * hop * 4 + 2048)
        accumulator = .allocate(capacity: frameLength * channels)
        accumulator.initialize(repeating: 0, count: frameLength * channels)
        monoCandidates = .allocate(capacity: 2 * searchRadius + 2 * frameLength)
        monoTarget = .allocate(capacity: frameLength)
    }

    deinit {
        window.deallocate()
        accumulator.deallocate()
        monoCandidates.deallocate()
        monoTarget.deallocate()
    }

    /// The input position the next frames pulled from the source will have.
    var pullPosition: Int { fifo.end }

    /// Makes `rate` apply from input `position` on (a buffer's own rate, found when its first
    /// frame was pulled): exactly there while stretching, at the next frame in bypass.
    func scheduleRate(_ newRate: Double, at position: Int) {
        if let now = schedule.add(newRate, at: position) { rate = now }
    }

    /// Input frames taken from the source whose output has not come out yet, as a source
    /// position: what the listener hears is this far behind what was pulled.
    var lookahead: Double {
        if !stretching { return Double(fifo.end - readPosition) }
        return Double(fifo.end) - (mark - Double(ready) * effectiveRate)
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
                while !schedule.isEmpty && schedule.nextPosition <= readPosition {
                    rate = schedule.nextRate
                    schedule.removeFirst()
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
                    let needed = max(Int(nominal.rounded(.down)) + frameLength + 1, Int(lastStart.rounded(.up)) + hop + frameLength + 3)
                    if !fill(upTo: needed, from: source) { return (done, .starved) }
                    makeFrame(searching: false)
                    continue
                }
            }
            if !stretching {
                // Bypass: what the FIFO holds, then straight from the source (bit for bit).
                let held = fifo.end - readPosition
                if held > 0 {
                    var n = min(held, frames - done)
                    if !schedule.isEmpty { n = min(n, max(schedule.nextPosition - readPosition, 1)) }
                    (out + done * channels).update(from: fifo.frame(at: readPosition), count: n * channels)
                    readPosition += n
                    done += n
                    fifo.drop(before: readPosition)
                    continue
                }
                if fifo.ended {
                    segmentEnded = true
                    return (done, .boundary)
                }
                // Not past a scheduled rate change: it applies exactly where it is.
                var wanted = frames - done
                if !schedule.isEmpty { wanted = min(wanted, max(schedule.nextPosition - readPosition, 1)) }
                let (got, end) = source(out + done * channels, wanted)
                done += got
                readPosition += got
                fifo.restart(at: readPosition)
                if end == .boundary {
                    segmentEnded = true
                    return (done, .boundary)
                }
                if end == .starved { return (done, .starved) }
                continue
            }
            // Stretching: make the next frame once its input is here.
            let needed = max(Int(nominal.rounded(.down)) + searchRadius + frameLength + 4, Int(lastStart.rounded(.up)) + hop + frameLength + 3)
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
        fifo.reset()
        ready = 0
        readyOffset = 0
        stretching = false
        readPosition = 0
        remaining = nil
        segmentEnded = false
        virtualPrevious = false
        schedule.removeAll()
        accumulator.update(repeating: 0, count: frameLength * channels)
    }

    /// Pulls input until the FIFO reaches `position` (zeros past the segment's end); when the
    /// end shows up, fixes how much output the segment still makes. False when the source ran dry.
    private func fill(upTo position: Int, from source: PullSource) -> Bool {
        let filled = fifo.fill(upTo: position, from: source)
        if fifo.ended && remaining == nil && stretching {
            // The segment's output ends where its last input frame is heard.
            let tail = (Double(fifo.endPosition) - mark) / effectiveRate
            remaining = ready + max(Int(tail.rounded()), 0)
        }
        return filled
    }

    private func enterStretch() {
        stretching = true
        virtualPrevious = true
        lastStart = Double(readPosition - hop)
        nominal = lastStart
        advanceNominal()
        mark = Double(readPosition)
        accumulator.update(repeating: 0, count: frameLength * channels)
        if fifo.ended { remaining = max(Int(((Double(fifo.endPosition) - mark) / effectiveRate).rounded()), 0) }
    }

    private func leaveStretch() {
        stretching = false
        alignedForLeaving = false
        readPosition = Int(lastStart) + hop   // the last frame sat on a whole frame
        ready = 0
        readyOffset = 0
        accumulator.update(repeating: 0, count: frameLength * channels)
    }

    /// Advances the nominal position by one output hop at the rates in effect: a scheduled change
    /// inside the hop splits it, so output time maps onto input time exactly.
    private func advanceNominal() {
        // The hop's output starts at input `nominal + hop` (its frame's middle).
        nominal = schedule.advance(nominal + Double(hop), by: Double(hop), rate: &rate, bypassed: bypassed) - Double(hop)
    }

    /// Adds the next frame: the start within ±searchRadius of the nominal position that best
    /// continues the previous frame, windowed and overlapped onto the accumulator.
    private func makeFrame(searching: Bool) {
        alignedForLeaving = !searching
        let ch = channels
        // The previous frame's second half moves to the front.
        accumulator.update(from: accumulator + hop * ch, count: hop * ch)
        (accumulator + hop * ch).update(repeating: 0, count: hop * ch)
        let continuation = lastStart + Double(hop)
        if virtualPrevious {
            // The virtual previous frame is the input itself: its falling half is the input.
            let x = fifo.frame(at: Int(continuation))
            for i in 0..<hop {
                let w = window[hop + i]
                for c in 0..<ch { accumulator[i * ch + c] = x[i * ch + c] * w }
            }
            virtualPrevious = false
        }
        let center = Int(nominal.rounded())
        // Room either side for the interpolator's taps.
        let lowest = max(center - searchRadius, fifo.start + 1)
        let highest = max(min(center + searchRadius, fifo.end - frameLength - 3), lowest)
        var start = searching ? bestStart(in: lowest...highest, continuation: continuation, center: center)
            : Double(min(max(Int(nominal.rounded()), fifo.start), max(fifo.end - frameLength, fifo.start)))
        // Across the segment's end (input, then silence) an interpolator would ring: whole frames there.
        if fifo.ended && Int(start) + frameLength + 3 > fifo.endPosition { start = start.rounded() }
        addFrame(at: start)
        lastStart = start
        mark = nominal + Double(hop)
        advanceNominal()
        ready = hop
        readyOffset = 0
        fifo.drop(before: min(Int(lastStart) + hop - 1, Int(nominal.rounded(.down)) - searchRadius - 1))
    }

    /// Catmull-Rom weights of the four samples around a point `t` (0..<1) past the second.
    private static func weights(_ t: Float) -> (Float, Float, Float, Float) {
        let t2 = t * t, t3 = t2 * t
        return ((-t3 + 2 * t2 - t) / 2, (3 * t3 - 5 * t2 + 2) / 2, (-3 * t3 + 4 * t2 + t) / 2, (t3 - t2) / 2)
    }

    /// Windows the input from `start` (a fraction of a sample allowed: cubic interpolation) and
    /// adds it onto the accumulator.
    private func addFrame(at start: Double) {
        let ch = channels
        let base = Int(start.rounded(.down))
        let t = Float(start - Double(base))
        if t == 0 {
            let x = fifo.frame(at: base)
            for i in 0..<frameLength {
                let w = window[i]
                for c in 0..<ch { accumulator[i * ch + c] += x[i * ch + c] * w }
            }
            return
        }
        let (a0, a1, a2, a3) = Self.weights(t)
        let x = fifo.frame(at: base - 1)
        for i in 0..<frameLength {
            let w = window[i]
            let p = x + i * ch
            for c in 0..<ch {
                let v = a0 * p[c] + a1 * p[ch + c] + a2 * p[2 * ch + c] + a3 * p[3 * ch + c]
                accumulator[i * ch + c] += v * w
            }
        }
    }

    /// The start in `range` whose first half is most like the input at `continuation`: coarse
    /// steps over the range on every fourth sample, then every start near the best one.
    private func bestStart(in range: ClosedRange<Int>, continuation: Double, center: Int) -> Double {
        if range.lowerBound == range.upperBound { return Double(range.lowerBound) }
        let ch = channels
        let span = range.upperBound - range.lowerBound + hop
        // Mono views (the first two channels' average) of the candidates and the target.
        let candidates = fifo.frame(at: range.lowerBound)
        for i in 0..<span { monoCandidates[i] = ch == 1 ? candidates[i] : (candidates[i * ch] + candidates[i * ch + 1]) * 0.5 }
        let base = Int(continuation.rounded(.down))
        let t = Float(continuation - Double(base))
        let (a0, a1, a2, a3) = Self.weights(t)
        let target = fifo.frame(at: t == 0 ? base : base - 1)
        for i in 0..<hop {
            func mono(_ k: Int) -> Float { ch == 1 ? target[k] : (target[k * ch] + target[k * ch + 1]) * 0.5 }
            monoTarget[i] = t == 0 ? mono(i) : a0 * mono(i) + a1 * mono(i + 1) + a2 * mono(i + 2) + a3 * mono(i + 3)
        }
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
            return similarity - 0.05 * abs(similarity) * distance * distance
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
        // To a fraction of a sample: the vertex of the parabola through the best and its neighbours.
        guard best > 0, best < width else { return Double(range.lowerBound + best) }
        let before = score(best - 1, step: 1), after = score(best + 1, step: 1)
        let curvature = before - 2 * bestScore + after
        guard curvature < 0 else { return Double(range.lowerBound + best) }
        let fraction = min(max(0.5 * (before - after) / curvature, -0.5), 0.5)
        return Double(range.lowerBound + best) + Double(fraction)
    }
}
