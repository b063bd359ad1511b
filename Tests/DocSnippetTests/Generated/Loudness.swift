// Generated from Docs/Loudness.md by DocSnippetTests (AQ_WRITE_SNIPPETS=1 swift test --filter DocSnippetTests): do not edit.
import AudioCodecs
import AudioFileStream
import AudioPlayback
import BufferQueue

// Compiled, never called.
func docSnippets_Loudness() async throws {
    let samples = [Float](repeating: 0, count: 4800 * 2)
    let queue = try AudioQueue(format: .float32(sampleRate: 48000, channels: 2))
    let reading = LoudnessReading.silent
    let paths = ["a.flac", "b.mp3"]
    let pngBytes: [UInt8] = []
    _ = samples
    _ = queue
    _ = reading
    _ = paths
    _ = pngBytes
    do { // Docs/Loudness.md, snippet 1

        AudioCodecs.registerAll()
        let reading = try LoudnessMeter.measuring(try AudioFile(path: "album-track.flac")).reading
        print(reading.integrated, reading.range, reading.truePeak)
        _ = reading
    }
    // Docs/Loudness.md, snippet 2
    var meter = try LoudnessMeter(sampleRate: 48_000, channels: 2)
    meter.add(samples)
    let now = meter.reading
    _ = meter
    _ = now
    // Docs/Loudness.md, snippet 3
    let monitor = try queue.installLoudnessMeter()
    try queue.start()
    // … on any thread, at any time:
    let live = monitor.reading
    _ = monitor
    _ = live
    // Docs/Loudness.md, snippet 4
    if let normalization = LoudnessNormalization(reading, target: -16, truePeakCeiling: -1) {
        print(normalization.gain, normalization.isLimitedByCeiling)
    }
    do { // Docs/Loudness.md, snippet 5
        let player = AudioPlayer(items: paths.map { AudioPlayerItem.file($0) },
                                 configuration: .init(replayGain: ReplayGainSettings(mode: .album, preamp: 0))) { NullSink() }
        let meter = player.installLoudnessMeter()     // what is played: after the gains, crossfades and effects
        _ = player
        _ = meter
    }
    // Docs/Loudness.md, snippet 6
    try AudioFileTagWriter.update(path: "track.flac", setting: [("REPLAYGAIN_TRACK_GAIN", "-6.20 dB"),
                                                              ("REPLAYGAIN_TRACK_PEAK", "0.891251")])
    // Docs/Loudness.md, snippet 7
    if let cover = AudioFilePicture(image: pngBytes, type: 3, description: "Front") {
        try AudioFileTagWriter.update(path: "track.m4a", setting: [("ALBUM", "Live")], pictures: [cover])
    }
}
