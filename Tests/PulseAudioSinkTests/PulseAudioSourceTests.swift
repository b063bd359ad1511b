import Foundation
import Testing
import AudioPlayback
import AudioFileStream
import BufferQueue
import AVCodecAAC
import FLACDecoder
import FLACEncoder
import OpusDecoder
import OpusEncoder
import PulseAudioSink
import SoxrConverter
import TestSupport

/// What an input queue recorded: every buffer (start, frame count, samples) and every event.
final class Recorder: Sendable {
    struct Take: Sendable {
        var starts: [Int64] = []
        var counts: [Int] = []
        var samples: [Float] = []
        var overruns: [(lost: Int, at: Int64)] = []
        var running: [Bool] = []
        var errors: [AudioQueueError] = []
        /// Frames of sound (not all-zero) recorded so far, and how many silent frames follow the last.
        var soundFrames = 0
        var silentTail = 0
    }

    let take = Watched(Take())
    /// Runs inside the input callback before the buffer is enqueued again (a test's stall).
    let onBuffer: (@Sendable (Take) -> Void)?

    init(onBuffer: (@Sendable (Take) -> Void)? = nil) { self.onBuffer = onBuffer }

    func record(_ buffer: AudioQueueBuffer, _ frames: AudioCapturedFrames, channels: Int) {
        let samples = buffer.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
        let now = take.update { take -> Take in
            take.starts.append(frames.startSampleTime)
            take.counts.append(frames.frameCount)
            take.samples += samples
            for frame in 0..<frames.frameCount {
                if (0..<channels).contains(where: { samples[frame * channels + $0] != 0 }) {
                    take.soundFrames += 1
                    take.silentTail = 0
                } else {
                    take.silentTail += 1
                }
            }
            return take
        }
        onBuffer?(now)
    }

    func watch(_ queue: AudioInputQueue) {
        let events = queue.events()
        let take = self.take
        Task {
            for await event in events {
                switch event {
                case .overrun(let lost, let at): take.update { $0.overruns.append((lost, at)) }
                case .runningChanged(let running): take.update { $0.running.append(running) }
                case .error(let error): take.update { $0.errors.append(error) }
                default: break
                }
            }
        }
    }
}

@Suite(.serialized, .enabled(if: !PrivateServer.missing, "pulseaudio or parec is missing (make deps installs pulseaudio and pulseaudio-utils): PulseAudio tests skipped"))
struct PulseAudioSourceTests {
    let format = AudioStreamDescription.float32(sampleRate: 44100, channels: 2)

    /// An input queue recording the private server's sink monitor, re-enqueuing every buffer.
    func recordingQueue(_ server: PrivateServer, _ recorder: Recorder, bufferFrames: Int = 4410, buffers: Int = 4,
                        captureFrames: Int? = nil) throws -> AudioInputQueue {
        let source = PulseAudioSource(configuration: .monitor(of: "out", server: server.address))
        let queue = try AudioInputQueue(format: format, configuration: .init(source: source, captureBufferFrames: captureFrames)) { queue, buffer, frames in
            recorder.record(buffer, frames, channels: 2)
            try? queue.enqueue(buffer)
        }
        recorder.watch(queue)
        for _ in 0..<buffers { try queue.enqueue(queue.allocateBuffer(capacity: bufferFrames * format.bytesPerFrame)) }
        return queue
    }

    /// Plays `samples` to the server's sink and returns once the queue has stopped.
    func play(_ samples: [Float], on server: PrivateServer) async throws {
        let sink = PulseAudioSink(configuration: .init(server: server.address, device: "out", targetLatency: .milliseconds(50)))
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink, decodeBufferFrames: 1 << 18))
        let events = Events(queue)
        let buffer = try queue.allocateBuffer(capacity: samples.count * 4)
        try samples.withUnsafeBytes { try buffer.setData($0) }
        try queue.enqueue(buffer)
        try queue.prime()
        try queue.start()
        try queue.stop(immediately: false)
        #expect(await events.waitUntilStopped(), "playback did not end")
        #expect(events.errors.isEmpty, "playback failed: \(events.errors)")
        queue.dispose(immediately: true)
    }

    @Test func theMonitorRecordsWhatWasPlayedBitForBit() async throws {
        let server = try await PrivateServer.start()
        let recorder = Recorder()
        let queue = try recordingQueue(server, recorder)
        try queue.start()
        // The record stream delivers (silence) once connected.
        #expect(await recorder.take.wait { $0.counts.count >= 2 })
        #expect(queue.sourceFormat == format)
        let played = signal(frames: 66_150)
        try await play(played, on: server)
        // Everything played, then a tenth of a second of silence, has been recorded.
        #expect(await recorder.take.wait { $0.soundFrames >= 66_150 && $0.silentTail >= 4410 })
        try queue.stop(immediately: true)
        #expect(await recorder.take.wait { $0.running == [true, false] })
        let take = recorder.take.current
        #expect(difference(trimSilence(take.samples, channels: 2), played) == nil)
        // Full buffers, each starting where the previous ended, the last one short; nothing lost.
        #expect(take.counts.dropLast().allSatisfy { $0 == 4410 })
        #expect(zip(take.starts, take.starts.dropFirst()).allSatisfy { $0.0 + 4410 == $0.1 })
        #expect(take.overruns.isEmpty)
        #expect(take.errors.isEmpty)
        queue.dispose(immediately: true)
    }

    /// An input queue recording the monitor straight into FLAC, Apple Lossless, AAC or Opus: the
    /// file made of its packets decodes to what was played — bit for bit for the lossless codecs
    /// (the played signal is on the 16-bit grid), and to exactly the frames captured for all.
    @Test(arguments: ["flac", "m4a/alac", "m4a/aac", "opus"])
    func compressedRecordingsDecodeToWhatWasPlayed(_ kind: String) async throws {
        OpusDecoder.register()
        FLACDecoder.register()
        AVCodecAAC.register()
        FLACEncoder.register()
        OpusEncoder.register()
        SoxrConverter.register()
        let server = try await PrivateServer.start()
        let ext = String(kind.split(separator: "/")[0])
        let id: AudioFormatID = kind.hasSuffix("alac") ? .appleLossless : kind.hasSuffix("aac") ? .aacLC : kind == "opus" ? .opus : .flac
        let lossless = id == .appleLossless || id == .flac
        let format = AudioStreamDescription(sampleRate: 44100, formatID: id, bytesPerPacket: 0, framesPerPacket: 0, bytesPerFrame: 0,
                                            channelsPerFrame: 2, bitsPerChannel: 16)
        let path = NSTemporaryDirectory() + "monitor-\(UUID().uuidString.prefix(8)).\(ext)"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let holder = PacketSink()
        let source = PulseAudioSource(configuration: .monitor(of: "out", server: server.address))
        let queue = try AudioInputQueue(format: format, configuration: .init(source: source)) { queue, buffer, frames in
            holder.write(buffer, frames)
            try? queue.enqueue(buffer)
        }
        holder.writer = try AudioFileWriter(path: path, packetFormat: queue.streamDescription, magicCookie: queue.magicCookie,
                                            primingFrames: queue.encodingTotals?.primingFrames ?? 0, maximumPacketSize: queue.maximumPacketSize)
        // Buffers of 8 packets of the largest size: each comes back after 8 packets.
        for _ in 0..<4 { try queue.enqueue(queue.allocateBuffer(capacity: queue.maximumPacketSize * 8)) }
        let running = Watched<[Bool]>([])
        let lost = Watched(0)
        let events = queue.events()
        Task {
            for await event in events {
                if case .runningChanged(let on) = event { running.update { $0.append(on) } }
                if case .overrun(let frames, _) = event { lost.update { $0 += frames } }
            }
        }
        try queue.start()
        #expect(await holder.frames.wait { $0 >= 8192 }, "no packets came")
        let played = signal(frames: 66_150).map { ($0 * 32768).rounded() / 32768 }
        try await play(played, on: server)
        // What had been captured when playback ended, and a fifth of a second of silence, is in packets.
        // (Opus packets count 48 kHz frames; the capture, 44.1 kHz ones.)
        let scale = id == .opus ? 48000.0 / 44100 : 1
        let captured = Int(Double(queue.currentTime().sampleTime) * scale)
        let priming = queue.encodingTotals?.primingFrames ?? 0
        #expect(await holder.frames.wait { $0 >= captured + priming + Int(8820 * scale) })
        try queue.stop(immediately: true)
        #expect(await running.wait { $0 == [true, false] })
        let totals = try #require(queue.encodingTotals)
        try holder.close(totals: totals, cookie: queue.magicCookie)
        #expect(holder.failure == nil)
        queue.dispose(immediately: true)

        let file = try AudioFile(path: path)
        #expect(file.packetTableInfo?.validFrames ?? file.totalFrames == totals.validFrames)
        let renderer = try AudioFileRenderer(file: file)
        var decoded: [Float] = []
        var scratch = [Float](repeating: 0, count: 8192)
        while true {
            let n = try scratch.withUnsafeMutableBufferPointer { try renderer.render(into: $0, frames: 4096) }
            if n == 0 { break }
            decoded += scratch[0..<(n * 2)]
        }
        let expectedFrames = Int(totals.validFrames)
        #expect(decoded.count == expectedFrames * 2, "\(decoded.count / 2) frames decoded, \(expectedFrames) captured")
        if lossless {
            #expect(difference(trimSilence(decoded, channels: 2), played) == nil)
        } else if id == .aacLC {
            // The sound is all there: as many frames of it as were played (the signal never comes
            // near zero: from its first loud frame to its last), give or take the codec's edges.
            // (Not for Opus, whose encoder takes out the signal's DC offset with a high-pass
            // filter, so its level crosses zero and rings after the end.)
            let loud = (0..<(decoded.count / 2)).filter { abs(decoded[2 * $0]) > 0.03 }
            let sound = (loud.last ?? 0) - (loud.first ?? 0) + 1
            let playedFrames = 66_150
            #expect(abs(sound - playedFrames) < 2048, "\(sound) frames of sound decoded, \(playedFrames) played; \(lost.current) frames lost")
        }
    }

    /// The callback stalls for half a second once sound arrives (the fault this test injects), with
    /// a capture ring of a tenth of a second: frames are lost, reported, and the timeline jumps by
    /// exactly their number — every frame recorded after the gap sits at its true place.
    @Test func aStalledCallbackIsAnOverrunOfExactlyTheFramesLost() async throws {
        let server = try await PrivateServer.start()
        let stalled = Watched(false)
        let recorder = Recorder { take in
            guard take.soundFrames > 0, !stalled.current else { return }
            stalled.update { $0 = true }
            _ = DispatchSemaphore(value: 0).wait(timeout: .now() + .milliseconds(500))
        }
        let queue = try recordingQueue(server, recorder, bufferFrames: 2205, buffers: 2, captureFrames: 4410)
        try queue.start()
        #expect(await recorder.take.wait { $0.counts.count >= 2 })
        // A ramp: frame i holds (i + 1) / 2^20 and its negative, exact in float32 and never repeated.
        let frames = 132_300
        let played = (0..<frames).flatMap { i -> [Float] in let v = Float(i + 1) / 1_048_576; return [v, -v] }
        try await play(played, on: server)
        #expect(await recorder.take.wait { $0.overruns.count >= 1 && $0.silentTail >= 4410 })
        try queue.stop(immediately: true)
        #expect(await recorder.take.wait { $0.running == [true, false] })
        let take = recorder.take.current
        let lost = take.overruns.reduce(0) { $0 + $1.lost }
        #expect(lost > 4410, "a half-second stall with a 0.1 s ring loses more than 0.1 s")
        // Every frame of sound lies at its ramp value's timeline position: position - value × 2^20 is one constant.
        var offsets = Set<Int64>()
        var offset = 0
        for (start, count) in zip(take.starts, take.counts) {
            for frame in 0..<count {
                let value = take.samples[(offset + frame) * 2]
                if value != 0 { offsets.insert(start + Int64(frame) - Int64((value * 1_048_576).rounded())) }
            }
            offset += count
        }
        #expect(offsets.count == 1, "frames after the overrun are displaced: \(offsets.sorted().prefix(4))")
        // What was heard plus what was lost is the whole ramp.
        #expect(take.soundFrames + lost >= frames)
        #expect(take.soundFrames < frames)
        #expect(Int64(take.counts.reduce(0, +) + lost) == take.starts.last.map { $0 + Int64(take.counts.last ?? 0) })
        queue.dispose(immediately: true)
    }

    @Test func devicesAreListed() async throws {
        let server = try await PrivateServer.start()
        let sinks = try PulseAudioSink.devices(server: server.address)
        let out = try #require(sinks.first { $0.name == "out" })
        #expect(out.sampleRate == 44100 && out.channels == 2 && out.isDefault)
        let sources = try PulseAudioSource.devices(server: server.address)
        let monitor = try #require(sources.first { $0.name == "out.monitor" })
        #expect(monitor.isMonitor && monitor.sampleRate == 44100)
        #expect(throws: AudioQueueError.self) { _ = try PulseAudioSink.devices(server: "unix:/nonexistent/socket") }
    }

    @Test func aRemovedDeviceIsAnErrorEventNotAHang() async throws {
        let server = try await PrivateServer.start()
        let recorder = Recorder()
        let input = try recordingQueue(server, recorder)
        try input.start()
        #expect(await recorder.take.wait { $0.counts.count >= 1 })
        let sink = PulseAudioSink(configuration: .init(server: server.address, device: "out", targetLatency: .milliseconds(50)))
        let output = try AudioQueue(format: format, configuration: .init(sink: sink))
        let events = Events(output)
        let buffer = try output.allocateBuffer(capacity: 441_000 * 8)
        try signal(frames: 441_000).withUnsafeBytes { try buffer.setData($0) }
        try output.enqueue(buffer)
        try output.start()
        #expect(await events.waitForRunning([true]))
        // The device goes away: pactl unloads the null sink. What counts is the effect (the events
        // below): Foundation did not report the exit of tools started after the test process had
        // started a PulseAudio daemon, so the test does not wait for pactl's exit.
        _ = try launchTool("/usr/bin/pactl", ["-s", server.address, "unload-module", "module-null-sink"])
        #expect(await events.wait { Events.hasSinkError($0) })
        #expect(await recorder.take.wait { !$0.errors.isEmpty && $0.running == [true, false] })
        #expect(recorder.take.current.errors.first?.message.contains("out.monitor") == true)
        output.dispose(immediately: true)
        input.dispose(immediately: true)
    }
}

/// Starts a tool with no input and returns its standard output (errors are discarded).
func launchTool(_ path: String, _ arguments: [String]) throws -> FileHandle {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    process.standardInput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    return pipe.fileHandleForReading
}

/// The `aqrecord` example, run as a user runs it.
@Suite(.serialized) struct AQRecordTests {
    static let binary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        .appendingPathComponent("aqrecord").path

    /// The WAV header's RIFF and data sizes, and the file's size.
    func wavSizes(_ path: String) throws -> (riff: Int, data: Int, file: Int) {
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        func le32(_ offset: Int) -> Int { Int(bytes[offset]) | Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2]) << 16 | Int(bytes[offset + 3]) << 24 }
        return (le32(4), le32(40), bytes.count)
    }

    func folder() throws -> String {
        let path = NSTemporaryDirectory() + "aqrecord-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: binary), "aqrecord is not built beside the tests"))
    func aDurationWritesExactlyThatManyFramesWithAFinishedHeader() async throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let run = try await runTool(Self.binary, ["--source", "null", "--fast", "--duration", "1.25", "--rate", "44100", "--format", "s16", "\(dir)/a.wav"])
        #expect(run.status == 0)
        let sizes = try wavSizes("\(dir)/a.wav")
        #expect(sizes.data == 55_125 * 4)
        #expect(sizes.riff == sizes.file - 8)
        #expect(sizes.file == 44 + 55_125 * 4)
        // A CAF of 24-bit samples: ffprobe reads the frame count from the finished header.
        let caf = try await runTool(Self.binary, ["--source", "null", "--fast", "--duration", "0.5", "--rate", "48000", "--format", "s24", "\(dir)/b.caf"])
        #expect(caf.status == 0)
        let probe = try await runTool("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,duration_ts", "-of", "csv=p=0", "\(dir)/b.caf"])
        #expect(String(decoding: probe.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == "pcm_s24le,24000")
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: binary), "aqrecord is not built beside the tests"))
    func anInterruptFinishesTheFile() async throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Unpaced: the source fills the capture ring before aqrecord says it records, so the
        // interrupted file must hold frames.
        let recording = try RunningRecorder(Self.binary, ["--source", "null", "--fast", "--rate", "44100", "--channels", "1", "--format", "s16", "\(dir)/c.wav"])
        #expect(await recording.started.wait { $0 != nil })
        guard let status = await recording.signal(SIGINT) else { return }
        #expect(status == 0)
        let sizes = try wavSizes("\(dir)/c.wav")
        #expect(sizes.riff == sizes.file - 8)
        #expect(sizes.data == sizes.file - 44)
        #expect(sizes.data >= 4410 * 2)
        // The frames are the source's sine (0.5 × sin(2π·440·n/44100)), rounded to 16 bits, from frame 0.
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(dir)/c.wav")))
        let recorded = (0..<4410).map { Int16(bitPattern: UInt16(bytes[44 + 2 * $0]) | UInt16(bytes[45 + 2 * $0]) << 8) }
        let expected = (0..<4410).map { Int16((Float(0.5) * Float(sin(2 * Double.pi * 440 / 44100 * Double($0))) * 32768).rounded()) }
        let same = recorded == expected
        #expect(same)
    }

    @Test(.enabled(if: !PrivateServer.missing && FileManager.default.isExecutableFile(atPath: binary), "pulseaudio or aqrecord is missing"))
    func recordsAServersMonitorForExactlyTheDuration() async throws {
        let server = try await PrivateServer.start()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Its output closes when it exits (its exit is not awaited: see aRemovedDeviceIsAnErrorEventNotAHang).
        let output = try launchTool(Self.binary, ["--server", server.address, "--device", "out.monitor", "--duration", "0.5", "--format", "f32", "\(dir)/m.wav"])
        let printed = await onOwnThread { String(decoding: output.readDataToEndOfFile(), as: UTF8.self) }
        #expect(printed.contains("Recorded 22050 frames"))
        let sizes = try wavSizes("\(dir)/m.wav")
        // A float WAV's header is 46 bytes (its fmt chunk has the cbSize field): data at 42.
        #expect(sizes.file == 46 + 22_050 * 8)
        #expect(sizes.riff == sizes.file - 8)
        let probe = try await runTool("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,sample_rate,duration_ts", "-of", "csv=p=0", "\(dir)/m.wav"])
        #expect(String(decoding: probe.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == "pcm_f32le,44100,22050")
    }

    /// SIGTERM finishes a compressed recording properly: the M4A (fragmented while recording)
    /// gets its final edit list and iTunSMPB, and plays exactly the frames aqrecord says it wrote.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: binary), "aqrecord is not built beside the tests"),
          arguments: ["m4a", "opus", "flac"])
    func aTerminatedCompressedRecordingIsFinished(_ ext: String) async throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = "\(dir)/t.\(ext)"
        let recording = try RunningRecorder(Self.binary, ["--source", "null", "--fast", "--rate", "44100", path])
        #expect(await recording.started.wait { $0 != nil })
        guard let status = await recording.signal(SIGTERM) else { return }
        #expect(status == 0)
        let printed = recording.printed
        #expect(await printed.wait { $0.contains("Recorded") })
        // "Recorded N frames (…)": the file's valid frames are N.
        let said = printed.current.split(separator: " ").dropFirst().first.flatMap { Int64($0) }
        let frames = try #require(said, "aqrecord printed \(printed.current)")
        #expect(frames > 0)
        OpusDecoder.register()
        FLACDecoder.register()
        AVCodecAAC.register()
        let file = try AudioFile(path: path)
        #expect((file.packetTableInfo?.validFrames ?? file.totalFrames) == frames, "\(file.packetTableInfo.map { "\($0)" } ?? "no table")")
        let probe = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-i", path, "-f", "s16le", "-ac", "1", "-"])
        #expect(probe.status == 0 && probe.output.count / 2 >= Int(frames))
    }

    /// Every container, by its extension, with its usual codec: exactly the duration's frames, as
    /// this library reads them back (ffmpeg too, but for M4A's last-packet padding, which it plays).
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: binary), "aqrecord is not built beside the tests"),
          arguments: ["m4a", "opus", "flac", "caf", "wav", "aif"])
    func eachContainerHoldsExactlyTheDuration(_ ext: String) async throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = "\(dir)/d.\(ext)"
        let run = try await runTool(Self.binary, ["--source", "null", "--fast", "--duration", "1.25", "--rate", "44100", path])
        #expect(run.status == 0, "\(String(decoding: run.errorOutput, as: UTF8.self))")
        let expected = ext == "opus" ? 60_000 : 55_125
        let file = try AudioFile(path: path)
        let valid = file.packetTableInfo?.validFrames ?? file.totalFrames
        #expect(valid == Int64(expected), "\(valid) frames, \(expected) expected (\(file.dataFormat))")
        let probe = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-i", path, "-f", "s16le", "-ac", "1", "-"])
        #expect(probe.status == 0)
        let ffmpegFrames = probe.output.count / 2
        #expect(ext == "m4a" ? (ffmpegFrames > expected && ffmpegFrames < expected + 1024) : ffmpegFrames == expected,
                "ffmpeg reads \(ffmpegFrames) frames")
    }

    /// A recording killed with SIGKILL keeps a file that plays up to within a second of the kill:
    /// what was captured then, less at most the second between checkpoints. (`caf/aac`: a CAF of
    /// AAC, whose packet table is kept up to date before the data.)
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: binary), "aqrecord is not built beside the tests"),
          arguments: ["m4a", "opus", "flac", "caf", "wav", "caf/aac"])
    func aKilledRecordingPlaysUpToItsLastSecond(_ kind: String) async throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let ext = String(kind.split(separator: "/")[0])
        let codec = kind.split(separator: "/").dropFirst().first.map { ["--codec", String($0)] } ?? []
        let path = "\(dir)/k.\(ext)"
        let rate = 44100.0
        // Each time the file changes: how many frames a reader finds in it so far.
        let readable = Watched<Int64>(0)
        let watcher = try DirectoryWatcher(dir, everyWrite: true) { _ in
            if let file = try? AudioFile(path: path) { readable.update { $0 = max($0, file.packetTableInfo?.validFrames ?? file.totalFrames) } }
        }
        defer { watcher.stop() }
        // A real-time source: the frames captured grow with the clock.
        let recording = try RunningRecorder(Self.binary, ["--source", "null", "--rate", "44100", "--channels", "1"] + codec + [path])
        let started = recording.started
        #expect(await started.wait { $0 != nil })
        // Two seconds on the file: two checkpoints at least.
        let twoSeconds = Int64(2 * (ext == "opus" ? 48000 : rate))
        #expect(await readable.wait(timeout: .seconds(30)) { $0 >= twoSeconds })
        let elapsed = started.current.map { ContinuousClock.now - $0 } ?? .zero
        #expect(await recording.signal(SIGKILL) != nil)
        let captured = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        OpusDecoder.register()
        FLACDecoder.register()
        AVCodecAAC.register()
        let file = try AudioFile(path: path)
        let fileRate = file.dataFormat.sampleRate
        let valid = file.packetTableInfo?.validFrames ?? file.totalFrames
        let kept = Double(valid) / fileRate
        #expect(kept >= 2 && kept >= captured - 1.25, "the killed file plays \(kept) s; \(captured) s had been captured")
        #expect(kept <= captured + 0.5)
        // Its frames decode (this library, and ffmpeg reads it too).
        let renderer = try AudioFileRenderer(file: file)
        var scratch = [Float](repeating: 0, count: 4096)
        var rendered: Int64 = 0
        while true {
            let n = try scratch.withUnsafeMutableBufferPointer { try renderer.render(into: $0, frames: 4096) }
            if n == 0 { break }
            rendered += Int64(n)
        }
        #expect(rendered == valid)
        let probe = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-i", path, "-f", "s16le", "-ac", "1", "-"])
        #expect(probe.output.count / 2 >= Int(Double(rendered) * 0.9), "ffmpeg reads \(probe.output.count / 2) frames of the killed file")
    }
}

/// Writes a compressed input queue's packets to a file, from the input callback.
final class PacketSink: @unchecked Sendable {
    var writer: AudioFileWriter?
    var failure: (any Error)?
    let frames = Watched(0)
    private let lock = NSLock()

    func write(_ buffer: AudioQueueBuffer, _ captured: AudioCapturedFrames) {
        lock.withLock {
            do {
                try buffer.withUnsafeBytes { try writer?.writePackets(UnsafeRawBufferPointer(rebasing: $0.prefix(buffer.byteSize)), descriptions: captured.packetDescriptions) }
            } catch {
                failure = failure ?? error
            }
        }
        frames.update { $0 += captured.frameCount }
    }

    func close(totals: AudioEncodingTotals, cookie: [UInt8]?) throws {
        try lock.withLock { try writer?.close(totals: totals, magicCookie: cookie) }
    }
}

/// `aqrecord` running: when it said it records (stderr), what it printed (stdout); its exit is
/// watched by ``ChildExit``.
final class RunningRecorder {
    let process: Process
    let started = Watched<ContinuousClock.Instant?>(nil)
    let printed = Watched("")
    private let exit: ChildExit
    private let readers: [LineReader]

    init(_ binary: String, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        let stdout = Pipe(), stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        let (started, printed) = (self.started, self.printed)
        readers = [
            LineReader(stderr.fileHandleForReading, onEnd: {}) { line in
                if line.contains("recording") { started.update { $0 = $0 ?? .now } }
            },
            LineReader(stdout.fileHandleForReading, onEnd: {}) { line in printed.update { $0 += line } },
        ]
        self.process = process
        exit = try runWatched(process)
        for reader in readers { reader.start() }
    }

    /// Sends `signal` and returns the exit status; nil (the process killed, an issue recorded)
    /// when it has not ended within 20 seconds.
    func signal(_ signal: Int32) async -> Int32? {
        kill(process.processIdentifier, signal)
        if let status = await exit.wait(timeout: .seconds(20)) { return status }
        _ = await killAndWait(process, exit)
        Issue.record("aqrecord did not end after signal \(signal)")
        return nil
    }
}
