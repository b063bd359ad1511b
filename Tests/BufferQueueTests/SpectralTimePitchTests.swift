import Foundation
import RubberBandTimePitch
import Testing
@testable import BufferQueue

/// The spectral algorithm on Rubber Band: rate and pitch independent, exact lengths, bit-exact
/// until first used. Heavy bodies run on threads of their own, one test at a time.
@Suite(.serialized) struct SpectralTimePitchTests {
    static let engines: TimePitchEngineRegistry = {
        let registry = TimePitchEngineRegistry()
        RubberBandTimePitch.register(in: registry)
        return registry
    }()

    func queue(rate: Double = 44100, channels: Int = 2) throws -> AudioQueue {
        let queue = try AudioQueue(format: .float32(sampleRate: rate, channels: channels),
                                   configuration: .init(timePitchRegistry: Self.engines))
        try queue.setTimePitch(.spectral)
        try queue.setOfflineRenderFormat(.float32(sampleRate: rate, channels: channels))
        return queue
    }

    @Test func withoutAnEngineSpectralIsRefused() throws {
        let q = try AudioQueue(format: .float32(sampleRate: 44100, channels: 2),
                               configuration: .init(timePitchRegistry: TimePitchEngineRegistry()))
        expectError(.codecNotFound) { try q.setTimePitch(.spectral) }
        #expect(q.timePitchAlgorithm == nil)
    }

    /// N source frames at rate r make exactly round(N / r) output frames; the whole source is
    /// reported heard at the end.
    @Test(arguments: [0.5, 1.5, 2.0])
    func lengthIsSourceOverRate(rate: Double) async throws {
        try await onOwnThread { [self] in
            let frames = 2 * 44100 + 17
            let q = try queue()
            try q.setParameters(.init(playRate: Float(rate)))
            try q.enqueue(try q.makeBuffer(sineWave(440, rate: 44100, frames: frames, channels: 2)))
            try q.flush()
            let output = try q.renderRest(channels: 2, chunk: 4096)
            #expect(output.count / 2 == Int((Double(frames) / rate).rounded()))
            #expect(q.offlineRenderPosition == Int64(output.count / 2))
            #expect(q.currentTime().sampleTime == Int64(frames))
        }
    }

    /// Rate and pitch are independent: the frequency of a 440 Hz sine is 440 × 2^(cents/1200)
    /// (within 0.5 %) whatever the rate, and the length follows the rate alone.
    @Test(arguments: [(1.5, 0.0), (1.0, 1200.0), (0.75, -500.0), (2.0, 700.0)])
    func pitchAndRateAreIndependent(rate: Double, cents: Double) async throws {
        try await onOwnThread { [self] in
            let q = try queue(channels: 1)
            try q.setParameters(.init(playRate: Float(rate), pitch: Float(cents)))
            let frames = 2 * 44100
            try q.enqueue(try q.makeBuffer(sineWave(440, rate: 44100, frames: frames, channels: 1)))
            try q.flush()
            let output = try q.renderRest(channels: 1, chunk: 4096)
            #expect(output.count == Int((Double(frames) / rate).rounded()))
            let middle = output[(output.count / 4)..<(output.count * 3 / 4)]
            let f = sineFrequency(middle, channels: 1, rate: 44100)
            let wanted = 440 * pow(2, cents / 1200)
            #expect(abs(f - wanted) <= wanted * 0.005, "frequency \(f) Hz for \(wanted) at rate \(rate), \(cents) cents")
        }
    }

    /// Before the rate or pitch first changes, and while bypassed, the input comes out bit for bit.
    @Test func untouchedAndBypassedAreBitExact() async throws {
        try await onOwnThread { [self] in
            let input = sineWave(440, rate: 44100, frames: 30000, channels: 2)
            let plain = try queue()
            try plain.enqueue(try plain.makeBuffer(input))
            try plain.flush()
            #expect(try plain.renderRest(channels: 2, chunk: 4096) == input)
            let bypassed = try queue()
            try bypassed.setParameters(.init(playRate: 2, pitch: 300))
            bypassed.isTimePitchBypassed = true
            try bypassed.enqueue(try bypassed.makeBuffer(input))
            try bypassed.flush()
            #expect(try bypassed.renderRest(channels: 2, chunk: 4096) == input)
        }
    }

    /// Per-buffer rates: the engine takes over at the first buffer with its own rate, primed with
    /// what came before (no step larger than the signal's own), and the lengths add up exactly.
    @Test func perBufferRatesEnterSmoothlyAndAddUp() async throws {
        try await onOwnThread { [self] in
            let q = try queue()
            let rates: [Float] = [1, 1.5, 0.75, 2, 1, 1.25]
            let piece = 8820
            let input = sineWave(440, rate: 44100, frames: piece * rates.count, channels: 2)
            try q.enqueue(try q.makeBuffer(Array(input[0..<(piece * 2)])))
            var owed = 0.0
            for k in 1..<rates.count {
                let samples = Array(input[(k * piece * 2)..<((k + 1) * piece * 2)])
                try q.enqueue(try q.makeBuffer(samples), parameters: .init(playRate: rates[k]))
                owed += Double(piece) / Double(rates[k])
            }
            try q.flush()
            let output = try q.renderRest(channels: 2, chunk: 777)
            // The first buffer is copied; the rest owes its frames over its rates, rounded once.
            #expect(output.count / 2 == piece + Int(owed.rounded()))
            #expect(Array(output[0..<(piece * 2)]) == Array(input[0..<(piece * 2)]))
            #expect(largestStep(output, channels: 2) <= largestStep(input, channels: 2) * 1.1)
            #expect(q.currentTime().sampleTime == Int64(piece * rates.count))
        }
    }

    /// Rate and pitch set while rendering glide in: no step larger than the signal's own (its
    /// steps grow with the pitch), and the rest of the source takes its length from the new rate.
    @Test func changesWhileRenderingDoNotClick() async throws {
        try await onOwnThread { [self] in
            let q = try queue(channels: 1)
            let frames = 3 * 44100
            let input = sineWave(440, rate: 44100, frames: frames, channels: 1)
            try q.setParameters(.init(playRate: 1.25))
            try q.enqueue(try q.makeBuffer(input))
            try q.flush()
            var first = [Float](repeating: 0, count: 30000)
            let n = try first.withUnsafeMutableBytes { try q.offlineRender(at: 0, into: $0, frames: 30000) }
            #expect(n == 30000)
            try q.setParameters(.init(playRate: 0.8, pitch: 300))
            let rest = try q.renderRest(channels: 1, chunk: 1000)
            let output = first + rest
            let raised = Float(pow(2, 300.0 / 1200))
            #expect(largestStep(output, channels: 1) <= largestStep(input, channels: 1) * raised * 1.1)
            let f = sineFrequency(rest[(rest.count / 2)..<(rest.count / 2 + 22050)], channels: 1, rate: 44100)
            #expect(abs(f - 440 * Double(raised)) <= 440 * Double(raised) * 0.005, "frequency \(f) Hz after the change")
            #expect(q.currentTime().sampleTime == Int64(frames))
        }
    }
}
