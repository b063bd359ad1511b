// A processing tap: a pre-effects tap that pulls the decoded audio and halves it, on a file
// played (gapless, through its packet table) on the device. Written against Apple's C API only.
import AudioToolbox
import Foundation

final class PlayerState {
    var file: AudioFileID?
    var format = AudioStreamBasicDescription()
    var nextPacket: Int64 = 0
    var packetsPerBuffer: UInt32 = 0
    var descriptions: UnsafeMutablePointer<AudioStreamPacketDescription>?
    var finished = false
    var primingLeft: Int64 = 0
    var framesLeft: Int64 = .max
    private let lock = NSLock()
    private var stoppedFlag = false
    var stopped: Bool {
        get { lock.lock(); defer { lock.unlock() }; return stoppedFlag }
        set { lock.lock(); stoppedFlag = newValue; lock.unlock() }
    }
}

func check(_ status: OSStatus, _ what: String) {
    if status == noErr { return }
    fputs("attap: \(what) failed: \(status)\n", stderr)
    exit(1)
}

let outputCallback: AudioQueueOutputCallback = { userData, queue, buffer in
    let player = Unmanaged<PlayerState>.fromOpaque(userData!).takeUnretainedValue()
    if player.finished { return }
    var bytes = buffer.pointee.mAudioDataBytesCapacity
    var packets = player.packetsPerBuffer
    check(AudioFileReadPacketData(player.file!, false, &bytes, player.descriptions, player.nextPacket, &packets, buffer.pointee.mAudioData),
          "AudioFileReadPacketData")
    if packets == 0 {
        check(AudioQueueStop(queue, false), "AudioQueueStop")
        player.finished = true
        return
    }
    buffer.pointee.mAudioDataByteSize = bytes
    var frames: Int64 = 0
    for index in 0..<Int(packets) {
        let own = player.descriptions.map { Int64($0[index].mVariableFramesInPacket) } ?? 0
        frames += own > 0 ? own : Int64(player.format.mFramesPerPacket)
    }
    let trimStart = min(player.primingLeft, frames)
    player.primingLeft -= trimStart
    let kept = min(frames - trimStart, player.framesLeft)
    player.framesLeft -= kept
    check(AudioQueueEnqueueBufferWithParameters(queue, buffer, player.format.mBytesPerPacket == 0 ? packets : 0, player.descriptions,
                                                UInt32(trimStart), UInt32(frames - trimStart - kept), 0, nil, nil, nil), "AudioQueueEnqueueBuffer")
    player.nextPacket += Int64(packets)
}

/// The tap: pulls as many source frames as it is asked for and halves them.
let tapCallback: AudioQueueProcessingTapCallback = { clientData, tap, frames, timeStamp, flags, outFrames, data in
    var sourceFlags = AudioQueueProcessingTapFlags()
    var sourceFrames: UInt32 = 0
    AudioQueueProcessingTapGetSourceAudio(tap, frames, timeStamp, &sourceFlags, &sourceFrames, data)
    for buffer in UnsafeMutableAudioBufferListPointer(data) {
        let samples = UnsafeMutableBufferPointer<Float>(buffer)
        for index in 0..<Int(sourceFrames) { samples[index] *= 0.5 }
    }
    outFrames.pointee = sourceFrames
}

let runningListener: AudioQueuePropertyListenerProc = { userData, queue, _ in
    let player = Unmanaged<PlayerState>.fromOpaque(userData!).takeUnretainedValue()
    var running: UInt32 = 0
    var size = UInt32(MemoryLayout<UInt32>.size)
    AudioQueueGetProperty(queue, kAudioQueueProperty_IsRunning, &running, &size)
    if running == 0 && player.finished { player.stopped = true }
}

guard CommandLine.arguments.count == 2 else {
    fputs("usage: attap FILE\n", stderr)
    exit(2)
}
let player = PlayerState()
check(AudioFileOpenURL(URL(fileURLWithPath: CommandLine.arguments[1]) as CFURL, .readPermission, 0, &player.file), "AudioFileOpenURL")
var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
check(AudioFileGetProperty(player.file!, kAudioFilePropertyDataFormat, &size, &player.format), "DataFormat")
var maxPacket: UInt32 = 0
size = 4
check(AudioFileGetProperty(player.file!, kAudioFilePropertyPacketSizeUpperBound, &size, &maxPacket), "PacketSizeUpperBound")
let bufferBytes = max(32768, maxPacket)
player.packetsPerBuffer = bufferBytes / maxPacket
player.descriptions = .allocate(capacity: Int(player.packetsPerBuffer))

var table = AudioFilePacketTableInfo()
size = UInt32(MemoryLayout<AudioFilePacketTableInfo>.size)
if AudioFileGetProperty(player.file!, kAudioFilePropertyPacketTableInfo, &size, &table) == noErr {
    player.primingLeft = Int64(table.mPrimingFrames)
    player.framesLeft = table.mNumberValidFrames
}

let userData = Unmanaged.passUnretained(player).toOpaque()
var queue: AudioQueueRef?
check(AudioQueueNewOutput(&player.format, outputCallback, userData, nil, nil, 0, &queue), "AudioQueueNewOutput")
var cookieSize: UInt32 = 0
if AudioFileGetPropertyInfo(player.file!, kAudioFilePropertyMagicCookieData, &cookieSize, nil) == noErr, cookieSize > 0 {
    var cookie = [UInt8](repeating: 0, count: Int(cookieSize))
    check(AudioFileGetProperty(player.file!, kAudioFilePropertyMagicCookieData, &cookieSize, &cookie), "MagicCookieData")
    check(AudioQueueSetProperty(queue!, kAudioQueueProperty_MagicCookie, cookie, cookieSize), "SetProperty(MagicCookie)")
}

var maxFrames: UInt32 = 0
var processingFormat = AudioStreamBasicDescription()
var tap: AudioQueueProcessingTapRef?
check(AudioQueueProcessingTapNew(queue!, tapCallback, userData, .preEffects, &maxFrames, &processingFormat, &tap), "AudioQueueProcessingTapNew")
guard processingFormat.mFormatFlags & kAudioFormatFlagIsFloat != 0, processingFormat.mBitsPerChannel == 32 else {
    fputs("attap: the tap's format is not float32\n", stderr)
    exit(1)
}
check(AudioQueueAddPropertyListener(queue!, kAudioQueueProperty_IsRunning, runningListener, userData), "AddPropertyListener")
for _ in 0..<3 {
    var buffer: AudioQueueBufferRef?
    check(AudioQueueAllocateBuffer(queue!, bufferBytes, &buffer), "AudioQueueAllocateBuffer")
    outputCallback(userData, queue!, buffer!)
}
check(AudioQueueStart(queue!, nil), "AudioQueueStart")
repeat {
    CFRunLoopRunInMode(CFRunLoopMode.defaultMode, 0.25, false)
} while !player.stopped
var stamp = AudioTimeStamp()
AudioQueueGetCurrentTime(queue!, nil, &stamp, nil)
check(AudioQueueProcessingTapDispose(tap!), "AudioQueueProcessingTapDispose")
check(AudioQueueDispose(queue!, true), "AudioQueueDispose")
check(AudioFileClose(player.file!), "AudioFileClose")
print("played \(Int(stamp.mSampleTime)) frames")
