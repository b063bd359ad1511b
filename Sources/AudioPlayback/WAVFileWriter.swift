import AudioFileStream
import BufferQueue

/// Writes interleaved float frames to a RIFF/WAVE file as IEEE float32 or 16-bit PCM; the sizes
/// in the header are filled in by ``close()``. A float front end of ``PCMFileWriter``.
public final class WAVFileWriter {
    public let path: String
    public let sampleRate: Int
    public let channels: Int
    public let isFloat: Bool
    private let writer: PCMFileWriter
    private let layout: PCMSampleLayout
    private var int16Scratch: [Int16] = []

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

    deinit { close() }

    /// Appends interleaved frames (the sample count is a multiple of the channel count).
    public func write(_ samples: UnsafeBufferPointer<Float>) {
        guard let base = samples.baseAddress, !samples.isEmpty else { return }
        if isFloat {
            writer.write(UnsafeRawBufferPointer(samples))
        } else {
            if int16Scratch.count < samples.count { int16Scratch = [Int16](repeating: 0, count: samples.count) }
            int16Scratch.withUnsafeMutableBytes { bytes in
                guard let out = bytes.baseAddress else { return }
                layout.fromFloat(base, count: samples.count, into: out)
                writer.write(UnsafeRawBufferPointer(rebasing: bytes.prefix(samples.count * 2)))
            }
        }
    }

    /// Fills in the header's sizes and closes the file.
    public func close() { writer.close() }
}
