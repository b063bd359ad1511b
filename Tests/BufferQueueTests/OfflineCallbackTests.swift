#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Testing
@testable import BufferQueue

/// ``AudioQueue/OfflineCallbackDelivery/beforeReturning``: the buffers an offline render finishes
/// with are handed back on the rendering thread before the call returns, in order, and a
/// callback that enqueues or renders from there neither deadlocks nor reorders anything.
@Suite struct OfflineCallbackTests {
    static let format = AudioStreamDescription.float32(sampleRate: 44100, channels: 2)

    /// What the callback saw: the buffer and whether it ran on the rendering thread.
    struct Returned: Sendable { let id: Int; let onRenderingThread: Bool }

    @Test(.timeLimit(.minutes(1)))
    func buffersComeBackOnTheRenderingThreadBeforeTheCallReturns() async throws {
        let outcome = try await onOwnThread { () throws -> (returned: [Returned], consistent: Bool, ids: [Int], output: [Float], expected: [Float]) in
            let renderingThread = pthread_self()
            let returned = Locked<[Returned]>([])
            let queue = try AudioQueue(format: Self.format, configuration: .init(decodeBufferFrames: 2048, offlineCallbacks: .beforeReturning)) { _, buffer in
                let here = pthread_equal(pthread_self(), renderingThread) != 0
                returned.withLock { $0.append(Returned(id: buffer.id, onRenderingThread: here)) }
            }
            var buffers: [AudioQueueBuffer] = []
            var expected: [Float] = []
            for b in 0..<6 {
                let part = ramp(frames: 1000, channels: 2, offset: 1 + b * 1000)
                let buffer = try queue.makeBuffer(part)
                try queue.enqueue(buffer)
                buffers.append(buffer)
                expected += part
            }
            try queue.setOfflineRenderFormat(Self.format)
            var output: [Float] = []
            var consistent = true
            var scratch = [Float](repeating: 0, count: 1500 * 2)
            while true {
                let n = try scratch.withUnsafeMutableBytes { try queue.offlineRender(at: queue.offlineRenderPosition, into: $0, frames: 1500) }
                // No waiting: a buffer out of the queue has had its callback by now, and only those.
                let called = Set(returned.value.map(\.id))
                consistent = consistent && buffers.allSatisfy { $0.isInQueue != called.contains($0.id) }
                if n == 0 { break }
                output += scratch[0..<(n * 2)]
            }
            queue.dispose(immediately: true)
            return (returned.value, consistent, buffers.map(\.id), output, expected)
        }
        #expect(outcome.returned.map(\.id) == outcome.ids, "every buffer once, in the order enqueued")
        let elsewhere = outcome.returned.filter { !$0.onRenderingThread }.count
        #expect(elsewhere == 0, "\(elsewhere) callbacks ran on another thread")
        #expect(outcome.consistent, "a buffer was out of the queue without its callback having run (or the reverse)")
        #expect(outcome.output.count == outcome.expected.count)
        #expect(outcome.output == outcome.expected, "the rendered frames differ from those enqueued")
    }

    /// Apple's pattern on one thread: the callback refills the buffer it gets and enqueues it again;
    /// one of the callbacks also renders from inside itself (the buffers that render finishes with
    /// are handed back after that callback, not inside it). Everything arrives once, and the
    /// frames are exact and in order.
    @Test(.timeLimit(.minutes(1)))
    func aCallbackEnqueuesAndRendersWithoutDeadlock() async throws {
        struct Outcome: Sendable { let output: [Float]; let expected: [Float]; let order: [Int]; let nested: Int; let maximumDepth: Int }
        let outcome = try await onOwnThread { () throws -> Outcome in
            let total = 40, framesPerBuffer = 700
            let state = Locked((next: 0, order: [Int](), nested: 0, depth: 0, maximumDepth: 0))
            let parts = (0..<total).map { ramp(frames: framesPerBuffer, channels: 2, offset: 1 + $0 * framesPerBuffer) }
            let nestedOutput = Locked<[Float]>([])
            let queue = try AudioQueue(format: Self.format, configuration: .init(decodeBufferFrames: 1024, offlineCallbacks: .beforeReturning)) { queue, buffer in
                let (index, depth) = state.withLock { s -> (Int?, Int) in
                    s.order.append(buffer.id)
                    s.depth += 1
                    s.maximumDepth = max(s.maximumDepth, s.depth)
                    defer { s.next += 1 }
                    return (s.next < total ? s.next : nil, s.depth)
                }
                defer { state.withLock { $0.depth -= 1 } }
                if let index {
                    do {
                        try parts[index].withUnsafeBytes { try buffer.setData($0) }
                        try queue.enqueue(buffer)
                    } catch {
                        state.withLock { $0.order.append(-1) }   // counted as a failure below
                    }
                }
                // Once, a render from inside the callback: its own returns come after this callback.
                if index == 10 && depth == 1 {
                    var scratch = [Float](repeating: 0, count: 500 * 2)
                    let n = (try? scratch.withUnsafeMutableBytes { try queue.offlineRender(at: queue.offlineRenderPosition, into: $0, frames: 500) }) ?? 0
                    nestedOutput.withLock { $0 += scratch[0..<(n * 2)] }
                    state.withLock { $0.nested += n }
                }
            }
            // Three buffers circulate, filled first by hand as the callback fills them later.
            for _ in 0..<3 {
                let buffer = try queue.allocateBuffer(capacity: framesPerBuffer * 8)
                let index = state.withLock { s in defer { s.next += 1 }; return s.next }
                try parts[index].withUnsafeBytes { try buffer.setData($0) }
                try queue.enqueue(buffer)
            }
            try queue.setOfflineRenderFormat(Self.format)
            var output: [Float] = []
            var scratch = [Float](repeating: 0, count: 900 * 2)
            while true {
                let before = state.value.nested
                let n = try scratch.withUnsafeMutableBytes { try queue.offlineRender(at: queue.offlineRenderPosition, into: $0, frames: 900) }
                // The frames a nested render took sit between this call's and the next.
                output += scratch[0..<(n * 2)]
                if state.value.nested != before { output += nestedOutput.withLock { out in defer { out.removeAll() }; return out } }
                if n == 0 && state.value.nested == before { break }
            }
            queue.dispose(immediately: true)
            let s = state.value
            return Outcome(output: output, expected: parts.flatMap { $0 }, order: s.order, nested: s.nested, maximumDepth: s.maximumDepth)
        }
        #expect(outcome.nested > 0, "the render from inside a callback rendered nothing")
        #expect(outcome.maximumDepth == 1, "a callback ran inside another")
        #expect(outcome.order.count == 40 && !outcome.order.contains(-1), "\(outcome.order.count) callbacks, a refill failing: \(outcome.order.contains(-1))")
        #expect(outcome.output.count == outcome.expected.count)
        #expect(outcome.output == outcome.expected, "frames lost, repeated or out of order")
    }
}
