#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import BufferQueue

/// Writes interleaved little-endian linear PCM as it comes (an input queue's buffers) to a
/// RIFF/WAVE or a CAF file; ``close()`` fills in the sizes in the header.
///
/// Until it is closed the header says "size unknown" where the container allows it (a CAF `data`
/// chunk of size −1; a WAV's zero sizes), so a recording cut short by a crash is still readable by
/// tools that accept that. An output that cannot seek (a pipe, `/dev/stdout` on a pipe) gets the
/// streaming header for good: WAV sizes of `0xFFFFFFFF`, as `ffmpeg` writes to a pipe, and CAF's −1.
/// Formats: 8-bit (unsigned in WAV, signed in CAF), 16/24/32-bit signed integer, 32/64-bit float.
///
/// Frames go in either appended in order (``write(_:)``, one thread) or each at its position
/// (``write(_:atFrame:)``, from any number of threads at once, as a ``ConcurrentFileRenderer``
/// delivers them); one file uses one way.
///
/// Appended frames are collected in a 64 KiB block and written a block at a time at offsets that
/// are multiples of the block (the header shares the first block), so the kernel never has to
/// fill in part of a page. A failed write (a full disk) is thrown by the call that writes the block
/// — that call or a later one, or ``close()`` — and every later call throws it again.
public final class PCMFileWriter: Sendable {
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
    /// The speakers of the channels (WAVE_FORMAT_EXTENSIBLE's bits): a WAV's extensible header, a
    /// CAF's `chan` bitmap (nil: a plain header, no `chan`).
    public let channelMask: UInt32?
    /// Frames written so far: appended (a block not yet on disk included), or for positional
    /// writes up to the furthest frame written or what ``truncate(toFrames:)`` set.
    public var framesWritten: Int64 {
        appending.withLock { $0.appended } + positional.withLock { $0.length ?? $0.end }
    }
    /// Whether ``write(_:atFrame:)`` can work: the file can seek (a pipe cannot).
    public let canWriteAtPositions: Bool

    private let descriptor: FileDescriptor
    /// The header's bytes (before the first frame).
    private let headerBytes: Int
    /// Appending: the block being filled, how much of it is filled, where it goes in the file.
    private static let blockSize = 65536
    /// Room past the block for the part of a sample that does not fit in it (8 bytes at most).
    private static let slack = 16
    /// The appending side's state: one caller at a time (appends come in order), and
    /// ``framesWritten`` may be read from any thread.
    private struct Appending {
        /// The block (the header first, until the first block is written).
        let block: UnsafeMutableRawPointer
        var closed = false
        var appended: Int64 = 0
        var filled = 0
        var blockOffset: Int64 = 0
        var failure: AudioFileWriterError?
    }
    private let appending: Lock<Appending>
    /// Positional writes: whether the header went out, the end of the furthest frame written, the
    /// length set by `truncate`.
    private let positional = Lock((headerWritten: false, end: Int64(0), length: Int64?.none))

    /// - Parameter channelMask: the speakers of the channels, as WAVE_FORMAT_EXTENSIBLE's bits (the
    ///   frames in that order, the lowest bit first): a WAV's extensible header, a CAF's `chan`
    ///   chunk (a channel bitmap, whose bits are WAVE's).
    /// - Throws: ``AudioFileWriterError`` when the file cannot be created or the format is not
    ///   interleaved little-endian linear PCM.
    public init(path: String, format: AudioStreamDescription, container: Container? = nil, channelMask: UInt32? = nil) throws {
        let layout = try? PCMSampleLayout(format)
        guard let layout, !format.formatFlags.contains(.isBigEndian) else {
            throw AudioFileWriterError(.unsupportedFormat, path: path, "only interleaved little-endian linear PCM is written, not \(format)")
        }
        if case .signed(let bits, let bytes, _, _) = layout, bits != bytes * 8 {
            throw AudioFileWriterError(.unsupportedFormat, path: path, "\(bits)-bit samples in \(bytes)-byte containers are not written; use packed samples")
        }
        let container = container ?? Container(path: path)
        switch (layout, container) {
        case (.signed8, .wav): throw AudioFileWriterError(.unsupportedFormat, path: path, "WAV's 8-bit samples are unsigned; signed 8-bit PCM is not written to a WAV")
        case (.unsigned8, .caf): throw AudioFileWriterError(.unsupportedFormat, path: path, "CAF's 8-bit samples are signed; unsigned 8-bit PCM is not written to a CAF")
        default: break
        }
        // Not O_TRUNC: an existing file is cut to its new header's length below instead. Cut to
        // zero, ext4 writes a rewritten file's blocks to disk before `close` returns (its
        // safeguard for files replaced by truncation, `auto_da_alloc`): tens of milliseconds
        // spent waiting, which a new file is not made to wait.
        let descriptor: FileDescriptor
        do throws(SystemError) { descriptor = try FileDescriptor.open(path, O_WRONLY | O_CREAT, permissions: 0o666) } catch {
            throw AudioFileWriterError(.cannotCreate, path: path, underlying: error, "cannot create the file")
        }
        let canSeek = lseek(descriptor.rawValue, 0, SEEK_CUR) >= 0
        let mask = channelMask
        let header = Self.header(format: format, container: container, dataBytes: nil, streaming: !canSeek, channelMask: mask)
        do throws(SystemError) {
            if try descriptor.status().st_mode & S_IFMT == S_IFREG { try descriptor.truncate(to: Int64(header.count)) }
        } catch {
            try? descriptor.close()
            throw AudioFileWriterError(.cannotCreate, path: path, underlying: error, "cannot cut the existing file to its new header")
        }
        self.path = path
        self.format = format
        self.container = container
        self.channelMask = mask
        self.descriptor = descriptor
        canWriteAtPositions = canSeek
        let block = UnsafeMutableRawPointer.allocate(byteCount: Self.blockSize + Self.slack, alignment: 4096)
        headerBytes = header.count
        header.withUnsafeBytes { bytes in
            if let base = bytes.baseAddress { block.copyMemory(from: base, byteCount: bytes.count) }
        }
        appending = Lock(Appending(block: block, filled: header.count))
    }

    deinit {
        try? close()
        appending.withLock { $0.block }.deallocate()
    }


    /// Appends whole frames of the writer's format (a trailing partial frame is ignored).
    /// - Throws: ``AudioFileWriterError`` when the file is closed or a block could not be written
    ///   (a full disk); the frames of a failed block are lost.
    public func write(_ bytes: UnsafeRawBufferPointer) throws {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        let frames = bytes.count / format.bytesPerFrame
        try appending.withLock { a in
            try append(&a, samples: frames * format.bytesPerFrame, sampleBytes: 1) { destination, first, count in
                destination.copyMemory(from: base + first, byteCount: count)
            }
            a.appended += Int64(frames)
        }
    }

    /// Appends `count` float samples converted to the writer's format straight into the block.
    package func write(converting samples: UnsafePointer<Float>, count: Int, layout: PCMSampleLayout) throws {
        let channels = format.channelsPerFrame
        let whole = count - count % channels
        guard whole > 0 else { return }
        try appending.withLock { a in
            try append(&a, samples: whole, sampleBytes: format.bytesPerFrame / channels) { destination, first, n in
                layout.fromFloat(samples + first, count: n, into: destination)
            }
            a.appended += Int64(whole / channels)
        }
    }

    /// Fills the block with `samples` samples of `sampleBytes` bytes, `fill(destination, first, n)`
    /// at a time, writing each full block.
    private func append(_ a: inout Appending, samples: Int, sampleBytes: Int,
                        _ fill: (UnsafeMutableRawPointer, _ first: Int, _ count: Int) -> Void) throws {
        guard !a.closed else { throw AudioFileWriterError(.closed, path: path, "the writer is closed") }
        if let failure = a.failure { throw failure }
        var done = 0
        while done < samples {
            let n = min(samples - done, (Self.blockSize + Self.slack - a.filled) / sampleBytes)
            fill(a.block + a.filled, done, n)
            a.filled += n * sampleBytes
            done += n
            if a.filled >= Self.blockSize {
                try writeOut(&a, Self.blockSize)
                // What went past the block starts the next one.
                a.filled -= Self.blockSize
                if a.filled > 0 { a.block.copyMemory(from: a.block + Self.blockSize, byteCount: a.filled) }
            }
        }
    }

    /// Writes the block's first `count` bytes where the file is (the block's offset); a failure
    /// is kept and thrown again by every later call.
    private func writeOut(_ a: inout Appending, _ count: Int) throws {
        if let failure = a.failure { throw failure }
        do {
            try writeAll(UnsafeRawPointer(a.block), count: count, at: a.blockOffset, positioned: false)
        } catch {
            a.failure = error
            throw error
        }
        a.blockOffset += Int64(count)
    }

    /// Writes whole frames of the writer's format at frame `frame` (0: the first after the header),
    /// wherever the file ends now. Safe to call from several threads at once (`pwrite`).
    /// - Throws: ``AudioFileWriterError`` when the bytes cannot be written (a full disk, an output
    ///   that cannot seek such as a pipe).
    public func write(_ bytes: UnsafeRawBufferPointer, atFrame frame: Int64) throws {
        guard let base = bytes.baseAddress, !bytes.isEmpty, frame >= 0 else { return }
        let count = bytes.count / format.bytesPerFrame * format.bytesPerFrame
        // The block holds the header: nothing is appended to a file written by position.
        let block = appending.withLock { $0.block }
        try positional.withLock { state in
            if !state.headerWritten {
                try writeAll(UnsafeRawPointer(block), count: headerBytes, at: 0)
                state.headerWritten = true
            }
        }
        try writeAll(base, count: count, at: Int64(headerBytes) + frame * Int64(format.bytesPerFrame))
        positional.withLock { $0.end = max($0.end, frame + Int64(count / format.bytesPerFrame)) }
    }

    /// Writes `count` bytes at file offset `offset`: with `pwrite` when `positioned`, else with
    /// `write` where the file is (an output that cannot seek), `offset` naming the place in errors.
    private func writeAll(_ base: UnsafeRawPointer, count: Int, at offset: Int64, positioned: Bool = true) throws(AudioFileWriterError) {
        var written = 0
        do throws(SystemError) {
            try descriptor.writeAll(UnsafeRawBufferPointer(start: base, count: count), at: positioned ? offset : nil, written: &written)
        } catch {
            throw AudioFileWriterError(.writeFailed, path: path, byteOffset: offset + Int64(written), underlying: error,
                                       "cannot write \(count - written) bytes")
        }
    }

    /// Sets the file's length to `frames` frames of positional writes: ``close()`` cuts off what
    /// was written past them (a render that started over and came out shorter).
    public func truncate(toFrames frames: Int64) {
        positional.withLock { $0.length = max(frames, 0) }
    }

    /// Writes what is left, fills in the header's sizes (where the file can seek) and closes the
    /// file. Closing again does nothing.
    /// - Throws: ``AudioFileWriterError`` when the file could not be written completely (a full
    ///   disk), naming the offset; the file is closed all the same.
    public func close() throws {
        try appending.withLock { a in
            guard !a.closed else { return }
            a.closed = true
            let frames: Int64
            do {
                frames = try finishFile(&a)
            } catch {
                try? descriptor.close()
                throw error
            }
            do throws(SystemError) { try descriptor.close() } catch {
                throw AudioFileWriterError(.closeFailed, path: path, byteOffset: Int64(headerBytes) + frames * Int64(format.bytesPerFrame),
                                           underlying: error, "cannot close the file")
            }
        }
    }

    /// Writes what is left and the final header; returns the frames the file holds.
    private func finishFile(_ a: inout Appending) throws -> Int64 {
        let (headerWritten, end, length) = positional.withLock { $0 }
        let frames = a.appended + (length ?? end)
        let dataBytes = Int64(frames) * Int64(format.bytesPerFrame)
        let pad = container == .wav && dataBytes % 2 == 1
        if headerWritten {
            let fileEnd = Int64(headerBytes) + dataBytes
            if let length, length < end {
                do throws(SystemError) { try descriptor.truncate(to: fileEnd) } catch {
                    throw AudioFileWriterError(.closeFailed, path: path, byteOffset: fileEnd, underlying: error, "cannot cut the file to its frames")
                }
            }
            if pad { var zero: UInt8 = 0; try writeAll(&zero, count: 1, at: fileEnd) }
        } else {
            if pad { a.block.storeBytes(of: 0, toByteOffset: a.filled, as: UInt8.self); a.filled += 1 }
            if a.filled > 0 { try writeOut(&a, a.filled) }
        }
        if canWriteAtPositions {
            let header = Self.header(format: format, container: container, dataBytes: dataBytes, streaming: false, channelMask: channelMask)
            try header.withUnsafeBytes { bytes in
                guard let base = bytes.baseAddress else { return }
                try writeAll(base, count: bytes.count, at: 0)
            }
        }
        return frames
    }

    /// The header: sizes filled in, unknown (`dataBytes` nil) or, for an output that cannot seek,
    /// streaming.
    private static func header(format: AudioStreamDescription, container: Container, dataBytes: Int64?, streaming: Bool,
                               channelMask: UInt32?) -> [UInt8] {
        var header: [UInt8] = []
        func le32(_ value: Int64) { withUnsafeBytes(of: UInt32(truncatingIfNeeded: value).littleEndian) { header += $0 } }
        func be32(_ value: UInt32) { withUnsafeBytes(of: value.bigEndian) { header += $0 } }
        func be64(_ value: UInt64) { withUnsafeBytes(of: value.bigEndian) { header += $0 } }
        switch container {
        case .wav:
            // The fmt chunk as the WAV writer makes it (extensible with a mask).
            let formatChunk = RIFFWriter.waveFormatChunk(format, channelMask: channelMask)
            let riffSize: Int64 = streaming ? 0xFFFF_FFFF : dataBytes.map { 4 + Int64(formatChunk.count) + 8 + $0 + $0 % 2 } ?? 0
            header += Array("RIFF".utf8); le32(riffSize); header += Array("WAVE".utf8)
            header += formatChunk
            header += Array("data".utf8); le32(streaming ? 0xFFFF_FFFF : dataBytes ?? 0)
        case .caf:
            header += CAFWriter.fileHeader(format)
            if let channelMask {
                // A channel bitmap, no descriptions.
                let chan = CoreAudioChannelLayout(tag: CoreAudioChannelLayout.useChannelBitmap, bitmap: channelMask).bytes(bigEndian: true)
                header += Array("chan".utf8); be64(UInt64(chan.count))
                header += chan
            }
            header += Array("data".utf8)
            be64(dataBytes.map { UInt64(4 + $0) } ?? UInt64.max)
            be32(0)  // edit count
        }
        return header
    }
}
