import Foundation
import Testing
import AudioFileStream
import AudioPlayback
import AudioCodecs
import BufferQueue
import CodecTestSupport
import TestSupport

/// Writing a recording with the codec presets and the recorder that owns the order of the end —
/// in Swift 6 mode, with no unchecked box in the caller.
@Suite struct RecorderTests {
    static func folder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("recorder-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    static func record(_ path: String, _ encoding: AudioFileEncoding, frames: Int = 48_000) async throws -> AudioFileRecorder.Recording {
        AudioCodecs.registerAll()
        let source = NullSource(signal: .sine(frequency: 440, amplitude: 0.5), pacing: .unpaced, sampleRate: 48_000, channels: 2)
        let recorder = try AudioFileRecorder(path: path, encoding: encoding, sampleRate: 48_000, channels: 2, source: source, frameLimit: frames)
        try recorder.start()
        return try await recorder.finished()
    }

    /// Every preset, to the exact frame count the limit asked for; lossless ones to the PCM
    /// recording's samples.
    @Test func eachPresetRecordsExactlyTheFramesAsked() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let wav = folder.appendingPathComponent("take.wav").path
        let pcm = try await Self.record(wav, .pcm(bits: 16))
        #expect(pcm.validFrames == 48_000 && pcm.format.bitsPerChannel == 16 && pcm.framesLost == 0)
        let reference = try await rendered(wav).samples
        #expect(reference.count == 96_000)
        for (name, encoding, lossless) in [("take.flac", AudioFileEncoding.flac(level: 8, bits: 16), true),
                                           ("take.caf", .fromExtension, true),   // Apple Lossless
                                           ("take.m4a", .aac(bitRate: 96_000), false),
                                           ("take.opus", .opus(bitRate: 64_000), false)] {
            let path = folder.appendingPathComponent(name).path
            let recording = try await Self.record(path, encoding)
            #expect(recording.validFrames == 48_000, "\(name)")
            let file = try AudioFile(path: path)
            #expect(file.packetTableInfo?.validFrames == 48_000, "\(name): \(String(describing: file.packetTableInfo))")
            let decoded = try await rendered(path).samples
            #expect(decoded.count == 96_000, "\(name)")
            if lossless { #expect(difference(decoded, reference) == nil, "\(name)") }
        }
        let caf = try AudioFile(path: folder.appendingPathComponent("take.caf").path)
        #expect(caf.dataFormat.formatID == .appleLossless)
    }

    /// The presets name codecs and leave what each takes to its encoder; the container's facts
    /// (its usual codec, how it stores PCM) come from the container.
    @Test func thePresetsLeaveTheCodecsFactsToTheirOwners() throws {
        #expect(throws: AudioFileWriterError.self) { _ = try AudioFileEncoding.pcm(float: true).dataFormat(for: .aiff, sampleRate: 44_100, channels: 2) }
        #expect(try AudioFileEncoding.pcm(bits: 24).dataFormat(for: .aifc, sampleRate: 44_100, channels: 2).formatFlags.contains(.isBigEndian))
        // FLAC is 16-bit unless asked (a depth of 0 quietly became 24-bit).
        #expect(try AudioFileEncoding.fromExtension.dataFormat(for: .flac, sampleRate: 44_100, channels: 2).bitsPerChannel == 16)
        #expect(AudioFileEncoding.fromExtension.resolved(for: .mp4) == .aac())
        #expect(AudioFileEncoding.aac(bitRate: 192_000).settings.bitRate == 192_000)
        #expect(AudioFileEncoding.flac(level: 3).settings.quality == 3)
        // A bit rate libopus refuses is refused by it, naming the value.
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        AudioCodecs.registerAll()
        #expect { _ = try AudioFileWriter(path: folder.appendingPathComponent("low.opus").path, encoding: .opus(bitRate: 100),
                                          clientFormat: .float32(sampleRate: 48_000, channels: 2)) }
            throws: { "\($0)".contains("100") }
    }

    /// `finished()` before `start()` closes the file empty, at once (it does not wait for a stop that never comes).
    @Test func finishingBeforeStartingDoesNotWait() async throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        AudioCodecs.registerAll()
        let recorder = try AudioFileRecorder(path: folder.appendingPathComponent("empty.wav").path, sampleRate: 48_000, channels: 1)
        let recording = try await recorder.finished()
        #expect(recording.validFrames == 0)
    }

    /// A writer made with a preset from floats: the file's depth is the preset's.
    @Test func aWriterTakesAPreset() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        AudioCodecs.registerAll()
        let path = folder.appendingPathComponent("floats.flac").path
        let writer = try AudioFileWriter(path: path, encoding: .flac(bits: 24), clientFormat: .float32(sampleRate: 44_100, channels: 1))
        let ramp = (0..<4410).map { Float($0) / 8192 - 0.25 }
        try ramp.withUnsafeBufferPointer { try writer.write(floats: $0) }
        try writer.close()
        let file = try AudioFile(path: path)
        #expect(file.dataFormat.bitsPerChannel == 24 && file.packetTableInfo?.validFrames == 4410)
    }
}
