import Testing
@testable import BufferQueue

/// Freed buffers' storage is kept, within bounds, and handed out zeroed to the next buffer of the
/// same size.
@Suite struct BufferStorageCacheTests {
    /// Blocks of 8 to 32 KiB, 64 KiB in all: small enough to fill in a test.
    func makeCache() -> BufferStorageCache {
        BufferStorageCache(smallestBlock: 8 << 10, largestBlock: 32 << 10, mostKept: 64 << 10)
    }

    @Test func blocksThatMayBeKeptAreWholePages() {
        let cache = makeCache()
        #expect(cache.blockSize(forCapacity: 10_000) == 12_288)
        #expect(cache.blockSize(forCapacity: 12_288) == 12_288)
        #expect(cache.blockSize(forCapacity: 100) == 100)           // below the smallest: as asked
        #expect(cache.blockSize(forCapacity: 40_000) == 40_000)     // above the largest: as asked
        #expect(cache.blockSize(forCapacity: 0) == 1)
    }

    @Test func aKeptBlockComesBackZeroed() throws {
        let cache = makeCache()
        let bytes = cache.blockSize(forCapacity: 10_000)
        let first = try #require(cache.take(bytes: bytes))
        first.initializeMemory(as: UInt8.self, repeating: 0xA5, count: bytes)
        cache.give(first, bytes: bytes)
        #expect(cache.keptBytes == bytes)
        let second = try #require(cache.take(bytes: bytes))
        #expect(second == first)                                     // the same block, reused
        #expect(cache.keptBytes == 0)
        let raw = UnsafeRawBufferPointer(start: second, count: bytes)
        #expect(raw.allSatisfy { $0 == 0 })
        cache.give(second, bytes: bytes)
    }

    @Test func onlyTheSameSizeIsReused() throws {
        let cache = makeCache()
        let small = try #require(cache.take(bytes: 12_288))
        cache.give(small, bytes: 12_288)
        let other = try #require(cache.take(bytes: 16_384))
        #expect(other != small)
        #expect(cache.keptBytes == 12_288)
        cache.give(other, bytes: 16_384)
        #expect(cache.keptBytes == 12_288 + 16_384)
    }

    @Test func theBoundsAreKept() throws {
        let cache = makeCache()
        // Too small and too large: freed, not kept.
        let tiny = try #require(cache.take(bytes: 4096))
        cache.give(tiny, bytes: 4096)
        let huge = try #require(cache.take(bytes: 65_536))
        cache.give(huge, bytes: 65_536)
        #expect(cache.keptBytes == 0)
        // Three blocks of 32 KiB: two fit in 64 KiB, the third is freed.
        let blocks = try (0..<3).map { _ in try #require(cache.take(bytes: 32_768)) }
        for block in blocks { cache.give(block, bytes: 32_768) }
        #expect(cache.keptBytes == 65_536)
    }

    /// Through the queue: a buffer whose storage an earlier buffer of the same size filled starts
    /// out zeroed, as one from calloc does.
    @Test func aNewBufferStartsZeroedWhateverTheLastOneHeld() throws {
        let capacity = 100_000
        for _ in 0..<3 {
            let queue = try AudioQueue(format: .float32(sampleRate: 48000, channels: 2))
            let buffer = try queue.allocateBuffer(capacity: capacity)
            #expect(buffer.capacity == capacity)
            let zeroed = try buffer.withUnsafeMutableBytes { bytes in
                let clean = bytes.count == capacity && bytes.allSatisfy { $0 == 0 }
                bytes.initializeMemory(as: UInt8.self, repeating: 0x5A)
                return clean
            }
            #expect(zeroed)
            queue.dispose(immediately: true)
        }
    }
}
