// Generated from Docs/Writing.md by DocSnippetTests (AQ_WRITE_SNIPPETS=1 swift test --filter DocSnippetTests): do not edit.
import AudioFileStream
import AudioPlayback
import BufferQueue

// Compiled, never called.
func docSnippets_Writing() async throws {
    // Docs/Writing.md, snippet 1

    func writeM4A(samples: [Int16], path: String) throws {
        let client = AudioStreamDescription.int16(sampleRate: 44100, channels: 2)
        let alac = AudioStreamDescription(sampleRate: 0, formatID: .appleLossless, bytesPerPacket: 0, framesPerPacket: 0,
                                          bytesPerFrame: 0, channelsPerFrame: 0, bitsPerChannel: 16)
        let writer = try AudioFileWriter(path: path, format: alac, clientFormat: client)
        try samples.withUnsafeBytes { try writer.write($0) }
        try writer.close()   // the edit list, iTunSMPB and sample tables go down here
        print(writer.validFrames, writer.primingFrames, writer.remainderFrames)
    }
}
