import Foundation
import TestSupport
import Testing
@testable import BufferQueue

func sineWave(_ frequency: Double, rate: Double, frames: Int, channels: Int = 1, amplitude: Double = 0.5) -> [Float] {
    var samples = [Float](repeating: 0, count: frames * channels)
    for i in 0..<frames {
        let v = Float(amplitude * sin(2 * Double.pi * frequency * Double(i) / rate))
        for c in 0..<channels { samples[i * channels + c] = v }
    }
    return samples
}

/// The frequency of a sine in channel 0 from its rising zero crossings (interpolated between
/// samples): periods counted over the time between the first and the last crossing.
func sineFrequency(_ samples: ArraySlice<Float>, channels: Int, rate: Double) -> Double {
    var crossings: [Double] = []
    var previous = samples[samples.startIndex]
    var index = samples.startIndex + channels
    var frame = 1
    while index < samples.endIndex {
        let current = samples[index]
        if previous < 0 && current >= 0 {
            crossings.append(Double(frame - 1) + Double(-previous / (current - previous)))
        }
        previous = current
        index += channels
        frame += 1
    }
    guard let first = crossings.first, let last = crossings.last, crossings.count > 1 else { return 0 }
    return Double(crossings.count - 1) / ((last - first) / rate)
}

/// The largest difference between neighbouring samples of one channel.
func largestStep(_ samples: [Float], channels: Int, channel: Int = 0) -> Float {
    var largest: Float = 0
    var i = channel + channels
    while i < samples.count {
        largest = max(largest, abs(samples[i] - samples[i - channels]))
        i += channels
    }
    return largest
}

/// Heavy work runs on threads of its own, one test at a time, not on Swift's cooperative pool, so that the suites
/// that wait on events meanwhile keep getting a thread.
@Suite(.serialized) struct TimePitchTests {
    func queue(rate: Double = 44100, channels: Int = 2, algorithm: TimePitchAlgorithm = .timeDomain) throws -> AudioQueue {
        let queue = try AudioQueue(format: .float32(sampleRate: rate, channels: channels))
        try queue.setTimePitch(algorithm)
        try queue.setOfflineRenderFormat(.float32(sampleRate: rate, channels: channels))
        return queue
    }

    @Test func rateOneAndBypassAreBitExact() async throws {
        try await onOwnThread { [self] in
            let input = sineWave(440, rate: 44100, frames: 30000, channels: 2)
            let plain = try queue()
            try plain.enqueue(try plain.makeBuffer(input))
            try plain.flush()
            #expect(try plain.renderRest(channels: 2, chunk: 4096) == input)
            let bypassed = try queue()
            try bypassed.setParameters(.init(playRate: 2))
            bypassed.isTimePitchBypassed = true
            try bypassed.enqueue(try bypassed.makeBuffer(input))
            try bypassed.flush()
            #expect(try bypassed.renderRest(channels: 2, chunk: 4096) == input)
        }
    }

    /// N source frames at rate r make N / r output frames, and the source position reported is
    /// the whole source once everything is out.
    @Test(arguments: [0.25, 0.5, 0.75, 1.5, 2.0, 4.0])
    func lengthIsSourceOverRate(rate: Double) async throws {
        try await onOwnThread { [self] in
            let frames = 3 * 44100 + 17
            let q = try queue()
            try q.setParameters(.init(playRate: Float(rate)))
            try q.enqueue(try q.makeBuffer(sineWave(440, rate: 44100, frames: frames, channels: 2)))
            try q.flush()
            let output = try q.renderRest(channels: 2, chunk: 4096)
            let expected = Int((Double(frames) / rate).rounded())
            #expect(abs(output.count / 2 - expected) <= 1, "\(output.count / 2) frames for \(expected)")
            #expect(q.offlineRenderPosition == Int64(output.count / 2))
            #expect(q.currentTime().sampleTime == Int64(frames))
        }
    }

    /// The pitch stays: a 440 Hz sine played faster or slower is still 440 Hz (within 0.5 %),
    /// and joins without steps larger than the sine's own.
    @Test(arguments: [0.75, 1.5, 2.0])
    func pitchIsKept(rate: Double) async throws {
        try await onOwnThread { [self] in
            let q = try queue(channels: 1)
            try q.setParameters(.init(playRate: Float(rate)))
            let input = sineWave(440, rate: 44100, frames: 2 * 44100, channels: 1)
            try q.enqueue(try q.makeBuffer(input))
            try q.flush()
            let output = try q.renderRest(channels: 1, chunk: 4096)
            let middle = output[(output.count / 4)..<(output.count / 4 + 22050)]
            let f = sineFrequency(middle, channels: 1, rate: 44100)
            #expect(abs(f - 440) <= 440 * 0.005, "dominant frequency \(f) Hz at rate \(rate)")
            #expect(largestStep(output, channels: 1) <= largestStep(input, channels: 1) * 1.05)
        }
    }

    /// Per-buffer rates change mid-stream without a step, and the length is the sum of each
    /// buffer's frames over its rate, within one hop of the algorithm.
    @Test func perBufferRatesJoinSmoothlyAndAddUp() async throws {
        try await onOwnThread { [self] in
            let q = try queue()
            let rates: [Float] = [1, 1.5, 0.75, 2, 1, 0.5, 1.25]
            let input = sineWave(440, rate: 44100, frames: 4410 * rates.count, channels: 2)
            var expected = 0.0
            for (k, rate) in rates.enumerated() {
                let piece = Array(input[(k * 4410 * 2)..<((k + 1) * 4410 * 2)])
                try q.enqueue(try q.makeBuffer(piece), parameters: .init(playRate: rate))
                expected += 4410 / Double(rate)
            }
            try q.flush()
            let output = try q.renderRest(channels: 2, chunk: 777)
            let hop = 662
            #expect(abs(Double(output.count / 2) - expected) <= Double(hop), "\(output.count / 2) frames for \(expected)")
            #expect(largestStep(output, channels: 2) <= largestStep(input, channels: 2) * 1.05)
        }
    }

    /// Ten minutes at 8 kHz with the rate changing every second: no drift.
    @Test func tenMinutesOfRateChangesDoNotDrift() async throws {
        try await onOwnThread { [self] in
            let q = try queue(rate: 8000, channels: 1)
            let second = sineWave(300, rate: 8000, frames: 8000, channels: 1)
            let rates: [Float] = [1.5, 0.8, 1, 2, 0.6, 1.1]
            var expected = 0.0
            var output = 0
            var scratch = [Float](repeating: 0, count: 8192)
            for k in 0..<600 {
                let rate = rates[k % rates.count]
                try q.enqueue(try q.makeBuffer(second), parameters: .init(playRate: rate))
                expected += 8000 / Double(rate)
                while true {
                    let n = try scratch.withUnsafeMutableBytes { try q.offlineRender(at: q.offlineRenderPosition, into: $0, frames: 8192) }
                    if n == 0 { break }
                    output += n
                }
            }
            try q.flush()
            while true {
                let n = try scratch.withUnsafeMutableBytes { try q.offlineRender(at: q.offlineRenderPosition, into: $0, frames: 8192) }
                if n == 0 { break }
                output += n
            }
            #expect(abs(Double(output) - expected) <= 120, "\(output) frames for \(expected)")   // one hop at 8 kHz
            #expect(q.currentTime().sampleTime == 600 * 8000)
        }
    }

    /// A rate set while rendering applies from there on: the output is what was rendered plus
    /// the rest of the source at the new rate.
    @Test func aRateChangeMidRenderAppliesFromThere() async throws {
        try await onOwnThread { [self] in
            let q = try queue()
            let frames = 4 * 44100
            try q.setParameters(.init(playRate: 1.5))
            try q.enqueue(try q.makeBuffer(sineWave(440, rate: 44100, frames: frames, channels: 2)))
            try q.flush()
            var scratch = [Float](repeating: 0, count: 20000 * 2)
            let first = try scratch.withUnsafeMutableBytes { try q.offlineRender(at: 0, into: $0, frames: 20000) }
            #expect(first == 20000)
            let heard = Int(q.currentTime().sampleTime)
            #expect(abs(Double(heard) - 20000 * 1.5) <= 662 * 1.5)
            try q.setParameters(.init(playRate: 0.75))
            let rest = try q.renderRest(channels: 2, chunk: 4096).count / 2
            let expected = Double(frames - heard) / 0.75
            #expect(abs(Double(rest) - expected) <= 662, "\(rest) frames after the change for \(expected)")
        }
    }

    @Test func timePitchChangesOnlyWhileNotRunning() async throws {
        let sink = NullSink(pacing: .realTime)
        let q = try AudioQueue(format: .float32(sampleRate: 44100, channels: 2), configuration: .init(sink: sink))
        try q.enqueue(try q.makeBuffer(sineWave(440, rate: 44100, frames: 44100, channels: 2)))
        try q.start()
        #expect(await sink.waitForFrames(1000))
        expectError(.invalidRunState) { try q.setTimePitch(.timeDomain) }
        try q.pause()
        try q.setTimePitch(.timeDomain)
        #expect(q.timePitchAlgorithm == .timeDomain)
        try q.stop(immediately: true)
        q.dispose(immediately: true)
        expectError(.invalidParameter) { try q.setParameters(.init(playRate: 5)) }
    }

    /// Varispeed: the pitch follows the rate, N frames make round(N / r), rate 1 is bit-exact,
    /// and per-buffer rates add up with no drift.
    @Test(arguments: [0.5, 1.5, 2.0])
    func varispeedShiftsThePitchByTheRate(rate: Double) async throws {
        try await onOwnThread { [self] in
            let q = try queue(channels: 1, algorithm: .varispeed)
            try q.setParameters(.init(playRate: Float(rate)))
            let frames = 44100 + 7
            let input = sineWave(440, rate: 44100, frames: frames, channels: 1)
            try q.enqueue(try q.makeBuffer(input))
            try q.flush()
            let output = try q.renderRest(channels: 1, chunk: 4096)
            #expect(output.count == Int((Double(frames) / rate).rounded()), "\(output.count) frames")
            let middle = output[(output.count / 4)..<(output.count * 3 / 4)]
            let f = sineFrequency(middle, channels: 1, rate: 44100)
            #expect(abs(f - 440 * rate) <= 440 * rate * 0.005, "frequency \(f) Hz at rate \(rate)")
            // Away from the ends, where the cut-off sine rings through the band-limited kernel.
            #expect(largestStep(Array(output[100..<(output.count - 100)]), channels: 1) <= largestStep(input, channels: 1) * Float(rate) * 1.05)
            #expect(q.currentTime().sampleTime == Int64(frames))
        }
    }

    @Test func varispeedAtRateOneIsBitExactAndRatesAddUp() async throws {
        try await onOwnThread { [self] in
            let plain = try queue(algorithm: .varispeed)
            let input = sineWave(440, rate: 44100, frames: 20000, channels: 2)
            try plain.enqueue(try plain.makeBuffer(input))
            try plain.flush()
            #expect(try plain.renderRest(channels: 2, chunk: 4096) == input)
            let q = try queue(rate: 8000, channels: 1, algorithm: .varispeed)
            let second = sineWave(300, rate: 8000, frames: 8000, channels: 1)
            let rates: [Float] = [1.5, 0.8, 1, 2, 0.6, 1.1]
            var expected = 0.0
            for k in 0..<60 {
                let rate = rates[k % rates.count]
                try q.enqueue(try q.makeBuffer(second), parameters: .init(playRate: rate))
                expected += 8000 / Double(rate)
            }
            try q.flush()
            let output = try q.renderRest(channels: 1, chunk: 999)
            #expect(abs(Double(output.count) - expected) <= 1, "\(output.count) frames for \(expected)")
        }
    }
}
