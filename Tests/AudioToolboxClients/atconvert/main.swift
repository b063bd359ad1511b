// A file converter in the shape of afconvert-style tools: ExtAudioFile reads any file as PCM in a
// client format of the program's choosing and writes it into another container and codec.
// `alac` and `wav16` use 16-bit non-interleaved client buffers (one per channel), `aac` and
// `caf32` interleaved float32. Written against Apple's C API only.
import AudioToolbox
import Foundation

func check(_ status: OSStatus, _ what: String) {
    if status == noErr { return }
    fputs("atconvert: \(what) failed: \(status)\n", stderr)
    exit(1)
}

let arguments = CommandLine.arguments
guard arguments.count == 4 else {
    fputs("usage: atconvert IN OUT alac|aac|wav16|caf32\n", stderr)
    exit(2)
}
var input: ExtAudioFileRef?
check(ExtAudioFileOpenURL(URL(fileURLWithPath: arguments[1]) as CFURL, &input), "ExtAudioFileOpenURL")
var fileFormat = AudioStreamBasicDescription()
var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
check(ExtAudioFileGetProperty(input!, kExtAudioFileProperty_FileDataFormat, &size, &fileFormat), "FileDataFormat")
var lengthFrames: Int64 = 0
size = UInt32(MemoryLayout<Int64>.size)
check(ExtAudioFileGetProperty(input!, kExtAudioFileProperty_FileLengthFrames, &size, &lengthFrames), "FileLengthFrames")

let channels = fileFormat.mChannelsPerFrame
let planar16 = arguments[3] == "alac" || arguments[3] == "wav16"
var client = AudioStreamBasicDescription()
client.mSampleRate = fileFormat.mSampleRate
client.mFormatID = kAudioFormatLinearPCM
client.mChannelsPerFrame = channels
client.mFramesPerPacket = 1
if planar16 {
    client.mFormatFlags = kAudioFormatFlagIsSignedInteger | kAudioFormatFlagIsPacked | kAudioFormatFlagIsNonInterleaved
    client.mBitsPerChannel = 16
    client.mBytesPerFrame = 2
} else {
    client.mFormatFlags = kAudioFormatFlagsNativeFloatPacked
    client.mBitsPerChannel = 32
    client.mBytesPerFrame = 4 * channels
}
client.mBytesPerPacket = client.mBytesPerFrame
check(ExtAudioFileSetProperty(input!, kExtAudioFileProperty_ClientDataFormat, UInt32(MemoryLayout<AudioStreamBasicDescription>.size), &client),
      "ClientDataFormat (in)")

var outFormat = AudioStreamBasicDescription()
outFormat.mSampleRate = fileFormat.mSampleRate
outFormat.mChannelsPerFrame = channels
var fileType = kAudioFileCAFType
switch arguments[3] {
case "alac":
    outFormat.mFormatID = kAudioFormatAppleLossless
    outFormat.mFormatFlags = kAppleLosslessFormatFlag_16BitSourceData
    fileType = kAudioFileM4AType
case "aac":
    outFormat.mFormatID = kAudioFormatMPEG4AAC
    fileType = kAudioFileM4AType
case "wav16":
    outFormat.mFormatID = kAudioFormatLinearPCM
    outFormat.mFormatFlags = kAudioFormatFlagIsSignedInteger | kAudioFormatFlagIsPacked
    outFormat.mBitsPerChannel = 16
    outFormat.mBytesPerFrame = 2 * channels
    outFormat.mBytesPerPacket = 2 * channels
    outFormat.mFramesPerPacket = 1
    fileType = kAudioFileWAVEType
default:
    outFormat = client
}
if outFormat.mFormatID != kAudioFormatLinearPCM {
    size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
    check(AudioFormatGetProperty(kAudioFormatProperty_FormatInfo, 0, nil, &size, &outFormat), "FormatInfo")
}
var output: ExtAudioFileRef?
check(ExtAudioFileCreateWithURL(URL(fileURLWithPath: arguments[2]) as CFURL, fileType, &outFormat, nil,
                                AudioFileFlags.eraseFile.rawValue, &output), "ExtAudioFileCreateWithURL")
check(ExtAudioFileSetProperty(output!, kExtAudioFileProperty_ClientDataFormat, UInt32(MemoryLayout<AudioStreamBasicDescription>.size), &client),
      "ClientDataFormat (out)")

let framesPerRead: UInt32 = 3000
let buffers = planar16 ? Int(channels) : 1
let list = AudioBufferList.allocate(maximumBuffers: buffers)
var storage: [UnsafeMutableRawPointer] = []
for index in 0..<buffers {
    let bytes = Int(framesPerRead * client.mBytesPerFrame)
    storage.append(.allocate(byteCount: bytes, alignment: 16))
    list[index] = AudioBuffer(mNumberChannels: planar16 ? 1 : channels, mDataByteSize: UInt32(bytes), mData: storage[index])
}
var total: Int64 = 0
while true {
    for index in 0..<buffers { list[index].mDataByteSize = framesPerRead * client.mBytesPerFrame }
    var frames = framesPerRead
    check(ExtAudioFileRead(input!, &frames, list.unsafeMutablePointer), "ExtAudioFileRead")
    if frames == 0 { break }
    check(ExtAudioFileWrite(output!, frames, list.unsafeMutablePointer), "ExtAudioFileWrite")
    total += Int64(frames)
}
var position: Int64 = 0
check(ExtAudioFileTell(input!, &position), "ExtAudioFileTell")
check(ExtAudioFileDispose(output!), "ExtAudioFileDispose(out)")
check(ExtAudioFileDispose(input!), "ExtAudioFileDispose(in)")
for pointer in storage { pointer.deallocate() }
free(list.unsafeMutablePointer)
print("converted \(total) frames of \(lengthFrames), ended at \(position)")
