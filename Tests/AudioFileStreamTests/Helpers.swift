import Foundation
import Testing
@testable import AudioFileStream
import BufferQueue
import TestSupport

enum Paths {
    static let repository = TestPaths.repository
    /// The project's own generated fixtures.
    static let projectFixtures = TestPaths.projectFixtures
    /// The shared fixtures (`$AQ_FIXTURES`, else `../shared/fixtures`), nil when absent.
    static let sharedFixtures = TestPaths.sharedFixtures
    static var sharedFixturesMissing: Bool { sharedFixtures == nil }

    static func shared(_ name: String) -> URL? { sharedFixtures?.appendingPathComponent(name) }

    static func sharedFiles() -> [String] {
        guard let dir = sharedFixtures, let names = try? FileManager.default.contentsOfDirectory(atPath: dir.path) else { return [] }
        return names.filter { $0 != "SOURCES.md" }.sorted()
    }

    static func projectFiles() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: projectFixtures.path)) ?? [])
            .filter { !["MANIFEST.tsv", "SHA256SUMS"].contains($0) && !$0.hasSuffix(".raw") }.sorted()
    }
}

/// One line of `Fixtures/MANIFEST.tsv`.
struct ManifestEntry: CustomTestStringConvertible, Sendable {
    let file: String, sourceFrames: Int64, rate: Double, channels: Int, gapless: Bool
    /// The file holds exactly the source's frames (G.711, ALAC), with or without a gapless table.
    let exact: Bool
    var testDescription: String { file }

    static let all: [ManifestEntry] = {
        guard let text = try? String(contentsOf: Paths.projectFixtures.appendingPathComponent("MANIFEST.tsv"), encoding: .utf8) else { return [] }
        return text.split(separator: "\n").dropFirst().compactMap { line in
            let f = line.split(separator: "\t").map(String.init)
            guard f.count == 5, let frames = Int64(f[1]), let rate = Double(f[2]), let channels = Int(f[3]) else { return nil }
            return ManifestEntry(file: f[0], sourceFrames: frames, rate: rate, channels: channels, gapless: f[4] == "yes", exact: f[4] == "exact")
        }
    }()
}

/// Everything a stream produced, in a form that does not depend on how the bytes were chunked.
struct Trace: Equatable, CustomStringConvertible {
    enum Item: Equatable { case property(String), packet(index: Int64, offset: Int64, frames: Int, bytes: [UInt8]), seek(Int64) }
    var items: [Item] = []
    var error: String?
    var warnings: [String] = []

    var packets: [(index: Int64, offset: Int64, frames: Int, bytes: [UInt8])] {
        items.compactMap { if case .packet(let i, let o, let f, let b) = $0 { return (i, o, f, b) } else { return nil } }
    }
    var description: String {
        "\(items.count) items, \(packets.count) packets, error: \(error ?? "none"), first properties: \(items.prefix(3))"
    }
}

func describe(_ stream: AudioFileStream, _ property: AudioFileStreamProperty) -> String {
    switch property {
    case .fileFormat: return "fileFormat=\(String(describing: stream.fileType))"
    case .dataFormat: return "dataFormat=\(String(describing: stream.dataFormat))"
    case .formatList: return "formatList=\(stream.formatList)"
    case .magicCookie: return "magicCookie=\(String(describing: stream.magicCookie))"
    case .dataOffset: return "dataOffset=\(String(describing: stream.dataOffset))"
    case .audioDataByteCount: return "bytes=\(String(describing: stream.audioDataByteCount))"
    case .audioDataPacketCount: return "packets=\(String(describing: stream.audioDataPacketCount))"
    case .bitRate: return "bitRate=\(String(describing: stream.bitRate))"
    case .maximumPacketSize: return "max=\(String(describing: stream.maximumPacketSize))"
    case .channelLayout: return "layout=\(String(describing: stream.channelLayout))"
    case .packetTableInfo: return "table=\(String(describing: stream.packetTableInfo))"
    case .metadata:
        // The tags sorted: two dictionaries with the same pairs may print them in other orders
        // (their layout depends on how they were filled), which made this trace differ by chance.
        var metadata = stream.metadata
        let tags = metadata.tags.sorted { $0.key < $1.key }
        metadata.tags = [:]
        return "metadata=\(metadata) tags=\(tags)"
    case .readyToProducePackets: return "ready"
    }
}

/// Feeds `bytes` to a stream in chunks of the given sizes (cycled), following seek requests like a
/// seekable source would, and records everything.
func trace(_ bytes: [UInt8], chunks: [Int], seekable: Bool = true, hint: AudioFileType? = nil) -> Trace {
    let driver = AudioFileStreamDriver(stream: AudioFileStream(fileTypeHint: hint, sourceIsSeekable: seekable))
    let stream = driver.stream
    var result = Trace()
    var chunkIndex = 0
    func record(_ event: AudioFileStreamEvent) {
        switch event {
        case .property(let property): result.items.append(.property(describe(stream, property)))
        case .seekRequired(let offset): result.items.append(.seek(offset))
        case .segmentTimestamp, .timedMetadata: break
        case .link(let link): result.items.append(.property("link \(link.index) first=\(link.firstPacket) priming=\(link.primingFrames) valid=\(String(describing: link.validFrames))"))
        case .packets(let packets):
            let bytesPerPacket = stream.dataFormat?.bytesPerPacket ?? 0
            if packets.descriptions.isEmpty {
                // Constant-size packets: one record per packet.
                for i in 0..<packets.packetCount {
                    let start = i * bytesPerPacket
                    result.items.append(.packet(index: packets.firstPacketIndex + Int64(i), offset: (packets.fileOffsets.first ?? 0) + Int64(start),
                                                frames: stream.dataFormat?.framesPerPacket ?? 0, bytes: Array(packets.data[start..<(start + bytesPerPacket)])))
                }
            } else {
                for (i, d) in packets.descriptions.enumerated() {
                    result.items.append(.packet(index: packets.firstPacketIndex + Int64(i), offset: packets.fileOffsets[i],
                                                frames: d.variableFramesInPacket, bytes: Array(packets.data[d.startOffset..<(d.startOffset + d.dataByteSize)])))
                }
            }
        }
    }
    do {
        while driver.position >= 0 && driver.position < Int64(bytes.count) {
            let size = max(1, chunks[chunkIndex % chunks.count])
            chunkIndex += 1
            let start = Int(driver.position), end = min(start + size, bytes.count)
            try bytes[start..<end].withUnsafeBytes { _ = try driver.feed($0, record) }
        }
        _ = try driver.finish(record)
    } catch {
        result.error = "\(error)"
    }
    result.warnings = stream.warnings.map(\.description)
    return result
}

func load(_ url: URL) throws -> [UInt8] { Array(try Data(contentsOf: url)) }

/// One serial queue for the CPU-heavy parser tests: they run one at a time off Swift's
/// cooperative pool (two threads here), leaving a core for the tests that play in real time.
let heavyWork = DispatchQueue(label: "AudioFileStreamTests.heavy")

/// Runs CPU-heavy synchronous work on ``heavyWork`` and awaits it.
func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        heavyWork.async { continuation.resume(with: Result { try body() }) }
    }
}
