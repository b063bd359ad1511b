import AudioFileStream
import BufferQueue

/// A stretch of another source's valid frames presented as a whole item: a cue sheet's track in
/// its album file. Its packets are the base's from a decode start before the stretch (the pre-roll
/// the decoder registered for the format asks, ``PacketFeeder/preRollPackets(for:rollDistance:registry:)``)
/// to the packet holding its last frame; its packet table trims the frames outside, so a feeder
/// (a player's, a renderer's) plays exactly the stretch, and seeks inside it as in a file.
public final class FrameRangePacketSource: PacketSource {
    /// The source whose frames the stretch is taken from.
    public let base: any PacketSource
    /// The stretch in the base's valid frames.
    public let range: Range<Int64>
    /// The base's first packet read, the decoded frame it starts at, and the first packet not read.
    private let firstPacket: Int64, firstFrame: Int64, endPacket: Int64
    private let table: AudioFilePacketTableInfo
    private let overridden: AudioFileMetadata?
    /// The next packet read, counted from ``firstPacket``.
    private var next: Int64 = 0

    /// - Parameters:
    ///   - base: a seekable source whose frames and packets are known (a file's).
    ///   - range: valid frames of `base` (after its priming).
    ///   - metadata: what the stretch is called (a track's title and performer); the base's when nil.
    ///   - registry: the decoders whose traits say how many packets before the stretch to decode.
    /// - Throws: ``/BufferQueue/AudioQueueError`` when the range is empty or lies past the base's frames.
    public init(base: any PacketSource, range: Range<Int64>, metadata: AudioFileMetadata? = nil,
                registry: AudioDecoderRegistry = .shared) throws {
        self.base = base
        self.range = range
        overridden = metadata
        let priming = Int64(base.packetTable?.primingFrames ?? 0)
        let start = range.lowerBound + priming, end = range.upperBound + priming
        guard !range.isEmpty, range.lowerBound >= 0, let startPacket = base.packet(forFrame: start), let lastPacket = base.packet(forFrame: end - 1) else {
            throw AudioQueueError(.invalidParameter, "frames \(range.lowerBound)..<\(range.upperBound) are not inside the item")
        }
        let preRoll = PacketFeeder.preRollPackets(for: base.format, rollDistance: base.rollDistance, registry: registry)
        let first = PacketFeeder.decodeStart(before: startPacket, preRoll: preRoll, source: base, registry: registry) ?? max(startPacket - Int64(preRoll), 0)
        guard let firstFrame = base.frame(forPacket: first), let endFrame = base.frame(forPacket: lastPacket + 1) else {
            throw AudioQueueError(.invalidParameter, "the item's packets around frames \(range.lowerBound)..<\(range.upperBound) are not known")
        }
        firstPacket = first
        self.firstFrame = firstFrame
        endPacket = lastPacket + 1
        table = AudioFilePacketTableInfo(validFrames: Int64(range.count), primingFrames: Int(start - firstFrame),
                                         remainderFrames: Int(max(endFrame - end, 0)), source: .frameRange)
        try base.seek(toPacket: first)
    }

    public var isReady: Bool { base.isReady }
    public var format: AudioStreamDescription { base.format }
    public var magicCookie: [UInt8]? { base.magicCookie }
    public var packetTable: AudioFilePacketTableInfo? { table }
    public var rollDistance: Int? { base.rollDistance }
    public var duration: (frames: Int64, isEstimated: Bool)? { (Int64(range.count), false) }
    public var title: String? { overridden?.title ?? base.title }
    public var metadata: AudioFileMetadata? { overridden ?? base.metadata }
    public var isSeekable: Bool { base.isSeekable }
    public var channelLayout: AudioChannelLayout? { base.channelLayout }
    public var maximumPacketSize: Int? { base.maximumPacketSize }
    public var warnings: [String] { base.warnings }

    public func packet(forFrame frame: Int64) -> Int64? {
        guard let packet = base.packet(forFrame: frame + firstFrame), packet < endPacket else { return nil }
        return packet - firstPacket
    }

    public func frame(forPacket packet: Int64) -> Int64? {
        base.frame(forPacket: packet + firstPacket).map { $0 - firstFrame }
    }

    public func seek(toPacket packet: Int64) throws {
        next = min(max(packet, 0), endPacket - firstPacket)
        try base.seek(toPacket: next + firstPacket)
    }

    public func peekPackets(from first: Int64, count: Int) -> [[UInt8]]? {
        base.peekPackets(from: first + firstPacket, count: count)
    }

    public func read(maxPackets: Int, maxBytes: Int) throws -> PacketRead {
        let left = endPacket - firstPacket - next
        guard left > 0 else { return .end }
        let constant = format.bytesPerPacket > 0 ? format.bytesPerPacket : nil
        let asked = Int(min(Int64(maxPackets), left))
        let bytes = constant.map { min(maxBytes, Int(min(left, Int64(Int.max / $0))) * $0) } ?? maxBytes
        let read = try base.read(maxPackets: max(asked, 1), maxBytes: max(bytes, constant ?? 1))
        guard case .packets(var data, var descriptions, var frames) = read else { return read }
        // A base that gave more than the stretch holds (constant-size packets come by bytes): cut.
        let count = descriptions.isEmpty ? (constant.map { data.count / $0 } ?? 1) : descriptions.count
        if Int64(count) > left {
            let keep = Int(left)
            if descriptions.isEmpty, let constant {
                frames = frames / count * keep
                data.removeLast(data.count - keep * constant)
            } else {
                let cut = descriptions[keep]
                frames -= descriptions[keep...].reduce(0) { $0 + ($1.variableFramesInPacket > 0 ? $1.variableFramesInPacket : format.framesPerPacket) }
                data.removeLast(data.count - cut.startOffset)
                descriptions.removeLast(descriptions.count - keep)
            }
            next += left
        } else {
            next += Int64(count)
        }
        return .packets(data: data, descriptions: descriptions, frames: frames)
    }
}
