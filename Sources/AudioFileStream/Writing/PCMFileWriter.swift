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
/// (``write(_:atFrame:)``, from any number of threads at once, as a `ConcurrentFileRenderer`
/// delivers them); one file uses one way.
///
/// The header is the container writer's (`RIFFWriter`, `CAFWriter`: the ones every other file
/// goes through), and the bytes go through the one file output (`AudioFileOutput`): appended
/// frames are collected in a 64 KiB block and written a block at a time at offsets that are
/// multiples of the block (the header shares the first block), so the kernel never has to fill in
/// part of a page. A failed write (a full disk) is thrown by the call that writes the block — that
/// call or a later one, or ``close()`` — and every later call throws it again.
public final class PCMFileWriter: Sendable {
    /// The container written.
    public enum Container: Sendable {
        /// RIFF WAVE.
        case wav
        /// Core Audio Format.
        case caf

        /// The container a file name asks for (`.caf` → CAF, anything else → WAV).
        public init(path: String) {
            self = path.lowercased().hasSuffix(".caf") ? .caf : .wav
        }
    }

    /// The file written.
    public let path: String
    /// The frames' format, which the file holds.
    public let format: AudioStreamDescription
    /// The container written.
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

    /// The header's bytes (before the first frame).
    private let headerBytes: Int
    /// The appending side: the file's output and its container's writer, used by one caller at a
    /// time (appends come in order); ``framesWritten`` may be read from any thread.
    private struct Appending {
        let output: AudioFileOutput
        let writer: any ContainerWriter
        var closed = false
        var appended: Int64 = 0
        /// Whether frames are written at positions (the header is then on disk).
        var positional = false
    }
    private let appending: Lock<Appending>
    /// Where positional writes go, from any thread.
    private let positions: PositionalFileOutput
    /// Positional writes: the end of the furthest frame written, the length set by `truncate`.
    private let positional = Lock((end: Int64(0), length: Int64?.none))

    /// - Parameters:
    ///   - path: the file to create (an existing one is replaced).
    ///   - format: interleaved little-endian linear PCM: the frames given and the file's samples.
    ///   - container: WAVE or CAF (nil: the one the path's extension names, else WAVE).
    ///   - channelMask: the speakers of the channels, as WAVE_FORMAT_EXTENSIBLE's bits (the
    ///     frames in that order, the lowest bit first): a WAV's extensible header, a CAF's `chan`
    ///     chunk (a channel bitmap, whose bits are WAVE's).
    /// - Throws: ``AudioFileWriterError`` when the file cannot be created or the format is not
    ///   interleaved little-endian linear PCM the container holds.
    public init(path: String, format: AudioStreamDescription, container: Container? = nil, channelMask: UInt32? = nil) throws {
        let layout = try? PCMSampleLayout(format)
        guard let layout, !format.formatFlags.contains(.isBigEndian) else {
            throw AudioFileWriterError(.unsupportedFormat, path: path, "only interleaved little-endian linear PCM is written, not \(format)")
        }
        if case .signed(let bits, let bytes, _, _) = layout, bits != bytes * 8 {
            throw AudioFileWriterError(.unsupportedFormat, path: path, "\(bits)-bit samples in \(bytes)-byte containers are not written; use packed samples")
        }
        let container = container ?? Container(path: path)
        let output = try AudioFileOutput(path: path)
        let stream = ContainerStream(format: format, magicCookie: nil, channelLayout: nil, primingFrames: 0,
                                     maximumPacketSize: format.bytesPerPacket, recording: true, waveChannelMask: channelMask)
        let writer: any ContainerWriter
        do {
            writer = try makeContainerWriter(container == .caf ? .caf : .wave, output: output, stream: stream)
        } catch {
            try? output.close()
            throw error
        }
        self.path = path
        self.format = format
        self.container = container
        self.channelMask = channelMask
        canWriteAtPositions = output.canSeek
        headerBytes = Int(output.length)
        positions = output.positions
        appending = Lock(Appending(output: output, writer: writer))
    }

    deinit { try? close() }

    /// Appends whole frames of the writer's format (a trailing partial frame is ignored).
    /// - Throws: ``AudioFileWriterError`` when the file is closed or a block could not be written
    ///   (a full disk); the frames of a failed block are lost.
    public func write(_ bytes: UnsafeRawBufferPointer) throws {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        let frames = bytes.count / format.bytesPerFrame
        try appending.withLock { a in
            guard !a.closed else { throw AudioFileWriterError(.closed, path: path, "the writer is closed") }
            try a.output.append(UnsafeRawBufferPointer(start: base, count: frames * format.bytesPerFrame))
            a.appended += Int64(frames)
        }
    }

    /// Appends `count` float samples converted to the writer's format straight into the block.
    package func write(converting samples: UnsafePointer<Float>, count: Int, layout: PCMSampleLayout) throws {
        let channels = format.channelsPerFrame
        let whole = count - count % channels
        guard whole > 0 else { return }
        try appending.withLock { a in
            guard !a.closed else { throw AudioFileWriterError(.closed, path: path, "the writer is closed") }
            try a.output.append(count: whole, unitBytes: format.bytesPerFrame / channels) { destination, first, n in
                layout.fromFloat(samples + first, count: n, into: destination)
            }
            a.appended += Int64(whole / channels)
        }
    }

    /// Writes whole frames of the writer's format at frame `frame` (0: the first after the header),
    /// wherever the file ends now. Safe to call from several threads at once (`pwrite`).
    /// - Throws: ``AudioFileWriterError`` when the bytes cannot be written (a full disk, an output
    ///   that cannot seek such as a pipe).
    public func write(_ bytes: UnsafeRawBufferPointer, atFrame frame: Int64) throws {
        guard let base = bytes.baseAddress, !bytes.isEmpty, frame >= 0 else { return }
        let count = bytes.count / format.bytesPerFrame * format.bytesPerFrame
        guard canWriteAtPositions else {
            throw AudioFileWriterError(.writeFailed, path: path, byteOffset: Int64(headerBytes) + frame * Int64(format.bytesPerFrame),
                                       "cannot write frame \(frame) at its place: the output cannot seek")
        }
        // The header goes out with the first (nothing is appended to a file written by position).
        try appending.withLock { a in
            guard !a.closed else { throw AudioFileWriterError(.closed, path: path, "the writer is closed") }
            if !a.positional {
                try a.output.flush()
                a.positional = true
            }
        }
        try positions.write(UnsafeRawBufferPointer(start: base, count: count), at: Int64(headerBytes) + frame * Int64(format.bytesPerFrame))
        positional.withLock { $0.end = max($0.end, frame + Int64(count / format.bytesPerFrame)) }
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
            do {
                let (end, length) = positional.withLock { $0 }
                let frames = a.appended + (length ?? end)
                if a.positional {
                    // The frames written at their places are the data: the container's sizes and
                    // a WAV's pad byte go after them.
                    let fileEnd = Int64(headerBytes) + frames * Int64(format.bytesPerFrame)
                    if let length, length < end { try a.output.truncate(to: fileEnd) }
                    try a.output.extend(to: fileEnd)
                }
                try a.writer.finish(ContainerTotals(validFrames: frames, primingFrames: 0, remainderFrames: 0, magicCookie: nil))
            } catch {
                try? a.output.close()
                throw error
            }
            try a.output.close()
        }
    }
}
