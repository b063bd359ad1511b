// A recorder in the shape of the Core Audio books' chapter-4 recorder: the default input
// device's rate from the HAL, the format completed by Audio Format Services, an input queue that
// encodes, the queue's converter asked for the real format, the largest packet and the magic
// cookie, packets written to a CAF file from the input callback. Written against Apple's C API
// only; it builds unchanged on a Mac.
import AudioToolbox
import Foundation

let kBufferCount = 3
let kBufferSeconds = 0.25

final class Recorder {
    var file: AudioFileID?
    var nextPacket: Int64 = 0
    var frames: Int64 = 0
    var framesPerPacket: UInt32 = 0
    var bytesPerPacket: UInt32 = 0
    private let lock = NSLock()
    private var runningFlag = false
    var running: Bool {
        get { lock.lock(); defer { lock.unlock() }; return runningFlag }
        set { lock.lock(); runningFlag = newValue; lock.unlock() }
    }
}

func check(_ status: OSStatus, _ what: String) {
    if status == noErr { return }
    fputs("atrecord: \(what) failed: \(status)\n", stderr)
    exit(1)
}

func defaultInputSampleRate() -> Float64 {
    var device = AudioDeviceID(0)
    var address = AudioObjectPropertyAddress(mSelector: kAudioHardwarePropertyDefaultInputDevice,
                                             mScope: kAudioObjectPropertyScopeGlobal, mElement: kAudioObjectPropertyElementMain)
    var size = UInt32(MemoryLayout<AudioDeviceID>.size)
    check(AudioObjectGetPropertyData(AudioObjectID(kAudioObjectSystemObject), &address, 0, nil, &size, &device), "default input device")
    var rate: Float64 = 0
    address.mSelector = kAudioDevicePropertyNominalSampleRate
    size = UInt32(MemoryLayout<Float64>.size)
    check(AudioObjectGetPropertyData(device, &address, 0, nil, &size, &rate), "nominal sample rate")
    return rate
}

/// Copies the encoder's cookie from the queue to the file (before recording, and again at the end).
func copyCookie(_ queue: AudioQueueRef, _ file: AudioFileID) {
    var size: UInt32 = 0
    guard AudioQueueGetPropertySize(queue, kAudioConverterCompressionMagicCookie, &size) == noErr, size > 0 else { return }
    var cookie = [UInt8](repeating: 0, count: Int(size))
    check(AudioQueueGetProperty(queue, kAudioConverterCompressionMagicCookie, &cookie, &size), "AudioQueueGetProperty(cookie)")
    check(AudioFileSetProperty(file, kAudioFilePropertyMagicCookieData, size, cookie), "AudioFileSetProperty(cookie)")
}

let inputCallback: AudioQueueInputCallback = { userData, queue, buffer, startTime, packetCount, descriptions in
    let recorder = Unmanaged<Recorder>.fromOpaque(userData!).takeUnretainedValue()
    var packets = packetCount
    if packets == 0 && recorder.bytesPerPacket > 0 { packets = buffer.pointee.mAudioDataByteSize / recorder.bytesPerPacket }
    if packets > 0 {
        check(AudioFileWritePackets(recorder.file!, false, buffer.pointee.mAudioDataByteSize, descriptions, recorder.nextPacket,
                                    &packets, buffer.pointee.mAudioData), "AudioFileWritePackets")
        recorder.nextPacket += Int64(packets)
        for index in 0..<Int(packets) {
            let own = descriptions.map { Int64($0[index].mVariableFramesInPacket) } ?? 0
            recorder.frames += own > 0 ? own : Int64(recorder.framesPerPacket)
        }
    }
    if recorder.running { check(AudioQueueEnqueueBuffer(queue, buffer, 0, nil), "AudioQueueEnqueueBuffer") }
}

let arguments = CommandLine.arguments
guard arguments.count == 4, let seconds = Double(arguments[3]) else {
    fputs("usage: atrecord OUT.caf lpcm|alac|aac SECONDS\n", stderr)
    exit(2)
}
var format = AudioStreamBasicDescription()
format.mSampleRate = defaultInputSampleRate()
format.mChannelsPerFrame = 2
switch arguments[2] {
case "lpcm":
    format.mFormatID = kAudioFormatLinearPCM
    format.mFormatFlags = kAudioFormatFlagIsSignedInteger | kAudioFormatFlagIsPacked
    format.mBitsPerChannel = 16
case "alac":
    format.mFormatID = kAudioFormatAppleLossless
    format.mFormatFlags = kAppleLosslessFormatFlag_16BitSourceData
case "aac":
    format.mFormatID = kAudioFormatMPEG4AAC
default:
    fputs("atrecord: unknown format \(arguments[2])\n", stderr)
    exit(2)
}
var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
check(AudioFormatGetProperty(kAudioFormatProperty_FormatInfo, 0, nil, &size, &format), "AudioFormatGetProperty(FormatInfo)")

let recorder = Recorder()
let userData = Unmanaged.passUnretained(recorder).toOpaque()
var queue: AudioQueueRef?
check(AudioQueueNewInput(&format, inputCallback, userData, nil, nil, 0, &queue), "AudioQueueNewInput")

// The format as the queue's converter really makes it.
size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
check(AudioQueueGetProperty(queue!, kAudioConverterCurrentOutputStreamDescription, &format, &size), "AudioQueueGetProperty(format)")
recorder.framesPerPacket = format.mFramesPerPacket
recorder.bytesPerPacket = format.mBytesPerPacket

let url = URL(fileURLWithPath: arguments[1])
check(AudioFileCreateWithURL(url as CFURL, kAudioFileCAFType, &format, .eraseFile, &recorder.file), "AudioFileCreateWithURL")
copyCookie(queue!, recorder.file!)

// Buffer size for a quarter second, from the largest packet the converter makes.
var maxPacketSize: UInt32 = 0
size = UInt32(MemoryLayout<UInt32>.size)
check(AudioQueueGetProperty(queue!, kAudioConverterPropertyMaximumOutputPacketSize, &maxPacketSize, &size), "MaximumOutputPacketSize")
let framesPerPacket = max(format.mFramesPerPacket, 1)
let packetsPerBuffer = UInt32((format.mSampleRate * kBufferSeconds).rounded(.up)) / framesPerPacket + 1
let bufferBytes = packetsPerBuffer * maxPacketSize
for _ in 0..<kBufferCount {
    var buffer: AudioQueueBufferRef?
    check(AudioQueueAllocateBuffer(queue!, bufferBytes, &buffer), "AudioQueueAllocateBuffer")
    check(AudioQueueEnqueueBuffer(queue!, buffer!, 0, nil), "AudioQueueEnqueueBuffer")
}

recorder.running = true
check(AudioQueueStart(queue!, nil), "AudioQueueStart")
print("recording")
fflush(stdout)
CFRunLoopRunInMode(CFRunLoopMode.defaultMode, seconds, false)
recorder.running = false
check(AudioQueueStop(queue!, true), "AudioQueueStop")
copyCookie(queue!, recorder.file!)
check(AudioQueueDispose(queue!, true), "AudioQueueDispose")
check(AudioFileClose(recorder.file!), "AudioFileClose")
print("recorded \(recorder.frames) frames in \(recorder.nextPacket) packets")
