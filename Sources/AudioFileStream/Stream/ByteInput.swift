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
