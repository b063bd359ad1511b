// Generated from Docs/Mixing.md by DocSnippetTests (AQ_WRITE_SNIPPETS=1 swift test --filter DocSnippetTests): do not edit.
import AudioFileStream
import AudioPlayback
import BufferQueue
import PulseAudioSink

// Compiled, never called.
func docSnippets_Mixing() async throws {
    func write(_ samples: ArraySlice<Float>) {}
    let (lengthA, lengthB) = (48_510, 44_100)
    let paths = ["a.flac", "b.mp3"]
    _ = lengthA
    _ = lengthB
    _ = paths
    // Docs/Mixing.md, snippet 1

    let graph = try AudioGraph(sampleRate: 44_100, channels: 2)
    let voice = try AudioPullSourceNode(name: "voice.m4a", source: AudioFileRenderer(file: AudioFile(path: "voice.m4a")))
    let music = try AudioPullSourceNode(name: "music.mp3", source: AudioFileRenderer(file: AudioFile(path: "music.mp3")))
    try graph.connect(voice, to: graph.mainMixer, volume: 1)
    try graph.connect(music, to: graph.mainMixer, volume: 0.3, offsetFrames: 44_100)   // starts 1 s in
    var block = [Float](repeating: 0, count: 4096 * 2)
    while case let n = try block.withUnsafeMutableBufferPointer({ try graph.render(into: $0) }), n > 0 {
        write(block[0..<(n * 2)])
    }
    _ = graph
    _ = voice
    _ = music
    _ = block
    // Docs/Mixing.md, snippet 2
    let d = 22_050                                           // 0.5 s at 44.1 kHz
    let a = try graph.connect(voice, to: graph.mainMixer)
    a.fade(.out, curve: .equalPower, at: Int64(lengthA - d), frames: d)
    let b = try graph.connect(music, to: graph.mainMixer, startFrame: Int64(lengthA - d))
    b.fade(.in, curve: .equalPower, at: Int64(lengthA - d), frames: d)
    _ = d
    _ = a
    _ = b
    // Docs/Mixing.md, snippet 3
    let eq = try AudioEQNode(bands: [
        AudioEQBand(.highPass, frequency: 40),
        AudioEQBand(.lowShelf, frequency: 150, gain: 3),
        AudioEQBand(.parametric, frequency: 2_500, gain: -4, q: 2),
    ], sampleRate: 44_100, channels: 2)
    try graph.connect(graph.mainMixer, to: eq)
    try eq.setBand(2, to: AudioEQBand(.parametric, frequency: 1_000, gain: 6, q: 1))   // while playing
    _ = eq
    // Docs/Mixing.md, snippet 4
    let live = try AudioGraph(sampleRate: 48_000, channels: 2)
    let input = try AudioQueueSourceNode(name: "music", sampleRate: 48_000, channels: 2)
    let queue = try AudioQueue(format: .float32(sampleRate: 44_100, channels: 2),
                               configuration: .init(sink: input, sinkFormat: input.sinkFormat))
    try live.connect(input, to: live.mainMixer)
    try live.start(sink: NullSink())          // or PulseAudioSink(), ALSASink()
    try queue.start()
    _ = live
    _ = input
    _ = queue
    // Docs/Mixing.md, snippet 5

    let player = AudioPlayer(items: paths.map { AudioPlayerItem.file($0) },
                             configuration: .init(crossfade: try AudioPlayerCrossfade(seconds: 4, curve: .equalPower))) { PulseAudioSink() }
    try await player.play()
    _ = player
    // Docs/Mixing.md, snippet 6
    let stretch = try AudioTimePitchNode(rate: 1.25, sampleRate: 44_100, channels: 2)   // .timeDomain keeps the pitch
    try graph.connect(voice, to: stretch)
    try graph.connect(stretch, to: graph.mainMixer)
    try stretch.setRate(1.5)                                                            // while playing
    _ = stretch
}
