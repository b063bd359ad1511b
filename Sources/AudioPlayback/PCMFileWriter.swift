#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import AudioFileStream
import BufferQueue

/// Writes interleaved little-endian linear PCM as it comes (an input queue's buffers) to a
/// RIFF/WAVE or a CAF file; ``close()`` fills in the sizes in the header.
///
/// Until it is closed the header says "size unknown" where the container allows it (a CAF `data`
/// chunk of size −1; a WAV's zero sizes), so a recording cut short by a crash is still readable by
/// tools that accept that. Formats: 8-bit unsigned, 16/24/32-bit signed integer, 32/64-bit float.
///
/// Frames go in either appended in order (``write(_:)``, one thread) or each at its position
/// (``write(_:atFrame:)``, from any number of threads at once, as a ``ConcurrentFileRenderer``
/// delivers them); one file uses one way.
public final class PCMFileWriter: @unchecked Sendable {
    /// The container written.
    public enum Container: Sendable {
        case wav, caf

        /// The container a file name asks for (`.caf` → CAF, anything else → WAV).
        public init(path: String) {
            self = path.lowercased().hasSuffix(".caf") ? .caf : .wav
        }
    }

    public let path: String
    public let format: AudioStreamDescription
    public let container: Container
    /// Frames written so far (positional writes: up to the furthest frame written, or what
    /// ``truncate(toFrames:)`` set).
    public var framesWritten: Int64 {
        appended + positional.withLock { $0.length ?? $0.end }
    }
    private var appended: Int64 = 0
    private let file: UnsafeMutablePointer<FILE>
    private var closed = false
    /// Bytes before the first frame.
    private var headerBytes = 0
    /// Positional writes: whether stdio's buffer was flushed, the end of the furthest frame
    /// written, the length set by `truncate`.
    private let positional = Lock((flushed: false, end: Int64(0), length: Int64?.none))

    /// - Throws: ``AudioFileStreamError`` when the file cannot be created or the format is not
    ///   interleaved little-endian linear PCM.
    public init(path: String, format: AudioStreamDescription, container: Container? = nil) throws {
        let layout = try? PCMSampleLayout(format)
        guard let layout, !format.formatFlags.contains(.isBigEndian) else {
            throw AudioFileStreamError(.unsupportedDataFormat, .wave, 0, "only interleaved little-endian linear PCM is written, not \(format)")
        }
        if case .signed(let bits, let bytes, _, _) = layout, bits != bytes * 8 {
            throw AudioFileStreamError(.unsupportedDataFormat, .wave, 0, "\(bits)-bit samples in \(bytes)-byte containers are not written; use packed samples")
        }
        guard let file = fopen(path, "wb") else {
            throw AudioFileStreamError(.invalidOperation, .wave, 0, "cannot create \(path): \(String(cString: strerror(errno)))")
        }
        self.path = path
        self.format = format
        self.container = container ?? Container(path: path)
        self.file = file
        writeHeader(dataBytes: nil)
    }

    deinit { close() }

    /// Appends whole frames of the writer's format.
    public func write(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !closed, !bytes.isEmpty else { return }
        let frames = bytes.count / format.bytesPerFrame
        fwrite(base, 1, frames * format.bytesPerFrame, file)
        appended += Int64(frames)
    }

    /// Writes whole frames of the writer's format at frame `frame` (0: the first after the header),
    /// wherever the file ends now. Safe to call from several threads at once (`pwrite`).
    /// - Throws: ``AudioFileStreamError`` when the bytes cannot be written (a full disk, an output
    ///   that cannot seek such as a pipe).
    public func write(_ bytes: UnsafeRawBufferPointer, atFrame frame: Int64) throws {
        guard let base = bytes.baseAddress, !bytes.isEmpty, frame >= 0 else { return }
        let frames = bytes.count / format.bytesPerFrame
        let count = frames * format.bytesPerFrame
        let offset = Int64(headerBytes) + frame * Int64(format.bytesPerFrame)
        let descriptor = positional.withLock { state in
            if !state.flushed {
                fflush(file)
                state.flushed = true
            }
            return fileno(file)
        }
        var done = 0
        while done < count {
            let n = pwrite(descriptor, base + done, count - done, off_t(offset + Int64(done)))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                throw AudioFileStreamError(.invalidOperation, container == .wav ? .wave : .caf, offset + Int64(done),
                                           "cannot write \(count - done) bytes at \(offset + Int64(done)) to \(path): \(String(cString: strerror(errno)))")
            }
            done += n
        }
        positional.withLock { $0.end = max($0.end, frame + Int64(frames)) }
    }

    /// Whether ``write(_:atFrame:)`` can work: the file can seek (a pipe cannot).
    public var canWriteAtPositions: Bool { lseek(fileno(file), 0, SEEK_CUR) >= 0 }

    /// Sets the file's length to `frames` frames of positional writes: ``close()`` cuts off what
    /// was written past them (a render that started over and came out shorter).
    public func truncate(toFrames frames: Int64) {
        positional.withLock { $0.length = max(frames, 0) }
    }

    /// Fills in the header's sizes and closes the file. Returns false when the file could not be
    /// written completely (a full disk).
    @discardableResult
    public func close() -> Bool {
        guard !closed else { return true }
        closed = true
        let dataBytes = Int(framesWritten) * format.bytesPerFrame
        let (flushed, end, length) = positional.withLock { $0 }
        if flushed, let length, length < end {
            fflush(file)
            ftruncate(fileno(file), off_t(headerBytes + Int(length) * format.bytesPerFrame))
        }
        fseeko(file, 0, SEEK_END)
        if container == .wav && dataBytes % 2 == 1 { fputc(0, file) }
        writeHeader(dataBytes: dataBytes)
        let failed = ferror(file) != 0
        return fclose(file) == 0 && !failed
    }

    private func writeHeader(dataBytes: Int?) {
        var header: [UInt8] = []
        func le32(_ value: Int) { withUnsafeBytes(of: UInt32(truncatingIfNeeded: value).littleEndian) { header += $0 } }
        func le16(_ value: Int) { withUnsafeBytes(of: UInt16(truncatingIfNeeded: value).littleEndian) { header += $0 } }
        func be32(_ value: UInt32) { withUnsafeBytes(of: value.bigEndian) { header += $0 } }
        func be64(_ value: UInt64) { withUnsafeBytes(of: value.bigEndian) { header += $0 } }
        let isFloat = format.formatFlags.contains(.isFloat)
        let bytesPerSample = format.bytesPerFrame / format.channelsPerFrame
        switch container {
        case .wav:
            let data = dataBytes ?? 0
            let fmtSize = isFloat ? 18 : 16
            header += Array("RIFF".utf8); le32(dataBytes == nil ? 0 : 4 + 8 + fmtSize + 8 + data + data % 2); header += Array("WAVE".utf8)
            header += Array("fmt ".utf8); le32(fmtSize)
            le16(isFloat ? 3 : 1); le16(format.channelsPerFrame); le32(Int(format.sampleRate))
            le32(Int(format.sampleRate) * format.bytesPerFrame); le16(format.bytesPerFrame); le16(bytesPerSample * 8)
            if isFloat { le16(0) }
            header += Array("data".utf8); le32(data)
        case .caf:
            header += Array("caff".utf8); header += [0, 1, 0, 0]
            header += Array("desc".utf8); be64(32)
            be64(format.sampleRate.bitPattern)
            header += Array("lpcm".utf8)
            be32(UInt32(isFloat ? 1 : 0) | 2)  // kCAFLinearPCMFormatFlagIsFloat, …IsLittleEndian
            be32(UInt32(format.bytesPerFrame)); be32(1); be32(UInt32(format.channelsPerFrame)); be32(UInt32(bytesPerSample * 8))
            header += Array("data".utf8)
            be64(dataBytes.map { UInt64(4 + $0) } ?? UInt64.max)
            be32(0)  // edit count
        }
        headerBytes = header.count
        fseeko(file, 0, SEEK_SET)
        _ = header.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
        fseeko(file, 0, SEEK_END)
    }
}
