import AudioToolbox
import Foundation
import Testing
import CodecTestSupport

/// What callbacks tell the test thread, with waits that have deadlines.
final class CallbackLog: @unchecked Sendable {
    private let condition = NSCondition()
    private var events: [String] = []
    var queue: AudioQueueRef?
    /// The thread callbacks are expected on.
    var thread: pthread_t?

    func add(_ event: String) {
        condition.lock()
        events.append(event)
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until `predicate` holds for the events, at most `seconds`.
    func wait(seconds: Double = 10, until predicate: ([String]) -> Bool) -> Bool {
        let deadline = Date(timeIntervalSinceNow: seconds)
        condition.lock()
        defer { condition.unlock() }
        while !predicate(events) {
            if !condition.wait(until: deadline) { return predicate(events) }
        }
        return true
    }

    var all: [String] {
        condition.lock()
        defer { condition.unlock() }
        return events
    }
}

func pcm16(rate: Double = 44100, channels: UInt32 = 2) -> AudioStreamBasicDescription {
    AudioStreamBasicDescription(mSampleRate: rate, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagIsSignedInteger | kAudioFormatFlagIsPacked,
                                mBytesPerPacket: 2 * channels, mFramesPerPacket: 1, mBytesPerFrame: 2 * channels, mChannelsPerFrame: channels,
                                mBitsPerChannel: 16, mReserved: 0)
}

/// Queues made in this process play to the null device (never to a PulseAudio server the machine runs).
let nullOutput: Void = { setenv("AQ_OUTPUT", "null:unpaced", 1) }()

/// Fills a buffer with `frames` frames of a quiet tone and sets its size.
func fill(_ buffer: AudioQueueBufferRef, frames: Int) {
    let samples = buffer.pointee.mAudioData.assumingMemoryBound(to: Int16.self)
    for index in 0..<(frames * 2) { samples[index] = Int16(1000 * sin(Double(index / 2) * 0.05)) }
    buffer.pointee.mAudioDataByteSize = UInt32(frames * 4)
}

@Suite(.serialized) struct QueueBehaviourTests {
    init() { _ = nullOutput }

    /// Each misuse gets the status Apple's Audio Queue Services return for it.
    @Test func misusesGetApplesStatuses() throws {
        var format = pcm16()
        var queue: AudioQueueRef?
        let quiet: AudioQueueOutputCallback = { _, _, _ in }
        var unknown = format
        unknown.mFormatID = fourCC("xxxx")
        #expect(AudioQueueNewOutput(&unknown, quiet, nil, nil, nil, 0, &queue) == kAudioQueueErr_CodecNotFound)
        try #require(AudioQueueNewOutput(&format, quiet, nil, nil, nil, 0, &queue) == noErr)
        let aq = try #require(queue)
        defer { AudioQueueDispose(aq, true) }

        var buffer: AudioQueueBufferRef?
        try #require(AudioQueueAllocateBuffer(aq, 4096, &buffer) == noErr)
        let first = try #require(buffer)
        first.pointee.mAudioDataByteSize = 0
        #expect(AudioQueueEnqueueBuffer(aq, first, 0, nil) == kAudioQueueErr_BufferEmpty)
        fill(first, frames: 1000)
        #expect(AudioQueueEnqueueBuffer(aq, first, 0, nil) == noErr)
        #expect(AudioQueueEnqueueBuffer(aq, first, 0, nil) == kAudioQueueErr_BufferEnqueuedTwice)
        #expect(AudioQueueFreeBuffer(aq, first) == kAudioQueueErr_BufferInQueue)
        fill(first, frames: 1)

        var value: UInt32 = 0
        var size = UInt32(4)
        #expect(AudioQueueGetProperty(aq, fourCC("nope"), &value, &size) == kAudioQueueErr_InvalidProperty)
        size = 2
        #expect(AudioQueueGetProperty(aq, kAudioQueueProperty_IsRunning, &value, &size) == kAudioQueueErr_InvalidPropertySize)
        size = 4
        #expect(AudioQueueGetProperty(aq, kAudioQueueProperty_IsRunning, &value, &size) == noErr && value == 0)
        #expect(AudioQueueSetParameter(aq, 99, 1) == kAudioQueueErr_InvalidParameter)
        #expect(AudioQueueSetParameter(aq, kAudioQueueParam_Volume, 0.5) == noErr)
        var volume: AudioQueueParameterValue = 0
        #expect(AudioQueueGetParameter(aq, kAudioQueueParam_Volume, &volume) == noErr && volume == 0.5)

        var stamp = AudioTimeStamp()
        var scratch: AudioQueueBufferRef?
        try #require(AudioQueueAllocateBuffer(aq, 4096, &scratch) == noErr)
        #expect(AudioQueueOfflineRender(aq, &stamp, try #require(scratch), 256) == kAudioQueueErr_InvalidOfflineMode)

        let tapCallback: AudioQueueProcessingTapCallback = { _, _, _, _, _, _, _ in }
        var maxFrames: UInt32 = 0
        var tapFormat = AudioStreamBasicDescription()
        var tap: AudioQueueProcessingTapRef?
        #expect(AudioQueueProcessingTapNew(aq, tapCallback, nil, [], &maxFrames, &tapFormat, &tap) == kAudioQueueErr_InvalidTapType)
        #expect(AudioQueueProcessingTapNew(aq, tapCallback, nil, .siphon, &maxFrames, &tapFormat, &tap) == noErr)
        var second: AudioQueueProcessingTapRef?
        #expect(AudioQueueProcessingTapNew(aq, tapCallback, nil, .postEffects, &maxFrames, &tapFormat, &second) == kAudioQueueErr_TooManyTaps)
        #expect(tapFormat.mFormatFlags & kAudioFormatFlagIsNonInterleaved != 0 && tapFormat.mChannelsPerFrame == 2)
        if let tap { #expect(AudioQueueProcessingTapDispose(tap) == noErr) }

        var input: AudioQueueRef?
        let inputCallback: AudioQueueInputCallback = { _, _, _, _, _, _ in }
        setenv("AQ_INPUT", "null", 1)
        try #require(AudioQueueNewInput(&format, inputCallback, nil, nil, nil, 0, &input) == noErr)
        let recorder = try #require(input)
        #expect(AudioQueuePrime(recorder, 0, nil) == kAudioQueueErr_InvalidQueueType)
        #expect(AudioQueueDispose(recorder, true) == noErr)
    }

    /// An input queue's running listeners follow the queue's own reports: running at the start,
    /// stopped at the stop, each once, in that order (no flag of this layer's beside the queue's).
    @Test func anInputQueuesRunningListenersFollowItsReports() throws {
        setenv("AQ_INPUT", "null", 1)
        var format = pcm16()
        let log = CallbackLog()
        let inputCallback: AudioQueueInputCallback = { _, _, _, _, _, _ in }
        let listener: AudioQueuePropertyListenerProc = { userData, queue, id in
            var running: UInt32 = 9
            var size = UInt32(4)
            AudioQueueGetProperty(queue, id, &running, &size)
            Unmanaged<CallbackLog>.fromOpaque(userData!).takeUnretainedValue().add("running \(running)")
        }
        var input: AudioQueueRef?
        let userData = Unmanaged.passUnretained(log).toOpaque()
        try #require(AudioQueueNewInput(&format, inputCallback, userData, nil, nil, 0, &input) == noErr)
        let recorder = try #require(input)
        #expect(AudioQueueAddPropertyListener(recorder, kAudioQueueProperty_IsRunning, listener, userData) == noErr)
        #expect(AudioQueueStart(recorder, nil) == noErr)
        #expect(log.wait { $0.contains("running 1") }, "\(log.all)")
        #expect(AudioQueueStop(recorder, true) == noErr)
        #expect(log.wait { $0.contains("running 0") }, "\(log.all)")
        #expect(log.all == ["running 1", "running 0"])
        #expect(AudioQueueDispose(recorder, true) == noErr)
    }

    /// An asynchronous stop refuses enqueues while it plays out; a disposal pending refuses them too.
    @Test func enqueuesDuringAStopOrADisposalAreRefused() throws {
        setenv("AQ_OUTPUT", "null", 1)
        defer { setenv("AQ_OUTPUT", "null:unpaced", 1) }
        var format = pcm16()
        let log = CallbackLog()
        let callback: AudioQueueOutputCallback = { userData, _, _ in
            Unmanaged<CallbackLog>.fromOpaque(userData!).takeUnretainedValue().add("returned")
        }
        var queue: AudioQueueRef?
        try #require(AudioQueueNewOutput(&format, callback, Unmanaged.passUnretained(log).toOpaque(), nil, nil, 0, &queue) == noErr)
        let aq = try #require(queue)
        var buffers: [AudioQueueBufferRef] = []
        for _ in 0..<3 {
            var buffer: AudioQueueBufferRef?
            try #require(AudioQueueAllocateBuffer(aq, 44100 * 4, &buffer) == noErr)
            buffers.append(try #require(buffer))
        }
        fill(buffers[0], frames: 22050)
        fill(buffers[1], frames: 22050)
        #expect(AudioQueueEnqueueBuffer(aq, buffers[0], 0, nil) == noErr)
        #expect(AudioQueueEnqueueBuffer(aq, buffers[1], 0, nil) == noErr)
        #expect(AudioQueueStart(aq, nil) == noErr)
        // Half a second each, played in real time: the stop plays out for a while.
        #expect(AudioQueueStop(aq, false) == noErr)
        fill(buffers[2], frames: 100)
        #expect(AudioQueueEnqueueBuffer(aq, buffers[2], 0, nil) == kAudioQueueErr_EnqueueDuringReset)
        #expect(AudioQueueStop(aq, true) == noErr)
        #expect(log.wait { $0.count >= 2 }, "the buffers come back after the stop: \(log.all)")
        #expect(AudioQueueDispose(aq, false) == noErr)
    }

    /// Callbacks may call the queue: enqueue the buffer again, stop it, dispose of it.
    @Test func callbacksReenterTheQueue() throws {
        var format = pcm16()
        let log = CallbackLog()
        // Refills twice, then stops the queue from inside the callback, synchronously.
        let callback: AudioQueueOutputCallback = { userData, queue, buffer in
            let log = Unmanaged<CallbackLog>.fromOpaque(userData!).takeUnretainedValue()
            let count = log.all.filter { $0 == "returned" }.count
            log.add("returned")
            if count < 2 {
                fill(buffer, frames: 2000)
                log.add(AudioQueueEnqueueBuffer(queue, buffer, 0, nil) == noErr ? "enqueued" : "refused")
            } else if count == 2 {
                log.add(AudioQueueStop(queue, true) == noErr ? "stopped" : "stop failed")
            }
        }
        let listener: AudioQueuePropertyListenerProc = { userData, queue, id in
            let log = Unmanaged<CallbackLog>.fromOpaque(userData!).takeUnretainedValue()
            var running: UInt32 = 9
            var size = UInt32(4)
            AudioQueueGetProperty(queue, id, &running, &size)
            log.add("running \(running)")
        }
        var queue: AudioQueueRef?
        let userData = Unmanaged.passUnretained(log).toOpaque()
        try #require(AudioQueueNewOutput(&format, callback, userData, nil, nil, 0, &queue) == noErr)
        let aq = try #require(queue)
        #expect(AudioQueueAddPropertyListener(aq, kAudioQueueProperty_IsRunning, listener, userData) == noErr)
        var buffer: AudioQueueBufferRef?
        try #require(AudioQueueAllocateBuffer(aq, 8000, &buffer) == noErr)
        fill(try #require(buffer), frames: 2000)
        #expect(AudioQueueEnqueueBuffer(aq, try #require(buffer), 0, nil) == noErr)
        #expect(AudioQueueStart(aq, nil) == noErr)
        #expect(log.wait { $0.contains("stopped") && $0.contains("running 0") }, "\(log.all)")
        #expect(log.all.filter { $0 == "enqueued" }.count == 2)
        #expect(log.all.first { $0.hasPrefix("running") } == "running 1")
        #expect(AudioQueueRemovePropertyListener(aq, kAudioQueueProperty_IsRunning, listener, userData) == noErr)
        #expect(AudioQueueRemovePropertyListener(aq, kAudioQueueProperty_IsRunning, listener, userData) == kAudioQueueErr_InvalidParameter,
                "a listener is removed once")

        // A callback that disposes of its own queue.
        let disposing: AudioQueueOutputCallback = { userData, queue, _ in
            let log = Unmanaged<CallbackLog>.fromOpaque(userData!).takeUnretainedValue()
            log.add(AudioQueueDispose(queue, true) == noErr ? "disposed" : "dispose failed")
        }
        var second: AudioQueueRef?
        let other = CallbackLog()
        try #require(AudioQueueNewOutput(&format, disposing, Unmanaged.passUnretained(other).toOpaque(), nil, nil, 0, &second) == noErr)
        let q2 = try #require(second)
        var b2: AudioQueueBufferRef?
        try #require(AudioQueueAllocateBuffer(q2, 4000, &b2) == noErr)
        fill(try #require(b2), frames: 1000)
        #expect(AudioQueueEnqueueBuffer(q2, try #require(b2), 0, nil) == noErr)
        #expect(AudioQueueStart(q2, nil) == noErr)
        #expect(other.wait { $0.contains("disposed") }, "\(other.all)")
        #expect(AudioQueueDispose(aq, true) == noErr)
    }

    /// Callbacks given a run loop run only while its thread runs it, and in order there.
    @Test func callbacksRunOnTheGivenRunLoop() throws {
        let log = CallbackLog()
        let done = CallbackLog()
        let thread = Thread {
            log.thread = pthread_self()
            var format = pcm16()
            let callback: AudioQueueOutputCallback = { userData, queue, _ in
                let log = Unmanaged<CallbackLog>.fromOpaque(userData!).takeUnretainedValue()
                let here = log.thread.map { pthread_equal($0, pthread_self()) != 0 } ?? false
                log.add(here ? "on the loop's thread" : "elsewhere")
                if log.all.count == 2 { CFRunLoopStop(CFRunLoopGetCurrent()) }
            }
            var queue: AudioQueueRef?
            AudioQueueNewOutput(&format, callback, Unmanaged.passUnretained(log).toOpaque(), CFRunLoopGetCurrent(),
                                CFRunLoopMode.commonModes.rawValue, 0, &queue)
            guard let queue else { return }
            for _ in 0..<2 {
                var buffer: AudioQueueBufferRef?
                AudioQueueAllocateBuffer(queue, 4000, &buffer)
                if let buffer {
                    fill(buffer, frames: 1000)
                    AudioQueueEnqueueBuffer(queue, buffer, 0, nil)
                }
            }
            AudioQueueStart(queue, nil)
            let result = CFRunLoopRunInMode(CFRunLoopMode.defaultMode, 10, false)
            done.add(result == .stopped ? "stopped" : "timed out")
            AudioQueueDispose(queue, true)
        }
        thread.start()
        #expect(done.wait { !$0.isEmpty })
        #expect(done.all == ["stopped"])
        #expect(log.all == ["on the loop's thread", "on the loop's thread"])
    }
}

@Suite struct UndecodableQueueTests {
    /// A queue whose decoder cannot be made (an AAC cookie of one byte) says so when its frames
    /// are asked for: prime and the offline render fail with `kAudioQueueErr_CodecNotFound`, never
    /// a render of nothing reported as success (it returned noErr and 0 bytes).
    @Test func aQueueThatCannotDecodeSaysSo() throws {
        var format = AudioStreamBasicDescription(mSampleRate: 44_100, mFormatID: kAudioFormatMPEG4AAC, mFormatFlags: 0, mBytesPerPacket: 0,
                                                 mFramesPerPacket: 1024, mBytesPerFrame: 0, mChannelsPerFrame: 2, mBitsPerChannel: 0, mReserved: 0)
        var queue: AudioQueueRef?
        let quiet: AudioQueueOutputCallback = { _, _, _ in }
        try #require(AudioQueueNewOutput(&format, quiet, nil, nil, nil, 0, &queue) == noErr)
        let aq = try #require(queue)
        defer { AudioQueueDispose(aq, true) }
        let cookie: [UInt8] = [0x12]
        _ = AudioQueueSetProperty(aq, kAudioQueueProperty_MagicCookie, cookie, 1)
        var render = AudioStreamBasicDescription(mSampleRate: 44_100, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagsNativeFloatPacked,
                                                 mBytesPerPacket: 8, mFramesPerPacket: 1, mBytesPerFrame: 8, mChannelsPerFrame: 2, mBitsPerChannel: 32, mReserved: 0)
        var layout = AudioChannelLayout()
        layout.mChannelLayoutTag = kAudioChannelLayoutTag_Stereo
        #expect(AudioQueueSetOfflineRenderFormat(aq, &render, &layout) == noErr)
        var buffer: AudioQueueBufferRef?
        try #require(AudioQueueAllocateBuffer(aq, 4096, &buffer) == noErr)
        let packet = try #require(buffer)
        packet.pointee.mAudioDataByteSize = 200
        var description = AudioStreamPacketDescription(mStartOffset: 0, mVariableFramesInPacket: 0, mDataByteSize: 200)
        #expect(AudioQueueEnqueueBuffer(aq, packet, 1, &description) == noErr)
        var prepared: UInt32 = 0
        #expect(AudioQueuePrime(aq, 0, &prepared) == kAudioQueueErr_CodecNotFound)
        #expect(AudioQueueStart(aq, nil) == noErr)
        var capture: AudioQueueBufferRef?
        try #require(AudioQueueAllocateBuffer(aq, 4096 * 8, &capture) == noErr)
        var stamp = AudioTimeStamp()
        stamp.mFlags = .sampleTimeValid
        #expect(AudioQueueOfflineRender(aq, &stamp, try #require(capture), 4096) == kAudioQueueErr_CodecNotFound)
        #expect(capture?.pointee.mAudioDataByteSize == 0)
    }
}

@Suite struct DarwinMemoryFunctionTests {
    /// Issue 52, class 6c: code written on a Mac passes optional chains to `memcpy`, `memmove`,
    /// `memset`, `memcmp` and `bzero` (Darwin's pointers are nullable); it compiles here with
    /// `import AudioToolbox` and does what C does. Calls with non-optional pointers still compile.
    @Test func optionalPointersGoToTheCLibrarysFunctions() throws {
        var format = pcm16()
        var queue: AudioQueueRef?
        let quiet: AudioQueueOutputCallback = { _, _, _ in }
        try #require(AudioQueueNewOutput(&format, quiet, nil, nil, nil, 0, &queue) == noErr)
        defer { if let queue { AudioQueueDispose(queue, true) } }
        var buffer: AudioQueueBufferRef?
        try #require(AudioQueueAllocateBuffer(queue!, 64, &buffer) == noErr)
        let source: [UInt8] = Array(1...16)
        // As a Mac's code spells them: optional destinations.
        memset(buffer?.pointee.mAudioData, 0x7F, 64)
        memcpy(buffer?.pointee.mAudioData, source, 16)
        memmove(buffer?.pointee.mAudioData.advanced(by: 4), buffer?.pointee.mAudioData, 8)
        let data = try #require(buffer?.pointee.mAudioData)
        let bytes = (0..<20).map { data.load(fromByteOffset: $0, as: UInt8.self) }
        #expect(bytes == [1, 2, 3, 4, 1, 2, 3, 4, 5, 6, 7, 8, 13, 14, 15, 16, 0x7F, 0x7F, 0x7F, 0x7F])
        #expect(memcmp(buffer?.pointee.mAudioData, source, 4) == 0)
        #expect(memcmp(buffer?.pointee.mAudioData.advanced(by: 4), source, 8) == 0)
        #expect(memcmp(buffer?.pointee.mAudioData.advanced(by: 8), source, 4) > 0)
        bzero(buffer?.pointee.mAudioData, 8)
        #expect(data.load(as: UInt64.self) == 0)
        // Nothing to copy through a nil pointer is nothing done.
        let none: UnsafeMutableRawPointer? = nil
        #expect(memcpy(none, source, 0) == nil)
        // Non-optional pointers: the C library's own functions.
        var plain = [UInt8](repeating: 0, count: 4)
        plain.withUnsafeMutableBytes { _ = memcpy($0.baseAddress!, source, 4) }
        #expect(plain == [1, 2, 3, 4])
    }
}
