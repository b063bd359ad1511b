import BufferQueue

/// What a container writer is told before the first packet.
package struct ContainerStream {
    /// The packets' format.
    package var format: AudioStreamDescription
    /// The decoder's cookie as the encoder gives it at the start (final in ``ContainerTotals``).
    package var magicCookie: [UInt8]?
    /// The speakers of the channels, in the order they are encoded.
    package var channelLayout: AudioChannelLayout?
    /// The encoder's delay.
    package var primingFrames: Int
    package var maximumPacketSize: Int
    /// Whether the file must stay playable if the process dies (AudioPlayback's `AudioFileWriter`).
    package var recording: Bool
    /// About how many frames (of the packets' rate) will be written, when known.
    package var expectedFrames: Int64?
    /// The speakers of linear PCM channels as WAVE_FORMAT_EXTENSIBLE's bits, when the caller
    /// states them so (``PCMFileWriter``): a WAV's extensible header for any channel count, a
    /// CAF's `chan` bitmap. Otherwise the writers derive what they write from `channelLayout`.
    package var waveChannelMask: UInt32?

    package init(format: AudioStreamDescription, magicCookie: [UInt8]?, channelLayout: AudioChannelLayout?, primingFrames: Int,
                 maximumPacketSize: Int, recording: Bool, expectedFrames: Int64? = nil, waveChannelMask: UInt32? = nil) {
        self.format = format
        self.magicCookie = magicCookie
        self.channelLayout = channelLayout
        self.primingFrames = primingFrames
        self.maximumPacketSize = maximumPacketSize
        self.recording = recording
        self.expectedFrames = expectedFrames
        self.waveChannelMask = waveChannelMask
    }
}

/// The gapless numbers and the final cookie, at a checkpoint or at the end.
package struct ContainerTotals {
    /// Frames of the source in the packets written.
    package var validFrames: Int64
    package var primingFrames: Int
    /// Frames of padding after the valid ones, as the packets' own frame counts add up.
    package var remainderFrames: Int
    package var magicCookie: [UInt8]?

    package init(validFrames: Int64, primingFrames: Int, remainderFrames: Int, magicCookie: [UInt8]?) {
        self.validFrames = validFrames
        self.primingFrames = primingFrames
        self.remainderFrames = remainderFrames
        self.magicCookie = magicCookie
    }
}

/// One container's way of laying packets down: a header when made, packets as they come, the
/// numbers filled in at the end. Each writer puts down the gapless numbers its container has, in
/// the container's module, beside its parser (the writing half of the container's facts).
package protocol ContainerWriter: AnyObject {
    /// Appends encoded packets.
    func append(_ packets: EncodedPackets) throws
    /// A recording's periodic point: after it, a process killed at any moment leaves a file that
    /// plays the packets appended so far.
    func checkpoint(_ totals: ContainerTotals) throws
    /// Writes what is left and the final numbers (the output is closed by the caller).
    func finish(_ totals: ContainerTotals) throws
}

extension AudioChannelLayout {
    /// Whether every channel has a speaker (a layout worth writing down).
    var isLabelled: Bool { !channelLabels.contains(.unknown) && !channelLabels.isEmpty }
}

extension AudioFileType {
    /// The containers this module writes (`makeContainerWriter(_:output:stream:)`).
    public static let writable: [AudioFileType] = [.caf, .wave, .aiff, .aifc, .flac, .ogg, .mp4]

    /// Whether this module writes the container.
    public var isWritable: Bool { Self.writable.contains(self) }

    /// Whether a file of this type is written in `format`: the checks its writer makes (a FLAC or
    /// Ogg writer also needs the stream's cookie, which only the encoder makes).
    public func isWritten(in format: AudioStreamDescription) -> Bool {
        switch self {
        case .wave: return (try? RIFFWriter.checkWAV(format, path: "")) != nil
        case .aiff, .aifc: return (try? RIFFWriter.aifcCompression(format, aifc: self == .aifc, path: "")) != nil
        case .caf: return true
        case .mp4: return MP4Writer.formats.contains(format.formatID)
        case .flac: return format.formatID == .flac
        case .ogg: return format.formatID == .opus
        case .mp3, .adts, .amr, .mpegTransportStream, .matroska: return false
        }
    }
}

/// The writer of `type`'s container, its header laid down in `output`: one place that knows which
/// writer writes which container (a recording's MP4 is fragmented; Ogg carries Opus).
/// - Throws: ``AudioFileWriterError`` when the container does not hold the stream's format, or is
///   not one this module writes.
package func makeContainerWriter(_ type: AudioFileType, output: AudioFileOutput, stream: ContainerStream) throws -> any ContainerWriter {
    switch type {
    case .caf: return try CAFWriter(output: output, stream: stream)
    case .wave: return try RIFFWriter(output: output, stream: stream, kind: .wav)
    case .aiff: return try RIFFWriter(output: output, stream: stream, kind: .aiff)
    case .aifc: return try RIFFWriter(output: output, stream: stream, kind: .aifc)
    case .ogg: return try OggOpusWriter(output: output, stream: stream)
    case .mp4: return try MP4Writer(output: output, stream: stream, fragmented: stream.recording)
    case .flac: return try FLACWriter(output: output, stream: stream)
    case .mp3, .adts, .amr, .mpegTransportStream, .matroska:
        throw AudioFileWriterError(.unsupportedFormat, path: output.path, "\(type.displayName) files are not written")
    }
}
