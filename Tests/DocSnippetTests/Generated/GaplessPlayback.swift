// Generated from Docs/GaplessPlayback.md by DocSnippetTests (AQ_WRITE_SNIPPETS=1 swift test --filter DocSnippetTests): do not edit.
import BufferQueue

// Compiled, never called.
func docSnippets_GaplessPlayback() async throws {
    let queue = try AudioQueue(format: .linearPCM(sampleRate: 44100, channels: 2, bitsPerChannel: 16))
    let (first, middle, last) = (try queue.allocateBuffer(capacity: 4096), try queue.allocateBuffer(capacity: 4096), try queue.allocateBuffer(capacity: 4096))
    let (p1, p2, p3): ([AudioPacketDescription], [AudioPacketDescription], [AudioPacketDescription]) = ([], [], [])
    let (priming, remainder) = (2112, 576)
    _ = queue
    _ = first
    _ = middle
    _ = last
    _ = p1
    _ = p2
    _ = p3
    _ = priming
    _ = remainder
    // Docs/GaplessPlayback.md, snippet 1
    try queue.enqueue(first, packetDescriptions: p1, trimFramesAtStart: priming)
    try queue.enqueue(middle, packetDescriptions: p2)
    try queue.enqueue(last, packetDescriptions: p3, trimFramesAtEnd: remainder)
}
