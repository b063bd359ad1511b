// aqrender: decodes a file through the queue, trimmed sample-exactly, and writes a WAV.
#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import AudioFileStream
import AudioPlayback
import BufferQueue
import AudioCodecsGPL
import ExampleOptions

@main
struct AQRender: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "aqrender",
        abstract: "Render an audio file offline through the queue to a WAV file, with exact gapless trims.")

    @Argument(help: "An audio file: MP3, AAC, ALAC, AMR, IMA4, G.711, PCM, FLAC, Opus or Vorbis in MP3/ADTS/MP4/CAF/WAV/AIFF/AMR/MPEG-TS/FLAC/Ogg/Matroska/WebM.")
    var input: String
    @Argument(help: "The file to write; its extension names the container: .wav, .caf, .aif/.aiff, .aifc, .flac, .opus/.ogg, .m4a.")
    var output: String
    @Option(help: "Sample format of PCM output: f32 (IEEE float, the default), s16 or s24; the bit depth of ALAC and FLAC (default: the source's, else 16).")
    var format: SampleFormat?
    @Option(help: "What the output holds: pcm (the default of .wav, .aif, .aifc), aac (of .m4a; libavcodec), alac (of .caf), flac (of .flac), opus (of .opus, .ogg), ima4 (CAF, AIFC), ima-adpcm (WAV), ulaw, alaw.")
    var codec: CodecChoice?
    @Option(help: "Encoder quality, 0 (fastest) to 10 (smallest or best): FLAC's level (up to 8), Opus's complexity, ALAC's search.")
    var quality: Int?
    @Option(help: "Bit rate of a lossy encoder in bits per second (Opus: 96000 for stereo by default; AAC: 64000 per channel).")
    var bitrate: Int?
    @Option(help: "Play the file this many times, joined without a gap.")
    var loops: Int = 1
    @Option(name: .customLong("sample-rate"), help: "Render at this rate in Hz (libsoxr, very high quality); frames = round(valid × loops × HZ / source rate).")
    var sampleRate: Int?
    @Option(help: "Render this many channels (mono ↔ stereo: see the Converting guide for the matrix).")
    var channels: Int?
    @OptionGroup var timePitchOptions: TimePitchOptions
    @Option(name: .customLong("eq"), help: ArgumentHelp(stringLiteral: EQOption.help))
    var eq: [EQOption] = []
    @Option(help: "Decode on this many threads (default: the number of cores) when the file allows it (MP3, AAC-LC, ALAC, G.711, FLAC, Vorbis, Opus; not a chain of Ogg links), the output can seek and no loop, rate, channel or play-rate change is asked for. The output is bit-identical to --jobs 1.")
    var jobs: Int = activeProcessorCount
    enum AACDecoder: String, ExpressibleByArgument, CaseIterable { case libavcodec, libfaad2 }
    @Option(name: .customLong("aac-decoder"), help: "Which library decodes AAC: libavcodec (LGPL, the default when both are linked) or libfaad2 (GPL).")
    var aacDecoder: AACDecoder = .libavcodec

    @Option(parsing: .unconditional, help: "Measure the output's loudness (EBU R128) first, then render it again with one gain that brings it to this many LUFS (-23 broadcast, -16 podcasts), lowered where the true peak would pass the ceiling.")
    var normalize: Double?
    @Option(name: .customLong("true-peak-ceiling"), parsing: .unconditional, help: "With --normalize: the highest true peak the output may reach, in dBTP (default -1).")
    var truePeakCeiling: Double = -1

    @Option(help: "Render only this track of a cue sheet, exactly its samples: INPUT is a .cue file, or a file with a sheet embedded (a FLAC CUESHEET block, a CUESHEET comment).")
    var track: Int?

    @Flag(help: "Say on stderr whether the render was split and why not.")
    var verbose = false

    func validate() throws {
        guard loops >= 1 else { throw ValidationError("--loops must be at least 1") }
        guard jobs >= 1 else { throw ValidationError("--jobs must be at least 1") }
        if let sampleRate, !(1...1_536_000).contains(sampleRate) { throw ValidationError("--sample-rate must be 1...1536000 Hz") }
        if let channels, !(1...64).contains(channels) { throw ValidationError("--channels must be 1...64") }
        if let quality, !(0...10).contains(quality) { throw ValidationError("--quality must be 0...10") }
        if let normalize, !(-70...0).contains(normalize) { throw ValidationError("--normalize takes a loudness of -70...0 LUFS") }
        if !(-70...6).contains(truePeakCeiling) { throw ValidationError("--true-peak-ceiling must be -70...6 dBTP") }
        if track != nil && loops != 1 { throw ValidationError("--track renders one track once: leave out --loops") }
        if outputType == nil { throw ValidationError("\(output): the extension names no container written (.wav, .caf, .aif, .aiff, .aifc, .flac, .opus, .ogg, .m4a)") }
    }

    /// The container the output's extension names; a name without one is a WAV (a pipe, /dev/stdout).
    var outputType: AudioFileType? {
        let name = output.split(separator: "/").last.map(String.init) ?? output
        return name.contains(".") ? AudioFileWriter.fileType(forPath: output) : .wave
    }

    /// Whether the output goes through the encoding writer: anything but float or 16-bit PCM in a WAV.
    var encodes: Bool { outputType != .wave || codec.map { $0 != .pcm } ?? false || format == .s24 }

    /// The bit depth of the source's samples where its format says (PCM, FLAC, ALAC).
    func sourceBits(_ file: AudioFile) -> Int? {
        let format = file.dataFormat
        if format.formatID == .appleLossless { return file.magicCookie.flatMap(ALACSpecificConfig.init(cookie:))?.bitDepth }
        if format.formatFlags.contains(.isFloat) { return 24 }
        return (8...32).contains(format.bitsPerChannel) ? max(format.bitsPerChannel, 16) : nil
    }

    func run() throws {
        // Every codec this program links; libavcodec's AAC decoder ahead of libfaad2's unless libfaad2 is asked for.
        AudioCodecsGPL.registerAll(aac: aacDecoder == .libavcodec ? .libavcodec : .libfaad2)
        let (file, range) = openInput()
        let transforms = loops != 1 || sampleRate != nil || channels != nil || (timePitchOptions.rate ?? 1) != 1 || timePitchOptions.pitch != nil
            || !eq.isEmpty || range != nil
        let gain = normalize.map { normalizationGain(file, range: range, target: $0) } ?? 1
        if encodes {
            if verbose { note("decoding on one thread; encoding on \(jobs) where the format's packets encode on their own") }
            renderEncoding(file, range: range, gain: gain)
        } else if jobs > 1 && !transforms && outputIsFile && normalize == nil {
            renderConcurrently(file)
        } else {
            if verbose {
                note(jobs == 1 ? "one thread: --jobs 1" : transforms ? "one thread: a loop, rate, channel, play-rate change or equaliser joins chunks inexactly"
                    : normalize != nil ? "one thread: --normalize scales every frame as it is rendered" : "one thread: \(output) is not a file that can seek")
            }
            renderSequentially(file, range: range, gain: gain)
        }
        for warning in file.warnings { note("warning: \(warning)") }
    }

    /// The audio file to render and, with `--track`, the track's frames in it: from a `.cue`
    /// sheet (the track's FILE) or the sheet embedded in the input.
    func openInput() -> (AudioFile, Range<Int64>?) {
        let isSheet = AudioSniffer.pathExtension(of: input) == "cue"
        guard let number = track else {
            if isSheet { fail("\(input) is a cue sheet: render one of its tracks with --track N") }
            do { return (try AudioFile(path: input), nil) } catch { fail("\(error)") }   // the error names the file
        }
        do {
            if isSheet {
                let placed = try CueSheet(contentsOfFile: input).tracks(ofSheetAt: input)
                guard let chosen = placed.first(where: { $0.track.number == number }) else {
                    fail("\(input) has no track \(number) (its tracks: \(placed.map { String($0.track.number) }.joined(separator: ", ")))")
                }
                let start = chosen.track.startFrame
                return (try AudioFile(path: chosen.path), start..<(start + chosen.track.frames))
            }
            let file = try AudioFile(path: input)
            guard let tracks = file.cueTracks else { fail("\(input) has no cue sheet embedded (a FLAC CUESHEET block or a CUESHEET comment): give the .cue file") }
            guard let chosen = tracks.first(where: { $0.number == number }) else {
                fail("\(input) has no track \(number) (its tracks: \(tracks.map { String($0.number) }.joined(separator: ", ")))")
            }
            return (file, chosen.startFrame..<(chosen.startFrame + chosen.frames))
        } catch {
            fail("\(input): \(error)")
        }
    }

    /// Whether the output is (or will be) a regular file, which a split render writes at positions.
    /// A pipe is not, and is decided before anything is opened: a writer opened on it and given up
    /// would leave its header in the stream.
    var outputIsFile: Bool {
        var status = stat()
        guard stat(output, &status) == 0 else { return errno == ENOENT }
        return status.st_mode & S_IFMT == S_IFREG
    }

    /// The renderer for the options: loops, rate, channels, play rate and pitch.
    func makeRenderer(_ file: AudioFile, range: Range<Int64>?) -> AudioFileRenderer {
        do {
            return try AudioFileRenderer(file: file, loops: loops, startFrame: range?.lowerBound ?? 0, endFrame: range?.upperBound,
                                         sampleRate: sampleRate.map(Double.init), channels: channels,
                                         playRate: timePitchOptions.rate, timePitch: timePitchOptions.algorithm,
                                         pitch: timePitchOptions.pitch)
        } catch {
            fail("\(input): \(error)")
        }
    }

    /// The linear gain `--normalize` asks for: the rendered output (every option applied) measured
    /// in a first pass. A silent output is left as it is, and said.
    func normalizationGain(_ file: AudioFile, range: Range<Int64>?, target: Double) -> Float {
        let renderer = makeRenderer(file, range: range)
        let rendered = renderer.outputFormat
        let layout = file.channelLayout?.channelCount == rendered.channelsPerFrame ? file.channelLayout : nil
        var meter: LoudnessMeter
        do { meter = try LoudnessMeter(sampleRate: rendered.sampleRate, channels: rendered.channelsPerFrame, channelLayout: layout) } catch {
            fail("--normalize: \(error)")
        }
        if let failure = pump(renderer, progress: nil, gain: 1, write: { meter.add($0) }) { fail("\(input): \(failure)") }
        let reading = meter.reading
        guard let normalization = LoudnessNormalization(reading, target: target, truePeakCeiling: truePeakCeiling) else {
            note("\(input) is silent (no 400 ms above -70 LUFS): nothing to normalise, written as it is")
            return 1
        }
        if normalization.isLimitedByCeiling {
            note(formatted("the true-peak ceiling of %.1f dBTP limits the gain to %+.2f dB: the output measures %.2f LUFS, not %.2f",
                           truePeakCeiling, normalization.gain, normalization.loudness, target))
        }
        if verbose {
            note(formatted("measured %.2f LUFS, true peak %.2f dBTP; gain %+.2f dB", reading.integrated, reading.truePeak, normalization.gain))
        }
        return Float(normalization.linearGain)
    }

    func renderSequentially(_ file: AudioFile, range: Range<Int64>?, gain: Float) {
        let renderer = makeRenderer(file, range: range)
        let writer = makeWriter(renderer.outputFormat, layout: file.channelLayout)
        let progress = isatty(2) != 0 ? Progress(total: renderer.expectedFrames) : nil
        let failure = pump(renderer, progress: progress, gain: gain) { try writer.write($0) }
        close(writer)
        progress?.finish()
        finish(file, failure: failure, frames: renderer.framesRendered, converterError: renderer.lastConverterError)
    }

    /// The file's data format for the output's container and the options.
    func dataFormat(rate: Double, channels: Int, sourceBits: Int?) -> AudioStreamDescription {
        writtenFormat(type: outputType ?? .wave, codec: codec, format: format, rate: rate, channels: channels, sourceBits: sourceBits)
    }

    /// Renders into a writer that encodes (CAF, AIFF, compressed WAV): the rendered frames are the file's valid frames.
    func renderEncoding(_ file: AudioFile, range: Range<Int64>?, gain: Float) {
        let renderer = makeRenderer(file, range: range)
        let rendered = renderer.outputFormat
        let layout = file.channelLayout?.channelCount == rendered.channelsPerFrame ? file.channelLayout : nil
        let target = dataFormat(rate: rendered.sampleRate, channels: rendered.channelsPerFrame, sourceBits: sourceBits(file))
        // 16-bit lossless output is handed over as 16-bit integers, made on this (the decoding)
        // thread: the encoder takes them as they are (the same values the writer would make).
        let lossless16 = (target.formatID == .flac || target.formatID == .appleLossless) && target.bitsPerChannel == 16
        let handOff: AudioStreamDescription = lossless16 ? .int16(sampleRate: rendered.sampleRate, channels: rendered.channelsPerFrame) : rendered
        let writer: AudioFileWriter
        do {
            writer = try AudioFileWriter(path: output, fileType: outputType, format: target,
                                         clientFormat: handOff, clientLayout: layout, settings: AudioEncoderSettings(bitRate: bitrate, quality: quality),
                                         expectedFrames: renderer.expectedFrames ?? file.totalFrames * Int64(loops), jobs: jobs)
        } catch {
            fail("\(output): \(error)")
        }
        let progress = isatty(2) != 0 ? Progress(total: renderer.expectedFrames) : nil
        var failure: String?
        let handOffLayout = try? PCMSampleLayout(handOff)
        /// The block in the writer's client format.
        func bytes(_ floats: UnsafeBufferPointer<Float>) -> [UInt8] {
            guard let layout = handOffLayout, lossless16, let base = floats.baseAddress else { return Array(UnsafeRawBufferPointer(floats)) }
            var out = [UInt8](repeating: 0, count: floats.count * 2)
            out.withUnsafeMutableBytes { if let target = $0.baseAddress { layout.fromFloat(base, count: floats.count, into: target) } }
            return out
        }
        if jobs > 1 && writer.encodingJobs == 1 {
            // One encoder: it runs on a thread of its own while this one decodes.
            let encoding = EncodingThread(writer: writer)
            failure = pump(renderer, progress: progress, gain: gain) { try encoding.push(bytes($0)) }
            do { try encoding.finish() } catch { fail("cannot write \(output): \(error)") }
        } else {
            failure = pump(renderer, progress: progress, gain: gain) { try bytes($0).withUnsafeBytes { try writer.write($0) } }
        }
        do { try writer.close() } catch { fail("cannot write \(output): \(error)") }
        progress?.finish()
        if verbose { note("wrote \(writer.dataFormat): \(writer.validFrames) valid frames + \(writer.primingFrames) priming + \(writer.remainderFrames) remainder") }
        finish(file, failure: failure, frames: renderer.framesRendered, converterError: renderer.lastConverterError)
    }

    /// Renders everything, handing each block of frames to `write`; a write that fails ends the
    /// program, a render that fails is returned (the frames before it were written). Every sample
    /// is multiplied by `gain` (after the equaliser).
    func pump(_ renderer: AudioFileRenderer, progress: Progress?, gain: Float, write: (UnsafeBufferPointer<Float>) throws -> Void) -> String? {
        let channels = renderer.outputFormat.channelsPerFrame
        var scratch = [Float](repeating: 0, count: 8192 * channels)
        // The equaliser's bands at the rendered rate (a band at or above its Nyquist is refused here).
        let equalizer = eq.isEmpty ? nil : AudioEqualizer(bands: eq.map(\.band))
        do { try equalizer?.validate(sampleRate: renderer.outputFormat.sampleRate) } catch { fail("--eq: \(error)") }
        do {
            while true {
                let n = try scratch.withUnsafeMutableBufferPointer { try renderer.render(into: $0, frames: 8192) }
                if n == 0 { return nil }
                if let equalizer {
                    equalizer.process(&scratch, frames: n, channels: channels, sampleRate: renderer.outputFormat.sampleRate)
                }
                if gain != 1 {
                    scratch.withUnsafeMutableBufferPointer { samples in
                        for i in 0..<(n * channels) { samples[i] *= gain }
                    }
                }
                do {
                    try scratch.withUnsafeBufferPointer { try write(UnsafeBufferPointer(rebasing: $0[0..<(n * channels)])) }
                } catch {
                    progress?.finish()
                    fail("cannot write \(output): \(error)")
                }
                progress?.update(renderer.framesRendered)
            }
        } catch {
            return "\(error)"
        }
    }

    /// Chunks decoded on `jobs` threads, each piece written where it belongs.
    func renderConcurrently(_ file: AudioFile) {
        let renderer: ConcurrentFileRenderer
        do { renderer = try ConcurrentFileRenderer(file: file, jobs: jobs) } catch { fail("\(input): \(error)") }
        let writer = makeWriter(renderer.outputFormat, layout: file.channelLayout)
        guard writer.canWriteAtPositions else { fail("cannot write \(output) at positions: it cannot seek") }
        let progress = isatty(2) != 0 ? Progress(total: renderer.expectedFrames) : nil
        var failure: String?
        var frames: Int64 = 0
        do {
            frames = try renderer.render { frame, samples in
                do { try writer.write(samples, atFrame: frame) } catch { throw OutputFailure(error: error) }
                progress?.update(renderer.framesRendered)
            }
            writer.truncate(toFrames: frames)
        } catch let failed as OutputFailure {
            // The render rethrows what the delivery threw: the output, not the input, failed.
            progress?.finish()
            fail("cannot write \(output): \(failed.error)")
        } catch {
            failure = "\(error)"
            frames = renderer.framesRendered
        }
        close(writer)
        progress?.finish()
        if verbose {
            note(renderer.sequentialReason.map { "one thread: \($0)" } ?? "\(renderer.chunks.count) chunks on \(renderer.jobs) threads")
        }
        finish(file, failure: failure, frames: frames, converterError: renderer.lastConverterError)
    }

    /// The WAV for `format`; `layout` (the file's channels, when they reach the output unmixed)
    /// puts multichannel audio in WAVE's order with a channel mask.
    func makeWriter(_ format: AudioStreamDescription, layout: AudioChannelLayout?) -> WAVFileWriter {
        do {
            return try WAVFileWriter(path: output, sampleRate: Int(format.sampleRate), channels: format.channelsPerFrame, float: (self.format ?? .f32) == .f32,
                                     channelLayout: layout?.channelCount == format.channelsPerFrame ? layout : nil)
        } catch {
            fail("\(error)")
        }
    }

    /// Closes the output, failing when what was written did not all reach it (a full disk).
    func close(_ writer: WAVFileWriter) {
        do { try writer.close() } catch { fail("cannot write \(output): \(error)") }
    }

    /// Reports damage and decoding problems after the frames before them were written.
    func finish(_ file: AudioFile, failure: String?, frames: Int64, converterError: AudioQueueError?) {
        // Damage found while indexing the file: its frames up to there were written.
        if let failure = failure ?? file.damage.map({ "\($0)" }) {
            fail("\(input): \(failure) — wrote the \(frames) frames decoded before it to \(output)")
        }
        if let converterError { note("warning: \(converterError)") }
    }

    func note(_ message: String) {
        writeError("aqrender: \(message)\n")
    }

    func fail(_ message: String) -> Never {
        writeError("aqrender: \(message)\n")
        exitProgram(1)
    }
}

/// Encodes and writes blocks of frames (in the writer's client format) on a thread of its own, up to eight blocks behind the
/// thread that decodes them (which waits for room, on a condition, when it gets ahead).
final class EncodingThread: @unchecked Sendable {
    private struct State {
        var blocks: [[UInt8]] = []
        var ending = false
        var done = false
        var failure: (any Error)?
    }

    private let writer: AudioFileWriter
    private let state = ConditionLock(State())

    init(writer: AudioFileWriter) {
        self.writer = writer
        OwnThread.start(name: "aqrender.encode") { [self] in run() }
    }

    private func run() {
        while true {
            // The next block, or nil at the end (then marked done).
            let next = state.wait(until: { !$0.blocks.isEmpty || $0.ending }) { state -> (block: [UInt8], failed: Bool)? in
                guard !state.blocks.isEmpty else {
                    state.done = true
                    return nil
                }
                return (state.blocks.removeFirst(), state.failure != nil)
            }
            guard let next else { return }
            guard !next.failed else { continue }
            do { try next.block.withUnsafeBytes { try writer.write($0) } } catch {
                state.withLock { $0.failure = error }
            }
        }
    }

    /// Hands a block over, waiting while eight are queued; throws the encoder's failure.
    func push(_ block: [UInt8]) throws {
        try state.wait(until: { $0.blocks.count < 8 || $0.failure != nil }) { state in
            if let failure = state.failure { throw failure }
            state.blocks.append(block)
        }
    }

    /// Waits until every block is written; throws the encoder's failure.
    func finish() throws {
        state.withLock { $0.ending = true }
        try state.wait(until: { $0.done }) { state in
            if let failure = state.failure { throw failure }
        }
    }
}

/// Writing the output failed (a full disk), as told apart from a render failing on the input.
struct OutputFailure: Error {
    let error: any Error
}

/// A progress bar on stderr (updated from any thread).
final class Progress: @unchecked Sendable {
    let total: Int64?
    private let last = Lock(-1)
    init(total: Int64?) { self.total = total }
    func update(_ frames: Int64) {
        guard let total, total > 0 else { return }
        let percent = Int(min(frames * 100 / total, 100))
        last.withLock { last in
            guard percent != last else { return }
            last = percent
            let bar = String(repeating: "#", count: percent / 4) + String(repeating: ".", count: 25 - percent / 4)
            writeError("\r[\(bar)] \(percent)%")
        }
    }
    func finish() { if last.withLock({ $0 }) >= 0 { writeError("\n") } }
}

