import Foundation
import Testing

/// Every Swift snippet in `README.md` and `Docs/` is compiled: `Generated/` holds each guide's
/// snippets as the body of a function (never called), with the guide's own imports, so this test
/// target does not build when a snippet does not. This test checks that `Generated/` is what
/// the guides say now; `AQ_WRITE_SNIPPETS=1 swift test --filter DocSnippetTests` writes it anew
/// (after a guide's snippet stopped compiling, remove `Generated/` first so that the target builds).
///
/// A snippet that uses names an earlier part of its guide's prose introduces (`queue`, `format`)
/// gets them from the guide's context below: declarations only, made before its snippets.
/// Package manifest lines (`.package(…)`) are not Swift a target can compile and are left out.
@Suite struct DocSnippetTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// What a guide's snippets take as given: imports, then declarations.
    static let contexts: [String: (imports: [String], declarations: String)] = [
        "GettingStarted.md": (["BufferQueue"], """
            let bytes: [UInt8] = Array(repeating: 0, count: 4096)
            let (other, third) = (try AudioQueue(format: .float32(sampleRate: 44100, channels: 1)).allocateBuffer(capacity: 64),
                                  try AudioQueue(format: .float32(sampleRate: 44100, channels: 1)).allocateBuffer(capacity: 64))
            """),
        "GaplessPlayback.md": (["BufferQueue"], """
            let queue = try AudioQueue(format: .linearPCM(sampleRate: 44100, channels: 2, bitsPerChannel: 16))
            let (first, middle, last) = (try queue.allocateBuffer(capacity: 4096), try queue.allocateBuffer(capacity: 4096), try queue.allocateBuffer(capacity: 4096))
            let (p1, p2, p3): ([AudioPacketDescription], [AudioPacketDescription], [AudioPacketDescription]) = ([], [], [])
            let (priming, remainder) = (2112, 576)
            """),
        "Converting.md": (["BufferQueue"], """
            let queue = try AudioQueue(format: .linearPCM(sampleRate: 44100, channels: 2, bitsPerChannel: 16))
            let samples = [Float](repeating: 0, count: 4410 * 2)
            func write(_ samples: UnsafeBufferPointer<Float>) {}
            """),
        "OfflineRendering.md": (["BufferQueue"], """
            let format = AudioStreamDescription.linearPCM(sampleRate: 44100, channels: 2, bitsPerChannel: 16)
            let queue = try AudioQueue(format: format, configuration: .init(sink: nil))
            let refill: @Sendable (AudioQueueBuffer) -> Void = { _ in }
            func write(_ buffer: AudioQueueBuffer) {}
            """),
        "ProcessingTaps.md": (["BufferQueue", "Synchronization"], """
            let queue = try AudioQueue(format: .linearPCM(sampleRate: 44100, channels: 2, bitsPerChannel: 16))
            final class Biquad: Sendable {
                func reset() {}
                func process(_ samples: UnsafeMutablePointer<Float>, frames: Int) {}
            }
            final class Bands: Sendable {
                func reset() {}
                func process(_ samples: UnsafeMutablePointer<Float>, frames: Int) {}
            }
            let equaliser = Bands()
            final class Levels: Sendable { func store(_ peak: Float) {} }
            let levels = Levels()
            @Sendable func peak(_ samples: UnsafeMutablePointer<Float>, frames: Int) -> Float { 0 }
            """),
        "TimePitch.md": (["BufferQueue"], """
            let queue = try AudioQueue(format: .linearPCM(sampleRate: 44100, channels: 2, bitsPerChannel: 16))
            let chapter = try queue.allocateBuffer(capacity: 4096)
            """),
        "Recording.md": (["BufferQueue"], """
            let format = AudioStreamDescription.linearPCM(sampleRate: 48000, channels: 2, bitsPerChannel: 16)
            """),
        "Mixing.md": (["BufferQueue"], """
            func write(_ samples: ArraySlice<Float>) {}
            let (lengthA, lengthB) = (48_510, 44_100)
            let paths = ["a.flac", "b.mp3"]
            """),
        "Loudness.md": (["BufferQueue"], """
            let samples = [Float](repeating: 0, count: 4800 * 2)
            let queue = try AudioQueue(format: .float32(sampleRate: 48000, channels: 2))
            let reading = LoudnessReading.silent
            let paths = ["a.flac", "b.mp3"]
            let pngBytes: [UInt8] = []
            """),
        "FileStreams.md": (["BufferQueue"], """
            let chunks: [[UInt8]] = []
            func enqueue(_ data: [UInt8], _ descriptions: [AudioPacketDescription]) {}
            func resumeReading(at offset: Int64) {}
            """),
    ]

    struct Snippet {
        var imports: [String]
        var body: [String]
    }

    /// The ```swift blocks of a Markdown text, manifest lines aside.
    static func snippets(in text: String) -> [Snippet] {
        var result: [Snippet] = []
        var current: [String]?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if current == nil {
                if line.hasPrefix("```swift") { current = [] }
                continue
            }
            if line.hasPrefix("```") {
                if let lines = current, !lines.contains(where: { $0.trimmingCharacters(in: .whitespaces).hasPrefix(".package(") }) {
                    let imports = lines.filter { $0.hasPrefix("import ") }.map { String($0.dropFirst(7).split(separator: " ").first ?? "") }
                    result.append(Snippet(imports: imports, body: lines.filter { !$0.hasPrefix("import ") }))
                }
                current = nil
                continue
            }
            current?.append(line)
        }
        return result
    }

    /// Names a snippet declares at its top level (`let x`, `var x`, `let (a, b)`): used once at
    /// its end, so an unused one is no warning.
    static func declaredNames(_ body: [String]) -> [String] {
        var names: [String] = []
        for line in body where line.hasPrefix("let ") || line.hasPrefix("var ") {
            let rest = line.dropFirst(4)
            if rest.hasPrefix("(") {
                let inside = rest.dropFirst().prefix { $0 != ")" }
                names += inside.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                    .map { String($0.prefix { $0.isLetter || $0.isNumber || $0 == "_" }) }
            } else {
                names.append(String(rest.prefix { $0.isLetter || $0.isNumber || $0 == "_" }))
            }
        }
        return names.filter { !$0.isEmpty && $0 != "_" }
    }

    /// The Swift file that compiles a guide's snippets.
    static func generated(name: String, source: String, text: String) -> String? {
        let found = snippets(in: text)
        guard !found.isEmpty else { return nil }
        let context = contexts[name]
        let imports = Set(found.flatMap(\.imports) + (context?.imports ?? [])).sorted()
        let function = "docSnippets_" + name.replacingOccurrences(of: ".md", with: "").filter { $0.isLetter || $0.isNumber }
        var out = "// Generated from \(source) by DocSnippetTests (AQ_WRITE_SNIPPETS=1 swift test --filter DocSnippetTests): do not edit.\n"
        out += imports.map { "import \($0)\n" }.joined()
        out += "\n// Compiled, never called.\n"
        out += "func \(function)() async throws {\n"
        if let declarations = context?.declarations {
            out += declarations.split(separator: "\n").map { "    \($0)\n" }.joined()
            let names = declaredNames(declarations.split(separator: "\n").map(String.init))
            out += names.map { "    _ = \($0)\n" }.joined()
        }
        // A guide's snippets read on from each other (a queue made in one is used in the next):
        // they share one scope, except one that declares a name again, which gets its own.
        var declared = Set(declaredNames((context?.declarations ?? "").split(separator: "\n").map(String.init)))
        for (index, snippet) in found.enumerated() {
            let names = declaredNames(snippet.body)
            let own = !declared.isDisjoint(with: names)
            let indent = own ? "        " : "    "
            out += own ? "    do { // \(source), snippet \(index + 1)\n" : "    // \(source), snippet \(index + 1)\n"
            out += snippet.body.map { $0.isEmpty ? "\n" : indent + $0 + "\n" }.joined()
            out += names.map { indent + "_ = \($0)\n" }.joined()
            if own { out += "    }\n" } else { declared.formUnion(names) }
        }
        out += "}\n"
        return out
    }

    /// Every guide with snippets: its generated file's name and text.
    static func expected() throws -> [(file: String, text: String)] {
        var sources = [("README.md", "README.md")]
        let docs = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("Docs").path)
        sources += docs.filter { $0.hasSuffix(".md") }.sorted().map { ($0, "Docs/" + $0) }
        return try sources.compactMap { name, source in
            let text = try String(contentsOf: root.appendingPathComponent(source), encoding: .utf8)
            return generated(name: name, source: source, text: text).map { (name.replacingOccurrences(of: ".md", with: ".swift"), $0) }
        }
    }

    @Test func generatedSnippetsAreTheGuidesSnippets() throws {
        let folder = Self.root.appendingPathComponent("Tests/DocSnippetTests/Generated")
        let expected = try Self.expected()
        if ProcessInfo.processInfo.environment["AQ_WRITE_SNIPPETS"] == "1" {
            try? FileManager.default.removeItem(at: folder)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            for (file, text) in expected { try text.write(to: folder.appendingPathComponent(file), atomically: true, encoding: .utf8) }
        }
        let present = Set(try FileManager.default.contentsOfDirectory(atPath: folder.path))
        #expect(present == Set(expected.map(\.file)), "Generated/ holds \(present.sorted()); the guides make \(expected.map(\.file))")
        for (file, text) in expected {
            let committed = try? String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
            #expect(committed == text, "\(file) is not the guide's snippets: run AQ_WRITE_SNIPPETS=1 swift test --filter DocSnippetTests")
        }
        // The snippets are there to be compiled: at least the README's quick start and each guide's.
        #expect(expected.count >= 12)
    }
}
