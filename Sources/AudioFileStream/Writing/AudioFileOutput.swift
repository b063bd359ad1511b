#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import BufferQueue

/// The bytes of a file being written: appended through a 64 KiB block, with earlier bytes
/// (a header's sizes) overwritten in place. A failed write is kept and thrown again by every later
/// call. Used by the container writers from one thread at a time.
package final class AudioFileOutput {
    let path: String
    private let descriptor: FileDescriptor
    /// Whether earlier bytes can be overwritten (not a pipe).
    let canSeek: Bool
    /// Bytes appended so far, the block included: where the next byte goes.
    private(set) var length: Int64 = 0
    private var block: [UInt8] = []
    private static let blockSize = 65536
    private var failure: AudioFileWriterError?
    private var closed = false

    /// Creates (or empties) the file.
    package init(path: String) throws {
        let descriptor: FileDescriptor
        do throws(SystemError) { descriptor = try FileDescriptor.open(path, O_WRONLY | O_CREAT, permissions: 0o666) } catch {
            throw AudioFileWriterError(.cannotCreate, path: path, underlying: error, "cannot create the file")
        }
        canSeek = lseek(descriptor.rawValue, 0, SEEK_CUR) >= 0
        do throws(SystemError) {
            let info = try descriptor.status()
            if info.st_mode & S_IFMT == S_IFREG && info.st_size > 0 { try descriptor.truncate(to: 0) }
        } catch {
            try? descriptor.close()
            throw AudioFileWriterError(.cannotCreate, path: path, underlying: error, "cannot empty the existing file")
        }
        self.path = path
        self.descriptor = descriptor
        block.reserveCapacity(Self.blockSize)
    }

    deinit { if !closed { try? descriptor.close() } }

    /// Appends bytes.
    func append(_ bytes: UnsafeRawBufferPointer) throws {
        if let failure { throw failure }
        block.append(contentsOf: bytes)
        length += Int64(bytes.count)
        if block.count >= Self.blockSize { try flush() }
    }

    func append(_ bytes: [UInt8]) throws { try bytes.withUnsafeBytes { try append($0) } }

    /// Writes `bytes` over earlier bytes at `offset` (which must lie before ``length``).
    func overwrite(_ bytes: [UInt8], at offset: Int64) throws {
        if let failure { throw failure }
        let flushedEnd = length - Int64(block.count)
        var head = bytes[...]
        // The part still in the block is patched there.
        if offset + Int64(bytes.count) > flushedEnd {
            let inBlock = max(offset, flushedEnd)
            let skip = Int(inBlock - offset)
            for (index, byte) in bytes[skip...].enumerated() { block[Int(inBlock - flushedEnd) + index] = byte }
            head = bytes[..<skip]
        }
        guard !head.isEmpty else { return }
        guard canSeek else {
            throw AudioFileWriterError(.writeFailed, path: path, byteOffset: offset, "cannot go back to byte \(offset): the output cannot seek")
        }
        try head.withUnsafeBytes { try writeAll($0, at: offset) }
    }

    /// Hands the block to the kernel: after this a killed process leaves these bytes in the file.
    func flush() throws {
        if let failure { throw failure }
        guard !block.isEmpty else { return }
        let at = length - Int64(block.count)
        try block.withUnsafeBytes { try writeAll($0, at: canSeek ? at : nil) }
        block.removeAll(keepingCapacity: true)
    }

    private func writeAll(_ bytes: UnsafeRawBufferPointer, at offset: Int64?) throws {
        var written = 0
        do throws(SystemError) { try descriptor.writeAll(bytes, at: offset, written: &written) } catch {
            let failed = AudioFileWriterError(.writeFailed, path: path, byteOffset: (offset ?? length) + Int64(written), underlying: error,
                                              "cannot write \(bytes.count - written) bytes")
            failure = failed
            throw failed
        }
    }

    /// Flushes and closes; closing again does nothing.
    package func close() throws {
        guard !closed else { return }
        defer { closed = true }
        do { try flush() } catch {
            try? descriptor.close()
            throw error
        }
        do throws(SystemError) { try descriptor.close() } catch {
            throw AudioFileWriterError(.closeFailed, path: path, byteOffset: length, underlying: error, "cannot close the file")
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
