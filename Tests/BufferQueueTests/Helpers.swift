import Dispatch
import Foundation
import Synchronization
import Testing
@testable import BufferQueue
@_exported import TestSupport

/// Interleaved float test signal where every sample is distinct: frame i, channel c.
func ramp(frames: Int, channels: Int, offset: Int = 0) -> [Float] {
    var samples = [Float](repeating: 0, count: frames * channels)
    for i in 0..<frames {
        for c in 0..<channels {
            samples[i * channels + c] = Float((i + offset) % 100_000) / 100_000 * (c % 2 == 0 ? 1 : -1)
        }
    }
    return samples
}

/// What a real-time sink captured, without the silence it played when it ran dry. On a loaded
/// machine a paced sink may underrun (an `.underrun` event); the frames it played meanwhile are all
/// zero and are not input. Only valid for input with no all-zero frame, such as ``ramp(frames:channels:offset:)``
/// with a positive offset.
func heardInput(_ captured: [Float], channels: Int, underran: Bool) -> [Float] {
    let heard = trimSilence(captured, channels: channels)
    guard underran else { return heard }
    return stride(from: 0, to: heard.count - channels + 1, by: channels)
        .filter { frame in heard[frame..<(frame + channels)].contains { $0 != 0 } }
        .flatMap { heard[$0..<($0 + channels)] }
}

extension AudioQueue {
    /// A buffer holding `samples` as native float32.
    func makeBuffer(_ samples: [Float]) throws -> AudioQueueBuffer {
        let buffer = try allocateBuffer(capacity: max(samples.count * 4, 1))
        try samples.withUnsafeBytes { try buffer.setData($0) }
        return buffer
    }

    /// Renders offline in float32 until nothing more comes (or `limit` frames).
    func renderAllOffline(chunk: Int = 1000, limit: Int = 10_000_000) throws -> [Float] {
        try setOfflineRenderFormat(.float32(sampleRate: outputFormat.sampleRate, channels: outputFormat.channelsPerFrame))
        return try renderRest(channels: outputFormat.channelsPerFrame, chunk: chunk, limit: limit)
    }

    /// Renders offline, in the float32 offline format already set, until nothing more comes (or
    /// `limit` frames), `chunk` frames per call.
    func renderRest(channels: Int, chunk: Int = 1000, limit: Int = 10_000_000) throws -> [Float] {
        var result: [Float] = []
        var scratch = [Float](repeating: 0, count: chunk * channels)
        while result.count / channels < limit {
            let n = try scratch.withUnsafeMutableBytes { bytes in
                try offlineRender(at: offlineRenderPosition, into: bytes, frames: chunk)
            }
            if n == 0 { break }
            result += scratch[0..<(n * channels)]
        }
        return result
    }
}

/// Collects events from a queue's stream on a background task.
final class Locked<Value: Sendable>: @unchecked Sendable {
    private let mutex: BufferQueue.Lock<Value>
    init(_ value: Value) { mutex = BufferQueue.Lock(value) }
    func withLock<R>(_ body: (inout Value) -> R) -> R { mutex.withLock { body(&$0) } }
    var value: Value { mutex.withLock { $0 } }
}

final class EventLog: Sendable {
    private let events = Watched<[AudioQueueEvent]>([])
    /// True once the queue's event stream has finished (the queue was disposed of).
    let finished = Watched(false)
    private let task: Task<Void, Never>

    init(_ queue: AudioQueue) {
        let stream = queue.events()
        let events = self.events, finished = self.finished
        task = Task {
            for await event in stream { events.update { $0.append(event) } }
            finished.update { $0 = true }
        }
    }

    var all: [AudioQueueEvent] { events.current }
    var returnedIDs: [Int] { Self.returnedIDs(all) }
    var runningChanges: [Bool] { Self.runningChanges(all) }
    var errors: [AudioQueueError] {
        all.compactMap { if case .error(let e) = $0 { return e } else { return nil } }
    }

    static func returnedIDs(_ events: [AudioQueueEvent]) -> [Int] {
        events.compactMap { if case .bufferReturned(let b) = $0 { return b.id } else { return nil } }
    }
    static func runningChanges(_ events: [AudioQueueEvent]) -> [Bool] {
        events.compactMap { if case .runningChanged(let r) = $0 { return r } else { return nil } }
    }

    /// Waits until `condition` holds for the events so far; woken by each new event, bounded.
    func wait(seconds: Double = 10, until condition: @escaping @Sendable ([AudioQueueEvent]) -> Bool) async -> Bool {
        await events.wait(timeout: .milliseconds(Int(seconds * 1000)), until: condition)
    }

    /// Waits until the running changes are exactly `changes`.
    func waitForRunning(_ changes: [Bool], seconds: Double = 10) async -> Bool {
        await wait(seconds: seconds) { Self.runningChanges($0) == changes }
    }

    /// Waits until `count` buffers have come back.
    func waitForReturned(_ count: Int, seconds: Double = 10) async -> Bool {
        await wait(seconds: seconds) { Self.returnedIDs($0).count >= count }
    }

    /// Waits until the queue is disposed of (its event stream finished).
    func waitUntilFinished(seconds: Double = 10) async -> Bool {
        await finished.wait(timeout: .milliseconds(Int(seconds * 1000))) { $0 }
    }
}

func expectError(_ code: AudioQueueError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void) {
    do {
        try body()
        Issue.record("expected \(code), got no error", sourceLocation: sourceLocation)
    } catch let error as AudioQueueError {
        #expect(error.code == code, "got \(error)", sourceLocation: sourceLocation)
        #expect(!error.message.isEmpty, sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected AudioQueueError \(code), got \(error)", sourceLocation: sourceLocation)
    }
}

/// A sink driven by the test: it records what the queue asks of it, can be told to fail, renders
/// only when the test pulls, and keeps drain completions for the test to run. Like a real sink it
/// keeps the one-reader contract: `pause()` and `close()` wait for a pull in progress.
final class ScriptedSink: AudioSink, @unchecked Sendable {
    struct Calls: Sendable, Equatable {
        var opens = 0, starts = 0, pauses = 0, flushes = 0, closes = 0, drains = 0
        var layouts: [AudioChannelLayout] = []
        var formats: [AudioStreamDescription] = []
    }
    let calls = Watched(Calls())
    /// Fail the next N opens / starts.
    let failOpens = Locked(0)
    let failStarts = Locked(0)
    /// Whether the sink reports playback start itself (like PulseAudio).
    let reports: Bool
    /// Signalled when `pause()` has been asked for (before it waits for a pull in progress).
    let pauseRequested = Watched(0)
    private let renderLock = NSLock()
    private var source: AudioRenderSource?
    private var channels = 2
    private var active = false
    private let drainCompletions = Locked([@Sendable () -> Void]())

    init(reportsPlaybackStart: Bool = false) { reports = reportsPlaybackStart }

    var reportsPlaybackStart: Bool { reports }
    var latencyFrames: Int { 0 }

    func open(format: AudioStreamDescription, source: AudioRenderSource) throws {
        try open(format: format, channelLayout: .default(channels: format.channelsPerFrame), source: source)
    }

    func open(format: AudioStreamDescription, channelLayout: AudioChannelLayout, source: AudioRenderSource) throws {
        let fail = failOpens.withLock { n -> Bool in defer { n = max(n - 1, 0) }; return n > 0 }
        calls.update { $0.opens += 1; $0.layouts.append(channelLayout); $0.formats.append(format) }
        if fail { throw AudioQueueError(.cannotStart, "scripted open failure") }
        renderLock.withLock { self.source = source; channels = format.channelsPerFrame }
    }

    func start() throws {
        let fail = failStarts.withLock { n -> Bool in defer { n = max(n - 1, 0) }; return n > 0 }
        calls.update { $0.starts += 1 }
        if fail { throw AudioQueueError(.cannotStart, "scripted start failure") }
        renderLock.withLock { active = true }
    }

    func pause() {
        pauseRequested.update { $0 += 1 }
        renderLock.withLock { active = false }
        calls.update { $0.pauses += 1 }
    }

    func flush() { calls.update { $0.flushes += 1 } }

    func drain(_ completion: @escaping @Sendable () -> Void) {
        drainCompletions.withLock { $0.append(completion) }
        calls.update { $0.drains += 1 }
    }

    func close() {
        renderLock.withLock { active = false; source = nil }
        calls.update { $0.closes += 1 }
    }

    /// Renders `frames` frames as the sink's thread would; returns the frames of queue audio.
    func pull(frames: Int, fillSilence: Bool = true) -> Int {
        renderLock.withLock {
            guard active, let source else { return 0 }
            var out = [Float](repeating: 0, count: frames * channels)
            return out.withUnsafeMutableBufferPointer { $0.baseAddress.map { source.render(into: $0, frames: frames, fillSilence: fillSilence) } ?? 0 }
        }
    }

    /// Renders `frames` frames as the sink's thread would and returns them (silence filled).
    func pullSamples(frames: Int) -> [Float] {
        renderLock.withLock {
            guard active, let source else { return [] }
            var out = [Float](repeating: 0, count: frames * channels)
            _ = out.withUnsafeMutableBufferPointer { $0.baseAddress.map { source.render(into: $0, frames: frames, fillSilence: true) } ?? 0 }
            return out
        }
    }

    /// Reports that playback really began.
    func reportHeard() { renderLock.withLock { source }?.reportPlaybackStarted() }

    /// Runs the drain completion number `index` (0 = the first drain asked for).
    func completeDrain(_ index: Int) {
        let completion = drainCompletions.withLock { $0.indices.contains(index) ? $0[index] : nil }
        completion?()
    }
}
