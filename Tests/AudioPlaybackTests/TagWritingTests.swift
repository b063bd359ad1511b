import Foundation
import Testing
import AudioCodecs
import AudioFileStream
import AudioPlayback
import BufferQueue
import CodecTestSupport
import TestSupport

/// Tags written into files the library did not make, read back by the format's own tool
/// (`metaflac`), the audio untouched.
@Suite(.timeLimit(.minutes(2)), .disabled(if: isUnderThreadSanitizer, "file rewriting on one thread: the plain pass checks it"))
struct TagWritingTests {
    static let metaflac = "/usr/bin/metaflac"
    static let aqgain = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        .appendingPathComponent("aqgain").path

    /// A FLAC made by ffmpeg, tagged and given a picture by metaflac, with `padding` bytes of padding (0: none).
    static func flac(_ name: String, in directory: String, padding: Int, decibels: Double = 0) async throws -> String {
        let path = try await LoudnessScanTests.make(name, in: directory, rate: 44100, layout: "stereo", codec: ["-c:a", "flac"], decibels: decibels)
        let picture = directory + "/cover-\(name).png"
        _ = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "color=red:s=8x8", "-frames:v", "1", picture])
        let tagged = try await runTool(metaflac, ["--set-tag=TITLE=Original \(name)", "--set-tag=replaygain_track_gain=+9.99 dB",
                                                  "--import-picture-from=\(picture)", path])
        try #require(tagged.status == 0, "\(String(decoding: tagged.errorOutput, as: UTF8.self))")
        let unpadded = try await runTool(metaflac, ["--remove", "--block-type=PADDING", "--dont-use-padding", path])
        try #require(unpadded.status == 0, "\(String(decoding: unpadded.errorOutput, as: UTF8.self))")
        if padding > 0 {
            let padded = try await runTool(metaflac, ["--add-padding=\(padding)", path])
            try #require(padded.status == 0)
        }
        return path
    }

    static func tag(_ name: String, _ path: String) async throws -> [String] {
        let run = try await runTool(metaflac, ["--show-tag=\(name)", path])
        return String(decoding: run.output, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    static func pictures(_ path: String) async throws -> Int {
        let run = try await runTool(metaflac, ["--list", "--block-type=PICTURE", path])
        return String(decoding: run.output, as: UTF8.self).components(separatedBy: "type: 6 (PICTURE)").count - 1
    }

    @Test(arguments: [4096, 0])
    func flacTagsAreWrittenAndTheAudioIsUntouched(padding: Int) async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.metaflac) else { print("metaflac is not installed: skipped"); return }
        let directory = NSTemporaryDirectory() + "tags-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try await Self.flac("a.flac", in: directory, padding: padding)
        let before = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        AudioCodecs.registerAll()
        let decodedBefore = try render(path).samples

        let outcome = try AudioFileTagWriter.update(path: path, setting: [("REPLAYGAIN_TRACK_GAIN", "-3.21 dB"), ("REPLAYGAIN_TRACK_PEAK", "0.501187")])
        #expect(outcome == (padding > 0 ? .inPlace : .rewritten))
        let after = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        // The replaced tag once (the old lower-case one gone), the others kept, the picture kept.
        #expect(try await Self.tag("REPLAYGAIN_TRACK_GAIN", path) == ["REPLAYGAIN_TRACK_GAIN=-3.21 dB"])
        #expect(try await Self.tag("REPLAYGAIN_TRACK_PEAK", path) == ["REPLAYGAIN_TRACK_PEAK=0.501187"])
        #expect(try await Self.tag("TITLE", path) == ["TITLE=Original a.flac"])
        #expect(try await Self.pictures(path) == 1)
        // The audio frames are the same bytes, and decode to the same samples.
        let audio = before.count - 16_384
        #expect(Array(after.suffix(audio)) == Array(before.suffix(audio)))
        if padding > 0 { #expect(after.count == before.count, "in place: the file keeps its size") }
        #expect(difference(try render(path).samples, decodedBefore) == nil)
        let check = try await runTool("/usr/bin/flac", ["-t", "-s", path])
        #expect(check.status == 0, "flac -t: \(String(decoding: check.errorOutput, as: UTF8.self))")
        // The library reads what it wrote.
        let gains = ReplayGain(metadata: try AudioFile(path: path).metadata, format: .flac)
        #expect(gains?.trackGain == -3.21 && gains?.trackPeak == 0.501187)
    }

    /// The tags ffprobe reads (ID3v2 TXXX frames by their description).
    static func probedTags(_ path: String) async throws -> [String: String] {
        let run = try await runTool("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "format_tags", "-of", "json", path])
        let object = try JSONSerialization.jsonObject(with: run.output) as? [String: Any]
        return ((object?["format"] as? [String: Any])?["tags"] as? [String: String]) ?? [:]
    }

    @Test(arguments: ["4", "3", "0"])
    func mp3TagsAreWrittenAndTheAudioIsUntouched(_ version: String) async throws {
        let directory = NSTemporaryDirectory() + "tags-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // ID3v2.4, v2.3 (ffmpeg's tags have no padding) or no tag at all.
        let path = try await LoudnessScanTests.make("v\(version).mp3", in: directory, rate: 44100, layout: "stereo",
                                                    codec: ["-c:a", "libmp3lame", "-id3v2_version", version] + (version == "0" ? [] : ["-metadata", "title=Original"]))
        let before = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        let tagSize = before.starts(with: Array("ID3".utf8)) ? 10 + before[6..<10].reduce(0) { $0 << 7 | Int($1) } : 0
        #expect((tagSize > 0) == (version != "0"))
        AudioCodecs.registerAll()
        let decodedBefore = try render(path).samples

        #expect(try AudioFileTagWriter.update(path: path, setting: [("REPLAYGAIN_TRACK_GAIN", "-3.21 dB"), ("REPLAYGAIN_TRACK_PEAK", "0.501187")]) == .rewritten)
        var tags = try await Self.probedTags(path)
        #expect(tags["REPLAYGAIN_TRACK_GAIN"] == "-3.21 dB" && tags["REPLAYGAIN_TRACK_PEAK"] == "0.501187", "\(tags)")
        if version != "0" { #expect(tags["title"] == "Original", "\(tags)") }
        let audio = before.count - tagSize
        let rewritten = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(Array(rewritten.suffix(audio)) == Array(before.suffix(audio)), "the audio bytes are the same")

        // Again, changed: it fits the padding the rewrite left, in place.
        #expect(try AudioFileTagWriter.update(path: path, setting: [("replaygain_track_gain", "-4.00 dB")]) == .inPlace)
        tags = try await Self.probedTags(path)
        #expect(tags["replaygain_track_gain"] == "-4.00 dB" && tags["REPLAYGAIN_TRACK_GAIN"] == nil && tags["REPLAYGAIN_TRACK_PEAK"] == "0.501187", "\(tags)")
        let inPlace = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(inPlace.count == rewritten.count && Array(inPlace.suffix(audio)) == Array(before.suffix(audio)))
        #expect(difference(try render(path).samples, decodedBefore) == nil)
        let gains = ReplayGain(metadata: try AudioFile(path: path).metadata, format: .mpegLayer3)
        #expect(gains?.trackGain == -4 && gains?.trackPeak == 0.501187, "\(String(describing: gains))")
    }

    /// Ogg Opus, Vorbis and FLAC: a small change keeps the header's page count (the audio pages keep
    /// their bytes); a large one (64 KiB of lyrics) takes more pages (the later pages renumbered).
    /// Ogg FLAC's comment is its VORBIS_COMMENT metadata block; `flac -t` checks the result.
    @Test(arguments: [("o.opus", ["-c:a", "libopus"], "/usr/bin/opusinfo"), ("v.ogg", ["-c:a", "libvorbis"], "/usr/bin/ogginfo"),
                      ("f.oga", ["-c:a", "flac"], "/usr/bin/flac")])
    func oggCommentsAreRewritten(_ name: String, codec: [String], checker: String) async throws {
        guard FileManager.default.isExecutableFile(atPath: checker) else { print("\(checker) is not installed: skipped"); return }
        let directory = NSTemporaryDirectory() + "tags-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try await LoudnessScanTests.make(name, in: directory, rate: 48000, layout: "stereo", codec: codec + ["-metadata", "title=Original"])
        AudioCodecs.registerAll()
        let decodedBefore = try render(path).samples
        let before = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        let isOpus = name.hasSuffix(".opus")
        let gainTag = isOpus ? "R128_TRACK_GAIN" : "REPLAYGAIN_TRACK_GAIN"
        #expect(try AudioFileTagWriter.update(path: path, setting: [(gainTag, isOpus ? "-1234" : "-3.21 dB")]) == .rewritten)
        let small = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        // The audio pages are the same bytes (the header grew by the tag's few bytes).
        let tail = before.count - 8192
        #expect(Array(small.suffix(tail)) == Array(before.suffix(tail)))
        var metadata = try AudioFile(path: path).metadata
        #expect(metadata.title == "Original" && metadata.tags[gainTag] == (isOpus ? "-1234" : "-3.21 dB"), "\(metadata)")

        let lyrics = String(repeating: "la ", count: 22_000)
        try AudioFileTagWriter.update(path: path, setting: [("LYRICS", lyrics)])
        metadata = try AudioFile(path: path).metadata
        #expect(metadata.title == "Original" && metadata.tags["LYRICS"] == lyrics && metadata.tags[gainTag] != nil)
        let check = try await runTool(checker, checker.hasSuffix("flac") ? ["-t", "-s", path] : [path])
        // (flac warns that ffmpeg left the MD5 signature unset: not about the rewrite.)
        let said = (String(decoding: check.output, as: UTF8.self) + String(decoding: check.errorOutput, as: UTF8.self))
            .replacingOccurrences(of: "WARNING, cannot check MD5 signature since it was unset in the STREAMINFO", with: "")
        #expect(check.status == 0 && !said.contains("WARNING") && !said.contains("sequence"), "\(said)")
        #expect(difference(try render(path).samples, decodedBefore) == nil)
        if isOpus {
            #expect(ReplayGain(metadata: metadata, format: .opus)?.trackGain == -1234.0 / 256 + 5)
        }
    }

    /// Title, artist, album and track number are the format's own tags (ID3 `TIT2`/`TPE1`/`TALB`/
    /// `TRCK` in 2.4 and 2.3, iTunes `©nam`/`©ART`/`©alb`/`trkn`), replacing the old ones, as
    /// ffprobe and this library read them back; the audio is untouched.
    @Test(arguments: [("t4.mp3", ["-c:a", "libmp3lame", "-id3v2_version", "4"]), ("t3.mp3", ["-c:a", "libmp3lame", "-id3v2_version", "3"]),
                      ("t.m4a", ["-c:a", "aac"])])
    func standardNamesAreTheFormatsOwnTags(_ name: String, _ codec: [String]) async throws {
        let directory = NSTemporaryDirectory() + "tags-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try await LoudnessScanTests.make(name, in: directory, rate: 44100, layout: "stereo",
                                                    codec: codec + ["-metadata", "title=Original", "-metadata", "artist=Someone"])
        AudioCodecs.registerAll()
        let decodedBefore = try render(path).samples
        try AudioFileTagWriter.update(path: path, setting: [("TITLE", "Nachtmusik Ä"), ("ARTIST", "The Testers"), ("ALBUM", "Tests"),
                                                            ("TRACKNUMBER", "3/12")])
        let tags = try await Self.probedTags(path)
        #expect(tags["title"] == "Nachtmusik Ä" && tags["artist"] == "The Testers" && tags["album"] == "Tests", "\(tags)")
        #expect(tags["track"] == "3/12", "\(tags)")
        #expect(!tags.values.contains("Original") && !tags.values.contains("Someone"), "the old title and artist are replaced: \(tags)")
        let metadata = try AudioFile(path: path).metadata
        #expect(metadata.title == "Nachtmusik Ä" && metadata.artist == "The Testers" && metadata.album == "Tests", "\(metadata)")
        #expect(difference(try render(path).samples, decodedBefore) == nil)
    }

    /// Fragmented MP4 (ffmpeg's, with explicit `tfhd` base data offsets, and with offsets relative
    /// to each `moof`; an `mfra` index at the end): `moov` grows, and every absolute offset after
    /// it moves with the fragments, so the audio renders the same and ffmpeg reads the tags.
    @Test(arguments: ["frag_keyframe+empty_moov", "frag_keyframe+empty_moov+default_base_moof"])
    func fragmentedMP4TagsAreWritten(_ flags: String) async throws {
        let directory = NSTemporaryDirectory() + "tags-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try await LoudnessScanTests.make("f.m4a", in: directory, rate: 44100, layout: "stereo",
                                                    codec: ["-c:a", "aac", "-metadata", "title=Original", "-movflags", flags, "-frag_duration", "500000"])
        AudioCodecs.registerAll()
        let decodedBefore = try render(path).samples
        #expect(try AudioFileTagWriter.update(path: path, setting: [("replaygain_track_gain", "-3.21 dB"), ("LYRICS", String(repeating: "la ", count: 600))]) == .rewritten)
        let tags = try await Self.probedTags(path)
        #expect(tags["replaygain_track_gain"] == "-3.21 dB", "\(tags)")
        #expect(difference(try render(path).samples, decodedBefore) == nil, "the fragments lead to the same audio")
        let check = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-i", path, "-f", "null", "-"])
        #expect(check.status == 0 && check.errorOutput.isEmpty, "\(String(decoding: check.errorOutput, as: UTF8.self))")
        #expect(ReplayGain(metadata: try AudioFile(path: path).metadata, format: .aacLC)?.trackGain == -3.21)
    }

    /// M4A with `moov` after the media (it grows at the end) and before it (`-movflags +faststart`:
    /// every chunk offset moves); a second change fits the `free` box the first one left.
    @Test(arguments: [false, true])
    func m4aFreeformItemsAreWritten(faststart: Bool) async throws {
        let directory = NSTemporaryDirectory() + "tags-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try await LoudnessScanTests.make("t.m4a", in: directory, rate: 44100, layout: "stereo",
                                                    codec: ["-c:a", "aac", "-metadata", "title=Original"] + (faststart ? ["-movflags", "+faststart"] : []))
        AudioCodecs.registerAll()
        let decodedBefore = try render(path).samples
        #expect(try AudioFileTagWriter.update(path: path, setting: [("replaygain_track_gain", "-3.21 dB"), ("replaygain_track_peak", "0.501187")]) == .rewritten)
        var tags = try await Self.probedTags(path)
        #expect(tags["replaygain_track_gain"] == "-3.21 dB" && tags["replaygain_track_peak"] == "0.501187" && tags["title"] == "Original", "\(tags)")
        #expect(difference(try render(path).samples, decodedBefore) == nil, "the chunk offsets lead to the same audio")
        let size = try Data(contentsOf: URL(fileURLWithPath: path)).count
        #expect(try AudioFileTagWriter.update(path: path, setting: [("REPLAYGAIN_TRACK_GAIN", "-4.00 dB")]) == .inPlace)
        tags = try await Self.probedTags(path)
        #expect(tags["REPLAYGAIN_TRACK_GAIN"] == "-4.00 dB" && tags["replaygain_track_gain"] == nil && tags["replaygain_track_peak"] == "0.501187", "\(tags)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)).count == size)
        #expect(difference(try render(path).samples, decodedBefore) == nil)
        let gains = ReplayGain(metadata: try AudioFile(path: path).metadata, format: .aacLC)
        #expect(gains?.trackGain == -4 && gains?.trackPeak == 0.501187, "\(String(describing: gains))")
    }

    /// The attached pictures ffprobe finds: (codec, width, height) of each `attached_pic` stream.
    static func probedPictures(_ path: String) async throws -> [String] {
        let run = try await runTool("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,width,height:stream_disposition=attached_pic",
                                                         "-of", "json", path])
        let streams = ((try JSONSerialization.jsonObject(with: run.output) as? [String: Any])?["streams"] as? [[String: Any]]) ?? []
        return streams.compactMap { stream in
            guard (stream["disposition"] as? [String: Any])?["attached_pic"] as? Int == 1 else { return nil }
            return "\(stream["codec_name"] ?? "?") \(stream["width"] ?? 0)x\(stream["height"] ?? 0)"
        }.sorted()
    }

    /// Pictures replace the file's own (a cover that metaflac or ffmpeg attached, read first) in
    /// every container: ffprobe finds them (FLAC PICTURE blocks, ID3v2.4 and 2.3 `APIC`, MP4
    /// `covr`, Ogg `METADATA_BLOCK_PICTURE`; Ogg FLAC's PICTURE packets, which ffmpeg does not
    /// read, are checked by `flac -t` and this library), this library reads them back byte for
    /// byte, the other tags and the audio are kept, and an empty list removes them.
    @Test(arguments: [("a.flac", ["-c:a", "flac"]), ("t4.mp3", ["-c:a", "libmp3lame", "-id3v2_version", "4"]),
                      ("t3.mp3", ["-c:a", "libmp3lame", "-id3v2_version", "3"]), ("t.m4a", ["-c:a", "aac"]),
                      ("o.opus", ["-c:a", "libopus"]), ("v.ogg", ["-c:a", "libvorbis"]), ("f.oga", ["-c:a", "flac"])])
    func picturesAreReplacedAndRemoved(_ name: String, _ codec: [String]) async throws {
        let directory = NSTemporaryDirectory() + "tags-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var images: [String: [UInt8]] = [:]
        for (file, size, colour) in [("front.png", "16x8", "red"), ("back.jpg", "8x4", "blue"), ("old.png", "4x4", "green")] {
            let made = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "color=\(colour):s=\(size)", "-frames:v", "1",
                                                             directory + "/" + file])
            try #require(made.status == 0, "\(String(decoding: made.errorOutput, as: UTF8.self))")
            images[file] = Array(try Data(contentsOf: URL(fileURLWithPath: directory + "/" + file)))
        }
        var path = try await LoudnessScanTests.make(name, in: directory, rate: 48000, layout: "stereo", codec: codec + ["-metadata", "title=Original"])
        // A cover attached by another tool, where that tool can.
        if name.hasSuffix(".flac") {
            let tagged = try await runTool(Self.metaflac, ["--import-picture-from=\(directory)/old.png", path])
            try #require(tagged.status == 0)
        } else if name.hasSuffix(".mp3") || name.hasSuffix(".m4a") {
            let covered = directory + "/covered-" + name
            let made = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-i", path, "-i", directory + "/old.png", "-map", "0:a", "-map", "1",
                                                             "-c", "copy", "-disposition:v", "attached_pic"] + codec.suffix(2) + [covered])
            try #require(made.status == 0, "\(String(decoding: made.errorOutput, as: UTF8.self))")
            path = covered
        }
        let attached = !name.hasSuffix(".opus") && !name.hasSuffix(".ogg") && !name.hasSuffix(".oga")
        #expect(try AudioFile(path: path).metadata.pictures.map(\.data) == (attached ? [images["old.png"] ?? []] : []), "the other tool's cover is read")
        AudioCodecs.registerAll()
        let decodedBefore = try render(path).samples

        let front = try #require(AudioFilePicture(image: images["front.png"] ?? [], type: 3, description: "Vorderseite ü"))
        let back = try #require(AudioFilePicture(image: images["back.jpg"] ?? [], type: 4, description: "Back"))
        #expect(front.mimeType == "image/png" && front.width == 16 && front.height == 8)
        #expect(back.mimeType == "image/jpeg" && back.width == 8 && back.height == 4)
        try AudioFileTagWriter.update(path: path, setting: [("ALBUM", "With pictures")], pictures: [front, back])
        var metadata = try AudioFile(path: path).metadata
        let isMP4 = name.hasSuffix(".m4a")
        // MP4's covr keeps neither type nor description: read back as front covers.
        #expect(metadata.pictures == (isMP4 ? [front, back].map { picture in
            var read = picture
            read.type = 3
            read.description = ""
            return read
        } : [front, back]), "\(metadata.pictures.map { ($0.type, $0.mimeType, $0.description, $0.width, $0.height, $0.data.count) })")
        #expect(metadata.title == "Original" && metadata.album == "With pictures", "\(metadata)")
        if name.hasSuffix(".oga") {
            let check = try await runTool("/usr/bin/flac", ["-t", "-s", path])
            let said = String(decoding: check.errorOutput, as: UTF8.self)
                .replacingOccurrences(of: "WARNING, cannot check MD5 signature since it was unset in the STREAMINFO", with: "")
            #expect(check.status == 0 && !said.contains("ERROR"), "\(said)")
        } else {
            #expect(try await Self.probedPictures(path) == ["mjpeg 8x4", "png 16x8"])
        }
        #expect(difference(try render(path).samples, decodedBefore) == nil)

        if isMP4 {
            // A GIF does not fit an MP4: refused, naming both, the file left as it is.
            let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            let gif = try #require(AudioFilePicture(image: Array("GIF89a".utf8) + [2, 0, 3, 0, 0, 0, 0, 0, 0x3B]))
            #expect(gif.mimeType == "image/gif" && gif.width == 2 && gif.height == 3)
            #expect { try AudioFileTagWriter.update(path: path, setting: [], pictures: [gif]) } throws: {
                "\($0)".contains("image/gif") && "\($0)".contains("covr")
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes)
        }
        try AudioFileTagWriter.update(path: path, setting: [], pictures: [])
        metadata = try AudioFile(path: path).metadata
        #expect(metadata.pictures.isEmpty && metadata.title == "Original" && metadata.album == "With pictures", "\(metadata)")
        if !name.hasSuffix(".oga") { #expect(try await Self.probedPictures(path).isEmpty) }
        #expect(difference(try render(path).samples, decodedBefore) == nil)
    }

    /// aqgain killed (SIGKILL) while it writes: the file is the original or the new one, never a
    /// mix. A 1 s FLAC without padding and with an 8 MiB picture: the tags make it rewritten, and
    /// the copy takes long enough to be interrupted. The kill comes as soon as aqgain prints the
    /// file's line (just before it writes), read from a FIFO: an event, not a delay.
    @Test func aWriteKilledLeavesTheOriginalOrTheNewFile() async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.metaflac) else { print("metaflac is not installed: skipped"); return }
        try #require(FileManager.default.isExecutableFile(atPath: Self.aqgain), "aqgain is built with the tests")
        let directory = NSTemporaryDirectory() + "tags-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let source = directory + "/source.flac"
        let made = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440:duration=1", "-ac", "2", "-c:a", "flac", source])
        try #require(made.status == 0)
        let picture = directory + "/big.bin"
        let noise = try await runTool("/bin/sh", ["-c", "head -c 8388608 /dev/urandom > \"$0\"", picture])
        try #require(noise.status == 0)
        let imported = try await runTool(Self.metaflac, ["--import-picture-from=3|image/png|big|8x8x24|\(picture)", source])
        try #require(imported.status == 0, "\(String(decoding: imported.errorOutput, as: UTF8.self))")
        let unpadded = try await runTool(Self.metaflac, ["--remove", "--block-type=PADDING", "--dont-use-padding", source])
        try #require(unpadded.status == 0)
        let original = try Data(contentsOf: URL(fileURLWithPath: source))
        var outcomes: [String] = []
        for trial in 0..<3 {
            let path = directory + "/t\(trial).flac", fifo = directory + "/fifo\(trial)"
            try original.write(to: URL(fileURLWithPath: path))
            let run = try await runTool("/bin/sh", ["-c", "mkfifo \"$2\"; \"$0\" \"$1\" > \"$2\" & p=$!; head -n 1 < \"$2\" > /dev/null; kill -9 $p; wait $p; exit 0",
                                                    Self.aqgain, path, fifo])
            #expect(run.status == 0)
            let after = try Data(contentsOf: URL(fileURLWithPath: path))
            if after == original {
                outcomes.append("original")
            } else {
                // The new file, whole: the tag there, the picture kept, the audio decoding as before.
                #expect(try await Self.tag("REPLAYGAIN_TRACK_GAIN", path).count == 1, "trial \(trial): neither the original nor a whole new file")
                #expect(try await Self.pictures(path) == 1)
                #expect(after.suffix(10_000) == original.suffix(10_000))
                outcomes.append("new")
            }
        }
        print("killed writes left: \(outcomes)")
        // What a killed write left beside a file is removed by the next write of it; a temporary
        // file of a process still running (this one) is left to it. A dead process's one is made
        // here too, so there is one whatever the kills hit: the pid of a shell that has exited.
        let exited = try await runTool("/bin/sh", ["-c", "sh -c 'echo $$'"])
        let deadPID = try #require(Int32(String(decoding: exited.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)))
        for trial in 0..<3 {
            try Data([1, 2, 3]).write(to: URL(fileURLWithPath: directory + "/.t\(trial).flac.aqtags-\(deadPID)"))
        }
        let live = directory + "/.t0.flac.aqtags-\(getpid())"
        try Data([1]).write(to: URL(fileURLWithPath: live))
        let again = try await runTool(Self.aqgain, (0..<3).map { directory + "/t\($0).flac" })
        #expect(again.status == 0, "\(String(decoding: again.errorOutput, as: UTF8.self))")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.contains(".aqtags-") }
        #expect(leftovers == [(live as NSString).lastPathComponent], "\(leftovers)")
    }

    @Test func damagedTagsAndOtherContainersAreRefusedAndLeftAsTheyAre() async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.metaflac) else { print("metaflac is not installed: skipped"); return }
        let directory = NSTemporaryDirectory() + "tags-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try await Self.flac("d.flac", in: directory, padding: 1024)
        var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        // The VORBIS_COMMENT block (type 4) follows STREAMINFO (4 + 4 + 34 bytes): its vendor
        // length made larger than the block.
        let comment = 4 + 4 + 34
        try #require(bytes[comment] & 0x7F == 4, "the comment is not the second block")
        bytes[comment + 4 + 3] = 0x7F
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        #expect {
            try AudioFileTagWriter.update(path: path, setting: [("REPLAYGAIN_TRACK_GAIN", "-1.00 dB")])
        } throws: { "\($0)".contains("VORBIS_COMMENT") && "\($0)".contains("left as it is") }
        #expect(Array(try Data(contentsOf: URL(fileURLWithPath: path))) == bytes)

        let wav = try await LoudnessScanTests.make("e.wav", in: directory, rate: 44100, layout: "stereo", codec: [])
        let original = try Data(contentsOf: URL(fileURLWithPath: wav))
        #expect {
            try AudioFileTagWriter.update(path: wav, setting: [("REPLAYGAIN_TRACK_GAIN", "-1.00 dB")])
        } throws: { "\($0)".contains("not built yet") }
        #expect(try Data(contentsOf: URL(fileURLWithPath: wav)) == original)
        #expect(throws: AudioFileWriterError.self) { try AudioFileTagWriter.update(path: directory + "/missing.flac", setting: []) }
    }

    /// A silent file has no loudness: aqgain says so and writes no gain, unless `--fallback DB`
    /// gives one (with a peak of 0).
    @Test func aSilentFileGetsAGainOnlyWithAFallback() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.aqgain), "aqgain is built with the tests")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("aq-silent-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/silence.flac"
        let made = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "anullsrc=r=44100:cl=stereo", "-t", "2", "-c:a", "flac", path])
        try #require(made.status == 0)
        let plain = try await runTool(Self.aqgain, [path])
        #expect(plain.status == 0)
        #expect(String(decoding: plain.output, as: UTF8.self).contains("silent"))
        #expect(try await Self.tag("REPLAYGAIN_TRACK_GAIN", path).isEmpty)
        let given = try await runTool(Self.aqgain, ["--fallback", "-3", path])
        #expect(given.status == 0, "\(String(decoding: given.errorOutput, as: UTF8.self))")
        #expect(try await Self.tag("REPLAYGAIN_TRACK_GAIN", path) == ["REPLAYGAIN_TRACK_GAIN=-3.00 dB"])
        #expect(try await Self.tag("REPLAYGAIN_TRACK_PEAK", path) == ["REPLAYGAIN_TRACK_PEAK=0.000000"])
    }

    @Test func aqgainWritesWhatLoudgainMeasures() async throws {
        guard FileManager.default.isExecutableFile(atPath: LoudnessScanTests.loudgain), FileManager.default.isExecutableFile(atPath: Self.metaflac) else {
            print("loudgain or metaflac is not installed (make test installs them): skipped"); return
        }
        try #require(FileManager.default.isExecutableFile(atPath: Self.aqgain), "aqgain is built with the tests")
        let directory = NSTemporaryDirectory() + "tags-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // An album of a FLAC, an MP3 and an M4A at different levels.
        let flac = try await Self.flac("one.flac", in: directory, padding: 4096)
        let mp3 = try await LoudnessScanTests.make("two.mp3", in: directory, rate: 44100, layout: "stereo",
                                                   codec: ["-c:a", "libmp3lame", "-b:a", "192k", "-metadata", "title=Two"], decibels: -8)
        let m4a = try await LoudnessScanTests.make("three.m4a", in: directory, rate: 44100, layout: "stereo",
                                                   codec: ["-c:a", "aac", "-b:a", "160k", "-metadata", "title=Three"], decibels: -3)
        let album = [flac, mp3, m4a]
        // loudgain's numbers (it writes nothing without -s); its last row is the album.
        let reference = try await runTool(LoudnessScanTests.loudgain, ["-a", "-O", "-q"] + album)
        let rows = String(decoding: reference.output, as: UTF8.self).split(separator: "\n").dropFirst().map { $0.split(separator: "\t") }
        func number(_ row: Int, _ column: Int) throws -> Double {
            try #require(rows.count > row && rows[row].count > column ? Double(rows[row][column].split(separator: " ")[0]) : nil, "\(rows)")
        }
        let run = try await runTool(Self.aqgain, ["--album"] + album)
        #expect(run.status == 0, "\(String(decoding: run.errorOutput, as: UTF8.self))")
        #expect(String(decoding: run.output, as: UTF8.self).contains("album: gain"))
        func value(_ text: String?) -> Double? { text.flatMap { Double($0.split(separator: " ")[0]) } }
        for (index, path) in album.enumerated() {
            // Read back by ffprobe, names in any case.
            var tags: [String: String] = [:]
            for (name, text) in try await Self.probedTags(path) { tags[name.uppercased()] = text }
            #expect(abs((value(tags["REPLAYGAIN_TRACK_GAIN"]) ?? .nan) - (try number(index, 8))) <= 0.05, "\(path): \(tags)")
            #expect(abs((value(tags["REPLAYGAIN_TRACK_PEAK"]) ?? .nan) - (try number(index, 3))) <= 0.002, "\(path): \(tags)")
            #expect(abs((value(tags["REPLAYGAIN_ALBUM_GAIN"]) ?? .nan) - (try number(rows.count - 1, 8))) <= 0.05, "\(path): \(tags)")
            #expect(tags["TITLE"] != nil, "the other tags are kept: \(tags)")
        }

        // Opus: R128_TRACK_GAIN, relative to −23 LUFS as loudgain writes it too, and no REPLAYGAIN_*.
        let opus = try await LoudnessScanTests.make("four.opus", in: directory, rate: 48000, layout: "stereo", codec: ["-c:a", "libopus"], decibels: -5)
        let opusReference = try await runTool(LoudnessScanTests.loudgain, ["-O", "-q", opus])
        let opusRow = String(decoding: opusReference.output, as: UTF8.self).split(separator: "\n").dropFirst().first?.split(separator: "\t") ?? []
        let opusGain = try #require(opusRow.count > 8 ? Double(opusRow[8].split(separator: " ")[0]) : nil, "\(opusRow)")
        let opusRun = try await runTool(Self.aqgain, [opus])
        #expect(opusRun.status == 0, "\(String(decoding: opusRun.errorOutput, as: UTF8.self))")
        let metadata = try AudioFile(path: opus).metadata
        let q78 = try #require(metadata.tags["R128_TRACK_GAIN"].flatMap { Int($0) }, "\(metadata.tags)")
        #expect(abs(Double(q78) / 256 - opusGain) <= 0.05, "R128 \(q78), loudgain \(opusGain) dB")
        #expect(metadata.tags.keys.allSatisfy { !$0.hasPrefix("REPLAYGAIN") })
    }
}
