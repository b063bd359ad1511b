// aqrender: decodes a file through the queue, trimmed sample-exactly, and writes a WAV.
import ArgumentParser
import AudioFileStream
import AudioPlayback
import BufferQueue
import ExampleOptions
import FAADDecoder
import OpenCoreAMRDecoder
import Foundation
import MPG123Decoder
import RubberBandTimePitch
import SoxrConverter

@main
struct AQRender: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "aqrender",
        abstract: "Render an audio file offline through the queue to a WAV file, with exact gapless trims.")

    enum SampleFormat: String, ExpressibleByArgument, CaseIterable { case f32, s16 }

    @Argument(help: "An audio file: MP3, AAC, ALAC, AMR, IMA4, G.711 or PCM in MP3/ADTS/MP4/CAF/WAV/AIFF/AMR/MPEG-TS.")
    var input: String
    @Argument(help: "The WAV file to write.")
    var output: String
    @Option(help: "Sample format of the WAV: f32 (IEEE float) or s16.")
    var format: SampleFormat = .f32
    @Option(help: "Play the file this many times, joined without a gap.")
    var loops: Int = 1
    @Option(name: .customLong("sample-rate"), help: "Render at this rate in Hz (libsoxr, very high quality); frames = round(valid × loops × HZ / source rate).")
    var sampleRate: Int?
    @Option(help: "Render this many channels (mono ↔ stereo: see the Converting guide for the matrix).")
    var channels: Int?
    @OptionGroup var timePitchOptions: TimePitchOptions

    func validate() throws {
        guard loops >= 1 else { throw ValidationError("--loops must be at least 1") }
        if let sampleRate, !(1...1_536_000).contains(sampleRate) { throw ValidationError("--sample-rate must be 1...1536000 Hz") }
        if let channels, !(1...64).contains(channels) { throw ValidationError("--channels must be 1...64") }
    }

    func run() throws {
        MPG123Decoder.register()
        FAADDecoder.register()
        AMRDecoder.register()
        SoxrConverter.register()
        RubberBandTimePitch.register()
        let file: AudioFile
        let renderer: AudioFileRenderer
        do {
            file = try AudioFile(path: input)
            renderer = try AudioFileRenderer(file: file, loops: loops, sampleRate: sampleRate.map(Double.init), channels: channels,
                                             playRate: timePitchOptions.rate, timePitch: timePitchOptions.algorithm,
                                             pitch: timePitchOptions.pitch)
        } catch {
            fail("\(input): \(error)")
        }
        let out = renderer.outputFormat
        let writer: WAVFileWriter
        do { writer = try WAVFileWriter(path: output, sampleRate: Int(out.sampleRate), channels: out.channelsPerFrame, float: format == .f32) } catch {
            fail("\(error)")
        }
        let progress = isatty(2) != 0 ? Progress(total: renderer.expectedFrames) : nil
        var scratch = [Float](repeating: 0, count: 8192 * out.channelsPerFrame)
        var failure: String?
        do {
            while true {
                let n = try scratch.withUnsafeMutableBufferPointer { try renderer.render(into: $0, frames: 8192) }
                if n == 0 { break }
                scratch.withUnsafeBufferPointer { writer.write(UnsafeBufferPointer(rebasing: $0[0..<(n * out.channelsPerFrame)])) }
                progress?.update(renderer.framesRendered)
            }
        } catch {
            failure = "\(error)"
        }
        writer.close()
        progress?.finish()
        // Damage found while indexing the file: its frames up to there were written.
        if let damage = file.damage { failure = failure ?? "\(damage)" }
        if let failure {
            fail("\(input): \(failure) — wrote the \(renderer.framesRendered) frames decoded before it to \(output)")
        }
        for warning in file.warnings {
            FileHandle.standardError.write(Data("aqrender: warning: \(warning)\n".utf8))
        }
        if let error = renderer.lastConverterError {
            FileHandle.standardError.write(Data("aqrender: warning: \(error)\n".utf8))
        }
    }

    func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("aqrender: \(message)\n".utf8))
        Foundation.exit(1)
    }
}

/// A progress bar on stderr.
final class Progress {
    let total: Int64?
    var last = -1
    init(total: Int64?) { self.total = total }
    func update(_ frames: Int64) {
        guard let total, total > 0 else { return }
        let percent = Int(min(frames * 100 / total, 100))
        guard percent != last else { return }
        last = percent
        let bar = String(repeating: "#", count: percent / 4) + String(repeating: ".", count: 25 - percent / 4)
        FileHandle.standardError.write(Data("\r[\(bar)] \(percent)%".utf8))
    }
    func finish() { if last >= 0 { FileHandle.standardError.write(Data("\n".utf8)) } }
}

