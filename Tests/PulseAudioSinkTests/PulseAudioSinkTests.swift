import Foundation
import Synchronization
import Testing
import BufferQueue
import PulseAudioSink
import AudioFileStream
import AudioPlayback
import AVCodecAAC
import FAADDecoder
import MPG123Decoder
import SoxrConverter
import TestSupport

/// The queue's events as they arrive; waits are woken by each new event, with a deadline.
final class Events: Sendable {
    private let list = Watched<[AudioQueueEvent]>([])
    private let task: Task<Void, Never>
    init(_ queue: AudioQueue) {
        let stream = queue.events()
        let list = self.list
        task = Task { for await event in stream { list.update { $0.append(event) } } }
    }
    var all: [AudioQueueEvent] { list.current }
    func wait(seconds: Double = 10, _ condition: @escaping @Sendable ([AudioQueueEvent]) -> Bool) async -> Bool {
        await list.wait(timeout: .milliseconds(Int(seconds * 1000)), until: condition)
    }
    static func runningChanges(_ events: [AudioQueueEvent]) -> [Bool] {
        events.compactMap { if case .runningChanged(let r) = $0 { return r } else { return nil } }
    }
    static func hasSinkError(_ events: [AudioQueueEvent]) -> Bool {
        events.contains { if case .error(let e) = $0 { return e.code == .sinkError } else { return false } }
    }
    /// The errors reported so far (a sink failure also stops the queue: a test waiting for a stop
    /// must tell that apart from a play-out that ended).
    var errors: [AudioQueueError] { all.compactMap { if case .error(let e) = $0 { return e } else { return nil } } }
    func waitForRunning(_ changes: [Bool]) async -> Bool { await wait { Self.runningChanges($0) == changes } }
    /// Waits for the first `runningChanged(false)`.
    func waitUntilStopped() async -> Bool { await wait { Self.runningChanges($0).contains(false) } }
    var runningChanges: [Bool] { Self.runningChanges(all) }
}

@Suite(.serialized, .enabled(if: !PrivateServer.missing, "pulseaudio or parec is missing (make deps installs pulseaudio and pulseaudio-utils): PulseAudio tests skipped"))
struct PulseAudioSinkTests {
    let format = AudioStreamDescription.float32(sampleRate: 44100, channels: 2)

    func makeQueue(_ server: PrivateServer, device: String? = "out") throws -> AudioQueue {
        let sink = PulseAudioSink(configuration: .init(server: server.address, device: device, targetLatency: .milliseconds(50), applicationName: "BufferQueueTests"))
        // The decode-ahead holds every input these tests play (up to 3 s) once primed: what the
        // server records cannot depend on how soon the decode worker gets a core.
        return try AudioQueue(format: format, configuration: .init(sink: sink, decodeBufferFrames: 131_072))
    }

    func buffer(_ queue: AudioQueue, _ samples: [Float]) throws -> AudioQueueBuffer {
        let buffer = try queue.allocateBuffer(capacity: samples.count * 4)
        try samples.withUnsafeBytes { try buffer.setData($0) }
        return buffer
    }

    /// What the queue renders offline for the same input: the reference for what must be heard.
    func offline(_ feed: (AudioQueue) throws -> Void) throws -> [Float] {
        let queue = try AudioQueue(format: format)
        try feed(queue)
        try queue.setOfflineRenderFormat(format)
        var out: [Float] = []
        var scratch = [Float](repeating: 0, count: 4096 * 2)
        while true {
            let n = try scratch.withUnsafeMutableBytes { try queue.offlineRender(at: queue.offlineRenderPosition, into: $0, frames: 4096) }
            if n == 0 { break }
            out += scratch[0..<(n * 2)]
        }
        return out
    }

    /// Plays what `feed` enqueues through a private server to the end; returns what its monitor
    /// recorded between the first and the last sound.
    func playToTheEnd(soundFrames: Int, _ feed: (AudioQueue) throws -> Void) async throws -> [Float] {
        let server = try await PrivateServer.start()
        try await server.startRecording()
        let queue = try makeQueue(server)
        let events = Events(queue)
        try feed(queue)
        try queue.prime()
        try queue.start()
        try queue.stop(immediately: false)
        #expect(await events.waitUntilStopped())
        #expect(events.errors.isEmpty, "the queue stopped with errors: \(events.errors); the server's last log lines:\n\(server.logTail.current.joined(separator: "\n"))")
        queue.dispose(immediately: true)
        return trimSilence(await server.stopRecording(soundFrames: soundFrames), channels: 2)
    }

    @Test func playedEqualsOfflineRenderBitForBit() async throws {
        let input = signal(frames: 30000)
        let feed: (AudioQueue) throws -> Void = { queue in
            try queue.setParameters(.init(volume: 0.5, pan: 0.2))
            try queue.enqueue(try self.buffer(queue, Array(input[0..<30000])), trimFramesAtStart: 1105)
            try queue.enqueue(try self.buffer(queue, Array(input[30000...])), trimFramesAtEnd: 47)
        }
        let expected = try offline(feed)
        #expect(expected.count == (30000 - 1105 - 47) * 2)
        let played = try await playToTheEnd(soundFrames: expected.count / 2, feed)
        #expect(difference(played, expected) == nil)
    }

    /// The thread that renders (libpulse's main loop) asks for SCHED_FIFO: it gets it where the
    /// system allows a thread of this process real-time scheduling, and plays normally otherwise.
    @Test func theRenderThreadIsRealTimeWhereAllowed() async throws {
        let server = try await PrivateServer.start()
        let sink = PulseAudioSink(configuration: .init(server: server.address, device: "out", targetLatency: .milliseconds(20), applicationName: "BufferQueueTests"))
        #expect(sink.renderThreadScheduling == nil, "nothing rendered yet")
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink, decodeBufferFrames: 131_072))
        let events = Events(queue)
        try queue.enqueue(try buffer(queue, signal(frames: 4410)))
        try queue.prime()
        try queue.start()
        try queue.stop(immediately: false)
        #expect(await events.waitUntilStopped())
        queue.dispose(immediately: true)
        let got = try #require(sink.renderThreadScheduling)
        if RealtimeScheduling.isPermitted {
            #expect(got == .realtime(priority: RealtimeScheduling.priority))
        } else {
            guard case .normal = got else { Issue.record("real-time scheduling is not permitted here, yet the sink says \(got)"); return }
        }
        await server.kill()
    }

    @Test func playlistAndLoopsArriveWithoutGapOrOverlap() async throws {
        let first = signal(frames: 7000), second = signal(frames: 5000, phase: 9999)
        var expected: [Float] = []
        for _ in 0..<3 { expected += Array(first[200...]) + Array(second[..<((5000 - 200) * 2)]) }
        let played = try await playToTheEnd(soundFrames: expected.count / 2) { queue in
            for _ in 0..<3 {   // a two-"file" playlist, looped three times
                try queue.enqueue(try self.buffer(queue, first), trimFramesAtStart: 100)
                try queue.enqueue(try self.buffer(queue, second), trimFramesAtEnd: 200)
            }
        }
        #expect(played.count == expected.count)   // frames between first and last sound: exact
        #expect(difference(played, expected) == nil)
    }

    @Test func pauseStopsTheTimelineAndResumesWithoutLoss() async throws {
        let server = try await PrivateServer.start()
        let input = signal(frames: 88200)   // 2 s
        try await server.startRecording()
        let queue = try makeQueue(server)
        let events = Events(queue)
        try queue.enqueue(try buffer(queue, input))
        try queue.prime()
        try queue.start()
        #expect(await server.waitForSound(frames: 17640))
        try queue.pause()
        let pausedAt = queue.currentTime().sampleTime
        // Paused: what the server held plays out, then no more sound comes and time stands still.
        let soundAtPause = withoutSilence(server.captured(), channels: 2).count / 2
        #expect(await !server.waitForSound(frames: soundAtPause + 4410 + 2205, timeout: .milliseconds(300)))
        #expect(queue.currentTime().sampleTime == pausedAt)
        #expect(pausedAt > 0 && pausedAt < 88200)
        // What was heard is what the recorder got, within the sink's 50 ms and the recorder's 20 ms.
        let heardSoFar = withoutSilence(server.captured(), channels: 2).count / 2
        #expect(abs(heardSoFar - Int(pausedAt)) <= 4410, "recorded \(heardSoFar) frames, currentTime says \(pausedAt)")
        try queue.start()
        try queue.stop(immediately: false)
        // Pause reports running false too: wait for the stop's, the fourth change.
        #expect(await events.waitForRunning([true, false, true, false]))
        let played = withoutSilence(await server.stopRecording(soundFrames: 88200), channels: 2)
        #expect(difference(played, input) == nil)
        queue.dispose(immediately: true)
    }

    @Test func resetDiscardsAndKeepsPlaying() async throws {
        let server = try await PrivateServer.start()
        let first = signal(frames: 132300), second = signal(frames: 22050, phase: 777)
        try await server.startRecording()
        let queue = try makeQueue(server)
        let events = Events(queue)
        try queue.enqueue(try buffer(queue, first))
        try queue.prime()
        try queue.start()
        #expect(await events.waitForRunning([true]))
        #expect(await server.waitForSound(frames: 17640))
        try queue.reset()
        #expect(queue.isRunning)
        try queue.enqueue(try buffer(queue, second))
        try queue.stop(immediately: false)
        #expect(await events.waitUntilStopped())
        let played = withoutSilence(await server.stopRecording(soundFrames: 17640 + 22050), channels: 2)
        // A prefix of the first buffer, then the whole second one: the rest of the first was discarded.
        #expect(played.count < first.count + second.count)
        #expect(played.count > second.count)
        let cut = played.count - second.count
        #expect(difference(Array(played[cut...]), second) == nil)
        #expect(difference(Array(played[..<cut]), Array(first[..<cut])) == nil)
        queue.dispose(immediately: true)
    }

    @Test func underrunIsReportedAndPlaybackRecovers() async throws {
        let server = try await PrivateServer.start()
        let first = signal(frames: 8820), second = signal(frames: 8820, phase: 4242)   // 0.2 s each
        try await server.startRecording()
        let queue = try makeQueue(server)
        let events = Events(queue)
        let timeline = try queue.makeTimeline()
        try queue.enqueue(try buffer(queue, first))
        try queue.prime()
        try queue.start()
        // The queue runs dry while started: an underrun, not an end.
        #expect(await events.wait { $0.contains { if case .underrun = $0 { return true } else { return false } } })
        #expect(queue.isRunning)
        #expect(queue.currentTime(in: timeline).discontinuity)
        // What the server still held plays out; then the heard position waits at the end of the
        // rendered audio for as long as the queue is starved (and no sound comes meanwhile).
        #expect(await server.waitForSound(frames: 8820))
        // The recorder has it all; the server's timing estimate may trail (by its 20 ms, more on a
        // loaded machine) but never runs ahead of what was rendered. Below, it settles there exactly.
        let heardNow = queue.currentTime().sampleTime
        #expect(heardNow <= 8820, "heard \(heardNow)")
        #expect(await !server.waitForSound(frames: 8821, timeout: .milliseconds(200)))
        #expect(queue.currentTime().sampleTime == 8820)
        try queue.enqueue(try buffer(queue, second))          // recovery: just feed it
        try queue.stop(immediately: false)
        #expect(await events.waitUntilStopped())
        let played = withoutSilence(await server.stopRecording(soundFrames: 17640), channels: 2)
        #expect(difference(played, first + second) == nil)
        queue.dispose(immediately: true)
    }

    @Test func stopImmediatelyIsSilentWithinTheLatency() async throws {
        let server = try await PrivateServer.start()
        try await server.startRecording()
        let queue = try makeQueue(server)
        try queue.enqueue(try buffer(queue, signal(frames: 176400)))   // 4 s
        try queue.prime()
        try queue.start()
        #expect(await server.waitForSound(frames: 22050))
        try queue.stop(immediately: true)
        let stoppedAt = server.captured().count / 2
        // Recording ends once 0.1 s of silence followed the sound: the stop was heard.
        let captured = await server.stopRecording()
        #expect(trimSilence(captured, channels: 2).count / 2 < 176400)
        // After the stop, only what the server (50 ms) and the recorder (20 ms) already held sounds.
        let afterStop = captured.count / 2 > stoppedAt ? Array(captured[(stoppedAt * 2)...]) : []
        #expect(trimSilence(afterStop, channels: 2).count / 2 <= 4410, "sound continued after stop(immediately: true)")
        queue.dispose(immediately: true)
    }

    /// A queue playing 10 s through a new private server, once it reports running.
    func playingTenSeconds() async throws -> (PrivateServer, AudioQueue, Events) {
        let server = try await PrivateServer.start()
        let queue = try makeQueue(server)
        let events = Events(queue)
        try queue.enqueue(try buffer(queue, signal(frames: 441000)))
        try queue.prime()
        try queue.start()
        #expect(await events.waitForRunning([true]))
        return (server, queue, events)
    }

    @Test(.timeLimit(.minutes(1)))
    func killingTheServerGivesAnErrorNotAHang() async throws {
        let (server, queue, events) = try await playingTenSeconds()
        let killed = Date()
        await server.kill()
        #expect(await events.wait(seconds: 5) { Events.hasSinkError($0) })
        #expect(Date().timeIntervalSince(killed) < 3)
        #expect(await events.waitForRunning([true, false]))
        #expect(!queue.isRunning)
        queue.dispose(immediately: true)   // must not hang
    }

    @Test(.timeLimit(.minutes(1)))
    func aRestartedServerIsPlayedToAgain() async throws {
        let (server, queue, events) = try await playingTenSeconds()
        await server.kill()
        #expect(await events.wait(seconds: 5) { Events.hasSinkError($0) })
        #expect(await events.waitForRunning([true, false]))
        // The server comes back at the same address: starting again reconnects and plays on.
        try await server.startDaemon()
        try await server.startRecording()
        try queue.start()
        #expect(await events.waitForRunning([true, false, true]), "\(events.all)")
        #expect(await server.waitForSound(frames: 4410))
        let heard = withoutSilence(await server.stopRecording(), channels: 2)
        #expect(heard.count / 2 > 4410, "recorded \(heard.count / 2) frames after the restart")
        queue.dispose(immediately: true)
    }

    static func changedTo(_ name: String) -> @Sendable ([AudioQueueEvent]) -> Bool {
        { $0.contains { if case .outputDeviceChanged(name) = $0 { return true } else { return false } } }
    }

    /// A stream that follows the default moves when the user picks another sink: the first
    /// sink's recording and the second's, joined, hold every frame once, in order.
    @Test(.timeLimit(.minutes(1)))
    func followingTheDefaultLosesAndRepeatsNothing() async throws {
        let server = try await PrivateServer.start()
        _ = try await server.addSink("two")
        try await server.startRecording(sink: "out")
        try await server.startRecording(sink: "two")
        let input = signal(frames: 88_200)   // 2 s
        let queue = try makeQueue(server, device: nil)
        let events = Events(queue)
        try queue.enqueue(try buffer(queue, input))
        try queue.prime()
        try queue.start()
        #expect(await server.waitForSound(frames: 22_050, sink: "out"))
        try await server.pactl(["set-default-sink", "two"])
        #expect(await events.wait(Self.changedTo("two")), "\(events.all)")
        try queue.stop(immediately: false)
        #expect(await events.waitUntilStopped())
        #expect(events.errors.isEmpty, "\(events.errors)")
        queue.dispose(immediately: true)
        let one = trimSilence(await server.stopRecording(soundFrames: 22_050, sink: "out"), channels: 2)
        let two = trimSilence(await server.stopRecording(soundFrames: 1, sink: "two"), channels: 2)
        #expect(one.count >= 44_100 && two.count >= 2, "\(one.count / 2) frames on out, \(two.count / 2) on two")
        #expect(difference(one + two, input) == nil)
    }

    /// When the default device in use goes away, the stream moves to the server's next default
    /// and continues from the next frame it renders (what the removed device held is lost with it).
    @Test(.timeLimit(.minutes(1)))
    func removingTheDefaultDeviceMovesToTheNext() async throws {
        let server = try await PrivateServer.start()
        let module = try await server.addSink("one")
        try await server.pactl(["set-default-sink", "one"])
        try await server.startRecording(sink: "out")
        let input = signal(frames: 88_200)
        let queue = try makeQueue(server, device: nil)
        let events = Events(queue)
        try queue.enqueue(try buffer(queue, input))
        try queue.prime()
        try queue.start()
        #expect(await events.waitForRunning([true]))
        try await server.pactl(["unload-module", "\(module)"])
        #expect(await events.wait(Self.changedTo("out")), "\(events.all)")
        try queue.stop(immediately: false)
        #expect(await events.waitUntilStopped())
        #expect(events.errors.isEmpty, "\(events.errors)")
        queue.dispose(immediately: true)
        let out = trimSilence(await server.stopRecording(soundFrames: 1, sink: "out"), channels: 2)
        #expect(out.count > 0 && out.count < input.count)
        #expect(difference(out, Array(input.suffix(out.count))) == nil, "what out played is the input's end, without a gap")
    }

    /// A stream pinned to a sink is not moved when the sink goes: the queue gets an error event.
    @Test(.timeLimit(.minutes(1)))
    func removingThePinnedSinkGivesAnError() async throws {
        let server = try await PrivateServer.start()
        let module = try await server.addSink("two")
        let queue = try makeQueue(server, device: "two")
        let events = Events(queue)
        try queue.enqueue(try buffer(queue, signal(frames: 441_000)))   // 10 s
        try queue.prime()
        try queue.start()
        #expect(await events.waitForRunning([true]))
        try await server.pactl(["unload-module", "\(module)"])
        #expect(await events.wait { Events.hasSinkError($0) }, "\(events.all)")
        #expect(!events.all.contains { if case .outputDeviceChanged = $0 { return true } else { return false } })
        queue.dispose(immediately: true)
    }

    /// The queue's channel layout reaches the server: a stream labelled right-then-left is
    /// played with its channels swapped on the stereo sink, bit for bit.
    @Test func channelLayoutReachesTheServer() async throws {
        let server = try await PrivateServer.start()
        try await server.startRecording()
        let queue = try makeQueue(server)
        let events = Events(queue)
        try queue.setChannelLayout(AudioChannelLayout(channelLabels: [.right, .left]))
        let input = signal(frames: 22050)
        try queue.enqueue(try buffer(queue, input))
        try queue.prime()
        try queue.start()
        try queue.stop(immediately: false)
        #expect(await events.waitUntilStopped())
        queue.dispose(immediately: true)
        let played = trimSilence(await server.stopRecording(soundFrames: 22050), channels: 2)
        var swapped = input
        for f in 0..<22050 { swapped.swapAt(2 * f, 2 * f + 1) }
        #expect(difference(played, swapped) == nil)
    }

    @Test func noServerIsAClearError() throws {
        let sink = PulseAudioSink(configuration: .init(server: "unix:/nonexistent/pulse/native"))
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink))
        try queue.enqueue(try buffer(queue, signal(frames: 100)))
        do {
            try queue.start()
            Issue.record("started without a server")
        } catch let error as AudioQueueError {
            #expect(error.code == .cannotStart)
            #expect(error.message.contains("no PulseAudio server"))
        }
        #expect(!PulseAudioSink.serverIsReachable(server: "unix:/nonexistent/pulse/native"))
    }
}

/// The player through a private server: a playlist of other rates and channel counts arrives as
/// one stream, each item converted to the output format, with the exact frame count.
@Suite(.serialized, .enabled(if: !PrivateServer.missing && TestPaths.sharedFixtures != nil,
                             "pulseaudio, parec or the shared fixtures are missing: player-through-PulseAudio test skipped"))
struct PlayerThroughPulseAudioTests {
    /// 44.1 kHz mono MP3, 48 kHz mono AAC, 22.05 kHz-core mono HE-AAC (implicit SBR).
    static let playlist = ["mp3-vbr-lame3.99-xing-mono-44k.mp3", "aac-lc-apple-voicememos-48k-mono.m4a", "gen-fdk-he-aac-v1-implicit-mono.aac"]

    func render(_ path: String) throws -> [Float] {
        let renderer = try AudioFileRenderer(file: try AudioFile(path: path), sampleRate: 44100, channels: 2)
        var all: [Float] = []
        var scratch = [Float](repeating: 0, count: 4096 * 2)
        while true {
            let n = try scratch.withUnsafeMutableBufferPointer { try renderer.render(into: $0, frames: 4096) }
            if n == 0 { break }
            all += scratch[0..<(n * 2)]
        }
        return all
    }

    @Test func aPlaylistOfOtherRatesPlaysWithTheExactFrameCount() async throws {
        MPG123Decoder.register()
        FAADDecoder.register()
        // libavcodec's AAC decoder goes ahead of libfaad2 once registered, and both give floats a
        // few ulps apart. Registered here, it decodes both the reference and the playlist even
        // when a test running in parallel registers it between the two (which once made the AAC
        // item differ from its first sample, at the join).
        AVCodecAAC.register()
        SoxrConverter.register()
        let paths = try Self.playlist.map { try #require(TestPaths.sharedFixtures).appendingPathComponent($0).path }
        let expected = try paths.flatMap { try render($0) }
        let itemFrames: [Int] = [172_740, 45_158, 94_208]   // 49 152 frames at 48 kHz: 45 158.4 at 44.1
        #expect(expected.count == itemFrames.reduce(0, +) * 2)

        let server = try await PrivateServer.start()
        try await server.startRecording()
        let player = AudioPlayer(items: paths.map { AudioPlayerItem.file($0) },
                                 configuration: .init(outputFormat: .fixed(sampleRate: 44100, channels: 2)),
                                 makeSink: {
                                         PulseAudioSink(configuration: .init(server: server.address, device: "out", targetLatency: .milliseconds(50),
                                                                             applicationName: "PlayerThroughPulseAudioTests"))
                                     })
        let frames = try await player.play().framesPlayed
        #expect(frames == Int64(expected.count / 2))
        let soundFrames = (0..<(expected.count / 2)).filter { expected[2 * $0] != 0 || expected[2 * $0 + 1] != 0 }.count
        let heard = trimSilence(await server.stopRecording(soundFrames: soundFrames), channels: 2)
        let reference = trimSilence(expected, channels: 2)
        #expect(heard.count == reference.count)   // between the first and the last sound: no gap, nothing lost
        #expect(difference(heard, reference) == nil)
        await server.kill()
    }
}
