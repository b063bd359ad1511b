// A command-line file player in the shape of the Core Audio books' chapter-5 player: AudioFile
// reads packets, an output queue plays them, the magic cookie goes from file to queue, and the
// main thread waits in its run loop. Gapless: the file's packet table trims the first and last
// buffers. Written against Apple's C API only; it builds unchanged on a Mac.
import AudioToolbox
import Foundation

let kPlaybackBufferCount = 3
let kBufferSeconds = 0.5

final class PlayerState {
    var file: AudioFileID?
    var format = AudioStreamBasicDescription()
    var nextPacket: Int64 = 0
    var packetsPerBuffer: UInt32 = 0
    var descriptions: UnsafeMutablePointer<AudioStreamPacketDescription>?
    var primingLeft: Int64 = 0
    var framesLeft: Int64 = 0
    var finished = false
    // Set on the queue's thread, read on the main thread.
    private let lock = NSLock()
    private var stoppedFlag = false
    var stopped: Bool {
        get { lock.lock(); defer { lock.unlock() }; return stoppedFlag }
        set { lock.lock(); stoppedFlag = newValue; lock.unlock() }
    }
}

func check(_ status: OSStatus, _ what: String) {
    if status == noErr { return }
    var code = UInt32(bitPattern: status).bigEndian
    let text = withUnsafeBytes(of: &code) { bytes -> String in
        bytes.allSatisfy { isprint(Int32($0)) != 0 } ? "'" + String(decoding: bytes, as: UTF8.self) + "'" : String(status)
    }
    fputs("atplayfile: \(what) failed: \(text)\n", stderr)
    exit(1)
}

/// Buffer size and packets per buffer for about `seconds` of audio.
func bufferSize(_ format: AudioStreamBasicDescription, maxPacketSize: UInt32, seconds: Double) -> (bytes: UInt32, packets: UInt32) {
    let maxBufferSize: UInt32 = 0x50000
    let minBufferSize: UInt32 = 0x4000
    var bytes: UInt32
    if format.mFramesPerPacket > 0 {
        let packetsForTime = format.mSampleRate / Double(format.mFramesPerPacket) * seconds
        bytes = UInt32(packetsForTime) * maxPacketSize
    } else {
        bytes = max(maxBufferSize, maxPacketSize)
    }
    if bytes > maxBufferSize && bytes > maxPacketSize { bytes = maxBufferSize }
    if bytes < minBufferSize { bytes = minBufferSize }
    return (bytes, bytes / maxPacketSize)
}

/// The output callback: reads the next packets into the buffer and enqueues it, trimming what the
/// packet table says is priming or remainder; stops the queue (asynchronously) at the end.
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
    // Frames in these packets, and how many of them are priming or beyond the valid ones.
    // (A described packet with frames of its own, such as a short last one, says how many.)
    var frames: Int64 = 0
    for index in 0..<Int(packets) {
        let own = player.descriptions.map { Int64($0[index].mVariableFramesInPacket) } ?? 0
        frames += own > 0 ? own : Int64(player.format.mFramesPerPacket)
    }
    let trimStart = min(player.primingLeft, frames)
    player.primingLeft -= trimStart
    let kept = min(frames - trimStart, player.framesLeft)
    player.framesLeft -= kept
    let trimEnd = frames - trimStart - kept
    let descriptionCount = player.format.mBytesPerPacket == 0 ? packets : 0
    check(AudioQueueEnqueueBufferWithParameters(queue, buffer, descriptionCount, player.descriptions,
                                                UInt32(trimStart), UInt32(trimEnd), 0, nil, nil, nil), "AudioQueueEnqueueBuffer")
    player.nextPacket += Int64(packets)
}

/// Follows kAudioQueueProperty_IsRunning: the player is done when the queue stops running.
let runningListener: AudioQueuePropertyListenerProc = { userData, queue, property in
    let player = Unmanaged<PlayerState>.fromOpaque(userData!).takeUnretainedValue()
    var running: UInt32 = 0
    var size = UInt32(MemoryLayout<UInt32>.size)
    check(AudioQueueGetProperty(queue, kAudioQueueProperty_IsRunning, &running, &size), "AudioQueueGetProperty(IsRunning)")
    if running == 0 && player.finished { player.stopped = true }
}

guard CommandLine.arguments.count == 2 else {
    fputs("usage: atplayfile FILE\n", stderr)
    exit(2)
}
let player = PlayerState()
let url = URL(fileURLWithPath: CommandLine.arguments[1])
check(AudioFileOpenURL(url as CFURL, .readPermission, 0, &player.file), "AudioFileOpenURL")

var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
check(AudioFileGetProperty(player.file!, kAudioFilePropertyDataFormat, &size, &player.format), "AudioFileGetProperty(DataFormat)")

var queue: AudioQueueRef?
let userData = Unmanaged.passUnretained(player).toOpaque()
check(AudioQueueNewOutput(&player.format, outputCallback, userData, nil, nil, 0, &queue), "AudioQueueNewOutput")

var maxPacketSize: UInt32 = 0
size = UInt32(MemoryLayout<UInt32>.size)
check(AudioFileGetProperty(player.file!, kAudioFilePropertyPacketSizeUpperBound, &size, &maxPacketSize), "AudioFileGetProperty(PacketSizeUpperBound)")
let (bufferBytes, packetsPerBuffer) = bufferSize(player.format, maxPacketSize: maxPacketSize, seconds: kBufferSeconds)
player.packetsPerBuffer = packetsPerBuffer
if player.format.mBytesPerPacket == 0 || player.format.mFramesPerPacket == 0 {
    player.descriptions = .allocate(capacity: Int(packetsPerBuffer))
}

// The magic cookie, when the file has one.
var cookieSize: UInt32 = 0
if AudioFileGetPropertyInfo(player.file!, kAudioFilePropertyMagicCookieData, &cookieSize, nil) == noErr, cookieSize > 0 {
    var cookie = [UInt8](repeating: 0, count: Int(cookieSize))
    check(AudioFileGetProperty(player.file!, kAudioFilePropertyMagicCookieData, &cookieSize, &cookie), "AudioFileGetProperty(MagicCookie)")
    check(AudioQueueSetProperty(queue!, kAudioQueueProperty_MagicCookie, cookie, cookieSize), "AudioQueueSetProperty(MagicCookie)")
}

// Gapless: the valid frames and the priming before them.
var table = AudioFilePacketTableInfo()
size = UInt32(MemoryLayout<AudioFilePacketTableInfo>.size)
if AudioFileGetProperty(player.file!, kAudioFilePropertyPacketTableInfo, &size, &table) == noErr {
    player.primingLeft = Int64(table.mPrimingFrames)
    player.framesLeft = table.mNumberValidFrames
} else {
    player.framesLeft = Int64.max
}

check(AudioQueueAddPropertyListener(queue!, kAudioQueueProperty_IsRunning, runningListener, userData), "AudioQueueAddPropertyListener")

var buffers: [AudioQueueBufferRef?] = Array(repeating: nil, count: kPlaybackBufferCount)
for index in 0..<kPlaybackBufferCount {
    check(AudioQueueAllocateBuffer(queue!, bufferBytes, &buffers[index]), "AudioQueueAllocateBuffer")
    outputCallback(userData, queue!, buffers[index]!)
    if player.finished { break }
}

check(AudioQueueStart(queue!, nil), "AudioQueueStart")
// Callbacks run on the queue's own thread; the main thread only waits.
repeat {
    CFRunLoopRunInMode(CFRunLoopMode.defaultMode, 0.25, false)
} while !player.stopped

var frames: Float64 = 0
var stamp = AudioTimeStamp()
if AudioQueueGetCurrentTime(queue!, nil, &stamp, nil) == noErr { frames = stamp.mSampleTime }
check(AudioQueueDispose(queue!, true), "AudioQueueDispose")
check(AudioFileClose(player.file!), "AudioFileClose")
player.descriptions?.deallocate()
print("played \(Int(frames)) frames")
