// Generated from Docs/Converting.md by DocSnippetTests (AQ_WRITE_SNIPPETS=1 swift test --filter DocSnippetTests): do not edit.
import BufferQueue
import SoxrConverter

// Compiled, never called.
func docSnippets_Converting() async throws {
    let queue = try AudioQueue(format: .linearPCM(sampleRate: 44100, channels: 2, bitsPerChannel: 16))
    let samples = [Float](repeating: 0, count: 4410 * 2)
    func write(_ samples: UnsafeBufferPointer<Float>) {}
    _ = queue
    _ = samples
    // Docs/Converting.md, snippet 1

    SoxrConverter.register()
    let converter = try AudioConverter(from: .float32(sampleRate: 44100, channels: 2),
                                       to: .float32(sampleRate: 48000, channels: 1))
    let output = DecodedAudio(format: converter.outputFormat)
    try samples.withUnsafeBufferPointer { try converter.convert($0, into: output) }   // as often as needed
    try converter.finish(into: output)                                             // end of the stream
    output.withUnsafeSamples { write($0) }
    _ = converter
    _ = output
    // Docs/Converting.md, snippet 2
    SoxrConverter.register()
    try queue.setOfflineRenderFormat(.linearPCM(sampleRate: 48000, channels: 1, bitsPerChannel: 16))
}
