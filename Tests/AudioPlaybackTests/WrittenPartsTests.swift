import Foundation
import Testing
import AVCodecAAC
import AudioFileStream
import AudioPlayback
import BufferQueue
import CodecTestSupport
import FLACDecoder
import FLACEncoder
import OpusDecoder
import OpusEncoder
import TestSupport

/// A source cut in two at an odd frame, each part written by this library on its own: the gapless
/// player plays the two as the whole source's length, and the lossless formats bit for bit
/// across the join.
@Suite(.enabled(if: Where.tool("ffmpeg") != nil, "ffmpeg is missing (make deps installs it)"))
struct WrittenPartsTests {
    static let total = 88_200, cut = 40_001

    /// Two seconds of 16-bit stereo from ffmpeg: tones and a little noise.
    static func source() async throws -> [Int16] {
        let ffmpeg = try #require(Where.tool("ffmpeg"))
        let data = try await run(ffmpeg, ["-v", "error", "-f", "lavfi", "-i", "aevalsrc=0.3*sin(2*PI*330*t)+0.01*random(0)|0.3*sin(2*PI*495*t):s=44100:d=2",
                                          "-f", "s16le", "-c:a", "pcm_s16le", "-"])
        return data.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
    }

    @Test(arguments: ["alac.m4a", "flac.flac", "alac.caf", "aac.m4a", "opus.opus"])
    func twoPartsPlayAsTheWhole(_ name: String) async throws {
        FLACEncoder.register()
        OpusEncoder.register()
        AVCodecAAC.register(decoders: AudioDecoderRegistry())
        FLACDecoder.register()
        OpusDecoder.register()
        let samples = try await Self.source()
        try #require(samples.count == Self.total * 2)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("parts-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let id: AudioFormatID = name.hasPrefix("alac") ? .appleLossless : name.hasPrefix("flac") ? .flac : name.hasPrefix("aac") ? .aacLC : .opus
        let format = AudioStreamDescription(sampleRate: 0, formatID: id, bytesPerPacket: 0, framesPerPacket: 0, bytesPerFrame: 0,
                                            channelsPerFrame: 0, bitsPerChannel: 16)
        var paths: [String] = []
        var validFrames: Int64 = 0
        for (index, range) in [0..<Self.cut, Self.cut..<Self.total].enumerated() {
            let path = folder.appendingPathComponent("\(index)-\(name)").path
            let writer = try AudioFileWriter(path: path, format: format, clientFormat: .int16(sampleRate: 44100, channels: 2))
            try samples[(range.lowerBound * 2)..<(range.upperBound * 2)].withUnsafeBytes { try writer.write($0) }
            try writer.close()
            validFrames += writer.validFrames
            paths.append(path)
        }
        let (collector, frames) = try await play(paths)
        let expected = id == .opus ? validFrames : Int64(Self.total)
        #expect(frames == expected, "\(frames) frames played, \(expected) expected")
        #expect(collector.captured.count == 1)
        let heard = try #require(collector.captured.first)
        #expect(heard.count == Int(expected) * 2)
        if id == .appleLossless || id == .flac {
            let source = samples.map { Float($0) / 32768 }
            #expect(difference(heard, source) == nil, "the join is not the source's frames")
        }
    }
}
