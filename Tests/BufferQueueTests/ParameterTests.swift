import Testing
@testable import BufferQueue

@Suite struct ParameterTests {
    @Test func volumeScalesExactly() throws {
        let format = AudioStreamDescription.float32(sampleRate: 44100, channels: 2)
        let queue = try AudioQueue(format: format)
        let input = ramp(frames: 500, channels: 2)
        try queue.setParameters(.init(volume: 0.5))
        try queue.enqueue(try queue.makeBuffer(input))
        #expect(difference(try queue.renderAllOffline(), input.map { $0 * 0.5 }) == nil)
    }

    @Test func panIsBalance() throws {
        let format = AudioStreamDescription.float32(sampleRate: 44100, channels: 2)
        let queue = try AudioQueue(format: format)
        let input = [Float](repeating: 0.8, count: 200)
        try queue.setParameters(.init(volume: 1, pan: 0.25))
        try queue.enqueue(try queue.makeBuffer(input))
        let output = try queue.renderAllOffline()
        for i in 0..<100 {
            #expect(output[2 * i] == Float(0.8) * Float(0.75))
            #expect(output[2 * i + 1] == 0.8)
        }
        try queue.setParameters(.init(pan: -1))
        try queue.enqueue(try queue.makeBuffer(input))
        let left = try queue.renderAllOffline()
        #expect(left.count == 200)
        for i in 0..<100 { #expect(left[2 * i] == 0.8 && left[2 * i + 1] == 0) }
    }

    @Test func perBufferParametersStartWithTheirBuffer() throws {
        let format = AudioStreamDescription.float32(sampleRate: 1000, channels: 1)
        let queue = try AudioQueue(format: format)
        let ones = [Float](repeating: 1, count: 100)
        try queue.enqueue(try queue.makeBuffer(ones))
        try queue.enqueue(try queue.makeBuffer(ones), trimFramesAtStart: 10, parameters: .init(volume: 0.25), startTime: 150)
        try queue.enqueue(try queue.makeBuffer(ones), parameters: .init(volume: 1))
        let output = try queue.renderAllOffline(chunk: 37)
        #expect(output.count == 100 + 50 + 90 + 100)
        #expect(output[0..<100].allSatisfy { $0 == 1 })
        #expect(output[100..<150].allSatisfy { $0 == 0 })
        #expect(output[150..<240].allSatisfy { $0 == 0.25 })
        #expect(output[240...].allSatisfy { $0 == 1 })
    }

    /// A buffer's gain multiplies the volume from its first kept frame, at once (no ramp), and
    /// leaves the volume parameter as it is.
    @Test func aBuffersGainMultipliesTheVolumeFromItsFirstFrame() throws {
        let format = AudioStreamDescription.float32(sampleRate: 1000, channels: 1)
        let queue = try AudioQueue(format: format)
        try queue.setVolumeRampTime(0.1)
        try queue.setParameters(.init(volume: 0.8))
        let ones = [Float](repeating: 1, count: 100)
        try queue.enqueue(try queue.makeBuffer(ones))
        // A wholly trimmed buffer's gain never applies; the next one's applies at its first kept frame.
        try queue.enqueue(try queue.makeBuffer(ones), trimFramesAtStart: 30, parameters: .init(gain: 0.5))
        try queue.enqueue(try queue.makeBuffer(ones), parameters: .init(gain: 2))
        let output = try queue.renderAllOffline(chunk: 37)
        #expect(output.count == 270)
        #expect(output[0..<100].allSatisfy { $0 == Float(0.8) })
        #expect(output[100..<170].allSatisfy { $0 == Float(0.8) * Float(0.5) }, "\(Array(output[100..<110]))")
        #expect(output[170...].allSatisfy { $0 == Float(0.8) * Float(2) })
        #expect(queue.volume == 0.8)
        expectError(.invalidParameter) { try queue.setParameters(.init(gain: 17)) }
        // Set now, it applies at once too.
        try queue.setParameters(.init(gain: 0.25))
        try queue.enqueue(try queue.makeBuffer(ones))
        #expect(try queue.renderAllOffline().allSatisfy { $0 == Float(0.8) * Float(0.25) })
    }

    @Test func volumeRampIsLinearOverTheRampTime() throws {
        let format = AudioStreamDescription.float32(sampleRate: 1000, channels: 1)
        let queue = try AudioQueue(format: format)
        try queue.setVolumeRampTime(0.1)  // 100 frames
        #expect(queue.volumeRampTime == Double(Float(0.1)))
        let ones = [Float](repeating: 1, count: 300)
        try queue.enqueue(try queue.makeBuffer(ones))
        try queue.enqueue(try queue.makeBuffer(ones), parameters: .init(volume: 0))
        let output = try queue.renderAllOffline(chunk: 64)
        #expect(output.count == 600)
        #expect(output[0..<300].allSatisfy { $0 == 1 })
        for k in 0..<100 {
            let expected = 1 - Float(k + 1) / 100
            #expect(abs(output[300 + k] - expected) < 1e-5, "frame \(k)")
        }
        #expect(output[400...].allSatisfy { $0 == 0 })
    }

    @Test func invalidParametersAreErrors() throws {
        let queue = try AudioQueue(format: .float32(sampleRate: 44100, channels: 2))
        expectError(.invalidParameter) { try queue.setParameters(.init(volume: 1.5)) }
        expectError(.invalidParameter) { try queue.setParameters(.init(pan: -2)) }
        expectError(.invalidParameter) { try queue.setVolumeRampTime(-1) }
        let buffer = try queue.makeBuffer([0, 0])
        expectError(.invalidParameter) { try queue.enqueue(buffer, parameters: .init(volume: -0.1)) }
        #expect(queue.volume == 1 && queue.pan == 0)
    }

    @Test func metersMeasureKnownSignals() throws {
        let format = AudioStreamDescription.float32(sampleRate: 48000, channels: 2)
        let queue = try AudioQueue(format: format)
        queue.isLevelMeteringEnabled = true
        // Left: DC 0.5. Right: full-scale sine over whole periods (48 frames per period).
        var input = [Float](repeating: 0, count: 4800 * 2)
        for i in 0..<4800 {
            input[2 * i] = 0.5
            input[2 * i + 1] = Float(sin(2 * Double.pi * Double(i) / 48))
        }
        try queue.enqueue(try queue.makeBuffer(input))
        try queue.setOfflineRenderFormat(format)
        var out = [Float](repeating: 0, count: 4800 * 2)
        let n = try out.withUnsafeMutableBytes { try queue.offlineRender(at: 0, into: $0, frames: 4800) }
        #expect(n == 4800)
        let meters = queue.currentLevelMeters
        #expect(meters.count == 2)
        #expect(meters[0].peak == 0.5)
        #expect(abs(meters[0].average - 0.5) < 1e-5)
        #expect(abs(meters[0].decibels.average - -6.0206) < 0.001)
        #expect(abs(meters[1].peak - 1) < 1e-5)
        #expect(abs(meters[1].average - Float(0.5).squareRoot()) < 1e-3)
        #expect(abs(meters[1].decibels.average - -3.0103) < 0.01)
        queue.isLevelMeteringEnabled = false
        #expect(queue.currentLevelMeters.isEmpty)
        #expect(AudioLevelMeter(average: 0, peak: 0).decibels == AudioLevelMeter(average: -120, peak: -120))
    }
}

import Foundation
