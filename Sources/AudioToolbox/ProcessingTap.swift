internal import BufferQueue
import Foundation

// Audio queue processing taps (AudioQueueProcessingTapNew …) over the library's taps. The C tap
// sees non-interleaved float32 (one buffer per channel), as Apple's does; the bridge
// deinterleaves into memory allocated when the tap is made, so the render path allocates nothing.

/// What an `AudioQueueProcessingTapRef` points to.
// @unchecked: buffers are written once at init; `tap` and `queue` are set before the ref is handed out; render state is the render thread's.
final class TapObject {
    let callback: CAudioToolbox.AudioQueueProcessingTapCallback
    let clientData: UserData
    let position: CAudioToolbox.AudioQueueProcessingTapFlags
    let channels: Int
    let maximumFrames: Int
    let sampleRate: Double
    /// Set once, right after installation.
    nonisolated(unsafe) var tap: BufferQueue.AudioQueueProcessingTap?
    weak var queue: QueueObject?
    /// The buffer list handed to the callback, one buffer per channel over `planar`.
    private let list: UnsafeMutableAudioBufferListPointer
    private let planar: UnsafeMutablePointer<Float>
    /// Interleaved frames pulled from the library's tap.
    private let interleaved: UnsafeMutablePointer<Float>
    private var timeStamp = AudioTimeStamp()
    /// Sample time of the current callback's frames.
    private(set) var sampleTime: Int64 = 0
    private(set) var callbackFrames = 0

    init(callback: @escaping CAudioToolbox.AudioQueueProcessingTapCallback, clientData: UnsafeMutableRawPointer?,
         position: CAudioToolbox.AudioQueueProcessingTapFlags, channels: Int, maximumFrames: Int, sampleRate: Double) {
        self.callback = callback
        self.clientData = UserData(pointer: clientData)
        self.position = position
        self.channels = channels
        self.maximumFrames = maximumFrames
        self.sampleRate = sampleRate
        list = AudioBufferList.allocate(maximumBuffers: channels)
        planar = .allocate(capacity: channels * maximumFrames)
        planar.initialize(repeating: 0, count: channels * maximumFrames)
        interleaved = .allocate(capacity: channels * maximumFrames)
        interleaved.initialize(repeating: 0, count: channels * maximumFrames)
    }

    deinit {
        free(list.unsafeMutablePointer)
        planar.deallocate()
        interleaved.deallocate()
    }

    var ref: AudioQueueProcessingTapRef { OpaquePointer(Unmanaged.passUnretained(self).toOpaque()) }

    /// Points the list's buffers at the planar scratch, `frames` frames each.
    private func resetList(frames: Int) {
        for channel in 0..<channels {
            list[channel] = AudioBuffer(mNumberChannels: 1, mDataByteSize: UInt32(frames * 4),
                                        mData: UnsafeMutableRawPointer(planar + channel * maximumFrames))
        }
    }

    /// Copies interleaved frames into the list's buffers (wherever the caller pointed them).
    private static func deinterleave(_ source: UnsafePointer<Float>, frames: Int, channels: Int, into buffers: UnsafeMutableAudioBufferListPointer) {
        for channel in 0..<min(channels, buffers.count) {
            guard let data = buffers[channel].mData?.assumingMemoryBound(to: Float.self) else { continue }
            for frame in 0..<frames { data[frame] = source[frame * channels + channel] }
            buffers[channel].mDataByteSize = UInt32(frames * 4)
        }
    }

    private static func interleave(_ buffers: UnsafeMutableAudioBufferListPointer, frames: Int, channels: Int, into out: UnsafeMutablePointer<Float>) {
        for channel in 0..<min(channels, buffers.count) {
            guard let data = buffers[channel].mData?.assumingMemoryBound(to: Float.self) else { continue }
            for frame in 0..<frames { out[frame * channels + channel] = data[frame] }
        }
    }

    /// The library's callback: runs the C callback over planar buffers and interleaves its result.
    func render(_ tap: BufferQueue.AudioQueueProcessingTap, frames: Int, output: UnsafeMutablePointer<Float>,
                flags: BufferQueue.AudioQueueProcessingTapFlags) -> Int {
        let frames = min(frames, maximumFrames)
        callbackFrames = frames
        resetList(frames: frames)
        var cFlags = position.union(CAudioToolbox.AudioQueueProcessingTapFlags(rawValue: flags.rawValue))
        if position.contains(.siphon) {
            Self.deinterleave(output, frames: frames, channels: channels, into: list)
        }
        timeStamp = AudioTimeStamp()
        timeStamp.mSampleTime = Float64(sampleTime)
        timeStamp.mFlags = .sampleTimeValid
        var produced = UInt32(0)
        callback(clientData.pointer ?? UnsafeMutableRawPointer(ref), ref, UInt32(frames), &timeStamp, &cFlags, &produced, list.unsafeMutablePointer)
        if position.contains(.siphon) {
            sampleTime += Int64(frames)
            return frames
        }
        let count = min(Int(produced), frames)
        Self.interleave(list, frames: count, channels: channels, into: output)
        sampleTime += Int64(count)
        return count
    }

    /// `AudioQueueProcessingTapGetSourceAudio`: pulls source frames into the caller's buffers.
    func getSourceAudio(frames: Int, into buffers: UnsafeMutableAudioBufferListPointer) -> (frames: Int, flags: BufferQueue.AudioQueueProcessingTapFlags, time: Int64) {
        guard let tap else { return (0, [], 0) }
        let (count, flags, time) = tap.getSourceAudio(frames: min(frames, maximumFrames), into: interleaved)
        Self.deinterleave(interleaved, frames: count, channels: channels, into: buffers)
        return (count, flags, time)
    }
}

/// Installs a processing tap: `inFlags` says where (`.preEffects`, `.postEffects` or `.siphon`).
/// The callback gets non-interleaved float32 in `outProcessingFormat`, at most `outMaxFrames`
/// frames a call; it pulls the source with `AudioQueueProcessingTapGetSourceAudio` (except a
/// siphon, which is given the output to look at). Only while the queue is not running.
@discardableResult
public func AudioQueueProcessingTapNew(_ inAQ: AudioQueueRef, _ inCallback: @escaping CAudioToolbox.AudioQueueProcessingTapCallback,
                                       _ inClientData: UnsafeMutableRawPointer?, _ inFlags: CAudioToolbox.AudioQueueProcessingTapFlags,
                                       _ outMaxFrames: UnsafeMutablePointer<UInt32>,
                                       _ outProcessingFormat: UnsafeMutablePointer<AudioStreamBasicDescription>,
                                       _ outAQTap: UnsafeMutablePointer<AudioQueueProcessingTapRef?>) -> OSStatus {
    let object = QueueObject.from(inAQ)
    return queueStatus("AudioQueueProcessingTapNew") {
        guard let queue = object.output else {
            throw StatusError(kAudioQueueErr_InvalidQueueType, "taps are installed on output queues")
        }
        let placeFlags = inFlags.intersection([.preEffects, .postEffects, .siphon])
        let position: AudioQueueProcessingTapPosition
        switch placeFlags {
        case .preEffects: position = .preEffects
        case .postEffects: position = .postEffects
        case .siphon: position = .siphon
        default: throw StatusError(kAudioQueueErr_InvalidTapType, "give one of PreEffects, PostEffects and Siphon")
        }
        guard object.state.withLock({ $0.tap == nil }) else {
            throw StatusError(kAudioQueueErr_TooManyTaps, "the queue has a tap; dispose of it first")
        }
        // The library's tap says its format and size once installed: install with a bridge that
        // finds the C side through a box filled right after.
        let box = WeakTap()
        let tap = try queue.installProcessingTap(position) { tap, frames, output, flags in
            box.object?.render(tap, frames: frames, output: output, flags: flags) ?? 0
        }
        let bridge = TapObject(callback: inCallback, clientData: inClientData, position: placeFlags,
                               channels: tap.processingFormat.channelsPerFrame, maximumFrames: tap.maximumFrames,
                               sampleRate: tap.processingFormat.sampleRate)
        bridge.tap = tap
        bridge.queue = object
        box.object = bridge
        object.state.withLock { $0.tap = bridge }
        var format = AudioStreamBasicDescription()
        format.mSampleRate = tap.processingFormat.sampleRate
        format.mFormatID = kAudioFormatLinearPCM
        format.mFormatFlags = kAudioFormatFlagsNativeFloatPacked | kAudioFormatFlagIsNonInterleaved
        format.mBytesPerPacket = 4
        format.mFramesPerPacket = 1
        format.mBytesPerFrame = 4
        format.mChannelsPerFrame = UInt32(tap.processingFormat.channelsPerFrame)
        format.mBitsPerChannel = 32
        outProcessingFormat.pointee = format
        outMaxFrames.pointee = UInt32(tap.maximumFrames)
        outAQTap.pointee = bridge.ref
    }
}

/// Holds the tap bridge weakly while the library's tap is installed (set right after).
// @unchecked: read on the render thread (no lock allowed), set once before the tap's first render (the queue's start orders it).
final class WeakTap: @unchecked Sendable {
    weak var object: TapObject?
}

/// Removes a tap (only while the queue is not running).
@discardableResult
public func AudioQueueProcessingTapDispose(_ inAQTap: AudioQueueProcessingTapRef) -> OSStatus {
    let bridge = Unmanaged<TapObject>.fromOpaque(UnsafeRawPointer(inAQTap)).takeUnretainedValue()
    return queueStatus("AudioQueueProcessingTapDispose") {
        guard let object = bridge.queue, let queue = object.output, let tap = bridge.tap else {
            throw StatusError(kAudioQueueErr_InvalidTapContext, "the tap's queue is gone")
        }
        try queue.removeProcessingTap(tap)
        object.state.withLock { $0.tap = nil }
    }
}

/// From inside the tap's callback: pulls up to `inNumberFrames` source frames into `ioData`;
/// `outNumberFrames` gets how many, `outFlags` `.endOfStream` once the source has ended.
@discardableResult
public func AudioQueueProcessingTapGetSourceAudio(_ inAQTap: AudioQueueProcessingTapRef, _ inNumberFrames: UInt32,
                                                  _ ioTimeStamp: UnsafeMutablePointer<AudioTimeStamp>,
                                                  _ outFlags: UnsafeMutablePointer<CAudioToolbox.AudioQueueProcessingTapFlags>,
                                                  _ outNumberFrames: UnsafeMutablePointer<UInt32>,
                                                  _ ioData: UnsafeMutablePointer<AudioBufferList>) -> OSStatus {
    let bridge = Unmanaged<TapObject>.fromOpaque(UnsafeRawPointer(inAQTap)).takeUnretainedValue()
    guard !bridge.position.contains(.siphon) else { return kAudioQueueErr_InvalidTapType }
    let (frames, flags, time) = bridge.getSourceAudio(frames: Int(inNumberFrames), into: UnsafeMutableAudioBufferListPointer(ioData))
    outNumberFrames.pointee = UInt32(frames)
    outFlags.pointee = CAudioToolbox.AudioQueueProcessingTapFlags(rawValue: flags.rawValue)
    ioTimeStamp.pointee.mSampleTime = Float64(time)
    ioTimeStamp.pointee.mFlags = .sampleTimeValid
    return noErr
}

/// From inside the tap's callback: the sample time of the frames it is asked for, and how many.
@discardableResult
public func AudioQueueProcessingTapGetQueueTime(_ inAQTap: AudioQueueProcessingTapRef, _ outQueueSampleTime: UnsafeMutablePointer<Float64>,
                                                _ outQueueFrameCount: UnsafeMutablePointer<UInt32>) -> OSStatus {
    let bridge = Unmanaged<TapObject>.fromOpaque(UnsafeRawPointer(inAQTap)).takeUnretainedValue()
    outQueueSampleTime.pointee = Float64(bridge.sampleTime)
    outQueueFrameCount.pointee = UInt32(bridge.callbackFrames)
    return noErr
}
