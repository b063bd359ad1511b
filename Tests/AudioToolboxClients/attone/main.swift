// A tone generator: linear PCM computed in the output callback, callbacks on the main thread's
// run loop, the queue stopped from inside the callback once the tone is long enough, and the run
// loop stopped by the IsRunning listener. Written against Apple's C API only.
import AudioToolbox
import Foundation

let sampleRate = 44100.0
let totalFrames = 33075
let framesPerBuffer = 4096

final class ToneState {
    var nextFrame = 0
    var stopping = false
}

/// The tone: 440 Hz on the left, 660 Hz on the right.
func sample(_ frame: Int, channel: Int) -> Float {
    let frequency = channel == 0 ? 440.0 : 660.0
    let amplitude = channel == 0 ? 0.4 : 0.3
    return Float(amplitude * sin(2 * Double.pi * frequency * Double(frame) / sampleRate))
}

let outputCallback: AudioQueueOutputCallback = { userData, queue, buffer in
    let tone = Unmanaged<ToneState>.fromOpaque(userData!).takeUnretainedValue()
    if tone.stopping { return }
    let frames = min(framesPerBuffer, totalFrames - tone.nextFrame)
    let samples = buffer.pointee.mAudioData.assumingMemoryBound(to: Float.self)
    for index in 0..<frames {
        samples[2 * index] = sample(tone.nextFrame + index, channel: 0)
        samples[2 * index + 1] = sample(tone.nextFrame + index, channel: 1)
    }
    buffer.pointee.mAudioDataByteSize = UInt32(frames * 8)
    tone.nextFrame += frames
    AudioQueueEnqueueBuffer(queue, buffer, 0, nil)
    if tone.nextFrame == totalFrames {
        tone.stopping = true
        AudioQueueStop(queue, false)
    }
}

let runningListener: AudioQueuePropertyListenerProc = { userData, queue, _ in
    var running: UInt32 = 0
    var size = UInt32(MemoryLayout<UInt32>.size)
    AudioQueueGetProperty(queue, kAudioQueueProperty_IsRunning, &running, &size)
    if running == 0 { CFRunLoopStop(CFRunLoopGetCurrent()) }
}

var format = AudioStreamBasicDescription(mSampleRate: sampleRate, mFormatID: kAudioFormatLinearPCM,
                                         mFormatFlags: kAudioFormatFlagsNativeFloatPacked, mBytesPerPacket: 8, mFramesPerPacket: 1,
                                         mBytesPerFrame: 8, mChannelsPerFrame: 2, mBitsPerChannel: 32, mReserved: 0)
let tone = ToneState()
let userData = Unmanaged.passUnretained(tone).toOpaque()
var queue: AudioQueueRef?
var status = AudioQueueNewOutput(&format, outputCallback, userData, CFRunLoopGetCurrent(), CFRunLoopMode.commonModes.rawValue, 0, &queue)
guard status == noErr, let queue else {
    fputs("attone: AudioQueueNewOutput failed: \(status)\n", stderr)
    exit(1)
}
AudioQueueAddPropertyListener(queue, kAudioQueueProperty_IsRunning, runningListener, userData)
for _ in 0..<3 {
    var buffer: AudioQueueBufferRef?
    AudioQueueAllocateBuffer(queue, UInt32(framesPerBuffer * 8), &buffer)
    if let buffer { outputCallback(userData, queue, buffer) }
}
status = AudioQueueStart(queue, nil)
guard status == noErr else {
    fputs("attone: AudioQueueStart failed: \(status)\n", stderr)
    exit(1)
}
CFRunLoopRun()
var stamp = AudioTimeStamp()
AudioQueueGetCurrentTime(queue, nil, &stamp, nil)
AudioQueueDispose(queue, true)
print("played \(Int(stamp.mSampleTime)) frames")
