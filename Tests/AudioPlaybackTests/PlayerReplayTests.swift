import Testing
import AudioPlayback
import BufferQueue
import TestSupport

/// A player that ended plays its list again when asked, with every frame again.
@Suite struct PlayerReplayTests {
    @Test func playAfterTheEndPlaysTheListAgain() async throws {
        let tone = TestPaths.fixture("tone-440hz-mono-s16.wav")   // 44 100 frames of PCM
        let player = AudioPlayer(items: [.file(tone), .file(tone)], makeSink: { NullSink(pacing: .unpaced) })
        let states = player.events()
        let first = try await player.play()
        #expect(first == 88_200)
        #expect(player.playerState == .finished && player.itemStates == [.finished, .finished])
        var seen: [AudioPlayerState] = []
        for await event in states { if case .state(let state) = event { seen.append(state) } }
        #expect(seen.last == .finished)
        // Again: the same frames, states from the start.
        let again = try await player.play()
        #expect(again == 88_200)
        #expect(player.playerState == .finished && player.itemStates == [.finished, .finished])
        let third = try await player.replay()
        #expect(third == 88_200)
    }
}
