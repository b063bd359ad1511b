// Generated from Docs/Recording.md by DocSnippetTests (AQ_WRITE_SNIPPETS=1 swift test --filter DocSnippetTests): do not edit.
import ALSASink
import AudioPlayback
import BufferQueue
import PulseAudioSink

// Compiled, never called.
func docSnippets_Recording() async throws {
    let format = AudioStreamDescription.linearPCM(sampleRate: 48000, channels: 2, bitsPerChannel: 16)
    _ = format
    do { // Docs/Recording.md, snippet 1

        let format = AudioStreamDescription.linearPCM(sampleRate: 48000, channels: 2, bitsPerChannel: 16)
        let writer = try PCMFileWriter(path: "take.wav", format: format)
        let source = PulseAudioSource(configuration: .init(device: nil))          // the default source
        let queue = try AudioInputQueue(format: format, configuration: .init(source: source)) { queue, buffer, frames in
            // frames.frameCount frames, the first at frames.startSampleTime on the queue's timeline
            do { try buffer.withUnsafeBytes { try writer.write($0) } }
            catch { try? queue.stop(immediately: true); return }                    // a full disk: stop here
            try? queue.enqueue(buffer)                                              // hand it back to be filled
        }
        for _ in 0..<4 { try queue.enqueue(queue.allocateBuffer(capacity: 4800 * format.bytesPerFrame)) }
        try queue.start()
        _ = format
        _ = writer
        _ = source
        _ = queue
    }
    // Docs/Recording.md, snippet 2
    let sink = ALSASink(configuration: .init(device: "plughw:0", targetLatency: .milliseconds(100)))
    let queue = try AudioQueue(format: format, configuration: .init(sink: sink))
    _ = sink
    _ = queue
}
