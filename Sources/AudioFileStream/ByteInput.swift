import BufferQueue
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The bytes pushed into a stream and not yet consumed, with their absolute offset.
///
/// Skipping past what has arrived is remembered (`skipPending`) and applied to later pushes without
/// storing them, so skipping a huge box or tag costs no memory.
final class ByteInput {
    private var storage: [UInt8] = []
    private var start = 0
    /// Absolute offset of the first unread byte.
    private(set) var position: Int64 = 0
    /// Bytes still to drop from future pushes.
    private(set) var skipPending: Int64 = 0
    /// Set by `finish`: no more bytes will come.
    var atEnd = false
    /// The MPEG audio free-format frame-size search's state, kept with the bytes it searches.
    var freeFormatSearch = FreeFormatSearch()
    /// Set by a parser that can decide nothing more until `count` bytes are available at `position`.
    private var wait: (position: Int64, count: Int) = (-1, 0)

    /// Records that nothing can be decided before `count` bytes are available at the read position,
    /// so pushes of fewer bytes return at once (fed a byte at a time, a parser would otherwise
    /// re-decide the same undecided frame for every byte).
    func waitFor(_ count: Int) { wait = (position, count) }

    /// Whether the last ``waitFor(_:)`` still holds: same position, too few bytes, more to come.
    var mustWait: Bool { !atEnd && position == wait.position && available < wait.count }

    var available: Int { storage.count - start }

    func append(_ bytes: UnsafeRawBufferPointer) {
        var slice = bytes[...]
        if skipPending > 0 {
            let dropped = Int(min(skipPending, Int64(slice.count)))
            skipPending -= Int64(dropped)
            position += Int64(dropped)
            slice = slice.dropFirst(dropped)
        }
        guard !slice.isEmpty else { return }
        if start > 0 && start >= storage.count / 2 {
            storage.removeFirst(start)
            start = 0
        }
        UnsafeRawBufferPointer(rebasing: slice).withMemoryRebound(to: UInt8.self) { storage.append(contentsOf: $0) }   // a memcpy
    }

    /// The byte `index` bytes ahead of the read position (the caller checked `available`).
    @inline(__always) func u8(_ index: Int) -> UInt8 { storage[start + index] }
    func u16be(_ i: Int) -> UInt16 { UInt16(u8(i)) << 8 | UInt16(u8(i + 1)) }
    func u32be(_ i: Int) -> UInt32 { UInt32(u16be(i)) << 16 | UInt32(u16be(i + 2)) }
    func u64be(_ i: Int) -> UInt64 { UInt64(u32be(i)) << 32 | UInt64(u32be(i + 4)) }
    func u16le(_ i: Int) -> UInt16 { UInt16(u8(i)) | UInt16(u8(i + 1)) << 8 }
    func u32le(_ i: Int) -> UInt32 { UInt32(u16le(i)) | UInt32(u16le(i + 2)) << 16 }
    func tag(_ i: Int) -> String { fourCC(u32be(i)) }

    /// Whether the bytes `index` ahead spell `text` (false when they have not all arrived). Compares
    /// bytes, without making a string: parsers ask this of every byte they search.
    @inline(__always) func matches(_ text: StaticString, at index: Int) -> Bool {
        let count = text.utf8CodeUnitCount
        guard index >= 0, index + count <= available else { return false }
        let expected = text.utf8Start
        for k in 0..<count where storage[start + index + k] != expected[k] { return false }
        return true
    }

    /// The offset, at least `from` bytes ahead and below `to` (clamped to what is available), of the
    /// first byte equal to `byte`; nil when there is none. Uses `memchr`, so searching long junk for a
    /// sync byte costs little.
    func firstIndex(of byte: UInt8, from: Int, to: Int? = nil) -> Int? {
        let end = min(to ?? available, available)
        guard from >= 0, from < end else { return nil }
        return storage.withUnsafeBufferPointer { buffer -> Int? in
            guard let base = buffer.baseAddress,
                  let found = memchr(base + start + from, Int32(byte), end - from) else { return nil }
            return UnsafeRawPointer(found) - UnsafeRawPointer(base + start)
        }
    }

    /// Calls `body` with the `count` bytes at the read position, without copying them (the
    /// caller checked `available`).
    func withBytes<R>(_ count: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try storage.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[start..<(start + count)])) }
    }

    /// Whether an ID3v1 ("TAG"), ID3v2 ("ID3") or APE ("APETAGEX") tag starts `index` bytes ahead.
    func isTag(at index: Int) -> Bool {
        matches("TAG", at: index) || matches("ID3", at: index) || matches("APETAGEX", at: index)
    }

    /// Copies `count` bytes starting `offset` ahead (the caller checked `available`).
    func bytes(_ offset: Int, _ count: Int) -> [UInt8] { Array(storage[(start + offset)..<(start + offset + count)]) }

    /// Appends `count` bytes at the read position to `array` (the caller checked `available`).
    func copy(_ count: Int, into array: inout [UInt8]) {
        array.append(contentsOf: storage[start..<(start + count)])
    }

    /// Consumes `count` available bytes.
    func consume(_ count: Int) {
        precondition(count >= 0 && count <= available, "consume(\(count)) with \(available) available")
        start += count
        position += Int64(count)
        if start == storage.count { storage.removeAll(keepingCapacity: true); start = 0 }
    }

    /// Skips `count` bytes, whether they have arrived or not.
    func skip(_ count: Int64) {
        guard count > 0 else { return }
        let now = Int(min(count, Int64(available)))
        consume(now)
        skipPending += count - Int64(now)
    }

    /// Forgets everything and expects the next pushed byte to be at `offset`.
    func reset(to offset: Int64) {
        storage.removeAll(keepingCapacity: true)
        start = 0
        skipPending = 0
        position = offset
        atEnd = false
        forgetSearches()
    }

    /// Forgets the buffered bytes but keeps counting positions (a discontinuity without a seek).
    func dropBuffered() {
        position += Int64(available)
        storage.removeAll(keepingCapacity: true)
        start = 0
        skipPending = 0
        forgetSearches()
    }

    /// Decisions about the bytes that were buffered no longer hold.
    private func forgetSearches() {
        freeFormatSearch = FreeFormatSearch()
        wait = (-1, 0)
    }
}

/// What ``MPEGHeader/measureFreeFormat(_:at:_:)`` keeps between calls.
struct FreeFormatSearch {
    /// Where a search that needed more bytes stopped, so the next call resumes there instead of
    /// starting again (fed a byte at a time, restarting would make it quadratic). `origin` is the
    /// absolute offset of the header searched for, `key` its four bytes, `resume` the absolute offset
    /// of the first candidate not yet decided.
    var pending: (origin: Int64, key: UInt32, resume: Int64)?
    /// New searches still allowed. Each looks up to 8 KiB ahead, so junk full of sync bytes that
    /// look like free-format headers would cost that much per byte; real free-format streams are
    /// found by their first few candidates.
    var triesLeft = 64
}

/// Reads big- or little-endian fields from a byte array, throwing instead of reading out of bounds.
struct FieldReader {
    let bytes: [UInt8]
    var offset: Int
    let end: Int
    /// Absolute file offset of `bytes[0]`, for messages.
    let base: Int64
    let container: AudioFileType

    init(_ bytes: [UInt8], from: Int = 0, to: Int? = nil, base: Int64, container: AudioFileType) {
        self.bytes = bytes
        offset = from
        end = min(to ?? bytes.count, bytes.count)
        self.base = base
        self.container = container
    }

    var remaining: Int { end - offset }
    var absoluteOffset: Int64 { base + Int64(offset) }

    func need(_ count: Int, _ what: @autoclosure () -> String) throws {
        guard count >= 0, count <= remaining else {
            throw AudioFileStreamError(.invalidData, container, absoluteOffset,
                "\(what()) needs \(count) bytes but only \(max(remaining, 0)) remain")
        }
    }

    mutating func u8(_ what: @autoclosure () -> String = "a field") throws -> UInt8 {
        try need(1, what())
        defer { offset += 1 }
        return bytes[offset]
    }
    mutating func u16be(_ what: @autoclosure () -> String = "a field") throws -> UInt16 {
        try need(2, what()); defer { offset += 2 }
        return UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
    }
    mutating func u24be(_ what: @autoclosure () -> String = "a field") throws -> UInt32 {
        try need(3, what()); defer { offset += 3 }
        return UInt32(bytes[offset]) << 16 | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2])
    }
    mutating func u32be(_ what: @autoclosure () -> String = "a field") throws -> UInt32 {
        try need(4, what()); defer { offset += 4 }
        return UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
    }
    mutating func u64be(_ what: @autoclosure () -> String = "a field") throws -> UInt64 {
        let high = try u32be(what()), low = try u32be(what())
        return UInt64(high) << 32 | UInt64(low)
    }
    mutating func u16le(_ what: @autoclosure () -> String = "a field") throws -> UInt16 {
        try need(2, what()); defer { offset += 2 }
        return UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8
    }
    mutating func u32le(_ what: @autoclosure () -> String = "a field") throws -> UInt32 {
        try need(4, what()); defer { offset += 4 }
        return UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16 | UInt32(bytes[offset + 3]) << 24
    }
    mutating func tag(_ what: @autoclosure () -> String = "a four-character code") throws -> String { fourCC(try u32be(what())) }
    mutating func take(_ count: Int, _ what: @autoclosure () -> String = "a field") throws -> [UInt8] {
        try need(count, what()); defer { offset += count }
        return Array(bytes[offset..<(offset + count)])
    }
    mutating func skip(_ count: Int, _ what: @autoclosure () -> String = "a field") throws {
        try need(count, what()); offset += count
    }
    /// A variable-length integer as CAF writes them: 7 bits a byte, high bit = more follow.
    mutating func varint(_ what: @autoclosure () -> String = "a variable-length integer") throws -> Int64 {
        var value: Int64 = 0
        for _ in 0..<9 {
            let byte = try u8(what())
            value = value << 7 | Int64(byte & 0x7F)
            if byte & 0x80 == 0 { return value }
        }
        throw AudioFileStreamError(.invalidData, container, absoluteOffset, "\(what()) runs longer than 9 bytes")
    }
}

/// Four bytes as text, `????` for unprintable ones.
func fourCC(_ value: UInt32) -> String {
    var text = ""
    for shift in stride(from: 24, through: 0, by: -8) {
        let byte = UInt8(truncatingIfNeeded: value >> UInt32(shift))
        text.append((32...126).contains(byte) ? Character(Unicode.Scalar(byte)) : "?")
    }
    return text
}

/// Reads bits most-significant first (MPEG headers, AudioSpecificConfig).
struct BitReader {
    let bytes: [UInt8]
    private(set) var bitOffset = 0
    init(_ bytes: [UInt8]) { self.bytes = bytes }
    var bitsLeft: Int { bytes.count * 8 - bitOffset }

    mutating func read(_ count: Int) -> UInt32? {
        guard count <= 32, count <= bitsLeft else { return nil }
        var value: UInt32 = 0
        for _ in 0..<count {
            let byte = bytes[bitOffset >> 3]
            let bit = (byte >> (7 - UInt8(bitOffset & 7))) & 1
            value = value << 1 | UInt32(bit)
            bitOffset += 1
        }
        return value
    }
}

extension ByteInput {
    /// The frames an Apple Lossless packet starting here holds: its first element's sample count
    /// when the "partial frame" flag is set (the last packet of a stream), otherwise `full`.
    ///
    /// The element header is 3 bits of type, 4 of instance tag, 12 reserved, then the partial,
    /// shift and escape flags (1 + 2 + 1 bits) and, when partial, a 32-bit frame count.
    func alacPacketFrames(size: Int, full: Int) -> Int {
        guard size >= 7, available >= 7 else { return full }
        var header: UInt64 = 0
        for index in 0..<7 { header = header << 8 | UInt64(u8(index)) }
        header <<= 8
        let element = header >> 61
        guard element == 0 || element == 1 || element == 3, (header >> 44) & 1 == 1 else { return full }
        let frames = Int((header >> 9) & 0xFFFF_FFFF)
        return frames > 0 && frames <= full ? frames : full
    }
}

extension ByteInput {
    /// The frames of an AMR packet starting here (one or more storage-format frames, each a ToC
    /// byte and its payload): 160 (NB) or 320 (WB) per frame, counted by walking the ToC bytes;
    /// `fallback` when the packet is not a clean run of frames.
    func amrPacketFrames(size: Int, wideband: Bool, fallback: Int) -> Int {
        guard available >= size else { return fallback }
        var offset = 0, frames = 0
        while offset < size {
            guard let bytes = AMRFrame.storageBytes(type: AMRFrame.type(ofTableOfContents: u8(offset)), wideband: wideband) else { return fallback }
            offset += bytes
            frames += AMRFrame.frames(wideband: wideband)
        }
        return offset == size ? frames : fallback
    }
}

/// What ``ByteInput/dropCutFrame(_:headerBytes:_:_:isHeader:confirms:)`` did.
enum CutFrameCheck { case needMore, dropped, whole }

extension ByteInput {
    /// Drops the frame at the read position when it was cut short by another frame starting
    /// inside it (a spliced or damaged MPEG audio or ADTS stream), with a warning. Checked only
    /// when no frame, tag or end of data follows where the frame's header says it ends: emitting
    /// it whole would swallow the start of the good frame after it.
    func dropCutFrame(_ length: Int, headerBytes: Int, _ out: StreamOutput, _ container: AudioFileType,
                      isHeader: (Int) -> Bool, confirms: (Int) -> Confirmation<some Any>) -> CutFrameCheck {
        if available < length + headerBytes {
            guard atEnd else {
                waitFor(length + headerBytes)
                return .needMore
            }
            if available == length { return .whole }
        } else if isHeader(length) || isTag(at: length) {
            return .whole
        }
        for start in 1..<length where u8(start) == 0xFF {
            switch confirms(start) {
            case .yes:
                out.warn(AudioFileStreamError(.invalidData, container, position,
                    "a frame cut short after \(start) of its \(length) bytes is dropped; the next frame starts there"))
                consume(start)
                return .dropped
            case .needMore(let count):
                if !atEnd {
                    waitFor(count)
                    return .needMore
                }
            case .no: break
            }
        }
        return .whole
    }
}
