// The `commands` section (issue 17): whole commands as a user runs them, `aqrender` against the
// simplest tool doing the same work, wall and CPU seconds and peak memory from GNU time, medians of
// seven runs taken alternately (this shared VM moves a command by ±20 % run to run); and the cost per minute of audio at 1, 10 and 60 minutes.
import Foundation

/// One run under GNU time: wall seconds, CPU seconds (user + system), peak RSS in KiB.
struct CommandCost {
    let wall: Double, cpu: Double, rssKiB: Double
}

func commandCost(_ path: String, _ arguments: [String]) throws -> CommandCost {
    let numbers = try gnuTime("%e %U %S %M", path, arguments)
    guard numbers.count == 4 else { throw BenchError("GNU time printed \(numbers) for \(path)") }
    return CommandCost(wall: numbers[0], cpu: numbers[1] + numbers[2], rssKiB: numbers[3])
}

/// Medians of `runs` alternating runs of two commands; `removing` files are deleted (untimed)
/// before every run, so each command writes a new file instead of replacing one.
func compare(_ ours: (String, [String]), _ theirs: (String, [String]), runs: Int = 7, removing: [String] = []) throws -> (ours: CommandCost, theirs: CommandCost) {
    var a: [CommandCost] = [], b: [CommandCost] = []
    func clear() { for path in removing { try? FileManager.default.removeItem(atPath: path) } }
    for _ in 0..<runs {
        clear()
        a.append(try commandCost(ours.0, ours.1))
        clear()
        b.append(try commandCost(theirs.0, theirs.1))
    }
    func med(_ list: [CommandCost]) -> CommandCost {
        CommandCost(wall: median(list.map(\.wall)), cpu: median(list.map(\.cpu)), rssKiB: median(list.map(\.rssKiB)))
    }
    return (med(a), med(b))
}

/// A source file of `minutes` minutes in `kind` (wav16, wavf32, mp3, m4a), made once.
func benchFile(_ kind: String, minutes: Int, in folder: String) throws -> String {
    switch kind {
    case "wav16": return try makeFile("\(minutes)-min-s16.wav", seconds: minutes * 60, in: folder)
    case "wavf32":
        let path = folder + "/\(minutes)-min-f32.wav"
        if !FileManager.default.fileExists(atPath: path) {
            let s16 = try benchFile("wav16", minutes: minutes, in: folder)
            _ = try runTool("/usr/bin/sox", [s16, "-e", "floating-point", "-b", "32", path])
        }
        return path
    case "mp3": return try makeFile("\(minutes)-min.mp3", seconds: minutes * 60, in: folder)
    case "m4a-nopns": return try makeFile("\(minutes)-min-nopns.m4a", seconds: minutes * 60, in: folder)
    default: return try makeFile("\(minutes)-min.m4a", seconds: minutes * 60, in: folder)
    }
}

func commandBenchmarks() throws -> [String] {
    let folder = NSTemporaryDirectory() + "aqbench-files"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    let aqrender = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("aqrender").path
    guard FileManager.default.isExecutableFile(atPath: aqrender) else { return ["commands: \(aqrender) not built (make bench builds it)"] }
    let out = folder + "/out-ours.wav", other = folder + "/out-tool.wav"
    defer {
        try? FileManager.default.removeItem(atPath: out)
        try? FileManager.default.removeItem(atPath: other)
    }
    var lines = ["whole commands, 10-minute files (wall / CPU seconds, user + system; medians of 7, alternating; ratio ours / tool)"]
    func row(_ label: String, _ ours: (String, [String]), _ tool: (String, [String]), _ toolLabel: String, removing: [String] = []) throws {
        let (a, b) = try compare(ours, tool, removing: removing)
        func pad(_ text: String, _ width: Int) -> String { text.padding(toLength: max(width, text.count), withPad: " ", startingAt: 0) }
        lines.append("  " + pad(label, 40) + String(format: " %6.2f / %5.2f s   ", a.wall, a.cpu) + pad(toolLabel, 30)
                     + String(format: " %6.2f / %5.2f s   wall %.2f  CPU %.2f", b.wall, b.cpu, a.wall / max(b.wall, 0.001), a.cpu / max(b.cpu, 0.001)))
    }
    let f32 = try benchFile("wavf32", minutes: 10, in: folder)
    let s16 = try benchFile("wav16", minutes: 10, in: folder)
    let mp3 = try benchFile("mp3", minutes: 10, in: folder)
    let m4a = try benchFile("m4a", minutes: 10, in: folder)
    let plainAAC = try benchFile("m4a-nopns", minutes: 10, in: folder)
    let one = ["--jobs", "1"]
    try row("aqrender F32.wav OUT.wav --format f32", (aqrender, [f32, out, "--format", "f32"] + one), ("/usr/bin/sox", [f32, other]), "sox F32.wav OUT.wav")
    try row("aqrender S16.wav OUT.wav --format f32", (aqrender, [s16, out, "--format", "f32"] + one),
            ("/usr/bin/sox", [s16, "-e", "floating-point", "-b", "32", other]), "sox S16.wav -e float OUT.wav")
    try row("aqrender F32.wav OUT.wav --format s16", (aqrender, [f32, out, "--format", "s16"] + one),
            ("/usr/bin/sox", [f32, "-D", "-b", "16", other]), "sox F32.wav -D -b 16 OUT.wav")
    try row("aqrender FILE.mp3 OUT.wav --format s16 --jobs 1", (aqrender, [mp3, out, "--format", "s16"] + one), ("/usr/bin/mpg123", ["-q", "-w", other, mp3]), "mpg123 -w OUT.wav FILE.mp3")
    try row("aqrender FILE.m4a OUT.wav --format s16 --jobs 1", (aqrender, [m4a, out, "--format", "s16"] + one), ("/usr/bin/faad", ["-q", "-o", other, m4a]), "faad -o OUT.wav FILE.m4a")
    // Split over the cores (AAC-LC without noise substitution, so the output is bit-identical).
    let cores = ProcessInfo.processInfo.activeProcessorCount
    lines.append("split over \(cores) cores (--jobs \(cores), the default), same tools")
    try row("aqrender FILE.mp3 OUT.wav --format s16", (aqrender, [mp3, out, "--format", "s16"]), ("/usr/bin/mpg123", ["-q", "-w", other, mp3]), "mpg123 -w OUT.wav FILE.mp3")
    try row("aqrender PLAIN.m4a OUT.wav --format s16", (aqrender, [plainAAC, out, "--format", "s16"]),
            ("/usr/bin/faad", ["-q", "-o", other, plainAAC]), "faad -o OUT.wav PLAIN.m4a")
    // The rows above write over the previous run's output, as a user rendering again does. A new
    // file spares every tool the truncation and ext4's flush at close (which aqrender's writer
    // avoids when it replaces a file, too).
    lines.append("MP3 to a new file each run (the output deleted before every run, untimed)")
    try row("aqrender FILE.mp3 OUT.wav --format s16 --jobs 1", (aqrender, [mp3, out, "--format", "s16"] + one),
            ("/usr/bin/mpg123", ["-q", "-w", other, mp3]), "mpg123 -w OUT.wav FILE.mp3", removing: [out, other])
    try row("aqrender FILE.mp3 OUT.wav --format s16", (aqrender, [mp3, out, "--format", "s16"]),
            ("/usr/bin/mpg123", ["-q", "-w", other, mp3]), "mpg123 -w OUT.wav FILE.mp3", removing: [out, other])

    // Linear: CPU per minute of audio at 1, 10 and 60 minutes, and peak memory over --help.
    let help = try commandCost(aqrender, ["--help"])
    lines.append("")
    lines.append(String(format: "cost per minute of audio, aqrender FILE OUT.wav --format s16 --jobs 1 (CPU ms per minute; peak RSS above `aqrender --help`, %.1f MiB)", help.rssKiB / 1024))
    func perMinute(_ kinds: [String], _ extra: [String]) throws {
        for kind in kinds {
            var cells: [String] = []
            for minutes in [1, 10, 60] {
                let file = try benchFile(kind, minutes: minutes, in: folder)
                let runs = try (0..<3).map { _ in try commandCost(aqrender, [file, out, "--format", "s16"] + extra) }
                let cpu = median(runs.map(\.cpu)), rss = median(runs.map(\.rssKiB))
                cells.append(String(format: "%2d min: %6.1f ms/min, +%.1f MiB", minutes, cpu * 1000 / Double(minutes), (rss - help.rssKiB) / 1024))
            }
            lines.append("  " + kind.padding(toLength: 7, withPad: " ", startingAt: 0) + cells.joined(separator: "   "))
        }
    }
    try perMinute(["wavf32", "wav16", "mp3", "m4a"], one)
    // The same with the default split (one decoder per core): memory and total CPU.
    lines.append("the same, split (--jobs \(cores))")
    try perMinute(["mp3", "m4a"], [])
    return lines
}
