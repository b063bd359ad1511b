import Foundation
import Testing
import ALSASink
import BufferQueue
import TestSupport

/// ALSA without hardware: a `file` PCM (over the `null` PCM) defined by configuration text writes
/// exactly what the sink plays to a raw file, padded with silence to whole periods.
@Suite(.serialized) struct ALSASinkTests {
    let format = AudioStreamDescription.float32(sampleRate: 44100, channels: 2)

    /// A signal never exactly zero: a slow sine on an offset, different per channel.
    func signal(frames: Int) -> [Float] {
        (0..<frames).flatMap { i -> [Float] in
            [0.2 + 0.15 * Float(sin(Double(i) * 0.031)), -0.1 + 0.25 * Float(sin(Double(i) * 0.0071))]
        }
    }

    func fileDevice(_ path: String) -> String {
        "pcm.aqtest { type file; slave.pcm \"null\"; file \"\(path)\"; format \"raw\" }"
    }

    /// Plays `samples` through an ALSA sink to the end and returns the sink's negotiated format.
    func play(_ samples: [Float], sink: ALSASink) async throws -> ALSASink.Negotiated? {
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink, decodeBufferFrames: 1 << 18))
        let stopped = Watched(false)
        let errors = Watched<[AudioQueueError]>([])
        let events = queue.events()
        Task {
            for await event in events {
                if case .runningChanged(false) = event { stopped.update { $0 = true } }
                if case .error(let error) = event { errors.update { $0.append(error) } }
            }
        }
        let buffer = try queue.allocateBuffer(capacity: samples.count * 4)
        try samples.withUnsafeBytes { try buffer.setData($0) }
        try queue.enqueue(buffer)
        // Everything is decoded before the start: the null device takes frames as fast as they
        // are written, and the file must not depend on how soon the decoder gets a core.
        try queue.prime()
        try queue.start()
        let negotiated = sink.negotiated
        try queue.stop(immediately: false)
        #expect(await stopped.wait(timeout: .seconds(20)) { $0 })
        #expect(errors.current.isEmpty, "\(errors.current)")
        queue.dispose(immediately: true)
        return negotiated
    }

    func temporaryFile() -> String { NSTemporaryDirectory() + "aq-alsa-\(UUID().uuidString.prefix(8)).raw" }

    @Test func float32ReachesTheFileBitForBit() async throws {
        let path = temporaryFile()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let sink = ALSASink(configuration: .init(device: "aqtest", targetLatency: .milliseconds(50), extraConfiguration: fileDevice(path)))
        let played = signal(frames: 100_000)
        let negotiated = try await play(played, sink: sink)
        #expect(negotiated?.sampleFormat == .float32)
        // The device thread asked for SCHED_FIFO, and got it where the system allows it.
        let permitted = RealtimeScheduling.isPermitted
        #expect(sink.renderThreadScheduling.map { $0 == .realtime(priority: RealtimeScheduling.priority) } == permitted,
                "\(String(describing: sink.renderThreadScheduling)), real-time permitted: \(permitted)")
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let written: [Float] = data.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
        // What was played, first and whole; after it only the silence that pads the last periods.
        #expect(written.count >= played.count)
        let head = written.prefix(played.count).elementsEqual(played)
        #expect(head)
        #expect(written.dropFirst(played.count).allSatisfy { $0 == 0 })
    }

    @Test func int16IsTheRoundedSignal() async throws {
        let path = temporaryFile()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let sink = ALSASink(configuration: .init(device: "aqtest", sampleFormat: .int16, extraConfiguration: fileDevice(path)))
        let played = signal(frames: 44_100)
        let negotiated = try await play(played, sink: sink)
        #expect(negotiated?.sampleFormat == .int16)
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let written: [Int16] = data.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
        let expected = played.map { Int16(($0 * 32768).rounded()) }
        #expect(written.count >= expected.count)
        let head = written.prefix(expected.count).elementsEqual(expected)
        #expect(head)
    }

    @Test func badDevicesAndConfigurationsAreClearErrors() throws {
        let queueFormat = format
        let missing = ALSASink(configuration: .init(device: "no_such_pcm_here"))
        #expect(throws: AudioQueueError.self) {
            _ = try AudioQueue(format: queueFormat, configuration: .init(sink: missing)).start()
        }
        let broken = ALSASink(configuration: .init(device: "aqtest", extraConfiguration: "pcm.aqtest { type"))
        do {
            let queue = try AudioQueue(format: queueFormat, configuration: .init(sink: broken))
            try queue.start()
            Issue.record("a configuration that does not parse was accepted")
        } catch let error as AudioQueueError {
            #expect(error.message.contains("aqtest"))
        }
    }

    @Test func devicesAreListed() {
        let names = ALSASink.devices().map(\.name)
        #expect(names.contains("null"))
    }
}
