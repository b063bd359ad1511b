import AudioFileStream
import BufferQueue

/// Writes interleaved float frames to a RIFF/WAVE file as IEEE float32 or 16-bit PCM; the sizes
/// in the header are filled in by ``close()``. A float front end of ``PCMFileWriter``.
///
/// Frames go in either appended in order (``write(_:)``, one thread) or each at its position
/// (``write(_:atFrame:)``, from several threads at once); one file uses one way.
public final class WAVFileWriter: @unchecked Sendable {
    public let path: String
    public let sampleRate: Int
    public let channels: Int
    public let isFloat: Bool
    private let writer: PCMFileWriter
    private let layout: PCMSampleLayout

    /// Frames written so far.
    public var framesWritten: Int64 { writer.framesWritten }

    /// - Throws: ``AudioFileStreamError`` when the file cannot be created.
    public init(path: String, sampleRate: Int, channels: Int, float: Bool = true) throws {
        let format: AudioStreamDescription = float
            ? .float32(sampleRate: Double(sampleRate), channels: channels)
            : .linearPCM(sampleRate: Double(sampleRate), channels: channels, bitsPerChannel: 16)
        writer = try PCMFileWriter(path: path, format: format, container: .wav)
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
        try writer.write(converting: base, count: samples.count, layout: layout)
    }

    /// Writes interleaved frames at frame `frame`, converted like ``write(_:)``. Safe to call from
    /// several threads at once.
    /// - Throws: ``AudioFileStreamError`` when they cannot be written (a full disk, a pipe).
    public func write(_ samples: UnsafeBufferPointer<Float>, atFrame frame: Int64) throws {
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
