// Generated from Docs/Decoding.md by DocSnippetTests (AQ_WRITE_SNIPPETS=1 swift test --filter DocSnippetTests): do not edit.
import AudioFileStream
import AudioPlayback
import BufferQueue
import FAADDecoder
import MPG123Decoder

// Compiled, never called.
func docSnippets_Decoding() async throws {
    // Docs/Decoding.md, snippet 1

    MPG123Decoder.register()          // MP3, MP2, MP1 on libmpg123
    FAADDecoder.register()            // AAC-LC, HE-AAC, HE-AAC v2 on libfaad2

    let file = try AudioFile(path: "song.m4a")
    let renderer = try AudioFileRenderer(file: file, loops: 1)   // queue + trims, offline
    var samples = [Float](repeating: 0, count: 4096 * renderer.outputFormat.channelsPerFrame)
    while true {
        let n = try samples.withUnsafeMutableBufferPointer { try renderer.render(into: $0, frames: 4096) }
        if n == 0 { break }
        // n frames of interleaved float32 at renderer.outputFormat
    }
    _ = file
    _ = renderer
    _ = samples
}
