import Testing
@testable import BufferQueue

/// A toy codec for these tests: each packet is one byte `v` decoding to `framesPerPacket` frames of
/// value v/100. 0xFF is a corrupt packet; 0xFE switches to stereo (each frame then has two samples).
final class ToyDecoder: AudioDecoder {
    private(set) var outputFormat: AudioStreamDescription
    let framesPerPacket: Int
    var finishes = 0

    init(format: AudioStreamDescription) {
        outputFormat = .float32(sampleRate: format.sampleRate, channels: format.channelsPerFrame)
        framesPerPacket = format.framesPerPacket
    }

    func decode(packet: UnsafeRawBufferPointer, frames: Int, into output: DecodedAudio) throws {
        let value = packet[0]
        if value == 0xFF {
            output.appendSilence(frames: frames)
            output.reportError(AudioQueueError(.decoderError, "toy packet is corrupt"))
            return
        }
        if value == 0xFE {
            outputFormat = .float32(sampleRate: outputFormat.sampleRate * 2, channels: 2)
            output.changeFormat(outputFormat)
            return
        }
        let space = output.reserve(frames: frames)
        for i in space.indices { space[i] = Float(value) / 100 }
        output.commit(frames: frames)
    }

    func finish(into output: DecodedAudio) throws { finishes += 1 }
    func reset() {}
}

extension AudioFormatID {
    static let toy = AudioFormatID("toy ")
    static let laggyToy = AudioFormatID("lag ")
}

/// Like libmpg123 at the start of a stream: holds the first packet's frames back until the next
/// packet arrives, then emits both; `finish` emits whatever is still held.
final class LaggyToyDecoder: AudioDecoder {
    let outputFormat: AudioStreamDescription
    private var held: [Float] = []
    init(format: AudioStreamDescription) { outputFormat = .float32(sampleRate: format.sampleRate, channels: 1) }
    func decode(packet: UnsafeRawBufferPointer, frames: Int, into output: DecodedAudio) throws {
        let mine = [Float](repeating: Float(packet[0]) / 100, count: frames)
        if held.isEmpty && !started { held = mine; started = true; return }
        mine.withUnsafeBufferPointer { current in
            held.withUnsafeBufferPointer { output.append($0) }
            held = []
            output.append(current)
        }
    }
    private var started = false
    func finish(into output: DecodedAudio) throws { held.withUnsafeBufferPointer { output.append($0) }; held = []; started = false }
    func reset() { held = []; started = false }
}

@Suite struct DecoderPluginTests {
    let registry: AudioDecoderRegistry = {
        let registry = AudioDecoderRegistry()
        registry.register(AudioDecoderFactory(name: "toy", formats: [.toy]) { format, _ in ToyDecoder(format: format) })
        return registry
    }()
    let format = AudioStreamDescription(sampleRate: 1000, formatID: .toy, bytesPerPacket: 0, framesPerPacket: 100,
                                        bytesPerFrame: 0, channelsPerFrame: 1, bitsPerChannel: 0)

    func enqueuePackets(_ queue: AudioQueue, _ bytes: [UInt8], trimStart: Int = 0, trimEnd: Int = 0) throws {
        let buffer = try queue.allocateBuffer(capacity: bytes.count, packetDescriptionCapacity: bytes.count)
        try buffer.setData(bytes)
        let packets = bytes.indices.map { AudioPacketDescription(startOffset: $0, dataByteSize: 1) }
        try queue.enqueue(buffer, packetDescriptions: packets, trimFramesAtStart: trimStart, trimFramesAtEnd: trimEnd)
    }

    @Test func trimsStayExactWhenTheDecoderHoldsAPacketBack() throws {
        let registry = AudioDecoderRegistry()
        registry.register(AudioDecoderFactory(name: "laggy", formats: [.laggyToy]) { format, _ in LaggyToyDecoder(format: format) })
        var laggy = format
        laggy.formatID = .laggyToy
        let queue = try AudioQueue(format: laggy, configuration: .init(decoderRegistry: registry))
        // One packet per buffer: the first buffer's frames only appear while the second decodes.
        try enqueuePackets(queue, [10], trimStart: 60)
        try enqueuePackets(queue, [20], trimStart: 10, trimEnd: 30)
        let buffer = try queue.allocateBuffer(capacity: 1, packetDescriptionCapacity: 1)
        try buffer.setData([30])
        try queue.enqueue(buffer, packetDescriptions: [.init(startOffset: 0, dataByteSize: 1)], parameters: .init(volume: 0.5), startTime: 150)
        try queue.flush()
        let output = try queue.renderAllOffline(chunk: 17)
        #expect(output.count == 40 + 60 + 50 + 100)
        #expect(output[0..<40].allSatisfy { $0 == 0.1 })
        #expect(output[40..<100].allSatisfy { $0 == 0.2 })
        #expect(output[100..<150].allSatisfy { $0 == 0 })
        #expect(output[150...].allSatisfy { $0 == Float(0.3) * 0.5 })
    }

    /// Wherever a decoder is looked for and none is registered, the message is one: the format,
    /// what the registry decodes, the module to link and the call that registers it.
    @Test func aMissingDecoderNamesTheModuleAndTheCall() throws {
        let mp3 = AudioStreamDescription(sampleRate: 44100, formatID: .mpegLayer3, bytesPerPacket: 0, framesPerPacket: 1152,
                                         bytesPerFrame: 0, channelsPerFrame: 2, bitsPerChannel: 0)
        var messages: [String] = []
        for attempt in [{ _ = try AudioQueue(format: mp3, configuration: .init(decoderRegistry: AudioDecoderRegistry())) },
                        { _ = try AudioDecoderRegistry().makeDecoder(for: mp3, magicCookie: nil) }] {
            do {
                try attempt()
                Issue.record("an MP3 decoder was found in a registry of the built-in decoders")
            } catch let error as AudioQueueError {
                #expect(error.code == .codecNotFound)
                messages.append(error.message)
            }
        }
        #expect(messages.count == 2 && Set(messages).count == 1, "\(messages)")
        let message = messages.first ?? ""
        #expect(message.contains("MPG123Decoder.register()") && message.contains("AudioCodecs.registerAll()")
                && message.contains("lpcm"), "\(message)")
        let aac = AudioDecoderRegistry().missingDecoder(for: .heAAC).message
        #expect(aac.contains("AVCodecAAC.register()") && aac.contains("FAADDecoder.register()"), "\(aac)")
        let unknown = AudioDecoderRegistry().missingDecoder(for: AudioFormatID("zzzz")).message
        #expect(unknown.contains("no module of this package decodes it"), "\(unknown)")
    }

    @Test func registryPicksTheHighestPriority() throws {
        #expect(registry.factory(for: .toy)?.name == "toy")
        #expect(registry.supportedFormats == [.linearPCM, .uLaw, .aLaw, .appleIMA4, .dviIntelIMA, .appleLossless, .toy])
        registry.register(AudioDecoderFactory(name: "toy2", formats: [.toy], priority: 5) { format, _ in ToyDecoder(format: format) })
        #expect(registry.factory(for: .toy)?.name == "toy2")
        expectError(.codecNotFound) { _ = try registry.makeDecoder(for: .init(sampleRate: 1, formatID: .heAAC, bytesPerPacket: 0, framesPerPacket: 0, bytesPerFrame: 0, channelsPerFrame: 1, bitsPerChannel: 0), magicCookie: nil) }
    }

    @Test func compressedBuffersNeedPacketDescriptions() throws {
        let queue = try AudioQueue(format: format, configuration: .init(decoderRegistry: registry))
        let buffer = try queue.allocateBuffer(capacity: 4)
        try buffer.setData([1, 2])
        expectError(.invalidPacketDescription) { try queue.enqueue(buffer) }
    }

    @Test func trimsCountDecodedFramesAcrossPackets() throws {
        let queue = try AudioQueue(format: format, configuration: .init(decoderRegistry: registry))
        try enqueuePackets(queue, [10, 20, 30], trimStart: 150, trimEnd: 50)
        let output = try queue.renderAllOffline(chunk: 33)
        #expect(output == [Float](repeating: 0.2, count: 50) + [Float](repeating: 0.3, count: 50))
    }

    @Test func excessiveTrimRemovesOnlyThatBuffersAudio() async throws {
        let queue = try AudioQueue(format: format, configuration: .init(decoderRegistry: registry))
        let log = EventLog(queue)
        try enqueuePackets(queue, [10, 20], trimStart: 150, trimEnd: 100)
        try enqueuePackets(queue, [40])
        let output = try queue.renderAllOffline()
        #expect(output == [Float](repeating: 0.4, count: 100))
        #expect(queue.lastConverterError?.code == .invalidTrim)
        #expect(await log.wait { $0.contains { if case .error(let e) = $0 { return e.code == .invalidTrim } else { return false } } })
    }

    @Test func corruptPacketBecomesSilenceOfItsLength() async throws {
        let queue = try AudioQueue(format: format, configuration: .init(decoderRegistry: registry))
        let log = EventLog(queue)
        try enqueuePackets(queue, [10, 0xFF, 30])
        let output = try queue.renderAllOffline()
        #expect(output.count == 300)
        #expect(output[0..<100].allSatisfy { $0 == 0.1 })
        #expect(output[100..<200].allSatisfy { $0 == 0 })
        #expect(output[200..<300].allSatisfy { $0 == 0.3 })
        #expect(queue.lastConverterError?.message == "toy packet is corrupt")
        #expect(await log.wait { $0.contains { if case .error = $0 { return true } else { return false } } })
        queue.waitForCallbacks()
        #expect(log.errors.count == 1)
    }

    /// Without a resampler, a change to another rate cannot be converted to the offline format:
    /// the render stops at it with an error, and a matching format renders on.
    @Test func formatChangeIsAnnouncedAndOfflineRenderStopsAtIt() async throws {
        let queue = try AudioQueue(format: format, configuration: .init(decoderRegistry: registry, resamplerRegistry: AudioResamplerRegistry()))
        let log = EventLog(queue)
        try enqueuePackets(queue, [10, 0xFE, 20])
        try queue.setOfflineRenderFormat(.float32(sampleRate: 1000, channels: 1))
        var scratch = [Float](repeating: 0, count: 1000)
        let first = try scratch.withUnsafeMutableBytes { try queue.offlineRender(at: 0, into: $0, frames: 500) }
        #expect(first == 100)
        #expect(scratch[0..<100].allSatisfy { $0 == 0.1 })
        expectError(.codecNotFound) {
            _ = try scratch.withUnsafeMutableBytes { try queue.offlineRender(at: 100, into: $0, frames: 500) }
        }
        #expect(queue.outputFormat == .float32(sampleRate: 2000, channels: 2))
        try queue.setOfflineRenderFormat(.float32(sampleRate: 2000, channels: 2))
        let second = try scratch.withUnsafeMutableBytes { try queue.offlineRender(at: 100, into: $0, frames: 500) }
        #expect(second == 100)
        #expect(scratch[0..<200].allSatisfy { $0 == 0.2 })
        #expect(await log.wait { events in events.contains { if case .formatChanged(let f) = $0 { return f.channelsPerFrame == 2 } else { return false } } })
    }

    @Test func sinkIsReopenedOnFormatChange() async throws {
        let sink = NullSink(pacing: .unpaced, capturing: true)
        let queue = try AudioQueue(format: format, configuration: .init(sink: sink, decoderRegistry: registry))
        try enqueuePackets(queue, [10, 0xFE, 20])
        try queue.start()
        #expect(await sink.waitForFrames(200))
        let captured = sink.capturedSamples()
        #expect(captured[0..<100].allSatisfy { $0 == 0.1 })
        #expect(captured[100...].allSatisfy { $0 == 0.2 })
        queue.dispose(immediately: true)
    }
}

@Suite struct SinkEquivalenceTests {
    @Test func offlineRenderEqualsWhatTheUnpacedSinkReceived() async throws {
        let format = AudioStreamDescription.linearPCM(sampleRate: 44100, channels: 2, bitsPerChannel: 16)
        var bytes = [UInt8](repeating: 0, count: 40000 * 4)
        var seed: UInt32 = 12345
        for i in bytes.indices { seed = seed &* 1_664_525 &+ 1_013_904_223; bytes[i] = UInt8(truncatingIfNeeded: seed >> 24) }
        func feed(_ queue: AudioQueue) throws {
            try queue.setParameters(.init(volume: 0.7, pan: -0.3))
            for (i, start) in stride(from: 0, to: bytes.count, by: 16000).enumerated() {
                let buffer = try queue.allocateBuffer(capacity: 16000)
                try buffer.setData(bytes[start..<min(start + 16000, bytes.count)])
                try queue.enqueue(buffer, trimFramesAtStart: i == 0 ? 1105 : 0, trimFramesAtEnd: start + 16000 >= bytes.count ? 47 : 0,
                                  parameters: .init(volume: i == 3 ? 0.5 : nil))
            }
        }
        let offline = try AudioQueue(format: format)
        try feed(offline)
        let rendered = try offline.renderAllOffline(chunk: 999)
        #expect(rendered.count == (40000 - 1105 - 47) * 2)

        let sink = NullSink(pacing: .unpaced, capturing: true)
        let live = try AudioQueue(format: format, configuration: .init(sink: sink, decodeBufferFrames: 1024))
        try feed(live)
        try live.start()
        #expect(await sink.waitForFrames(rendered.count / 2))
        #expect(difference(sink.capturedSamples(), rendered) == nil)
    }
}

@Suite struct DecodedFormatChangeConversionTests {
    /// A stream that changes from 1000 Hz mono to 2000 Hz stereo renders on in the offline
    /// format: the first part converted, the second as it is.
    @Test func aMidStreamFormatChangeIsConvertedToTheOfflineFormat() throws {
        let registry = AudioDecoderRegistry()
        registry.register(AudioDecoderFactory(name: "toy", formats: [.toy]) { format, _ in ToyDecoder(format: format) })
        let format = AudioStreamDescription(sampleRate: 1000, formatID: .toy, bytesPerPacket: 0, framesPerPacket: 100,
                                            bytesPerFrame: 0, channelsPerFrame: 1, bitsPerChannel: 0)
        let queue = try AudioQueue(format: format, configuration: .init(decoderRegistry: registry,
                                                                        resamplerRegistry: doublingRegistry(hold: 2)))
        let bytes: [UInt8] = [10, 0xFE, 20]
        let buffer = try queue.allocateBuffer(capacity: 3, packetDescriptionCapacity: 3)
        try buffer.setData(bytes)
        try queue.enqueue(buffer, packetDescriptions: bytes.indices.map { AudioPacketDescription(startOffset: $0, dataByteSize: 1) })
        try queue.setOfflineRenderFormat(.float32(sampleRate: 2000, channels: 2))
        try queue.flush()
        let output = try queue.renderRest(channels: 2)
        // 100 mono frames at 1000 Hz → 200 stereo frames at 2000 Hz (the held two drained at the
        // change), then the 100 stereo frames decoded at 2000 Hz.
        #expect(output.count == 300 * 2)
        #expect(output[0..<400].allSatisfy { $0 == 0.1 })
        #expect(output[400...].allSatisfy { $0 == 0.2 })
    }
}
