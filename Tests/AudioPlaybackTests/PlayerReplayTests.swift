import Foundation
import Testing
import AudioPlayback
import BufferQueue
import TestSupport
import SoxrConverter
import CodecTestSupport

/// A player that ended plays its list again when asked, with every frame again.
@Suite struct PlayerReplayTests {
    @Test func playAfterTheEndPlaysTheListAgain() async throws {
        let tone = TestPaths.fixture("tone-440hz-mono-s16.wav")   // 44 100 frames of PCM
        let player = AudioPlayer(items: [.file(tone), .file(tone)], configuration: .init(), makeSink: { NullSink(pacing: .unpaced) })
        let states = player.events()
        let first = try await player.play().framesPlayed
        #expect(first == 88_200)
        #expect(player.playerState == .finished && player.itemStates == [.finished, .finished])
        var seen: [AudioPlayerState] = []
        for await event in states { if case .state(let state) = event { seen.append(state) } }
        #expect(seen.last == .finished)
        // Again: the same frames, states from the start.
        let again = try await player.play().framesPlayed
        #expect(again == 88_200)
        #expect(player.playerState == .finished && player.itemStates == [.finished, .finished])
        let third = try await player.replay().framesPlayed
        #expect(third == 88_200)
    }
}

/// The time observer reports as sound plays and whenever the state changes, and ends with playback.
@Suite struct PlayerPositionTests {
    @Test func positionsMoveWhileSoundPlaysAndEndWithPlayback() async throws {
        let tone = TestPaths.fixture("tone-440hz-mono-s16.wav")   // 1 s
        let player = AudioPlayer(items: [.file(tone)],
                                 configuration: .init(buffering: .init(startSeconds: 0.2, restartSeconds: 0.2, maximumSeconds: 0.5)),
                                 makeSink: { NullSink(pacing: .realTime) })
        let positions = player.positions(every: .milliseconds(100))
        let collected = Task { () -> [AudioPlayer.Status] in
            var all: [AudioPlayer.Status] = []
            for await status in positions { all.append(status) }   // ends when playback ends
            return all
        }
        let frames = try await player.play().framesPlayed
        let all = await collected.value
        #expect(frames == 44_100)
        let moving = all.map(\.position).filter { $0 > 0 }
        // About ten reports in one second of sound (at least three on a loaded machine), rising.
        #expect(moving.count >= 3, "\(all.map(\.position))")
        #expect(moving == moving.sorted(), "\(moving)")
        #expect((moving.last ?? 0) <= 1.0 + 1e-9)
        // No update repeats the one before it (the start, item changes and the end gave the same value twice).
        let repeated = zip(all, all.dropFirst()).filter { $0 == $1 }
        #expect(repeated.isEmpty, "\(repeated.map(\.0))")
        // Once ended, a new observer gets the status at once and ends.
        var late: [AudioPlayer.Status] = []
        for await status in player.positions(every: .milliseconds(10)) { late.append(status) }
        #expect(late.count == 1)
    }

    /// `Status.outputFormat` is what the sink plays (44.1 kHz, the first item's), also while the
    /// next item (48 kHz, converted) is decoded ahead; it said 48 kHz then.
    @Test(.enabled(if: Where.tool("sox") != nil, "sox is missing"))
    func theOutputFormatIsTheSinks() async throws {
        let folder = try PlayerCrossfadeTests.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let a = try await PlayerCrossfadeTests.tone(folder, "a.wav", rate: 44_100, channels: 2, seconds: 0.6, frequency: 440)
        let b = try await PlayerCrossfadeTests.tone(folder, "b.wav", rate: 48_000, channels: 2, seconds: 0.3, frequency: 660)
        SoxrConverter.register()
        let player = AudioPlayer(items: [.file(a), .file(b)], configuration: .init(), makeSink: { NullSink(pacing: .realTime) })
        let positions = player.positions(every: .milliseconds(20))
        let collected = Task { () -> [AudioPlayer.Status] in
            var all: [AudioPlayer.Status] = []
            for await status in positions { all.append(status) }
            return all
        }
        _ = try await player.play()
        let rates = Set(await collected.value.compactMap { $0.outputFormat?.sampleRate })
        #expect(rates == [44_100], "\(rates)")
    }
}
