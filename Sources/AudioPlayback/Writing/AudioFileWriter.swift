import AudioFileStream
import BufferQueue

/// Writes an audio file from PCM, the way `ExtAudioFile` does: the caller's PCM (the client
/// format) goes in, is converted and encoded (``AudioEncodingConverter``) and laid down in a
/// container that carries the stream's gapless numbers, so a reader plays exactly the frames
/// written.
///
/// Containers and what they carry:
/// - CAF (`.caf`): any format the encoders make; `pakt` with priming, remainder and valid frames,
///   `kuki`, `chan`. The `data` size stays −1 until ``close()``, as Apple's recorders leave it.
/// - FLAC (`.flac`): STREAMINFO (total samples and MD5 filled in at the end), a seek table.
/// - M4A (`.m4a`, `.mp4`): AAC, ALAC, Opus or FLAC; an edit list and iTunes' `iTunSMPB`; a
///   recording is written fragmented.
/// - Ogg Opus (`.opus`, `.ogg`): pre-skip = the encoder's lookahead, the last page's granule
///   position the end of the valid frames.
/// - WAV (`.wav`), AIFF (`.aif`, `.aiff`), AIFC (`.aifc`): PCM, G.711, IMA ADPCM; WAV's `fact`
///   counts the valid frames of compressed data.
///
/// With `recording`, the writer makes the file playable once a second of frames has been written
/// since the last time (sizes written, pages and blocks handed to the kernel): a process killed at
/// any moment leaves a file that plays up to the last such point. ``close()`` (or a SIGINT/SIGTERM
/// handler calling it) finishes the file properly.
///
/// One writer is used from one thread at a time.
public final class AudioFileWriter {
    public let path: String
    public let fileType: AudioFileType
    /// The PCM given to ``write(_:)``.
    public let clientFormat: AudioStreamDescription
    /// The format of the file's packets.
    public var dataFormat: AudioStreamDescription { converter.outputFormat }
    /// The speakers of the file's channels, in the order they are stored.
    public var channelLayout: AudioChannelLayout? { converter.channelLayout }
    /// Whether the file is kept playable as it grows.
    public let recording: Bool
    private let converter: AudioEncodingConverter
    private let output: AudioFileOutput
    private let container: any ContainerWriter
    private let packets = EncodedPackets()
    private let checkpointFrames: Int64
    private var sinceCheckpoint: Int64 = 0
    private var closed = false

    /// The file type a path's extension names: `.caf`, `.wav`, `.aif`/`.aiff`, `.aifc`; nil for others.
    public static func fileType(forPath path: String) -> AudioFileType? {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        guard let dot = name.lastIndex(of: ".") else { return nil }
        switch name[name.index(after: dot)...].lowercased() {
        case "caf": return .caf
        case "wav", "wave": return .wave
        case "aif", "aiff": return .aiff
        case "aifc": return .aifc
        case "flac": return .flac
        case "opus", "ogg", "oga": return .ogg
        case "m4a", "mp4", "m4b": return .mp4
        default: return nil
        }
    }

    /// The file types this writer writes.
    public static let writableTypes: [AudioFileType] = [.caf, .wave, .aiff, .aifc, .flac, .ogg, .mp4]

    /// - Parameters:
    ///   - path: the file to create (an existing one is replaced).
    ///   - fileType: the container; nil for the one the path's extension names.
    ///   - format: the file's data format: a full PCM description, or a format id with a rate and
    ///     channel count (0 for the client's) and, for the lossless codecs, a bit depth.
    ///   - clientFormat: the interleaved PCM that will be written.
    ///   - clientLayout: the speakers of the client's channels: frames are reordered to the codec's
    ///     or the container's order, which the file then states.
    ///   - settings: bit rate, quality, packet size for the encoder.
    ///   - recording: keep the file playable as it grows (see the type's notes).
    ///   - expectedFrames: about how many client frames will be written, when known: a FLAC file's
    ///     seek table is sized for it.
    /// - Throws: ``AudioFileWriterError`` when the file cannot be created or the container does not
    ///   hold the format; ``AudioQueueError`` when no encoder makes it.
    public init(path: String, fileType: AudioFileType? = nil, format: AudioStreamDescription, clientFormat: AudioStreamDescription,
                clientLayout: AudioChannelLayout? = nil, settings: AudioEncoderSettings = .init(), recording: Bool = false,
                expectedFrames: Int64? = nil, encoders: AudioEncoderRegistry = .shared, resamplers: AudioResamplerRegistry = .shared) throws {
        guard let type = fileType ?? Self.fileType(forPath: path) else {
            throw AudioFileWriterError(.unsupportedFormat, path: path, "the file type is not given and the extension names none this writer writes (.caf, .wav, .aif, .aiff, .aifc, .flac, .opus, .m4a)")
        }
        guard Self.writableTypes.contains(type) else {
            throw AudioFileWriterError(.unsupportedFormat, path: path, "\(type.displayName) files are not written")
        }
        var containerLayout: AudioChannelLayout?
        if type == .wave, format.isLinearPCM, let layout = clientLayout, let order = layout.waveOrder {
            containerLayout = AudioChannelLayout(channelLabels: order.source.map { layout.channelLabels[$0] })
        }
        converter = try AudioEncodingConverter(from: clientFormat, clientLayout: clientLayout, to: format, settings: settings,
                                               containerLayout: containerLayout, encoders: encoders, resamplers: resamplers)
        self.path = path
        self.fileType = type
        self.clientFormat = clientFormat
        self.recording = recording
        checkpointFrames = Int64(max(converter.outputFormat.sampleRate, 1))
        output = try AudioFileOutput(path: path)
        let stream = ContainerStream(format: converter.outputFormat, magicCookie: converter.magicCookie, channelLayout: converter.channelLayout,
                                     primingFrames: converter.primingFrames, maximumPacketSize: converter.maximumPacketSize, recording: recording)
        do {
            switch type {
            case .caf: container = try CAFWriter(output: output, stream: stream)
            case .wave: container = try RIFFWriter(output: output, stream: stream, kind: .wav)
            case .aiff: container = try RIFFWriter(output: output, stream: stream, kind: .aiff)
            case .ogg: container = try OggOpusWriter(output: output, stream: stream)
            case .mp4: container = try MP4Writer(output: output, stream: stream, fragmented: recording)
            case .flac:
                let ratio = converter.outputFormat.sampleRate / max(clientFormat.sampleRate, 1)
                container = try FLACWriter(output: output, stream: stream, expectedFrames: expectedFrames.map { Int64(Double($0) * ratio) })
            default: container = try RIFFWriter(output: output, stream: stream, kind: .aifc)
            }
        } catch {
            try? output.close()
            throw error
        }
    }

    deinit { try? close() }

    /// The source frames written so far (at the file's rate): the file's valid frames.
    public var validFrames: Int64 { converter.validFrames }
    /// The encoder's delay at the start of the decoded packets.
    public var primingFrames: Int { converter.primingFrames }
    /// The padding of the last packet (final after ``close()``).
    public var remainderFrames: Int { converter.remainderFrames }

    /// Writes whole frames of the client format.
    /// - Throws: ``AudioFileWriterError`` when the file is closed or cannot be written (a full
    ///   disk); ``AudioQueueError`` when the encoder fails.
    public func write(_ bytes: UnsafeRawBufferPointer) throws {
        try checkOpen()
        try converter.convert(bytes, into: packets)
        try drain()
    }

    /// Writes interleaved float frames of the client's rate and channel count, whatever the
    /// client's sample layout.
    public func write(floats: UnsafeBufferPointer<Float>) throws {
        try checkOpen()
        try converter.convert(floats: floats, into: packets)
        try drain()
    }

    private func checkOpen() throws {
        guard !closed else { throw AudioFileWriterError(.closed, path: path, "the writer is closed") }
    }

    private func drain() throws {
        if !packets.isEmpty {
            try container.append(packets)
            sinceCheckpoint += Int64(packets.frameCount)
            packets.removeAll()
        }
        if recording && sinceCheckpoint >= checkpointFrames {
            sinceCheckpoint = 0
            try container.checkpoint(totals)
        }
    }

    private var totals: ContainerTotals {
        ContainerTotals(validFrames: min(converter.validFrames, max(converter.packetFrames - Int64(converter.primingFrames), 0)),
                        primingFrames: converter.primingFrames, remainderFrames: converter.remainderFrames,
                        magicCookie: converter.magicCookie)
    }

    /// Encodes what the encoder holds, writes the gapless numbers and closes the file. Closing
    /// again does nothing.
    /// - Throws: ``AudioFileWriterError`` when the file could not be written completely; the
    ///   file is closed all the same.
    public func close() throws {
        guard !closed else { return }
        closed = true
        do {
            try converter.finish(into: packets)
            if !packets.isEmpty { try container.append(packets); packets.removeAll() }
            try container.finish(totals)
        } catch {
            try? output.close()
            throw error
        }
        try output.close()
    }
}
