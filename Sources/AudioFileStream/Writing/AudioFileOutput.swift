#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import BufferQueue

/// The bytes of a file being written — the one place the container writers and ``PCMFileWriter``
/// reach the file.
///
/// - **Appending:** bytes are collected in a 64 KiB block, written a whole block at a time at
///   offsets that are multiples of the block (the header shares the first block), so the kernel
///   never has to fill in part of a page; ``append(count:unitBytes:_:)`` fills the block in place.
/// - **Overwriting:** earlier bytes (a header's sizes) are overwritten in place.
/// - **Positional writes:** ``positions`` writes bytes at any offset from any number of threads
///   at once (`pwrite`), for a file whose frames arrive out of order; such a file appends nothing
///   after its header and sets its length with ``extend(to:)`` before it is finished.
///
/// An existing file is not cut to zero when it is opened but to the length of the first bytes
/// appended (the header): cut to zero, ext4 writes a rewritten file's blocks to disk before
/// `close` returns (its safeguard for files replaced by truncation, `auto_da_alloc`), tens of
/// milliseconds a new file is not made to wait. A failed write is kept and thrown again by every
/// later call. Used by one thread at a time (its positional handle by any).
package final class AudioFileOutput {
    let path: String
    private let descriptor: FileDescriptor
    /// Whether earlier bytes can be overwritten (not a pipe).
    let canSeek: Bool
    /// Bytes appended so far, the block included: where the next byte goes.
    private(set) var length: Int64 = 0
    /// The block being filled and how much of it is: it goes to the file at ``blockOffset``.
    private let block: UnsafeMutableRawPointer
    private var filled = 0
    private var blockOffset: Int64 = 0
    private static let blockSize = 65536
    /// Room past the block for the part of a unit that does not fit in it.
    private static let slack = 64
    private var failure: AudioFileWriterError?
    private var closed = false
    /// An existing regular file, not yet cut to what is written.
    private var needsCut: Bool

    /// Creates the file, or opens an existing one to be written over.
    package init(path: String) throws {
        let descriptor: FileDescriptor
        do throws(SystemError) { descriptor = try FileDescriptor.open(path, O_WRONLY | O_CREAT, permissions: 0o666) } catch {
            throw AudioFileWriterError(.cannotCreate, path: path, underlying: error, "cannot create the file")
        }
        canSeek = lseek(descriptor.rawValue, 0, SEEK_CUR) >= 0
        do throws(SystemError) {
            let info = try descriptor.status()
            needsCut = info.st_mode & S_IFMT == S_IFREG && info.st_size > 0
        } catch {
            try? descriptor.close()
            throw AudioFileWriterError(.cannotCreate, path: path, underlying: error, "cannot read the file's status")
        }
        self.path = path
        self.descriptor = descriptor
        block = UnsafeMutableRawPointer.allocate(byteCount: Self.blockSize + Self.slack, alignment: 4096)
    }

    deinit {
        if !closed { try? descriptor.close() }
        block.deallocate()
    }

    /// Appends bytes.
    func append(_ bytes: UnsafeRawBufferPointer) throws {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        try append(count: bytes.count, unitBytes: 1) { destination, first, count in
            destination.copyMemory(from: base + first, byteCount: count)
        }
    }

    func append(_ bytes: [UInt8]) throws { try bytes.withUnsafeBytes { try append($0) } }

    /// Appends `count` units of `unitBytes` bytes (at most 64), made in place in the block:
    /// `fill(destination, first, n)` writes units `first..<first + n` at `destination`. Each
    /// full block is written out.
    package func append(count: Int, unitBytes: Int, _ fill: (UnsafeMutableRawPointer, _ first: Int, _ count: Int) -> Void) throws {
        if let failure { throw failure }
        guard !closed else { throw AudioFileWriterError(.closed, path: path, "the file is closed") }
        if needsCut { try cut(to: length + Int64(count * unitBytes)) }
        var done = 0
        while done < count {
            let n = min(count - done, (Self.blockSize + Self.slack - filled) / unitBytes)
            fill(block + filled, done, n)
            filled += n * unitBytes
            length += Int64(n * unitBytes)
            done += n
            if filled >= Self.blockSize {
                try writeOut(Self.blockSize)
                // What went past the block starts the next one.
                filled -= Self.blockSize
                if filled > 0 { block.copyMemory(from: block + Self.blockSize, byteCount: filled) }
            }
        }
    }

    /// Cuts an existing file to `bytes` (never to zero while bytes are coming: see the type).
    private func cut(to bytes: Int64) throws {
        needsCut = false
        do throws(SystemError) { try descriptor.truncate(to: bytes) } catch {
            throw keep(AudioFileWriterError(.cannotCreate, path: path, underlying: error, "cannot cut the existing file"))
        }
    }

    private func keep(_ error: AudioFileWriterError) -> AudioFileWriterError {
        failure = failure ?? error
        return error
    }

    /// Writes the block's first `count` bytes at its offset.
    private func writeOut(_ count: Int) throws {
        try writeAll(UnsafeRawBufferPointer(start: block, count: count), at: canSeek ? blockOffset : nil, naming: blockOffset)
        blockOffset += Int64(count)
    }

    /// Writes `bytes` over earlier bytes at `offset` (which must lie before ``length``).
    func overwrite(_ bytes: [UInt8], at offset: Int64) throws {
        if let failure { throw failure }
        var head = bytes[...]
        // The part still in the block is patched there.
        if offset + Int64(bytes.count) > blockOffset {
            let inBlock = max(offset, blockOffset)
            let skip = Int(inBlock - offset)
            for (index, byte) in bytes[skip...].enumerated() {
                block.storeBytes(of: byte, toByteOffset: Int(inBlock - blockOffset) + index, as: UInt8.self)
            }
            head = bytes[..<skip]
        }
        guard !head.isEmpty else { return }
        guard canSeek else {
            throw AudioFileWriterError(.writeFailed, path: path, byteOffset: offset, "cannot go back to byte \(offset): the output cannot seek")
        }
        try head.withUnsafeBytes { try writeAll($0, at: offset, naming: offset) }
    }

    /// Hands the block to the kernel: after this a killed process leaves these bytes in the file.
    func flush() throws {
        if let failure { throw failure }
        guard filled > 0 else { return }
        try writeOut(filled)
        filled = 0
    }

    private func writeAll(_ bytes: UnsafeRawBufferPointer, at offset: Int64?, naming place: Int64) throws {
        do { try positions.write(bytes, at: offset, naming: place) } catch { throw keep(error) }
    }

    /// Writes at any offset, from any thread (`pwrite`), bypassing the block.
    package var positions: PositionalFileOutput { PositionalFileOutput(path: path, descriptor: descriptor) }

    /// After positional writes: the file holds `bytes` bytes, and what is appended from here goes
    /// after them. The block must be empty (flushed, nothing appended since).
    package func extend(to bytes: Int64) throws {
        if let failure { throw failure }
        precondition(filled == 0, "extend(to:) with bytes in the block")
        length = bytes
        blockOffset = bytes
    }

    /// Cuts the file to `bytes` bytes (positional writes that went past the end the file keeps).
    package func truncate(to bytes: Int64) throws {
        if let failure { throw failure }
        do throws(SystemError) { try descriptor.truncate(to: bytes) } catch {
            throw keep(AudioFileWriterError(.closeFailed, path: path, byteOffset: bytes, underlying: error, "cannot cut the file to \(bytes) bytes"))
        }
    }

    /// Flushes and closes; closing again does nothing.
    package func close() throws {
        guard !closed else { return }
        defer { closed = true }
        do {
            if needsCut { try cut(to: 0) }
            try flush()
        } catch {
            try? descriptor.close()
            throw error
        }
        do throws(SystemError) { try descriptor.close() } catch {
            throw AudioFileWriterError(.closeFailed, path: path, byteOffset: length, underlying: error, "cannot close the file")
        }
    }
}

/// Writes bytes at any offset of an ``AudioFileOutput``'s file, from any thread: what a file
/// whose frames arrive out of order (a parallel render) is written with.
package struct PositionalFileOutput: Sendable {
    let path: String
    let descriptor: FileDescriptor

    /// Writes all of `bytes` at `offset` (`pwrite`; nil: where the file is, for an output that
    /// cannot seek). `place` names the offset in the error.
    package func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64?, naming place: Int64? = nil) throws(AudioFileWriterError) {
        var written = 0
        do throws(SystemError) { try descriptor.writeAll(bytes, at: offset, written: &written) } catch {
            throw AudioFileWriterError(.writeFailed, path: path, byteOffset: (place ?? offset ?? 0) + Int64(written), underlying: error,
                                       "cannot write \(bytes.count - written) bytes")
        }
    }
}

/// Big- and little-endian fields appended to a byte array: what container headers are made of.
struct ByteWriter {
    var bytes: [UInt8] = []

    mutating func tag(_ text: String) { bytes += Array(text.utf8) }
    mutating func u8(_ value: Int) { bytes.append(UInt8(truncatingIfNeeded: value)) }
    mutating func be16(_ value: Int) { withUnsafeBytes(of: UInt16(truncatingIfNeeded: value).bigEndian) { bytes += $0 } }
    mutating func be32(_ value: Int64) { withUnsafeBytes(of: UInt32(truncatingIfNeeded: value).bigEndian) { bytes += $0 } }
    mutating func be32(_ value: Int) { be32(Int64(value)) }
    mutating func be32(_ value: UInt32) { withUnsafeBytes(of: value.bigEndian) { bytes += $0 } }
    mutating func be64(_ value: UInt64) { withUnsafeBytes(of: value.bigEndian) { bytes += $0 } }
    mutating func be64(_ value: Int64) { be64(UInt64(bitPattern: value)) }
    mutating func le16(_ value: Int) { withUnsafeBytes(of: UInt16(truncatingIfNeeded: value).littleEndian) { bytes += $0 } }
    mutating func le32(_ value: Int64) { withUnsafeBytes(of: UInt32(truncatingIfNeeded: value).littleEndian) { bytes += $0 } }
    mutating func le32(_ value: Int) { le32(Int64(value)) }
    mutating func le64(_ value: Int64) { withUnsafeBytes(of: UInt64(bitPattern: value).littleEndian) { bytes += $0 } }
    mutating func append(_ other: [UInt8]) { bytes += other }

    /// CAF's and MPEG-4's variable-length integer: 7 bits a byte, the high bit set on all but the last.
    mutating func vlq(_ value: Int64) {
        var groups: [UInt8] = [UInt8(value & 0x7F)]
        var rest = value >> 7
        while rest > 0 {
            groups.append(UInt8(rest & 0x7F) | 0x80)
            rest >>= 7
        }
        bytes += groups.reversed()
    }

    /// An IEEE 754 80-bit extended value (AIFF's sample rate).
    mutating func extended80(_ value: Double) {
        guard value > 0 else { bytes += [UInt8](repeating: 0, count: 10); return }
        let exponent = Int(value.exponent)
        let mantissa = UInt64(value.significandBitPattern | (1 << 52)) << 11
        be16(exponent + 16383)
        be64(mantissa)
    }
}
