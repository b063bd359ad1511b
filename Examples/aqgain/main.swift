// aqgain: measures files' loudness (EBU R128) and writes ReplayGain 2.0 tags into them — track
// gains, and album gains with --album; R128 gains for Opus. Prints what it measured.
#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import AudioCodecs
import AudioFileStream
import AudioPlayback
import BufferQueue
import ExampleOptions

@main
struct AQGain: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "aqgain",
        abstract: "Measure loudness and write ReplayGain 2.0 tags (reference -18 LUFS; Opus: R128 gains relative to -23 LUFS).")

    @Argument(help: "Audio files. Tags are written into FLAC, MP3, MP4/M4A, Ogg Opus and Ogg Vorbis files; for other containers the gains are printed and writing is refused by name.")
    var files: [String]
    @Flag(help: "Also compute the album's gain and peak over all the files, as one programme, and write them.")
    var album = false
    @Flag(name: .customLong("dry-run"), help: "Measure and print; write nothing.")
    var dryRun = false
    @Option(parsing: .unconditional, help: "The gain in dB written for a silent file (nothing above -70 LUFS: no loudness to measure), with a peak of 0; without it a silent file gets no gain.")
    var fallback: Double?

    func validate() throws {
        if let fallback, !(-60...60).contains(fallback) { throw ValidationError("--fallback takes -60...60 dB") }
    }

    struct Measured {
        let path: String
        let file: AudioFile
        let meter: LoudnessMeter
        var reading: LoudnessReading { meter.reading }
        /// Gain to the ReplayGain reference, dB (nil: silent).
        var gain: Double? { reading.integrated.isFinite ? ReplayGain.referenceLoudness - reading.integrated : nil }
        /// The true peak, linear.
        var peak: Double { reading.truePeak.isFinite ? pow(10, reading.truePeak / 20) : 0 }
    }

    func run() throws {
        AudioCodecs.registerAll()
        var measured: [Measured] = []
        var failed = false
        for path in files {
            do {
                let file = try AudioFile(path: path)
                measured.append(Measured(path: path, file: file, meter: try LoudnessMeter.measuring(file)))
            } catch {
                writeError("aqgain: \(path): \(error)\n")
                failed = true
            }
        }
        var albumGain: Double?, albumPeak = 0.0
        if album && !measured.isEmpty {
            let integrated = LoudnessMeter.integrated(of: measured.map(\.meter))
            albumGain = integrated.isFinite ? ReplayGain.referenceLoudness - integrated : fallback
            albumPeak = measured.map(\.peak).max() ?? 0
        }
        for item in measured {
            let reading = item.reading
            let gain: Double
            if let measured = item.gain {
                gain = measured
                // Each file's line as it is done, before its tags are written.
                writeOutput("\(item.path): " + formatted("%.2f LUFS, true peak %.2f dBTP, range %.2f LU; track gain %+.2f dB, peak %.6f\n",
                                                           reading.integrated, reading.truePeak, reading.range, gain, item.peak))
            } else if let fallback {
                gain = fallback
                writeOutput("\(item.path): " + formatted("silent (nothing above -70 LUFS): the fallback gain %+.2f dB, peak %.6f\n", gain, item.peak))
            } else {
                writeOutput("\(item.path): silent (nothing above -70 LUFS): no gain written (--fallback DB writes one)" + "\n")
                continue
            }
            guard !dryRun else { continue }
            do {
                try AudioFileTagWriter.update(path: item.path, setting: tags(item, gain: gain, albumGain: albumGain, albumPeak: albumPeak))
            } catch {
                writeError("aqgain: \(error)\n")
                failed = true
            }
        }
        if album {
            if let albumGain {
                writeOutput(formatted("album: gain %+.2f dB, peak %.6f", albumGain, albumPeak) + "\n")
            } else {
                writeOutput("album: silent: no album gain" + "\n")
            }
        }
        if failed { throw ExitCode(1) }
    }

    /// The tags for `item`: ReplayGain 2.0's four (two without --album), or for Opus R128's (Q7.8
    /// dB relative to -23 LUFS, on top of the header's output gain, which the measurement heard).
    func tags(_ item: Measured, gain: Double, albumGain: Double?, albumPeak: Double) -> [(name: String, value: String?)] {
        if item.file.dataFormat.formatID == .opus {
            func q78(_ decibels: Double) -> String {
                String(Int(max(min(((decibels - (ReplayGain.referenceLoudness - ReplayGain.opusReferenceLoudness)) * 256).rounded(), 32767), -32768)))
            }
            return [("R128_TRACK_GAIN", q78(gain))] + (album ? [("R128_ALBUM_GAIN", albumGain.map(q78))] : [])
        }
        var tags: [(name: String, value: String?)] = [("REPLAYGAIN_TRACK_GAIN", formatted("%.2f dB", gain)),
                                                     ("REPLAYGAIN_TRACK_PEAK", formatted("%.6f", item.peak))]
        if album {
            tags += [("REPLAYGAIN_ALBUM_GAIN", albumGain.map { formatted("%.2f dB", $0) }),
                     ("REPLAYGAIN_ALBUM_PEAK", albumGain == nil ? nil : formatted("%.6f", albumPeak))]
        }
        return tags
    }
}
