// An offline renderer: a file's packets go into an output queue that renders into memory
// (AudioQueueSetOfflineRenderFormat / AudioQueueOfflineRender) instead of a device, and the
// rendered float32 frames are written to a WAVE file with AudioFile. Gapless through the
// packet table. Written against Apple's C API only.
import AudioToolbox
import Foundation

final class Source {
    var file: AudioFileID?
    var format = AudioStreamBasicDescription()
    var nextPacket: Int64 = 0
    var packetsPerBuffer: UInt32 = 0
    var descriptions: UnsafeMutablePointer<AudioStreamPacketDescription>?
    var primingLeft: Int64 = 0
    var framesLeft: Int64 = .max
    var done = false
}

func check(_ status: OSStatus, _ what: String) {
    if status == noErr { return }
    fputs("atoffline: \(what) failed: \(status)\n", stderr)
    exit(1)
}

let outputCallback: AudioQueueOutputCallback = { userData, queue, buffer in
    let source = Unmanaged<Source>.fromOpaque(userData!).takeUnretainedValue()
    if source.done { return }
    var bytes = buffer.pointee.mAudioDataBytesCapacity
    var packets = source.packetsPerBuffer
    check(AudioFileReadPacketData(source.file!, false, &bytes, source.descriptions, source.nextPacket, &packets, buffer.pointee.mAudioData),
          "AudioFileReadPacketData")
    if packets == 0 {
        // Everything is enqueued: let the decoder finish what it holds.
        check(AudioQueueFlush(queue), "AudioQueueFlush")
        source.done = true
        return
    }
    var frames: Int64 = 0
    for index in 0..<Int(packets) {
        let own = source.descriptions.map { Int64($0[index].mVariableFramesInPacket) } ?? 0
        frames += own > 0 ? own : Int64(source.format.mFramesPerPacket)
    }
    let trimStart = min(source.primingLeft, frames)
    source.primingLeft -= trimStart
    let kept = min(frames - trimStart, source.framesLeft)
    source.framesLeft -= kept
    buffer.pointee.mAudioDataByteSize = bytes
    check(AudioQueueEnqueueBufferWithParameters(queue, buffer, source.format.mBytesPerPacket == 0 ? packets : 0, source.descriptions,
                                                UInt32(trimStart), UInt32(frames - trimStart - kept), 0, nil, nil, nil), "AudioQueueEnqueueBuffer")
    source.nextPacket += Int64(packets)
}

// --no-cookie: give the queue no magic cookie, as players that set one only when their parser
// offers it do when it does not (an AAC queue then decodes from its stream description).
let arguments = CommandLine.arguments.filter { $0 != "--no-cookie" }
let withCookie = arguments.count == CommandLine.arguments.count
guard arguments.count == 3 else {
    fputs("usage: atoffline IN OUT.wav [--no-cookie]\n", stderr)
    exit(2)
}
let source = Source()
check(AudioFileOpenURL(URL(fileURLWithPath: arguments[1]) as CFURL, .readPermission, 0, &source.file), "AudioFileOpenURL")
var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
check(AudioFileGetProperty(source.file!, kAudioFilePropertyDataFormat, &size, &source.format), "DataFormat")
var maxPacket: UInt32 = 0
size = 4
check(AudioFileGetProperty(source.file!, kAudioFilePropertyPacketSizeUpperBound, &size, &maxPacket), "PacketSizeUpperBound")
let bufferBytes = max(32768, maxPacket)
source.packetsPerBuffer = bufferBytes / maxPacket
source.descriptions = .allocate(capacity: Int(source.packetsPerBuffer))
var table = AudioFilePacketTableInfo()
size = UInt32(MemoryLayout<AudioFilePacketTableInfo>.size)
if AudioFileGetProperty(source.file!, kAudioFilePropertyPacketTableInfo, &size, &table) == noErr {
    source.primingLeft = Int64(table.mPrimingFrames)
    source.framesLeft = table.mNumberValidFrames
}

let userData = Unmanaged.passUnretained(source).toOpaque()
var queue: AudioQueueRef?
check(AudioQueueNewOutput(&source.format, outputCallback, userData, nil, nil, 0, &queue), "AudioQueueNewOutput")
var cookieSize: UInt32 = 0
if withCookie, AudioFileGetPropertyInfo(source.file!, kAudioFilePropertyMagicCookieData, &cookieSize, nil) == noErr, cookieSize > 0 {
    var cookie = [UInt8](repeating: 0, count: Int(cookieSize))
    check(AudioFileGetProperty(source.file!, kAudioFilePropertyMagicCookieData, &cookieSize, &cookie), "MagicCookieData")
    check(AudioQueueSetProperty(queue!, kAudioQueueProperty_MagicCookie, cookie, cookieSize), "SetProperty(MagicCookie)")
}

// Render as float32 at the file's rate and channels.
let channels = source.format.mChannelsPerFrame
var renderFormat = AudioStreamBasicDescription(mSampleRate: source.format.mSampleRate, mFormatID: kAudioFormatLinearPCM,
                                               mFormatFlags: kAudioFormatFlagsNativeFloatPacked, mBytesPerPacket: 4 * channels,
                                               mFramesPerPacket: 1, mBytesPerFrame: 4 * channels, mChannelsPerFrame: channels,
                                               mBitsPerChannel: 32, mReserved: 0)
var layout = AudioChannelLayout()
layout.mChannelLayoutTag = channels == 1 ? kAudioChannelLayoutTag_Mono : kAudioChannelLayoutTag_DiscreteInOrder | channels
check(AudioQueueSetOfflineRenderFormat(queue!, &renderFormat, &layout), "AudioQueueSetOfflineRenderFormat")

for _ in 0..<3 {
    var buffer: AudioQueueBufferRef?
    check(AudioQueueAllocateBuffer(queue!, bufferBytes, &buffer), "AudioQueueAllocateBuffer")
    outputCallback(userData, queue!, buffer!)
}
let renderFrames: UInt32 = 4096
var capture: AudioQueueBufferRef?
check(AudioQueueAllocateBuffer(queue!, renderFrames * renderFormat.mBytesPerFrame, &capture), "AudioQueueAllocateBuffer(capture)")
check(AudioQueueStart(queue!, nil), "AudioQueueStart")

var output: AudioFileID?
check(AudioFileCreateWithURL(URL(fileURLWithPath: arguments[2]) as CFURL, kAudioFileWAVEType, &renderFormat, .eraseFile, &output),
      "AudioFileCreateWithURL")
var stamp = AudioTimeStamp()
stamp.mFlags = .sampleTimeValid
var written: Int64 = 0
while true {
    check(AudioQueueOfflineRender(queue!, &stamp, capture!, renderFrames), "AudioQueueOfflineRender")
    let frames = capture!.pointee.mAudioDataByteSize / renderFormat.mBytesPerFrame
    if frames == 0 && source.done { break }
    var packets = frames
    if frames > 0 {
        check(AudioFileWritePackets(output!, false, capture!.pointee.mAudioDataByteSize, nil, written, &packets, capture!.pointee.mAudioData),
              "AudioFileWritePackets")
    }
    written += Int64(frames)
    stamp.mSampleTime += Float64(frames)
}
check(AudioFileClose(output!), "AudioFileClose")
check(AudioQueueDispose(queue!, true), "AudioQueueDispose")
check(AudioFileClose(source.file!), "AudioFileClose")
print("rendered \(written) frames")
