// Generated from Docs/Playback.md by DocSnippetTests (AQ_WRITE_SNIPPETS=1 swift test --filter DocSnippetTests): do not edit.
import AudioPlayback
import AudioStreaming
import BufferQueue
import PipeWireSink
import PulseAudioSink

// Compiled, never called.
func docSnippets_Playback() async throws {
    // Docs/Playback.md, snippet 1

    let sink = PulseAudioSink(configuration: .init(device: nil, targetLatency: .milliseconds(50),
                                                   applicationName: "MyApp", streamName: "song", role: "music"))
    let format = AudioStreamDescription.linearPCM(sampleRate: 44100, channels: 2, bitsPerChannel: 16)
    let queue = try AudioQueue(format: format, configuration: .init(sink: sink))
    _ = sink
    _ = format
    _ = queue
    // Docs/Playback.md, snippet 2

    // target nil: the default sink, followed when it changes; a node name pins the stream.
    let pipeWire = PipeWireSink(configuration: .init(target: nil, targetLatency: .milliseconds(20), applicationName: "MyApp"))
    let onPipeWire = try AudioQueue(format: format, configuration: .init(sink: pipeWire))
    _ = pipeWire
    _ = onPipeWire
    // Docs/Playback.md, snippet 3

    let player = AudioPlayer(items: [.file("a.mp3"), .file("b.m4a"), .url("https://…/c.aac")],
                             makeSink: { PulseAudioSink() })
    Task { for await event in player.events() { print(event) } }   // any number of consumers
    let frames = try await player.play()     // cancelling the task stops playback
    _ = player
    _ = frames
}
