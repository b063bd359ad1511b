// aqmix: mixes audio files through the render graph into one file, sample-exactly.
#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import AudioFileStream
import AudioPlayback
import BufferQueue
import AudioCodecs
import ExampleOptions

@main
struct AQMix: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "aqmix",
        abstract: "Mix audio files into one: each input decoded with its gapless trims, converted to the output's rate and channels, "
            + "scaled and offset, summed.",
        discussion: """
            The mix is as long as the longest input's offset plus its length, in frames of the output's rate. \
            Inputs of another rate or channel count are converted (libsoxr, very high quality) with exact lengths. \
            An input that fails part-way ends there (what it gave stays in the mix) and is reported; the others go on.
            """)

    @Argument(help: "The file to write; its extension names the container: .wav, .caf, .aif/.aiff, .aifc, .flac, .opus/.ogg, .m4a.")
    var output: String
    @Argument(help: "The files to mix: any format aqrender reads.")
    var inputs: [String]
    @Option(parsing: .unconditional, help: "Each input's gain in dB, comma-separated (one value applies to all; default 0).")
    var gains: String?
    @Option(help: "Each input's start in seconds, comma-separated (default 0).")
    var offsets: String?
    @Option(help: "Sample format of PCM output: f32 (the default), s16 or s24; the bit depth of FLAC and ALAC.")
    var format: SampleFormat?
    @Option(name: .customLong("sample-rate"), help: "The output's rate in Hz (default: the first input's).")
    var sampleRate: Int?
    @Option(help: "The output's channel count (default: the most any input has).")
    var channels: Int?
    @Option(name: .customLong("eq"), help: ArgumentHelp(stringLiteral: EQOption.help))
    var eq: [EQOption] = []

    func validate() throws {
        guard !inputs.isEmpty else { throw ValidationError("name at least one input") }
        if let sampleRate, !(1...1_536_000).contains(sampleRate) { throw ValidationError("--sample-rate must be 1...1536000 Hz") }
        if let channels, !(1...64).contains(channels) { throw ValidationError("--channels must be 1...64") }
        _ = try values(gains, name: "--gains")
        if let offsets = try values(offsets, name: "--offsets"), offsets.contains(where: { $0 < 0 }) {
            throw ValidationError("--offsets must be 0 or more")
        }
        if AudioFileWriter.fileType(forPath: output) == nil {
            throw ValidationError("\(output): the extension names no container written (.wav, .caf, .aif, .aiff, .aifc, .flac, .opus, .ogg, .m4a)")
        }
    }

    /// A comma-separated list: one value for every input, or one for all.
    func values(_ list: String?, name: String) throws -> [Double]? {
        guard let list else { return nil }
        let parsed = list.split(separator: ",").map { Double($0.trimmingPrefix(" ")) }
        guard parsed.allSatisfy({ $0 != nil && $0!.isFinite }), parsed.count == inputs.count || parsed.count == 1 else {
            throw ValidationError("\(name) takes \(inputs.count) comma-separated numbers (or one for all): \(list)")
        }
        let numbers = parsed.compactMap { $0 }
        return numbers.count == 1 ? Array(repeating: numbers[0], count: inputs.count) : numbers
    }

    func run() throws {
        AudioCodecs.registerAll()

        var renderers: [AudioFileRenderer] = []
        var files: [AudioFile] = []
        for input in inputs {
            do {
                let file = try AudioFile(path: input)
                files.append(file)
                renderers.append(try AudioFileRenderer(file: file))
            } catch {
                fail("\(input): \(error)")
            }
        }
        let rate = Double(sampleRate ?? Int(renderers[0].outputFormat.sampleRate))
        let outChannels = channels ?? renderers.map(\.outputFormat.channelsPerFrame).max() ?? 2
        let failures = Lock<[String]>([])
        let graph: AudioGraph
        do {
            graph = try AudioGraph(sampleRate: rate, channels: outChannels, rampSeconds: 0) { event in
                failures.withLock { $0.append("\(event)") }
            }
            let gainsDB = (try? values(gains, name: "--gains")) ?? nil
            let startSeconds = (try? values(offsets, name: "--offsets")) ?? nil
            for (index, renderer) in renderers.enumerated() {
                let volume = Float(pow(10, (gainsDB?[index] ?? 0) / 20))
                let offset = Int(((startSeconds?[index] ?? 0) * rate).rounded())
                try graph.connect(try AudioPullSourceNode(name: inputs[index], source: renderer), to: graph.mainMixer,
                                  volume: volume, offsetFrames: offset)
            }
            if !eq.isEmpty {
                let node = try AudioEQNode(bands: eq.map(\.band), sampleRate: rate, channels: outChannels)
                try graph.connect(graph.mainMixer, to: node)
            }
        } catch {
            fail("\(error)")
        }

        let type = AudioFileWriter.fileType(forPath: output) ?? .wave
        let client = AudioStreamDescription.float32(sampleRate: rate, channels: outChannels)
        let writer: AudioFileWriter
        do {
            let target = writtenFormat(type: type, codec: nil, format: format, rate: rate, channels: outChannels, sourceBits: nil)
            writer = try AudioFileWriter(path: output, fileType: type, format: target, clientFormat: client)
        } catch {
            fail("\(output): \(error)")
        }
        let block = 8192
        var buffer = [Float](repeating: 0, count: block * outChannels)
        var frames: Int64 = 0
        do {
            while true {
                let n = try buffer.withUnsafeMutableBufferPointer { try graph.render(into: $0.baseAddress!, frames: block) }
                if n == 0 { break }
                try buffer.withUnsafeBufferPointer { try writer.write(floats: UnsafeBufferPointer(rebasing: $0[0..<(n * outChannels)])) }
                frames += Int64(n)
            }
            try writer.close()
        } catch {
            fail("\(output): \(error) — after \(frames) frames")
        }
        for (file, input) in zip(files, inputs) {
            for warning in file.warnings { note("warning: \(warning)") }
            if let damage = file.damage { note("\(input): \(damage)") }
        }
        for failure in failures.withLock({ $0 }) { note(failure) }
        print("Mixed \(inputs.count) input\(inputs.count == 1 ? "" : "s") into \(frames) frames at \(Int(rate)) Hz, \(outChannels) ch: \(output)")
        if !failures.withLock({ $0.isEmpty }) { exitProgram(1) }
    }

    func note(_ message: String) { writeError("aqmix: \(message)\n") }

    func fail(_ message: String) -> Never {
        writeError("aqmix: \(message)\n")
        exitProgram(1)
    }
}
