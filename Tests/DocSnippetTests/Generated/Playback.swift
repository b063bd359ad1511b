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

    let player = AudioPlayer(items: [.file("a.mp3"), .file("b.m4a"), .url("https://…/c.aac")]) { PulseAudioSink() }
    Task { for await event in player.events() { print(event) } }   // any number of consumers
    let report = try await player.play()     // cancelling the task stops playback
    print(report.framesPlayed, report.skipped)
    _ = player
    _ = report
    do { // Docs/Playback.md, snippet 4

        var configuration = AudioPlayer.Configuration()
        configuration.loops = 1                      // the list this many times, gaplessly from end to start
        configuration.startSeconds = 0               // where in the first item to start (frame-exact)
        configuration.volume = 0.8                   // 0...1, after each item's gain (setVolume changes it)
        configuration.pan = 0                        // -1 left ... 1 right
        configuration.buffering = .init(startSeconds: 1, restartSeconds: 2, maximumSeconds: 3)
        configuration.outputFormat = .firstItem      // or .fixed(sampleRate:channels:), .itemFormat
        configuration.crossfade = try AudioPlayerCrossfade(seconds: 3, curve: .equalPower)   // nil: gapless
        configuration.transitionFade = 0.01          // a 10 ms fade at pause, seek, skip and stop
        configuration.replayGain = ReplayGainSettings(mode: .auto, preamp: 3, fallback: -6, preventClipping: true)
        configuration.effects = [                    // any number, in order at each position
            .init(position: .preEffects, callback: AudioEqualizer(bands: [.init(.highPass, frequency: 30)]).processingTapCallback),
            .init(position: .postEffects, callback: AudioEqualizer(bands: [.init(.lowShelf, frequency: 150, gain: 3)]).processingTapCallback),
        ]
        configuration.onItemFailure = .skip          // or .stop
        configuration.timePitch = .timeDomain        // nil: the play rate cannot change
        configuration.playRate = 1
        configuration.pitch = 0                      // cents, .spectral only
        configuration.record = { (samples: UnsafeBufferPointer<Float>, format: AudioStreamDescription) in
            _ = (samples, format)                    // every frame handed to the sink, on a thread of its own
        }
        configuration.onEvent = { (event: AudioPlayerEvent) in print(event) }
        configuration.decoders = .shared             // and .resamplers, .timePitchEngines
        let player = AudioPlayer(items: [.file("a.flac"), .file("b.flac")], configuration: configuration) { NullSink() }
        let loudness = player.installLoudnessMeter() // what is played, beside the effects
        let report = try await player.play()
        print(report.framesPlayed, report.itemsPlayed, report.skipped, report.warnings, loudness.reading.integrated)
        _ = configuration
        _ = player
        _ = loudness
        _ = report
    }
}
