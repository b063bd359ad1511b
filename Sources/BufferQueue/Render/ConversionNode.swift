/// How a pull ended.
package enum PullEnd: Sendable {
    /// It gave every frame asked for.
    case filled
    /// Nothing more is there yet (an underrun, or a queue with nothing enqueued).
    case starved
    /// A segment of the stream ended here (a flush, an asynchronous stop's end or a format
    /// change): whatever a stage holds must come out before anything that follows.
    case boundary
}

/// Pulls up to `frames` interleaved frames into the pointer; returns how many and why it stopped.
typealias PullSource = (_ into: UnsafeMutablePointer<Float>, _ frames: Int) -> (Int, PullEnd)

/// Rate and channel conversion in pull style, for the render path and ``AudioConverter``.
///
/// It asks its source for input as it needs it and writes output frames in the output's channel
/// count. Lengths are exact: when a segment ends (the source reports ``PullEnd/boundary``) it
/// drains the resampler and stops at exactly `round(N × out / in)` frames for the N input frames
/// since it was made or last ``reset()`` — counted over the whole run, not per segment, so loops
/// and playlists joined by flushes round once. Channels are mixed first (the documented matrix of
/// ``AudioConverter``), then resampled.
///
/// Nothing here allocates after `init`, except a resampler's own `reset()` at a boundary
/// (libsoxr's re-creates its state).
final class ConversionNode {
    static let blockFrames = 1024

    let inputChannels: Int
    let outputChannels: Int
    let inputRate: Double
    let outputRate: Double
    private let resampler: (any AudioResampler)?
    /// Pulled input (input channels), used when mixing.
    private let pulled: UnsafeMutablePointer<Float>
    /// Mixed input waiting for the resampler (output channels); also where a drain past the exact
    /// length is thrown away.
    private let mixed: UnsafeMutablePointer<Float>
    private var pendingOffset = 0
    private var pendingFrames = 0
    /// What the resampler gave and the output has not taken yet (output channels).
    ///
    /// The resampler is always asked for a block, from a block of input pulled at a time, and
    /// what a render does not take waits here: libsoxr then sees the same calls whatever sizes a
    /// sink asks for, so its FIFOs reach their high-water mark in the first blocks and never grow
    /// (realloc) on the render thread after.
    private let produced: UnsafeMutablePointer<Float>
    private var producedOffset = 0
    private var producedFrames = 0
    private var totalIn = 0
    private var totalOut = 0
    private var leadingLeft: Int
    private var draining = false
    /// Output frames the resampler failed to give and silence stood in for, since the last read.
    private(set) var shortfall = 0
    /// The first error a resampler threw (the rest of the segment is silence).
    private(set) var failure: (any Error)?

    init(from input: (rate: Double, channels: Int), to output: (rate: Double, channels: Int),
         quality: AudioConverterQuality, registry: AudioResamplerRegistry) throws {
        for (name, format) in [("input", input), ("output", output)] {
            guard format.rate > 0, format.rate.isFinite, format.rate <= 1_536_000,
                  (1...RenderStage.maxChannels).contains(format.channels) else {
                throw AudioQueueError(.invalidPropertyValue,
                    "converter \(name) of \(format.channels) ch at \(format.rate) Hz is out of range (1...\(RenderStage.maxChannels) ch, 0 < rate <= 1536000)")
            }
        }
        inputChannels = input.channels
        outputChannels = output.channels
        inputRate = input.rate
        outputRate = output.rate
        resampler = input.rate == output.rate ? nil
            : try registry.makeResampler(from: input.rate, to: output.rate, channels: output.channels, quality: quality)
        leadingLeft = resampler?.leadingFrames ?? 0
        pulled = .allocate(capacity: Self.blockFrames * input.channels)
        mixed = .allocate(capacity: Self.blockFrames * output.channels)
        produced = .allocate(capacity: Self.blockFrames * output.channels)
    }

    deinit {
        pulled.deallocate()
        mixed.deallocate()
        produced.deallocate()
    }

    /// Input frames pulled whose output has not come out yet (the resampler's delay and what waits
    /// in its blocks): what is heard is this far behind what was pulled, in input frames.
    var lookahead: Double {
        guard resampler != nil else { return 0 }
        return max(Double(totalIn) - Double(totalOut - producedFrames) * inputRate / outputRate, 0)
    }

    /// Output frames `frames` input frames make: `round(frames × out / in)`.
    func outputFrames(forInputFrames frames: Int) -> Int {
        resampler == nil ? frames : Int((Double(frames) * outputRate / inputRate).rounded())
    }

    /// Writes up to `frames` output frames, pulling input from `source`. Returns
    /// ``PullEnd/boundary`` once a segment's last frame is out (call ``passBoundary()`` before
    /// pulling on), ``PullEnd/starved`` when the source ran dry first.
    func render(into out: UnsafeMutablePointer<Float>, frames: Int, from source: PullSource) -> (Int, PullEnd) {
        guard let resampler else { return mixOnly(into: out, frames: frames, from: source) }
        var done = 0
        while done < frames {
            if producedFrames > 0 {
                let n = min(producedFrames, frames - done)
                (out + done * outputChannels).update(from: produced + producedOffset * outputChannels, count: n * outputChannels)
                producedOffset += n
                producedFrames -= n
                done += n
                continue
            }
            if draining {
                let room = min(Self.blockFrames, outputFrames(forInputFrames: totalIn) - totalOut)
                if room <= 0 {
                    discardRest(resampler)
                    return (done, .boundary)
                }
                var made = 0
                if failure == nil {
                    do { made = try resampler.drain(into: produced, capacity: room) } catch { fail(error) }
                }
                if made == 0 {
                    // Too little came out: silence stands in, and the length stays exact.
                    produced.update(repeating: 0, count: room * outputChannels)
                    shortfall += room
                    made = room
                }
                producedOffset = 0
                producedFrames = made
                totalOut += made
                continue
            }
            if pendingFrames == 0 {
                let (got, end) = pullMixed(Self.blockFrames, from: source)
                if got == 0 {
                    if end == .boundary { draining = true; continue }
                    return (done, .starved)
                }
                pendingOffset = 0
                pendingFrames = got
                totalIn += got
            }
            var consumed = 0, made = 0
            if failure == nil {
                do {
                    (consumed, made) = try resampler.process(mixed + pendingOffset * outputChannels, frames: pendingFrames,
                                                             into: produced, capacity: Self.blockFrames)
                } catch { fail(error) }
            }
            if failure != nil { consumed = pendingFrames; made = 0 }
            pendingOffset += consumed
            pendingFrames -= consumed
            var first = 0
            if leadingLeft > 0 && made > 0 {
                first = min(leadingLeft, made)
                leadingLeft -= first
                made -= first
            }
            producedOffset = first
            producedFrames = made
            totalOut += made
            if consumed == 0 && made == 0 && pendingFrames > 0 { break }   // a resampler that takes nothing
        }
        return (done, .filled)
    }

    /// After ``render(into:frames:from:)`` returned ``PullEnd/boundary``: the next frames begin a
    /// new segment (the run's totals stay, so the next boundary rounds over the whole run).
    func passBoundary() {
        draining = false
        pendingFrames = 0
        pendingOffset = 0
        producedFrames = 0
        producedOffset = 0
        resampler?.reset()
        leadingLeft = resampler?.leadingFrames ?? 0
    }

    /// Forgets everything (a discard, a new run).
    func reset() {
        passBoundary()
        totalIn = 0
        totalOut = 0
        failure = nil
    }

    /// Reads and clears ``shortfall``.
    func takeShortfall() -> Int {
        defer { shortfall = 0 }
        return shortfall
    }

    private func fail(_ error: any Error) {
        if failure == nil { failure = error }
    }

    /// Empties a resampler after the exact length was reached (what it still holds is past the end).
    private func discardRest(_ resampler: any AudioResampler) {
        guard failure == nil else { return }
        do {
            while try resampler.drain(into: mixed, capacity: Self.blockFrames) > 0 {}
        } catch { fail(error) }
    }

    /// Pulls up to `frames` input frames and mixes them into ``mixed``.
    private func pullMixed(_ frames: Int, from source: PullSource) -> (Int, PullEnd) {
        if inputChannels == outputChannels { return source(mixed, frames) }
        let (got, end) = source(pulled, frames)
        mix(pulled, frames: got, into: mixed)
        return (got, end)
    }

    private func mixOnly(into out: UnsafeMutablePointer<Float>, frames: Int, from source: PullSource) -> (Int, PullEnd) {
        if inputChannels == outputChannels { return source(out, frames) }
        var done = 0
        while done < frames {
            let (got, end) = source(pulled, min(frames - done, Self.blockFrames))
            mix(pulled, frames: got, into: out + done * outputChannels)
            done += got
            if end != .filled { return (done, end) }
        }
        return (done, .filled)
    }

    /// Mixes `frames` frames of ``inputChannels`` into ``outputChannels`` (the documented matrix).
    private func mix(_ input: UnsafePointer<Float>, frames: Int, into o: UnsafeMutablePointer<Float>) {
        let inCh = inputChannels, outCh = outputChannels
        if inCh == 1 {
            for f in 0..<frames {
                let v = input[f]
                let frame = o + f * outCh
                frame.update(repeating: 0, count: outCh)
                frame[0] = v
                if outCh > 1 { frame[1] = v }
            }
        } else if outCh == 1 {
            for f in 0..<frames { o[f] = (input[f * inCh] + input[f * inCh + 1]) * 0.5 }
        } else {
            let shared = min(inCh, outCh)
            for f in 0..<frames {
                let frame = o + f * outCh
                frame.update(repeating: 0, count: outCh)
                for c in 0..<shared { frame[c] = input[f * inCh + c] }
            }
        }
    }
}
