// Generated from Docs/OpenFormats.md by DocSnippetTests (AQ_WRITE_SNIPPETS=1 swift test --filter DocSnippetTests): do not edit.
import AudioFileStream
import AudioPlayback
import BufferQueue
import FLACDecoder
import OpusDecoder
import VorbisDecoder

// Compiled, never called.
func docSnippets_OpenFormats() async throws {
    // Docs/OpenFormats.md, snippet 1

    func renderOpus(_ path: String) throws -> Int {
        OpusDecoder.register()
        VorbisDecoder.register()
        FLACDecoder.register()
        let renderer = try AudioFileRenderer(file: try AudioFile(path: path))
        var frames = 0
        var scratch = [Float](repeating: 0, count: 4096 * renderer.outputFormat.channelsPerFrame)
        while true {
            let n = try scratch.withUnsafeMutableBufferPointer { try renderer.render(into: $0, frames: 4096) }
            if n == 0 { return frames }
            frames += n
        }
    }
}
