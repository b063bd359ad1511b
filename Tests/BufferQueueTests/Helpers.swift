import Dispatch
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

extension AudioQueue {
    /// A buffer holding `samples` as native float32.
    func makeBuffer(_ samples: [Float]) throws -> AudioQueueBuffer {
        let buffer = try allocateBuffer(capacity: max(samples.count * 4, 1))
        try samples.withUnsafeBytes { try buffer.setData($0) }
        return buffer
    }

    /// Renders offline in float32 until nothing more comes (or `limit` frames).
    func renderAllOffline(chunk: Int = 1000, limit: Int = 10_000_000) throws -> [Float] {
        let format = AudioStreamDescription.float32(sampleRate: outputFormat.sampleRate, channels: outputFormat.channelsPerFrame)
        try setOfflineRenderFormat(format)
        var result: [Float] = []
        var scratch = [Float](repeating: 0, count: chunk * format.channelsPerFrame)
        while result.count / format.channelsPerFrame < limit {
            let n = try scratch.withUnsafeMutableBytes { bytes in
                try offlineRender(at: offlineRenderPosition, into: bytes, frames: chunk)
            }
            if n == 0 { break }
            result += scratch[0..<(n * format.channelsPerFrame)]
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
    private let events = Locked<[AudioQueueEvent]>([])
    private let task: Task<Void, Never>

    init(_ queue: AudioQueue) {
        let stream = queue.events()
        let events = self.events
        task = Task { for await event in stream { events.withLock { $0.append(event) } } }
    }

    var all: [AudioQueueEvent] { events.value }
    var returnedIDs: [Int] {
        all.compactMap { if case .bufferReturned(let b) = $0 { return b.id } else { return nil } }
    }
    var runningChanges: [Bool] {
        all.compactMap { if case .runningChanged(let r) = $0 { return r } else { return nil } }
    }
    var errors: [AudioQueueError] {
        all.compactMap { if case .error(let e) = $0 { return e } else { return nil } }
    }

    /// Waits (polling, bounded) until `condition` holds.
    func wait(seconds: Double = 5, until condition: ([AudioQueueEvent]) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            if condition(all) { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return condition(all)
    }
}

/// Polls a condition for up to `seconds`.
func eventually(seconds: Double = 5, _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return condition()
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

