// Generated from Docs/Writing.md by DocSnippetTests (AQ_WRITE_SNIPPETS=1 swift test --filter DocSnippetTests): do not edit.
import AudioCodecs
import AudioFileStream
import AudioPlayback
import BufferQueue
import PulseAudioSink

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
    // Docs/Writing.md, snippet 2

    AudioCodecs.registerAll()
    let recorder = try AudioFileRecorder(path: "take.m4a", encoding: .aac(bitRate: 192_000),
                                         sampleRate: 48_000, channels: 2, source: PulseAudioSource())
    try recorder.start()
    // … later, from anywhere:
    recorder.stop()
    let recording = try await recorder.finished()   // the file is complete: recording.validFrames
    _ = recorder
    _ = recording
}
