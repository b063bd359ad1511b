// AVFAudio's AVAudioFile reading into buffers against the library's AudioFileRenderer, in the
// same process and run (the AVFAudio issue's bound: 1.1×).
import AVFAudio
import AudioPlayback
import AudioCodecs
import struct BufferQueue.AudioStreamDescription
import class AudioFileStream.AudioFile

func avfaudioBenchmarks() throws -> [String] {
    let folder = NSTemporaryDirectory() + "aqbench-files"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    AudioCodecs.registerAll()
    var lines: [String] = []
    for (name, label) in [("10-min.flac", "10-minute FLAC"), ("ten-minutes.mp3", "10-minute MP3")] {
        let path = try makeFile(name, seconds: 600, in: folder)
        var frames = (0, 0)
        // Buffers of 4096 frames on both sides: the renderer's interleaved float32, AVAudioFile's
        // deinterleaved float32 (its processing format).
        func renderer() throws {
            let renderer = try AudioFileRenderer(file: try AudioFile(path: path))
            var samples = [Float](repeating: 0, count: 4096 * 2)
            var total = 0
            while true {
                let n = try samples.withUnsafeMutableBufferPointer { try renderer.render(into: $0, frames: 4096) }
                if n == 0 { break }
                total += n
            }
            frames.0 = total
        }
        func avAudioFile() throws {
            let file = try AVAudioFile(forReading: URL(fileURLWithPath: path))
            guard let buffer = AVAudioPCMBuffer(pcmFormat: file.processingFormat, frameCapacity: 4096) else { return }
            var total = 0
            while true {
                try file.read(into: buffer)
                if buffer.frameLength == 0 { break }
                total += Int(buffer.frameLength)
            }
            frames.1 = total
        }
        var (best0, best1) = (Duration.seconds(1_000), Duration.seconds(1_000))
        for _ in 0..<3 {
            best0 = min(best0, try measure(repeats: 1, renderer))
            best1 = min(best1, try measure(repeats: 1, avAudioFile))
        }
        lines.append(String(format: "read a %@ into buffers of 4096 frames (best of 3, taking turns): AudioFileRenderer %4.0f ms, AVAudioFile %4.0f ms, ratio %4.2f; frames %d and %d",
                            label, seconds(best0) * 1000, seconds(best1) * 1000, seconds(best1) / seconds(best0), frames.0, frames.1))
    }
    lines += try engineBenchmark(folder: folder)
    return lines
}

/// An AVAudioEngine offline render (player → EQ → main mixer, `avengine render`, a program
/// written against Apple's API) against `aqrender` with the same two bands, whole commands in
/// the same run (the AVFAudio issue's bound: 1.2×).
func engineBenchmark(folder: String) throws -> [String] {
    let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    let avengine = directory.appendingPathComponent("avengine").path, aqrender = directory.appendingPathComponent("aqrender").path
    guard FileManager.default.isExecutableFile(atPath: avengine), FileManager.default.isExecutableFile(atPath: aqrender) else {
        return ["avfaudio engine: avengine or aqrender not built (make bench builds them)"]
    }
    let mp3 = try benchFile("mp3", minutes: 10, in: folder)
    let ours = folder + "/engine-ours.wav", tool = folder + "/engine-aqrender.wav"
    defer {
        try? FileManager.default.removeItem(atPath: ours)
        try? FileManager.default.removeItem(atPath: tool)
    }
    // The client's bands: a 1-octave peak of -6 dB at 1 kHz (Q √2) and a Butterworth high-pass at 80 Hz.
    let (engine, render) = try compare((avengine, ["render", mp3, ours]),
                                       (aqrender, [mp3, tool, "--format", "f32", "--jobs", "1", "--eq", "peak:1000:-6:1.4142135623730951",
                                                   "--eq", "highpass:80:0:0.7071067811865476"]))
    return [String(format: "AVAudioEngine offline render, 10-minute MP3, player → EQ → mixer into a float WAV (medians of 7, alternating): "
                   + "avengine render %5.2f s wall / %5.2f s CPU; aqrender --eq --jobs 1 %5.2f / %5.2f s; ratio wall %.2f, CPU %.2f",
                   engine.wall, engine.cpu, render.wall, render.cpu, engine.wall / max(render.wall, 0.001), engine.cpu / max(render.cpu, 0.001))]
}
