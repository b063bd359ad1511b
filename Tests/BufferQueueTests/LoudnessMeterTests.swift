import Foundation
import Testing
import TestSupport
@testable import BufferQueue

/// EBU Tech 3341 (loudness) and Tech 3342 (loudness range) minimum requirement cases, generated
/// here from their definitions: 1 kHz sines at the stated levels (dBFS of the sine's peak) and
/// durations, in every channel unless said.
@Suite(.serialized, .disabled(if: isUnderThreadSanitizer, "pure computation on one thread: the plain pass measures it"))
struct LoudnessMeterTests {
    /// `segments` of (seconds, dBFS) of a 1 kHz sine, one phase running through them, in `channels`
    /// channels (each channel's level offset by `channelOffsets` dB), interleaved.
    static func sine(_ segments: [(Double, Double)], rate: Double = 48000, channels: Int = 2,
                     channelOffsets: [Double]? = nil, frequency: Double = 1000, phase: Double = 0) -> [Float] {
        // The sine repeats every rate / gcd(rate, frequency) frames: one period is computed per
        // segment and tiled (a debug build computing every sample would dominate the suite).
        func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? a : gcd(b, a % b) }
        let period = Int(rate) / gcd(Int(rate), Int(frequency))
        var out: [Float] = []
        var n = 0
        for (seconds, level) in segments {
            let frames = Int((seconds * rate).rounded())
            var table: [Float] = []
            table.reserveCapacity(period * channels)
            for i in 0..<period {
                let value = sin(2 * Double.pi * frequency * Double(i) / rate + phase)
                for c in 0..<channels { table.append(Float(pow(10, (level + (channelOffsets?[c] ?? 0)) / 20) * value)) }
            }
            out.reserveCapacity(out.count + frames * channels)
            var left = frames
            while left > 0 {
                let at = n % period, count = min(period - at, left)
                out.append(contentsOf: table[(at * channels)..<((at + count) * channels)])
                n += count
                left -= count
            }
        }
        return out
    }

    /// On a thread of its own: seconds of computation in a debug build would hold a thread of
    /// the cooperative pool (two on a two-core machine) and starve other suites' waits.
    static func measure(_ samples: [Float], rate: Double = 48000, channels: Int = 2, layout: AudioChannelLayout? = nil) async throws -> LoudnessReading {
        try await onOwnThread { try measureHere(samples, rate: rate, channels: channels, layout: layout) }
    }

    static func measureHere(_ samples: [Float], rate: Double, channels: Int, layout: AudioChannelLayout?) throws -> LoudnessReading {
        var meter = try LoudnessMeter(sampleRate: rate, channels: channels, channelLayout: layout)
        // Fed in uneven pieces: the steps must not depend on how the audio is cut.
        var at = 0, piece = 1
        while at < samples.count {
            let end = min(at + piece * channels, samples.count)
            samples[at..<end].withUnsafeBufferPointer { meter.add($0) }
            at = end
            piece = piece * 7 % 5003 + 1
        }
        return meter.reading
    }

    @Test func kWeightingAt48kHzIsTheStandardsTable() {
        let shelf = KFilter.highShelf(sampleRate: 48000), highPass = KFilter.highPass(sampleRate: 48000)
        let expected = [1.53512485958697, -2.69169618940638, 1.19839281085285, -1.69065929318241, 0.73248077421585]
        let got = [shelf.b0, shelf.b1, shelf.b2, shelf.a1, shelf.a2]
        for (g, e) in zip(got, expected) { #expect(abs(g - e) < 1e-9, "shelf \(got)") }
        #expect(abs(highPass.a1 - -1.99004745483398) < 1e-9 && abs(highPass.a2 - 0.99007225036621) < 1e-9, "\(highPass)")
        #expect(highPass.b0 == 1 && highPass.b1 == -2 && highPass.b2 == 1)
    }

    @Test(arguments: [
        // Tech 3341 cases 1–5: (segments, expected integrated LUFS)
        ([(20.0, -23.0)], -23.0),
        ([(20.0, -33.0)], -33.0),
        ([(10.0, -36.0), (60.0, -23.0), (10.0, -36.0)], -23.0),
        ([(10.0, -72.0), (10.0, -36.0), (60.0, -23.0), (10.0, -36.0), (10.0, -72.0)], -23.0),
        ([(20.0, -26.0), (20.1, -20.0), (20.0, -26.0)], -23.0),
    ])
    func tech3341(_ segments: [(Double, Double)], expected: Double) async throws {
        let reading = try await Self.measure(Self.sine(segments))
        #expect(abs(reading.integrated - expected) <= 0.1, "integrated \(reading.integrated) LUFS")
        if segments.count == 1 {
            // A steady tone: momentary and short-term equal it too.
            #expect(abs(reading.momentary - expected) <= 0.1 && abs(reading.shortTerm - expected) <= 0.1, "\(reading)")
            #expect(abs(reading.momentaryMax - expected) <= 0.1 && abs(reading.shortTermMax - expected) <= 0.1, "\(reading)")
        }
    }

    @Test func tech3341Case6FiveChannelsAreWeighted() async throws {
        // 5.0 as a WAVE file's channel mask 0x37 orders it: L R C Ls Rs at −28, −28, −24, −30, −30 dBFS.
        let layout = try #require(AudioChannelLayout(waveChannelMask: 0x37, channels: 5))
        let samples = Self.sine([(20, 0)], channels: 5, channelOffsets: [-28, -28, -24, -30, -30])
        let reading = try await Self.measure(samples, channels: 5, layout: layout)
        #expect(abs(reading.integrated - -23) <= 0.1, "integrated \(reading.integrated) LUFS")
        // The LFE counts for nothing: the same with an LFE channel of a loud tone added.
        let lfeLayout = AudioChannelLayout(channelLabels: [.left, .right, .center, .lfeScreen, .leftSurround, .rightSurround])
        let withLFE = Self.sine([(20, 0)], channels: 6, channelOffsets: [-28, -28, -24, -6, -30, -30])
        let lfeReading = try await Self.measure(withLFE, channels: 6, layout: lfeLayout)
        #expect(abs(lfeReading.integrated - reading.integrated) < 0.001, "\(lfeReading.integrated) with an LFE, \(reading.integrated) without")
    }

    @Test(arguments: [
        // Tech 3342 cases 1–4: (segments, expected range LU)
        ([(20.0, -20.0), (20.0, -30.0)], 10.0),
        ([(20.0, -20.0), (20.0, -15.0)], 5.0),
        ([(20.0, -40.0), (20.0, -20.0)], 20.0),
        ([(20.0, -50.0), (20.0, -35.0), (20.0, -20.0), (20.0, -35.0), (20.0, -50.0)], 15.0),
    ])
    func tech3342(_ segments: [(Double, Double)], expected: Double) async throws {
        let reading = try await Self.measure(Self.sine(segments))
        #expect(abs(reading.range - expected) <= 1, "range \(reading.range) LU")
    }

    @Test func otherRatesAndMono() async throws {
        for rate in [22050.0, 44100, 96000] {
            let reading = try await Self.measure(Self.sine([(10, -23)], rate: rate), rate: rate)
            #expect(abs(reading.integrated - -23) <= 0.1, "\(rate) Hz: \(reading.integrated) LUFS")
        }
        // One channel of weight 1: 3 dB below the same tone in both channels of a stereo pair.
        let mono = try await Self.measure(Self.sine([(10, -23)], channels: 1), channels: 1)
        #expect(abs(mono.integrated - (-23 - 10 * log10(2.0))) <= 0.1, "mono \(mono.integrated) LUFS")
    }

    @Test func truePeakFindsThePeakBetweenSamples() async throws {
        // A quarter of the rate at 45°: every sample at 0.707 of the sine's peak, which lies between them.
        let samples = Self.sine([(2, -6)], frequency: 12000, phase: Double.pi / 4)
        let reading = try await Self.measure(samples)
        #expect(abs(reading.samplePeak - (-6 - 20 * log10(2.0.squareRoot()))) < 0.01, "sample peak \(reading.samplePeak)")
        #expect(abs(reading.truePeak - -6) < 0.2, "true peak \(reading.truePeak) dBTP")
        // At 192 kHz no oversampling is needed: the true peak is the sample peak.
        let high = try await Self.measure(Self.sine([(1, -6)], rate: 192000), rate: 192000)
        #expect(high.truePeak == high.samplePeak)
    }

    @Test func silenceAndTooLittleAudioReadMinusInfinity() async throws {
        let silent = try await Self.measure([Float](repeating: 0, count: 48000 * 2 * 5))
        #expect(silent.integrated == -.infinity && silent.momentaryMax == -.infinity && silent.samplePeak == -.infinity)
        #expect(silent.range == 0)
        let short = try await Self.measure(Self.sine([(0.3, -10)]))
        #expect(short.integrated == -.infinity && short.momentary == -.infinity, "300 ms is less than a block")
        #expect(short.samplePeak > -10.1, "peaks count from the first sample")
    }

    @Test func badParametersAreRefused() {
        #expect(throws: AudioQueueError.self) { try LoudnessMeter(sampleRate: 0, channels: 2) }
        #expect(throws: AudioQueueError.self) { try LoudnessMeter(sampleRate: 48000, channels: 0) }
        #expect(throws: AudioQueueError.self) { try LoudnessMeter(sampleRate: 48000, channels: 2, channelLayout: .mono) }
    }
}

/// The live meter on a playing queue: what it publishes is the meter of the frames played.
@Suite struct LoudnessMonitorTests {
    /// A meter fed `samples` up to the last whole 100 ms step (what the monitor has published then).
    static func expected(_ samples: [Float], rate: Double, channels: Int) throws -> LoudnessReading {
        var meter = try LoudnessMeter(sampleRate: rate, channels: channels)
        let step = (Int(rate) + 5) / 10
        let whole = samples.count / channels / step * step * channels
        meter.add(Array(samples.prefix(whole)))
        return meter.reading
    }

    static func close(_ a: LoudnessReading, _ b: LoudnessReading) -> Bool {
        let pairs = [(a.integrated, b.integrated), (a.range, b.range), (a.truePeak, b.truePeak), (a.samplePeak, b.samplePeak),
                     (a.momentaryMax, b.momentaryMax), (a.shortTermMax, b.shortTermMax), (a.momentary, b.momentary), (a.shortTerm, b.shortTerm)]
        return pairs.allSatisfy { $0 == $1 || abs($0 - $1) < 1e-6 }
    }

    @Test func aPlayingQueueIsMeteredFrameByFrame() async throws {
        let rate = 44100.0
        let sink = NullSink(pacing: .unpaced, capturing: true)
        let queue = try AudioQueue(format: .float32(sampleRate: rate, channels: 2), configuration: .init(sink: sink))
        defer { queue.dispose(immediately: true) }
        let monitor = try queue.installLoudnessMeter()
        #expect(monitor.reading == .silent, "nothing played yet")
        let first = LoudnessMeterTests.sine([(2, -20), (3.05, -12)], rate: rate)
        try queue.enqueue(try queue.makeBuffer(first))
        let events = EventLog(queue)
        try queue.start()
        try queue.stop(immediately: false)
        #expect(await events.waitForRunning([true, false]))
        let heard = monitor.reading
        let reference = try Self.expected(first, rate: rate, channels: 2)
        #expect(Self.close(heard, reference), "published \(heard), measured \(reference)")
        #expect(abs(heard.integrated - -13.6) < 1, "\(heard.integrated)")

        // A reset: the next programme is measured on its own.
        monitor.reset()
        let second = LoudnessMeterTests.sine([(4, -30)], rate: rate)
        try queue.enqueue(try queue.makeBuffer(second))
        try queue.start()
        try queue.stop(immediately: false)
        #expect(await events.waitForRunning([true, false, true, false]))
        let again = monitor.reading
        let secondReference = try Self.expected(second, rate: rate, channels: 2)
        #expect(Self.close(again, secondReference), "published \(again), measured \(secondReference)")
        #expect(abs(again.integrated - -30) < 0.1)
    }
}
