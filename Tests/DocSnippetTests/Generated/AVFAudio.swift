// Generated from Docs/AVFAudio.md by DocSnippetTests (AQ_WRITE_SNIPPETS=1 swift test --filter DocSnippetTests): do not edit.
import AVFAudio
import Accelerate

// Compiled, never called.
func docSnippets_AVFAudio() async throws {
    // Docs/AVFAudio.md, snippet 1

    let file = try AVAudioFile(forReading: URL(fileURLWithPath: "song.mp3"))
    if let buffer = AVAudioPCMBuffer(pcmFormat: file.processingFormat, frameCapacity: 4096) {
        try file.read(into: buffer)
        let left = buffer.floatChannelData?[0]
        print(file.length, buffer.frameLength, left?[0] ?? 0)
    }
    _ = file
    // Docs/AVFAudio.md, snippet 2

    let samples: [Float] = (0..<1024).map { sinf(Float($0) * 0.1) }
    var rms: Float = 0
    vDSP_rmsqv(samples, 1, &rms, vDSP_Length(samples.count))
    var peak: Float = 0
    vDSP_maxmgv(samples, 1, &peak, vDSP_Length(samples.count))
    _ = samples
    _ = rms
    _ = peak
}
