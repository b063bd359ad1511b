import Foundation
import Testing
import AudioFileStream
import BufferQueue
import CodecTestSupport
import TestSupport

// Failure classes found with third-party files (issue 37), each on a file the test makes with
// ffmpeg and a byte patch, against ffmpeg's decode of the same file.

/// A temporary file path with the given extension; the caller removes it.
func temporaryPath(_ ext: String) -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent("class-\(UUID()).\(ext)").path
}

/// Makes a file with ffmpeg from a lavfi source.
func ffmpegMake(_ source: String, _ path: String, _ options: [String]) async throws {
    _ = try await run(try #require(Where.tool("ffmpeg")), ["-v", "error", "-y", "-f", "lavfi", "-i", source] + options + [path])
}

/// The chunks of an IFF file (FORM/RIFF header of 12 bytes, then id + size + body, padded to even).
struct IFFChunks {
    var header: [UInt8]
    var chunks: [(id: String, body: [UInt8])]

    init(_ bytes: [UInt8]) throws {
        header = Array(bytes[0..<12])
        chunks = []
        var at = 12
        while at + 8 <= bytes.count {
            let id = String(decoding: bytes[at..<(at + 4)], as: UTF8.self)
            let size = bytes[(at + 4)..<(at + 8)].reduce(0) { $0 << 8 | Int($1) }
            try #require(at + 8 + size <= bytes.count, "chunk \(id) runs past the end")
            chunks.append((id, Array(bytes[(at + 8)..<(at + 8 + size)])))
            at += 8 + size + (size & 1)
        }
    }

    func body(_ id: String) throws -> [UInt8] { try #require(chunks.first { $0.id == id }).body }

    mutating func setBody(_ id: String, _ body: [UInt8]) throws {
        let index = try #require(chunks.firstIndex { $0.id == id })
        chunks[index].body = body
    }

    /// The file, with the FORM size recomputed (big-endian sizes: AIFF).
    var bytes: [UInt8] {
        var out = Array(header[0..<4])
        var rest = Array(header[8..<12])
        for chunk in chunks {
            rest += Array(chunk.id.utf8) + be32(chunk.body.count) + chunk.body
            if chunk.body.count & 1 == 1 { rest.append(0) }
        }
        out += be32(rest.count) + rest
        return out
    }
}

func be32(_ value: Int) -> [UInt8] { (0..<4).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }

func write(_ bytes: [UInt8], _ ext: String) throws -> String {
    let path = temporaryPath(ext)
    try Data(bytes).write(to: URL(fileURLWithPath: path))
    return path
}

@Suite(.enabled(if: Where.tool("ffmpeg") != nil, "ffmpeg is missing (make deps installs it): AIFF/CAF class tests skipped"))
struct AIFFLayoutClassTests {
    static let source = "aevalsrc=0.5*sin(2*PI*440*t)|0.3*sin(2*PI*660*t):s=8000:d=0.3"

    static func aiff(_ codec: String = "pcm_s16be") async throws -> (path: String, chunks: IFFChunks) {
        let path = temporaryPath("aiff")
        try await ffmpegMake(source, path, ["-c:a", codec])
        return (path, try IFFChunks([UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))))
    }

    /// Class 1: AIFF puts no order on its chunks; a sound data chunk before the common chunk plays
    /// the same frames as the file in the usual order.
    @Test func soundDataBeforeTheCommonChunkPlaysTheSameFrames() async throws {
        var (original, chunks) = try await Self.aiff()
        defer { try? FileManager.default.removeItem(atPath: original) }
        let reference = try await rendered(original).samples
        #expect(reference.count == 2400 * 2)
        let ssnd = try #require(chunks.chunks.firstIndex { $0.id == "SSND" })
        chunks.chunks.insert(chunks.chunks.remove(at: ssnd), at: 0)
        #expect(chunks.chunks.first?.id == "SSND")
        let moved = try write(chunks.bytes, "aiff")
        defer { try? FileManager.default.removeItem(atPath: moved) }
        let ours = try await rendered(moved).samples
        #expect(difference(ours, reference) == nil)
    }

    /// Class 1: COMM's numSampleFrames is what plays; bytes of SSND past it (trailing bytes, or
    /// an SSND offset that shifts the block) are not sound, as in Apple's AudioFile.
    @Test(arguments: [false, true])
    func theCommonChunksFrameCountIsWhatPlays(_ withOffset: Bool) async throws {
        var (original, chunks) = try await Self.aiff()
        defer { try? FileManager.default.removeItem(atPath: original) }
        let reference = try await rendered(original).samples
        var ssnd = try chunks.body("SSND")
        // 400 bytes of noise past the frames (100 frames of 2 × 16 bits).
        ssnd += (0..<400).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        if withOffset {
            // An offset of 12: 12 bytes of something else before the first frame.
            ssnd.replaceSubrange(0..<4, with: be32(12))
            ssnd.insert(contentsOf: [UInt8](repeating: 0x7F, count: 12), at: 8)
        }
        try chunks.setBody("SSND", ssnd)
        let patched = try write(chunks.bytes, "aiff")
        defer { try? FileManager.default.removeItem(atPath: patched) }
        let ours = try await rendered(patched).samples
        #expect(difference(ours, reference) == nil, "numSampleFrames = 2400, and those frames")
    }

    /// Class 2: 8-bit AIFF samples are signed; they play as ffmpeg decodes them.
    @Test func eightBitAIFFIsSigned() async throws {
        let (path, _) = try await Self.aiff("pcm_s8")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let ours = try await rendered(path).samples
        let reference = try await ffmpegFloats(path)
        #expect(ours.count == 2400 * 2)
        #expect(difference(ours, reference) == nil)
        #expect(ours.contains { $0 < -0.4 } && ours.contains { $0 > 0.4 })
    }

    /// Class 2: CAF's integer PCM is always signed (its flags have no signedness bit), 8-bit too.
    @Test func eightBitCAFIsSigned() async throws {
        let path = temporaryPath("caf")
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await ffmpegMake(Self.source, path, ["-c:a", "pcm_s8"])
        let ours = try await rendered(path).samples
        let reference = try await ffmpegFloats(path)
        #expect(ours.count == 2400 * 2)
        #expect(difference(ours, reference) == nil)
    }
}

@Suite(.enabled(if: Where.tool("ffmpeg") != nil, "ffmpeg is missing (make deps installs it): fragmented MP4 class test skipped"), .bothAACDecoders)
struct FragmentedMP4ClassTests {
    /// Class 3: ffmpeg's fragmented AAC ends with a `trun` whose last sample lasts 68 of AAC's
    /// 1 024 frames: the shortened duration is the end trim, as in an unfragmented file's `stts`.
    /// The same file with that duration patched to 1 024 plays every frame of the last packet.
    @Test func aShortLastSampleInATrunIsTheEndTrim() async throws {
        let path = temporaryPath("m4a")
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await ffmpegMake("sine=f=440:d=1.0:r=44100", path, ["-c:a", "aac", "-b:a", "96k", "-movflags", "frag_keyframe+empty_moov"])
        let (ours, _, renderer) = try await rendered(path)
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        // The one trun: flags 0x301 (data offset, then a duration and a size per sample).
        let trun = try #require(bytes.firstRange(of: Array("trun".utf8))).lowerBound
        let flags = bytes[(trun + 4)..<(trun + 8)].reduce(0) { $0 << 8 | Int($1) }
        let count = bytes[(trun + 8)..<(trun + 12)].reduce(0) { $0 << 8 | Int($1) }
        try #require(flags == 0x301, "ffmpeg's trun flags changed: \(String(flags, radix: 16))")
        let lastDuration = trun + 16 + (count - 1) * 8
        // 44 100 frames and AAC's 1 024 of priming: 45 124, 68 in the last packet.
        try #require(bytes[lastDuration..<(lastDuration + 4)].elementsEqual(be32(68)), "ffmpeg no longer shortens the last sample")
        bytes.replaceSubrange(lastDuration..<(lastDuration + 4), with: be32(1024))
        let patched = try write(bytes, "m4a")
        defer { try? FileManager.default.removeItem(atPath: patched) }
        let whole = try await rendered(patched).samples
        #expect(whole.count == count * 1024)
        #expect(ours.count == (count - 1) * 1024 + 68)
        #expect(difference(ours, Array(whole.prefix(ours.count))) == nil)
        #expect(renderer.file.packetTableInfo?.remainderFrames == 1024 - 68)
    }
}

@Suite(.enabled(if: Where.tool("ffmpeg") != nil, "ffmpeg is missing (make deps installs it): transport stream class test skipped"), .bothAACDecoders)
struct TransportStreamClassTests {
    /// Class 4: a transport stream cut so that its first PAT and PMT are gone (as a segment cut
    /// mid-stream): the audio before the next PAT/PMT is kept, as ffmpeg keeps it. Without its
    /// first tables the file plays exactly the frames of the whole one.
    @Test func audioBeforeTheFirstProgramTablesIsKept() async throws {
        let path = temporaryPath("ts")
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await ffmpegMake("sine=f=440:d=1.0:r=44100", path, ["-c:a", "aac", "-b:a", "96k"])
        let whole = try await rendered(path).samples
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let packets = stride(from: 0, to: bytes.count, by: 188).map { Array(bytes[$0..<min($0 + 188, bytes.count)]) }
        func pid(_ p: [UInt8]) -> Int { Int(p[1] & 0x1F) << 8 | Int(p[2]) }
        // The tables before the first audio packet go (ffmpeg repeats them every 0.1 s).
        let firstAudio = try #require(packets.firstIndex { ![0, 0x11, 0x1000].contains(pid($0)) })
        let kept = packets.enumerated().filter { $0.offset >= firstAudio || ![0, 0x1000].contains(pid($0.element)) }.map(\.element)
        let nextTables = try #require(kept.firstIndex { pid($0) == 0 })
        #expect(kept[..<nextTables].filter { pid($0) == 0x100 }.count >= 5, "audio packets come before the next PAT")
        let cut = try write(kept.flatMap { $0 }, "ts")
        defer { try? FileManager.default.removeItem(atPath: cut) }
        let ours = try await rendered(cut).samples
        #expect(ours.count == whole.count)
        #expect(difference(ours, whole) == nil)
        let reference = try await ffmpegFloats(cut)
        #expect(reference.count == (try await ffmpegFloats(path)).count, "ffmpeg keeps them too")
    }
}

@Suite(.enabled(if: Where.tool("ffmpeg") != nil, "ffmpeg is missing (make deps installs it): ADTS profile class test skipped"), .bothAACDecoders)
struct ADTSProfileClassTests {
    /// Class 5: ADTS headers whose profile field says SSR (2) on frames that are LC play as LC
    /// (faad and ffmpeg do the same), with a warning, and give the frames of the LC stream.
    @Test func anSSRProfileFieldOnAnLCStreamPlaysAsLC() async throws {
        let path = temporaryPath("aac")
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await ffmpegMake("sine=f=440:d=1.0:r=44100", path, ["-c:a", "aac", "-b:a", "96k"])
        let original = try await rendered(path).samples
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        var at = 0, frames = 0
        while at + 7 <= bytes.count {
            try #require(bytes[at] == 0xFF && bytes[at + 2] >> 6 == 1, "an LC header at byte \(at)")
            bytes[at + 2] = bytes[at + 2] & 0x3F | 2 << 6
            at += Int(bytes[at + 3] & 3) << 11 | Int(bytes[at + 4]) << 3 | Int(bytes[at + 5] >> 5)
            frames += 1
        }
        #expect(frames == 45)
        let patched = try write(bytes, "aac")
        defer { try? FileManager.default.removeItem(atPath: patched) }
        let (ours, _, renderer) = try await rendered(patched)
        #expect(difference(ours, original) == nil)
        #expect(renderer.file.warnings.contains { "\($0)".contains("SSR") })
    }
}

@Suite struct TruncatedMP3ClassTests {
    /// Class 6: an MP3 whose end is cut off mid-frame, with an ID3v1 tag after the cut, keeps its
    /// start trim (the LAME tag's encoder delay): it plays exactly the first frames of the whole
    /// file's gapless render, and a stream that cannot seek knows the priming when it is ready.
    @Test func aTruncatedMP3KeepsItsStartTrim() async throws {
        let source = Where.fixture("lame-vbr-v2-44k-stereo.mp3")
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: source)))
        let cut = Array(bytes[..<(bytes.count * 6 / 10)]) + Array("TAG".utf8) + [UInt8](repeating: 0x20, count: 125)
        let path = try write(cut, "mp3")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let whole = try await rendered(source).samples
        let (ours, _, renderer) = try await rendered(path)
        #expect(renderer.file.packetTableInfo?.primingFrames == 1105)
        #expect(ours.count > 20_000 * 2 && ours.count < whole.count)
        #expect(difference(ours, Array(whole.prefix(ours.count))) == nil)
        // The same bytes as a stream that cannot seek, a few hundred bytes at a time.
        let stream = AudioFileStream(fileTypeHint: nil, sourceIsSeekable: false)
        var primingWhenReady: Int?
        for start in stride(from: 0, to: cut.count, by: 333) {
            let events = try cut[start..<min(start + 333, cut.count)].withUnsafeBytes { try stream.parse($0) }
            for case .property(.readyToProducePackets) in events { primingWhenReady = stream.packetTableInfo?.primingFrames }
        }
        #expect(primingWhenReady == 1105)
    }
}

@Suite(.enabled(if: Where.tool("ffmpeg") != nil, "ffmpeg is missing (make deps installs it): free-format Layer II test skipped"))
struct FreeFormatLayerIIClassTests {
    /// Class 9a: free-format Layer II decodes with the allocation table its bit rate calls for.
    /// ffmpeg's fixed-rate Layer II (44.1 and 48 kHz, 192 kbit/s stereo) with every header's
    /// bit-rate index set to 0 (free format) renders exactly as the fixed-rate file. (libmpg123
    /// alone picks the wrong table for the 44.1 kHz one, and ffmpeg does not read it.)
    @Test(arguments: [44100, 48000])
    func freeFormatLayerIIDecodesLikeTheFixedRateStream(_ rate: Int) async throws {
        let path = temporaryPath("mp2")
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await ffmpegMake("sine=f=440:d=2:r=\(rate)", path, ["-ac", "2", "-c:a", "mp2", "-b:a", "192k"])
        let fixed = try await rendered(path).samples
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        var at = 0, frames = 0
        while at + 4 <= bytes.count {
            try #require(bytes[at] == 0xFF && bytes[at + 2] >> 4 == 10, "a 192 kbit/s header at byte \(at)")
            let length = 144 * 192_000 / rate + Int(bytes[at + 2] >> 1 & 1)
            bytes[at + 2] &= 0x0F
            at += length
            frames += 1
        }
        #expect(frames > 70)
        let free = try write(bytes, "mp2")
        defer { try? FileManager.default.removeItem(atPath: free) }
        let ours = try await rendered(free).samples
        #expect(ours.count == fixed.count)
        #expect(difference(ours, fixed) == nil)
    }
}

@Suite(.enabled(if: Where.tool("ffmpeg") != nil && Where.tool("mpg123") != nil, "ffmpeg or mpg123 is missing (make deps installs them): one-frame MP3 test skipped"))
struct OneFrameMP3ClassTests {
    /// Issue 52, class 5d: one Layer III frame right after a 1 856-byte ID3v2 tag, ending exactly
    /// at the end of the file (as ISO's conformance vectors are), is a file: it opens as MP3 with
    /// that one packet and renders the frame's 1 152 samples, those mpg123 gives for it (decoded
    /// with the frame after it, which changes nothing before it). It was refused as unconfirmed.
    @Test func aLoneFrameAfterATagIsAFile() async throws {
        let made = temporaryPath("mp3")
        defer { try? FileManager.default.removeItem(atPath: made) }
        // No bit reservoir: a frame decodes on its own.
        try await ffmpegMake("sine=f=440:d=0.5:r=44100", made, ["-c:a", "libmp3lame", "-b:a", "128k", "-reservoir", "0",
                                                               "-write_xing", "0", "-id3v2_version", "0"])
        let frames = try Self.frames(of: [UInt8](try Data(contentsOf: URL(fileURLWithPath: made))))
        try #require(frames.count > 8)
        // An ID3v2.4 tag of 1 856 bytes: a header and padding (sizes are syncsafe).
        let body = 1856 - 10
        let tag: [UInt8] = Array("ID3".utf8) + [4, 0, 0] + [21, 14, 7, 0].map { UInt8(body >> $0 & 0x7F) } + [UInt8](repeating: 0, count: body)
        let one = try write(tag + frames[5], "mp3")
        let two = try write(tag + frames[5] + frames[6], "mp3")
        let reference = temporaryPath("wav")
        defer { for path in [one, two, reference] { try? FileManager.default.removeItem(atPath: path) } }

        let file = try AudioFile(path: one)
        #expect(file.fileType == .mp3)
        #expect(file.packetCount == 1)
        #expect(file.dataOffset == 1856)
        let ours = try await rendered(one).samples
        #expect(ours.count == 1152)
        _ = try await run(try #require(Where.tool("mpg123")), ["-q", "-e", "f32", "-w", reference, two])
        let theirs = floats(wav: try Data(contentsOf: URL(fileURLWithPath: reference)))
        try #require(theirs.count >= 1152)
        #expect(difference(ours, Array(theirs.prefix(1152)), tolerance: 1e-6) == nil)
        #expect(ours.contains { abs($0) > 0.1 })
    }
}

extension OneFrameMP3ClassTests {
    /// The frames of an MPEG-1 Layer III stream at 44.1 kHz with no tag before them.
    static func frames(of bytes: [UInt8]) throws -> [[UInt8]] {
        var frames: [[UInt8]] = []
        var at = 0
        let rates = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320]
        while at + 4 <= bytes.count, bytes[at] == 0xFF {
            let length = 144 * rates[Int(bytes[at + 2] >> 4)] * 1000 / 44100 + Int(bytes[at + 2] >> 1 & 1)
            try #require(length > 4 && at + length <= bytes.count)
            frames.append(Array(bytes[at..<(at + length)]))
            at += length
        }
        return frames
    }

    /// Issue 52, class 5c: a LAME 3.93 MP3 whose Info frame sets the CRC-protection bit while its
    /// tag sits at the unprotected offset, with junk before the frames, Lyrics3v2 + APEv2 + ID3v1
    /// at the end, and cut short: its gapless numbers are kept, so it plays what is present less
    /// the 1 105 priming frames, exactly as mpg123 does. (They were lost: the whole frames played.)
    @Test(.enabled(if: Where.tool("lame") != nil && Where.tool("sox") != nil, "lame or sox is missing"))
    func aProtectedInfoFrameWithTheTagAtTheUnprotectedOffsetKeepsItsGaplessNumbers() async throws {
        let wav = temporaryPath("wav"), encoded = temporaryPath("mp3")
        defer { for path in [wav, encoded] { try? FileManager.default.removeItem(atPath: path) } }
        _ = try await run(try #require(Where.tool("sox")), ["-n", "-r", "44100", "-c", "2", "-b", "16", wav, "synth", "3", "sine", "440", "sine", "660", "vol", "0.5"])
        _ = try await run(try #require(Where.tool("lame")), ["--quiet", "-b", "128", "--id3v2-only", "--tt", "x", wav, encoded])
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: encoded)))
        if bytes.starts(with: Array("ID3".utf8)) {
            let size = bytes[6..<10].reduce(0) { $0 << 7 | Int($1) }
            bytes.removeFirst(10 + size)
        }
        let frames = try Self.frames(of: bytes)
        try #require(frames.count > 100)
        var info = frames[0]
        try #require(Array(info[36..<40]) == Array("Info".utf8), "lame wrote no Info tag")
        info[1] &= 0xFE   // "protected by a CRC"; the tag stays where it is
        let junk = (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) & 0x7F }
        let audio = frames[1...].flatMap { $0 }
        let cut = Array(audio.prefix(audio.count * 6 / 10))
        let lyrics = Array("LYRICSBEGIN".utf8) + Array("IND0000210".utf8) + Array("LYR00005hello".utf8)
        let lyrics3 = lyrics + Array(String(format: "%06d", lyrics.count).utf8) + Array("LYRICS200".utf8)
        func le32(_ value: Int) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
        let item = le32(1) + le32(0) + Array("Title".utf8) + [0] + Array("x".utf8)
        func apeBlock(_ flags: Int) -> [UInt8] { Array("APETAGEX".utf8) + le32(2000) + le32(item.count + 32) + le32(1) + le32(flags) + [UInt8](repeating: 0, count: 8) }
        let ape = apeBlock(0xA000_0000) + item + apeBlock(0x8000_0000)
        let id3v1 = Array("TAG".utf8) + [UInt8](repeating: 0x20, count: 125)
        let path = try write(junk + info + cut + lyrics3 + ape + id3v1, "mp3")
        let reference = temporaryPath("wav")
        defer { for file in [path, reference] { try? FileManager.default.removeItem(atPath: file) } }

        let (ours, _, renderer) = try await rendered(path)
        #expect(renderer.file.packetTableInfo?.primingFrames == 1105)
        _ = try await run(try #require(Where.tool("mpg123")), ["-q", "-e", "f32", "-w", reference, path])
        let theirs = floats(wav: try Data(contentsOf: URL(fileURLWithPath: reference)))
        let present = Int(renderer.file.packetCount) * 1152
        #expect(ours.count / 2 == present - 1105)
        #expect(difference(ours, theirs) == nil)
    }
}

@Suite(.enabled(if: Where.tool("ffmpeg") != nil, "ffmpeg is missing (make deps installs it): Ogg Theora test skipped"))
struct OggWithVideoClassTests {
    /// Issue 52, class 5a: an Ogg file multiplexing Theora video (its beginning page first) with
    /// Vorbis audio plays the audio, exactly as the Vorbis stream alone (stream-copied by ffmpeg)
    /// plays, and skips the video wherever its pages sit; an Ogg of Theora alone is refused with
    /// the codec named. (The whole file was refused as "Ogg Theora audio".)
    @Test func theVorbisOfATheoraFilePlays() async throws {
        let both = temporaryPath("ogg"), audio = temporaryPath("ogg"), video = temporaryPath("ogg")
        defer { for path in [both, audio, video] { try? FileManager.default.removeItem(atPath: path) } }
        let ffmpeg = try #require(Where.tool("ffmpeg"))
        _ = try await run(ffmpeg, ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=64x48:rate=10:duration=2", "-f", "lavfi",
                                   "-i", "sine=f=440:d=2:r=44100", "-c:v", "libtheora", "-c:a", "libvorbis", "-q:a", "3", both])
        _ = try await run(ffmpeg, ["-v", "error", "-y", "-i", both, "-map", "0:a", "-c", "copy", audio])
        _ = try await run(ffmpeg, ["-v", "error", "-y", "-i", both, "-map", "0:v", "-c", "copy", video])
        let file = try AudioFile(path: both)
        #expect(file.dataFormat.formatID == .vorbis)
        #expect(file.warnings.contains { $0.message.contains("Theora") })
        let ours = try await rendered(both).samples
        let alone = try await rendered(audio).samples
        #expect(ours.count == 88_200)
        #expect(ours == alone)
        #expect(throws: AudioFileStreamError.self) { try AudioFile(path: video) }
        do { _ = try AudioFile(path: video) } catch {
            #expect("\(error)".contains("Theora"))
        }
    }
}
