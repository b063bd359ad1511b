import Foundation
import Testing
import AudioFileStream
import AudioPlayback
import BufferQueue
import FAADDecoder
import MPG123Decoder
import OpenCoreAMRDecoder
import SoxrConverter
import CodecTestSupport
import TestSupport

/// Frames delivered by position, as a seekable file would hold them.
final class PositionedFrames: @unchecked Sendable {
    private let lock = NSLock()
    private var samples: [Float] = []
    private(set) var deliveries = 0
    let channels: Int
    init(channels: Int) { self.channels = channels }

    func put(_ frame: Int64, _ piece: UnsafeBufferPointer<Float>) {
        lock.lock()
        defer { lock.unlock() }
        let start = Int(frame) * channels
        if samples.count < start + piece.count { samples += repeatElement(Float.nan, count: start + piece.count - samples.count) }
        for (offset, value) in piece.enumerated() { samples[start + offset] = value }
        deliveries += 1
    }

    func prefix(frames: Int64) -> [Float] {
        lock.lock()
        defer { lock.unlock() }
        return Array(samples.prefix(Int(frames) * channels))
    }
}

/// What a render gave: the samples and the error that ended it, if any.
struct RenderOutcome {
    var samples: [Float]
    var error: String?
}

/// The sequential render through ``AudioFileRenderer``, keeping what came before an error.
func sequentialOutcome(_ path: String, registry: AudioDecoderRegistry = AACDecoderChoice.current.registry) -> RenderOutcome {
    do {
        let renderer = try AudioFileRenderer(file: try AudioFile(path: path), registry: registry)
        let channels = renderer.outputFormat.channelsPerFrame
        var all: [Float] = []
        var scratch = [Float](repeating: 0, count: 4096 * channels)
        do {
            while true {
                let n = try scratch.withUnsafeMutableBufferPointer { try renderer.render(into: $0, frames: 4096) }
                if n == 0 { break }
                all += scratch[0..<(n * channels)]
            }
        } catch {
            return RenderOutcome(samples: all, error: "\(error)")
        }
        return RenderOutcome(samples: all)
    } catch {
        return RenderOutcome(samples: [], error: "\(error)")
    }
}

/// A ``ConcurrentFileRenderer`` render, joined by position; runs on `decodingWork` (it blocks).
func concurrentOutcome(_ path: String, jobs: Int = 2, chunkFrames: Int64? = nil) async -> (outcome: RenderOutcome, renderer: ConcurrentFileRenderer?) {
    let registry = AACDecoderChoice.current.registry
    return await withCheckedContinuation { continuation in
        decodingWork.async {
            let renderer: ConcurrentFileRenderer
            do {
                renderer = try ConcurrentFileRenderer(file: try AudioFile(path: path), jobs: jobs, chunkFrames: chunkFrames, registry: registry)
            } catch {
                return continuation.resume(returning: (RenderOutcome(samples: [], error: "\(error)"), nil))
            }
            let frames = PositionedFrames(channels: renderer.outputFormat.channelsPerFrame)
            do {
                let count = try renderer.render { frame, piece in frames.put(frame, piece) }
                continuation.resume(returning: (RenderOutcome(samples: frames.prefix(frames: count)), renderer))
            } catch {
                continuation.resume(returning: (RenderOutcome(samples: frames.prefix(frames: renderer.framesRendered), error: "\(error)"), renderer))
            }
        }
    }
}

func registerAllDecoders() {
    MPG123Decoder.register()
    FAADDecoder.register()
    AMRDecoder.register()
    SoxrConverter.register()
}

/// Every fixture, the project's and the shared ones (when present).
let everyFixture: [String] = {
    func audio(in directory: URL) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { !$0.hasSuffix(".md") && !$0.hasSuffix(".tsv") && !$0.hasPrefix("SHA256") && !$0.hasSuffix(".raw") }
            .sorted().map { directory.appendingPathComponent($0).path }
    }
    return audio(in: TestPaths.projectFixtures) + (TestPaths.sharedFixtures.map(audio(in:)) ?? [])
}()

/// Fixtures whose AAC uses perceptual noise substitution: FAAD2 draws the noise from a generator
/// that runs on from the first frame, so a chunk's noise bands differ from the sequential
/// render's (see ``ConcurrentFileRenderer``). The join check must find it in each, and the
/// render, started over on one thread, is bit-identical.
let noiseSubstitutedFixtures: Set<String> = ["aac-44k-fragmented-after-moov-samples.m4a", "aac-44k-fragmented-sidx.m4a", "aac-44k-fragmented.m4a",
                                              "demo-melody.m4a", "ffmpeg-aac-44k-moov-first.m4a", "ffmpeg-aac-44k-moov-last.m4a", "ffmpeg-aac-48k.aac"]

@Suite(.serialized) struct ConcurrentRenderTests {
    /// The proof the issue asks for: on every fixture, a render split into chunks of three
    /// packets or 2048 frames, whichever is more (a join every few thousand frames, each with its
    /// pre-roll), is the sequential
    /// render, bit for bit, with the same error where one ends it — or the file is declined and
    /// rendered on one thread, with the reason given.
    @Test(arguments: everyFixture)
    func everyFixtureSplitsBitIdenticallyOrSaysWhyNot(_ path: String) async throws {
        registerAllDecoders()
        let name = URL(fileURLWithPath: path).lastPathComponent
        let file = try? AudioFile(path: path)
        let framesPerPacket = Int64(max(file.map { ($0.formatList.first ?? $0.dataFormat).framesPerPacket } ?? 1, 1))
        let (split, renderer) = await concurrentOutcome(path, chunkFrames: max(3 * framesPerPacket, 2048))
        let registry = AACDecoderChoice.current.registry
        let sequential = await withCheckedContinuation { continuation in decodingWork.async { continuation.resume(returning: sequentialOutcome(path, registry: registry)) } }
        #expect(split.error == sequential.error, "\(name)")
        guard let renderer else { return }   // both failed to open: same error, checked above
        if renderer.jobs == 1 {
            #expect(renderer.sequentialReason != nil, "\(name) rendered on one thread without a reason")
        }
        let identical = split.samples.map(\.bitPattern) == sequential.samples.map(\.bitPattern)
        #expect(identical,
                "\(name): \(renderer.chunks.count) chunks on \(renderer.jobs) threads, \(renderer.sequentialReason ?? "split"): \(difference(split.samples, sequential.samples) ?? "")")
        if noiseSubstitutedFixtures.contains(name) {
            // Their joins do not converge: the check finds it and the render starts over.
            #expect(renderer.sequentialReason?.contains("differ") == true, "\(name): \(renderer.sequentialReason ?? "split")")
        }
    }

    /// Class 9 of issue 37: AAC-LC without perceptual noise substitution splits bit-identically;
    /// with it (ffmpeg's default, here in a transport stream as `aqrender x.ts --jobs 2` met it)
    /// libfaad2's noise generator runs from the start of the stream, so a chunk's decode cannot
    /// equal the sequential one: the join check finds the difference and the render starts over on
    /// one thread, bit-identical, saying why.
    /// FLAC (native and in Ogg), Ogg Vorbis and Ogg Opus split on two threads bit-identically to
    /// one: FLAC frames decode alone, Vorbis needs one packet of pre-roll, and Opus's 64 packets
    /// converge (every join is checked; none may fall back here); a chain is not split.
    @Test(.enabled(if: ["ffmpeg", "flac", "oggenc", "opusenc"].allSatisfy { Where.tool($0) != nil }, "ffmpeg, flac, vorbis-tools or opus-tools is missing"))
    func xiphFilesSplitBitIdentically() async throws {
        registerAllDecoders()
        _ = try await rendered(Where.fixture("demo-melody.m4a"))   // registers the Xiph decoders too
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xiph-split-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let wav = directory.appendingPathComponent("src.wav").path
        _ = try await run(try #require(Where.tool("ffmpeg")), ["-v", "error", "-f", "lavfi", "-i", "sine=frequency=440:duration=12.3:sample_rate=48000",
                                                                "-f", "lavfi", "-i", "anoisesrc=d=12.3:c=pink:a=0.1:r=48000:seed=3",
                                                                "-filter_complex", "amix=inputs=2", "-ac", "2", wav])
        var files: [String] = []
        for (tool, ext, arguments) in [("flac", "flac", ["-s", "-f", wav, "-o"]), ("flac", "oga", ["-s", "-f", "--ogg", wav, "-o"]),
                                       ("oggenc", "ogg", ["-Q", wav, "-o"]), ("opusenc", "opus", ["--quiet", wav])] {
            let path = directory.appendingPathComponent("a.\(ext)").path
            _ = try await run(try #require(Where.tool(tool)), arguments + [path])
            files.append(path)
        }
        for path in files {
            let (split, renderer) = await concurrentOutcome(path, chunkFrames: 96_000)
            let registry = AACDecoderChoice.current.registry
        let sequential = await withCheckedContinuation { continuation in decodingWork.async { continuation.resume(returning: sequentialOutcome(path, registry: registry)) } }
            let name = URL(fileURLWithPath: path).lastPathComponent
            #expect(split.error == nil && sequential.error == nil, "\(name): \(split.error ?? "") \(sequential.error ?? "")")
            #expect(renderer?.jobs == 2 && renderer?.sequentialReason == nil, "\(name): \(renderer?.sequentialReason ?? "")")
            #expect(difference(split.samples, sequential.samples) == nil, "\(name)")
        }
        let chain = directory.appendingPathComponent("chain.opus").path
        try Data(try Data(contentsOf: URL(fileURLWithPath: files[3])) + Data(contentsOf: URL(fileURLWithPath: files[3]))).write(to: URL(fileURLWithPath: chain))
        let (_, chained) = await concurrentOutcome(chain, chunkFrames: 96_000)
        #expect(chained?.sequentialReason?.contains("chain") == true, "\(chained?.sequentialReason ?? "split")")
    }

    @Test(.enabled(if: Where.tool("ffmpeg") != nil, "ffmpeg is missing (make deps installs it)"), .bothAACDecoders)
    func noiseSubstitutionIsFoundAtTheJoinsAndRendersOnOneThread() async throws {
        registerAllDecoders()
        let ffmpeg = try #require(Where.tool("ffmpeg"))
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pns-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // A tone under pink noise: the noise above 4 kHz is what the encoder may substitute.
        for (pns, ext) in [(0, "m4a"), (1, "m4a"), (1, "ts")] {
            _ = try await run(ffmpeg, ["-v", "error", "-f", "lavfi", "-i", "sine=frequency=440:duration=4:sample_rate=44100",
                                       "-f", "lavfi", "-i", "anoisesrc=d=4:c=pink:a=0.2:r=44100:seed=7",
                                       "-filter_complex", "amix=inputs=2", "-c:a", "aac", "-b:a", "96k", "-aac_pns", "\(pns)",
                                       directory.appendingPathComponent("pns\(pns).\(ext)").path])
        }
        let chunk: Int64 = 8 * 1024
        let plain = directory.appendingPathComponent("pns0.m4a").path
        let (plainSplit, plainRenderer) = await concurrentOutcome(plain, chunkFrames: chunk)
        let plainSequential = sequentialOutcome(plain)
        #expect(try #require(plainRenderer).chunks.count > 10)
        #expect(plainRenderer?.sequentialReason == nil, "without noise substitution the render stays split")
        #expect(plainSplit.error == nil && plainSequential.error == nil)
        let plainIdentical = plainSplit.samples.map(\.bitPattern) == plainSequential.samples.map(\.bitPattern)
        #expect(plainIdentical, "without noise substitution: \(difference(plainSplit.samples, plainSequential.samples) ?? "")")

        for name in ["pns1.m4a", "pns1.ts"] {
            let noisy = directory.appendingPathComponent(name).path
            let (noisySplit, noisyRenderer) = await concurrentOutcome(noisy, chunkFrames: chunk)
            let noisySequential = sequentialOutcome(noisy)
            let renderer = try #require(noisyRenderer)
            #expect(renderer.sequentialReason?.contains("differ") == true, "\(name): \(renderer.sequentialReason ?? "split")")
            let identical = noisySplit.samples.map(\.bitPattern) == noisySequential.samples.map(\.bitPattern)
            #expect(identical, "\(name): \(difference(noisySplit.samples, noisySequential.samples) ?? "")")
            #expect(noisySequential.samples.count >= 4 * 44100 * renderer.outputFormat.channelsPerFrame)
        }
    }

    static let aqrender = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        .appendingPathComponent("aqrender").path

    /// `aqrender` as a user runs it: a 40-second LAME VBR file with two jobs is split into four
    /// chunks, written where they belong, and the WAV (float and 16-bit) is byte for byte the one
    /// `--jobs 1` writes, 40 × 44 100 frames long. A transform (here `--loops 2`) renders on one
    /// thread and says so.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: aqrender) && Where.tool("lame") != nil && Where.tool("sox") != nil,
                   "aqrender is not built beside the tests, or lame or sox is missing"))
    func aqrenderWritesTheSameFileWithJobs() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("jobs-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let source = directory.appendingPathComponent("source.wav").path, mp3 = directory.appendingPathComponent("song.mp3").path
        _ = try await run(try #require(Where.tool("sox")), ["-n", "-r", "44100", "-c", "2", "-b", "16", source, "synth", "40", "sine", "200-4000", "vol", "0.5"])
        _ = try await run(try #require(Where.tool("lame")), ["--quiet", "-V", "2", source, mp3])
        for format in ["f32", "s16"] {
            let one = directory.appendingPathComponent("one-\(format).wav").path, two = directory.appendingPathComponent("two-\(format).wav").path
            let single = try await runTool(Self.aqrender, [mp3, one, "--format", format, "--jobs", "1", "--verbose"])
            let split = try await runTool(Self.aqrender, [mp3, two, "--format", format, "--jobs", "2", "--verbose"])
            #expect(single.status == 0 && split.status == 0)
            #expect(String(decoding: split.errorOutput, as: UTF8.self).contains("4 chunks on 2 threads"), "\(String(decoding: split.errorOutput, as: UTF8.self))")
            let first = try Data(contentsOf: URL(fileURLWithPath: one)), second = try Data(contentsOf: URL(fileURLWithPath: two))
            let bytesPerFrame = format == "f32" ? 8 : 4
            #expect(first.count == (format == "f32" ? 46 : 44) + 40 * 44100 * bytesPerFrame)
            #expect(first == second, "\(format): --jobs 2 wrote another file than --jobs 1")
        }
        let looped = try await runTool(Self.aqrender, [mp3, directory.appendingPathComponent("loops.wav").path, "--loops", "2", "--jobs", "2", "--verbose"])
        #expect(looped.status == 0)
        #expect(String(decoding: looped.errorOutput, as: UTF8.self).contains("one thread"))
    }

    /// A stream that changes rate part-way (44.1 → 48 kHz) cannot be joined exactly: a chunk
    /// decodes to another rate than the stream declares, or than the first chunk (and converting
    /// it needs a resampler, which has state). It renders on one thread, says why, and gives what
    /// the sequential render gives.
    @Test(.enabled(if: TestPaths.sharedFixtures != nil, "the shared fixtures are absent"))
    func aRateChangeRendersAgainOnOneThread() async throws {
        registerAllDecoders()
        let path = try #require(TestPaths.sharedFixtures).appendingPathComponent("edge-mp3-samplerate-change-44k-to-48k.mp3").path
        let (split, renderer) = await concurrentOutcome(path, chunkFrames: 44100)
        let sequential = sequentialOutcome(path)
        let reason = try #require(renderer?.sequentialReason)
        #expect(reason.contains("44100.0 Hz") && reason.contains("48000.0 Hz"), "\(reason)")
        #expect(split.error == nil && sequential.error == nil)
        let identical = split.samples.map(\.bitPattern) == sequential.samples.map(\.bitPattern)
        #expect(identical, "\(difference(split.samples, sequential.samples) ?? "")")
    }

    /// A packet that fails to decode (its bytes overwritten) in a chunk: the chunk cannot vouch
    /// for its join (the decoder's state after an error is its own), so the render starts over
    /// on one thread, says why, and gives the sequential render's samples and error report.
    @Test func aDecodingErrorInAChunkRendersAgainOnOneThread() async throws {
        registerAllDecoders()
        let damaged = try copyWithPacketOverwritten(Where.fixture("ffmpeg-aac-44k-moov-first.m4a"), packet: 30)
        defer { try? FileManager.default.removeItem(at: damaged) }
        let (split, renderer) = await concurrentOutcome(damaged.path, chunkFrames: 8192)
        let sequential = sequentialOutcome(damaged.path)
        let concurrent = try #require(renderer)
        #expect(concurrent.chunks.count > 4)
        let reason = try #require(concurrent.sequentialReason)
        #expect(reason.contains("could not be joined exactly") && reason.contains("libfaad2"), "\(reason)")
        #expect(concurrent.lastConverterError?.code == .decoderError)
        #expect(split.samples.count == 48510 * 2)
        let identical = split.samples.map(\.bitPattern) == sequential.samples.map(\.bitPattern)
        #expect(identical, "\(difference(split.samples, sequential.samples) ?? "")")
    }
}

/// Class 8 of issue 37: a seek into AAC-LC equals the linear render to the last frame. The
/// difference once seen at the end of an ffmpeg M4A is libfaad2's noise substitution (a random
/// generator that runs from the stream's start, which no seek can reproduce): without it the
/// seek is bit-exact to the end; with it, lengths are equal and only the noise bands differ (by
/// less than 0.002).
@Suite(.bothAACDecoders) struct SeekEqualsLinearTests {
    @Test(.enabled(if: Where.tool("ffmpeg") != nil, "ffmpeg is missing (make deps installs it)"),
          arguments: [0, 1])
    func aSeekIntoAACEqualsTheLinearRenderToTheEnd(_ pns: Int) async throws {
        registerAllDecoders()
        let ffmpeg = try #require(Where.tool("ffmpeg"))
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("seek-\(UUID()).m4a").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        _ = try await run(ffmpeg, ["-v", "error", "-f", "lavfi", "-i", "sine=f=440:d=6.8:r=44100", "-f", "lavfi", "-i", "sine=f=660:d=6.8:r=44100",
                                   "-filter_complex", "amerge", "-c:a", "aac", "-aac_pns", "\(pns)", path])
        let registry = AACDecoderChoice.current.registry
        let (linear, seeks) = try await withCheckedThrowingContinuation { continuation in
            decodingWork.async {
                continuation.resume(with: Result {
                    func renderAll(_ renderer: AudioFileRenderer) throws -> [Float] {
                        var all: [Float] = [], scratch = [Float](repeating: 0, count: 8192)
                        while true {
                            let n = try scratch.withUnsafeMutableBufferPointer { try renderer.render(into: $0, frames: 4096) }
                            if n == 0 { return all }
                            all += scratch[0..<(n * 2)]
                        }
                    }
                    let linear = try renderAll(AudioFileRenderer(file: AudioFile(path: path), registry: registry))
                    let seeks = try [1.0, 2.5, 6.7].map { seconds in
                        (Int((seconds * 44100).rounded()), try renderAll(AudioFileRenderer(file: AudioFile(path: path), startFrame: Int64((seconds * 44100).rounded()),
                                                                                           registry: registry)))
                    }
                    return (linear, seeks)
                })
            }
        }
        let linearFrames = linear.count / 2
        #expect(linearFrames == 299_880)   // 6.8 s at 44.1 kHz
        for (start, seek) in seeks {
            let expected = Array(linear[(start * 2)...])
            #expect(seek.count == expected.count, "from frame \(start)")
            if pns == 0 {
                #expect(difference(seek, expected) == nil, "from frame \(start)")
            } else {
                // Only the noise bands: small against the tones (amplitude 0.125 each).
                let worst = zip(seek, expected).map { abs($0 - $1) }.max() ?? 0
                // Measured: at most 7e-4. A seek one frame off would differ by about 0.008 here.
                #expect(worst < 0.002, "from frame \(start): \(worst)")
            }
        }
    }
}
