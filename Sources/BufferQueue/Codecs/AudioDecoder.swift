import Synchronization

/// Turns packets of one format into interleaved 32-bit float frames at the source rate.
///
/// A decoder is used by one queue and only ever from one thread at a time (the queue serializes
/// every call), so implementations need no locking of their own; separate instances must be
/// independent so that separate queues decode in parallel.
///
/// Decoded frames go to a ``DecodedAudio`` sink the queue owns and reuses, so a decoder allocates
/// nothing per packet.
public protocol AudioDecoder: AnyObject {
    /// The format of the frames this decoder produces, as far as known before decoding.
    ///
    /// When the first decoded packet shows otherwise (HE-AAC found in-band, a sample-rate change
    /// in an MP3 stream) the decoder calls ``DecodedAudio/changeFormat(_:)`` before appending frames
    /// of the new format, and this property reports the new format from then on.
    var outputFormat: AudioStreamDescription { get }

    /// Decodes one packet.
    ///
    /// - Parameters:
    ///   - packet: exactly one packet's bytes.
    ///   - frames: the frames the container says the packet holds (0 when unknown). A decoder that
    ///     cannot decode a packet appends that many frames of silence and reports the problem with
    ///     ``DecodedAudio/reportError(_:)`` so that the timeline stays exact.
    ///   - output: where decoded frames go.
    /// - Throws: ``AudioQueueError`` only for failures after which the decoder cannot go on.
    func decode(packet: UnsafeRawBufferPointer, frames: Int, into output: DecodedAudio) throws

    /// Emits whatever the decoder still holds at the end of a run of packets (``AudioQueue/flush()``
    /// or an asynchronous stop), then forgets its state as ``reset()`` does.
    func finish(into output: DecodedAudio) throws

    /// Forgets all decoding state (used for ``AudioQueue/reset()`` and seeking).
    func reset()

    /// Whether ``decode(packet:frames:into:)`` takes a run of several whole packets in one call.
    ///
    /// Only asked for formats with constant bytes per packet whose buffers come without packet
    /// descriptions (linear PCM, G.711, IMA ADPCM): the queue then hands over up to a few thousand
    /// frames' worth at once instead of one packet per call. The default is `false`.
    var decodesPacketRuns: Bool { get }
}

extension AudioDecoder {
    public var decodesPacketRuns: Bool { false }
}

/// A decoder of constant-size packets whose output is a fixed function of each packet (linear
/// PCM, no state): the queue may have it convert straight into its sample ring, or an offline
/// render's output, skipping the staging copy, where no trim, gap or format change falls.
package protocol DirectPacketDecoding: AudioDecoder {
    /// Converts whole packets `packets` (their frames' worth of samples fits `destination`) and
    /// returns the frames written. With `gains` (mono or stereo only), channel 0 is multiplied by
    /// `left` and channel 1 by `right` on the way: volume and pan applied in the same pass, the
    /// products the render stage would make. More channels ignore `gains`.
    func decode(packets: UnsafeRawBufferPointer, into destination: UnsafeMutablePointer<Float>,
                gains: (left: Float, right: Float)?) -> Int
}

/// Where a decoder puts its frames: a growable block of interleaved float samples owned by the queue.
///
/// The storage is kept between packets, so after the first few packets appending allocates nothing.
public final class DecodedAudio {
    // The counters are `@exclusivity(unchecked)`: a block belongs to one producer, used under its
    // queue's lock, and no method lends them out (`inout`, a closure) while calling other code.
    /// The format of the frames being appended now (always interleaved float32).
    @exclusivity(unchecked) public private(set) var format: AudioStreamDescription
    private var storage: UnsafeMutablePointer<Float>
    private var capacitySamples: Int
    /// Samples (not frames) held.
    @exclusivity(unchecked) public private(set) var sampleCount = 0
    /// Non-fatal problems reported since the queue last looked.
    @exclusivity(unchecked) public private(set) var errors: [AudioQueueError] = []
    /// Format changes with the sample offset at which each takes effect.
    @exclusivity(unchecked) private(set) var formatChanges: [(sampleOffset: Int, format: AudioStreamDescription)] = []

    /// An empty block for frames of `format` (interleaved float32), with room for
    /// `capacityFrames` frames before it grows.
    public init(format: AudioStreamDescription, capacityFrames: Int = 4096) {
        self.format = format
        capacitySamples = max(capacityFrames * max(format.channelsPerFrame, 1), 64)
        storage = .allocate(capacity: capacitySamples)
    }

    deinit { storage.deallocate() }

    /// Frames held, in the current format.
    public var frameCount: Int { sampleCount / max(format.channelsPerFrame, 1) }

    /// Reserves room for `frames` more frames and returns a pointer to write them; follow with
    /// ``commit(frames:)``.
    public func reserve(frames: Int) -> UnsafeMutableBufferPointer<Float> {
        let samples = frames * max(format.channelsPerFrame, 1)
        ensureCapacity(sampleCount + samples)
        return UnsafeMutableBufferPointer(start: storage + sampleCount, count: samples)
    }

    /// Marks `frames` frames written after ``reserve(frames:)``.
    public func commit(frames: Int) {
        let samples = frames * max(format.channelsPerFrame, 1)
        precondition(sampleCount + samples <= capacitySamples, "commit beyond reserved space")
        sampleCount += samples
    }

    /// Appends interleaved samples in the current format.
    public func append(_ samples: UnsafeBufferPointer<Float>) {
        guard let base = samples.baseAddress, !samples.isEmpty else { return }
        ensureCapacity(sampleCount + samples.count)
        (storage + sampleCount).update(from: base, count: samples.count)
        sampleCount += samples.count
    }

    /// Appends `frames` frames of silence (used in place of a packet that could not be decoded).
    public func appendSilence(frames: Int) {
        guard frames > 0 else { return }
        let space = reserve(frames: frames)
        space.update(repeating: 0)
        commit(frames: frames)
    }

    /// Announces that the frames appended from now on have a different rate or channel count.
    public func changeFormat(_ newFormat: AudioStreamDescription) {
        guard newFormat != format else { return }
        format = newFormat
        formatChanges.append((sampleCount, newFormat))
    }

    /// Records a non-fatal problem (a corrupt packet); the queue publishes it as the last converter
    /// error and as an event.
    public func reportError(_ error: AudioQueueError) { errors.append(error) }

    var samples: UnsafeMutablePointer<Float> { storage }

    /// Reads the samples held (interleaved, ``sampleCount`` of them).
    public func withUnsafeSamples<R>(_ body: (UnsafeBufferPointer<Float>) throws -> R) rethrows -> R {
        try body(UnsafeBufferPointer(start: storage, count: sampleCount))
    }

    /// Drops the samples after `count` (the trimmed end of a buffer).
    func truncate(toSampleCount count: Int) {
        sampleCount = min(sampleCount, max(count, 0))
        formatChanges.removeAll { $0.sampleOffset > sampleCount }
    }

    /// Moves the samples from `offset` on to the front; returns how far they moved.
    func compact(from offset: Int) {
        guard offset > 0 else { return }
        let kept = sampleCount - offset
        if kept > 0 { storage.update(from: storage + offset, count: kept) }
        sampleCount = max(kept, 0)
        for index in formatChanges.indices { formatChanges[index].sampleOffset = max(formatChanges[index].sampleOffset - offset, 0) }
    }

    /// The next format change, read by index: `first` on this array is generic code that
    /// allocates in unoptimized builds, and the producer asks on every step.
    var firstFormatChange: (sampleOffset: Int, format: AudioStreamDescription)? {
        formatChanges.isEmpty ? nil : formatChanges[0]
    }

    func removeFormatChange() { if !formatChanges.isEmpty { formatChanges.remove(at: 0) } }

    func takeErrors() -> [AudioQueueError] {
        // Empty: nothing to hand over (emptying an array another reference shares would allocate).
        if errors.isEmpty { return [] }
        defer { errors.removeAll(keepingCapacity: true) }
        return errors
    }

    /// Forgets the samples, errors and format changes held; the storage is kept.
    public func removeAll() {
        sampleCount = 0
        errors.removeAll(keepingCapacity: true)
        formatChanges.removeAll(keepingCapacity: true)
    }

    private func ensureCapacity(_ needed: Int) {
        guard needed > capacitySamples else { return }
        var newCapacity = capacitySamples * 2
        while newCapacity < needed { newCapacity *= 2 }
        let grown = UnsafeMutablePointer<Float>.allocate(capacity: newCapacity)
        grown.moveInitialize(from: storage, count: sampleCount)
        storage.deallocate()
        storage = grown
        capacitySamples = newCapacity
    }
}

/// What a decoder tells the layers that feed it, so that none of them knows a codec: how many
/// packets an exact start needs before it, where such a decode must begin, and whether pieces of
/// a stream decoded apart join bit-exactly. Each codec module answers for its own decoder
/// (SFBAudioEngine's decoders answer `supportsSeeking` the same way); the packet feeder and the
/// parallel renderer ask the registry for the traits of the decoder a format would get.
public struct AudioDecoderTraits: Sendable {
    /// Packets to decode before the packet holding a start position so that the output from it
    /// on has the values of a decode from the first packet (a container's roll distance can ask
    /// for more).
    public var preRollPackets: @Sendable (AudioStreamDescription) -> Int
    /// Where a decode that must reach `packet` in the very state of a decode from the first
    /// packet begins — at or before `packet - preRoll`. It reads packets (each whole, from a
    /// random-access source) with `read(first, count)`. Returns nil when no packet will do (a
    /// damaged stream). No hook: `packet - preRoll` is exact.
    public var decodeStart: (@Sendable (_ format: AudioStreamDescription, _ packet: Int64, _ preRoll: Int,
                                        _ read: (_ first: Int64, _ count: Int) -> [[UInt8]]) -> Int64?)?
    /// Why pieces of a stream of this format, each decoded by its own decoder from its pre-roll,
    /// would not join into the bits of one decode; nil when they do.
    public var parallelRefusal: @Sendable (AudioStreamDescription) -> String?
    /// Whether every packet decodes to the format's whole `framesPerPacket` (AAC, MPEG audio),
    /// whatever frame count a container gives it: a packet a container says presents fewer frames
    /// (a fragmented MP4's shortened last sample) then presents the first of them, the rest being
    /// padding to trim. False where the decoder itself gives what a packet holds (ALAC, PCM).
    public var decodesWholeFrames: Bool

    /// Traits from the decoder's answers: pre-roll packets for a format, where to start decoding before a frame, why the format cannot be decoded in parallel slices (nil: it can), and whether every packet decodes to its whole frame count.
    public init(preRollPackets: @escaping @Sendable (AudioStreamDescription) -> Int,
                decodeStart: (@Sendable (AudioStreamDescription, Int64, Int, (Int64, Int) -> [[UInt8]]) -> Int64?)? = nil,
                parallelRefusal: @escaping @Sendable (AudioStreamDescription) -> String?,
                decodesWholeFrames: Bool = false) {
        self.preRollPackets = preRollPackets
        self.decodeStart = decodeStart
        self.parallelRefusal = parallelRefusal
        self.decodesWholeFrames = decodesWholeFrames
    }

    /// Packets that decode on their own (G.711, ALAC): no pre-roll; pieces join exactly.
    public static let independentPackets = AudioDecoderTraits(preRollPackets: { _ in 0 }, parallelRefusal: { _ in nil })

    /// What is assumed of a decoder that says nothing: two packets of pre-roll (an MDCT overlap
    /// of one frame, with room to spare; none for linear PCM), and no parallel decoding.
    public static let unknown = AudioDecoderTraits(preRollPackets: { $0.isLinearPCM ? 0 : 2 }, parallelRefusal: { format in
        format.isLinearPCM ? "linear PCM needs no decoding" : "the decoder of \(format.formatID) does not say that pieces decoded apart join exactly"
    })
}

/// Makes decoders for a set of formats; registered with ``AudioDecoderRegistry``.
public struct AudioDecoderFactory: Sendable {
    /// A name for messages, e.g. `"libmpg123"`.
    public var name: String
    /// The formats this factory decodes.
    public var formats: Set<AudioFormatID>
    /// Higher wins when several factories handle one format.
    public var priority: Int
    /// Creates a decoder for a stream description and its magic cookie.
    public var make: @Sendable (AudioStreamDescription, [UInt8]?) throws -> any AudioDecoder
    /// What the decoders it makes need from the layers that feed them.
    public var traits: AudioDecoderTraits

    /// A factory named `name` for `formats`, tried before the factories of lower `priority`, with the decoder's `traits`; `make` makes a decoder for a format and its magic cookie.
    public init(name: String, formats: Set<AudioFormatID>, priority: Int = 0, traits: AudioDecoderTraits = .unknown,
                make: @escaping @Sendable (AudioStreamDescription, [UInt8]?) throws -> any AudioDecoder) {
        self.name = name
        self.formats = formats
        self.priority = priority
        self.traits = traits
        self.make = make
    }
}

/// The decoders a queue can choose from, keyed by format id.
///
/// The decoders written in Swift are registered from the start: linear PCM, G.711 µ-law and A-law,
/// Apple IMA4 and WAV's IMA ADPCM, and Apple Lossless. Codec modules register themselves
/// (`MPG123Decoder.register()`, `FAADDecoder.register()`); a queue asks the registry when it
/// needs a decoder, so registering before creating queues is enough.
public final class AudioDecoderRegistry: Sendable {
    /// The registry queues use unless given another.
    public static let shared = AudioDecoderRegistry()

    private let factories: Lock<[AudioDecoderFactory]>

    /// A registry holding the built-in Swift decoders (linear PCM, G.711, IMA ADPCM, ALAC).
    public init() {
        factories = Lock([PCMDecoder.factory, G711Decoder.factory, IMAADPCMDecoder.factory, ALACDecoder.factory])
    }

    /// Adds a factory. A factory with the same name replaces the earlier one.
    public func register(_ factory: AudioDecoderFactory) {
        factories.withLock { list in
            list.removeAll { $0.name == factory.name }
            list.append(factory)
        }
    }

    /// The factory that would be used for a format, if any.
    public func factory(for formatID: AudioFormatID) -> AudioDecoderFactory? {
        factories.withLock { list in
            list.filter { $0.formats.contains(formatID) }.max { $0.priority < $1.priority }
        }
    }

    /// The traits of the decoder `format` would get (``AudioDecoderTraits/unknown`` when none is registered).
    public func traits(for format: AudioStreamDescription) -> AudioDecoderTraits {
        factory(for: format.formatID)?.traits ?? .unknown
    }

    /// Every format some factory decodes.
    public var supportedFormats: Set<AudioFormatID> {
        factories.withLock { list in list.reduce(into: []) { $0.formUnion($1.formats) } }
    }

    /// Makes a decoder for a stream.
    /// - Throws: ``AudioQueueError/Code/codecNotFound`` when no factory handles the format, or
    ///   what the factory throws.
    public func makeDecoder(for format: AudioStreamDescription, magicCookie: [UInt8]?) throws -> any AudioDecoder {
        guard let factory = factory(for: format.formatID) else { throw missingDecoder(for: format.formatID) }
        return try factory.make(format, magicCookie)
    }

    /// The error for a format no registered decoder handles: one message wherever a decoder is
    /// looked for, naming the module to link and the call that registers its decoder.
    public func missingDecoder(for formatID: AudioFormatID) -> AudioQueueError {
        let known = supportedFormats.map(\.description).sorted().joined(separator: ", ")
        let remedy = Self.providers.first { $0.formats.contains(formatID) }.map { provider in
            "\(provider.remedy), or AudioCodecs.registerAll() (module AudioCodecs) for every codec module of the package that keeps a program free of the GPL"
        } ?? "no module of this package decodes it; register an AudioDecoderFactory of your own"
        return AudioQueueError(.codecNotFound, "no decoder is registered for \(formatID) (this registry decodes \(known)): \(remedy)")
    }

    /// Which module of the package decodes which formats, and the call that registers it (the
    /// modules say what they decode in their factories; this table is what to say when one is
    /// not linked at all).
    private static let providers: [(formats: [AudioFormatID], remedy: String)] = [
        ([.mpegLayer3, .mpegLayer2, .mpegLayer1], "link the module MPG123Decoder and call MPG123Decoder.register()"),
        ([.aacLC, .heAAC, .heAACv2], "link the module AVCodecAAC and call AVCodecAAC.register() (LGPL), or FAADDecoder and FAADDecoder.register() (GPL)"),
        ([.flac], "link the module FLACDecoder and call FLACDecoder.register()"),
        ([.opus], "link the module OpusDecoder and call OpusDecoder.register()"),
        ([.vorbis], "link the module VorbisDecoder and call VorbisDecoder.register()"),
        ([.amr, .amrWideband], "link the module OpenCoreAMRDecoder and call AMRDecoder.register()"),
        ([.linearPCM, .uLaw, .aLaw, .appleIMA4, .dviIntelIMA, .appleLossless],
         "use a registry made with AudioDecoderRegistry() (or .shared), which has the built-in decoders for it"),
    ]
}
