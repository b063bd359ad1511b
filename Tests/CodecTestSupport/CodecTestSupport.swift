import Foundation
import Testing
import AVCodecAAC
import AudioFileStream
import AudioPlayback
import BufferQueue
import FAADDecoder
import FLACDecoder
import OpenCoreAMRDecoder
import MPG123Decoder
import OpusDecoder
import SoxrConverter
import VorbisDecoder
import TestSupport

// What the codec and playback tests share: where fixtures and tools are, and renders through
// the queue with every decoder registered, off Swift's cooperative pool.

public enum Where {
    public static let repository = TestPaths.repository
    public static func fixture(_ name: String) -> String { TestPaths.fixture(name) }
    public static let shared = TestPaths.sharedFixtures
    public static func tool(_ name: String) -> String? {
        ["/usr/bin/\(name)", "/usr/local/bin/\(name)"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}

/// The AAC decoder a render uses: libfaad2 (GPL) or libavcodec (LGPL). Every AAC test runs
/// against both (``BothAACDecoders``); a test outside that trait gets libfaad2.
public enum AACDecoderChoice: String, Sendable, CaseIterable {
    case faad = "libfaad2", avcodec = "libavcodec"

    @TaskLocal public static var current: AACDecoderChoice = .faad

    /// A registry with every decoder, AAC's from this choice.
    public var registry: AudioDecoderRegistry { self == .faad ? Self.faadRegistry : Self.avcodecRegistry }

    private static func makeRegistry(_ aac: AudioDecoderFactory) -> AudioDecoderRegistry {
        let registry = AudioDecoderRegistry()
        MPG123Decoder.register(in: registry)
        AMRDecoder.register(in: registry)
        OpusDecoder.register(in: registry)
        VorbisDecoder.register(in: registry)
        FLACDecoder.register(in: registry)
        registry.register(aac)
        return registry
    }
    private static let faadRegistry = makeRegistry(FAADDecoder.factory)
    private static let avcodecRegistry = makeRegistry(AVCodecAACDecoder.factory)
}

/// Runs a test (or each test of a suite) twice, with libfaad2 and with libavcodec decoding AAC.
public struct BothAACDecoders: TestTrait, SuiteTrait, TestScoping {
    public init() {}
    public var isRecursive: Bool { true }
    public func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        guard testCase != nil || !test.isSuite else { return try await function() }
        for choice in AACDecoderChoice.allCases {
            try await AACDecoderChoice.$current.withValue(choice) { try await function() }
        }
    }
}

extension Trait where Self == BothAACDecoders {
    /// Runs the test against both AAC decoders.
    public static var bothAACDecoders: BothAACDecoders { BothAACDecoders() }
}

/// Renders a file through the queue with every decoder (AAC's from `aac`) and libsoxr registered.
public func render(_ path: String, loops: Int = 1, sampleRate: Double? = nil, channels: Int? = nil,
            playRate: Double? = nil, timePitch: TimePitchAlgorithm = .timeDomain, aac: AACDecoderChoice = .current) throws
    -> (samples: [Float], format: AudioStreamDescription, renderer: AudioFileRenderer) {
    MPG123Decoder.register()
    FAADDecoder.register()
    AMRDecoder.register()
    OpusDecoder.register()
    VorbisDecoder.register()
    FLACDecoder.register()
    SoxrConverter.register()
    let renderer = try AudioFileRenderer(file: try AudioFile(path: path), loops: loops, sampleRate: sampleRate, channels: channels,
                                         playRate: playRate, timePitch: timePitch, registry: aac.registry)
    var all: [Float] = []
    var scratch = [Float](repeating: 0, count: 4096 * renderer.outputFormat.channelsPerFrame)
    while true {
        let n = try scratch.withUnsafeMutableBufferPointer { try renderer.render(into: $0, frames: 4096) }
        if n == 0 { break }
        all += scratch[0..<(n * renderer.outputFormat.channelsPerFrame)]
    }
    return (all, renderer.outputFormat, renderer)
}

/// One serial queue for the decoding these tests do: it runs off Swift's cooperative pool (two
/// threads here), one render at a time, so the tests that play in real time keep getting a thread.
public let decodingWork = DispatchQueue(label: "CodecTests.decoding")

/// ``render(_:loops:)`` on ``decodingWork``.
public func rendered(_ path: String, loops: Int = 1, sampleRate: Double? = nil, channels: Int? = nil,
              playRate: Double? = nil, timePitch: TimePitchAlgorithm = .timeDomain) async throws
    -> (samples: [Float], format: AudioStreamDescription, renderer: AudioFileRenderer) {
    let aac = AACDecoderChoice.current
    return try await withCheckedThrowingContinuation { continuation in
        decodingWork.async {
            continuation.resume(with: Result {
                try render(path, loops: loops, sampleRate: sampleRate, channels: channels, playRate: playRate, timePitch: timePitch, aac: aac)
            })
        }
    }
}

/// Runs a reference tool and returns its standard output (see `runTool`: nothing blocks the
/// cooperative pool).
public func run(_ tool: String, _ arguments: [String]) async throws -> Data {
    let result = try await runTool(tool, arguments)
    guard result.status == 0 else {
        throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "\(tool) \(arguments.joined(separator: " ")) exited with \(result.status)"])
    }
    return result.output
}

/// ffmpeg's interleaved float decode of a file (in ffmpeg's channel order: WAVE's).
public func ffmpegFloats(_ path: String) async throws -> [Float] {
    guard let ffmpeg = Where.tool("ffmpeg") else {
        throw CocoaError(.executableNotLoadable, userInfo: [NSLocalizedDescriptionKey: "ffmpeg is not installed"])
    }
    let data = try await run(ffmpeg, ["-v", "error", "-i", path, "-f", "f32le", "-acodec", "pcm_f32le", "-"])
    return data.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
}

/// A temporary copy of a file with one packet's bytes overwritten (0xFF); the caller removes it.
public func copyWithPacketOverwritten(_ path: String, packet index: Int64) throws -> URL {
    let file = try AudioFile(path: path)
    var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
    let packet = try file.readPackets(from: index, count: 1)
    guard let offset = file.byteOffset(ofPacket: index).map(Int.init), let description = packet.descriptions.first else {
        throw CocoaError(.fileReadCorruptFile, userInfo: [NSLocalizedDescriptionKey: "\(path) has no packet \(index)"])
    }
    for i in offset..<(offset + description.dataByteSize) { bytes[i] = 0xFF }
    let copy = FileManager.default.temporaryDirectory.appendingPathComponent("damaged-\(UUID())." + URL(fileURLWithPath: path).pathExtension)
    try bytes.write(to: copy)
    return copy
}

public func floats(wav data: Data) -> [Float] {
    guard let range = data.range(of: Data("data".utf8)) else { return [] }
    let body = data[(range.upperBound + 4)...]
    return body.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
}

public func snr(_ signal: ArraySlice<Float>, _ reference: ArraySlice<Float>) -> Double {
    var s = 0.0, e = 0.0
    for (x, y) in zip(signal, reference) { s += Double(x) * Double(x); e += Double(x - y) * Double(x - y) }
    return e == 0 ? .infinity : 10 * log10(s / e)
}

/// Files the Xiph tests make: sources of odd lengths (a prime number of frames, a multiple of no
/// block or frame size) made by sox, encoded by the reference encoders.
public enum XiphFiles {
    public static let directory: URL = {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("xiph-tests-\(getpid())")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }()

    public static let frames = 30_011

    /// A source WAV: one tone per channel (none at full scale, so no encoder clips), without
    /// dither, so that tests making it at once make the same file.
    public static func source(channels: Int, rate: Int, bits: Int = 16, frames: Int = frames) async throws -> String {
        let path = directory.appendingPathComponent("src-\(channels)ch-\(rate)-\(bits)-\(frames).wav").path
        if FileManager.default.fileExists(atPath: path) { return path }
        let tones = (0..<channels).flatMap { ["sine", "\(220 + 170 * $0)"] }
        // Made under another name and renamed (atomically): a test running alongside never reads half a file.
        let partial = directory.appendingPathComponent("partial-\(UUID()).wav").path
        _ = try await run(try #require(Where.tool("sox")),
                          ["-D", "-r", "\(rate)", "-n", "-r", "\(rate)", "-c", "\(channels)", "-b", "\(bits)", partial, "synth", "\(frames)s"] + tones + ["vol", "0.4"])
        guard rename(partial, path) == 0 else { throw CocoaError(.fileWriteUnknown) }
        return path
    }

    /// Encodes `source` with a tool whose last arguments are the input and output.
    public static func encode(_ source: String, _ tool: String, _ arguments: [String], ext: String, tag: String = "") async throws -> String {
        let name = URL(fileURLWithPath: source).deletingPathExtension().lastPathComponent
        let path = directory.appendingPathComponent("\(name)-\(tool)\(tag).\(ext)").path
        if FileManager.default.fileExists(atPath: path) { return path }
        let exe = try #require(Where.tool(tool), "\(tool) is missing (make deps installs it)")
        let partial = directory.appendingPathComponent("partial-\(UUID()).\(ext)").path
        switch tool {
        case "opusenc": _ = try await run(exe, ["--quiet"] + arguments + [source, partial])
        case "oggenc": _ = try await run(exe, ["-Q"] + arguments + [source, "-o", partial])
        case "flac": _ = try await run(exe, ["-s", "-f"] + arguments + [source, "-o", partial])
        default: _ = try await run(exe, ["-v", "error", "-y", "-i", source] + arguments + [partial])
        }
        guard rename(partial, path) == 0 else { throw CocoaError(.fileWriteUnknown) }
        return path
    }
}
