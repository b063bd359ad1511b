// The `timepitch` section: quality (THD+N of sines, log-spectral distance of speech) and CPU of
// the play-rate algorithms, as whole commands, against `sox tempo` and the `rubberband` command.
import Foundation
import TestSupport

/// A mono or multichannel WAV's first channel as floats (16-bit integer or 32-bit float data).
func readWAVChannel0(_ path: String) throws -> (samples: [Float], rate: Double) {
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    let bytes = [UInt8](data)
    func u32(_ i: Int) -> Int { Int(bytes[i]) | Int(bytes[i + 1]) << 8 | Int(bytes[i + 2]) << 16 | Int(bytes[i + 3]) << 24 }
    func u16(_ i: Int) -> Int { Int(bytes[i]) | Int(bytes[i + 1]) << 8 }
    guard bytes.count >= 12, String(decoding: bytes[0..<4], as: UTF8.self) == "RIFF" else { throw ExitMessage("\(path): not a WAV") }
    var offset = 12
    var channels = 0, rate = 0.0, bits = 0, format = 0
    while offset + 8 <= bytes.count {
        let id = String(decoding: bytes[offset..<(offset + 4)], as: UTF8.self)
        var size = u32(offset + 4)
        let body = offset + 8
        if id == "fmt " {
            format = u16(body)
            channels = u16(body + 2)
            rate = Double(u32(body + 4))
            bits = u16(body + 14)
            if format == 0xFFFE { format = u16(body + 24) }   // WAVE_FORMAT_EXTENSIBLE: the subformat's tag
        } else if id == "data" {
            if size == 0 || size == 0xFFFF_FFFF || body + size > bytes.count { size = bytes.count - body }
            let stride = channels * bits / 8
            guard stride > 0 else { throw ExitMessage("\(path): data before fmt") }
            let frames = size / stride
            var samples = [Float](repeating: 0, count: frames)
            for i in 0..<frames {
                let at = body + i * stride
                if format == 3 && bits == 32 {
                    samples[i] = Float(bitPattern: UInt32(u32(at)))
                } else if format == 1 && bits == 16 {
                    samples[i] = Float(Int16(bitPattern: UInt16(u16(at)))) / 32768
                } else {
                    throw ExitMessage("\(path): format \(format) with \(bits) bits is not read here")
                }
            }
            return (samples, rate)
        }
        offset = body + size + (size & 1)
    }
    throw ExitMessage("\(path): no data chunk")
}

/// THD+N of a sine of `frequency`, in dB: over consecutive windows of `window` samples (a
/// fundamental whose phase or level wanders is tracked, as a notch filter would), the residual
/// after a least-squares fit of a sine, a cosine and a constant, over the fitted sine's energy.
/// The first and last `skip` samples are left out.
func windowedTHDPlusN(_ samples: [Float], frequency: Double, rate: Double, window: Int = 4096, skip: Int) -> Double {
    var residual = 0.0, fundamental = 0.0
    var start = skip
    while start + window <= samples.count - skip {
        let fit = sineFit(samples, frequency: frequency, rate: rate, range: start..<(start + window))
        residual += fit.residual
        fundamental += fit.fundamental
        start += window
    }
    guard fundamental > 0 else { return 0 }
    return 10 * log10(max(residual, 1e-30) / fundamental)
}


/// Power spectrum (dB) of a Hann-windowed frame of `size` samples centred on `centre` (zeros outside).
func powerSpectrumDB(_ samples: [Float], centre: Int, size: Int) -> [Double] {
    var re = [Double](repeating: 0, count: size), im = [Double](repeating: 0, count: size)
    for i in 0..<size {
        let at = centre - size / 2 + i
        guard at >= 0, at < samples.count else { continue }
        re[i] = Double(samples[at]) * (0.5 - 0.5 * cos(2 * Double.pi * Double(i) / Double(size)))
    }
    fft(&re, &im)
    var spectrum = [Double](repeating: 0, count: size / 2 + 1)
    for k in spectrum.indices {
        let power: Double = re[k] * re[k] + im[k] * im[k]
        spectrum[k] = 10 * log10(power + 1e-12)
    }
    return spectrum
}

/// Log-spectral distance in dB between `original` and `stretched` (played at `rate`) at matched
/// times: source time t is compared with output time t / rate. Frames of 1024 samples every 256,
/// only where the original is within 40 dB of its loudest frame (speech, not the pauses).
func logSpectralDistance(original: [Float], stretched: [Float], rate: Double) -> Double {
    let size = 1024, hop = 256
    var energies: [(Int, Double)] = []
    var centre = size / 2
    while centre + size / 2 < original.count {
        var e = 0.0
        for i in (centre - size / 2)..<(centre + size / 2) { e += Double(original[i]) * Double(original[i]) }
        energies.append((centre, e))
        centre += hop
    }
    let loudest = energies.map(\.1).max() ?? 0
    var total = 0.0, count = 0
    for (centre, energy) in energies where energy > loudest * 1e-4 {
        let matched = Int((Double(centre) / rate).rounded())
        guard matched + size / 2 < stretched.count else { continue }
        let a = powerSpectrumDB(original, centre: centre, size: size)
        let b = powerSpectrumDB(stretched, centre: matched, size: size)
        var sum = 0.0
        for k in a.indices { sum += (a[k] - b[k]) * (a[k] - b[k]) }
        total += (sum / Double(a.count)).squareRoot()
        count += 1
    }
    return count > 0 ? total / Double(count) : .nan
}

func timePitchBenchmarks() throws -> [String] {
    let folder = NSTemporaryDirectory() + "aqbench-files"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    let aqrender = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("aqrender").path
    guard FileManager.default.isExecutableFile(atPath: aqrender) else { return ["timepitch: \(aqrender) not built (make bench builds it)"] }
    for tool in ["/usr/bin/sox", "/usr/bin/rubberband", "/usr/bin/espeak-ng"] where !FileManager.default.isExecutableFile(atPath: tool) {
        return ["timepitch: \(tool) is missing (make bench installs it)"]
    }
    let output = folder + "/timepitch-out.wav"
    defer { try? FileManager.default.removeItem(atPath: output) }

    /// Every command that stretches `input` by `rate` into `output` (a float WAV), by name.
    func commands(_ input: String, _ rate: Double) -> [(String, String, [String])] {
        let r = String(format: "%g", rate)
        return [
            ("aqrender --time-pitch timedomain", aqrender, [input, output, "--rate", r, "--time-pitch", "timedomain"]),
            ("aqrender --time-pitch spectral", aqrender, [input, output, "--rate", r, "--time-pitch", "spectral"]),
            ("sox tempo", "/usr/bin/sox", [input, "-e", "floating-point", "-b", "32", output, "tempo", r]),
            ("rubberband -3 (R3, offline)", "/usr/bin/rubberband", ["-q", "-3", "-T", r, input, output]),
            ("rubberband -3 --realtime", "/usr/bin/rubberband", ["-q", "-3", "--realtime", "-T", r, input, output]),
        ]
    }

    var lines: [String] = []
    lines.append("play rate with the pitch kept: quality against sox tempo and the rubberband command (Rubber Band 3.1.2)")
    lines.append("THD+N (dB, lower is cleaner) of a 10 s float sine at 44.1 kHz, 4096-sample windows, 0.5 s left out at each end")
    for frequency in [440.0, 1000.0] {
        let sine = folder + "/sine-\(Int(frequency)).wav"
        if !FileManager.default.fileExists(atPath: sine) {
            try runTool("/usr/bin/sox", ["-n", "-r", "44100", "-c", "1", "-e", "floating-point", "-b", "32", sine,
                                         "synth", "10", "sine", String(Int(frequency)), "vol", "0.5"])
        }
        for rate in [0.75, 1.5, 2.0] {
            var row: [String] = []
            for (name, tool, arguments) in commands(sine, rate) {
                try runTool(tool, arguments)
                let (samples, sampleRate) = try readWAVChannel0(output)
                let value = windowedTHDPlusN(samples, frequency: frequency, rate: sampleRate, skip: Int(sampleRate / 2))
                row.append("\(name) " + String(format: "%6.1f", value))
            }
            lines.append(String(format: "  %4.0f Hz at %.2fx: ", frequency, rate) + row.joined(separator: " | "))
        }
    }

    let speech = folder + "/speech.wav"
    if !FileManager.default.fileExists(atPath: speech) {
        let text = "The quick brown fox jumps over the lazy dog. A queue plays faster or slower, and the voice stays the same."
        let raw = folder + "/speech-raw.wav"
        try runTool("/usr/bin/espeak-ng", ["-w", raw, text])
        // As float, so every tool reads and writes the same sample format.
        try runTool("/usr/bin/sox", [raw, "-e", "floating-point", "-b", "32", speech])
    }
    let (original, _) = try readWAVChannel0(speech)
    lines.append("speech (espeak-ng, 22.05 kHz): log-spectral distance (dB, lower is closer) to the original at matched times")
    for rate in [0.75, 1.5, 2.0] {
        var row: [String] = []
        for (name, tool, arguments) in commands(speech, rate) {
            try runTool(tool, arguments)
            let (samples, _) = try readWAVChannel0(output)
            row.append("\(name) " + String(format: "%5.2f", logSpectralDistance(original: original, stretched: samples, rate: rate)))
        }
        lines.append(String(format: "  at %.2fx: ", rate) + row.joined(separator: " | "))
    }

    // CPU on one core: a 60 s stereo music-like file at 1.5×, user + system seconds, best of 3.
    let music = try makeFile("1-minutes.wav", seconds: 60, in: folder)
    let float = folder + "/1-minute-float.wav"
    if !FileManager.default.fileExists(atPath: float) {
        try runTool("/usr/bin/sox", [music, "-e", "floating-point", "-b", "32", float])
    }
    lines.append("CPU at 1.5x on one core (taskset -c 0), 60 s of stereo 44.1 kHz float, user + system seconds, best of 3")
    var cpu: [(String, Double)] = []
    var all = commands(float, 1.5)
    all.insert(("aqrender --time-pitch varispeed", aqrender, [float, output, "--rate", "1.5", "--time-pitch", "varispeed"]), at: 2)
    all.append(("rubberband (R2, default engine)", "/usr/bin/rubberband", ["-q", "-T", "1.5", float, output]))
    all.append(("aqrender (no rate: reading and writing)", aqrender, [float, output]))
    for (name, tool, arguments) in all {
        var best = Double.infinity
        for _ in 0..<3 {
            let t = try gnuTime("%U %S", "/usr/bin/taskset", ["-c", "0", tool] + arguments)
            best = min(best, t.reduce(0, +))
        }
        cpu.append((name, best))
        let label = name.padding(toLength: 42, withPad: " ", startingAt: 0)
        lines.append("  \(label) " + String(format: "%6.2f s  (%5.0fx real time)", best, 60 / max(best, 0.001)))
    }
    let seconds = Dictionary(cpu, uniquingKeysWith: { a, _ in a })
    func ratio(_ a: String, _ b: String) -> String {
        guard let x = seconds[a], let y = seconds[b], y > 0 else { return "-" }
        return String(format: "%.2f", x / y)
    }
    lines.append("  CPU ratios: timedomain / sox tempo \(ratio("aqrender --time-pitch timedomain", "sox tempo")), "
                 + "spectral / rubberband -3 --realtime \(ratio("aqrender --time-pitch spectral", "rubberband -3 --realtime")), "
                 + "spectral / rubberband -3 \(ratio("aqrender --time-pitch spectral", "rubberband -3 (R3, offline)"))")
    return lines
}
