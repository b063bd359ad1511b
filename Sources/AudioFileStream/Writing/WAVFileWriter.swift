import BufferQueue

/// Writes interleaved float frames to a RIFF/WAVE file as IEEE float32 or 16-bit PCM; the sizes
/// in the header are filled in by ``close()``. A float front end of ``PCMFileWriter``.
///
/// Frames go in either appended in order (``write(_:)``, one thread) or each at its position
/// (``write(_:atFrame:)``, from several threads at once); one file uses one way.
public final class WAVFileWriter: Sendable {
    /// The file written.
    public let path: String
    /// Frames per second.
    public let sampleRate: Int
    /// Samples per frame.
    public let channels: Int
    /// Whether samples are stored as IEEE float32 (else 16-bit integers).
    public let isFloat: Bool
    private let writer: PCMFileWriter
    private let layout: PCMSampleLayout
    /// For more than two channels of a known layout: for each channel of the file (WAVE's order),
    /// the channel of the frames given that it comes from; nil when they are written as given.
    private let reorder: [Int]?

    /// Frames written so far.
    public var framesWritten: Int64 { writer.framesWritten }

    /// - Parameters:
    ///   - path: the file to create (an existing one is replaced).
    ///   - sampleRate: frames per second.
    ///   - channels: samples per frame.
    ///   - float: IEEE float32 samples (true) or 16-bit integers, rounded and clipped.
    ///   - channelLayout: the speakers of the channels of the frames given. With more than
    ///     two channels the file gets WAVE's order (L R C LFE Ls Rs …) and a WAVE_FORMAT_EXTENSIBLE
    ///     channel mask saying so: the frames are reordered as they are written (a decoder's 5.1 in
    ///     AAC order, C L R Ls Rs LFE, lands in the right speakers). nil, or a layout without WAVE
    ///     speakers for every channel: written as given, with a plain header.
    /// - Throws: ``AudioFileStreamError`` when the file cannot be created.
    public init(path: String, sampleRate: Int, channels: Int, float: Bool = true, channelLayout: AudioChannelLayout? = nil) throws {
        let format: AudioStreamDescription = float
            ? .float32(sampleRate: Double(sampleRate), channels: channels)
            : .linearPCM(sampleRate: Double(sampleRate), channels: channels, bitsPerChannel: 16)
        let order = channels > 2 ? channelLayout.flatMap { $0.channelCount == channels ? $0.waveOrder : nil } : nil
        writer = try PCMFileWriter(path: path, format: format, container: .wav, channelMask: order?.mask)
        reorder = order.flatMap { $0.source == Array(0..<channels) ? nil : $0.source }
        layout = try PCMSampleLayout(format)
        self.path = path
        self.sampleRate = sampleRate
        self.channels = channels
        isFloat = float
    }

    deinit { try? close() }

    /// Appends interleaved frames (the sample count is a multiple of the channel count), converted
    /// straight into the file's write block.
    /// - Throws: ``AudioFileStreamError`` when the file is closed or could not be written (a full
    ///   disk): see ``PCMFileWriter``.
    public func write(_ samples: UnsafeBufferPointer<Float>) throws {
        guard let base = samples.baseAddress, !samples.isEmpty else { return }
        if let reorder {
            let ordered = Self.reordered(samples, reorder)
            try ordered.withUnsafeBufferPointer { buffer in
                if let start = buffer.baseAddress, !buffer.isEmpty { try writer.write(converting: start, count: buffer.count, layout: layout) }
            }
            return
        }
        try writer.write(converting: base, count: samples.count, layout: layout)
    }

    /// Frames with their channels in the file's order.
    private static func reordered(_ samples: UnsafeBufferPointer<Float>, _ source: [Int]) -> [Float] {
        let channels = source.count
        var out = [Float](repeating: 0, count: samples.count - samples.count % channels)
        for frame in 0..<(out.count / channels) {
            for (channel, from) in source.enumerated() { out[frame * channels + channel] = samples[frame * channels + from] }
        }
        return out
    }

    /// Writes interleaved frames at frame `frame`, converted like ``write(_:)``. Safe to call from
    /// several threads at once.
    /// - Throws: ``AudioFileStreamError`` when they cannot be written (a full disk, a pipe).
    public func write(_ samples: UnsafeBufferPointer<Float>, atFrame frame: Int64) throws {
        guard !samples.isEmpty else { return }
        if let reorder {
            let ordered = Self.reordered(samples, reorder)
            try ordered.withUnsafeBufferPointer { try writeInOrder($0, atFrame: frame) }
            return
        }
        try writeInOrder(samples, atFrame: frame)
    }

    private func writeInOrder(_ samples: UnsafeBufferPointer<Float>, atFrame frame: Int64) throws {
        guard let base = samples.baseAddress, !samples.isEmpty else { return }
        if isFloat {
            try writer.write(UnsafeRawBufferPointer(samples), atFrame: frame)
            return
        }
        let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: samples.count * 2, alignment: 16)
        defer { bytes.deallocate() }
        guard let out = bytes.baseAddress else { return }
        layout.fromFloat(base, count: samples.count, into: out)
        try writer.write(UnsafeRawBufferPointer(bytes), atFrame: frame)
    }

    /// Whether ``write(_:atFrame:)`` can work: the file can seek (a pipe cannot).
    public var canWriteAtPositions: Bool { writer.canWriteAtPositions }

    /// Sets the length of a file written by position (see ``PCMFileWriter/truncate(toFrames:)``).
    public func truncate(toFrames frames: Int64) { writer.truncate(toFrames: frames) }

    /// Writes what is left, fills in the header's sizes and closes the file.
    /// - Throws: ``AudioFileStreamError`` when the file could not be written completely.
    public func close() throws { try writer.close() }
}
