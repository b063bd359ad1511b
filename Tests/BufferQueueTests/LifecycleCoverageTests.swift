import Testing
@testable import BufferQueue

/// Paths no test covered before the lifecycle rebuild.
@Suite struct LifecycleCoverageTests {
    let toyRegistry: AudioDecoderRegistry = {
        let registry = AudioDecoderRegistry()
        registry.register(AudioDecoderFactory(name: "toy", formats: [.toy]) { format, _ in ToyDecoder(format: format) })
        return registry
    }()

    /// One buffer of one-byte toy packets.
    func toyBuffer(_ queue: AudioQueue, _ bytes: [UInt8], frames: [Int]? = nil) throws -> (AudioQueueBuffer, [AudioPacketDescription]) {
        let buffer = try queue.allocateBuffer(capacity: bytes.count, packetDescriptionCapacity: bytes.count)
        try buffer.setData(bytes)
        let packets = bytes.indices.map { AudioPacketDescription(startOffset: $0, variableFramesInPacket: frames?[$0] ?? 0, dataByteSize: 1) }
        return (buffer, packets)
    }

    @Test func variableFramesInPacketThroughTheQueue() throws {
        let format = AudioStreamDescription(sampleRate: 1000, formatID: .toy, bytesPerPacket: 0, framesPerPacket: 0,
                                            bytesPerFrame: 0, channelsPerFrame: 1, bitsPerChannel: 0)
        let queue = try AudioQueue(format: format, configuration: .init(decoderRegistry: toyRegistry))
        let (first, firstPackets) = try toyBuffer(queue, [10, 20, 30], frames: [50, 150, 100])
        let (second, secondPackets) = try toyBuffer(queue, [40], frames: [70])
        // Start times follow the declared frames, minus the trims.
        #expect(try queue.enqueue(first, packetDescriptions: firstPackets, trimFramesAtStart: 60, trimFramesAtEnd: 30) == 0)
        #expect(try queue.enqueue(second, packetDescriptions: secondPackets) == 300 - 60 - 30)
        let output = try queue.renderAllOffline(chunk: 37)
        let expected = [Float](repeating: 0.2, count: 140) + [Float](repeating: 0.3, count: 70) + [Float](repeating: 0.4, count: 70)
        #expect(output == expected)
    }

    @Test func compressedStartTrimLongerThanItsBufferCarriesIntoTheNext() async throws {
        let format = AudioStreamDescription(sampleRate: 1000, formatID: .toy, bytesPerPacket: 0, framesPerPacket: 100,
                                            bytesPerFrame: 0, channelsPerFrame: 1, bitsPerChannel: 0)
        let queue = try AudioQueue(format: format, configuration: .init(decoderRegistry: toyRegistry))
        let log = EventLog(queue)
        // Priming of 250 frames over one-packet buffers of 100 frames each.
        for (i, value) in [10, 20, 30, 40].enumerated() {
            let (buffer, packets) = try toyBuffer(queue, [UInt8(value)])
            try queue.enqueue(buffer, packetDescriptions: packets, trimFramesAtStart: i == 0 ? 250 : 0)
        }
        let output = try queue.renderAllOffline()
        #expect(output == [Float](repeating: 0.3, count: 50) + [Float](repeating: 0.4, count: 100))
        #expect(queue.lastConverterError == nil)
        // A carry with nothing left to trim before the end of a run is an error, and the next run
        // starts untrimmed.
        let (short, shortPackets) = try toyBuffer(queue, [50])
        try queue.enqueue(short, packetDescriptions: shortPackets, trimFramesAtStart: 130)
        try queue.flush()
        let (next, nextPackets) = try toyBuffer(queue, [60])
        try queue.enqueue(next, packetDescriptions: nextPackets)
        #expect(try queue.renderAllOffline() == [Float](repeating: 0.6, count: 100))
        #expect(queue.lastConverterError?.code == .invalidTrim)
        #expect(await log.wait { $0.contains { if case .error(let e) = $0 { return e.code == .invalidTrim } else { return false } } })
    }

    @Test func pauseWhileStoppingPausesThePlayOutAndStartResumesIt() async throws {
        let format = AudioStreamDescription.float32(sampleRate: 48000, channels: 2)
        let sink = NullSink(pacing: .realTime, capturing: true)
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink, decodeBufferFrames: 4096))
        let log = EventLog(queue)
        // Two seconds: the pause must land before the play-out ends, even on a loaded machine.
        let input = ramp(frames: 96000, channels: 2, offset: 1)
        try queue.enqueue(try queue.makeBuffer(input))
        try queue.start()
        try queue.stop(immediately: false)
        #expect(await sink.waitForFrames(4800))
        try queue.pause()
        #expect(await log.waitForRunning([true, false]))
        #expect(queue.isStopping)                               // still to be played out
        expectError(.enqueueDuringReset) { try queue.enqueue(try queue.makeBuffer(input)) }
        try queue.start()
        #expect(await log.waitForRunning([true, false, true, false]))
        #expect(!queue.isStopping)
        #expect(difference(trimSilence(sink.capturedSamples(), channels: 2), input) == nil)
    }

    @Test func flushWhileStoppedMarksTheNextRun() async throws {
        let format = AudioStreamDescription.float32(sampleRate: 48000, channels: 2)
        let sink = NullSink(pacing: .unpaced, capturing: true)
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink))
        let log = EventLog(queue)
        try queue.flush()                                        // never started: nothing to drain
        try queue.stop(immediately: true)
        try queue.flush()                                        // stopped: accepted, discards nothing
        let input = ramp(frames: 3000, channels: 2, offset: 2)
        try queue.enqueue(try queue.makeBuffer(input))
        try queue.flush()
        try queue.start()
        try queue.stop(immediately: false)
        #expect(await log.waitForRunning([true, false]))
        #expect(difference(sink.capturedSamples(), input) == nil)
    }

    @Test func volumeAndPanRampFromSetParameters() throws {
        let format = AudioStreamDescription.float32(sampleRate: 1000, channels: 2)
        let queue = try AudioQueue(format: format)
        try queue.setVolumeRampTime(0.1)                         // 100 frames
        try queue.enqueue(try queue.makeBuffer([Float](repeating: 1, count: 300 * 2)))
        try queue.setOfflineRenderFormat(format)
        var out = [Float](repeating: 0, count: 200 * 2)
        #expect(try out.withUnsafeMutableBytes { try queue.offlineRender(at: 0, into: $0, frames: 100) } == 100)
        #expect(out[0..<200].allSatisfy { $0 == 1 })
        try queue.setParameters(.init(volume: 0.5, pan: 1))       // glide to half volume, right only
        #expect(try out.withUnsafeMutableBytes { try queue.offlineRender(at: 100, into: $0, frames: 200) } == 200)
        for k in 1...100 {
            let volume = 1 - 0.5 * Float(k) / 100, pan = Float(k) / 100
            #expect(abs(out[2 * (k - 1)] - volume * (1 - pan)) < 1e-5, "left at \(k)")
            #expect(abs(out[2 * (k - 1) + 1] - volume) < 1e-5, "right at \(k)")
        }
        #expect(stride(from: 200, to: 400, by: 2).allSatisfy { out[$0] == 0 && out[$0 + 1] == 0.5 })
    }
}
