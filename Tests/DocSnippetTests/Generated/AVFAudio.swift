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

    let episode = try AVAudioFile(forReading: URL(fileURLWithPath: "episode.mp3"))
    let engine = AVAudioEngine()
    let player = AVAudioPlayerNode()
    let eq = AVAudioUnitEQ(numberOfBands: 1)
    eq.bands[0].filterType = .highPass
    eq.bands[0].frequency = 80
    eq.bands[0].bypass = false
    engine.attach(player)
    engine.attach(eq)
    engine.connect(player, to: eq, format: episode.processingFormat)
    engine.connect(eq, to: engine.mainMixerNode, format: episode.processingFormat)
    try engine.enableManualRenderingMode(.offline, format: episode.processingFormat, maximumFrameCount: 4096)
    player.scheduleFile(episode, at: nil)
    try engine.start()
    player.play()
    let output = try AVAudioFile(forWriting: URL(fileURLWithPath: "episode.wav"), settings: episode.processingFormat.settings)
    let block = AVAudioPCMBuffer(pcmFormat: engine.manualRenderingFormat, frameCapacity: 4096)!
    while engine.manualRenderingSampleTime < episode.length {
        let frames = AVAudioFrameCount(min(4096, episode.length - engine.manualRenderingSampleTime))
        _ = try engine.renderOffline(frames, to: block)
        try output.write(from: block)
    }
    _ = episode
    _ = engine
    _ = player
    _ = eq
    _ = output
    _ = block
    // Docs/AVFAudio.md, snippet 3

    let samples: [Float] = (0..<1024).map { sinf(Float($0) * 0.1) }
    var rms: Float = 0
    vDSP_rmsqv(samples, 1, &rms, vDSP_Length(samples.count))
    var peak: Float = 0
    vDSP_maxmgv(samples, 1, &peak, vDSP_Length(samples.count))
    _ = samples
    _ = rms
    _ = peak
}
