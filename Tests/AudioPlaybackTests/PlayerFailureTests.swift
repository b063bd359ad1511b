import Foundation
import Testing
import AudioFileStream
import AudioPlayback
import BufferQueue
import FLACDecoder
import MPG123Decoder
import SoxrConverter
import CodecTestSupport
import TestSupport
import Synchronization

/// An item that fails does not end the list (`onItemFailure: .skip`, the default), and damage that
/// does not stop an item is reported, not hidden.
@Suite struct PlayerFailureTests {
    final class Events: Sendable {
        let list = Mutex<[AudioPlayerEvent]>([])
        func add(_ event: AudioPlayerEvent) { list.withLock { $0.append(event) } }
        var failedItems: [Int] {
            list.withLock { $0.compactMap { if case .itemState(let index, _, .failed) = $0 { return index } else { return nil } } }
        }
        var finishedItems: [Int] {
            list.withLock { $0.compactMap { if case .itemState(let index, _, .finished) = $0 { return index } else { return nil } } }
        }
        var skippedItems: [Int] {
            list.withLock { $0.compactMap { if case .itemSkipped(let index, _, _) = $0 { return index } else { return nil } } }
        }
        var warnings: [(Int, String)] {
            list.withLock { $0.compactMap { if case .itemWarning(let index, _, let text) = $0 { return (index, text) } else { return nil } } }
        }
    }

    static func player(_ paths: [String], policy: AudioPlayerItemFailurePolicy = .skip) -> (AudioPlayer, SinkCollector, Events) {
        MPG123Decoder.register()
        FLACDecoder.register()
        SoxrConverter.register()
        let collector = SinkCollector(), events = Events()
        let player = AudioPlayer(items: paths.map { AudioPlayerItem.file($0) },
                                 configuration: .init(onItemFailure: policy, onEvent: { events.add($0) }, decoders: AACDecoderChoice.current.registry),
                                 makeSink: { collector.make() })
        return (player, collector, events)
    }

    static func garbage() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("garbage-\(UUID()).mp3").path
        var random = SplitMix(seed: 7)
        try Data((0..<4_000).map { _ in UInt8(truncatingIfNeeded: random.next()) }).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test func badFilesInTheMiddleAreSkippedAndTheRestJoinsGaplessly() async throws {
        let mp3 = Where.fixture("lame-vbr-v2-44k-stereo.mp3"), wav = Where.fixture("tone-440hz-mono-s16.wav")
        let bad = try Self.garbage()
        defer { try? FileManager.default.removeItem(atPath: bad) }
        let missing = "/nonexistent/\(UUID()).flac"
        let expected = try await rendered(mp3).samples + rendered(wav, channels: 2).samples
        let (player, collector, events) = Self.player([mp3, bad, missing, wav])
        // The list plays to its end; the report lists the skipped items with their errors.
        let report = try await player.play()
        #expect(report.skipped.map(\.itemIndex) == [1, 2])
        #expect(report.skipped.map(\.itemName) == [bad, missing])
        #expect(report.itemsPlayed == 2 && report.framesPlayed == Int64(expected.count / 2) && !report.isComplete)
        #expect(player.playerState == .finished)
        #expect(collector.captured.count == 1)
        #expect(difference(collector.captured.first ?? [], expected) == nil, "the two good files, joined without a gap")
        #expect(events.failedItems == [1, 2])
        #expect(events.finishedItems.contains(0) && events.finishedItems.contains(3), "\(events.finishedItems)")
        let states = player.itemStates
        #expect(states.count == 4)
        if case .failed(let error) = states[1] { #expect(error.itemName == bad && error.stage == .open) } else { Issue.record("\(states[1])") }
    }

    @Test func theStopPolicyEndsPlaybackWithTheError() async throws {
        let mp3 = Where.fixture("lame-vbr-v2-44k-stereo.mp3")
        let missing = "/nonexistent/\(UUID()).wav"
        let (player, _, _) = Self.player([mp3, missing, mp3], policy: .stop)
        await #expect { _ = try await player.play() } throws: { error in
            (error as? AudioPlayerError)?.itemIndex == 1 && (error as? AudioPlayerError)?.stage == .open
        }
    }

    @Test func aListOfOnlyBadItemsIsNoSuccess() async throws {
        let bad = try Self.garbage()
        defer { try? FileManager.default.removeItem(atPath: bad) }
        let (player, _, events) = Self.player([bad, "/nonexistent/\(UUID()).mp3"])
        // Nothing could play: the first item's error says why (as Playback.md says).
        await #expect { _ = try await player.play() } throws: { ($0 as? AudioPlayerError)?.itemIndex == 0 }
        #expect(events.failedItems == [0, 1])
        #expect(events.skippedItems == [0, 1])
    }

    /// A FLAC cut in the middle: what it holds plays, and the player says why it is short.
    @Test(.enabled(if: ["sox", "flac"].allSatisfy { Where.tool($0) != nil }, "sox or flac is missing (make deps installs them)"))
    func aTruncatedFLACInAPlaylistIsReported() async throws {
        let flac = try await XiphFiles.encode(try await XiphFiles.source(channels: 2, rate: 44_100, frames: 189_631), "flac", [], ext: "flac")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: flac))
        let cut = FileManager.default.temporaryDirectory.appendingPathComponent("cut-\(UUID()).flac").path
        defer { try? FileManager.default.removeItem(atPath: cut) }
        try bytes.prefix(bytes.count * 4 / 10).write(to: URL(fileURLWithPath: cut))
        let mp3 = Where.fixture("lame-vbr-v2-44k-stereo.mp3")
        let (player, collector, events) = Self.player([mp3, cut, mp3])
        let frames = try await player.play().framesPlayed
        #expect(collector.captured.first?.count == Int(frames) * 2)
        let file = try AudioFile(path: cut)
        let held = (0..<file.packetCount).reduce(Int64(0)) { $0 + Int64(file.frames(ofPacket: $1)) }
        #expect(held > 0 && held < 189_631)
        #expect(frames == 2 * 48_510 + held, "the cut file played what it holds (\(held) frames)")
        let warnings = events.warnings
        #expect(warnings.contains { $0.0 == 1 && $0.1.contains("STREAMINFO says 189631 samples") }, "\(warnings.map(\.1))")
        #expect(warnings.allSatisfy { $0.0 == 1 })
    }

    /// A WAV's length is exact (fixed-size packets, nothing to trim); so is a file with gapless numbers.
    @Test func aWAVsDurationIsExact() throws {
        for (name, frames) in [("tone-440hz-mono-s16.wav", Int64(44_100)), ("ulaw-8k-mono.wav", nil), ("lame-vbr-v2-44k-stereo.mp3", 48_510)] {
            let source = FilePacketSource(file: try AudioFile(path: Where.fixture(name)))
            let duration = try #require(source.duration)
            #expect(!duration.isEstimated, "\(name)")
            if let frames { #expect(duration.frames == frames, "\(name)") }
        }
    }
}
