import Synchronization

/// How hard a resampler works; the names are SoX's and libsoxr's.
public enum AudioConverterQuality: Sendable, Hashable, CaseIterable {
    /// Cubic interpolation.
    case quick
    /// 16-bit precision, larger roll-off.
    case low
    /// 16-bit precision, medium roll-off.
    case medium
    /// 20-bit precision.
    case high
    /// 28-bit precision: `sox … rate -v`. The default.
    case veryHigh
}

/// Changes the sample rate of interleaved float32 frames: the primitive a resampling library
/// provides (the `SoxrConverter` module registers one on libsoxr). ``AudioConverter`` wraps it
/// with channel mixing and exact lengths.
///
/// One instance serves one stream from one thread at a time.
public protocol AudioResampler: AnyObject {
    /// Output frames that come out before the first input frame's (a filter delay the resampler
    /// does not compensate itself); ``AudioConverter`` drops them. 0 for a resampler that aligns
    /// its output with its input.
    var leadingFrames: Int { get }

    /// Resamples `frames` interleaved frames and appends what is ready to `output`.
    func process(_ input: UnsafePointer<Float>, frames: Int, into output: DecodedAudio) throws

    /// The input has ended: appends everything still held.
    func drain(into output: DecodedAudio) throws

    /// Forgets the stream, ready for a new one with the same rates.
    func reset()
}

/// Makes resamplers; registered with an ``AudioResamplerRegistry``.
public struct AudioResamplerFactory: Sendable {
    /// For messages.
    public var name: String
    /// The highest priority wins.
    public var priority: Int
    /// Makes a resampler from an input rate to an output rate for a channel count.
    public var make: @Sendable (_ inputRate: Double, _ outputRate: Double, _ channels: Int, _ quality: AudioConverterQuality) throws -> any AudioResampler

    public init(name: String, priority: Int = 0,
                make: @escaping @Sendable (Double, Double, Int, AudioConverterQuality) throws -> any AudioResampler) {
        self.name = name
        self.priority = priority
        self.make = make
    }
}

/// Where resamplers are found, like ``AudioDecoderRegistry`` for decoders. The core registers
/// none: import a resampler module (`SoxrConverter`) and call its `register()`.
public final class AudioResamplerRegistry: Sendable {
    /// The registry the library uses unless told otherwise.
    public static let shared = AudioResamplerRegistry()
    private let factories = Lock<[AudioResamplerFactory]>([])

    public init() {}

    /// Adds a factory; the one with the highest priority is used.
    public func register(_ factory: AudioResamplerFactory) {
        factories.withLock { list in
            list.removeAll { $0.name == factory.name }
            list.append(factory)
            list.sort { $0.priority > $1.priority }
        }
    }

    /// The factory in use, if any.
    public var factory: AudioResamplerFactory? { factories.withLock { $0.first } }

    /// Makes a resampler.
    /// - Throws: ``AudioQueueError/Code/codecNotFound`` when no resampler is registered.
    public func makeResampler(from inputRate: Double, to outputRate: Double, channels: Int,
                              quality: AudioConverterQuality) throws -> any AudioResampler {
        guard let factory else {
            throw AudioQueueError(.codecNotFound,
                "converting \(inputRate) Hz to \(outputRate) Hz needs a resampler: import SoxrConverter and call SoxrConverter.register()")
        }
        return try factory.make(inputRate, outputRate, channels, quality)
    }
}

/// Converts interleaved float32 frames to another sample rate and channel count, with exact
/// lengths: the frames that come out for N frames put in (from creation or the last ``reset()``
/// to ``finish(into:)``) are exactly `round(N × outputRate / inputRate)`, beginning with the
/// first input frame's (no leading delay) and ending with the last one's (nothing lost). So gapless
/// stays gapless across a rate change.
///
/// Channels are mixed with a fixed, documented matrix (Apple's converter does the same for these
/// cases):
/// - mono → N: the mono signal goes to the first two channels (left and right, or the one channel
///   of mono), the others are silent;
/// - N → mono: the average of the first two channels (`(L + R) / 2`; other channels are dropped);
/// - N → M otherwise: channel *i* to channel *i* for the first `min(N, M)`, extra outputs silent.
///
/// Same rate and same channel count pass frames through bit for bit. One instance serves one
/// stream from one thread at a time.
public final class AudioConverter {
    /// What goes in: interleaved float32.
    public let inputFormat: AudioStreamDescription
    /// What comes out: interleaved float32.
    public let outputFormat: AudioStreamDescription
    private let resampler: (any AudioResampler)?
    private let inChannels: Int
    private let outChannels: Int
    /// Channels the resampler works on (mixing happens on the side with fewer channels).
    private let resampleChannels: Int
    private let mixFirst: Bool
    private let mixed: DecodedAudio
    private let resampled: DecodedAudio
    private var framesIn = 0
    private var framesOut = 0
    private var leadingToDrop: Int

    /// - Parameters:
    ///   - from: the input's rate and channel count (any linear PCM description; frames are float32).
    ///   - to: the output's rate and channel count.
    ///   - quality: the resampler's quality; ``AudioConverterQuality/veryHigh`` by default.
    ///   - registry: where the resampler comes from (only needed when the rates differ).
    /// - Throws: ``AudioQueueError/Code/invalidPropertyValue`` for rates or channel counts out of
    ///   range, ``AudioQueueError/Code/codecNotFound`` when the rates differ and no resampler is
    ///   registered.
    public init(from: AudioStreamDescription, to: AudioStreamDescription, quality: AudioConverterQuality = .veryHigh,
                registry: AudioResamplerRegistry = .shared) throws {
        for (name, format) in [("input", from), ("output", to)] {
            guard format.sampleRate > 0, format.sampleRate.isFinite, format.sampleRate <= 1_536_000,
                  (1...RenderStage.maxChannels).contains(format.channelsPerFrame) else {
                throw AudioQueueError(.invalidPropertyValue,
                    "converter \(name) of \(format.channelsPerFrame) ch at \(format.sampleRate) Hz is out of range (1...\(RenderStage.maxChannels) ch, 0 < rate <= 1536000)")
            }
        }
        inputFormat = .float32(sampleRate: from.sampleRate, channels: from.channelsPerFrame)
        outputFormat = .float32(sampleRate: to.sampleRate, channels: to.channelsPerFrame)
        inChannels = from.channelsPerFrame
        outChannels = to.channelsPerFrame
        mixFirst = outChannels <= inChannels
        resampleChannels = min(inChannels, outChannels)
        if from.sampleRate != to.sampleRate {
            resampler = try registry.makeResampler(from: from.sampleRate, to: to.sampleRate, channels: resampleChannels, quality: quality)
        } else {
            resampler = nil
        }
        leadingToDrop = resampler?.leadingFrames ?? 0
        mixed = DecodedAudio(format: .float32(sampleRate: mixFirst ? from.sampleRate : to.sampleRate, channels: mixFirst ? outChannels : inChannels))
        resampled = DecodedAudio(format: .float32(sampleRate: to.sampleRate, channels: resampleChannels))
    }

    /// Output frames for `frames` input frames once finished: `round(frames × out / in)`.
    public func outputFrames(forInputFrames frames: Int) -> Int {
        Int((Double(frames) * outputFormat.sampleRate / inputFormat.sampleRate).rounded())
    }

    /// Converts `input` (interleaved, the input's channel count) and appends what is ready to
    /// `output` (which takes the ``outputFormat``).
    public func convert(_ input: UnsafeBufferPointer<Float>, into output: DecodedAudio) throws {
        output.changeFormat(outputFormat)
        let frames = input.count / inChannels
        guard frames > 0, let base = input.baseAddress else { return }
        framesIn += frames
        guard let resampler else {
            if inChannels == outChannels {
                output.append(UnsafeBufferPointer(start: base, count: frames * inChannels))
            } else {
                mix(base, frames: frames, into: output)
            }
            framesOut += frames
            return
        }
        resampled.removeAll()
        if mixFirst && inChannels != outChannels {
            mixed.removeAll()
            mix(base, frames: frames, into: mixed)
            try resampler.process(mixed.samples, frames: frames, into: resampled)
        } else {
            try resampler.process(base, frames: frames, into: resampled)
        }
        emit(resampled, into: output, limit: nil)
    }

    /// Ends the stream: appends the rest so that exactly `round(N × out / in)` frames came out
    /// for the N frames put in, then readies the converter for a new stream.
    public func finish(into output: DecodedAudio) throws {
        defer { reset() }
        output.changeFormat(outputFormat)
        guard let resampler else { return }
        resampled.removeAll()
        try resampler.drain(into: resampled)
        let target = outputFrames(forInputFrames: framesIn)
        emit(resampled, into: output, limit: target)
        if framesOut < target {
            // A resampler that gave too little: the length stays exact, and the shortfall is said.
            let missing = target - framesOut
            output.appendSilence(frames: missing)
            output.reportError(AudioQueueError(.decoderError,
                "the resampler gave \(missing) frames fewer than \(framesIn) input frames make at \(outputFormat.sampleRate) Hz; silence stands in for them"))
            framesOut = target
        }
    }

    /// Forgets the stream (a seek or a new item): the next frames start a new one.
    public func reset() {
        resampler?.reset()
        framesIn = 0
        framesOut = 0
        leadingToDrop = resampler?.leadingFrames ?? 0
    }

    /// Appends resampled frames (mixing them up when mixing comes second), without the leading
    /// delay and never past `limit` frames in all.
    private func emit(_ source: DecodedAudio, into output: DecodedAudio, limit: Int?) {
        var frames = source.frameCount
        var start = 0
        if leadingToDrop > 0 {
            let drop = min(leadingToDrop, frames)
            leadingToDrop -= drop
            start = drop
            frames -= drop
        }
        if let limit { frames = max(min(frames, limit - framesOut), 0) }
        guard frames > 0 else { return }
        let first = source.samples + start * resampleChannels
        if mixFirst || inChannels == outChannels {
            output.append(UnsafeBufferPointer(start: first, count: frames * resampleChannels))
        } else {
            mix(first, frames: frames, into: output)
        }
        framesOut += frames
    }

    /// Mixes `frames` frames of `inChannels` into `outChannels` with the documented matrix.
    private func mix(_ input: UnsafePointer<Float>, frames: Int, into output: DecodedAudio) {
        let out = output.reserve(frames: frames)
        guard let o = out.baseAddress else { return }
        let inCh = inChannels, outCh = outChannels
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
        output.commit(frames: frames)
    }
}
