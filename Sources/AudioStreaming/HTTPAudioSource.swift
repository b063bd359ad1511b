import AudioFileStream
import BufferQueue
import Dispatch

/// An MP3/AAC/PCM resource over HTTP(S), decoded with its gapless trims: an ``AudioFrameSource``
/// for ``AudioFilePlayer`` (see ``AudioPlayerItem/url(_:configuration:)``).
///
/// Bytes go through ``AudioFileStream`` and an offline ``AudioQueue``, exactly as a local file's do,
/// so a finite resource yields the same frames as the file rendered locally — also after a seek
/// (frame-exact where the container has a packet table or constant-size frames, via the Xing TOC
/// for VBR MP3) and after reconnects, which resume with `Range` at the next byte.
///
/// The container is chosen by the bytes first, then `Content-Type`, then the URL's extension. MP4
/// files whose index follows the media are played by fetching the index with a `Range` request.
///
/// Opening and rendering block until bytes arrive, which a Swift task fetches: use a source from a
/// thread of its own (as ``AudioFilePlayer/run()`` is), never from a Swift task or a Dispatch
/// queue's shared threads, or the waits can starve the fetch.
public final class HTTPAudioSource: AudioFrameSource, @unchecked Sendable {
    public let url: String
    /// What the server said.
    public private(set) var info: HTTPStreamInfo?
    public private(set) var outputFormat: AudioStreamDescription = .float32(sampleRate: 44100, channels: 2)
    /// The container the bytes turned out to be.
    public private(set) var fileType: AudioFileType?

    private let fetcher: HTTPFetcher
    private let report: @Sendable (AudioPlayerEvent) -> Void
    private let registry: AudioDecoderRegistry
    private var stream: AudioFileStream?
    private var queue: AudioQueue?
    private var buffers: [AudioQueueBuffer] = []
    /// Packets parsed but not yet enqueued: compressed ones one by one (with their variable frame
    /// count), PCM in runs (nil).
    private var pending: [(data: [UInt8], variableFrames: Int?, frames: Int)] = []
    /// Decoded-frame position (priming included) of the next packet to enqueue.
    private var nextFrame: Int64 = 0
    /// Frames before this decoded position are trimmed (priming, or a seek target).
    private var skipUntil: Int64 = 0
    private var ended = false
    private var flushed = false
    private let cancelled = Lock(false)
    private var byteOffset: Int64 = 0
    private var discontinuity = false
    private var liveGap = false
    /// Packet bytes and frames parsed so far: the running average bit rate.
    private var parsedBytes: Int64 = 0
    private var parsedFrames: Int64 = 0

    /// Opens `url` and reads until the first packets can be decoded; with `startSeconds`, seeks.
    /// - Throws: ``HTTPStreamError`` (connection, HTTP status, not seekable) or
    ///   ``AudioFileStreamError`` (the bytes are not audio).
    public init(url: String, startSeconds: Double = 0, configuration: HTTPStreamConfiguration = HTTPStreamConfiguration(),
                registry: AudioDecoderRegistry = .shared, report: @escaping @Sendable (AudioPlayerEvent) -> Void = { _ in }) throws {
        self.url = url
        self.report = report
        self.registry = registry
        fetcher = HTTPFetcher(url: url, configuration: configuration, report: report)
        report(.state(.connecting))
        fetcher.start(at: 0)
        do {
            try readUntilReady()
            if startSeconds > 0 { try seek(toSeconds: startSeconds) }
            try primeDecoder()
        } catch {
            fetcher.close()
            throw error
        }
        report(.state(.buffering))
    }

    deinit { fetcher.close() }

    public var title: String? { stream?.metadata.title }

    /// What the parser skipped or doubted (junk between frames, say); empty for a clean stream.
    public var warnings: [AudioFileStreamError] { stream?.warnings ?? [] }

    /// Exact from a packet count (MP4, CAF, Xing/LAME, WAV); otherwise estimated from the average
    /// bit rate and `Content-Length`; nil for live streams.
    public var duration: (frames: Int64, isEstimated: Bool)? {
        guard let stream, let format = stream.dataFormat else { return nil }
        if let table = stream.packetTableInfo { return (table.validFrames, false) }
        if let packets = stream.audioDataPacketCount, format.framesPerPacket > 0 {
            return (packets * Int64(format.framesPerPacket), false)
        }
        guard let length = info?.contentLength else { return nil }
        let audioBytes = length - (stream.dataOffset ?? 0)
        if let rate = stream.bitRate, rate > 0 {
            return (Int64(Double(audioBytes) * 8 / Double(rate) * format.sampleRate), true)
        }
        // No declared bit rate (ADTS): the running average of what was parsed so far.
        if parsedFrames > 0, parsedBytes > 0 {
            return (Int64(Double(audioBytes) * Double(parsedFrames) / Double(parsedBytes)), true)
        }
        return nil
    }

    public func cancel() {
        cancelled.withLock { $0 = true }
        fetcher.channel.close()
    }

    private var isCancelled: Bool { cancelled.withLock { $0 } }

    // MARK: reading

    /// The next bytes from the fetcher (nil at the end).
    private func nextBytes() throws -> [UInt8]? {
        while true {
            if isCancelled { return nil }
            guard let item = fetcher.channel.pop(timeout: .milliseconds(200)) else { continue }
            switch item {
            case .info(let made): info = made
            case .bytes(let bytes):
                byteOffset += Int64(bytes.count)
                return bytes
            case .discontinuity:
                // A live stream reconnected: what follows is not the rest of one file, so the
                // file's end trim (from its header) no longer applies.
                discontinuity = true
                liveGap = true
            case .end: return nil
            case .failure(let error): throw error
            }
        }
    }

    private func makeStream(first bytes: [UInt8]) -> AudioFileStream {
        let hint = AudioFileType.sniff(bytes) ?? info?.contentType.flatMap(AudioFileType.init(contentType:))
            ?? AudioFileType(pathExtension: Self.pathExtension(of: url))
        return AudioFileStream(fileTypeHint: hint, sourceIsSeekable: true)
    }

    static func pathExtension(of url: String) -> String {
        let path = url.split(separator: "?").first.map(String.init) ?? url
        guard let last = path.split(separator: "/").last, let dot = last.lastIndex(of: ".") else { return "" }
        return String(last[last.index(after: dot)...]).lowercased()
    }

    /// Parses `bytes`, following seeks the container asks for (an MP4 index at the end).
    private func parse(_ bytes: [UInt8]) throws {
        guard let stream else { return }
        let events = try stream.parse(bytes, discontinuity: discontinuity)
        discontinuity = false
        try handle(events)
    }

    private func handle(_ events: [AudioFileStreamEvent]) throws {
        guard let stream else { return }
        for event in events {
            switch event {
            case .seekRequired(let offset):
                guard info?.acceptsRanges == true || info?.isFinite == true else {
                    throw HTTPStreamError(url: url, byteOffset: offset,
                                          message: "the \(stream.fileType?.displayName ?? "file") keeps its index at byte \(offset), but the server does not accept Range requests: not seekable")
                }
                fetcher.start(at: offset)
                byteOffset = offset
                stream.resume(atByteOffset: offset)
            case .packets(let packets):
                let perPacket = stream.dataFormat?.framesPerPacket ?? 0
                parsedBytes += Int64(packets.data.count)
                parsedFrames += packets.descriptions.isEmpty
                    ? Int64(packets.packetCount * max(perPacket, 1))
                    : packets.descriptions.reduce(Int64(0)) { $0 + Int64($1.variableFramesInPacket > 0 ? $1.variableFramesInPacket : perPacket) }
                if packets.descriptions.isEmpty {
                    // Constant-size packets (PCM): runs of whole packets, at most 16 KiB each.
                    let size = max(stream.dataFormat?.bytesPerPacket ?? 1, 1)
                    let perRun = max(16384 / size, 1) * size
                    var start = 0
                    while start + size <= packets.data.count {
                        let end = min(start + perRun, packets.data.count / size * size)
                        pending.append((Array(packets.data[start..<end]), nil, (end - start) / size * max(perPacket, 1)))
                        start = end
                    }
                } else {
                    for description in packets.descriptions {
                        let start = description.startOffset, end = start + description.dataByteSize
                        guard start >= 0, end <= packets.data.count else { continue }
                        let frames = description.variableFramesInPacket > 0 ? description.variableFramesInPacket : perPacket
                        pending.append((Array(packets.data[start..<end]), description.variableFramesInPacket, frames))
                    }
                }
            case .property:
                break
            }
        }
    }

    private func readUntilReady() throws {
        while stream?.isReadyToProducePackets != true {
            guard let bytes = try nextBytes() else {
                if let stream { try handle(try stream.finish()) }
                guard stream?.isReadyToProducePackets == true else {
                    throw HTTPStreamError(url: url, byteOffset: byteOffset, message: isCancelled ? "cancelled" : "the stream ended before any audio")
                }
                ended = true
                break
            }
            if stream == nil {
                stream = makeStream(first: bytes)
            }
            try parse(bytes)
        }
        guard let stream, let format = stream.formatList.first ?? stream.dataFormat else {
            throw HTTPStreamError(url: url, byteOffset: byteOffset, message: "no audio format")
        }
        fileType = stream.fileType
        guard registry.factory(for: format.formatID) != nil else {
            throw AudioQueueError(.codecNotFound, "\(format.formatID) is not supported: no decoder is registered for it")
        }
        let made = try AudioQueue(format: format, configuration: .init(decodeBufferFrames: 65536, decoderRegistry: registry))
        if let cookie = stream.magicCookie { try made.setMagicCookie(cookie) }
        let capacity = (stream.maximumPacketSize ?? 8192) * 32 + 16
        for _ in 0..<4 { buffers.append(try made.allocateBuffer(capacity: max(capacity, 65536), packetDescriptionCapacity: 4096)) }
        queue = made
        skipUntil = Int64(stream.packetTableInfo?.primingFrames ?? 0)
        outputFormat = .float32(sampleRate: format.sampleRate, channels: format.channelsPerFrame)
    }

    /// Starts decoding `seconds` into the resource: a few packets early (the decoder's pre-roll),
    /// trimming up to the exact frame.
    private func seek(toSeconds seconds: Double) throws {
        guard let stream, let format = stream.dataFormat, let queue else { return }
        guard info?.acceptsRanges == true else {
            throw HTTPStreamError(url: url, byteOffset: 0, message: "the server does not accept Range requests: not seekable")
        }
        let priming = Int64(stream.packetTableInfo?.primingFrames ?? 0)
        let target = priming + Int64((seconds * format.sampleRate).rounded())
        guard let (packet, _) = stream.packet(forFrame: target) else {
            throw HTTPStreamError(url: url, byteOffset: byteOffset, message: "cannot find the packet for \(seconds) s")
        }
        let preRoll: Int64 = format.isLinearPCM ? 0 : (format.formatID == .mpegLayer3 ? 10 : 2)
        let first = max(packet - preRoll, 0)
        let result = try stream.seek(toPacket: first)
        pending.removeAll()
        try queue.reset()
        nextFrame = stream.frame(forPacket: first) ?? 0
        skipUntil = target
        ended = false
        fetcher.start(at: result.byteOffset)
        byteOffset = result.byteOffset
        discontinuity = true
    }

    // MARK: decoding

    /// Decodes the first packets: the decoder's output decides the format handed out (HE-AAC
    /// doubles the rate the container declares).
    private func primeDecoder() throws {
        guard let queue else { return }
        while pending.isEmpty && !ended {
            if let bytes = try nextBytes() {
                try parse(bytes)
            } else {
                if isCancelled { throw HTTPStreamError(url: url, byteOffset: byteOffset, message: "cancelled") }
                if let stream { try handle(try stream.finish()) }
                ended = true
            }
        }
        _ = try enqueuePending()
        try queue.prime()
        outputFormat = queue.outputFormat
        try queue.setOfflineRenderFormat(outputFormat)
    }

    /// Enqueues up to 32 pending packets into a free buffer, with the trims that fall on them.
    private func enqueuePending() throws -> Bool {
        guard let queue, !pending.isEmpty, let buffer = buffers.first(where: { !$0.isInQueue }) else { return false }
        let end = liveGap ? Int64.max : (stream?.packetTableInfo.map { Int64($0.primingFrames) + $0.validFrames } ?? Int64.max)
        let isPCM = pending[0].variableFrames == nil
        let count = isPCM ? 1 : min(32, pending.count)
        var data: [UInt8] = []
        var descriptions: [AudioPacketDescription] = []
        var frames = 0
        for packet in pending[0..<count] {
            descriptions.append(AudioPacketDescription(startOffset: data.count, variableFramesInPacket: packet.variableFrames ?? 0,
                                                       dataByteSize: packet.data.count))
            data += packet.data
            frames += packet.frames
        }
        pending.removeFirst(count)
        let first = nextFrame, last = nextFrame + Int64(frames)
        nextFrame = last
        let trimStart = Int(min(max(skipUntil - first, 0), Int64(frames)))
        let trimEnd = Int(min(max(last - max(end, first + Int64(trimStart)), 0), Int64(frames - trimStart)))
        // Wholly trimmed packets (pre-roll) are still enqueued: the decoder needs them.
        try buffer.setData(data)
        try queue.enqueue(buffer, packetDescriptions: isPCM ? [] : descriptions, trimFramesAtStart: trimStart, trimFramesAtEnd: trimEnd)
        return true
    }

    public func render(into destination: UnsafeMutableBufferPointer<Float>, frames: Int) throws -> Int {
        guard let queue else { return 0 }
        let channels = outputFormat.channelsPerFrame
        let wanted = min(frames, destination.count / channels)
        let raw = UnsafeMutableRawBufferPointer(start: destination.baseAddress, count: wanted * channels * 4)
        while !isCancelled {
            let n = try queue.offlineRender(at: queue.offlineRenderPosition, into: raw, frames: wanted)
            if n > 0 { return n }
            if try enqueuePending() { continue }
            if !pending.isEmpty {
                queue.waitForCallbacks()
                continue
            }
            if ended {
                if !flushed {
                    try queue.flush()
                    flushed = true
                    continue
                }
                if buffers.allSatisfy({ !$0.isInQueue }) {
                    return try queue.offlineRender(at: queue.offlineRenderPosition, into: raw, frames: wanted)
                }
                queue.waitForCallbacks()
                continue
            }
            if let bytes = try nextBytes() {
                try parse(bytes)
            } else if !isCancelled {
                if let stream { try handle(try stream.finish()) }
                ended = true
            }
        }
        return 0
    }

    /// Problems the decoder reported (corrupt packets), if any.
    public var lastConverterError: AudioQueueError? { queue?.lastConverterError }
}

extension AudioPlayerItem {
    /// An HTTP(S) resource played through an ``HTTPAudioSource``.
    public static func url(_ url: String, configuration: HTTPStreamConfiguration = HTTPStreamConfiguration()) -> AudioPlayerItem {
        AudioPlayerItem(name: url) { startSeconds, report in
            try HTTPAudioSource(url: url, startSeconds: startSeconds, configuration: configuration, report: report)
        }
    }
}

extension AudioFileType {
    /// The container that the first bytes show unambiguously, if any.
    public static func sniff(_ bytes: [UInt8]) -> AudioFileType? {
        func ascii(_ at: Int, _ text: String) -> Bool {
            let want = Array(text.utf8)
            return bytes.count >= at + want.count && Array(bytes[at..<(at + want.count)]) == want
        }
        if ascii(4, "ftyp") { return .mp4 }
        if ascii(0, "caff") { return .caf }
        if ascii(0, "RIFF") && ascii(8, "WAVE") { return .wave }
        if ascii(0, "FORM") && ascii(8, "AIFF") { return .aiff }
        if ascii(0, "FORM") && ascii(8, "AIFC") { return .aifc }
        if ascii(0, "ID3") { return .mp3 }
        if bytes.count >= 2 && bytes[0] == 0xFF && bytes[1] & 0xF0 == 0xF0 && bytes[1] & 0x06 == 0 { return .adts }
        if bytes.count >= 2 && bytes[0] == 0xFF && bytes[1] & 0xE0 == 0xE0 { return .mp3 }
        return nil
    }

    /// The container a MIME type names, if any.
    public init?(contentType: String) {
        let type = contentType.split(separator: ";").first.map { $0.trimmingCharacters() } ?? ""
        switch type.lowercased() {
        case "audio/mpeg", "audio/mp3", "audio/mpeg3", "audio/x-mpeg": self = .mp3
        case "audio/aac", "audio/aacp", "audio/x-aac": self = .adts
        case "audio/mp4", "audio/x-m4a", "audio/m4a", "video/mp4": self = .mp4
        case "audio/x-caf": self = .caf
        case "audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave": self = .wave
        case "audio/aiff", "audio/x-aiff": self = .aiff
        default: return nil
        }
    }

    /// The container a file extension names, if any.
    public init?(pathExtension: String) {
        switch pathExtension.lowercased() {
        case "mp3", "mp2", "mpga": self = .mp3
        case "aac", "adts": self = .adts
        case "m4a", "mp4", "m4b": self = .mp4
        case "caf": self = .caf
        case "wav": self = .wave
        case "aif", "aiff": self = .aiff
        case "aifc": self = .aifc
        default: return nil
        }
    }
}

private extension Substring {
    func trimmingCharacters() -> String {
        String(drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
    }
}
