import Foundation
import Testing
import AudioFileStream
import AudioPlayback
import BufferQueue
import CodecTestSupport

/// Files cut off, or with gapless numbers that do not fit, as real encoders and repackagers leave
/// them (issue 14): what plays is what mpg123, the reference decoder, plays from the same bytes.
@Suite(.enabled(if: Where.tool("mpg123") != nil, "mpg123 is missing (make deps installs it): MP3 reference tests skipped"))
struct DamagedMP3Tests {
    /// The fixture's frames: the Info frame, then 44 audio frames (128 kbit/s, 44.1 kHz).
    static func frames() throws -> [[UInt8]] {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Where.fixture("lame-cbr128-44k-stereo.mp3"))))
        var frames: [[UInt8]] = [], i = 0
        while i + 4 <= bytes.count, bytes[i] == 0xFF {
            let length = 144 * 128_000 / 44_100 + Int(bytes[i + 2] >> 1 & 1)
            frames.append(Array(bytes[i..<min(i + length, bytes.count)]))
            i += length
        }
        return frames
    }

    /// Where the LAME tag's frame count and its delay/padding field sit in the Info frame.
    static func tagFields(_ info: [UInt8]) throws -> (frames: Int, delayPadding: Int) {
        let tag = try #require(info.firstRange(of: Array("Info".utf8))).lowerBound
        #expect(info[tag + 7] == 0x0F)   // frames, bytes, TOC and quality present
        return (tag + 8, tag + 8 + 4 + 4 + 100 + 4 + 21)
    }

    /// Our render and mpg123's gapless float decode of `bytes`.
    static func both(_ bytes: [UInt8]) async throws -> (ours: [Float], reference: [Float], file: AudioFile) {
        let directory = FileManager.default.temporaryDirectory
        let path = directory.appendingPathComponent("damaged-\(UUID()).mp3").path
        let output = directory.appendingPathComponent("damaged-\(UUID()).wav").path
        defer { try? FileManager.default.removeItem(atPath: path); try? FileManager.default.removeItem(atPath: output) }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let (ours, _, renderer) = try await rendered(path)
        _ = try await run(try #require(Where.tool("mpg123")), ["-q", "-e", "f32", "-w", output, path])
        let reference = floats(wav: try Data(contentsOf: URL(fileURLWithPath: output)))
        return (ours, reference, renderer.file)
    }

    /// Cut after 1, 2, 2.5 and 20 of its 44 frames: the start trim stays, the end trim (which
    /// belongs to frames not there) goes, and it plays as mpg123 plays it, without an error.
    @Test(arguments: [2.0, 4.0, 5.0, 40.0])
    func aFileCutShortKeepsItsStartTrim(_ halfFrames: Double) async throws {
        let frames = try Self.frames()
        let whole = Int(halfFrames) / 2
        var bytes = Array(frames.prefix(1 + whole).joined())
        if Int(halfFrames) % 2 == 1 { bytes += frames[1 + whole].prefix(frames[1 + whole].count / 2) }
        let (ours, reference, file) = try await Self.both(bytes)
        #expect(file.damage == nil)
        #expect(file.warnings.contains { $0.code == .truncated })
        #expect(ours.count == max(whole * 1152 - 1105, 0) * 2)
        #expect(ours == reference)
    }

    /// A LAME tag with delay and padding 0 (repackagers write it) still means the decoder's
    /// 529-frame delay, which mpg123 removes.
    @Test func zeroDelayAndPaddingStillMeanTheDecoderDelay() async throws {
        var bytes = Array(try Self.frames().joined())
        let at = try Self.tagFields(bytes).delayPadding
        bytes[at..<(at + 3)] = [0, 0, 0]
        let (ours, reference, file) = try await Self.both(bytes)
        #expect(file.packetTableInfo?.primingFrames == 529 && file.packetTableInfo?.remainderFrames == 0)
        #expect(ours.count == (44 * 1152 - 529) * 2)
        #expect(ours == reference)
    }

    /// Delay and padding that cover every coded frame leave nothing to play: a one-frame stream
    /// whose tag keeps the fixture's 576 + 529 priming and 1 073 remainder (1 152 coded frames).
    @Test func trimsCoveringEveryCodedFrameLeaveNoFrames() async throws {
        let frames = try Self.frames()
        var bytes = Array(frames.prefix(2).joined())
        let at = try Self.tagFields(bytes).frames
        bytes[at..<(at + 4)] = [0, 0, 0, 1]
        let (ours, reference, file) = try await Self.both(bytes)
        #expect(file.packetTableInfo?.validFrames == 0)
        #expect(file.warnings.isEmpty)
        #expect(ours.isEmpty)
        #expect(reference.isEmpty)
    }
}

/// Gapless tables that describe more frames than the packets hold do not cut what is there.
@Suite(.bothAACDecoders) struct OverlongGaplessTableTests {
    static func patched(_ source: String, _ patch: (inout [UInt8]) throws -> Void) async throws -> (ours: Int, full: Int, priming: Int) {
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: source)))
        let (original, format, renderer) = try await rendered(source)
        try patch(&bytes)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("overlong-\(UUID())." + (source as NSString).pathExtension).path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let (ours, _, patchedRenderer) = try await rendered(path)
        #expect(patchedRenderer.file.packetCount == renderer.file.packetCount)
        return (ours.count / format.channelsPerFrame, Int(renderer.file.totalFrames), original.count / format.channelsPerFrame)
    }

    @Test(.enabled(if: Where.shared != nil, "../shared/fixtures (or $AQ_FIXTURES) is absent"))
    func anITunSMPBCountingMoreFramesPlaysEveryFrameAfterThePriming() async throws {
        let shared = try #require(Where.shared)
        let source = shared.appendingPathComponent("aac-lc-itunes-7.6.2-itunsmpb-mono-1s.m4a").path
        let (ours, full, _) = try await Self.patched(source) { bytes in
            // valid 0xAC44 (44 100) becomes 0xD000 (53 248): more than the 46 packets hold.
            let at = try #require(bytes.firstRange(of: Array("000000000000AC44".utf8))).lowerBound
            bytes.replaceSubrange(at..<(at + 16), with: Array("000000000000D000".utf8))
        }
        #expect(ours == full - 2112)
    }

    @Test func aPaktCountingMoreFramesPlaysEveryFrameAfterThePriming() async throws {
        let (ours, full, original) = try await Self.patched(Where.fixture("alac-44k-stereo-pakt-after-data.caf")) { bytes in
            // The pakt's valid-frame count (after its packet count) grows by 5 000.
            let at = try #require(bytes.firstRange(of: Array("pakt".utf8))).lowerBound + 12 + 8
            let valid = bytes[at..<(at + 8)].reduce(Int64(0)) { $0 << 8 | Int64($1) } + 5000
            bytes.replaceSubrange(at..<(at + 8), with: (0..<8).reversed().map { UInt8(truncatingIfNeeded: valid >> (8 * $0)) })
        }
        #expect(original == 48510)
        #expect(ours == full)
    }
}
