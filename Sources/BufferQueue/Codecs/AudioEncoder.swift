/// Turns interleaved linear PCM into packets of one format: the encode direction of the
/// converter, the mirror of ``AudioDecoder``.
///
/// An encoder takes whole frames of its ``inputFormat`` (a linear PCM layout of its choosing:
/// 32-bit float for the lossy codecs, full-scale 32-bit integers for the lossless ones, so that
/// integer sources reach them bit for bit) and appends packets to an ``EncodedPackets`` block.
/// It says how many frames of encoder delay a decode of its packets starts with
/// (``primingFrames``); ``AudioEncodingConverter`` counts the rest of the gapless numbers (valid
/// frames, and the remainder the last packet is padded with) from what went in and came out.
///
/// One instance serves one stream from one thread at a time.
public protocol AudioEncoder: AnyObject {
    /// The interleaved linear PCM the encoder takes, at the output's rate and channel count.
    var inputFormat: AudioStreamDescription { get }
    /// The packets' format. `framesPerPacket` is the frames of a full packet (0 when packets vary);
    /// `bytesPerPacket` is 0 when their sizes vary.
    var outputFormat: AudioStreamDescription { get }
    /// What a decoder needs besides the packets (an `ALACSpecificConfig`, an `OpusHead`, a FLAC
    /// STREAMINFO, an AAC `AudioSpecificConfig`); nil when the format needs none. An encoder that
    /// learns more by the end (FLAC's MD5 and total) gives the final cookie after ``finish(into:)``.
    var magicCookie: [UInt8]? { get }
    /// Frames of encoder delay at the start of the decoded output (AAC's 1024, Opus's pre-skip);
    /// 0 for the codecs whose first frame is the first input frame.
    var primingFrames: Int { get }
    /// The largest packet the encoder makes, in bytes.
    var maximumPacketSize: Int { get }
    /// The speakers of the channels, in the order the encoder takes them (ALAC's and AAC's centre
    /// first, Vorbis order for Opus, WAVE order for FLAC); nil when the codec has no order of its
    /// own. ``AudioEncodingConverter`` reorders a client's channels of a known layout to it.
    var channelLayout: AudioChannelLayout? { get }
    /// Encodes whole frames of ``inputFormat`` (a trailing partial frame is ignored), appending
    /// the packets that are complete.
    func encode(_ frames: UnsafeRawBufferPointer, into output: EncodedPackets) throws
    /// Ends the stream: encodes what is held, padding the last packet where the format needs whole
    /// packets, then readies the encoder for a new stream with the same settings.
    func finish(into output: EncodedPackets) throws
    /// After a parallel encode (``AudioEncodingConverter``'s `jobs`), takes in what the other
    /// encoders of the stream counted that the cookie reports (ALAC's largest packet and bit
    /// rate). Does nothing by default.
    func mergeStatistics(of others: [any AudioEncoder])
}

extension AudioEncoder {
    public var channelLayout: AudioChannelLayout? { nil }
    public func mergeStatistics(of others: [any AudioEncoder]) {}
}

/// What a caller may ask of an encoder; each encoder documents how it reads these and ignores
/// what does not apply to it.
public struct AudioEncoderSettings: Hashable, Sendable {
    /// Target bits per second (lossy codecs: AAC, Opus); nil for the encoder's default.
    public var bitRate: Int?
    /// 0 (fastest) … 10 (best): FLAC's compression level (capped at 8), Opus's complexity, ALAC's
    /// search effort; nil for the encoder's default.
    public var quality: Int?
    /// Frames per packet for the codecs that let it be chosen (ALAC, FLAC, Opus in 2.5–60 ms
    /// steps); nil for the encoder's default.
    public var framesPerPacket: Int?

    /// Settings; nil leaves each to the encoder's default.
    public init(bitRate: Int? = nil, quality: Int? = nil, framesPerPacket: Int? = nil) {
        self.bitRate = bitRate
        self.quality = quality
        self.framesPerPacket = framesPerPacket
    }
}

/// What the layers around an encoder need to know about it without knowing the codec.
public struct AudioEncoderTraits: Sendable {
    /// Whether every packet is encoded from its own frames alone (ALAC, FLAC, IMA4, G.711, PCM), so
    /// that pieces of a source cut at packet boundaries and encoded apart join into the packets of
    /// one encode. False for transform codecs (AAC, Opus), whose packets overlap.
    public var independentPackets: @Sendable (AudioStreamDescription) -> Bool

    /// Traits whose `independentPackets` says, for a format, whether each packet encodes on its own.
    public init(independentPackets: @escaping @Sendable (AudioStreamDescription) -> Bool) { self.independentPackets = independentPackets }

    /// Packets that encode on their own whatever the format's settings.
    public static let independent = AudioEncoderTraits(independentPackets: { _ in true })
    /// Packets that depend on the ones before them.
    public static let dependent = AudioEncoderTraits(independentPackets: { _ in false })
}

/// Makes encoders for a set of formats; registered with ``AudioEncoderRegistry``.
public struct AudioEncoderFactory: Sendable {
    /// A name for messages, e.g. `"libFLAC"`.
    public var name: String
    /// The formats this factory encodes.
    public var formats: Set<AudioFormatID>
    /// Higher wins when several factories handle one format.
    public var priority: Int
    /// What the encoder's packets allow (see ``AudioEncoderTraits``).
    public var traits: AudioEncoderTraits
    /// Makes an encoder for `format`: the format id, the sample rate and the channel count, and
    /// for the lossless codecs `bitsPerChannel` (the source's bit depth; 0 for 16). Other fields
    /// may be 0; the encoder fills them in its ``AudioEncoder/outputFormat``.
    public var make: @Sendable (_ format: AudioStreamDescription, _ settings: AudioEncoderSettings) throws -> any AudioEncoder

    /// A factory named `name` for `formats`, tried before the factories of lower `priority`, with the encoder's `traits`; `make` makes an encoder for a format and settings.
    public init(name: String, formats: Set<AudioFormatID>, priority: Int = 0, traits: AudioEncoderTraits,
                make: @escaping @Sendable (AudioStreamDescription, AudioEncoderSettings) throws -> any AudioEncoder) {
        self.name = name
        self.formats = formats
        self.priority = priority
        self.traits = traits
        self.make = make
    }
}

/// The encoders the library can choose from, keyed by format id, like ``AudioDecoderRegistry``.
///
/// The encoders written in Swift are registered from the start: linear PCM, G.711 µ-law and
/// A-law, Apple IMA4 and WAV's IMA ADPCM, and Apple Lossless. Codec modules register theirs
/// (`FLACEncoder.register()`, `OpusEncoder.register()` …).
public final class AudioEncoderRegistry: Sendable {
    /// The registry the library uses unless given another.
    public static let shared = AudioEncoderRegistry()

    private let factories: Lock<[AudioEncoderFactory]>

    /// A registry holding the built-in Swift encoders.
    public init() {
        factories = Lock([PCMEncoder.factory, G711Encoder.factory, IMAADPCMEncoder.factory, ALACEncoder.factory])
    }

    /// Adds a factory. A factory with the same name replaces the earlier one.
    public func register(_ factory: AudioEncoderFactory) {
        factories.withLock { list in
            list.removeAll { $0.name == factory.name }
            list.append(factory)
        }
    }

    /// The factory that would be used for a format, if any.
    public func factory(for formatID: AudioFormatID) -> AudioEncoderFactory? {
        factories.withLock { list in
            list.filter { $0.formats.contains(formatID) }.max { $0.priority < $1.priority }
        }
    }

    /// Every format some factory encodes.
    public var supportedFormats: Set<AudioFormatID> {
        factories.withLock { list in list.reduce(into: []) { $0.formUnion($1.formats) } }
    }

    /// Makes an encoder for a format.
    /// - Throws: ``AudioQueueError/Code/codecNotFound`` when no factory handles the format, or
    ///   what the factory throws.
    public func makeEncoder(for format: AudioStreamDescription, settings: AudioEncoderSettings = .init()) throws -> any AudioEncoder {
        guard let factory = factory(for: format.formatID) else {
            let known = supportedFormats.map(\.description).sorted().joined(separator: ", ")
            throw AudioQueueError(.codecNotFound,
                "no encoder is registered for \(format.formatID) (registered: \(known)); register the codec module's encoder first")
        }
        return try factory.make(format, settings)
    }
}

/// Packets an encoder made: their bytes one after another, and for each its place, size and the
/// frames it decodes to. The storage is kept when emptied, so a block reused between calls
/// allocates nothing once it has grown.
public final class EncodedPackets {
    /// One packet.
    public struct Packet: Hashable, Sendable {
        /// Where its bytes start in the block.
        public var offset: Int
        /// The packet's size in bytes.
        public var byteCount: Int
        /// The frames it decodes to (priming and padding included).
        public var frames: Int
    }

    private var storage: UnsafeMutableRawPointer
    private var capacity: Int
    /// Bytes held.
    public private(set) var byteCount = 0
    /// The packets held, in order.
    public private(set) var packets: [Packet] = []

    /// An empty list whose byte storage starts at `capacityBytes` and grows as needed.
    public init(capacityBytes: Int = 16384) {
        capacity = max(capacityBytes, 256)
        storage = .allocate(byteCount: capacity, alignment: 16)
    }

    deinit { storage.deallocate() }

    /// The number of packets held.
    public var count: Int { packets.count }
    /// Whether no packet is held.
    public var isEmpty: Bool { packets.isEmpty }
    /// The frames of all packets held.
    public var frameCount: Int { packets.reduce(0) { $0 + $1.frames } }

    /// Room for a packet of up to `bytes` bytes; follow with ``commit(bytes:frames:)``.
    public func reserve(bytes: Int) -> UnsafeMutableRawBufferPointer {
        ensureCapacity(byteCount + bytes)
        return UnsafeMutableRawBufferPointer(start: storage + byteCount, count: bytes)
    }

    /// Ends a packet of `bytes` bytes written after ``reserve(bytes:)``, decoding to `frames` frames.
    public func commit(bytes: Int, frames: Int) {
        precondition(byteCount + bytes <= capacity, "commit beyond reserved space")
        packets.append(Packet(offset: byteCount, byteCount: bytes, frames: frames))
        byteCount += bytes
    }

    /// Appends a packet.
    public func append(_ bytes: UnsafeRawBufferPointer, frames: Int) {
        let space = reserve(bytes: bytes.count)
        if let base = bytes.baseAddress, let target = space.baseAddress { target.copyMemory(from: base, byteCount: bytes.count) }
        commit(bytes: bytes.count, frames: frames)
    }

    /// The bytes of packet `index`.
    public func bytes(of index: Int) -> UnsafeRawBufferPointer {
        let packet = packets[index]
        return UnsafeRawBufferPointer(start: storage + packet.offset, count: packet.byteCount)
    }

    /// All the bytes held.
    public var allBytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: storage, count: byteCount) }

    /// The packets as Core Audio describes them: offsets, sizes, and frame counts where
    /// `variableFrames` (formats whose packets vary in frames).
    public func descriptions(variableFrames: Bool) -> [AudioPacketDescription] {
        packets.map { AudioPacketDescription(startOffset: $0.offset, variableFramesInPacket: variableFrames ? $0.frames : 0, dataByteSize: $0.byteCount) }
    }

    /// Forgets the packets; the storage is kept.
    public func removeAll() {
        byteCount = 0
        packets.removeAll(keepingCapacity: true)
    }

    /// Forgets the first `count` packets, moving the rest to the front.
    public func removeFirst(_ count: Int) {
        guard count > 0 else { return }
        guard count < packets.count else { removeAll(); return }
        let start = packets[count].offset
        storage.copyMemory(from: storage + start, byteCount: byteCount - start)
        byteCount -= start
        packets.removeFirst(count)
        for index in packets.indices { packets[index].offset -= start }
    }

    private func ensureCapacity(_ needed: Int) {
        guard needed > capacity else { return }
        var grown = capacity * 2
        while grown < needed { grown *= 2 }
        let bigger = UnsafeMutableRawPointer.allocate(byteCount: grown, alignment: 16)
        bigger.copyMemory(from: storage, byteCount: byteCount)
        storage.deallocate()
        storage = bigger
        capacity = grown
    }
}

extension AudioStreamDescription {
    /// Native-endian interleaved full-scale 32-bit signed integers: what the lossless encoders
    /// take (a 16-bit sample `s` is `s << 16`).
    public static func int32(sampleRate: Double, channels: Int) -> AudioStreamDescription {
        linearPCM(sampleRate: sampleRate, channels: channels, bitsPerChannel: 32)
    }

    /// Native-endian interleaved 16-bit signed integers.
    public static func int16(sampleRate: Double, channels: Int) -> AudioStreamDescription {
        linearPCM(sampleRate: sampleRate, channels: channels, bitsPerChannel: 16)
    }
}
