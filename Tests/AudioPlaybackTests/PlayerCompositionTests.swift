import Foundation
import Testing
import AudioCodecs
import AudioFileStream
import AudioPlayback
import BufferQueue
import CodecTestSupport
import MPG123Decoder
import SoxrConverter
import TestSupport
import Synchronization

/// The player's features at once — crossfade, each item's gain (ReplayGain tags, its own gain),
/// an equaliser on the path, items that fail — against a model built from each item's own
/// render: each item × its gain, joined by the crossfade's curve (or gaplessly), through the
/// equaliser computed in double precision. And the events and the report that say what happened.
@Suite(.enabled(if: ["sox", "flac", "metaflac", "lame"].allSatisfy { Where.tool($0) != nil },
                "sox, flac, metaflac or lame is missing (make deps installs them)"))
struct PlayerCompositionTests {
    final class Events: Sendable {
        let list = Mutex<[AudioPlayerEvent]>([])
        func add(_ event: AudioPlayerEvent) { list.withLock { $0.append(event) } }
        var all: [AudioPlayerEvent] { list.withLock { $0 } }
        /// Per item index, the names of its events in order (opened, started, finished, skipped, warning).
        var perItem: [Int: [String]] {
            var result: [Int: [String]] = [:]
            for event in all {
                switch event {
                case .itemOpened(let index, _, _, _): result[index, default: []].append("opened")
                case .itemStarted(let index, _, _, _): result[index, default: []].append("started")
                case .itemState(let index, _, .finished): result[index, default: []].append("finished")
                case .itemSkipped(let index, _, _): result[index, default: []].append("skipped")
                default: break
                }
            }
            return result
        }
        var starts: [(index: Int, outputFrame: Int64, gain: Double)] {
            all.compactMap { if case .itemStarted(let index, _, let frame, let gain) = $0 { (index, frame, gain) } else { nil } }
        }
    }

    /// The material: three tones in a folder of their own, two of them FLACs tagged with known
    /// ReplayGain values, one an MP3; and a text file named like an MP3.
    struct Material {
        let folder: URL
        let a: String, b: String, c: String, notAudio: String
        /// The tags' track gains (dB) and peaks.
        static let tags: [(gain: Double, peak: Double)] = [(-3.5, 0.5), (2.25, 0.6)]

        static func make() async throws -> Material {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("composition-\(UUID())")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let sox = try #require(Where.tool("sox")), flac = try #require(Where.tool("flac"))
            let metaflac = try #require(Where.tool("metaflac")), lame = try #require(Where.tool("lame"))
            var paths: [String] = []
            for (name, seconds, frequency) in [("a", 1.0, 440), ("b", 0.8, 660), ("c", 0.9, 550)] {
                let wav = folder.appendingPathComponent("\(name).wav").path
                _ = try await run(sox, ["-r", "44100", "-n", "-r", "44100", "-c", "2", "-b", "16", wav, "synth", "\(seconds)", "sine", "\(frequency)", "vol", "0.4"])
                if name == "c" {
                    let mp3 = folder.appendingPathComponent("c.mp3").path
                    _ = try await run(lame, ["--quiet", "-b", "160", wav, mp3])
                    paths.append(mp3)
                } else {
                    let path = folder.appendingPathComponent("\(name).flac").path
                    _ = try await run(flac, ["-s", "-f", wav, "-o", path])
                    let tag = tags[paths.count]
                    _ = try await run(metaflac, [String(format: "--set-tag=REPLAYGAIN_TRACK_GAIN=%.2f dB", tag.gain),
                                                 String(format: "--set-tag=REPLAYGAIN_TRACK_PEAK=%.6f", tag.peak), path])
                    paths.append(path)
                }
            }
            let notAudio = folder.appendingPathComponent("notes.txt.mp3").path
            try Data("These are notes, not audio.\n".utf8).write(to: URL(fileURLWithPath: notAudio))
            return Material(folder: folder, a: paths[0], b: paths[1], c: paths[2], notAudio: notAudio)
        }
    }

    /// The RBJ cookbook low shelf in double precision (Direct Form I), per channel.
    static func lowShelf(_ samples: [Float], channels: Int, frequency: Double, gain: Double, q: Double = 0.7071, rate: Double = 44_100) -> [Float] {
        let a = pow(10, gain / 40), w = 2 * Double.pi * frequency / rate, alpha = sin(w) / (2 * q), cw = cos(w), root = 2 * sqrt(a) * alpha
        let b0 = a * ((a + 1) - (a - 1) * cw + root), b1 = 2 * a * ((a - 1) - (a + 1) * cw), b2 = a * ((a + 1) - (a - 1) * cw - root)
        let a0 = (a + 1) + (a - 1) * cw + root, a1 = -2 * ((a - 1) + (a + 1) * cw), a2 = (a + 1) + (a - 1) * cw - root
        var out = [Float](repeating: 0, count: samples.count)
        for c in 0..<channels {
            var (x1, x2, y1, y2) = (0.0, 0.0, 0.0, 0.0)
            for i in stride(from: c, to: samples.count, by: channels) {
                let x = Double(samples[i])
                let y = (b0 * x + b1 * x1 + b2 * x2 - a1 * y1 - a2 * y2) / a0
                (x2, x1, y2, y1) = (x1, x, y1, y)
                out[i] = Float(y)
            }
        }
        return out
    }

    /// What the player applies for a tag: 10^((gain + preamp)/20), held so that the peak stays at full scale.
    static func tagGain(_ tag: (gain: Double, peak: Double), preamp: Double) -> Float {
        var linear = pow(10, (tag.gain + preamp) / 20)
        if tag.peak * linear > 1 { linear = 1 / tag.peak }
        return Float(linear)
    }

    static func play(_ items: [AudioPlayerItem], crossfade: Double, replayGain: ReplayGainSettings?, effects: [AudioPlayer.ProcessingTap])
        async throws -> (heard: [Float], report: AudioPlayer.Report, events: Events, states: [AudioPlayerItemState]) {
        AudioCodecs.registerAll()
        MPG123Decoder.register()
        SoxrConverter.register()
        let collector = SinkCollector(), events = Events()
        var configuration = AudioPlayer.Configuration(replayGain: replayGain, effects: effects, onEvent: { events.add($0) })
        configuration.crossfade = crossfade > 0 ? try AudioPlayerCrossfade(seconds: crossfade) : nil
        let player = AudioPlayer(items: items, configuration: configuration) { collector.make() }
        let report = try await player.play()
        #expect(collector.captured.count == 1)
        return (collector.captured.first ?? [], report, events, player.itemStates)
    }

    /// Crossfade (or none) × ReplayGain from tags with a pre-amp × an item's own gain × a low-shelf
    /// EQ before or after volume: the output is the model within 2e-5, with no click at a join
    /// (an item's gain applies at its exact frames, before every effect).
    @Test(arguments: [0.0, 0.25], [AudioQueueProcessingTapPosition.preEffects, .postEffects])
    func gainsCrossfadeAndAnEqualiserAgreeWithTheModel(_ crossfade: Double, _ position: AudioQueueProcessingTapPosition) async throws {
        let material = try await Material.make()
        defer { try? FileManager.default.removeItem(at: material.folder) }
        let preamp = 1.5
        let settings = ReplayGainSettings(mode: .track, preamp: preamp)
        let own: Float = Float(pow(10, -4.0 / 20))
        let gains = [Self.tagGain(Material.tags[0], preamp: preamp), Self.tagGain(Material.tags[1], preamp: preamp), own]
        AudioCodecs.registerAll()
        MPG123Decoder.register()
        var renders: [[Float]] = []
        for (index, path) in [material.a, material.b, material.c].enumerated() {
            renders.append(try await rendered(path).samples.map { $0 * gains[index] })
        }
        let d = Int((crossfade * 44_100).rounded())
        let joined = d > 0
            ? PlayerCrossfadeTests.crossfaded(PlayerCrossfadeTests.crossfaded(renders[0], renders[1], channels: 2, frames: d, curve: .equalPower),
                                              renders[2], channels: 2, frames: d, curve: .equalPower)
            : renders[0] + renders[1] + renders[2]
        let expected = Self.lowShelf(joined, channels: 2, frequency: 150, gain: 6)
        let eq = AudioEqualizer(bands: [AudioEQBand(.lowShelf, frequency: 150, gain: 6)], rampSeconds: 0)
        let c = AudioPlayerItem.file(material.c).withGain(decibels: -4)
        let (heard, report, events, states) = try await Self.play([.file(material.a), .file(material.b), c], crossfade: crossfade,
                                                                  replayGain: settings, effects: [.init(position: position, callback: eq.processingTapCallback)])
        #expect(report.framesPlayed == Int64(expected.count / 2) && report.itemsPlayed == 3 && report.isComplete)
        #expect(difference(heard, expected, tolerance: 2e-5) == nil)
        // What was applied is said: each item's gain in dB, where its first frame plays.
        let starts = events.starts
        #expect(starts.map(\.index) == [0, 1, 2])
        for (start, gain) in zip(starts, gains) { #expect(abs(start.gain - 20 * log10(Double(gain))) < 1e-4, "\(start)") }
        let lengths = renders.map { Int64($0.count / 2) }
        #expect(starts.map(\.outputFrame) == [0, lengths[0] - Int64(d), lengths[0] + lengths[1] - 2 * Int64(d)])
        #expect(states == [.finished, .finished, .finished])
    }

    /// An item that cannot be opened — first, in the middle or last, gapless or crossfading — loses
    /// no frame of the others (last: the item before it plays to its end). The report lists it;
    /// the events say skipped.
    @Test(arguments: [0, 1, 2], [0.0, 0.25])
    func anItemThatCannotBeOpenedLosesNoFrameOfTheOthers(_ badIndex: Int, _ crossfade: Double) async throws {
        let material = try await Material.make()
        defer { try? FileManager.default.removeItem(at: material.folder) }
        AudioCodecs.registerAll()
        let good = [material.a, material.b]
        var renders: [[Float]] = []
        for path in good { renders.append(try await rendered(path).samples) }
        let d = Int((crossfade * 44_100).rounded())
        // Before, between or after the two, the bad item leaves them joined as if it were not
        // there: nothing of it was mixed, so the first crossfades into the second (or joins it
        // gaplessly), and the last good item's end plays whole.
        let expected = d > 0 ? PlayerCrossfadeTests.crossfaded(renders[0], renders[1], channels: 2, frames: d, curve: .equalPower)
                             : renders[0] + renders[1]
        var paths = good
        paths.insert(material.notAudio, at: badIndex)
        let (heard, report, events, states) = try await Self.play(paths.map { .file($0) }, crossfade: crossfade, replayGain: nil, effects: [])
        #expect(report.framesPlayed == Int64(expected.count / 2), "every frame of the good items")
        #expect(difference(heard, expected) == nil)
        #expect(report.skipped.map(\.itemIndex) == [badIndex] && report.itemsPlayed == 2)
        #expect(events.perItem[badIndex] == ["skipped"])
        for index in paths.indices where index != badIndex {
            #expect(events.perItem[index] == ["opened", "started", "finished"], "item \(index): \(events.perItem[index] ?? [])")
        }
        if case .failed(let error) = states[badIndex] { #expect(error.stage == .open) } else { Issue.record("\(states)") }
    }

    /// With the unpaced null sink (no clock: the list plays as fast as it decodes) every item is
    /// opened, started and finished in order, each `started` saying where its first frame played
    /// on the output, and `itemStates` ends all finished.
    @Test(arguments: [0.0, 0.25])
    func eventsComeInOrderWithoutAClock(_ crossfade: Double) async throws {
        let material = try await Material.make()
        defer { try? FileManager.default.removeItem(at: material.folder) }
        let paths = [material.a, material.c, material.b]
        AudioCodecs.registerAll()
        MPG123Decoder.register()
        var lengths: [Int64] = []
        for path in paths { lengths.append(Int64(try await rendered(path).samples.count / 2)) }
        let d = Int64((crossfade * 44_100).rounded())
        let (_, report, events, states) = try await Self.play(paths.map { .file($0) }, crossfade: crossfade, replayGain: nil, effects: [])
        #expect(report.framesPlayed == lengths.reduce(0, +) - 2 * d)
        #expect(states == [.finished, .finished, .finished])
        for index in paths.indices {
            #expect(events.perItem[index] == ["opened", "started", "finished"], "item \(index): \(events.perItem[index] ?? [])")
        }
        #expect(events.starts.map(\.outputFrame) == [0, lengths[0] - d, lengths[0] + lengths[1] - 2 * d])
        #expect(events.starts.allSatisfy { $0.gain == 0 })
        // Item by item: its `started` after its `opened`, the previous one finished before or as it starts.
        let order = events.all.compactMap { event -> String? in
            switch event {
            case .itemOpened(let index, _, _, _): "o\(index)"
            case .itemStarted(let index, _, _, _): "s\(index)"
            case .itemState(let index, _, .finished): "f\(index)"
            default: nil
            }
        }
        for index in paths.indices {
            let o = try #require(order.firstIndex(of: "o\(index)")), s = try #require(order.firstIndex(of: "s\(index)"))
            let f = try #require(order.firstIndex(of: "f\(index)"))
            #expect(o < s && s < f, "\(order)")
            if index > 0 { #expect(order.firstIndex(of: "s\(index - 1)")! < s, "\(order)") }
        }
    }
}

/// The player's loudness meter beside an equaliser: it meters exactly what is handed to the sink.
@Suite(.enabled(if: Where.tool("sox") != nil, "sox is missing (make deps installs it)"))
struct PlayerLoudnessTests {
    @Test func theMeterMeasuresWhatIsPlayedBesideAnEqualiser() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("player-loudness-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        // EBU Tech 3341 case 1: a 1 kHz sine at -23 dBFS in both channels is -23 LUFS.
        let tone = folder.appendingPathComponent("tone.wav").path
        _ = try await run(try #require(Where.tool("sox")), ["-n", "-r", "48000", "-c", "2", "-b", "24", tone, "synth", "4", "sine", "1000", "vol", "0.0708"])
        let collector = SinkCollector()
        let eq = AudioEqualizer(bands: [AudioEQBand(.highShelf, frequency: 8_000, gain: 6)])
        let player = AudioPlayer(items: [.file(tone), .file(tone)],
                                 configuration: .init(effects: [.init(position: .postEffects, callback: eq.processingTapCallback)],
                                                      record: { samples, _ in collector.record(samples) }),
                                 makeSink: { collector.make() })
        let monitor = player.installLoudnessMeter()
        let report = try await player.play()
        #expect(report.framesPlayed == 2 * 4 * 48_000)
        let reading = monitor.reading
        #expect(abs(reading.integrated - -23) < 0.1, "\(reading)")
        // The same meter over the recording of what the sink got: the same numbers.
        var meter = try LoudnessMeter(sampleRate: 48_000, channels: 2)
        meter.add(collector.recording)
        #expect(abs(meter.reading.integrated - reading.integrated) < 0.01 && abs(meter.reading.truePeak - reading.truePeak) < 0.01)
        #expect(monitor.error == nil)
    }
}

/// Random playlists against the model: 1–5 items drawn from tagged FLACs, an MP3, a WAV, a text
/// file named like an MP3 and a missing file, each with its own gain; a crossfade of 0, 50 ms or
/// 250 ms on either curve; ReplayGain off, track, album or auto with a pre-amp; an equaliser
/// before volume, after it, both or neither; the loudness meter. What the sink gets is each good
/// item's own render × its gain, joined by the curve, through the equalisers computed in double
/// precision, within 2e-5; the report and each item's events say what happened. A few seeds in
/// the suite; `AQ_COMPOSITION_CASES=N` runs N more.
@Suite(.enabled(if: ["sox", "flac", "metaflac", "lame"].allSatisfy { Where.tool($0) != nil },
                "sox, flac, metaflac or lame is missing (make deps installs them)"))
struct RandomCompositionTests {
    /// An RBJ cookbook shelf (`high` or low) in double precision, per channel.
    static func shelf(_ samples: [Float], high: Bool, frequency: Double, gain: Double, q: Double = 0.7071, rate: Double = 44_100) -> [Float] {
        if !high { return PlayerCompositionTests.lowShelf(samples, channels: 2, frequency: frequency, gain: gain, q: q, rate: rate) }
        let a = pow(10, gain / 40), w = 2 * Double.pi * frequency / rate, alpha = sin(w) / (2 * q), cw = cos(w), root = 2 * sqrt(a) * alpha
        let b0 = a * ((a + 1) + (a - 1) * cw + root), b1 = -2 * a * ((a - 1) + (a + 1) * cw), b2 = a * ((a + 1) + (a - 1) * cw - root)
        let a0 = (a + 1) - (a - 1) * cw + root, a1 = 2 * ((a - 1) - (a + 1) * cw), a2 = (a + 1) - (a - 1) * cw - root
        var out = [Float](repeating: 0, count: samples.count)
        for c in 0..<2 {
            var (x1, x2, y1, y2) = (0.0, 0.0, 0.0, 0.0)
            for i in stride(from: c, to: samples.count, by: 2) {
                let x = Double(samples[i])
                let y = (b0 * x + b1 * x1 + b2 * x2 - a1 * y1 - a2 * y2) / a0
                (x2, x1, y2, y1) = (x1, x, y1, y)
                out[i] = Float(y)
            }
        }
        return out
    }

    static var seeds: [UInt64] {
        let extra = Int(ProcessInfo.processInfo.environment["AQ_COMPOSITION_CASES"] ?? "") ?? 0
        return Array(1...UInt64(10 + max(extra, 0)))
    }

    @Test(arguments: seeds)
    func aRandomPlaylistAgreesWithTheModel(_ seed: UInt64) async throws {
        var random = SplitMix(seed: seed)
        func pick<T>(_ choices: [T]) -> T { choices[Int(random.next() % UInt64(choices.count))] }
        let material = try await PlayerCompositionTests.Material.make()
        defer { try? FileManager.default.removeItem(at: material.folder) }
        let wav = material.folder.appendingPathComponent("d.wav").path
        _ = try await run(try #require(Where.tool("sox")), ["-r", "44100", "-n", "-r", "44100", "-c", "2", "-b", "16", wav, "synth", "0.7", "sine", "330", "vol", "0.5"])
        AudioCodecs.registerAll()
        MPG123Decoder.register()
        // The kinds of item: (path, its tag's track gain and peak, or nil; whether it plays).
        let kinds: [(path: String, tag: (gain: Double, peak: Double)?, good: Bool)] = [
            (material.a, PlayerCompositionTests.Material.tags[0], true), (material.b, PlayerCompositionTests.Material.tags[1], true),
            (material.c, nil, true), (wav, nil, true), (material.notAudio, nil, false), (material.folder.appendingPathComponent("gone.flac").path, nil, false),
        ]
        var renders: [String: [Float]] = [:]
        for kind in kinds where kind.good { renders[kind.path] = try await rendered(kind.path).samples }
        let count = 1 + Int(random.next() % 5)
        let chosen = (0..<count).map { _ in (kind: pick(kinds), own: pick([0.0, -4.0, 2.0])) }
        let crossfade = pick([0.0, 0.05, 0.25]), curve = pick(AudioFadeCurve.allCases)
        let mode = pick([ReplayGainSettings.Mode.off, .track, .album, .auto]), preamp = pick([0.0, 1.5])
        let (pre, post) = (pick([false, true]), pick([false, true]))
        let described = "seed \(seed): \(chosen.map { ($0.kind.path as NSString).lastPathComponent + "@\($0.own)dB" }), crossfade \(crossfade) \(curve), "
            + "ReplayGain \(mode) +\(preamp), EQ pre \(pre) post \(post)"

        // The model: every good item's render × its gain, joined by the curve, through the EQs.
        var joined: [Float] = []
        var starts: [Int64] = [], gains: [Double] = []
        let d = Int((crossfade * 44_100).rounded())
        for item in chosen where item.kind.good {
            var gain = Float(pow(10, item.own / 20))
            if mode != .off, let tag = item.kind.tag { gain *= PlayerCompositionTests.tagGain(tag, preamp: preamp) }
            let samples = try #require(renders[item.kind.path]).map { $0 * gain }
            starts.append(Int64(joined.isEmpty ? 0 : joined.count / 2 - d))
            gains.append(20 * log10(Double(gain)))
            joined = joined.isEmpty ? samples
                : d > 0 ? PlayerCrossfadeTests.crossfaded(joined, samples, channels: 2, frames: d, curve: curve) : joined + samples
        }
        if pre { joined = Self.shelf(joined, high: false, frequency: 150, gain: 6) }
        if post { joined = Self.shelf(joined, high: true, frequency: 5_000, gain: -3) }

        var configuration = AudioPlayer.Configuration(replayGain: mode == .off ? nil : ReplayGainSettings(mode: mode, preamp: preamp))
        configuration.crossfade = crossfade > 0 ? try AudioPlayerCrossfade(seconds: crossfade, curve: curve) : nil
        if pre {
            configuration.effects.append(.init(position: .preEffects,
                                               callback: AudioEqualizer(bands: [.init(.lowShelf, frequency: 150, gain: 6)], rampSeconds: 0).processingTapCallback))
        }
        if post {
            configuration.effects.append(.init(position: .postEffects,
                                               callback: AudioEqualizer(bands: [.init(.highShelf, frequency: 5_000, gain: -3)], rampSeconds: 0).processingTapCallback))
        }
        let events = PlayerCompositionTests.Events()
        configuration.onEvent = { events.add($0) }
        let collector = SinkCollector()
        let items = chosen.map { AudioPlayerItem.file($0.kind.path).withGain(decibels: $0.own) }
        let player = AudioPlayer(items: items, configuration: configuration) { collector.make() }
        let meter = player.installLoudnessMeter()
        let bad = chosen.indices.filter { !chosen[$0].kind.good }
        guard bad.count < chosen.count else {
            // Nothing can play: the first bad item's error.
            await #expect(throws: AudioPlayerError.self, "\(described)") { try await player.play() }
            #expect(events.all.compactMap { if case .itemSkipped(let index, _, _) = $0 { index } else { nil } } == bad, "\(described)")
            return
        }
        let report = try await player.play()
        let heard = collector.captured.first ?? []
        #expect(report.framesPlayed == Int64(joined.count / 2), "\(described)")
        #expect(difference(heard, joined, tolerance: 2e-5) == nil, "\(described)")
        #expect(report.skipped.map(\.itemIndex) == bad, "\(described)")
        #expect(report.itemsPlayed == chosen.count - bad.count, "\(described)")
        for index in chosen.indices {
            let expected = chosen[index].kind.good ? ["opened", "started", "finished"] : ["skipped"]
            #expect(events.perItem[index] == expected, "item \(index) of \(described): \(events.perItem[index] ?? [])")
        }
        let started = events.starts
        #expect(started.map(\.outputFrame) == starts, "\(described)")
        for (start, gain) in zip(started, gains) { #expect(abs(start.gain - gain) < 1e-3, "\(described): \(start) against \(gain) dB") }
        #expect(player.itemStates.enumerated().allSatisfy { chosen[$0.offset].kind.good == ($0.element == .finished) }, "\(described): \(player.itemStates)")
        if report.framesPlayed > 44_100 { #expect(meter.reading.integrated.isFinite, "\(described)") }
    }
}

/// A file's packets that fail to read from packet `failAt` on, as a stream that drops does: what
/// was read before plays, the item is skipped there.
final class FailingPacketSource: PacketSource {
    let base: FilePacketSource
    let failAt: Int64
    private var next: Int64 = 0

    init(path: String, failAt: Int64) throws {
        base = FilePacketSource(file: try AudioFile(path: path))
        self.failAt = failAt
    }

    var isReady: Bool { base.isReady }
    var format: AudioStreamDescription { base.format }
    var magicCookie: [UInt8]? { base.magicCookie }
    var packetTable: AudioFilePacketTableInfo? { base.packetTable }
    var rollDistance: Int? { base.rollDistance }
    var duration: (frames: Int64, isEstimated: Bool)? { base.duration }
    var title: String? { base.title }
    var metadata: AudioFileMetadata? { base.metadata }
    var channelLayout: AudioChannelLayout? { base.channelLayout }
    var maximumPacketSize: Int? { base.maximumPacketSize }
    func packet(forFrame frame: Int64) -> Int64? { base.packet(forFrame: frame) }
    func frame(forPacket packet: Int64) -> Int64? { base.frame(forPacket: packet) }
    func peekPackets(from first: Int64, count: Int) -> [[UInt8]]? { base.peekPackets(from: first, count: count) }

    func seek(toPacket packet: Int64) throws {
        try base.seek(toPacket: packet)
        next = packet
    }

    func read(maxPackets: Int, maxBytes: Int) throws -> PacketRead {
        guard next < failAt else { throw AudioQueueError(.invalidParameter, "the connection dropped at packet \(next)") }
        // One packet at a time: the failure falls exactly at `failAt`.
        let read = try base.read(maxPackets: 1, maxBytes: maxBytes)
        if case .packets = read { next += 1 }
        return read
    }
}

extension PlayerCompositionTests {
    /// An item that fails mid-way in a gapless list keeps what it read before the failure, and
    /// the next item follows it without a gap.
    @Test func anItemThatFailsMidwayKeepsWhatItGave() async throws {
        let material = try await Material.make()
        defer { try? FileManager.default.removeItem(at: material.folder) }
        AudioCodecs.registerAll()
        let (a, b) = (try await rendered(material.a).samples, try await rendered(material.b).samples)
        let failAt: Int64 = 5
        let kept = Int(try AudioFile(path: material.b).frame(forPacket: failAt))
        try #require(kept > 0 && kept < b.count / 2)
        let expected = a + Array(b[0..<(kept * 2)]) + a
        let failing = AudioPlayerItem(name: "b (drops)") { _ in try FailingPacketSource(path: material.b, failAt: failAt) }
        let (heard, report, events, states) = try await Self.play([.file(material.a), failing, .file(material.a)], crossfade: 0,
                                                                  replayGain: nil, effects: [])
        #expect(report.framesPlayed == Int64(expected.count / 2))
        #expect(difference(heard, expected) == nil)
        #expect(report.skipped.map(\.itemIndex) == [1] && report.skipped.first?.stage == .read, "\(report.skipped)")
        #expect(events.perItem[1]?.first == "opened" && events.perItem[1]?.contains("skipped") == true, "\(events.perItem)")
        #expect(states[0] == .finished && states[2] == .finished, "\(states)")
    }

    /// A crossfade into an item that fails while it is mixed in. Having given k frames: the
    /// outgoing item plays to its end — its last D frames mixed with those k, then fading out alone
    /// by the curve — and the next item joins it without a gap. Having given none: the next item
    /// crossfades into the outgoing one, as if the failing one were not in the list. No frame of
    /// the others is lost either way. (Failing at packet 1, 2, 3 or 4 of 4096 frames: before or
    /// inside the mix of D = 11 025 frames.)
    @Test func aCrossfadeIntoAnItemThatFailsPlaysTheOutgoingOneToItsEnd() async throws {
        let material = try await Material.make()
        defer { try? FileManager.default.removeItem(at: material.folder) }
        AudioCodecs.registerAll()
        let (a, b) = (try await rendered(material.a).samples, try await rendered(material.b).samples)
        let (lengthA, d) = (a.count / 2, Int((0.25 * 44_100).rounded()))
        var given: [Int64: Int] = [:]
        for failAt: Int64 in [1, 2, 3, 4] {
            let failing = AudioPlayerItem(name: "b (drops)") { _ in try FailingPacketSource(path: material.b, failAt: failAt) }
            let (heard, report, _, states) = try await Self.play([.file(material.a), failing, .file(material.a)], crossfade: 0.25,
                                                                 replayGain: nil, effects: [])
            #expect(report.skipped.map(\.itemIndex) == [1], "\(report.skipped)")
            #expect(states[0] == .finished && states[2] == .finished, "\(states)")
            #expect(difference(Array(heard.prefix(2 * (lengthA - d))), Array(a.prefix(2 * (lengthA - d)))) == nil, "a up to its crossfade")
            if report.framesPlayed == Int64(2 * lengthA - d) {
                // b gave nothing: a crossfades into the next item.
                given[failAt] = 0
                #expect(difference(heard, PlayerCrossfadeTests.crossfaded(a, a, channels: 2, frames: d, curve: .equalPower)) == nil, "at \(failAt)")
                continue
            }
            #expect(report.framesPlayed == Int64(2 * lengthA), "at \(failAt): a, then a again, every frame of both")
            #expect(difference(Array(heard.suffix(2 * lengthA)), a) == nil, "at \(failAt): the next item whole, right after")
            // The join: a's last D frames, mixed with b's first k frames, then faded by the curve.
            let join = Array(heard[(2 * (lengthA - d))..<(2 * lengthA)]), tail = Array(a[(2 * (lengthA - d))...])
            func gains(_ i: Int) -> (Float, Float) { PlayerCrossfadeTests.gains(.equalPower, i, d) }
            func mixed(_ i: Int, _ c: Int) -> Float { tail[2 * i + c] * gains(i).0 + b[2 * i + c] * gains(i).1 }
            func faded(_ i: Int, _ c: Int) -> Float { tail[2 * i + c] * gains(i).0 }
            let k = (0..<d).first { i in (0..<2).allSatisfy { join[2 * i + $0] == faded(i, $0) } && (0..<2).contains { mixed(i, $0) != faded(i, $0) } } ?? d
            given[failAt] = k
            #expect(k > 0 && k < d, "at \(failAt): b gave \(k) of its frames before it failed")
            #expect((0..<k).allSatisfy { i in (0..<2).allSatisfy { join[2 * i + $0] == mixed(i, $0) } }, "at \(failAt): mixed up to b's failure")
            #expect((k..<d).allSatisfy { i in (0..<2).allSatisfy { join[2 * i + $0] == faded(i, $0) } }, "at \(failAt): faded alone after it")
        }
        // Which way each drop goes depends on how far the item's edge renderer had decoded when
        // its read failed (its queue decodes on a worker): both are checked above whichever comes.
        #expect(given.count == 4, "frames given before the failure: \(given)")
    }
}
