import Foundation
import Testing
import AudioFileStream
import AudioPlayback
import BufferQueue
import CodecTestSupport
import TestSupport
import Synchronization

/// The player's fades at pause, resume, seek and stop (`transitionFade`): against a paced null
/// sink with a device buffer, what is handed to the sink is every frame of the item, the fade's
/// frames scaled by the documented gains, and what the device plays has no step larger than the
/// tone's own.
@Suite(.enabled(if: Where.tool("sox") != nil, "sox is missing"))
struct PlayerTransitionFadeTests {
    final class Recording: Sendable {
        let samples = Mutex<[Float]>([])
        func add(_ buffer: UnsafeBufferPointer<Float>) { samples.withLock { $0.append(contentsOf: buffer) } }
    }

    /// The largest step between consecutive frames of any channel.
    static func largestStep(_ samples: [Float], channels: Int) -> Float {
        var largest: Float = 0
        var index = channels
        while index < samples.count {
            largest = max(largest, abs(samples[index] - samples[index - channels]))
            index += 1
        }
        return largest
    }

    @Test func aPauseFadesOutAndInAndLosesNoFrame() async throws {
        let folder = try PlayerCrossfadeTests.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = try await PlayerCrossfadeTests.tone(folder, "a.wav", rate: 44_100, channels: 2, seconds: 1.5, frequency: 441)
        let source = try await rendered(path).samples
        let fade = 441   // 10 ms
        let sink = NullSink(pacing: .realTime, latency: .milliseconds(40), capturing: true)
        let recording = Recording()
        let player = AudioPlayer(items: [.file(path)],
                                 configuration: .init(transitionFade: 0.01, record: { buffer, _ in recording.add(buffer) }),
                                 makeSink: { sink })
        let playing = Task { try await player.play() }
        #expect(await sink.waitForFrames(20_000))
        let pausedAt = sink.framesReceived
        player.pause()
        // The sink pauses once the fade and the device's buffer have played (the hold's silence
        // after the fade): then it has pulled the fade at least.
        #expect(await sink.waitUntilStopped())
        #expect(sink.framesReceived >= pausedAt + fade)
        player.resume()
        let frames = try await playing.value.framesPlayed

        // Every frame of the item was handed to the sink, once.
        #expect(frames == Int64(source.count / 2))
        let heard = recording.samples.withLock { $0 }
        #expect(heard.count == source.count)
        // The item with a fade out ending where it paused and a fade in from there: gains 1 - i/N,
        // then i/N, for i = 1 ... N.
        let first = try #require(heard.indices.first { abs(heard[$0] - source[$0]) > 1e-6 }) / 2
        #expect(first > 0 && first + 2 * fade <= source.count / 2)
        func faded(from start: Int) -> [Float] {
            var expected = source
            for i in 1...fade {
                let out = Float(1 - Double(i) / Double(fade)), into = Float(Double(i) / Double(fade))
                for c in 0..<2 {
                    expected[(start - 1 + i) * 2 + c] *= out
                    expected[(start - 1 + fade + i) * 2 + c] *= into
                }
            }
            return expected
        }
        // The first frame of the fade out is the first that differs (its gain is 1 - 1/N), or the
        // one before when the tone is too near 0 there for a difference over 1e-6 (the 441 Hz
        // tone crosses 0 every 50 frames).
        let hidden = (0..<2).allSatisfy { abs(source[(first - 1) * 2 + $0]) <= 1e-6 * Float(fade) }
        let start = hidden ? first - 1 : first
        #expect(difference(heard, faded(from: start), tolerance: 1e-6) == nil)
        // What the device played: the tone, the fades and silence between, with no click.
        let device = sink.capturedSamples()
        #expect(device.count > heard.count)
        #expect(Self.largestStep(device, channels: 2) <= Self.largestStep(source, channels: 2) * 1.01)
    }

    @Test func aSeekAndAStopFadeToo() async throws {
        let folder = try PlayerCrossfadeTests.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = try await PlayerCrossfadeTests.tone(folder, "a.wav", rate: 44_100, channels: 2, seconds: 3, frequency: 441)
        let source = try await rendered(path).samples
        let sink = NullSink(pacing: .realTime, latency: .milliseconds(40), capturing: true)
        let player = AudioPlayer(items: [.file(path)], configuration: .init(transitionFade: 0.01), makeSink: { sink })
        let playing = Task { try await player.play() }
        #expect(await sink.waitForFrames(20_000))
        // A seek to a place where the tone is at another phase: without the fades, a step.
        let reached = try await player.seek(to: 1.2345)
        #expect(abs(reached - 1.2345) < 1.0 / 44_100)
        let afterSeek = sink.framesReceived
        #expect(await sink.waitForFrames(afterSeek + 20_000))
        player.stop()
        _ = try? await playing.value
        let device = sink.capturedSamples()
        #expect(Self.largestStep(device, channels: 2) <= Self.largestStep(source, channels: 2) * 1.01)
        // It played past the seek, and the stop's fade ended in silence.
        #expect(device.count / 2 > afterSeek)
        #expect(abs(device[device.count - 2]) < 1e-6 && abs(device[device.count - 1]) < 1e-6)
    }
}
