// A push-parser streaming player in the shape network players take: bytes arrive in chunks of
// any size, AudioFileStream turns them into packets, packets fill queue buffers, and the queue's
// callbacks run on the run loop of the worker thread that parses (so the worker runs its loop
// while it waits for a free buffer, and a property listener stops that loop at the end). Primes
// before it starts, sets the volume, and trims the priming and padding the stream announces.
// Written against Apple's C API only; it builds unchanged on a Mac.
import AudioToolbox
import Foundation

let kBufferCount = 4
let kBufferBytes: UInt32 = 16 * 1024
let kMaxPacketsPerBuffer: UInt32 = 512

final class StreamPlayer {
    var stream: AudioFileStreamID?
    var queue: AudioQueueRef?
    var format = AudioStreamBasicDescription()
    var buffers: [AudioQueueBufferRef] = []
    var inUse = [Bool](repeating: false, count: kBufferCount)
    var current = 0
    var bytesFilled: UInt32 = 0
    var packetsFilled: UInt32 = 0
    var framesFilled: Int64 = 0
    var started = false
    var ended = false
    var primingLeft: Int64 = 0
    var framesLeft: Int64 = .max
    var framesPlayed: Int64 = 0
    var failure: String?
    let loop: CFRunLoop

    init(loop: CFRunLoop) { self.loop = loop }
}

func fail(_ status: OSStatus, _ what: String) -> Bool {
    if status == noErr { return false }
    fputs("atstream: \(what) failed: \(status)\n", stderr)
    exit(1)
}

/// Output callback (on the worker's run loop): the buffer is free again.
let outputCallback: AudioQueueOutputCallback = { userData, queue, buffer in
    let player = Unmanaged<StreamPlayer>.fromOpaque(userData!).takeUnretainedValue()
    if let index = player.buffers.firstIndex(of: buffer) { player.inUse[index] = false }
}

/// IsRunning listener (on the worker's run loop): once the queue has played out, stop the loop.
let runningListener: AudioQueuePropertyListenerProc = { userData, queue, _ in
    let player = Unmanaged<StreamPlayer>.fromOpaque(userData!).takeUnretainedValue()
    var running: UInt32 = 0
    var size = UInt32(MemoryLayout<UInt32>.size)
    _ = fail(AudioQueueGetProperty(queue, kAudioQueueProperty_IsRunning, &running, &size), "AudioQueueGetProperty(IsRunning)")
    if running == 0 && player.ended {
        var stamp = AudioTimeStamp()
        if AudioQueueGetCurrentTime(queue, nil, &stamp, nil) == noErr { player.framesPlayed = Int64(stamp.mSampleTime) }
        CFRunLoopStop(player.loop)
    }
}

/// Makes the queue once the stream is ready to produce packets.
func makeQueue(_ player: StreamPlayer) {
    var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
    _ = fail(AudioFileStreamGetProperty(player.stream!, kAudioFileStreamProperty_DataFormat, &size, &player.format), "DataFormat")
    let userData = Unmanaged.passUnretained(player).toOpaque()
    _ = fail(AudioQueueNewOutput(&player.format, outputCallback, userData, CFRunLoopGetCurrent(), CFRunLoopMode.commonModes.rawValue, 0,
                                 &player.queue), "AudioQueueNewOutput")
    for _ in 0..<kBufferCount {
        var buffer: AudioQueueBufferRef?
        _ = fail(AudioQueueAllocateBufferWithPacketDescriptions(player.queue!, kBufferBytes, kMaxPacketsPerBuffer, &buffer), "AllocateBuffer")
        player.buffers.append(buffer!)
    }
    var cookieSize: UInt32 = 0
    var writable: DarwinBoolean = false
    if AudioFileStreamGetPropertyInfo(player.stream!, kAudioFileStreamProperty_MagicCookieData, &cookieSize, &writable) == noErr {
        let cookie = UnsafeMutableRawPointer.allocate(byteCount: Int(cookieSize), alignment: 1)
        defer { cookie.deallocate() }
        _ = fail(AudioFileStreamGetProperty(player.stream!, kAudioFileStreamProperty_MagicCookieData, &cookieSize, cookie), "MagicCookieData")
        _ = fail(AudioQueueSetProperty(player.queue!, kAudioQueueProperty_MagicCookie, cookie, cookieSize), "SetProperty(MagicCookie)")
    }
    var table = AudioFilePacketTableInfo()
    size = UInt32(MemoryLayout<AudioFilePacketTableInfo>.size)
    if AudioFileStreamGetProperty(player.stream!, kAudioFileStreamProperty_PacketTableInfo, &size, &table) == noErr {
        player.primingLeft = Int64(table.mPrimingFrames)
        player.framesLeft = table.mNumberValidFrames
    }
    _ = fail(AudioQueueSetParameter(player.queue!, kAudioQueueParam_Volume, 1.0), "SetParameter(Volume)")
    _ = fail(AudioQueueAddPropertyListener(player.queue!, kAudioQueueProperty_IsRunning, runningListener, userData), "AddPropertyListener")
}

/// Enqueues the buffer being filled (trimmed to the valid frames) and moves to the next one,
/// running the run loop until that one is free: the output callbacks arrive there.
func enqueueCurrent(_ player: StreamPlayer) {
    guard player.packetsFilled > 0 else { return }
    let buffer = player.buffers[player.current]
    buffer.pointee.mAudioDataByteSize = player.bytesFilled
    buffer.pointee.mPacketDescriptionCount = player.format.mBytesPerPacket == 0 ? player.packetsFilled : 0
    let frames = player.framesFilled
    let trimStart = min(player.primingLeft, frames)
    player.primingLeft -= trimStart
    let kept = min(frames - trimStart, player.framesLeft)
    player.framesLeft -= kept
    _ = fail(AudioQueueEnqueueBufferWithParameters(player.queue!, buffer, 0, nil, UInt32(trimStart), UInt32(frames - trimStart - kept),
                                                   0, nil, nil, nil), "AudioQueueEnqueueBuffer")
    player.inUse[player.current] = true
    player.current = (player.current + 1) % kBufferCount
    player.bytesFilled = 0
    player.packetsFilled = 0
    player.framesFilled = 0
    if !player.started && player.current == 0 {
        var prepared: UInt32 = 0
        _ = fail(AudioQueuePrime(player.queue!, 0, &prepared), "AudioQueuePrime")
        _ = fail(AudioQueueStart(player.queue!, nil), "AudioQueueStart")
        player.started = true
    }
    while player.inUse[player.current] {
        CFRunLoopRunInMode(CFRunLoopMode.defaultMode, 1, true)
    }
}

let propertyListener: AudioFileStream_PropertyListenerProc = { clientData, stream, property, flags in
    let player = Unmanaged<StreamPlayer>.fromOpaque(clientData).takeUnretainedValue()
    if property == kAudioFileStreamProperty_ReadyToProducePackets && player.queue == nil { makeQueue(player) }
}

let packetsProc: AudioFileStream_PacketsProc = { clientData, byteCount, packetCount, data, descriptions in
    let player = Unmanaged<StreamPlayer>.fromOpaque(clientData).takeUnretainedValue()
    let constantSize = player.format.mBytesPerPacket
    for index in 0..<Int(packetCount) {
        let offset = descriptions.map { Int($0[index].mStartOffset) } ?? index * Int(constantSize)
        let size = descriptions.map { $0[index].mDataByteSize } ?? constantSize
        let own = descriptions.map { Int64($0[index].mVariableFramesInPacket) } ?? 0
        if player.bytesFilled + size > kBufferBytes || player.packetsFilled == kMaxPacketsPerBuffer { enqueueCurrent(player) }
        let buffer = player.buffers[player.current]
        memcpy(buffer.pointee.mAudioData + Int(player.bytesFilled), data + offset, Int(size))
        if constantSize == 0 {
            buffer.pointee.mPacketDescriptions![Int(player.packetsFilled)] =
                AudioStreamPacketDescription(mStartOffset: Int64(player.bytesFilled), mVariableFramesInPacket: UInt32(own), mDataByteSize: size)
        }
        player.bytesFilled += size
        player.packetsFilled += 1
        player.framesFilled += own > 0 ? own : Int64(player.format.mFramesPerPacket)
    }
}

guard CommandLine.arguments.count >= 2, let input = FileHandle(forReadingAtPath: CommandLine.arguments[1]) else {
    fputs("usage: atstream FILE [CHUNK-SEED]\n", stderr)
    exit(2)
}
var seed = CommandLine.arguments.count > 2 ? UInt64(CommandLine.arguments[2]) ?? 1 : 1
let done = DispatchSemaphore(value: 0)
var played: Int64 = 0

let worker = Thread {
    let player = StreamPlayer(loop: CFRunLoopGetCurrent())
    let clientData = Unmanaged.passUnretained(player).toOpaque()
    _ = fail(AudioFileStreamOpen(clientData, propertyListener, packetsProc, 0, &player.stream), "AudioFileStreamOpen")
    // Chunks of 1 to 4096 bytes, as a network delivers them.
    while true {
        seed = seed &* 6364136223846793005 &+ 1442695040888963407
        let data = input.readData(ofLength: Int(seed >> 33) % 4096 + 1)
        if data.isEmpty { break }
        _ = data.withUnsafeBytes { bytes in
            fail(AudioFileStreamParseBytes(player.stream!, UInt32(bytes.count), bytes.baseAddress, []), "AudioFileStreamParseBytes")
        }
    }
    _ = fail(AudioFileStreamParseBytes(player.stream!, 0, nil, []), "AudioFileStreamParseBytes(end)")
    enqueueCurrent(player)
    player.ended = true
    if let queue = player.queue {
        if !player.started {
            _ = fail(AudioQueueStart(queue, nil), "AudioQueueStart")
        }
        _ = fail(AudioQueueFlush(queue), "AudioQueueFlush")
        _ = fail(AudioQueueStop(queue, false), "AudioQueueStop")
        CFRunLoopRun()
        _ = fail(AudioQueueDispose(queue, true), "AudioQueueDispose")
    }
    _ = fail(AudioFileStreamClose(player.stream!), "AudioFileStreamClose")
    played = player.framesPlayed
    done.signal()
}
worker.start()
done.wait()
print("played \(played) frames")
