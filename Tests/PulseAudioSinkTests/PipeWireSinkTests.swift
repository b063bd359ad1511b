import Foundation
import Testing
import BufferQueue
import PipeWireSink
import TestSupport

/// PipeWireSink against a private PipeWire with WirePlumber (no PulseAudio server), its sinks
/// recorded with pw-record.
@Suite(.serialized, .enabled(if: !PrivatePipeWire.missing, "\(PrivatePipeWire.missingTools.joined(separator: ", ")) missing (make deps installs pipewire, pipewire-bin, wireplumber and dbus): PipeWire tests skipped"))
struct PipeWireSinkTests {
    let format = AudioStreamDescription.float32(sampleRate: 48000, channels: 2)

    func makeQueue(_ server: PrivatePipeWire, target: String? = "out", format: AudioStreamDescription? = nil,
                   layout: AudioChannelLayout? = nil) throws -> (AudioQueue, PipeWireSink) {
        let sink = PipeWireSink(configuration: .init(remote: server.remote, target: target, targetLatency: .milliseconds(50),
                                                     applicationName: "BufferQueueTests"))
        let format = format ?? self.format
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink, decodeBufferFrames: 131_072))
        if let layout { try queue.setChannelLayout(layout) }
        return (queue, sink)
    }

    func buffer(_ queue: AudioQueue, _ samples: [Float]) throws -> AudioQueueBuffer {
        let buffer = try queue.allocateBuffer(capacity: samples.count * 4)
        try samples.withUnsafeBytes { try buffer.setData($0) }
        return buffer
    }

    /// Enqueues `samples`, plays them to the end and disposes of the queue; no error on the way.
    func playToTheEnd(_ queue: AudioQueue, _ samples: [Float]) async throws {
        let events = Events(queue)
        try queue.enqueue(try buffer(queue, samples))
        try queue.prime()
        try queue.start()
        try queue.stop(immediately: false)
        #expect(await events.waitUntilStopped())
        #expect(events.errors.isEmpty, "\(events.errors)")
        queue.dispose(immediately: true)
    }

    /// What the queue renders offline for the same input: what must be heard.
    func offline(format: AudioStreamDescription, _ feed: (AudioQueue) throws -> Void) throws -> [Float] {
        let queue = try AudioQueue(format: format)
        try feed(queue)
        try queue.setOfflineRenderFormat(format)
        let channels = format.channelsPerFrame
        var out: [Float] = []
        var scratch = [Float](repeating: 0, count: 4096 * channels)
        while true {
            let n = try scratch.withUnsafeMutableBytes { try queue.offlineRender(at: queue.offlineRenderPosition, into: $0, frames: 4096) }
            if n == 0 { break }
            out += scratch[0..<(n * channels)]
        }
        return out
    }

    @Test func playedEqualsOfflineRenderBitForBit() async throws {
        let input = signal(frames: 40000)
        let feed: (AudioQueue) throws -> Void = { queue in
            try queue.setParameters(.init(volume: 0.5, pan: 0.2))
            try queue.enqueue(try self.buffer(queue, Array(input[0..<30000])), trimFramesAtStart: 1105)
            try queue.enqueue(try self.buffer(queue, Array(input[30000...])), trimFramesAtEnd: 47)
        }
        let expected = try offline(format: format, feed)
        #expect(expected.count == (40000 - 1105 - 47) * 2)
        let server = try await PrivatePipeWire.start()
        try await server.startRecording()
        let (queue, sink) = try makeQueue(server)
        let events = Events(queue)
        try feed(queue)
        try queue.prime()
        try queue.start()
        try queue.stop(immediately: false)
        #expect(await events.waitUntilStopped())
        #expect(events.errors.isEmpty, "\(events.errors)")
        queue.dispose(immediately: true)
        let played = trimSilence(await server.stopRecording(soundFrames: expected.count / 2), channels: 2)
        #expect(played.count == expected.count)
        #expect(difference(played, expected) == nil)
        #expect(sink.renderThreadScheduling != nil, "the data thread rendered")
    }

    @Test func pauseAndResumeLoseNoFrame() async throws {
        let server = try await PrivatePipeWire.start()
        let input = signal(frames: 72000)   // 1.5 s
        try await server.startRecording()
        let (queue, _) = try makeQueue(server)
        let events = Events(queue)
        try queue.enqueue(try buffer(queue, input))
        try queue.prime()
        try queue.start()
        #expect(await events.waitForRunning([true]))
        try queue.pause()
        let pausedAt = queue.currentTime().sampleTime
        #expect(pausedAt < 72000)
        try queue.start()
        try queue.stop(immediately: false)
        #expect(await events.waitForRunning([true, false, true, false]))
        #expect(events.errors.isEmpty, "\(events.errors)")
        queue.dispose(immediately: true)
        let played = withoutSilence(await server.stopRecording(soundFrames: 72000), channels: 2)
        #expect(played.count == input.count)
        #expect(difference(played, input) == nil)
    }

    /// Without a target the stream goes to the default sink (WirePlumber's choice: the only one).
    @Test func aStreamWithoutTargetPlaysToTheDefaultSink() async throws {
        let server = try await PrivatePipeWire.start()
        let input = signal(frames: 9600)
        try await server.startRecording()
        let (queue, _) = try makeQueue(server, target: nil)
        try await playToTheEnd(queue, input)
        let played = trimSilence(await server.stopRecording(soundFrames: 9600), channels: 2)
        #expect(difference(played, input) == nil)
    }

    /// Six channels reach a 5.1 sink each at its position: the queue's default 6-channel layout is
    /// C L R Ls Rs LFE; the sink's channels are FL FR FC LFE RL RR, so the recording holds the
    /// input's channels 1, 2, 0, 5, 3, 4 — each bit for bit.
    @Test func fivePointOneArrivesAtItsPositions() async throws {
        let six = AudioStreamDescription.float32(sampleRate: 48000, channels: 6)
        let layout = AudioChannelLayout.default(channels: 6)
        #expect(layout.channelLabels == [.center, .left, .right, .leftSurround, .rightSurround, .lfeScreen])
        let server = try await PrivatePipeWire.start(positions: "FL FR FC LFE RL RR")
        let input = signal(frames: 9600, channels: 6)
        try await server.startRecording(channels: 6)
        let (queue, _) = try makeQueue(server, format: six, layout: layout)
        try await playToTheEnd(queue, input)
        let played = trimSilence(await server.stopRecording(soundFrames: 9600, channels: 6), channels: 6)
        let order = [1, 2, 0, 5, 3, 4]
        let expected = (0..<9600).flatMap { frame in order.map { input[frame * 6 + $0] } }
        #expect(difference(played, expected) == nil)
    }

    @Test(.timeLimit(.minutes(1)))
    func killingTheServerGivesAnErrorNotAHang() async throws {
        let server = try await PrivatePipeWire.start()
        let (queue, _) = try makeQueue(server)
        let events = Events(queue)
        try queue.enqueue(try buffer(queue, signal(frames: 480_000)))   // 10 s
        try queue.prime()
        try queue.start()
        #expect(await events.waitForRunning([true]))
        await server.kill()
        #expect(await events.wait { Events.hasSinkError($0) })
        queue.dispose(immediately: true)
    }

    /// A stream that follows the default moves when the user picks another sink: the first
    /// sink's recording and the second's, joined, hold every frame once, in order.
    @Test(.timeLimit(.minutes(1)))
    func followingTheDefaultLosesAndRepeatsNothing() async throws {
        let server = try await PrivatePipeWire.start(sinks: ["one", "two"])
        try await server.startRecording(sink: "one")
        try await server.startRecording(sink: "two")
        let input = signal(frames: 96_000)   // 2 s
        let (queue, _) = try makeQueue(server, target: nil)
        let events = Events(queue)
        try queue.enqueue(try buffer(queue, input))
        try queue.prime()
        try queue.start()
        #expect(await server.waitForSound(frames: 24_000, sink: "one"))
        try await server.setDefaultSink("two")
        #expect(await events.wait { $0.contains { if case .outputDeviceChanged("two") = $0 { return true } else { return false } } }, "\(events.all)")
        try queue.stop(immediately: false)
        #expect(await events.waitUntilStopped())
        #expect(events.errors.isEmpty, "\(events.errors)")
        queue.dispose(immediately: true)
        let one = trimSilence(await server.stopRecording(soundFrames: 24_000, sink: "one"), channels: 2)
        let two = trimSilence(await server.stopRecording(soundFrames: 1, sink: "two"), channels: 2)
        #expect(one.count >= 48_000 && two.count >= 2, "\(one.count / 2) frames on one, \(two.count / 2) on two")
        #expect(difference(one + two, input) == nil)
    }

    /// When the default device in use goes away, the stream moves to the next default and
    /// continues from the next frame it renders (what the removed device held is lost with it).
    @Test(.timeLimit(.minutes(1)))
    func removingTheDefaultDeviceMovesToTheNext() async throws {
        let server = try await PrivatePipeWire.start(sinks: ["one", "two"])
        try await server.startRecording(sink: "two")
        let input = signal(frames: 96_000)
        let (queue, _) = try makeQueue(server, target: nil)
        let events = Events(queue)
        try queue.enqueue(try buffer(queue, input))
        try queue.prime()
        try queue.start()
        #expect(await events.waitForRunning([true]))
        let one = try #require(try PipeWireSink.nodes(remote: server.remote).first { $0.name == "one" })
        _ = try await server.tool("pw-cli", ["destroy", "\(one.id)"])
        #expect(await events.wait { $0.contains { if case .outputDeviceChanged("two") = $0 { return true } else { return false } } }, "\(events.all)")
        try queue.stop(immediately: false)
        #expect(await events.waitUntilStopped())
        #expect(events.errors.isEmpty, "\(events.errors)")
        queue.dispose(immediately: true)
        let two = trimSilence(await server.stopRecording(soundFrames: 1, sink: "two"), channels: 2)
        #expect(two.count > 0 && two.count < input.count)
        #expect(difference(two, Array(input.suffix(two.count))) == nil, "what two played is the input's end, without a gap")
    }

    /// A stream pinned to a sink is not moved when the sink goes: the queue gets an error event.
    @Test(.timeLimit(.minutes(1)))
    func removingThePinnedSinkGivesAnError() async throws {
        let server = try await PrivatePipeWire.start(sinks: ["out", "other"])
        let (queue, _) = try makeQueue(server)
        let events = Events(queue)
        try queue.enqueue(try buffer(queue, signal(frames: 480_000)))   // 10 s
        try queue.prime()
        try queue.start()
        #expect(await events.waitForRunning([true]))
        let out = try #require(try PipeWireSink.nodes(remote: server.remote).first { $0.name == "out" })
        let removed = try await server.tool("pw-cli", ["destroy", "\(out.id)"])
        #expect(removed.status == 0, "\(String(decoding: removed.errorOutput, as: UTF8.self))")
        #expect(await events.wait { Events.hasSinkError($0) }, "\(events.all)")
        queue.dispose(immediately: true)
    }

    @Test func probeSaysWhetherAServerServesAudio() async throws {
        let server = try await PrivatePipeWire.start()
        if case .failure(let error) = PipeWireSink.probe(remote: server.remote) { Issue.record("no answer from a running server: \(error)") }
        guard case .failure(let error) = PipeWireSink.probe(remote: server.runtime + "/nothing-here") else {
            Issue.record("a server answered where none runs")
            return
        }
        #expect(error.description.contains("nothing-here"), "\(error)")
        #expect(PipeWireSink.libraryVersion?.hasPrefix("0.3") == true || PipeWireSink.libraryVersion?.hasPrefix("1.") == true)
        // The node list: the sink WirePlumber made the default.
        let sinks = try PipeWireSink.devices(remote: server.remote)
        #expect(sinks.map(\.name) == ["out"])
        #expect(sinks.first?.isDefault == true)
    }
}
