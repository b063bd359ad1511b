import Foundation
import Testing
import BufferQueue
import PipeWireSink
import TestSupport

/// PipeWireSource against a private PipeWire: what `pw-play` plays to a sink is recorded from it.
@Suite(.serialized, .enabled(if: !PrivatePipeWire.missing, "\(PrivatePipeWire.missingTools.joined(separator: ", ")) missing (make deps installs pipewire, pipewire-bin, wireplumber and dbus): PipeWire tests skipped"))
struct PipeWireSourceTests {
    let format = AudioStreamDescription.float32(sampleRate: 48000, channels: 2)

    /// A float32 WAV file of `samples` (what pw-play reads).
    static func floatWAV(_ samples: [Float], rate: Int, channels: Int) -> Data {
        var data = Data()
        func append<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.littleEndian) { data.append(contentsOf: $0) } }
        let bytes = samples.count * 4
        data.append(contentsOf: Array("RIFF".utf8)); append(UInt32(36 + bytes))
        data.append(contentsOf: Array("WAVEfmt ".utf8)); append(UInt32(16))
        append(UInt16(3)); append(UInt16(channels)); append(UInt32(rate)); append(UInt32(rate * channels * 4))
        append(UInt16(channels * 4)); append(UInt16(32))
        data.append(contentsOf: Array("data".utf8)); append(UInt32(bytes))
        samples.withUnsafeBytes { data.append(contentsOf: $0) }
        return data
    }

    /// An input queue recording what the server's sink `out` plays, re-enqueuing every buffer of 0.1 s.
    func recordingQueue(_ server: PrivatePipeWire, _ recorder: Recorder) throws -> AudioInputQueue {
        let source = PipeWireSource(configuration: .monitor(of: "out", remote: server.remote))
        let queue = try AudioInputQueue(format: format, configuration: .init(source: source)) { queue, buffer, frames in
            recorder.record(buffer, frames, channels: 2)
            try? queue.enqueue(buffer)
        }
        recorder.watch(queue)
        for _ in 0..<4 { try queue.enqueue(queue.allocateBuffer(capacity: 4800 * format.bytesPerFrame)) }
        return queue
    }

    @Test func theSinksOutputIsRecordedBitForBit() async throws {
        let server = try await PrivatePipeWire.start()
        let recorder = Recorder()
        let queue = try recordingQueue(server, recorder)
        try queue.start()
        // The stream delivers (silence) once linked.
        #expect(await recorder.take.wait { $0.counts.count >= 2 })
        #expect(queue.sourceFormat == format)
        let played = signal(frames: 48_000)
        let file = server.runtime + "/played.wav"
        // pw-play (0.3.65) ends before its last quantum is played: a quarter second of silence
        // after the signal keeps that loss off it.
        try Self.floatWAV(played + [Float](repeating: 0, count: 24_000), rate: 48000, channels: 2).write(to: URL(fileURLWithPath: file))
        let play = try await server.tool("pw-play", ["--target", "out", file])
        #expect(play.status == 0, "\(String(decoding: play.errorOutput, as: UTF8.self))")
        // Everything played, then a tenth of a second of silence, has been recorded.
        #expect(await recorder.take.wait { $0.soundFrames >= 48_000 && $0.silentTail >= 4800 })
        try queue.stop(immediately: true)
        #expect(await recorder.take.wait { $0.running == [true, false] })
        let take = recorder.take.current
        #expect(difference(trimSilence(take.samples, channels: 2), played) == nil)
        #expect(zip(take.starts, take.starts.dropFirst()).allSatisfy { $0.0 + 4800 == $0.1 })
        #expect(take.overruns.isEmpty)
        #expect(take.errors.isEmpty)
        queue.dispose(immediately: true)
    }

    @Test(.timeLimit(.minutes(1)))
    func killingTheServerGivesAnError() async throws {
        let server = try await PrivatePipeWire.start()
        let recorder = Recorder()
        let queue = try recordingQueue(server, recorder)
        try queue.start()
        #expect(await recorder.take.wait { $0.counts.count >= 2 })
        await server.kill()
        #expect(await recorder.take.wait { !$0.errors.isEmpty })
        queue.dispose(immediately: true)
    }
}
