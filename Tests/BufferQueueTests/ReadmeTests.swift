import Foundation
import Testing

/// The README's quick start must be the example that compiles (`Examples/quickstart`).
@Test func readmeQuickStartIsTheCompiledExample() throws {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
    let example = try String(contentsOf: root.appendingPathComponent("Examples/quickstart/main.swift"), encoding: .utf8)
    #expect(readme.contains("```swift\n" + example + "```"))
    #expect(example.split(separator: "\n", omittingEmptySubsequences: false).count <= 21)  // 20 lines and the final newline
}
