// Generated from Docs/AudioToolbox.md by DocSnippetTests (AQ_WRITE_SNIPPETS=1 swift test --filter DocSnippetTests): do not edit.
import AudioToolbox
import Foundation

// Compiled, never called.
func docSnippets_AudioToolbox() async throws {
    // Docs/AudioToolbox.md, snippet 1

    var format = AudioStreamBasicDescription(mSampleRate: 44100, mFormatID: kAudioFormatLinearPCM,
                                             mFormatFlags: kAudioFormatFlagsNativeFloatPacked, mBytesPerPacket: 4,
                                             mFramesPerPacket: 1, mBytesPerFrame: 4, mChannelsPerFrame: 1,
                                             mBitsPerChannel: 32, mReserved: 0)
    let callback: AudioQueueOutputCallback = { _, queue, buffer in
        let samples = buffer.pointee.mAudioData.assumingMemoryBound(to: Float.self)
        for index in 0..<4410 { samples[index] = 0.2 * sinf(Float(index) * 2 * .pi * 441 / 44100) }
        buffer.pointee.mAudioDataByteSize = 4410 * 4
        AudioQueueEnqueueBuffer(queue, buffer, 0, nil)
    }
    var queue: AudioQueueRef?
    AudioQueueNewOutput(&format, callback, nil, nil, nil, 0, &queue)
    if let queue {
        for _ in 0..<3 {
            var buffer: AudioQueueBufferRef?
            AudioQueueAllocateBuffer(queue, 4410 * 4, &buffer)
            if let buffer { callback(nil, queue, buffer) }
        }
        AudioQueueStart(queue, nil)
        CFRunLoopRunInMode(CFRunLoopMode.defaultMode, 2, false)
        AudioQueueDispose(queue, true)
    }
    _ = format
    _ = callback
    _ = queue
}
