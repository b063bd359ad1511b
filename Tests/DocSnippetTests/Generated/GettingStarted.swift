// Generated from Docs/GettingStarted.md by DocSnippetTests (AQ_WRITE_SNIPPETS=1 swift test --filter DocSnippetTests): do not edit.
import BufferQueue

// Compiled, never called.
func docSnippets_GettingStarted() async throws {
    let bytes: [UInt8] = Array(repeating: 0, count: 4096)
    let (other, third) = (try AudioQueue(format: .float32(sampleRate: 44100, channels: 1)).allocateBuffer(capacity: 64),
                          try AudioQueue(format: .float32(sampleRate: 44100, channels: 1)).allocateBuffer(capacity: 64))
    _ = bytes
    _ = other
    _ = third
    // Docs/GettingStarted.md, snippet 1
    let format = AudioStreamDescription.linearPCM(sampleRate: 44100, channels: 2, bitsPerChannel: 16)
    _ = format
    // Docs/GettingStarted.md, snippet 2
    let queue = try AudioQueue(format: format, configuration: .init(sink: NullSink())) { queue, buffer in
        // The queue no longer needs `buffer`: refill it and enqueue it again.
    }
    _ = queue
    // Docs/GettingStarted.md, snippet 3
    let buffer = try queue.allocateBuffer(capacity: 32768)
    try buffer.setData(bytes)                           // or withUnsafeMutableBytes + setByteSize
    try queue.enqueue(buffer)                           // right after the previous buffer
    try queue.enqueue(other, trimFramesAtStart: 1105)   // drop encoder priming
    try queue.enqueue(third, startTime: 441000)         // at 10 s on the queue's timeline
    _ = buffer
}
