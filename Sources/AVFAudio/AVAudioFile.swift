import Foundation
internal import BufferQueue
internal import AudioFileStream
internal import AudioPlayback
internal import AudioCodecs

/// The codecs AVFAudio reads and writes with, registered before the first file is opened.
let codecsRegistered: Bool = {
    AudioCodecs.registerAll()
    return true
}()

/// An audio file read or written in buffers of PCM (Apple's `AVAudioFile`).
///
/// Reading decodes to ``processingFormat`` — deinterleaved float32 at the file's rate unless
/// another common format is asked for — and is gapless: ``length`` is the file's valid frames
/// (its encoder's priming and padding left out), and setting ``framePosition`` seeks to that
/// frame exactly. Writing takes buffers of ``processingFormat`` and encodes them into the
/// container the URL's extension names, in the format the settings dictionary describes.
///
/// Not thread-safe, as Apple's: use one file from one thread at a time.
open class AVAudioFile: NSObject {
    /// The file's location.
    public let url: URL
    /// The format of the file's data (as stored: compressed, or its PCM).
    public let fileFormat: AVAudioFormat
    /// The format of the buffers read or written.
    public let processingFormat: AVAudioFormat

    private enum Mode {
        case reading(AudioFile, AudioFileRenderer?)
        case writing(AudioFileWriter?)
    }
    private var mode: Mode
    private var position: AVAudioFramePosition = 0
    private var frames: AVAudioFramePosition
    private var scratch: [Float] = []

    /// Opens a file for reading into deinterleaved float32 buffers.
    public convenience init(forReading fileURL: URL) throws {
        try self.init(forReading: fileURL, commonFormat: .pcmFormatFloat32, interleaved: false)
    }

    /// Opens a file for reading into buffers of `format`, interleaved or not.
    /// - Throws: an `NSError` in `NSOSStatusErrorDomain`: the file cannot be read, is not audio,
    ///   or no decoder is registered for its format (the reason in `localizedDescription`).
    public init(forReading fileURL: URL, commonFormat format: AVAudioCommonFormat, interleaved: Bool) throws {
        _ = codecsRegistered
        url = fileURL
        do {
            let file = try AudioFile(path: fileURL.path)
            let renderer = try AudioFileRenderer(file: file)
            let output = renderer.outputFormat
            guard let processing = AVAudioFormat(commonFormat: format, sampleRate: output.sampleRate,
                                                 channels: AVAudioChannelCount(output.channelsPerFrame), interleaved: interleaved) else {
                throw StatusError(kAudio_ParamError, "\(format) is not a processing format")
            }
            processingFormat = processing
            var stored = AudioStreamBasicDescription(file.dataFormat)
            fileFormat = AVAudioFormat(streamDescription: &stored) ?? processing
            fileFormat.magicCookie = file.magicCookie.map { Data($0) }
            frames = renderer.expectedFrames ?? file.totalFrames
            mode = .reading(file, renderer)
        } catch {
            throw Self.nsError(error)
        }
        super.init()
    }

    /// Creates a file for writing deinterleaved float32 buffers, encoded as `settings` say.
    public convenience init(forWriting fileURL: URL, settings: [String: Any]) throws {
        try self.init(forWriting: fileURL, settings: settings, commonFormat: .pcmFormatFloat32, interleaved: false)
    }

    /// Creates a file for writing buffers of `format`: the container from the URL's extension
    /// (`.wav`, `.caf`, `.aif`/`.aiff`, `.m4a`, `.flac`, `.opus`), the data as `settings` describe
    /// it (``AVFormatIDKey``, ``AVSampleRateKey``, ``AVNumberOfChannelsKey`` — required —, and
    /// ``AVLinearPCMBitDepthKey``, ``AVLinearPCMIsFloatKey``, ``AVEncoderBitRateKey``,
    /// ``AVEncoderBitDepthHintKey``, ``AVEncoderAudioQualityKey`` as they apply).
    public init(forWriting fileURL: URL, settings: [String: Any], commonFormat format: AVAudioCommonFormat, interleaved: Bool) throws {
        _ = codecsRegistered
        url = fileURL
        do {
            guard let rate = AVAudioFormat.number(settings[AVSampleRateKey]), rate > 0,
                  let channels = AVAudioFormat.number(settings[AVNumberOfChannelsKey]), channels >= 1, channels <= 64 else {
                throw StatusError(kAudio_ParamError, "the settings need AVSampleRateKey and AVNumberOfChannelsKey (1 to 64)")
            }
            guard let processing = AVAudioFormat(commonFormat: format, sampleRate: rate, channels: AVAudioChannelCount(channels),
                                                 interleaved: interleaved) else {
                throw StatusError(kAudio_ParamError, "\(format) is not a processing format")
            }
            let writer = try AudioFileWriter(path: fileURL.path, encoding: Self.encoding(settings),
                                             clientFormat: .float32(sampleRate: rate, channels: Int(channels)))
            var stored = AudioStreamBasicDescription(writer.dataFormat)
            processingFormat = processing
            fileFormat = AVAudioFormat(streamDescription: &stored) ?? processing
            frames = 0
            mode = .writing(writer)
        } catch {
            throw Self.nsError(error)
        }
        super.init()
    }

    deinit { close() }

    /// Frames in the file: when reading, its valid frames (gapless); when writing, those written.
    open var length: AVAudioFramePosition { frames }

    /// The frame the next read or write begins at; setting it (while reading) seeks there exactly.
    open var framePosition: AVAudioFramePosition {
        get { position }
        set {
            guard case .reading(let file, _) = mode, newValue != position else { return }
            position = max(newValue, 0)
            mode = .reading(file, nil)
        }
    }

    /// Whether the file is open (``close()`` not called yet).
    open var isOpen: Bool {
        switch mode {
        case .reading: return true
        case .writing(let writer): return writer != nil
        }
    }

    /// Reads up to the buffer's capacity of frames from ``framePosition``.
    open func read(into buffer: AVAudioPCMBuffer) throws {
        try read(into: buffer, frameCount: buffer.frameCapacity)
    }

    /// Reads up to `frames` frames from ``framePosition`` into `buffer` (of ``processingFormat``);
    /// its `frameLength` says how many came (0 at the end of the file).
    /// - Throws: an `NSError` in `NSOSStatusErrorDomain`: the buffer's format is not the
    ///   processing format, the file is open for writing, or its data is damaged.
    open func read(into buffer: AVAudioPCMBuffer, frameCount frames: AVAudioFrameCount) throws {
        guard case .reading(let file, let current) = mode else { throw statusError(kAudio_ParamError, "the file is open for writing") }
        guard buffer.format.holdsSamples(as: processingFormat) else {
            throw statusError(kAudio_ParamError, "the buffer's format \(buffer.format) is not the processing format \(processingFormat)")
        }
        let wanted = Int(min(frames, buffer.frameCapacity))
        let channels = Int(processingFormat.channelCount)
        do {
            let renderer: AudioFileRenderer
            if let current {
                renderer = current
            } else {
                renderer = try AudioFileRenderer(file: file, startFrame: position)
                mode = .reading(file, renderer)
            }
            if scratch.count < wanted * channels { scratch = [Float](repeating: 0, count: wanted * channels) }
            var done = 0
            try scratch.withUnsafeMutableBufferPointer { samples in
                while done < wanted {
                    let n = try renderer.render(into: UnsafeMutableBufferPointer(rebasing: samples[(done * channels)..<(wanted * channels)]),
                                                frames: wanted - done)
                    if n == 0 { break }
                    done += n
                }
                if let base = samples.baseAddress { buffer.setInterleavedFloats(base, at: 0, count: done) }
            }
            buffer.frameLength = AVAudioFrameCount(done)
            position += AVAudioFramePosition(done)
        } catch {
            throw Self.nsError(error)
        }
    }

    /// Writes the buffer's `frameLength` frames (of ``processingFormat``) at the end of the file.
    /// - Throws: an `NSError` in `NSOSStatusErrorDomain`: the buffer's format is not the
    ///   processing format, the file is open for reading or closed, or the write failed.
    open func write(from buffer: AVAudioPCMBuffer) throws {
        guard case .writing(let writer) = mode, let writer else { throw statusError(kAudio_ParamError, "the file is not open for writing") }
        guard buffer.format.holdsSamples(as: processingFormat) else {
            throw statusError(kAudio_ParamError, "the buffer's format \(buffer.format) is not the processing format \(processingFormat)")
        }
        let count = Int(buffer.frameLength), channels = Int(processingFormat.channelCount)
        if scratch.count < count * channels { scratch = [Float](repeating: 0, count: count * channels) }
        do {
            try scratch.withUnsafeMutableBufferPointer { samples in
                guard let base = samples.baseAddress else { return }
                buffer.interleavedFloats(into: base, from: 0, count: count)
                try writer.write(floats: UnsafeBufferPointer(rebasing: samples[0..<(count * channels)]))
            }
        } catch {
            throw Self.nsError(error)
        }
        frames += AVAudioFramePosition(count)
        position = frames
    }

    /// Finishes a file being written (its header, the encoder's last packets); later writes
    /// throw. Closing again, or a file being read, does nothing.
    open func close() {
        guard case .writing(let writer) = mode, let writer else { return }
        mode = .writing(nil)
        try? writer.close()
    }

    // MARK: helpers

    /// The codec the settings ask for.
    static func encoding(_ settings: [String: Any]) -> AudioFileEncoding {
        let id = AVAudioFormat.number(settings[AVFormatIDKey]).map { BufferQueue.AudioFormatID(rawValue: UInt32(truncatingIfNeeded: Int64($0))) }
        let depth = AVAudioFormat.number(settings[AVEncoderBitDepthHintKey]) ?? AVAudioFormat.number(settings[AVLinearPCMBitDepthKey])
        let bitRate = AVAudioFormat.number(settings[AVEncoderBitRateKey]).map { Int($0) }
        switch id {
        case nil: return .fromExtension
        case .linearPCM?:
            let float = settings[AVLinearPCMIsFloatKey] as? Bool ?? false
            return .pcm(bits: Int(depth ?? (float ? 32 : 16)), float: float)
        case .aacLC?: return .aac(bitRate: bitRate ?? 128_000)
        case .appleLossless?: return .alac(bits: Int(depth ?? 16))
        case .flac?: return .flac(level: 5, bits: Int(depth ?? 16))
        case .opus?: return .opus(bitRate: bitRate ?? 96_000)
        case let other?: return AudioFileEncoding(formatID: other, bitsPerChannel: Int(depth ?? 0))
        }
    }

    /// What a library error becomes: Apple's status for it, the library's reason as the description.
    private static func nsError(_ error: any Error) -> NSError {
        let bridged = error as NSError
        if bridged.domain == NSOSStatusErrorDomain { return bridged }
        let (status, message) = StatusFamily.extendedFile.status(for: error)
        return statusError(status, message)
    }
}
