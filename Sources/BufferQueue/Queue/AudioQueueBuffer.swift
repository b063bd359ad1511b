#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

/// A buffer of audio data, allocated by an ``AudioQueue``: Core Audio's `AudioQueueBuffer`.
///
/// The caller fills ``withUnsafeMutableBytes(_:)`` (or ``setData(_:)-(UnsafeRawBufferPointer)``), sets the size with
/// ``setByteSize(_:)`` and hands the buffer to
/// ``AudioQueue/enqueue(_:packetDescriptions:trimFramesAtStart:trimFramesAtEnd:parameters:startTime:)``.
/// From then until the queue hands it back through the output callback the buffer belongs to the
/// queue: writing to it (``setData(_:)-(UnsafeRawBufferPointer)``, ``setByteSize(_:)``, ``withUnsafeMutableBytes(_:)``) or
/// enqueuing it again throws ``AudioQueueError/Code/bufferInQueue``. The queue decodes the size it
/// validated at enqueue time.
///
/// The type is a reference so that the same storage is reused for the life of the queue; the queue
/// checks ownership at every enqueue, which is what makes the `@unchecked Sendable` sound.
// @unchecked: ownership moves with the buffer: the queue checks at every enqueue that the caller holds it.
public final class AudioQueueBuffer: @unchecked Sendable, Identifiable, CustomStringConvertible {
    /// Bytes of storage.
    public let capacity: Int
    /// How many packet descriptions the buffer can carry.
    public let packetDescriptionCapacity: Int
    /// A number unique within the queue that allocated the buffer.
    public let id: Int
    /// Free for the caller's own use (Core Audio's `mUserData`).
    public var userData: Int = 0

    let storage: UnsafeMutableRawBufferPointer
    let queueID: ObjectIdentifier
    private let inQueue = Atomic<Bool>(false)
    private let size = Atomic<Int>(0)

    /// - Throws: ``AudioQueueError/Code/invalidParameter`` when the memory cannot be had.
    init(capacity: Int, packetDescriptionCapacity: Int, id: Int, queueID: ObjectIdentifier) throws {
        self.capacity = capacity
        self.packetDescriptionCapacity = packetDescriptionCapacity
        self.id = id
        self.queueID = queueID
        // Zeroed storage: a block a freed buffer left (see BufferStorageCache), or one from
        // calloc. malloc's alignment (16 bytes on the 64-bit targets) suits every sample type.
        let blockBytes = BufferStorageCache.shared.blockSize(forCapacity: capacity)
        guard let bytes = BufferStorageCache.shared.take(bytes: blockBytes) else {
            throw AudioQueueError(.invalidParameter, "cannot allocate a buffer of \(capacity) bytes: out of memory")
        }
        assert(Int(bitPattern: bytes) % 16 == 0, "calloc returned storage aligned to less than 16 bytes")
        storage = UnsafeMutableRawBufferPointer(start: bytes, count: blockBytes)
        storageAddress = bytes
    }

    deinit {
        if let base = storage.baseAddress { BufferStorageCache.shared.give(base, bytes: storage.count) }
    }

    /// Where the storage starts: it stays there for the buffer's life (for the C API's `mAudioData`).
    package let storageAddress: UnsafeMutableRawPointer

    /// Whether the queue currently owns the buffer.
    public var isInQueue: Bool { inQueue.load(ordering: .acquiring) }

    /// Bytes of valid audio data in the buffer (Core Audio's `mAudioDataByteSize`). Set it with
    /// ``setByteSize(_:)`` or ``setData(_:)-(UnsafeRawBufferPointer)``.
    public var byteSize: Int { self.size.load(ordering: .acquiring) }

    /// Sets how many bytes of the storage hold audio.
    /// - Throws: ``AudioQueueError/Code/invalidBuffer`` for a size outside `0...capacity`,
    ///   ``AudioQueueError/Code/bufferInQueue`` while the queue owns the buffer.
    public func setByteSize(_ size: Int) throws {
        guard !isInQueue else {
            throw AudioQueueError(.bufferInQueue, "buffer \(id) is still in the queue; wait for it to come back through the output callback")
        }
        guard (0...capacity).contains(size) else {
            throw AudioQueueError(.invalidBuffer, "byte size \(size) is outside buffer \(id)'s 0...\(capacity) bytes")
        }
        self.size.store(size, ordering: .releasing)
    }

    /// Sets the size from the queue's side (offline render writes into a free buffer).
    func setByteSizeInternal(_ size: Int) { self.size.store(min(max(size, 0), capacity), ordering: .releasing) }

    /// Gives access to the whole storage (``capacity`` bytes) for filling.
    /// - Throws: ``AudioQueueError/Code/bufferInQueue`` while the queue owns the buffer; whatever
    ///   `body` throws.
    public func withUnsafeMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) throws -> R {
        guard !isInQueue else {
            throw AudioQueueError(.bufferInQueue, "buffer \(id) is still in the queue; wait for it to come back through the output callback")
        }
        return try body(UnsafeMutableRawBufferPointer(start: storage.baseAddress, count: capacity))
    }

    /// Storage access for the queue itself (offline render into a free buffer).
    func withStorage<R>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeMutableRawBufferPointer(start: storage.baseAddress, count: capacity))
    }

    /// Gives read access to the ``byteSize`` valid bytes.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: storage.baseAddress, count: byteSize))
    }

    /// Copies `bytes` into the buffer and sets ``byteSize``.
    /// - Throws: ``AudioQueueError/Code/invalidBuffer`` when `bytes` does not fit, and
    ///   ``AudioQueueError/Code/bufferInQueue`` while the queue owns the buffer.
    public func setData<C: Collection>(_ bytes: C) throws where C.Element == UInt8 {
        // Contiguous bytes (an array, a slice of one, `Data`) go in with one memcpy.
        if try bytes.withContiguousStorageIfAvailable({ try setData(UnsafeRawBufferPointer($0)) }) != nil { return }
        try checkFits(bytes.count)
        UnsafeMutableRawBufferPointer(start: storage.baseAddress, count: capacity).copyBytes(from: bytes)
        size.store(bytes.count, ordering: .releasing)
    }

    /// Copies `bytes` into the buffer and sets ``byteSize``, in one memcpy.
    /// - Throws: ``AudioQueueError/Code/invalidBuffer`` when `bytes` does not fit, and
    ///   ``AudioQueueError/Code/bufferInQueue`` while the queue owns the buffer.
    public func setData(_ bytes: UnsafeRawBufferPointer) throws {
        try checkFits(bytes.count)
        if let source = bytes.baseAddress, let base = storage.baseAddress, !bytes.isEmpty {
            base.copyMemory(from: source, byteCount: bytes.count)
        }
        size.store(bytes.count, ordering: .releasing)
    }

    private func checkFits(_ count: Int) throws {
        guard !isInQueue else {
            throw AudioQueueError(.bufferInQueue, "buffer \(id) is still in the queue; wait for it to come back through the output callback")
        }
        guard count <= capacity else {
            throw AudioQueueError(.invalidBuffer, "\(count) bytes do not fit in buffer \(id) of \(capacity) bytes")
        }
    }

    /// Claims the buffer for the queue; false when it was already claimed.
    func claim() -> Bool {
        inQueue.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
    }

    /// Hands the buffer back to its caller.
    func release() { inQueue.store(false, ordering: .releasing) }

    public var description: String { "AudioQueueBuffer(id: \(id), \(byteSize)/\(capacity) bytes)" }
}
