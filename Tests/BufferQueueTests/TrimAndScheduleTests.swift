import Testing
@testable import BufferQueue

@Suite struct TrimTests {
    let format = AudioStreamDescription.float32(sampleRate: 44100, channels: 2)

    @Test(arguments: [(0, 0), (100, 0), (0, 100), (100, 250), (999, 0), (0, 999), (500, 500)])
    func trimsWithinOneBuffer(start: Int, end: Int) throws {
        let queue = try AudioQueue(format: format)
        let input = ramp(frames: 1000, channels: 2)
        try queue.enqueue(try queue.makeBuffer(input), trimFramesAtStart: start, trimFramesAtEnd: end)
        let output = try queue.renderAllOffline(chunk: 333)
        #expect(output.count == (1000 - start - end) * 2)
        #expect(difference(output, Array(input[(start * 2)..<((1000 - end) * 2)])) == nil)
    }

    @Test func trimsSpanningBufferBoundaries() throws {
        // 2112 priming frames spread over buffers of 500 frames, 970 remainder over the last two.
        let queue = try AudioQueue(format: format)
        let input = ramp(frames: 4000, channels: 2)
        let chunks = stride(from: 0, to: 4000, by: 500).map { Array(input[($0 * 2)..<(($0 + 500) * 2)]) }
        let trims = [(500, 0), (500, 0), (500, 0), (500, 0), (112, 0), (0, 0), (0, 470), (0, 500)]
        for (chunk, trim) in zip(chunks, trims) {
            try queue.enqueue(try queue.makeBuffer(chunk), trimFramesAtStart: trim.0, trimFramesAtEnd: trim.1)
        }
        let output = try queue.renderAllOffline(chunk: 257)
        #expect(output.count / 2 == 4000 - 2112 - 970)
        #expect(difference(output, Array(input[(2112 * 2)..<(3030 * 2)])) == nil)
    }

    @Test func pcmTrimLargerThanBufferIsRejectedAtEnqueue() throws {
        let queue = try AudioQueue(format: format)
        let buffer = try queue.makeBuffer(ramp(frames: 100, channels: 2))
        expectError(.invalidTrim) { try queue.enqueue(buffer, trimFramesAtStart: 101) }
        expectError(.invalidTrim) { try queue.enqueue(buffer, trimFramesAtStart: 60, trimFramesAtEnd: 41) }
        expectError(.invalidTrim) { try queue.enqueue(buffer, trimFramesAtStart: -1) }
        #expect(!buffer.isInQueue)
        // The next buffer is untouched by the rejected one.
        let next = ramp(frames: 50, channels: 2, offset: 7)
        try queue.enqueue(try queue.makeBuffer(next))
        #expect(difference(try queue.renderAllOffline(), next) == nil)
    }

    @Test func gaplessLoopOfOneBufferIsExactAndContinuous() throws {
        let loops = 7
        let clip = ramp(frames: 1234, channels: 2)
        let refills = Locked(0)
        let queue = try AudioQueue(format: format) { queue, buffer in
            let again = refills.withLock { count -> Bool in
                count += 1
                return count < loops
            }
            if again { _ = try? queue.enqueue(buffer) }
        }
        try queue.enqueue(try queue.makeBuffer(clip))
        var output: [Float] = []
        try queue.setOfflineRenderFormat(format)
        var scratch = [Float](repeating: 0, count: 4096 * 2)
        let deadline = ContinuousClock.now + .seconds(20)
        while output.count < loops * clip.count && ContinuousClock.now < deadline {
            let n = try scratch.withUnsafeMutableBytes { try queue.offlineRender(at: queue.offlineRenderPosition, into: $0, frames: 4096) }
            if n == 0 {
                // The refill happens in the callback, on the callback queue: let it run.
                queue.waitForCallbacks()
                continue
            }
            output += scratch[0..<(n * 2)]
        }
        queue.waitForCallbacks()
        #expect(refills.value == loops)
        // Nothing beyond the loops: the last callback does not refill.
        let extra = try scratch.withUnsafeMutableBytes { try queue.offlineRender(at: queue.offlineRenderPosition, into: $0, frames: 4096) }
        #expect(extra == 0)
        #expect(output.count == loops * clip.count)
        #expect(difference(output, Array([[Float]](repeating: clip, count: loops).joined())) == nil)
    }
}

@Suite struct ScheduleTests {
    let format = AudioStreamDescription.float32(sampleRate: 8000, channels: 1)

    @Test func startTimesWithGapsPlayExactSilence() throws {
        let queue = try AudioQueue(format: format)
        let a = ramp(frames: 100, channels: 1, offset: 1)
        let b = ramp(frames: 50, channels: 1, offset: 500)
        let c = ramp(frames: 30, channels: 1, offset: 900)
        #expect(try queue.enqueue(try queue.makeBuffer(a)) == 0)
        #expect(try queue.enqueue(try queue.makeBuffer(b), startTime: 300) == 300)
        #expect(try queue.enqueue(try queue.makeBuffer(c), trimFramesAtStart: 10) == 350)
        let output = try queue.renderAllOffline(chunk: 64)
        #expect(output.count == 100 + 200 + 50 + 20)
        #expect(Array(output[0..<100]) == a)
        #expect(output[100..<300].allSatisfy { $0 == 0 })
        #expect(Array(output[300..<350]) == b)
        #expect(Array(output[350...]) == Array(c[10...]))
    }

    @Test func startTimeWithTrimCountsFromFirstUntrimmedFrame() throws {
        let queue = try AudioQueue(format: format)
        let a = ramp(frames: 100, channels: 1, offset: 3)
        #expect(try queue.enqueue(try queue.makeBuffer(a), trimFramesAtStart: 40, startTime: 25) == 25)
        let output = try queue.renderAllOffline()
        #expect(output.count == 25 + 60)
        #expect(output[0..<25].allSatisfy { $0 == 0 })
        #expect(Array(output[25...]) == Array(a[40...]))
    }

    @Test func timesMustAscend() throws {
        let queue = try AudioQueue(format: format)
        try queue.enqueue(try queue.makeBuffer(ramp(frames: 100, channels: 1)), startTime: 1000)
        let late = try queue.makeBuffer(ramp(frames: 10, channels: 1))
        expectError(.timeNotAscending) { try queue.enqueue(late, startTime: 1099) }
        expectError(.timeNotAscending) { try queue.enqueue(late, startTime: -5) }
        #expect(!late.isInQueue)
        #expect(try queue.enqueue(late, startTime: 1100) == 1100)
    }
}

import Synchronization
