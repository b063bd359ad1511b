/// The loop that feeds bytes to an ``AudioFileStream`` and follows the seeks it asks for, written
/// once for every reader: ``AudioFile``, the HTTP source, the tests and the fuzz targets.
///
/// A source hands over bytes with ``feed(_:discontinuity:_:)-(UnsafeRawBufferPointer,_,_)`` from ``position`` on. When the
/// container keeps what the parser needs elsewhere (an MP4 index after the media), the parser asks
/// for it: the driver resumes the parser there, moves ``position`` and returns the offset, and the
/// source delivers its next bytes from that offset. ``finish(_:)`` says no more bytes come.
/// A random-access source can let ``run(chunkSize:read:_:)`` do the whole loop.
///
/// Seeks are bounded (``maximumSeeks``): an index pointing back and forth cannot loop forever.
public final class AudioFileStreamDriver {
    /// The parser being fed.
    public let stream: AudioFileStream
    /// Byte offset in the source of the next byte the parser expects.
    public private(set) var position: Int64
    /// Seeks followed so far.
    public private(set) var seeks = 0
    /// At most this many seeks are followed; one more is an error.
    public let maximumSeeks: Int

    /// - Parameters:
    ///   - stream: the parser (its type hint and seekability decide how it reads).
    ///   - position: the byte offset of the first bytes that will be fed.
    ///   - maximumSeeks: how many seek requests to follow before giving up.
    public init(stream: AudioFileStream, position: Int64 = 0, maximumSeeks: Int = 64) {
        self.stream = stream
        self.position = position
        self.maximumSeeks = maximumSeeks
    }

    /// A driver with a new parser.
    public convenience init(fileTypeHint: AudioFileType? = nil, sourceIsSeekable: Bool = true, maximumSeeks: Int = 64) {
        self.init(stream: AudioFileStream(fileTypeHint: fileTypeHint, sourceIsSeekable: sourceIsSeekable), maximumSeeks: maximumSeeks)
    }

    /// Parses `bytes`, which start at ``position``, handing every event to `handle` in order
    /// (a ``AudioFileStreamEvent/seekRequired(byteOffset:)`` too, after the driver followed it).
    /// - Returns: nil to go on with the next bytes, or the byte offset the next bytes must come
    ///   from (the parser asked for them; the rest of `bytes` was not needed).
    /// - Throws: what the parser or `handle` throws; ``AudioFileStreamError/Code/invalidData``
    ///   after more than ``maximumSeeks`` seeks.
    @discardableResult
    public func feed(_ bytes: UnsafeRawBufferPointer, discontinuity: Bool = false,
                     _ handle: (AudioFileStreamEvent) throws -> Void) throws -> Int64? {
        position += Int64(bytes.count)
        return try deliver(try stream.parse(bytes, discontinuity: discontinuity), handle)
    }

    /// ``feed(_:discontinuity:_:)`` for an array of bytes.
    @discardableResult
    public func feed(_ bytes: [UInt8], discontinuity: Bool = false, _ handle: (AudioFileStreamEvent) throws -> Void) throws -> Int64? {
        try bytes.withUnsafeBytes { try feed($0, discontinuity: discontinuity, handle) }
    }

    /// ``AudioFileStream/parseBufferedAsEnd()``: the stream broke here; complete packets are handed over.
    public func parseBufferedAsEnd(_ handle: (AudioFileStreamEvent) throws -> Void) throws {
        _ = try deliver(try stream.parseBufferedAsEnd(), handle)
    }

    /// No more bytes come: the parser hands over what it holds or reports what is missing.
    /// - Returns: a byte offset when the parser still wants bytes from elsewhere (an index it has
    ///   not seen); nil when it is done.
    @discardableResult
    public func finish(_ handle: (AudioFileStreamEvent) throws -> Void) throws -> Int64? {
        let target = try deliver(try stream.finish(), handle)
        _ = try stream.finish()   // damage found after packets only the end released
        return target
    }

    /// Reads the whole source through `read` (which fills the buffer from a byte offset and
    /// returns the count, 0 at the end), in chunks of `chunkSize`, following seeks.
    public func run(chunkSize: Int = 1 << 16, read: (_ offset: Int64, _ into: UnsafeMutableRawBufferPointer) throws -> Int,
                    _ handle: (AudioFileStreamEvent) throws -> Void) throws {
        var buffer = [UInt8](repeating: 0, count: max(chunkSize, 1))
        while true {
            let count = try buffer.withUnsafeMutableBytes { try read(position, $0) }
            if count <= 0 {
                // The end: a parser that still wants an index elsewhere gets one more chance.
                guard try finish(handle) != nil else { return }
                continue
            }
            try buffer.withUnsafeBytes { _ = try feed(UnsafeRawBufferPointer(rebasing: $0[..<min(count, $0.count)]), handle) }
        }
    }

    /// Moves the parser to packet `packet` (see ``AudioFileStream/seek(toPacket:)``); the next
    /// bytes fed must start at the returned offset, which ``position`` now is.
    public func seek(toPacket packet: Int64) throws -> AudioFileStreamSeekResult {
        let result = try stream.seek(toPacket: packet)
        position = result.byteOffset
        return result
    }

    /// Moves the stream to a probed place (``AudioFileStream/resume(at:position:skippingFound:)``);
    /// the next bytes fed must start at `offset`, which ``position`` now is. Returns the decoded
    /// frame the packets read next begin at.
    public func resume(at offset: Int64, position streamPosition: Int64, skippingFound: Bool) -> Int64? {
        guard let frame = stream.resume(at: offset, position: streamPosition, skippingFound: skippingFound) else { return nil }
        position = offset
        return frame
    }

    private func deliver(_ events: [AudioFileStreamEvent], _ handle: (AudioFileStreamEvent) throws -> Void) throws -> Int64? {
        var target: Int64?
        for event in events {
            if case .seekRequired(let offset) = event {
                seeks += 1
                guard seeks <= maximumSeeks else {
                    throw AudioFileStreamError(.invalidData, stream.fileType, offset,
                                               "the file asked to read elsewhere more than \(maximumSeeks) times; its index is damaged")
                }
                stream.resume(atByteOffset: offset)
                position = offset
                target = offset
            }
            try handle(event)
        }
        return target
    }
}
