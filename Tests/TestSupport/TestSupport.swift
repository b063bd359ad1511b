import Foundation

/// Helpers shared by the test targets.
public enum TestPaths {
    /// The repository's root.
    public static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    /// The project's own generated fixtures.
    public static let projectFixtures = repository.appendingPathComponent("Fixtures")
    public static func fixture(_ name: String) -> String { projectFixtures.appendingPathComponent(name).path }
    /// The shared fixtures: `$AQ_FIXTURES`, else `../shared/fixtures` beside the repository; nil when absent,
    /// or when `$AQ_FIXTURES` is `none` (how CI shows that every test needing them skips cleanly without them).
    public static let sharedFixtures: URL? = {
        if ProcessInfo.processInfo.environment["AQ_FIXTURES"] == "none" { return nil }
        let candidates = [ProcessInfo.processInfo.environment["AQ_FIXTURES"].map { URL(fileURLWithPath: $0) },
                          repository.deletingLastPathComponent().appendingPathComponent("shared/fixtures")]
        return candidates.compactMap { $0 }.first { FileManager.default.fileExists(atPath: $0.appendingPathComponent("SOURCES.md").path) }
    }()
}

/// nil when equal; otherwise a short description of the first difference (keeps failures readable).
public func difference(_ actual: [Float], _ expected: [Float]) -> String? {
    if actual == expected { return nil }
    for index in 0..<min(actual.count, expected.count) where actual[index] != expected[index] {
        return "\(actual.count) vs \(expected.count) samples; first difference at sample \(index): \(actual[index]) vs \(expected[index])"
    }
    return "\(actual.count) vs \(expected.count) samples; equal over the common part"
}

/// nil when both have the same length and every sample is within `tolerance`; otherwise the
/// first difference beyond it.
public func difference(_ actual: [Float], _ expected: [Float], tolerance: Float) -> String? {
    for index in 0..<min(actual.count, expected.count) where abs(actual[index] - expected[index]) > tolerance {
        return "\(actual.count) vs \(expected.count) samples; first difference at sample \(index): \(actual[index]) vs \(expected[index])"
    }
    return actual.count == expected.count ? nil : "\(actual.count) vs \(expected.count) samples; equal over the common part"
}

/// The frames between the first and the last frame that is not silent (sinks pad with silence).
public func trimSilence(_ samples: [Float], channels: Int) -> [Float] {
    let frames = samples.count / channels
    func silent(_ i: Int) -> Bool { (0..<channels).allSatisfy { samples[i * channels + $0] == 0 } }
    var first = 0
    while first < frames && silent(first) { first += 1 }
    var last = frames
    while last > first && silent(last - 1) { last -= 1 }
    return Array(samples[(first * channels)..<(last * channels)])
}

/// SplitMix64: a small seedable generator, the same on every machine (randomized tests replay
/// from their seed).
public struct SplitMix {
    public var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    /// A number in `range`.
    public mutating func int(_ range: ClosedRange<Int>) -> Int {
        range.lowerBound + Int(next() % UInt64(range.upperBound - range.lowerBound + 1))
    }
    /// True `percent` times in a hundred.
    public mutating func chance(_ percent: Int) -> Bool { int(0...99) < percent }
}

/// Whether this process runs under ThreadSanitizer (its runtime is linked in). Suites of pure
/// single-threaded computation skip that pass: the plain pass checks their numbers, and
/// instrumentation makes them many times slower without a thread to watch.
public let isUnderThreadSanitizer: Bool = dlsym(dlopen(nil, RTLD_NOW), "__tsan_init") != nil
