#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import AudioFileStream

/// Writes interleaved float frames to a RIFF/WAVE file as IEEE float32 or 16-bit PCM; the sizes
/// in the header are filled in by ``close()``.
public final class WAVFileWriter {
    public let path: String
    public let sampleRate: Int
    public let channels: Int
    public let isFloat: Bool
    private let file: UnsafeMutablePointer<FILE>
    public private(set) var framesWritten: Int64 = 0
    private var closed = false
    private var int16Scratch: [Int16] = []

    /// - Throws: ``AudioFileStreamError`` when the file cannot be created.
    public init(path: String, sampleRate: Int, channels: Int, float: Bool = true) throws {
        guard let file = fopen(path, "wb") else {
            throw AudioFileStreamError(.invalidOperation, .wave, 0, "cannot create \(path): \(String(cString: strerror(errno)))")
        }
        self.path = path
        self.sampleRate = sampleRate
        self.channels = channels
        isFloat = float
        self.file = file
        writeHeader(dataBytes: 0)
    }

    deinit { close() }

    private var headerSize: Int { isFloat ? 46 : 44 }

    private func writeHeader(dataBytes: Int) {
        var h: [UInt8] = []
        func u32(_ v: Int) { withUnsafeBytes(of: UInt32(truncatingIfNeeded: v).littleEndian) { h += $0 } }
        func u16(_ v: Int) { withUnsafeBytes(of: UInt16(truncatingIfNeeded: v).littleEndian) { h += $0 } }
        let bytes = isFloat ? 4 : 2
        h += Array("RIFF".utf8); u32(headerSize - 8 + dataBytes); h += Array("WAVE".utf8)
        h += Array("fmt ".utf8); u32(isFloat ? 18 : 16)
        u16(isFloat ? 3 : 1); u16(channels); u32(sampleRate); u32(sampleRate * channels * bytes); u16(channels * bytes); u16(bytes * 8)
        if isFloat { u16(0) }
        h += Array("data".utf8); u32(dataBytes)
        fseeko(file, 0, SEEK_SET)
        _ = h.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
        fseeko(file, 0, SEEK_END)
    }

    /// Appends interleaved frames (the sample count is a multiple of the channel count).
    public func write(_ samples: UnsafeBufferPointer<Float>) {
        guard let base = samples.baseAddress, !closed else { return }
        if isFloat {
            fwrite(base, 4, samples.count, file)
        } else {
            if int16Scratch.count < samples.count { int16Scratch = [Int16](repeating: 0, count: samples.count) }
            for i in 0..<samples.count { int16Scratch[i] = Int16(max(min((Double(samples[i]) * 32768).rounded(), 32767), -32768)) }
            _ = int16Scratch.withUnsafeBufferPointer { fwrite($0.baseAddress, 2, samples.count, file) }
        }
        framesWritten += Int64(samples.count / max(channels, 1))
    }

    /// Fills in the header's sizes and closes the file.
    public func close() {
        guard !closed else { return }
        closed = true
        writeHeader(dataBytes: Int(framesWritten) * channels * (isFloat ? 4 : 2))
        fclose(file)
    }
}
