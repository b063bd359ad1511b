import BufferQueue

/// Writes an audio file from PCM, the way `ExtAudioFile` does: the caller's PCM (the client
/// format) goes in, is converted and encoded (``/BufferQueue/AudioEncodingConverter``) and laid down in a
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
    /// The file written.
    public let path: String
    /// The container written.
    public let fileType: AudioFileType
    /// The PCM given to ``write(_:)`` (the packet format for a writer of packets).
    public let clientFormat: AudioStreamDescription
    /// The format of the file's packets.
    public let dataFormat: AudioStreamDescription
    /// The speakers of the file's channels, in the order they are stored.
    public let channelLayout: AudioChannelLayout?
    /// Whether the file is kept playable as it grows.
    public let recording: Bool
    /// The encoder of a writer of PCM; nil for a writer of packets.
    private let converter: AudioEncodingConverter?
    /// A writer of packets: their frames so far, and the priming its caller declared.
    private var packetFrames: Int64 = 0
    /// Whether every packet written said how many frames it holds.
    private var packetFramesKnown = true
    private let declaredPriming: Int
    private let output: AudioFileOutput
    private let container: any ContainerWriter
    private let packets = EncodedPackets()
    private let checkpointFrames: Int64
    private var sinceCheckpoint: Int64 = 0
    private var closed = false

    /// The container a path's extension names, when it is one this writer writes (the sniffer's
    /// reading of extensions: `.caf`, `.wav`, `.aif`/`.aiff`, `.aifc`, `.flac`, `.opus`/`.ogg`/`.oga`,
    /// `.m4a`/`.mp4`/`.m4b`); nil for others.
    public static func fileType(forPath path: String) -> AudioFileType? {
        AudioFileType(pathExtension: AudioSniffer.pathExtension(of: path)).flatMap { $0.isWritable ? $0 : nil }
    }

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
    ///   - jobs: encoders at work at once for a format whose packets encode on their own (ALAC,
    ///     WAV IMA ADPCM): the same bytes as one, sooner (see ``/BufferQueue/AudioEncodingConverter``).
    ///   - encoders: where the encoder for `format` is found.
    ///   - resamplers: where a resampler is found when `format` has another rate than the client's.
    /// - Throws: ``AudioFileWriterError`` when the file cannot be created or the container does not
    ///   hold the format; ``/BufferQueue/AudioQueueError`` when no encoder makes it.
    public init(path: String, fileType: AudioFileType? = nil, format: AudioStreamDescription, clientFormat: AudioStreamDescription,
                clientLayout: AudioChannelLayout? = nil, settings: AudioEncoderSettings = .init(), recording: Bool = false,
                expectedFrames: Int64? = nil, jobs: Int = 1, encoders: AudioEncoderRegistry = .shared,
                resamplers: AudioResamplerRegistry = .shared) throws {
        guard let type = fileType ?? Self.fileType(forPath: path) else {
            throw AudioFileWriterError(.unsupportedFormat, path: path, "the file type is not given and the extension names none this writer writes (.caf, .wav, .aif, .aiff, .aifc, .flac, .opus, .m4a)")
        }
        guard type.isWritable else {
            throw AudioFileWriterError(.unsupportedFormat, path: path, "\(type.displayName) files are not written")
        }
        var containerLayout: AudioChannelLayout?
        if type == .wave, format.isLinearPCM, let layout = clientLayout, let order = layout.waveOrder {
            containerLayout = AudioChannelLayout(channelLabels: order.source.map { layout.channelLabels[$0] })
        }
        let converter = try AudioEncodingConverter(from: clientFormat, clientLayout: clientLayout, to: format, settings: settings,
                                                   containerLayout: containerLayout, encoders: encoders, resamplers: resamplers, jobs: jobs)
        self.converter = converter
        let ratio = converter.outputFormat.sampleRate / max(clientFormat.sampleRate, 1)
        let expected = expectedFrames.map { Int64(Double($0) * ratio) }
        let stream = ContainerStream(format: converter.outputFormat, magicCookie: converter.magicCookie, channelLayout: converter.channelLayout,
                                     primingFrames: converter.primingFrames, maximumPacketSize: converter.maximumPacketSize, recording: recording,
                                     expectedFrames: expected)
        (output, container) = try Self.open(path: path, type: type, stream: stream)
        self.path = path
        self.fileType = type
        self.clientFormat = clientFormat
        dataFormat = converter.outputFormat
        channelLayout = converter.channelLayout
        declaredPriming = converter.primingFrames
        self.recording = recording
        checkpointFrames = Int64(max(converter.outputFormat.sampleRate, 1))
    }

    /// A writer of packets already encoded (an input queue's, `AudioFileWritePackets`'): they are
    /// laid down as they are; ``close(totals:magicCookie:)`` puts the gapless numbers down.
    ///
    /// - Parameters:
    ///   - path: the file to create (an existing one is replaced).
    ///   - fileType: the container; nil for the one the path's extension names.
    ///   - format: the packets' format (for linear PCM, the file's sample layout).
    ///   - magicCookie: what a decoder needs (as an encoder gives it; the writer puts it in the
    ///     container's form).
    ///   - channelLayout: the speakers of the channels as stored.
    ///   - primingFrames: the encoder's delay.
    ///   - maximumPacketSize: the largest packet (for the containers that state it).
    ///   - recording: keep the file playable as it grows (see the type's notes).
    ///   - expectedFrames: about how many frames will be written, when known: a FLAC file's seek
    ///     table is sized for it.
    /// - Throws: ``AudioFileWriterError`` when the file cannot be created or the container does not
    ///   hold the format.
    public init(path: String, fileType: AudioFileType? = nil, packetFormat format: AudioStreamDescription, magicCookie: [UInt8]?,
                channelLayout: AudioChannelLayout? = nil, primingFrames: Int = 0, maximumPacketSize: Int = 0, recording: Bool = false,
                expectedFrames: Int64? = nil) throws {
        guard let type = fileType ?? Self.fileType(forPath: path) else {
            throw AudioFileWriterError(.unsupportedFormat, path: path, "the file type is not given and the extension names none this writer writes (.caf, .wav, .aif, .aiff, .aifc, .flac, .opus, .m4a)")
        }
        guard type.isWritable else {
            throw AudioFileWriterError(.unsupportedFormat, path: path, "\(type.displayName) files are not written")
        }
        let stream = ContainerStream(format: format, magicCookie: magicCookie, channelLayout: channelLayout, primingFrames: primingFrames,
                                     maximumPacketSize: maximumPacketSize, recording: recording, expectedFrames: expectedFrames)
        (output, container) = try Self.open(path: path, type: type, stream: stream)
        converter = nil
        self.path = path
        self.fileType = type
        clientFormat = format
        dataFormat = format
        self.channelLayout = channelLayout
        declaredPriming = primingFrames
        self.recording = recording
        checkpointFrames = Int64(max(format.sampleRate, 1))
    }

    private static func open(path: String, type: AudioFileType, stream: ContainerStream) throws -> (AudioFileOutput, any ContainerWriter) {
        let output = try AudioFileOutput(path: path)
        do {
            return (output, try makeContainerWriter(type, output: output, stream: stream))
        } catch {
            try? output.close()
            throw error
        }
    }

    deinit { try? close() }

    /// The source frames written so far (at the file's rate): the file's valid frames. For a
    /// writer of packets, the frames of the packets less the priming, until closed with the totals.
    public var validFrames: Int64 { converter?.validFrames ?? closedTotals?.validFrames ?? max(packetFrames - Int64(declaredPriming), 0) }
    /// Encoders at work at once (see `jobs`): 1 unless the format's packets stand alone.
    public var encodingJobs: Int { converter?.encodingJobs ?? 1 }
    /// The encoder's delay at the start of the decoded packets.
    public var primingFrames: Int { converter?.primingFrames ?? declaredPriming }
    /// The padding of the last packet (final after ``close()``).
    public var remainderFrames: Int { converter?.remainderFrames ?? closedTotals?.remainderFrames ?? 0 }
    private var closedTotals: AudioEncodingTotals?

    /// Writes whole frames of the client format.
    /// - Throws: ``AudioFileWriterError`` when the file is closed or cannot be written (a full
    ///   disk); ``/BufferQueue/AudioQueueError`` when the encoder fails.
    public func write(_ bytes: UnsafeRawBufferPointer) throws {
        let converter = try pcmWriter()
        try converter.convert(bytes, into: packets)
        try drain()
    }

    /// Writes interleaved float frames of the client's rate and channel count, whatever the
    /// client's sample layout.
    public func write(floats: UnsafeBufferPointer<Float>) throws {
        let converter = try pcmWriter()
        try converter.convert(floats: floats, into: packets)
        try drain()
    }

    /// Writes packets to a writer of packets: `bytes` holds them as `descriptions` say (each
    /// packet's frames in `variableFramesInPacket`, or the format's frames per packet). Linear
    /// PCM and other constant-size formats may come without descriptions: whole packets, one
    /// after another.
    public func writePackets(_ bytes: UnsafeRawBufferPointer, descriptions: [AudioPacketDescription]) throws {
        guard !closed else { throw AudioFileWriterError(.closed, path: path, "the writer is closed") }
        guard converter == nil else {
            throw AudioFileWriterError(.unsupportedFormat, path: path, "this writer encodes PCM; write(_:) takes its frames")
        }
        if descriptions.isEmpty {
            let size = dataFormat.bytesPerPacket
            guard size > 0 else {
                throw AudioFileWriterError(.unsupportedFormat, path: path, "packets of \(dataFormat.formatID) vary in size: give their descriptions")
            }
            let count = bytes.count / size
            guard count > 0 else { return }
            packets.append(UnsafeRawBufferPointer(rebasing: bytes[0..<(count * size)]), frames: count * max(dataFormat.framesPerPacket, 1))
        } else {
            for description in descriptions {
                guard description.startOffset >= 0, description.dataByteSize >= 0,
                      description.startOffset + description.dataByteSize <= bytes.count else {
                    throw AudioFileWriterError(.unsupportedFormat, path: path,
                        "a packet description (\(description.dataByteSize) bytes at \(description.startOffset)) runs past the \(bytes.count) bytes given")
                }
                let frames = description.variableFramesInPacket > 0 ? description.variableFramesInPacket : dataFormat.framesPerPacket
                if frames <= 0 { packetFramesKnown = false }
                packets.append(UnsafeRawBufferPointer(rebasing: bytes[description.startOffset..<(description.startOffset + description.dataByteSize)]),
                               frames: frames)
            }
        }
        packetFrames += Int64(packets.frameCount)
        try drain()
    }

    private func pcmWriter() throws -> AudioEncodingConverter {
        guard !closed else { throw AudioFileWriterError(.closed, path: path, "the writer is closed") }
        guard let converter else {
            throw AudioFileWriterError(.unsupportedFormat, path: path, "this writer takes packets; writePackets(_:descriptions:) writes them")
        }
        return converter
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
        guard let converter else {
            return ContainerTotals(validFrames: max(packetFrames - Int64(declaredPriming), 0), primingFrames: declaredPriming,
                                   remainderFrames: 0, magicCookie: nil)
        }
        return ContainerTotals(validFrames: min(converter.validFrames, max(converter.packetFrames - Int64(converter.primingFrames), 0)),
                               primingFrames: converter.primingFrames, remainderFrames: converter.remainderFrames,
                               magicCookie: converter.magicCookie)
    }

    /// Encodes what the encoder holds, writes the gapless numbers and closes the file. Closing
    /// again does nothing.
    /// - Throws: ``AudioFileWriterError`` when the file could not be written completely; the
    ///   file is closed all the same.
    public func close() throws {
        guard !closed else { return }
        try finish(nil, magicCookie: nil)
    }

    /// Closes a writer of packets with the stream's gapless numbers (an input queue's
    /// ``/BufferQueue/AudioInputQueue/encodingTotals``) and its final cookie; without them the packets' frames,
    /// less the priming, are taken as valid. Totals that claim more frames than the packets
    /// written hold are cut to them (padding first).
    public func close(totals: AudioEncodingTotals?, magicCookie: [UInt8]?) throws {
        guard !closed else { return }
        try finish(totals, magicCookie: magicCookie)
    }

    private func finish(_ given: AudioEncodingTotals?, magicCookie: [UInt8]?) throws {
        closed = true
        do {
            if let converter { try converter.finish(into: packets) }
            if !packets.isEmpty { try container.append(packets); packets.removeAll() }
            var final = totals
            if var given {
                // The file never claims frames its packets do not hold: a cut end loses the
                // padding first, then valid frames.
                if converter == nil && packetFramesKnown {
                    let held = max(packetFrames - Int64(given.primingFrames), 0)
                    given.remainderFrames = Int(min(Int64(given.remainderFrames), max(held - given.validFrames, 0)))
                    given.validFrames = min(given.validFrames, held)
                }
                final = ContainerTotals(validFrames: given.validFrames, primingFrames: given.primingFrames,
                                        remainderFrames: given.remainderFrames, magicCookie: magicCookie)
                closedTotals = given
            } else if converter == nil {
                final.magicCookie = magicCookie
            }
            try container.finish(final)
        } catch {
            try? output.close()
            throw error
        }
        try output.close()
    }
}

extension AudioFileWriter {
    /// A writer of PCM encoded with `encoding` (see ``AudioFileStream/AudioFileEncoding``): the
    /// file type from the path's extension, the data format at the client's rate and channel count.
    /// - Throws: ``AudioFileWriterError`` for an extension this writer does not write, or a codec
    ///   the container does not hold; ``/BufferQueue/AudioQueueError`` when the encoder refuses a setting.
    public convenience init(path: String, encoding: AudioFileEncoding = .fromExtension, clientFormat: AudioStreamDescription,
                            clientLayout: AudioChannelLayout? = nil, recording: Bool = false, expectedFrames: Int64? = nil,
                            jobs: Int = 1, encoders: AudioEncoderRegistry = .shared, resamplers: AudioResamplerRegistry = .shared) throws {
        guard let type = Self.fileType(forPath: path) else {
            throw AudioFileWriterError(.unsupportedFormat, path: path, "the extension names no file type this writer writes (.caf, .wav, .aif, .aiff, .aifc, .flac, .opus, .m4a)")
        }
        let resolved = encoding.resolved(for: type)
        let format = try resolved.dataFormat(for: type, sampleRate: clientFormat.sampleRate, channels: clientFormat.channelsPerFrame)
        try self.init(path: path, fileType: type, format: format, clientFormat: clientFormat, clientLayout: clientLayout,
                      settings: resolved.settings, recording: recording, expectedFrames: expectedFrames, jobs: jobs,
                      encoders: encoders, resamplers: resamplers)
    }
}
