internal import BufferQueue
import Dispatch
import Foundation

/// A pointer of the caller's, handed back unchanged.
// @unchecked: the caller's opaque pointer, only handed back to the caller, never dereferenced here.
struct UserData: @unchecked Sendable {
    let pointer: UnsafeMutableRawPointer?
}

/// Where a queue's callbacks run: the run loop given at creation, or the library's callback thread.
enum CallbackPlace: Sendable {
    case callbackThread
    case runLoop(CFRunLoop)

    /// Runs `body` here: at once on the callback thread, or on the run loop (at once when this
    /// thread is the loop's, as during an offline render that delivers its buffers before it returns).
    func run(_ body: @escaping () -> Void) {
        switch self {
        case .callbackThread: body()
        case .runLoop(let loop):
            if CFRunLoop.currentIfMade === loop { body() } else { loop.perform(body) }
        }
    }
}

/// One `AudioQueueBufferRef`: the C struct the caller sees, over a library buffer's storage.
// @unchecked: the C struct is the caller's to fill between enqueues; the queue reads it only at enqueue, on the caller's thread.
final class BufferRecord {
    let buffer: BufferQueue.AudioQueueBuffer
    let ref: AudioQueueBufferRef
    let descriptions: UnsafeMutablePointer<AudioStreamPacketDescription>?

    init(buffer: BufferQueue.AudioQueueBuffer, packetDescriptions: Int) {
        self.buffer = buffer
        descriptions = packetDescriptions > 0 ? .allocate(capacity: packetDescriptions) : nil
        descriptions?.initialize(repeating: AudioStreamPacketDescription(), count: packetDescriptions)
        ref = .allocate(capacity: 1)
        ref.initialize(to: AudioQueueBuffer(
            mAudioDataBytesCapacity: UInt32(clamping: buffer.capacity), mAudioData: buffer.storageAddress,
            mAudioDataByteSize: 0, mUserData: nil, mPacketDescriptionCapacity: UInt32(clamping: packetDescriptions),
            mPacketDescriptions: descriptions, mPacketDescriptionCount: 0))
    }

    deinit {
        ref.deinitialize(count: 1)
        ref.deallocate()
        descriptions?.deallocate()
    }

    var key: UInt { UInt(bitPattern: ref) }
}

/// What an `AudioQueueRef` points to: a library queue (output or input) and the C-side state
/// around it (buffer structs, listeners, timelines, the callback's pointer and place).
/// Sendable by construction: what it is made with never changes, and the rest is under `state`'s lock.
final class QueueObject: Sendable {
    enum Queue {
        case output(BufferQueue.AudioQueue)
        case input(AudioInputQueue)
    }

    struct Listener {
        var property: AudioQueuePropertyID
        var proc: AudioQueuePropertyListenerProc
        var userData: UserData
    }

    struct State {
        var buffers: [UInt: BufferRecord] = [:]
        var byLibraryID: [Int: BufferRecord] = [:]
        var listeners: [Listener] = []
        var timelines: [UInt: AudioQueueTimeline] = [:]
        var disposed = false
        var running = false
        var timePitchEnabled = false
        var timePitchAlgorithm: UInt32 = kAudioQueueTimePitchAlgorithm_TimeDomain
        var tap: AnyObject?
        /// The reference to release when a deferred disposal has played out.
        var releaseWhenStopped: UncheckedBox<AudioQueueRef>?
    }

    /// The library queue (made first: its callbacks find this object through a ``WeakReference``).
    let queue: Queue
    let place: CallbackPlace
    let format: AudioStreamBasicDescription
    /// The library's pthread lock (which ThreadSanitizer sees), as the library's own queues use.
    let state = Lock(State())

    init(queue: Queue, place: CallbackPlace, format: AudioStreamBasicDescription) {
        self.queue = queue
        self.place = place
        self.format = format
    }

    /// The opaque reference handed to the caller (retained until `AudioQueueDispose`).
    var ref: AudioQueueRef { OpaquePointer(Unmanaged.passUnretained(self).toOpaque()) }

    static func from(_ ref: AudioQueueRef) -> QueueObject {
        Unmanaged<QueueObject>.fromOpaque(UnsafeRawPointer(ref)).takeUnretainedValue()
    }

    var isDisposed: Bool { state.withLock { $0.disposed } }

    var output: BufferQueue.AudioQueue? {
        if case .output(let queue) = queue { return queue }
        return nil
    }

    var input: AudioInputQueue? {
        if case .input(let queue) = queue { return queue }
        return nil
    }

    func record(for ref: AudioQueueBufferRef) -> BufferRecord? {
        state.withLock { $0.buffers[UInt(bitPattern: ref)] }
    }

    func record(forLibraryBuffer buffer: BufferQueue.AudioQueueBuffer) -> BufferRecord? {
        state.withLock { $0.byLibraryID[buffer.id] }
    }

    func add(_ record: BufferRecord) {
        state.withLock {
            $0.buffers[record.key] = record
            $0.byLibraryID[record.buffer.id] = record
        }
    }

    func remove(_ record: BufferRecord) {
        state.withLock {
            $0.buffers[record.key] = nil
            $0.byLibraryID[record.buffer.id] = nil
        }
    }

    /// Tells the listeners of `property`, at the callbacks' place.
    func notifyListeners(_ property: AudioQueuePropertyID) {
        let listeners = state.withLock { state in state.disposed ? [] : state.listeners.filter { $0.property == property } }
        guard !listeners.isEmpty else { return }
        let ref = self.ref
        place.run { [self] in
            guard !isDisposed else { return }
            for listener in listeners { listener.proc(listener.userData.pointer, ref, property) }
        }
    }

    /// Follows the library's events: running changes reach `kAudioQueueProperty_IsRunning`'s
    /// listeners; a move to another output device reaches ``OutputRoute``'s observers.
    func handle(_ event: AudioQueueEvent) {
        if case .outputDeviceChanged(let name) = event { OutputRoute.changed(to: name) }
        if case .runningChanged(let running) = event {
            let changed = state.withLock { state -> Bool in
                defer { state.running = running }
                return state.running != running
            }
            if changed { notifyListeners(kAudioQueueProperty_IsRunning) }
            if !running { releaseDeferred() }
        }
    }
}

/// Holds the objects whose references were handed out (an `Unmanaged` retain each), so that an
/// object lives until its `…Dispose`.
enum Retained {
    static func hand<T: AnyObject>(_ object: T) -> OpaquePointer {
        OpaquePointer(Unmanaged.passRetained(object).toOpaque())
    }

    static func release<T: AnyObject>(_ type: T.Type, _ ref: OpaquePointer) {
        Unmanaged<T>.fromOpaque(UnsafeRawPointer(ref)).release()
    }

    static func object<T: AnyObject>(_ type: T.Type, _ ref: OpaquePointer) -> T {
        Unmanaged<T>.fromOpaque(UnsafeRawPointer(ref)).takeUnretainedValue()
    }
}
