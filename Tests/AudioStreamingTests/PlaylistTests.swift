import Foundation
import Testing
import AudioFileStream
import AudioPlayback
@testable import AudioStreaming
import BufferQueue
import MPG123Decoder
import TestSupport

/// The player as a podcast app meets it: a playlist of HTTP items, seeks from each item's
/// "started" event (which means heard), an item appended while playing, per-item states, the
/// positions seeks report, and exactly the frames that the seeks and the list ask for.
@Suite(.serialized) struct PlaylistTests {
    /// Three different chirps (never periodic: a slice of one is found at one place only), 3 s
    /// each, MP3 by LAME through ffmpeg: their files and their renders.
    static func chirps(in folder: String) async throws -> [(path: String, bytes: [UInt8])] {
        var made: [(String, [UInt8])] = []
        for (index, (low, high)) in [(220.0, 40.0), (330.0, 55.0), (180.0, 70.0)].enumerated() {
            let path = folder + "/chirp\(index).mp3"
            let result = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i",
                                                               "aevalsrc=0.4*sin(2*PI*(\(low)+\(high)*t)*t)|0.3*sin(2*PI*(\(low * 1.5)+\(high)*t)*t):s=44100:d=3",
                                                               "-c:a", "libmp3lame", "-b:a", "128k", path])
            #expect(result.status == 0, "ffmpeg could not encode chirp \(index)")
            made.append((path, Array(try Data(contentsOf: URL(fileURLWithPath: path)))))
        }
        return made
    }

    /// Where `piece` (its first 2048 frames) starts in `samples`, at or after `from`.
    static func find(_ piece: [Float], in samples: [Float], from: Int) -> Int? {
        let window = Array(piece.prefix(4096))
        guard window.count == 4096 else { return nil }
        var i = from
        while i + window.count <= samples.count {
            if samples[i] == window[0], Array(samples[i..<(i + window.count)]) == window { return i }
            i += 2
        }
        return nil
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/ffmpeg"), "ffmpeg is missing"))
    func seeksFromStartedEventsAndAnAppendedItem() async throws {
        MPG123Decoder.register()
        let folder = NSTemporaryDirectory() + "playlist-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let files = try await Self.chirps(in: folder)
        let server = try LoopbackServer(files: ["a.mp3": files[0].bytes, "b.mp3": files[1].bytes, "c.mp3": files[2].bytes], faultyPath: nil)
        defer { server.shutdown() }

        let recorded = Watched<[Float]>([])
        let events = Watched<[AudioPlayerEvent]>([])
        let player = AudioPlayer(items: [.url(server.url("a.mp3"), configuration: quick), .url(server.url("b.mp3"), configuration: quick)],
                                 configuration: .init(buffering: .init(startSeconds: 0.3, restartSeconds: 0.3, maximumSeconds: 1),
                                                      record: { samples, _ in recorded.update { $0 += samples } }),
                                 makeSink: { NullSink(pacing: .realTime) })
        let third = AudioPlayerItem.url(server.url("c.mp3"), configuration: quick)
        let seeks = Watched<[Double]>([])
        // Any number of consumers: one reacts, one only records.
        let reacting = player.events()
        let recording = player.events()
        let recorder = Task { for await event in recording { events.update { $0.append(event) } } }
        let reactor = Task {
            for await event in reacting {
                guard case .itemStarted(let index, _, _, _) = event else { continue }
                let status = player.status
                #expect(status.itemIndex == index, "started \(index), status says \(String(describing: status.itemIndex))")
                #expect(status.duration > 2.9 && status.duration < 3.1, "item \(index) is \(status.duration) s long")
                if index == 0 { player.append(third) }
                if index < 2 {
                    let target = index == 0 ? 1.0 : 0.5
                    let reached = try await player.seek(to: target)
                    seeks.update { $0.append(reached) }
                    let after = player.status
                    #expect(after.itemIndex == index && abs(after.position - target) < 0.05, "right after the seek: \(after)")
                }
            }
        }
        let played = try await player.play().framesPlayed
        try await reactor.value
        await recorder.value

        // The seeks report where they landed.
        #expect(seeks.current == [1.0, 0.5])
        // Per-item states, in order.
        let byItem = Dictionary(grouping: events.current.compactMap { event -> (AudioPlayerItem.ID, AudioPlayerItemState)? in
            if case .itemState(_, let id, let state) = event { return (id, state) } else { return nil }
        }, by: \.0).mapValues { $0.map(\.1) }
        let ids = player.items.map(\.id)
        #expect(ids.count == 3 && ids[2] == third.id)
        #expect(byItem[ids[0]]?.last == .finished && byItem[ids[0]]?.contains(.playing) == true, "\(byItem[ids[0]] ?? [])")
        #expect(byItem[ids[1]]?.last == .finished && byItem[ids[1]]?.contains(.playing) == true, "\(byItem[ids[1]] ?? [])")
        #expect(byItem[ids[2]]?.first == .queued && byItem[ids[2]]?.last == .finished, "\(byItem[ids[2]] ?? [])")
        #expect(player.itemStates == [.finished, .finished, .finished])
        #expect(player.playerState == .finished)

        // Exactly the frames asked for: each item from its start until the seek, then from the
        // position reached to its end; the third whole.
        let a = try localRender(files[0].path), b = try localRender(files[1].path), c = try localRender(files[2].path)
        let aFrom = try localRender(files[0].path, startSeconds: 1.0), bFrom = try localRender(files[1].path, startSeconds: 0.5)
        let all = recorded.current
        #expect(Int64(all.count / 2) == played)
        let seekA = try #require(Self.find(aFrom, in: all, from: 0), "item a from 1.0 s is not in what was heard")
        #expect(Array(all[0..<seekA]) == Array(a[0..<seekA]), "before the seek: item a from its start")
        let afterA = seekA + aFrom.count
        #expect(Array(all[seekA..<afterA]) == aFrom)
        let seekB = try #require(Self.find(bFrom, in: all, from: afterA), "item b from 0.5 s is not in what was heard")
        #expect(Array(all[afterA..<seekB]) == Array(b[0..<(seekB - afterA)]), "before the seek: item b from its start")
        let afterB = seekB + bFrom.count
        #expect(Array(all[seekB..<afterB]) == bFrom)
        #expect(Array(all[afterB...]) == c, "the appended item, whole and last")
        #expect(all.count == seekA + aFrom.count + (seekB - afterA) + bFrom.count + c.count)
    }

    /// A seek in a live stream (no length) is refused with an error to the caller, and playback
    /// goes on from what is buffered: nothing is dropped, the player does not end.
    @Test func aLiveStreamRefusesASeekAndPlaysOn() async throws {
        MPG123Decoder.register()
        var faults = LoopbackServer.Faults()
        faults.live = true
        faults.ranges = false   // as a radio server: no length, no Range
        // Ten seconds with no header that says how long (as a station's stream): a fixture of
        // 1.1 s could play out, on a loaded machine, before the frames after the refused seek
        // were counted, and the test then took the end of the stream for a stop.
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("live-\(UUID()).mp3").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let made = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=f=440:d=10", "-ac", "2",
                                                         "-c:a", "libmp3lame", "-b:a", "128k", "-write_xing", "0", path])
        try #require(made.status == 0, "ffmpeg could not make the stream")
        let server = try LoopbackServer(body: Array(try Data(contentsOf: URL(fileURLWithPath: path))), faults: faults)
        defer { server.shutdown() }
        let recorded = Watched<Int>(0)
        let player = AudioPlayer(items: [.url(server.url("live"), configuration: quick)],
                                 configuration: .init(buffering: .init(startSeconds: 0.2, restartSeconds: 0.2, maximumSeconds: 0.5),
                                                      record: { samples, _ in recorded.update { $0 += samples.count / 2 } }),
                                 makeSink: { NullSink(pacing: .realTime) })
        let done = Task { try await player.play() }
        try #require(await recorded.wait(timeout: .seconds(20)) { $0 >= 8820 }, "playback did not get going")
        let refusal = await #expect(throws: AudioPlayerError.self) { try await player.seek(to: 5) }
        #expect(refusal?.stage == .request && refusal?.itemIndex == 0, "\(String(describing: refusal))")
        #expect(player.playerState != .seeking)
        // Playback goes on: more frames reach the sink after the refused seek.
        let before = recorded.current
        #expect(await recorded.wait(timeout: .seconds(20)) { $0 >= before + 8820 },
                "playback stopped after the refused seek: \(player.playerState), \(recorded.current) frames, \(before) before; \(player.status)")
        player.stop()
        _ = try? await done.value
    }
}
