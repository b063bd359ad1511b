// Generated from Docs/OfflineRendering.md by DocSnippetTests (AQ_WRITE_SNIPPETS=1 swift test --filter DocSnippetTests): do not edit.
import AudioFileStream
import AudioPlayback
import BufferQueue

// Compiled, never called.
func docSnippets_OfflineRendering() async throws {
    let format = AudioStreamDescription.linearPCM(sampleRate: 44100, channels: 2, bitsPerChannel: 16)
    let queue = try AudioQueue(format: format, configuration: .init(sink: nil))
    let refill: @Sendable (AudioQueueBuffer) -> Void = { _ in }
    func write(_ buffer: AudioQueueBuffer) {}
    _ = format
    _ = queue
    _ = refill
    // Docs/OfflineRendering.md, snippet 1
    try queue.setOfflineRenderFormat(.linearPCM(sampleRate: 44100, channels: 2, bitsPerChannel: 16))
    let out = try queue.allocateBuffer(capacity: 4096 * 4)
    while true {
        let frames = try queue.offlineRender(at: queue.offlineRenderPosition, into: out, frames: 4096)
        if frames == 0 { break }
        write(out)   // out.byteSize bytes
    }
    _ = out
    do { // Docs/OfflineRendering.md, snippet 2
        let queue = try AudioQueue(format: format,
                                   configuration: .init(offlineCallbacks: .beforeReturning)) { queue, buffer in
            refill(buffer)                    // runs on the thread that called offlineRender
            _ = try? queue.enqueue(buffer)
        }
        _ = queue
    }
    do { // Docs/OfflineRendering.md, snippet 3

        let renderer = try ConcurrentFileRenderer(file: try AudioFile(path: "song.mp3"), jobs: 2)
        let format = renderer.outputFormat
        let writer = try WAVFileWriter(path: "song.wav", sampleRate: Int(format.sampleRate),
                                       channels: format.channelsPerFrame, float: false)
        let frames = try renderer.render { frame, samples in try writer.write(samples, atFrame: frame) }
        writer.truncate(toFrames: frames)
        try writer.close()
        print(renderer.sequentialReason ?? "\(renderer.chunks.count) chunks on \(renderer.jobs) threads")
        _ = renderer
        _ = format
        _ = writer
        _ = frames
    }
}
