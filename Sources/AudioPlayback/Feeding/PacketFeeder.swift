import AudioFileStream
import BufferQueue

/// Packets of one item, in order: a file's index, an HTTP stream, later HLS segments. The
/// ``PacketFeeder`` turns them into enqueued buffers with the item's trims.
///
/// Frame counts are in the frames of ``format`` (for HE-AAC declared in the container, the
/// doubled rate), decoded frames counted from the first packet, priming included.
public protocol PacketSource: AnyObject {
    /// Whether ``format`` and the packet table are known (a stream: after its first bytes).
    var isReady: Bool { get }
    /// The format to decode: the container's best (`formatList.first`, else `dataFormat`).
    var format: AudioStreamDescription { get }
    /// The decoder's magic cookie.
    var magicCookie: [UInt8]? { get }
    /// Priming, remainder and valid frames, when the container has gapless numbers.
    var packetTable: AudioFilePacketTableInfo? { get }
    /// Packets the decoder needs before a packet to decode it exactly, when the container says
    /// (an MP4 `roll` sample group: its distance, made positive).
    var rollDistance: Int? { get }
    /// The item's valid length in ``format``'s frames, and whether it is estimated (nil: unknown).
    var duration: (frames: Int64, isEstimated: Bool)? { get }
    /// A title from the item's metadata.
    var title: String? { get }
    /// The item's tags, once known (a stream's after its header); nil when the source has none.
    /// The default is nil.
    var metadata: AudioFileMetadata? { get }
    /// The packet holding decoded frame `frame`; nil past the end (or unknown).
    func packet(forFrame frame: Int64) -> Int64?
    /// Decoded frames before packet `packet`.
    func frame(forPacket packet: Int64) -> Int64?
    /// Reads on from packet `packet` (a seek).
    func seek(toPacket packet: Int64) throws
    /// The next packets, at most `maxPackets` (ignored for constant-size packets) and `maxBytes`.
    func read(maxPackets: Int, maxBytes: Int) throws -> PacketRead
    /// Up to `count` whole packets from `first`, read without moving the source, for a decoder
    /// that chooses where an exact decode begins (``/BufferQueue/AudioDecoderTraits/decodeStart``); nil when
    /// the source cannot read out of order (a stream). A `count` of 0 asks only whether it can
    /// (`[]` or nil). The default is nil.
    func peekPackets(from first: Int64, count: Int) -> [[UInt8]]?
    /// Whether ``seek(toPacket:)`` can work (false for a live stream). The default is true.
    var isSeekable: Bool { get }
    /// The speaker of each channel, as the container says (a WAV's mask, the codec's order for
    /// AAC and ALAC); nil when unknown. The default is nil.
    var channelLayout: AudioChannelLayout? { get }
    /// The largest packet the item may hold, as the container says (buffers are made to hold it);
    /// nil when unknown. The default is nil.
    var maximumPacketSize: Int? { get }
    /// The links of a chained item known before reading (a file's; empty when it is not chained,
    /// or when links are only met while reading, each announced by ``PacketRead/link(_:)``). The
    /// default is none.
    var links: [AudioStreamLink] { get }
    /// Seeks by decoded frame instead of by packet, for a source that finds its place by time (an
    /// Ogg stream over HTTP, by bisection on granule positions): reads on from a decode start at
    /// least `preRollPackets` packets before decoded frame `frame`, and reports where the packets
    /// read next begin with ``PacketRead/resume(atFrame:)`` before them. Returns false when the
    /// source seeks by packet (``seek(toPacket:)``), the default.
    func seek(toFrame frame: Int64, preRollPackets: Int) throws -> Bool
    /// Problems met reading the item that did not stop it, in words (a cut last frame, a length
    /// the container claims and the packets do not hold): the player reports each once, as
    /// ``AudioPlayerEvent/itemWarning(index:id:_:)``. The default is none.
    var warnings: [String] { get }
}

extension PacketSource {
    public var metadata: AudioFileMetadata? { nil }
    public var warnings: [String] { [] }
    public func peekPackets(from first: Int64, count: Int) -> [[UInt8]]? { nil }
    public var isSeekable: Bool { true }
    public var channelLayout: AudioChannelLayout? { nil }
    public var maximumPacketSize: Int? { nil }
    public var links: [AudioStreamLink] { [] }
    public func seek(toFrame frame: Int64, preRollPackets: Int) throws -> Bool { false }
}

/// What a ``PacketSource`` has now.
public enum PacketRead {
    /// Packets (descriptions empty for constant-size ones) and the frames they decode to.
    case packets(data: [UInt8], descriptions: [AudioPacketDescription], frames: Int)
    /// Nothing yet: more is on its way (a stream); the source says when.
    case waiting
    /// The item's packets are all read.
    case end
    /// The next packets do not follow the previous ones (a live stream reconnected): the end
    /// trim of the item no longer applies.
    case discontinuity
    /// The next packets are those of this link of a chained stream (at a link's start, and after
    /// a seek into a chain): a new decoder for its format, its own trims. Read again when its
    /// length becomes known.
    case link(AudioStreamLink)
    /// The packets after this begin at decoded frame `frame` (priming included): where a seek by
    /// frame (``PacketSource/seek(toFrame:preRollPackets:)``) landed, known only once found.
    case resume(atFrame: Int64)
}

/// Turns a packet source and a start position into enqueued buffers with the trims that fall on
/// them — the item's priming and remainder, and a seek target — and the pre-roll a decoder needs
/// to start mid-stream exactly. The one place this logic lives: ``AudioFileRenderer``, the player
/// and the HTTP source all feed through it.
///
/// Trims follow from frame positions alone, so how packets are grouped into buffers changes
/// nothing: frames `[priming + startFrame, priming + validFrames)` are kept.
public final class PacketFeeder {
    /// Where packets come from.
    public let source: any PacketSource
    /// The first valid frame to play (0: the start; from ``init(source:startSeconds:preRollPackets:registry:)``,
    /// known once the source is ready).
    public private(set) var startFrame: Int64
    private var startSeconds: Double?
    /// The first decoded frame kept and the first not kept (nil: until the end).
    public private(set) var keepFrom: Int64 = 0
    /// The first decoded frame not kept (nil: until the end).
    public private(set) var keepUntil: Int64?
    /// Decoded position of the next packet read.
    public private(set) var position: Int64 = 0
    /// Frames enqueued that will be heard.
    public private(set) var framesKept: Int64 = 0
    /// The first valid frame not to play (nil: to the item's end); reading stops after the packet
    /// holding the frame before it.
    public let endFrame: Int64?
    /// The decoded position where reading stops (from ``endFrame``).
    private var stopAt: Int64?
    /// The link of a chain this feeder began a decoder for.
    private var begunLink: Int?
    /// A seek by frame is under way: packets before its ``PacketRead/resume(atFrame:)`` are not the target's.
    private var awaitingResume = false
    /// The start was planned (the source was ready): ``startFrame`` is final.
    public private(set) var started = false
    private var overridePreRoll: Int?
    /// Where the decoder's traits come from.
    public let registry: AudioDecoderRegistry
    /// All packets were read.
    public private(set) var isFinished = false
    /// Parameters given with the first buffer that holds a frame to play (an item's gain), then
    /// cleared.
    public var firstFrameParameters: AudioQueueParameters?
    /// Computes ``firstFrameParameters`` from the source once it is ready (its tags known: a
    /// stream's come with its header), before its first packet is read.
    public var parametersAtStart: ((any PacketSource) -> AudioQueueParameters?)?
    /// What ``parametersAtStart`` computed, kept (nil before the start, or when it gave none).
    public private(set) var parametersChosenAtStart: AudioQueueParameters?

    /// What ``enqueueNext(_:on:)`` did.
    public enum Progress: Equatable {
        /// The buffer went into the queue.
        case enqueued
        /// Nothing to enqueue now; the source tells when more arrives. The buffer stays the caller's.
        case waiting
        /// The item is done; the buffer stays the caller's.
        case finished
    }

    /// - Parameters:
    ///   - source: the item's packets.
    ///   - startFrame: the first valid frame to play, in the source format's frames.
    ///   - endFrame: the first valid frame not to play (nil: play to the end). The packets after the
    ///     one holding the frame before it are not read: a decoder's output for a packet never
    ///     depends on the packets after it.
    ///   - preRollPackets: packets decoded before the start (nil: ``preRollPackets(for:rollDistance:registry:)``).
    ///   - registry: the registry the queue takes its decoder from: its traits say how to start.
    public init(source: any PacketSource, startFrame: Int64 = 0, endFrame: Int64? = nil, preRollPackets: Int? = nil,
                registry: AudioDecoderRegistry = .shared) {
        self.source = source
        self.registry = registry
        self.startFrame = max(startFrame, 0)
        self.endFrame = endFrame
        overridePreRoll = preRollPackets
    }

    /// Starts `startSeconds` into the item: the frame is `round(seconds × rate)` at the rate of
    /// the source's format, known once it is ready.
    public init(source: any PacketSource, startSeconds: Double, preRollPackets: Int? = nil, registry: AudioDecoderRegistry = .shared) {
        self.source = source
        self.registry = registry
        startFrame = 0
        endFrame = nil
        self.startSeconds = max(startSeconds, 0)
        overridePreRoll = preRollPackets
    }

    /// Packets a decoder needs before the one holding a start position so that its output from
    /// there on has the values of a decode from the first packet: what the decoder `registry`
    /// would choose says (``/BufferQueue/AudioDecoderTraits/preRollPackets``), or the container's roll
    /// distance when larger.
    public static func preRollPackets(for format: AudioStreamDescription, rollDistance: Int? = nil,
                                      registry: AudioDecoderRegistry = .shared) -> Int {
        max(registry.traits(for: format).preRollPackets(format), abs(rollDistance ?? 0))
    }

    /// Where a decode that plays from `packet` exactly begins: where the decoder says
    /// (``/BufferQueue/AudioDecoderTraits/decodeStart``, over packets the source reads out of order), else
    /// `packet - preRoll`. nil when the decoder found no packet that will do (a damaged stream).
    public static func decodeStart(before packet: Int64, preRoll: Int, source: any PacketSource,
                                   registry: AudioDecoderRegistry = .shared) -> Int64? {
        let format = source.format
        let plain = max(packet - Int64(preRoll), 0)
        guard let hook = registry.traits(for: format).decodeStart, source.peekPackets(from: 0, count: 0) != nil else { return plain }
        return hook(format, packet, preRoll) { first, count in source.peekPackets(from: first, count: count) ?? [] }
    }

    /// Plans the start once the source is ready: the packet to read from and the kept range.
    private func start() throws {
        if let hook = parametersAtStart {
            parametersAtStart = nil
            if let parameters = hook(source) {
                firstFrameParameters = parameters
                parametersChosenAtStart = parameters
            }
        }
        if let startSeconds { startFrame = Int64((startSeconds * source.format.sampleRate).rounded()) }
        let table = source.packetTable
        let priming = Int64(table?.primingFrames ?? 0)
        let links = source.links
        if !links.isEmpty {
            // Links (an Ogg stream, a chain): each is trimmed on its own; valid frames are counted
            // across them. A link whose end is not known yet (a stream) reaches to the end.
            started = true
            guard let (link, decoded) = links.locate(validFrame: startFrame) else {
                isFinished = true
                return
            }
            keepFrom = decoded
            keepUntil = link.validFrames.map { link.firstFrame + Int64(link.primingFrames) + $0 }
            if let endFrame {
                stopAt = links.locate(validFrame: max(endFrame, 0))?.decodedFrame
                if let stopAt { keepUntil = min(keepUntil ?? .max, stopAt) }
            }
        } else {
            keepFrom = priming + startFrame
            keepUntil = table.map { priming + $0.validFrames }
            if let endFrame {
                keepUntil = min(keepUntil ?? .max, priming + max(endFrame, 0))
                stopAt = keepUntil
            }
        }
        started = true
        if startFrame > 0 || endFrame != nil, let keepUntil, keepFrom >= keepUntil {
            isFinished = true
            return
        }
        guard startFrame > 0 else { return }
        let preRoll = overridePreRoll ?? Self.preRollPackets(for: source.format, rollDistance: source.rollDistance, registry: registry)
        // A source that finds its place by time reports where it landed before its packets.
        if try source.seek(toFrame: keepFrom, preRollPackets: preRoll) {
            awaitingResume = true
            return
        }
        guard let packet = source.packet(forFrame: keepFrom) else {
            isFinished = true   // past the last packet: nothing to play
            return
        }
        let first = Self.decodeStart(before: packet, preRoll: preRoll, source: source, registry: registry) ?? max(packet - Int64(preRoll), 0)
        guard let firstFrame = source.frame(forPacket: first) else {
            throw AudioQueueError(.invalidParameter, "cannot find where packet \(first) starts to begin at frame \(startFrame)")
        }
        try source.seek(toPacket: first)
        position = firstFrame
    }

    /// Reads the next packets into `buffer` and enqueues it on `queue` with the trims that fall
    /// on them. Wholly trimmed packets (pre-roll) are enqueued too: the decoder needs them.
    /// - Throws: what the source or the queue throws; the buffer then stays the caller's.
    public func enqueueNext(_ buffer: AudioQueueBuffer, on queue: AudioQueue) throws -> Progress {
        guard source.isReady else { return .waiting }
        if !started { try start() }
        while !isFinished {
            if let stopAt, position >= stopAt {
                isFinished = true
                break
            }
            let format = source.format
            let maxPackets = format.bytesPerPacket > 0 ? Int.max : max(buffer.packetDescriptionCapacity, 1)
            switch try source.read(maxPackets: maxPackets, maxBytes: buffer.capacity) {
            case .waiting:
                return .waiting
            case .end:
                isFinished = true
            case .discontinuity:
                keepUntil = nil
                // What follows is another encode (an HLS discontinuity, a live stream's new
                // connection): a fresh decoder, as for a new stream, so none of the previous
                // source's state (overlap, bit reservoir, noise generator) reaches its frames.
                try queue.beginStream(format: source.format, magicCookie: source.magicCookie)
            case .link(let link):
                // Another encode: a decoder of its own, and its own trims. A repeated announcement
                // (the link's length now known) changes only the end.
                if link.index != begunLink {
                    try queue.beginStream(format: link.format, magicCookie: link.magicCookie)
                    begunLink = link.index
                }
                keepFrom = max(keepFrom, link.firstFrame + Int64(link.primingFrames))
                keepUntil = link.validFrames.map { link.firstFrame + Int64(link.primingFrames) + $0 }
                if let stopAt { keepUntil = min(keepUntil ?? .max, stopAt) }
            case .resume(let frame):
                position = frame
                awaitingResume = false
                // A fresh decoder: the packets after a seek do not follow the ones before. It is the
                // decoder of the link landed in (a later announcement of that link's length keeps it).
                let link = source.links.last { $0.firstFrame <= frame }
                try queue.beginStream(format: link?.format ?? source.format, magicCookie: link?.magicCookie ?? source.magicCookie)
                begunLink = link?.index
            case .packets(let data, var descriptions, var frames):
                guard !data.isEmpty, !awaitingResume else { continue }
                // A packet the container says presents fewer frames than its codec decodes (a
                // fragmented MP4's shortened last sample) decodes whole: the rest is padding,
                // trimmed when it ends the buffer.
                var padding = 0
                if format.framesPerPacket > 0, registry.traits(for: format).decodesWholeFrames {
                    let whole = format.framesPerPacket
                    for index in descriptions.indices where (1..<whole).contains(descriptions[index].variableFramesInPacket) {
                        let short = whole - descriptions[index].variableFramesInPacket
                        frames += short
                        if index == descriptions.count - 1 { padding = short }
                        descriptions[index].variableFramesInPacket = 0
                    }
                }
                let first = position, last = position + Int64(frames)
                position = last
                let trimStart = Int(min(max(keepFrom - first, 0), Int64(frames)))
                let end = keepUntil ?? Int64.max
                let trimEnd = max(Int(min(max(last - max(end, first + Int64(trimStart)), 0), Int64(frames - trimStart))),
                                  min(padding, frames - trimStart))
                try buffer.setData(data)
                let kept = frames - trimStart - trimEnd
                let parameters = kept > 0 ? firstFrameParameters : nil
                try queue.enqueue(buffer, packetDescriptions: descriptions, trimFramesAtStart: trimStart, trimFramesAtEnd: trimEnd,
                                  parameters: parameters ?? AudioQueueParameters())
                if parameters != nil { firstFrameParameters = nil }
                framesKept += Int64(kept)
                return .enqueued
            }
        }
        return .finished
    }
}

/// A local file's packets, read through its ``/AudioFileStream/AudioFile`` index.
public final class FilePacketSource: PacketSource {
    /// The file whose packets are read.
    public let file: AudioFile
    public let format: AudioStreamDescription
    /// ``format``'s frames per frame the file counts (2 for HE-AAC whose container counts at the
    /// core rate).
    private let scale: Int
    private var next: Int64 = 0
    /// A chain's link whose packets are being read (the first until a seek or the next link).
    private var announcedLink: Int? = 0

    /// The file's warnings, and the damage that ended its index early (its packets before it play).
    public var warnings: [String] { file.warnings.map { "\($0)" } + (file.damage.map { ["\($0)"] } ?? []) }

    /// A source of `file`'s packets, from its first.
    public init(file: AudioFile) {
        self.file = file
        format = file.formatList.first ?? file.dataFormat
        // What the file counts per packet: the format's frames for an MP4 (its parser counts in the
        // output rate it found signalled), the container format's for others.
        scale = file.indexFrameScale
    }

    /// The decoded frames of `format` per frame of a count made in `counted` frames per packet:
    /// 2 for HE-AAC (2048 frames a packet) counted at the core rate (1024), else 1.
    @available(*, deprecated, message: "use AudioFile.frameScale(of:counted:), or a file's indexFrameScale")
    public static func frameScale(of format: AudioStreamDescription, counted: Int) -> Int {
        AudioFile.frameScale(of: format, counted: counted)
    }

    public var isReady: Bool { true }
    public var magicCookie: [UInt8]? { file.magicCookie }
    public var packetTable: AudioFilePacketTableInfo? { file.packetTableInfo }
    public var rollDistance: Int? { file.packetRollDistance }
    public var channelLayout: AudioChannelLayout? { file.channelLayout }
    public var maximumPacketSize: Int? { file.maximumPacketSize }
    /// Exact with gapless numbers, and for packets of a fixed size and frame count with no priming
    /// to trim (linear PCM, G.711, IMA ADPCM: a WAV's length is what plays); an estimate otherwise
    /// (a codec's delay is in the frames counted).
    public var duration: (frames: Int64, isEstimated: Bool)? {
        if let table = file.packetTableInfo { return (table.validFrames, false) }
        let fixed = file.dataFormat.bytesPerPacket > 0 && file.dataFormat.framesPerPacket > 0
        return (file.totalFrames * Int64(scale), !fixed)
    }
    public var title: String? { file.metadata.title }
    public var metadata: AudioFileMetadata? { file.metadata }

    public func packet(forFrame frame: Int64) -> Int64? { file.packet(forFrame: frame / Int64(scale))?.packet }
    public func frame(forPacket packet: Int64) -> Int64? { file.frame(forPacket: packet) * Int64(scale) }

    public var links: [AudioStreamLink] { file.links }

    public func seek(toPacket packet: Int64) throws {
        next = min(max(packet, 0), file.packetCount)
        announcedLink = nil
    }

    public func peekPackets(from first: Int64, count: Int) -> [[UInt8]]? {
        guard count > 0 else { return [] }
        guard let packets = try? file.readPackets(from: first, count: count) else { return [] }
        return packets.descriptions.map { Array(packets.data[$0.startOffset..<($0.startOffset + $0.dataByteSize)]) }
    }

    public func read(maxPackets: Int, maxBytes: Int) throws -> PacketRead {
        guard next < file.packetCount else { return .end }
        // A chain: each link's packets begin with its announcement, and no read crosses a link.
        var linkEnd = file.packetCount
        if file.links.count > 1, let link = file.links.link(holdingPacket: next) {
            if announcedLink != link.index {
                announcedLink = link.index
                return .link(link)
            }
            if link.index + 1 < file.links.count { linkEnd = file.links[link.index + 1].firstPacket }
        }
        var count: Int
        if file.dataFormat.bytesPerPacket > 0 {
            count = max(maxBytes / file.dataFormat.bytesPerPacket, 1)
        } else {
            // As many as fit: the largest packet bounds each one.
            count = max(min(maxPackets, maxBytes / max(file.maximumPacketSize ?? 8192, 1)), 1)
        }
        count = Int(min(Int64(count), linkEnd - next))
        let packets = try file.readPackets(from: next, count: count)
        next += Int64(packets.packetCount)
        var frames = 0
        for index in 0..<packets.packetCount { frames += file.frames(ofPacket: packets.firstPacketIndex + Int64(index)) }
        return .packets(data: packets.data, descriptions: packets.descriptions, frames: frames * scale)
    }
}
