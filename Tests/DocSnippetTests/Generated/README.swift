// Generated from README.md by DocSnippetTests (AQ_WRITE_SNIPPETS=1 swift test --filter DocSnippetTests): do not edit.
import BufferQueue
import Foundation

// Compiled, never called.
func docSnippets_README() async throws {
    // README.md, snippet 1

    // One second of a 440 Hz tone as 16-bit mono PCM.
    let format = AudioStreamDescription.linearPCM(sampleRate: 44100, channels: 1, bitsPerChannel: 16)
    let tone = (0..<44100).map { Int16(8000 * sin(2 * Double.pi * 440 * Double($0) / 44100)) }
    let queue = try AudioQueue(format: format)          // plays through a real-time null sink
    let events = queue.events()
    let buffer = try queue.allocateBuffer(capacity: tone.count * 2)
    try tone.withUnsafeBytes { try buffer.setData($0) }
    try queue.enqueue(buffer, trimFramesAtStart: 100, trimFramesAtEnd: 100)  // sample-exact trims
    try queue.start()
    try queue.stop(immediately: false)                  // play everything queued, then stop
    for await event in events {
        print(event)                                    // bufferReturned, runningChanged(true/false)
        if case .runningChanged(false) = event { break }
    }
    print("played \(queue.currentTime().sampleTime) frames")   // 43900
    _ = format
    _ = tone
    _ = queue
    _ = events
    _ = buffer
}
