#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The storage of freed buffers, kept for the next buffers of the same size.
///
/// Without it, a program that makes queue after queue (a render per file, a queue per track)
/// pays for new pages at every one: glibc gives blocks of 128 KiB and more a mapping of their own,
/// or trims them off the top of the heap when they are freed, so each new buffer's first writes
/// fault its pages in one at a time. A kept block is zeroed again when it is handed out, as
/// `calloc`'s are.
///
/// Bounded: only blocks from ``smallestBlock`` to ``largestBlock`` bytes are kept, at most
/// ``mostKept`` bytes in all; other blocks are freed at once, as before.
final class BufferStorageCache: Sendable {
    /// The cache every ``AudioQueueBuffer`` uses: blocks of 64 KiB to 1 MiB, 2 MiB in all. Smaller
    /// blocks come back from the heap's free lists without new pages anyway.
    static let shared = BufferStorageCache(smallestBlock: 64 << 10, largestBlock: 1 << 20, mostKept: 2 << 20)

    let smallestBlock: Int, largestBlock: Int, mostKept: Int
    private static let pageSize = 4096

    private struct Kept {
        var blocks: [(address: UnsafeMutableRawPointer, bytes: Int)] = []
        var total = 0
    }
    // While a block is kept, only the cache holds its address.
    private let kept = Lock(Kept())

    init(smallestBlock: Int, largestBlock: Int, mostKept: Int) {
        self.smallestBlock = smallestBlock
        self.largestBlock = largestBlock
        self.mostKept = mostKept
    }

    deinit {
        kept.withLock { kept in for block in kept.blocks { free(block.address) } }
    }

    /// Bytes kept now (for tests).
    var keptBytes: Int { kept.withLock { $0.total } }

    private func keeps(_ bytes: Int) -> Bool { bytes >= smallestBlock && bytes <= largestBlock }

    /// The size of block to allocate for `capacity` bytes: whole pages when the block may be kept,
    /// so that buffers of nearly the same capacity share blocks.
    func blockSize(forCapacity capacity: Int) -> Int {
        let bytes = max(capacity, 1)
        guard keeps(bytes) else { return bytes }
        return (bytes + Self.pageSize - 1) / Self.pageSize * Self.pageSize
    }

    /// Zeroed storage of `bytes` (a value from ``blockSize(forCapacity:)``), aligned as `malloc`'s;
    /// nil when there is no memory.
    func take(bytes: Int) -> UnsafeMutableRawPointer? {
        if keeps(bytes) {
            let reused: UnsafeMutableRawPointer? = kept.withLock { kept in
                guard let index = kept.blocks.lastIndex(where: { $0.bytes == bytes }) else { return nil }
                kept.total -= bytes
                return kept.blocks.remove(at: index).address
            }
            if let reused {
                memset(reused, 0, bytes)
                return reused
            }
        }
        return calloc(bytes, 1)
    }

    /// Takes back storage from ``take(bytes:)``: keeps it when the bounds allow, frees it otherwise.
    func give(_ address: UnsafeMutableRawPointer, bytes: Int) {
        if keeps(bytes) {
            let keptIt = kept.withLock { kept in
                guard kept.total + bytes <= mostKept else { return false }
                kept.blocks.append((address, bytes))
                kept.total += bytes
                return true
            }
            if keptIt { return }
        }
        free(address)
    }
}
