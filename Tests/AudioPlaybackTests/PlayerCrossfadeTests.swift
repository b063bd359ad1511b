import Foundation
import Testing
import AudioFileStream
import AudioPlayback
import BufferQueue
import SoxrConverter
import CodecTestSupport
import MPG123Decoder
import TestSupport
import Synchronization

/// The crossfading player against the crossfade as its documentation defines it, computed here
/// from each item's own render: the outgoing item up to its last D frames, D frames of
/// `a · out(i) + b · in(i)`, then the rest of the incoming item.
@Suite(.enabled(if: Where.tool("sox") != nil, "sox is missing"))
struct PlayerCrossfadeTests {
    final class Events: Sendable {
        let list = Mutex<[AudioPlayerEvent]>([])
        func add(_ event: AudioPlayerEvent) { list.withLock { $0.append(event) } }
        var shortened: [(index: Int, frames: Int, requested: Int)] {
            list.withLock { $0.compactMap { if case .crossfadeShortened(let index, _, let frames, let requested) = $0 { (index, frames, requested) } else { nil } } }
        }
        var started: [Int] { list.withLock { $0.compactMap { if case .itemStarted(let index, _, _, _) = $0 { index } else { nil } } } }
    }

    /// The test's own gains, in double precision, as the documentation states them.
    static func gains(_ curve: AudioFadeCurve, _ i: Int, _ d: Int) -> (out: Float, in: Float) {
        let x = Double(i) / Double(d)
        switch curve {
        case .linear: return (Float(1 - x), Float(x))
        case .equalPower: return (Float(cos(Double.pi / 2 * x)), Float(sin(Double.pi / 2 * x)))
        }
    }

    /// `a` then `b` crossfaded over min(d, frames of a, frames of b) frames.
    static func crossfaded(_ a: [Float], _ b: [Float], channels: Int, frames d: Int, curve: AudioFadeCurve) -> [Float] {
        let lenA = a.count / channels, lenB = b.count / channels, m = min(d, lenA, lenB)
        var out = Array(a[0..<((lenA - m) * channels)])
        for i in 0..<m {
            let g = gains(curve, i, m)
            for c in 0..<channels { out.append(a[(lenA - m + i) * channels + c] * g.out + b[i * channels + c] * g.in) }
        }
        return out + b[(m * channels)...]
    }

    /// A tone file made by sox: `seconds` long at `rate` with `channels`.
    static func tone(_ folder: URL, _ name: String, rate: Int, channels: Int, seconds: Double, frequency: Int) async throws -> String {
        let path = folder.appendingPathComponent(name).path
        let made = try await runTool(try #require(Where.tool("sox")), ["-r", "\(rate)", "-n", "-r", "\(rate)", "-c", "\(channels)", "-b", "16", path,
                                                                        "synth", "\(seconds)", "sine", "\(frequency)", "vol", "0.5"])
        try #require(made.status == 0)
        return path
    }

    static func folder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("crossfade-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    static func play(_ paths: [String], crossfade: AudioPlayerCrossfade?, outputFormat: AudioPlayer.OutputFormat = .firstItem,
                     decoders: AudioDecoderRegistry = .shared) async throws -> (heard: [Float], frames: Int64, events: Events) {
        SoxrConverter.register()
        let collector = SinkCollector(), events = Events()
        let player = AudioPlayer(items: paths.map { AudioPlayerItem.file($0) },
                                 configuration: .init(outputFormat: outputFormat, crossfade: crossfade, onEvent: { events.add($0) },
                                                      decoders: decoders),
                                 makeSink: { collector.make() })
        let frames = try await player.play().framesPlayed
        #expect(collector.captured.count == 1)
        return (collector.captured.first ?? [], frames, events)
    }

    @Test(arguments: AudioFadeCurve.allCases)
    func itemsJoinWithTheDefinedCrossfadeAcrossARateChange(_ curve: AudioFadeCurve) async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let a = try await Self.tone(folder, "a.wav", rate: 44_100, channels: 2, seconds: 1.0, frequency: 440)
        let b = try await Self.tone(folder, "b.wav", rate: 44_100, channels: 2, seconds: 0.8, frequency: 660)
        // Another rate and channel count: converted to the output format (the first item's) first.
        let c = try await Self.tone(folder, "c.wav", rate: 48_000, channels: 1, seconds: 0.6, frequency: 550)
        let d = Int((0.25 * 44_100).rounded())
        SoxrConverter.register()
        let (ra, rb) = (try await rendered(a).samples, try await rendered(b).samples)
        let rc = try await rendered(c, sampleRate: 44_100, channels: 2).samples
        let expected = Self.crossfaded(Self.crossfaded(ra, rb, channels: 2, frames: d, curve: curve), rc, channels: 2, frames: d, curve: curve)
        #expect(expected.count / 2 == 44_100 + 35_280 + rc.count / 2 - 2 * d)
        let (heard, frames, events) = try await Self.play([a, b, c], crossfade: try AudioPlayerCrossfade(seconds: 0.25, curve: curve))
        #expect(frames == Int64(expected.count / 2))
        #expect(difference(heard, expected) == nil)
        #expect(events.shortened.isEmpty)
    }

    @Test func aCrossfadeLongerThanAnItemIsShortenedAndSaysSo() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let a = try await Self.tone(folder, "a.wav", rate: 44_100, channels: 2, seconds: 1.0, frequency: 440)
        let short = try await Self.tone(folder, "s.wav", rate: 44_100, channels: 2, seconds: 0.1, frequency: 880)
        let b = try await Self.tone(folder, "b.wav", rate: 44_100, channels: 2, seconds: 0.5, frequency: 660)
        let (ra, rs, rb) = (try await rendered(a).samples, try await rendered(short).samples, try await rendered(b).samples)
        let d = Int((0.25 * 44_100).rounded())
        // The short item fades in over its whole length; nothing of it is left to fade out: the next join is gapless.
        let expected = Self.crossfaded(ra, rs, channels: 2, frames: d, curve: .linear) + rb
        let (heard, frames, events) = try await Self.play([a, short, b], crossfade: try AudioPlayerCrossfade(seconds: 0.25, curve: .linear))
        #expect(frames == Int64(expected.count / 2))
        #expect(difference(heard, expected) == nil)
        let shortened = events.shortened
        #expect(shortened.map(\.index) == [1, 2])
        #expect(shortened.map(\.frames) == [4_410, 0])
        #expect(shortened.allSatisfy { $0.requested == d })
    }

    /// MP3 items: each item's middle goes to the queue as packets (decoded there from a pre-roll,
    /// as libmpg123's traits say joins exactly) between its edges rendered for the mixes — three
    /// decoders an item, where an item rendered whole has one; the whole equals the crossfade of
    /// each item's own linear render, bit for bit.
    @Test(.enabled(if: Where.tool("lame") != nil, "lame is missing (make deps installs it)"))
    func mp3ItemsCrossfadeBitForBitWithTheirMiddlesDecodedByTheQueue() async throws {
        registerAllDecoders()
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        var mp3s: [String] = []
        for (name, seconds, frequency) in [("a", 1.5, 440), ("b", 1.2, 660), ("c", 0.9, 550)] {
            let wav = try await Self.tone(folder, "\(name).wav", rate: 44_100, channels: 2, seconds: seconds, frequency: frequency)
            let mp3 = folder.appendingPathComponent("\(name).mp3").path
            _ = try await run(try #require(Where.tool("lame")), ["--quiet", "-b", "128", wav, mp3])
            mp3s.append(mp3)
        }
        var renders: [[Float]] = []
        for mp3 in mp3s { renders.append(try await rendered(mp3).samples) }
        let d = Int((0.3 * 44_100).rounded())
        let expected = Self.crossfaded(Self.crossfaded(renders[0], renders[1], channels: 2, frames: d, curve: .equalPower), renders[2],
                                       channels: 2, frames: d, curve: .equalPower)
        // libmpg123 as registered, counting the decoders made.
        let made = Atomic<Int>(0)
        let counted = AudioDecoderRegistry()
        counted.register(AudioDecoderFactory(name: "counted libmpg123", formats: [.mpegLayer3], priority: 10, traits: MPG123Decoder.traits) { format, _ in
            made.add(1, ordering: .relaxed)
            return try MPG123Decoder(format: format)
        })
        let (heard, frames, events) = try await Self.play(mp3s, crossfade: try AudioPlayerCrossfade(seconds: 0.3), decoders: counted)
        #expect(frames == Int64(expected.count / 2))
        #expect(difference(heard, expected) == nil)
        #expect(events.shortened.isEmpty)
        #expect(made.load(ordering: .relaxed) == 3 * mp3s.count, "the items' middles were not decoded by the player's queue")
    }

    /// A source that claims an exact length longer than its packets hold (what a stream whose
    /// bytes stop early looks like until they stop).
    final class ClaimingSource: PacketSource {
        let base: FilePacketSource
        let claimed: Int64
        init(_ path: String, claiming frames: Int64) throws {
            base = FilePacketSource(file: try AudioFile(path: path))
            claimed = frames
        }
        var isReady: Bool { base.isReady }
        var format: AudioStreamDescription { base.format }
        var magicCookie: [UInt8]? { base.magicCookie }
        var packetTable: AudioFilePacketTableInfo? { nil }
        var rollDistance: Int? { base.rollDistance }
        var duration: (frames: Int64, isEstimated: Bool)? { (claimed, false) }
        var title: String? { nil }
        func packet(forFrame frame: Int64) -> Int64? { base.packet(forFrame: frame) }
        func frame(forPacket packet: Int64) -> Int64? { base.frame(forPacket: packet) }
        func seek(toPacket packet: Int64) throws { try base.seek(toPacket: packet) }
        func read(maxPackets: Int, maxBytes: Int) throws -> PacketRead { try base.read(maxPackets: maxPackets, maxBytes: maxBytes) }
    }

    /// An incoming item that ends before the exact length it claimed (its frames are mixed into
    /// the held ones as they come): what it gave is mixed by the curve, the outgoing item still
    /// fades out to its end, and the next item follows without a crossfade (nothing of the short
    /// one is left), which an event says.
    @Test func anItemEndingBeforeItsClaimedLengthStillFadesTheOneBeforeOut() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let a = try await Self.tone(folder, "a.wav", rate: 44_100, channels: 2, seconds: 1.0, frequency: 440)
        let short = try await Self.tone(folder, "s.wav", rate: 44_100, channels: 2, seconds: 0.05, frequency: 880)
        let c = try await Self.tone(folder, "c.wav", rate: 44_100, channels: 2, seconds: 0.3, frequency: 660)
        let (ra, rs, rc) = (try await rendered(a).samples, try await rendered(short).samples, try await rendered(c).samples)
        let d = Int((0.25 * 44_100).rounded())
        #expect(rs.count / 2 == 2_205)
        // The short item's frames, then silence, against the outgoing item's last D.
        let expected = Self.crossfaded(ra, rs + [Float](repeating: 0, count: 2 * d - rs.count), channels: 2, frames: d, curve: .equalPower) + rc
        let collector = SinkCollector(), events = Events()
        let items = [AudioPlayerItem.file(a), AudioPlayerItem(name: "claims a second") { _ in try ClaimingSource(short, claiming: 44_100) },
                     AudioPlayerItem.file(c)]
        let player = AudioPlayer(items: items,
                                 configuration: .init(crossfade: try AudioPlayerCrossfade(seconds: 0.25), onEvent: { events.add($0) }),
                                 makeSink: { collector.make() })
        let frames = try await player.play().framesPlayed
        let heard = try #require(collector.captured.first)
        #expect(frames == Int64(expected.count / 2))
        #expect(difference(heard, expected) == nil)
        #expect(events.shortened.map(\.index) == [2])
        #expect(events.shortened.map(\.frames) == [0])
    }

    /// Each item's gain scales its own frames, from its first frame: gaplessly (the queue's gain
    /// per buffer) and before the mix of a crossfade.
    @Test(arguments: [0.0, 0.1])
    func eachItemsGainScalesItsOwnFrames(_ seconds: Double) async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let a = try await Self.tone(folder, "a.wav", rate: 44_100, channels: 2, seconds: 0.5, frequency: 440)
        let c = try await Self.tone(folder, "c.wav", rate: 48_000, channels: 1, seconds: 0.4, frequency: 550)
        SoxrConverter.register()
        let ra = try await rendered(a).samples.map { $0 * 0.5 }
        let rc = try await rendered(c, sampleRate: 44_100, channels: 2).samples.map { $0 * 2 }
        let expected = Self.crossfaded(ra, rc, channels: 2, frames: Int((seconds * 44_100).rounded()), curve: .equalPower)
        let collector = SinkCollector()
        var quiet = AudioPlayerItem.file(a)
        quiet.gain = 0.5
        let player = AudioPlayer(items: [quiet, AudioPlayerItem.file(c).withGain(decibels: 20 * log10(2))],
                                 configuration: .init(crossfade: try AudioPlayerCrossfade(seconds: seconds)),
                                 makeSink: { collector.make() })
        _ = try await player.play()
        let heard = try #require(collector.captured.first)
        #expect(difference(heard, expected) == nil)
    }

    @Test func zeroSecondsIsTheGaplessJoinBitForBit() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let a = try await Self.tone(folder, "a.wav", rate: 44_100, channels: 2, seconds: 0.5, frequency: 440)
        let c = try await Self.tone(folder, "c.wav", rate: 48_000, channels: 1, seconds: 0.4, frequency: 550)
        let gapless = try await Self.play([a, c], crossfade: nil)
        let zero = try await Self.play([a, c], crossfade: try AudioPlayerCrossfade(seconds: 0))
        #expect(zero.frames == gapless.frames)
        #expect(difference(zero.heard, gapless.heard) == nil)
        #expect(zero.events.shortened.isEmpty)
    }

    @Test func aCrossfadeNeedsOneOutputFormat() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let a = try await Self.tone(folder, "a.wav", rate: 44_100, channels: 2, seconds: 0.2, frequency: 440)
        await #expect(throws: AudioPlayerError.self) {
            _ = try await Self.play([a, a], crossfade: try AudioPlayerCrossfade(seconds: 0.1), outputFormat: .itemFormat)
        }
        #expect(throws: AudioQueueError.self) { _ = try AudioPlayerCrossfade(seconds: -1) }
    }

    /// On a skip the item heard fades out from the frame reached while the next fades in: what
    /// the sink got is the first item up to there, the defined mix, and the rest of the next item.
    @Test func skipCrossfadesFromWhereTheItemIsHeard() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let a = try await Self.tone(folder, "a.wav", rate: 44_100, channels: 2, seconds: 4, frequency: 440)
        let b = try await Self.tone(folder, "b.wav", rate: 44_100, channels: 2, seconds: 0.6, frequency: 660)
        let (ra, rb) = (try await rendered(a).samples, try await rendered(b).samples)
        let collector = SinkCollector(), events = Events()
        let player = AudioPlayer(items: [.file(a), .file(b)],
                                 configuration: .init(crossfade: try AudioPlayerCrossfade(seconds: 0.2, curve: .equalPower),
                                                      onEvent: { events.add($0) }),
                                 makeSink: { collector.make(pacing: .realTime) })
        let playing = Task { try await player.play() }
        for await status in player.positions(every: .milliseconds(20)) where status.position >= 0.3 {
            await player.skip()
            break
        }
        let frames = try await playing.value.framesPlayed
        // A sink on a clock pulls silence once the queue has played out: the frames before it are the queue's.
        let captured = try #require(collector.captured.first)
        #expect(captured.count >= Int(frames) * 2)
        let heard = Array(captured.prefix(Int(frames) * 2))
        #expect(captured.dropFirst(Int(frames) * 2).allSatisfy { $0 == 0 })
        let d = Int((0.2 * 44_100).rounded())
        let lenB = rb.count / 2
        // The frame reached: everything before the mix is the first item's.
        let reached = Int(frames) - lenB
        #expect(reached > 0 && reached < 3 * 44_100, "\(reached) frames before the mix; \(frames) heard; \(events.list.withLock { $0 })")
        guard reached > 0, reached + d <= ra.count / 2 else { return }
        let expected = Array(ra[0..<(reached * 2)]) + Self.crossfaded(Array(ra[(reached * 2)..<((reached + d) * 2)]), rb, channels: 2, frames: d, curve: .equalPower)
        #expect(difference(heard, expected) == nil)
        #expect(events.started == [0, 1])
    }

    /// A seek while an item's middle plays as packets: the item goes on from the frame sought (its
    /// middle again as packets, in a new stream after the reset) and crossfades into the next as
    /// defined (or joins it gaplessly: the gapless player). The rest of the list fits in the
    /// player's free buffers, so the jump feeds all of it at once: the seek still answers with
    /// the position reached (it said "playback ended before the seek took effect" before).
    @Test(arguments: [true, false])
    func aSeekInAnItemThenItsJoinIntoTheNext(_ crossfading: Bool) async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let a = try await Self.tone(folder, "a.wav", rate: 44_100, channels: 2, seconds: 3, frequency: 440)
        let b = try await Self.tone(folder, "b.wav", rate: 44_100, channels: 2, seconds: 0.6, frequency: 660)
        let (ra, rb) = (try await rendered(a).samples, try await rendered(b).samples)
        let collector = SinkCollector(), events = Events()
        let player = AudioPlayer(items: [.file(a), .file(b)],
                                 configuration: .init(crossfade: crossfading ? try AudioPlayerCrossfade(seconds: 0.2, curve: .equalPower) : nil,
                                                      onEvent: { events.add($0) }),
                                 makeSink: { collector.make(pacing: .realTime) })
        let playing = Task { try await player.play() }
        var reachedSeek: Double?
        for await status in player.positions(every: .milliseconds(20)) where status.position >= 0.3 {
            reachedSeek = try await player.seek(to: 2)
            break
        }
        let frames = try await playing.value.framesPlayed
        #expect(reachedSeek == 2)
        let captured = try #require(collector.captured.first)
        let heard = Array(captured.prefix(Int(frames) * 2))
        let d = crossfading ? Int((0.2 * 44_100).rounded()) : 0
        let after = Self.crossfaded(Array(ra[(88_200 * 2)...]), rb, channels: 2, frames: d, curve: .equalPower)
        // The frames heard before the seek: the first item's from its start.
        let reached = Int(frames) - after.count / 2
        #expect(reached > 0 && reached < 2 * 44_100, "\(reached) frames before the seek; \(frames) heard")
        guard reached > 0, reached <= ra.count / 2 else { return }
        #expect(difference(heard, Array(ra[0..<(reached * 2)]) + after) == nil)
        #expect(events.started == [0, 1])
    }

    static let aqplay = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        .appendingPathComponent("aqplay").path

    /// `aqplay --crossfade --crossfade-curve`: what it records is the defined mix, and a shortened
    /// crossfade is said on standard error.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: aqplay), "aqplay is not built beside the tests"))
    func aqplayCrossfades() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let a = try await Self.tone(folder, "a.wav", rate: 44_100, channels: 2, seconds: 0.6, frequency: 440)
        let b = try await Self.tone(folder, "b.wav", rate: 44_100, channels: 2, seconds: 0.1, frequency: 660)
        let out = folder.appendingPathComponent("out.wav").path
        let result = try await runTool(Self.aqplay, ["--fast", "--crossfade", "0.2", "--crossfade-curve", "linear", "--record", out, a, b])
        let errors = String(decoding: result.errorOutput, as: UTF8.self)
        #expect(result.status == 0, "\(errors)")
        #expect(errors.contains("the crossfade into b.wav is 4410 frames"), "\(errors)")
        let expected = Self.crossfaded(try await rendered(a).samples, try await rendered(b).samples, channels: 2, frames: 8_820, curve: .linear)
        let recorded = try await rendered(out).samples
        #expect(difference(recorded, expected) == nil)
    }
}

/// `itemStarted` marks the item's first frame at the sink, also when items are resampled to the output.
@Suite(.enabled(if: Where.tool("sox") != nil, "sox is missing"))
struct PlayerItemStartTests {
    final class Seen: Sendable {
        let frames = Mutex<[Int: Int]>([:])
    }

    /// Gapless and crossfading, and with a sink that holds 400 ms (the latency it reports is in
    /// output frames; the queue's timeline counts source frames).
    @Test(arguments: [(false, 0), (true, 0), (false, 400)])
    func itemStartedLandsWithTheItemsFirstFrameAtTheSink(_ crossfading: Bool, _ latencyMilliseconds: Int) async throws {
        let folder = try PlayerCrossfadeTests.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let a = try await PlayerCrossfadeTests.tone(folder, "a.wav", rate: 44_100, channels: 2, seconds: 1.0, frequency: 440)
        let b = try await PlayerCrossfadeTests.tone(folder, "b.wav", rate: 44_100, channels: 2, seconds: 0.6, frequency: 660)
        SoxrConverter.register()
        let sink = NullSink(pacing: .realTime, latency: .milliseconds(latencyMilliseconds), period: .milliseconds(10))
        let held = latencyMilliseconds * 48
        let seen = Seen()
        var configuration = AudioPlayer.Configuration(outputFormat: .fixed(sampleRate: 48_000, channels: 2))
        configuration.crossfade = crossfading ? try AudioPlayerCrossfade(seconds: 0.1) : nil
        configuration.onEvent = { event in
            if case .itemStarted(let index, _, _, _) = event { seen.frames.withLock { $0[index] = sink.framesReceived - held } }
        }
        let player = AudioPlayer(items: [.file(a), .file(b)], configuration: configuration) { sink }
        _ = try await player.play()
        // Item 1's first frame at the sink: item 0's 48 000 frames (less the crossfade).
        let first = 48_000 - (crossfading ? 4_800 : 0)
        let at = try #require(seen.frames.withLock { $0[1] })
        // Within one render quantum (10 ms: 480 frames), and two more for the event's way to the
        // handler, which the sink's clock keeps counting (a ThreadSanitizer run on a loaded machine
        // took more than one). The late marks this guards against were 40–60 ms (1 920–2 880 frames)
        // and 0.35–0.42 s late.
        #expect(at >= first && at <= first + 480 * 3, "itemStarted(1) when the sink had played \(at) frames; the item's first frame is frame \(first)")
    }
}
