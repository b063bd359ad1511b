// Generated from Docs/Formats.md by DocSnippetTests (AQ_WRITE_SNIPPETS=1 swift test --filter DocSnippetTests): do not edit.
import AudioFileStream
import OpenCoreAMRDecoder

// Compiled, never called.
func docSnippets_Formats() async throws {
    // Docs/Formats.md, snippet 1

    AMRDecoder.register()          // the others need nothing
    let file = try AudioFile(path: "memo.amr")
    _ = file
}
