// Generated from Docs/Streaming.md by DocSnippetTests (AQ_WRITE_SNIPPETS=1 swift test --filter DocSnippetTests): do not edit.
import AudioPlayback
import AudioStreaming
import FAADDecoder
import MPG123Decoder
import PulseAudioSink

// Compiled, never called.
func docSnippets_Streaming() async throws {
    // Docs/Streaming.md, snippet 1

    MPG123Decoder.register()
    FAADDecoder.register()
    var configuration = AudioPlayer.Configuration(buffering: .init(startSeconds: 1, restartSeconds: 2, maximumSeconds: 5))
    configuration.onEvent = { event in
        switch event {
        case .state(let state): print("state:", state)           // connecting, buffering, playing, …
        case .streamTitle(let title, _): print("now playing:", title)
        case .property(let name, let value, _): print(name, value)  // icy-name, icy-genre
        default: break
        }
    }
    let player = AudioPlayer(
        items: [.url("https://example.com/intro.m4a"), .url("http://radio.example:8000/live.mp3"), .file("outro.mp3")],
        configuration: configuration) { PulseAudioSink() }
    Task { try await player.play() }          // cancelling the task stops playback
    // later: try await player.seek(to: 42.5) (returns the position reached), player.pause(),
    // player.resume(), player.append(.url(…)), await player.skip(), player.stop()
    _ = configuration
    _ = player
    do { // Docs/Streaming.md, snippet 2
        let player = AudioPlayer(items: [.url("https://example.com/radio/index.m3u8")]) { PulseAudioSink() }
        try await player.play()
        _ = player
    }
    do { // Docs/Streaming.md, snippet 3
        var http = HTTPStreamConfiguration()
        http.cache = try AudioDiskCache(directory: "/var/cache/myplayer", capacity: 2 << 30)
        let player = AudioPlayer(items: [.url("https://example.com/episode.mp3", configuration: http)]) { PulseAudioSink() }
        _ = http
        _ = player
    }
}
