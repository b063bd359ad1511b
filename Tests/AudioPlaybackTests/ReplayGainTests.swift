import Foundation
import Testing
import AudioCodecs
import AudioFileStream
import AudioPlayback
import BufferQueue
import CodecTestSupport
import TestSupport

/// ReplayGain and R128 tags as a third-party tagger writes them (loudgain: Vorbis comments in
/// FLAC, ID3v2 TXXX in MP3, iTunes freeform items in M4A, R128_* in Opus), read back, and applied
/// by the player.
@Suite(.timeLimit(.minutes(2))) struct ReplayGainTests {
    static func folder() throws -> String {
        let directory = NSTemporaryDirectory() + "replaygain-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory
    }

    @Test(arguments: [
        ("t.flac", ["-c:a", "flac"]),
        ("t.mp3", ["-c:a", "libmp3lame", "-b:a", "128k"]),
        ("t.m4a", ["-c:a", "aac", "-b:a", "128k"]),
        ("t.opus", ["-c:a", "libopus", "-b:a", "96k"]),
    ])
    func tagsWrittenByLoudgainAreRead(_ name: String, codec: [String]) async throws {
        guard FileManager.default.isExecutableFile(atPath: LoudnessScanTests.loudgain) else { print("loudgain is not installed (make test installs it): skipped"); return }
        let directory = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try await LoudnessScanTests.make(name, in: directory, rate: name.hasSuffix(".opus") || name.hasSuffix(".m4a") ? 48000 : 44100,
                                                    layout: "stereo", codec: codec, decibels: -6)
        // Album mode on one file: the album's numbers are the track's.
        let run = try await runTool(LoudnessScanTests.loudgain, ["-a", "-s", "i", "-O", "-q", path])
        let lines = String(decoding: run.output, as: UTF8.self).split(separator: "\n")
        let fields = try #require(lines.count >= 2 ? lines[1].split(separator: "\t") : nil, "loudgain: \(lines) \(String(decoding: run.errorOutput, as: UTF8.self))")
        // (For Opus loudgain reports, and writes, the gain to −23 LUFS: 5 dB less than to −18.)
        let gain = try #require(fields.count > 8 ? Double(fields[8].split(separator: " ")[0]) : nil, "\(fields)")
            + (name.hasSuffix(".opus") ? 5 : 0)
        let peak = try #require(Double(fields[3]), "\(fields)")
        let file = try AudioFile(path: path)
        let tags = try #require(ReplayGain(metadata: file.metadata, format: file.dataFormat.formatID), "no gains in \(file.metadata.tags)")
        // Opus carries Q7.8 integers relative to −23 LUFS: read back within 1/256 dB.
        let tolerance = name.hasSuffix(".opus") ? 0.01 : 0.005
        let track = try #require(tags.trackGain), album = try #require(tags.albumGain)
        #expect(abs(track - gain) <= tolerance && abs(album - gain) <= tolerance, "track \(track), album \(album); loudgain \(gain)")
        if name.hasSuffix(".opus") {
            #expect(tags.trackPeak == nil, "R128 tags carry no peak")
        } else {
            let trackPeak = try #require(tags.trackPeak)
            #expect(abs(trackPeak - peak) < 1e-4, "peak \(trackPeak); loudgain \(peak)")
        }
    }

    @Test func thePlayerAppliesTheTagsGainAndKeepsThePeakUnderFullScale() async throws {
        let metaflac = "/usr/bin/metaflac"
        guard FileManager.default.isExecutableFile(atPath: metaflac) else { print("metaflac is not installed: skipped"); return }
        let directory = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/tagged.flac"
        let made = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440:duration=2", "-ac", "2",
                                                         "-af", "volume=-12dB", "-c:a", "flac", path])
        try #require(made.status == 0)
        let tagged = try await runTool(metaflac, ["--set-tag=REPLAYGAIN_TRACK_GAIN=-6.00 dB", "--set-tag=REPLAYGAIN_TRACK_PEAK=0.5", path])
        try #require(tagged.status == 0)
        AudioCodecs.registerAll()
        let plain = try render(path).samples

        func played(_ settings: ReplayGainSettings?) async throws -> [Float] {
            let collector = SinkCollector()
            let player = AudioPlayer(items: [.file(path)], configuration: .init(replayGain: settings), makeSink: { collector.make() })
            _ = try await player.play()
            return collector.captured.first ?? []
        }
        func scaled(_ factor: Double) -> [Float] { plain.map { $0 * Float(factor) } }
        func close(_ a: [Float], _ b: [Float]) -> Bool { a.count == b.count && zip(a, b).allSatisfy { abs($0 - $1) <= 1e-6 } }

        let track = try await played(ReplayGainSettings(mode: .track))
        #expect(close(track, scaled(pow(10, -6.0 / 20))), "\(track.count) frames against \(plain.count)")
        // +20 dB of pre-amp would take the 0.5 peak to 2.5: the gain stops where the peak is 1.0.
        let loud = try await played(ReplayGainSettings(mode: .track, preamp: 20))
        #expect(close(loud, scaled(2)), "clipping prevention")
        // Without tags for the album, album mode uses the track's gain; off changes nothing.
        let album = try await played(ReplayGainSettings(mode: .album))
        #expect(close(album, track))
        let off = try await played(ReplayGainSettings(mode: .off))
        #expect(difference(off, plain) == nil)
    }

    /// `auto`: the album's gain for an item played next to another of its album (same ALBUM and
    /// album artist), the track's for one alone: [A1, A2, B] gives A1 and A2 their album gain and
    /// B, of another album, its track gain.
    @Test func autoUsesTheAlbumGainAmongTheAlbum() async throws {
        let metaflac = "/usr/bin/metaflac"
        guard FileManager.default.isExecutableFile(atPath: metaflac) else { print("metaflac is not installed: skipped"); return }
        let directory = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var paths: [String] = []
        for (name, album, hz) in [("a1", "First", 440), ("a2", "First", 550), ("b", "Second", 660)] {
            let path = directory + "/\(name).flac"
            let made = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=\(hz):duration=1", "-ac", "2",
                                                             "-af", "volume=-12dB", "-c:a", "flac", path])
            try #require(made.status == 0)
            let tagged = try await runTool(metaflac, ["--set-tag=ALBUM=\(album)", "--set-tag=ALBUMARTIST=Band",
                                                      "--set-tag=REPLAYGAIN_TRACK_GAIN=-6.00 dB", "--set-tag=REPLAYGAIN_TRACK_PEAK=0.25",
                                                      "--set-tag=REPLAYGAIN_ALBUM_GAIN=-3.00 dB", "--set-tag=REPLAYGAIN_ALBUM_PEAK=0.25", path])
            try #require(tagged.status == 0)
            paths.append(path)
        }
        AudioCodecs.registerAll()
        let plain = try paths.map { try render($0).samples }
        let collector = SinkCollector()
        let player = AudioPlayer(items: paths.map { .file($0) },
                                 configuration: .init(replayGain: ReplayGainSettings(mode: .auto)),
                                 makeSink: { collector.make() })
        _ = try await player.play()
        let heard = collector.captured.first ?? []
        try #require(heard.count == plain.map(\.count).reduce(0, +))
        func close(_ a: ArraySlice<Float>, _ b: [Float], _ decibels: Double) -> Bool {
            let factor = Float(pow(10, decibels / 20))
            return zip(a, b).allSatisfy { abs($0 - $1 * factor) <= 1e-6 }
        }
        var at = 0
        for (index, decibels) in [-3.0, -3.0, -6.0].enumerated() {
            #expect(close(heard[at..<(at + plain[index].count)], plain[index], decibels), "item \(index): \(decibels) dB expected")
            at += plain[index].count
        }
    }

    @Test func tagTextIsReadAsTaggersWriteIt() throws {
        let upper = AudioFileMetadata(tags: ["REPLAYGAIN_TRACK_GAIN": "+2.10 dB", "REPLAYGAIN_TRACK_PEAK": " 0.891 "])
        #expect(ReplayGain(metadata: upper, format: .flac) == ReplayGain(trackGain: 2.1, trackPeak: 0.891))
        let lower = AudioFileMetadata(tags: ["replaygain_album_gain": "-7.5 dB"])
        #expect(ReplayGain(metadata: lower, format: .mpegLayer3)?.albumGain == -7.5)
        // Opus: R128 in Q7.8 relative to −23 LUFS, +5 dB to ReplayGain's −18; REPLAYGAIN_* ignored.
        let opus = AudioFileMetadata(tags: ["R128_TRACK_GAIN": "-1024", "REPLAYGAIN_TRACK_GAIN": "+3 dB"])
        #expect(ReplayGain(metadata: opus, format: .opus) == ReplayGain(trackGain: -4 + 5))
        #expect(ReplayGain(metadata: AudioFileMetadata(tags: ["REPLAYGAIN_TRACK_GAIN": "+3 dB"]), format: .opus) == nil)
        #expect(ReplayGain(metadata: AudioFileMetadata(tags: ["REPLAYGAIN_TRACK_GAIN": "loud"]), format: .flac) == nil)
        // A fallback for untagged items.
        #expect(ReplayGainSettings(mode: .track, fallback: -6).linearGain(nil) == Float(pow(10, -6.0 / 20)))
        #expect(ReplayGainSettings(mode: .track).linearGain(nil) == 1)
    }
}
