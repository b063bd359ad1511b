internal import BufferQueue
import Dispatch
import Foundation

// Audio Queue Services (AudioQueue.h) over the library's `AudioQueue` and `AudioInputQueue`.

/// A block called with each buffer an output queue is done with (`AudioQueueNewOutputWithDispatchQueue`).
public typealias AudioQueueOutputCallbackBlock = (AudioQueueRef, AudioQueueBufferRef) -> Void
/// A block called with each buffer an input queue filled (`AudioQueueNewInputWithDispatchQueue`).
public typealias AudioQueueInputCallbackBlock = (AudioQueueRef, AudioQueueBufferRef, UnsafePointer<AudioTimeStamp>, UInt32,
                                                 UnsafePointer<AudioStreamPacketDescription>?) -> Void

/// Creates a playback queue. Callbacks run on `inCallbackRunLoop` while its thread runs it
/// (`CFRunLoopRunInMode`, `CFRunLoopRun`), or on an internal thread when it is nil. The queue
/// plays through `AQ_OUTPUT` (PulseAudio when a server answers, else the null device).
@discardableResult
public func AudioQueueNewOutput(_ inFormat: UnsafePointer<AudioStreamBasicDescription>, _ inCallbackProc: AudioQueueOutputCallback,
                                _ inUserData: UnsafeMutableRawPointer?, _ inCallbackRunLoop: CFRunLoop?,
                                _ inCallbackRunLoopMode: CFString?, _ inFlags: UInt32,
                                _ outAQ: UnsafeMutablePointer<AudioQueueRef?>) -> OSStatus {
    let userData = UserData(pointer: inUserData)
    let place: CallbackPlace = inCallbackRunLoop.map { .runLoop($0) } ?? .callbackThread
    return makeOutputQueue(inFormat.pointee, place: place, callbackQueue: nil, outAQ: outAQ) { object, record in
        inCallbackProc(userData.pointer, object.ref, record.ref)
    }
}

/// Creates a playback queue whose callbacks run as `inCallbackBlock` on `inCallbackDispatchQueue`.
@discardableResult
public func AudioQueueNewOutputWithDispatchQueue(_ outAQ: UnsafeMutablePointer<AudioQueueRef?>,
                                                 _ inFormat: UnsafePointer<AudioStreamBasicDescription>, _ inFlags: UInt32,
                                                 _ inCallbackDispatchQueue: DispatchQueue,
                                                 _ inCallbackBlock: @escaping AudioQueueOutputCallbackBlock) -> OSStatus {
    let block = UncheckedBox(inCallbackBlock)
    return makeOutputQueue(inFormat.pointee, place: .callbackThread, callbackQueue: inCallbackDispatchQueue, outAQ: outAQ) { object, record in
        block.value(object.ref, record.ref)
    }
}

/// A value the compiler cannot see is used safely across threads (a caller's block).
// @unchecked: holds a caller's C block or pointer, which C code passes between threads as Apple's API allows.
struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

private func makeOutputQueue(_ format: AudioStreamBasicDescription, place: CallbackPlace, callbackQueue: DispatchQueue?,
                             outAQ: UnsafeMutablePointer<AudioQueueRef?>,
                             callback: @escaping @Sendable (QueueObject, BufferRecord) -> Void) -> OSStatus {
    Setup.once()
    // The library queue's closures are made before the object that holds the queue: they find it
    // through a reference set once it exists (no callback comes before: the queue is not started).
    let weak = WeakReference<QueueObject>()
    var made: QueueObject?
    let status = queueStatus("AudioQueueNewOutput") {
        // An offline render hands back the buffers it used up before it returns, as Apple's
        // calls the output callback from inside AudioQueueOfflineRender.
        let configuration = BufferQueue.AudioQueue.Configuration(
            sink: Device.output.makeSink(), callbackQueue: callbackQueue, offlineCallbacks: .beforeReturning,
            eventHandler: { event in weak.object?.handle(event) })
        let queue = try BufferQueue.AudioQueue(format: format.library, configuration: configuration) { _, buffer in
            guard let object = weak.object, let record = object.record(forLibraryBuffer: buffer) else { return }
            object.place.run {
                guard !object.isDisposed else { return }
                callback(object, record)
            }
        }
        let object = QueueObject(queue: .output(queue), place: place, format: format)
        weak.object = object
        made = object
    }
    guard status == noErr, let object = made else { return status }
    outAQ.pointee = Retained.hand(object)
    return noErr
}

/// Creates a recording queue. Callbacks run on `inCallbackRunLoop` while its thread runs it, or on
/// an internal thread when it is nil. It records from `AQ_INPUT` (PulseAudio's default source when
/// a server answers, else the null device's silence), in any format this library encodes.
@discardableResult
public func AudioQueueNewInput(_ inFormat: UnsafePointer<AudioStreamBasicDescription>, _ inCallbackProc: AudioQueueInputCallback,
                               _ inUserData: UnsafeMutableRawPointer?, _ inCallbackRunLoop: CFRunLoop?,
                               _ inCallbackRunLoopMode: CFString?, _ inFlags: UInt32,
                               _ outAQ: UnsafeMutablePointer<AudioQueueRef?>) -> OSStatus {
    let userData = UserData(pointer: inUserData)
    let place: CallbackPlace = inCallbackRunLoop.map { .runLoop($0) } ?? .callbackThread
    return makeInputQueue(inFormat.pointee, place: place, callbackQueue: nil, outAQ: outAQ) { object, record, time, count, descriptions in
        inCallbackProc(userData.pointer, object.ref, record.ref, time, count, descriptions)
    }
}

/// Creates a recording queue whose callbacks run as `inCallbackBlock` on `inCallbackDispatchQueue`.
@discardableResult
public func AudioQueueNewInputWithDispatchQueue(_ outAQ: UnsafeMutablePointer<AudioQueueRef?>,
                                                _ inFormat: UnsafePointer<AudioStreamBasicDescription>, _ inFlags: UInt32,
                                                _ inCallbackDispatchQueue: DispatchQueue,
                                                _ inCallbackBlock: @escaping AudioQueueInputCallbackBlock) -> OSStatus {
    let block = UncheckedBox(inCallbackBlock)
    return makeInputQueue(inFormat.pointee, place: .callbackThread, callbackQueue: inCallbackDispatchQueue, outAQ: outAQ) {
        object, record, time, count, descriptions in
        block.value(object.ref, record.ref, time, count, descriptions)
    }
}

private func makeInputQueue(_ format: AudioStreamBasicDescription, place: CallbackPlace, callbackQueue: DispatchQueue?,
                            outAQ: UnsafeMutablePointer<AudioQueueRef?>,
                            callback: @escaping @Sendable (QueueObject, BufferRecord, UnsafePointer<AudioTimeStamp>, UInt32,
                                                           UnsafePointer<AudioStreamPacketDescription>?) -> Void) -> OSStatus {
    Setup.once()
    let weak = WeakReference<QueueObject>()   // as for an output queue
    var made: QueueObject?
    let status = queueStatus("AudioQueueNewInput") {
        // The library's callbacks run on a queue marked as this layer's, so that a synchronous stop
        // knows whether it is called from inside one (where it must not wait for them).
        let callbacks = DispatchQueue(label: "AudioToolbox.input.callbacks", target: callbackQueue)
        callbacks.setSpecific(key: insideInputCallback, value: true)
        // The running state's listeners follow the queue's own reports, in order with its callbacks.
        let configuration = AudioInputQueue.Configuration(source: Device.input.makeSource(), callbackQueue: callbacks, eventHandler: { event in
            guard case .runningChanged(let running) = event, let object = weak.object else { return }
            object.place.run {
                guard !object.isDisposed else { return }
                object.handle(.runningChanged(running))
            }
        })
        let queue = try AudioInputQueue(format: format.library, configuration: configuration) { _, buffer, frames in
            guard let object = weak.object, let record = object.record(forLibraryBuffer: buffer) else { return }
            object.place.run {
                guard !object.isDisposed else { return }
                deliverCapture(object, record, frames, callback)
            }
        }
        let object = QueueObject(queue: .input(queue), place: place, format: format)
        weak.object = object
        made = object
    }
    guard status == noErr, let object = made else { return status }
    outAQ.pointee = Retained.hand(object)
    return noErr
}

/// Marks the queues input callbacks run on.
private let insideInputCallback = DispatchSpecificKey<Bool>()

/// Fills the buffer's C fields from a capture and calls the input callback.
private func deliverCapture(_ object: QueueObject, _ record: BufferRecord, _ frames: AudioCapturedFrames,
                            _ callback: (QueueObject, BufferRecord, UnsafePointer<AudioTimeStamp>, UInt32,
                                         UnsafePointer<AudioStreamPacketDescription>?) -> Void) {
    record.ref.pointee.mAudioDataByteSize = UInt32(clamping: record.buffer.byteSize)
    var time = AudioTimeStamp()
    time.mSampleTime = Float64(frames.startSampleTime)
    time.mHostTime = AudioGetCurrentHostTime()
    time.mRateScalar = 1
    time.mFlags = [.sampleTimeValid, .hostTimeValid]
    let descriptions = frames.packetDescriptions.map(AudioStreamPacketDescription.init)
    let capacity = Int(record.ref.pointee.mPacketDescriptionCapacity)
    if let own = record.descriptions, !descriptions.isEmpty {
        for (index, description) in descriptions.prefix(capacity).enumerated() { own[index] = description }
        record.ref.pointee.mPacketDescriptionCount = UInt32(min(capacity, descriptions.count))
    } else {
        record.ref.pointee.mPacketDescriptionCount = 0
    }
    let count = UInt32(descriptions.isEmpty ? 0 : descriptions.count)
    descriptions.withUnsafeBufferPointer { pointer in
        withUnsafePointer(to: &time) { callback(object, record, $0, count, descriptions.isEmpty ? nil : pointer.baseAddress) }
    }
}

// MARK: buffers

/// Allocates a buffer of `inBufferByteSize` bytes owned by the queue.
@discardableResult
public func AudioQueueAllocateBuffer(_ inAQ: AudioQueueRef, _ inBufferByteSize: UInt32,
                                     _ outBuffer: UnsafeMutablePointer<AudioQueueBufferRef?>) -> OSStatus {
    AudioQueueAllocateBufferWithPacketDescriptions(inAQ, inBufferByteSize, 0, outBuffer)
}

/// Allocates a buffer with room for `inNumberPacketDescriptions` packet descriptions of its own
/// (`mPacketDescriptions`, counted by `mPacketDescriptionCount`).
@discardableResult
public func AudioQueueAllocateBufferWithPacketDescriptions(_ inAQ: AudioQueueRef, _ inBufferByteSize: UInt32,
                                                           _ inNumberPacketDescriptions: UInt32,
                                                           _ outBuffer: UnsafeMutablePointer<AudioQueueBufferRef?>) -> OSStatus {
    let object = QueueObject.from(inAQ)
    return queueStatus("AudioQueueAllocateBuffer") {
        guard !object.isDisposed else { throw StatusError(kAudioQueueErr_DisposalPending, "the queue is being disposed of") }
        let buffer: BufferQueue.AudioQueueBuffer
        switch object.queue {
        case .output(let queue):
            // Apple's queue takes descriptions passed at enqueue for any buffer: as many as there
            // can be packets (a packet has at least one byte).
            buffer = try queue.allocateBuffer(capacity: Int(inBufferByteSize),
                                              packetDescriptionCapacity: max(Int(inNumberPacketDescriptions), Int(inBufferByteSize)))
        case .input(let queue):
            buffer = try queue.allocateBuffer(capacity: Int(inBufferByteSize))
        }
        // A recording's packets are described to the callback; the buffer keeps a copy only
        // when it has room (AudioQueueAllocateBufferWithPacketDescriptions).
        let record = BufferRecord(buffer: buffer, packetDescriptions: Int(inNumberPacketDescriptions))
        object.add(record)
        outBuffer.pointee = record.ref
    }
}

/// Frees a buffer the queue does not hold.
@discardableResult
public func AudioQueueFreeBuffer(_ inAQ: AudioQueueRef, _ inBuffer: AudioQueueBufferRef) -> OSStatus {
    let object = QueueObject.from(inAQ)
    return queueStatus("AudioQueueFreeBuffer") {
        guard let record = object.record(for: inBuffer) else {
            throw StatusError(kAudioQueueErr_InvalidBuffer, "the buffer is not one of this queue's")
        }
        guard !record.buffer.isInQueue else {
            throw StatusError(kAudioQueueErr_BufferInQueue, "the buffer is in the queue; wait for its callback (or reset the queue) first")
        }
        object.remove(record)
    }
}

/// Adds a buffer to the queue. For a format with variable packet sizes, the packets are described
/// by `inPacketDescs`, or, with `inNumPacketDescs` 0, by the buffer's own `mPacketDescriptions`.
@discardableResult
public func AudioQueueEnqueueBuffer(_ inAQ: AudioQueueRef, _ inBuffer: AudioQueueBufferRef, _ inNumPacketDescs: UInt32,
                                    _ inPacketDescs: UnsafePointer<AudioStreamPacketDescription>?) -> OSStatus {
    enqueue(inAQ, inBuffer, inNumPacketDescs, inPacketDescs, trimStart: 0, trimEnd: 0, events: [], startTime: nil, actualStart: nil)
}

/// Adds a buffer with frames to trim at either end (priming and remainder), parameters that take
/// effect when it plays, and a start time on the queue's timeline (`mSampleTime`).
@discardableResult
public func AudioQueueEnqueueBufferWithParameters(_ inAQ: AudioQueueRef, _ inBuffer: AudioQueueBufferRef, _ inNumPacketDescs: UInt32,
                                                  _ inPacketDescs: UnsafePointer<AudioStreamPacketDescription>?,
                                                  _ inTrimFramesAtStart: UInt32, _ inTrimFramesAtEnd: UInt32,
                                                  _ inNumParamValues: UInt32, _ inParamValues: UnsafePointer<AudioQueueParameterEvent>?,
                                                  _ inStartTime: UnsafePointer<AudioTimeStamp>?,
                                                  _ outActualStartTime: UnsafeMutablePointer<AudioTimeStamp>?) -> OSStatus {
    let events = inParamValues.map { Array(UnsafeBufferPointer(start: $0, count: Int(inNumParamValues))) } ?? []
    return enqueue(inAQ, inBuffer, inNumPacketDescs, inPacketDescs, trimStart: inTrimFramesAtStart, trimEnd: inTrimFramesAtEnd,
                   events: events, startTime: inStartTime, actualStart: outActualStartTime)
}

private func enqueue(_ inAQ: AudioQueueRef, _ inBuffer: AudioQueueBufferRef, _ count: UInt32,
                     _ descriptions: UnsafePointer<AudioStreamPacketDescription>?, trimStart: UInt32, trimEnd: UInt32,
                     events: [AudioQueueParameterEvent], startTime: UnsafePointer<AudioTimeStamp>?,
                     actualStart: UnsafeMutablePointer<AudioTimeStamp>?) -> OSStatus {
    let object = QueueObject.from(inAQ)
    return queueStatus("AudioQueueEnqueueBuffer") {
        guard let record = object.record(for: inBuffer) else {
            throw StatusError(kAudioQueueErr_InvalidBuffer, "the buffer is not one of this queue's")
        }
        guard !record.buffer.isInQueue else {
            throw StatusError(kAudioQueueErr_BufferEnqueuedTwice, "the buffer is in the queue already")
        }
        switch object.queue {
        case .input(let queue):
            try queue.enqueue(record.buffer)
        case .output(let queue):
            try record.buffer.setByteSize(Int(inBuffer.pointee.mAudioDataByteSize))
            var packets: [AudioPacketDescription] = []
            if count > 0, let descriptions {
                packets = UnsafeBufferPointer(start: descriptions, count: Int(count)).map(\.library)
            } else if inBuffer.pointee.mPacketDescriptionCount > 0, let own = inBuffer.pointee.mPacketDescriptions {
                let owned = min(inBuffer.pointee.mPacketDescriptionCount, inBuffer.pointee.mPacketDescriptionCapacity)
                packets = UnsafeBufferPointer(start: own, count: Int(owned)).map(\.library)
            }
            var parameters = AudioQueueParameters()
            for event in events {
                switch event.mID {
                case kAudioQueueParam_Volume: parameters.volume = event.mValue
                case kAudioQueueParam_Pan: parameters.pan = event.mValue
                case kAudioQueueParam_PlayRate: parameters.playRate = event.mValue
                case kAudioQueueParam_Pitch: parameters.pitch = event.mValue
                default: throw StatusError(kAudioQueueErr_InvalidParameter, "parameter \(event.mID) cannot change per buffer")
                }
            }
            var start: Int64?
            if let time = startTime?.pointee, time.mFlags.contains(.sampleTimeValid) { start = Int64(time.mSampleTime) }
            let at = try queue.enqueue(record.buffer, packetDescriptions: packets, trimFramesAtStart: Int(trimStart),
                                       trimFramesAtEnd: Int(trimEnd), parameters: parameters, startTime: start)
            if let actualStart {
                var stamp = AudioTimeStamp()
                stamp.mSampleTime = Float64(at)
                stamp.mFlags = .sampleTimeValid
                actualStart.pointee = stamp
            }
        }
    }
}

// MARK: lifecycle

/// Starts (or resumes) the queue, now or at `inStartTime`'s host time.
@discardableResult
public func AudioQueueStart(_ inAQ: AudioQueueRef, _ inStartTime: UnsafePointer<AudioTimeStamp>?) -> OSStatus {
    let object = QueueObject.from(inAQ)
    return queueStatus("AudioQueueStart") {
        switch object.queue {
        case .output(let queue):
            var at: DispatchTime?
            if let time = inStartTime?.pointee, time.mFlags.contains(.hostTimeValid) {
                at = DispatchTime(uptimeNanoseconds: time.mHostTime)
            }
            try queue.start(at: at)
        case .input(let queue):
            try queue.start()
        }
    }
}

/// Decodes ahead so that a start plays at once; `outNumberOfFramesPrepared` gets the frames ready.
@discardableResult
public func AudioQueuePrime(_ inAQ: AudioQueueRef, _ inNumberOfFramesToPrepare: UInt32,
                            _ outNumberOfFramesPrepared: UnsafeMutablePointer<UInt32>?) -> OSStatus {
    let object = QueueObject.from(inAQ)
    return queueStatus("AudioQueuePrime") {
        guard let queue = object.output else {
            throw StatusError(kAudioQueueErr_InvalidQueueType, "only an output queue is primed")
        }
        let ready = try queue.prime(frames: Int(inNumberOfFramesToPrepare))
        outNumberOfFramesPrepared?.pointee = UInt32(clamping: ready)
    }
}

/// Pauses, keeping buffers and decoder state.
@discardableResult
public func AudioQueuePause(_ inAQ: AudioQueueRef) -> OSStatus {
    let object = QueueObject.from(inAQ)
    return queueStatus("AudioQueuePause") {
        switch object.queue {
        case .output(let queue): try queue.pause()
        case .input(let queue):
            try queue.pause()
        }
    }
}

/// Plays out what is enqueued, then stops decoding until more is enqueued (the decoder's state is
/// reset for a following stream).
@discardableResult
public func AudioQueueFlush(_ inAQ: AudioQueueRef) -> OSStatus {
    let object = QueueObject.from(inAQ)
    return queueStatus("AudioQueueFlush") {
        try object.output?.flush()
    }
}

/// Stops now (`inImmediate` true: buffers come back through the callback), or after what is
/// enqueued has played (false).
@discardableResult
public func AudioQueueStop(_ inAQ: AudioQueueRef, _ inImmediate: Bool) -> OSStatus {
    let object = QueueObject.from(inAQ)
    return queueStatus("AudioQueueStop") {
        switch object.queue {
        case .output(let queue): try queue.stop(immediately: inImmediate)
        case .input(let queue):
            try queue.stop(immediately: inImmediate)
            // Synchronous, as Apple's: no input callback runs after this returns (unless called
            // from one, where waiting would wait for itself).
            if inImmediate, DispatchQueue.getSpecific(key: insideInputCallback) == nil { queue.waitForCallbacks() }
        }
    }
}

/// Discards what is enqueued (buffers come back through the callback) and resets the decoder.
@discardableResult
public func AudioQueueReset(_ inAQ: AudioQueueRef) -> OSStatus {
    let object = QueueObject.from(inAQ)
    return queueStatus("AudioQueueReset") {
        switch object.queue {
        case .output(let queue): try queue.reset()
        case .input(let queue): try queue.reset()
        }
    }
}

/// Disposes of the queue and its buffers: now (`inImmediate` true; no callback runs after this
/// returns, unless it was called from one), or once what is enqueued has played.
@discardableResult
public func AudioQueueDispose(_ inAQ: AudioQueueRef, _ inImmediate: Bool) -> OSStatus {
    let object = QueueObject.from(inAQ)
    let first = object.state.withLock { state -> Bool in
        defer { if inImmediate { state.disposed = true } }
        return !state.disposed
    }
    guard first else { return noErr }
    switch object.queue {
    case .output(let queue): queue.dispose(immediately: inImmediate)
    case .input(let queue): queue.dispose(immediately: inImmediate)
    }
    // The object (and the buffers' memory) lives while the library queue may still call back:
    // the library holds it weakly, so after an immediate disposal nothing reaches it; a deferred
    // one keeps it until the queue has played out.
    if inImmediate {
        object.state.withLock { $0.listeners.removeAll() }
        Retained.release(QueueObject.self, inAQ)
    } else {
        object.releaseWhenStopped(inAQ)
    }
    return noErr
}

extension QueueObject {
    /// For a deferred disposal: releases the caller's reference once the queue has played out
    /// (at its running change to false), or now when it is not playing.
    func releaseWhenStopped(_ ref: AudioQueueRef) {
        state.withLock { $0.releaseWhenStopped = UncheckedBox(ref) }
        let playing = output.map { $0.isRunning || $0.isStopping } ?? false
        if !playing { releaseDeferred() }
    }

    /// Releases the caller's reference of a deferred disposal, once.
    func releaseDeferred() {
        let ref = state.withLock { state -> UncheckedBox<AudioQueueRef>? in
            defer { state.releaseWhenStopped = nil }
            if state.releaseWhenStopped != nil { state.disposed = true }
            return state.releaseWhenStopped
        }
        if let ref { Retained.release(QueueObject.self, ref.value) }
    }
}
