import Foundation
import Testing
import TestSupport
import ALSASink
import BufferQueue

/// ALSA underrun recovery against a device with a clock. ALSA's `null` PCM takes frames as fast
/// as they come and never runs dry, so this test plays through ALSA's `pulse` plugin (Debian's
/// `libasound2-plugins`) to the private PulseAudio server, with `handle_underrun` on so that a
/// server underflow is an xrun, under a `file` PCM that keeps every frame the sink wrote.
@Suite(.serialized, .enabled(if: !PrivateServer.missing && ALSAPulsePlugin.path != nil,
                             "pulseaudio or ALSA's pulse plugin is missing (make deps installs pulseaudio and libasound2-plugins): ALSA underrun test skipped"))
struct ALSAUnderrunTests {
    let format = AudioStreamDescription.float32(sampleRate: 44100, channels: 2)

    /// A ramp that never repeats within the test and is never zero: frame i is (i+1)/2^20 on the
    /// left and its negative on the right, exact in float32.
    func ramp(frames: Int) -> [Float] {
        (0..<frames).flatMap { i -> [Float] in let v = Float(i + 1) / Float(1 << 20); return [v, -v] }
    }

    @Test func aStalledProducerIsAnUnderrunAndNoFrameIsLostOrRepeated() async throws {
        let server = try await PrivateServer.start()
        defer { Task { await server.kill() } }
        let path = temporaryFile()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let sink = clockedSink(server, file: path)
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink, decodeBufferFrames: 1 << 18))
        let events = Events(queue)
        // The injected fault: once 0.5 s has been pulled, the render thread stalls for 0.4 s (ten
        // times the device's buffer) inside the tap. A deadline, not a wait for a condition: the
        // thread that would see the xrun is the one stalled.
        let stalled = Watched(false)
        try queue.installProcessingTap(.preEffects) { tap, frames, output, _ in
            let got = tap.getSourceAudio(frames: frames, into: output)
            if got.sampleTime >= 22_050, stalled.update({ done in defer { done = true }; return !done }) {
                Thread.sleep(forTimeInterval: 0.4)
            }
            return got.frames
        }
        let played = ramp(frames: 88_200)
        try startPlaying(played, on: queue)
        try queue.stop(immediately: false)
        #expect(await events.waitUntilStopped(), "playback did not end")
        #expect(events.errors.isEmpty, "\(events.errors)")
        queue.dispose(immediately: true)
        #expect(stalled.current, "the tap never stalled")
        let underruns = events.all.filter { if case .underrun = $0 { return true } else { return false } }.count
        #expect(underruns >= 1, "the device ran dry for 0.4 s and no underrun was reported: \(events.all)")

        // The recovery neither dropped nor repeated a period.
        try expectFile(path, holds: played)
    }

    @Test func aPausedDeviceResumesAndPlaysEveryFrameOnce() async throws {
        let server = try await PrivateServer.start()
        defer { Task { await server.kill() } }
        let path = temporaryFile()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let queue = try AudioQueue(format: format, configuration: .init(sink: clockedSink(server, file: path), decodeBufferFrames: 1 << 18))
        let events = Events(queue)
        // The render thread says how far it has pulled (the device plays in real time).
        let pulled = Watched(Int64(0))
        try queue.installProcessingTap(.preEffects) { tap, frames, output, _ in
            let got = tap.getSourceAudio(frames: frames, into: output)
            pulled.update { $0 = got.sampleTime + Int64(got.frames) }
            return got.frames
        }
        let played = ramp(frames: 44_100)
        try startPlaying(played, on: queue)
        #expect(await pulled.wait { $0 >= 11_025 }, "the device did not take 0.25 s")
        // Paused, the device thread waits on a condition; the start must wake it.
        try queue.pause()
        try queue.start()
        // Nothing but the start wakes it: the stop comes once everything has been rendered.
        #expect(await pulled.wait { $0 >= 44_100 }, "the device thread did not resume (pulled \(pulled.current) frames)")
        try queue.stop(immediately: false)
        // Running changes with the pause, the resumption and the end.
        #expect(await events.waitForRunning([true, false, true, false]), "playback did not end after the pause: \(events.all)")
        #expect(events.errors.isEmpty, "\(events.errors)")
        queue.dispose(immediately: true)
        try expectFile(path, holds: played)
    }

    /// Enqueues `samples` in one buffer, decodes them all ahead (`prime`) and starts.
    func startPlaying(_ samples: [Float], on queue: AudioQueue) throws {
        let buffer = try queue.allocateBuffer(capacity: samples.count * 4)
        try samples.withUnsafeBytes { try buffer.setData($0) }
        try queue.enqueue(buffer)
        try queue.prime()
        try queue.start()
    }

    func temporaryFile() -> String { NSTemporaryDirectory() + "aq-alsa-pulse-\(UUID().uuidString.prefix(8)).raw" }

    /// An ALSA sink on a file PCM over the private server's sink: a device with a clock.
    func clockedSink(_ server: PrivateServer, file path: String) -> ALSASink {
        let configuration = """
        pcm.aqpulse { type file; file "\(path)"; format "raw"
          slave.pcm { type pulse; server "\(server.address)"; device "out"; handle_underrun true } }
        """
        return ALSASink(configuration: .init(device: "aqpulse", targetLatency: .milliseconds(40), extraConfiguration: configuration))
    }

    /// Every frame the sink wrote reached the device once, in order: the file holds `played`
    /// whole (nothing dropped or repeated), then only the silence that pads the last period.
    func expectFile(_ path: String, holds played: [Float]) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let written: [Float] = data.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
        #expect(written.count >= played.count, "the file holds \(written.count / 2) frames, \(played.count / 2) were played")
        let firstDifference = zip(written, played).enumerated().first { $0.element.0 != $0.element.1 }?.offset
        #expect(firstDifference == nil, "the file differs from what was played at frame \((firstDifference ?? 0) / 2)")
        let tailSilent = written.dropFirst(played.count).allSatisfy { $0 == 0 }
        #expect(tailSilent)
    }
}
