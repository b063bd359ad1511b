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
/// provides (the `SoxrConverter` module registers one on libsoxr). ``AudioConverter`` and the
/// queue's render path wrap it with channel mixing and exact lengths.
///
/// The queue calls ``process(_:frames:into:capacity:)`` and ``drain(into:capacity:)`` on its
/// render path, so they must not lock or block, and should not allocate. One instance serves one
/// stream from one thread at a time.
public protocol AudioResampler: AnyObject {
    /// Output frames that come out before the first input frame's (a filter delay the resampler
    /// does not compensate itself); they are dropped. 0 for a resampler that aligns its output
    /// with its input.
    var leadingFrames: Int { get }

    /// Takes up to `frames` interleaved input frames and writes up to `capacity` output frames.
    /// Returns how many of each; input it did not take is offered again.
    func process(_ input: UnsafePointer<Float>, frames: Int, into output: UnsafeMutablePointer<Float>,
                 capacity: Int) throws -> (consumed: Int, produced: Int)

    /// The input has ended: writes up to `capacity` frames of what is still held; 0 once empty.
    func drain(into output: UnsafeMutablePointer<Float>, capacity: Int) throws -> Int

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

    /// A factory named `name`, tried before the factories of lower `priority`; `make` makes a resampler from one rate to another for a channel count and quality.
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

    /// An empty registry (``shared`` is the one the library uses by default).
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
/// stays gapless across a rate change. The queue's render path uses the same machinery.
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
    private let node: ConversionNode

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
        node = try ConversionNode(from: (from.sampleRate, from.channelsPerFrame), to: (to.sampleRate, to.channelsPerFrame),
                                  quality: quality, registry: registry)
        inputFormat = .float32(sampleRate: from.sampleRate, channels: from.channelsPerFrame)
        outputFormat = .float32(sampleRate: to.sampleRate, channels: to.channelsPerFrame)
    }

    /// Output frames for `frames` input frames once finished: `round(frames × out / in)`.
    public func outputFrames(forInputFrames frames: Int) -> Int { node.outputFrames(forInputFrames: frames) }

    /// Converts `input` (interleaved, the input's channel count) and appends what is ready to
    /// `output` (which takes the ``outputFormat``).
    public func convert(_ input: UnsafeBufferPointer<Float>, into output: DecodedAudio) throws {
        let channels = node.inputChannels
        let frames = input.count / channels
        guard frames > 0, let base = input.baseAddress else { return }
        var offset = 0
        try run(into: output) { destination, want in
            let take = min(want, frames - offset)
            destination.update(from: base + offset * channels, count: take * channels)
            offset += take
            return (take, take < want ? .starved : .filled)
        }
    }

    /// Ends the stream: appends the rest so that exactly `round(N × out / in)` frames came out
    /// for the N frames put in, then readies the converter for a new stream.
    public func finish(into output: DecodedAudio) throws {
        defer { reset() }
        try run(into: output) { _, _ in (0, .boundary) }
    }

    /// Forgets the stream (a seek or a new item): the next frames start a new one.
    public func reset() { node.reset() }

    /// Renders until the source runs dry or a segment ends.
    private func run(into output: DecodedAudio, from source: PullSource) throws {
        output.changeFormat(outputFormat)
        while true {
            let room = ConversionNode.blockFrames * 4
            let space = output.reserve(frames: room)
            guard let base = space.baseAddress else { return }
            let (made, end) = node.render(into: base, frames: room, from: source)
            output.commit(frames: made)
            if let failure = node.failure {
                throw failure as? AudioQueueError ?? AudioQueueError(.decoderError, "the resampler failed: \(failure)")
            }
            let missing = node.takeShortfall()
            if missing > 0 {
                output.reportError(AudioQueueError(.decoderError,
                    "the resampler gave \(missing) frames fewer than the input makes at \(outputFormat.sampleRate) Hz; silence stands in for them"))
            }
            if end == .boundary { node.passBoundary(); return }
            if end == .starved { return }
        }
    }
}
