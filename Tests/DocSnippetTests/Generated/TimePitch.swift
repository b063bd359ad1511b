// Generated from Docs/TimePitch.md by DocSnippetTests (AQ_WRITE_SNIPPETS=1 swift test --filter DocSnippetTests): do not edit.
import BufferQueue
import RubberBandTimePitch

// Compiled, never called.
func docSnippets_TimePitch() async throws {
    let queue = try AudioQueue(format: .linearPCM(sampleRate: 44100, channels: 2, bitsPerChannel: 16))
    let chapter = try queue.allocateBuffer(capacity: 4096)
    _ = queue
    _ = chapter
    // Docs/TimePitch.md, snippet 1
    try queue.setTimePitch(.timeDomain)                 // while the queue is not running
    try queue.setParameters(.init(playRate: 1.5))        // any time; 0.25...4
    try queue.enqueue(chapter, parameters: .init(playRate: 0.8))   // from this buffer's first frame on
    queue.isTimePitchBypassed = true                     // pass through untouched, any time
    // Docs/TimePitch.md, snippet 2
    RubberBandTimePitch.register()        // or register(in:) a registry passed as Configuration.timePitchRegistry
    try queue.setTimePitch(.spectral)     // codecNotFound when no engine is registered
    try queue.setParameters(.init(playRate: 1.25, pitch: -200))
}
