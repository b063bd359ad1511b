import AVFAudio
import Foundation
import Testing

/// AVAudioEngine's nodes in manual offline rendering, frame by frame: the player's schedule
/// (loops, interrupts, start times, pause, stop), its times, the effects' definitions, and the
/// errors a graph the library refuses gives.
@Suite(.timeLimit(.minutes(1)))
struct AVAudioEngineNodeTests {
    static var format: AVAudioFormat { AVAudioFormat(standardFormatWithSampleRate: 8_000, channels: 1)! }

    /// An engine rendering mono 8 kHz offline, `node` (attached) into its main mixer.
    static func engine(_ nodes: [AVAudioNode], chain: Bool = true) throws -> AVAudioEngine {
        let engine = AVAudioEngine()
        for node in nodes { engine.attach(node) }
        if chain {
            for (node, next) in zip(nodes, nodes.dropFirst()) { engine.connect(node, to: next, format: format) }
            if let last = nodes.last { engine.connect(last, to: engine.mainMixerNode, format: format) }
        }
        try engine.enableManualRenderingMode(.offline, format: format, maximumFrameCount: 4096)
        try engine.start()
        return engine
    }

    /// A buffer of the values `values`.
    static func buffer(_ values: [Float]) -> AVAudioPCMBuffer {
        let buffer = AVAudioPCMBuffer(pcmFormat: format, frameCapacity: AVAudioFrameCount(values.count))!
        for (index, value) in values.enumerated() { buffer.floatChannelData![0][index] = value }
        buffer.frameLength = AVAudioFrameCount(values.count)
        return buffer
    }

    static func render(_ engine: AVAudioEngine, _ frames: Int) throws -> [Float] {
        let buffer = AVAudioPCMBuffer(pcmFormat: format, frameCapacity: AVAudioFrameCount(frames))!
        let status = try engine.renderOffline(AVAudioFrameCount(frames), to: buffer)
        #expect(status == .success && buffer.frameLength == AVAudioFrameCount(frames))
        return Array(UnsafeBufferPointer(start: buffer.floatChannelData![0], count: frames))
    }

    /// Completion names in the order called.
    final class Calls: @unchecked Sendable {
        private let lock = NSLock()
        private var names: [String] = []
        private let semaphore = DispatchSemaphore(value: 0)
        func add(_ name: String) {
            lock.lock()
            names.append(name)
            lock.unlock()
            semaphore.signal()
        }
        /// The names once `count` have come in all (waiting at most 5 s for each).
        func wait(_ count: Int) -> [String] {
            while current.count < count, semaphore.wait(timeout: .now() + 5) == .success {}
            return current
        }
        private var current: [String] {
            lock.lock()
            defer { lock.unlock() }
            return names
        }
    }

    static let a = (0..<100).map { Float($0 + 1) / 1000 }
    static let b = (0..<30).map { -Float($0 + 1) / 1000 }

    @Test func loopsAndInterruptsPlayWhereApplesDo() throws {
        let player = AVAudioPlayerNode()
        let engine = try Self.engine([player])
        let calls = Calls()
        player.scheduleBuffer(Self.buffer(Self.a), at: nil, options: .loops) { calls.add("a") }
        player.play()
        #expect(try Self.render(engine, 250) == Self.a + Self.a + Array(Self.a[0..<50]))
        // At its loop's end the looping buffer gives way.
        player.scheduleBuffer(Self.buffer(Self.b), at: nil, options: .interruptsAtLoop) { calls.add("b") }
        #expect(try Self.render(engine, 100) == Array(Self.a[50...]) + Self.b + [Float](repeating: 0, count: 20))
        #expect(calls.wait(2) == ["a", "b"])
        // An interrupting buffer plays at once.
        player.scheduleBuffer(Self.buffer(Self.a), at: nil, options: .loops) { calls.add("c") }
        #expect(try Self.render(engine, 10) == Array(Self.a[0..<10]))
        player.scheduleBuffer(Self.buffer(Self.b), at: nil, options: .interrupts) { calls.add("d") }
        #expect(try Self.render(engine, 40) == Self.b + [Float](repeating: 0, count: 10))
        #expect(calls.wait(4) == ["a", "b", "c", "d"])
    }

    @Test func startTimesPauseAndStopKeepTheTimeline() throws {
        let player = AVAudioPlayerNode()
        let engine = try Self.engine([player])
        let calls = Calls()
        _ = try Self.render(engine, 64)
        // play(at:) a node time 100 frames ahead; a buffer at player time 20.
        player.scheduleBuffer(Self.buffer(Self.a), at: AVAudioTime(sampleTime: 20, atRate: 8_000), options: []) { calls.add("a") }
        player.scheduleBuffer(Self.buffer(Self.b)) { calls.add("b") }
        player.play(at: AVAudioTime(sampleTime: 164, atRate: 8_000))
        let out = try Self.render(engine, 150)
        #expect(out == [Float](repeating: 0, count: 120) + Array(Self.a[0..<30]))
        let now = try #require(player.lastRenderTime)
        #expect(now.sampleTime == 64)
        #expect(player.playerTime(forNodeTime: now)?.sampleTime == -100)
        #expect(player.nodeTime(forPlayerTime: AVAudioTime(sampleTime: 0, atRate: 8_000))?.sampleTime == 164)
        // Paused, it keeps its place: the next frames after the pause are the buffer's next.
        player.pause()
        #expect(try Self.render(engine, 40) == [Float](repeating: 0, count: 40))
        #expect(player.playerTime(forNodeTime: try #require(player.lastRenderTime)) == nil)
        player.play()
        #expect(try Self.render(engine, 100) == Array(Self.a[30...]) + Self.b)
        // Stopped: what was scheduled completes, the time goes back to 0, and the player is silent.
        player.scheduleBuffer(Self.buffer(Self.a)) { calls.add("dropped") }
        player.stop()
        #expect(!player.isPlaying)
        #expect(calls.wait(3) == ["a", "b", "dropped"])
        #expect(try Self.render(engine, 10) == [Float](repeating: 0, count: 10))
    }

    @Test func aDelayIsItsDefinition() throws {
        let player = AVAudioPlayerNode(), delay = AVAudioUnitDelay()
        delay.delayTime = 10.0 / 8_000
        delay.feedback = 0
        delay.wetDryMix = 50
        let engine = try Self.engine([player, delay])
        player.scheduleBuffer(Self.buffer([1]))
        player.play()
        var expected = [Float](repeating: 0, count: 30)
        expected[0] = 0.5
        expected[10] = 0.5
        #expect(try Self.render(engine, 30) == expected)
        // Bypassed, the input passes untouched.
        delay.bypass = true
        player.scheduleBuffer(Self.buffer(Self.a))
        #expect(Array(try Self.render(engine, 100)) == Self.a)
    }

    @Test func aReverbDryIsTheInputAndWetRings() throws {
        let player = AVAudioPlayerNode(), reverb = AVAudioUnitReverb()
        reverb.loadFactoryPreset(.largeHall)
        reverb.wetDryMix = 0
        let engine = try Self.engine([player, reverb])
        player.scheduleBuffer(Self.buffer(Self.a))
        player.play()
        #expect(try Self.render(engine, 100) == Self.a)
        reverb.wetDryMix = 100
        player.scheduleBuffer(Self.buffer([1] + [Float](repeating: 0, count: 99)))
        let tail = try Self.render(engine, 4_000) + Self.render(engine, 4_000)
        let early = tail[0..<4_000].map { $0 * $0 }.reduce(0, +), late = tail[4_000...].map { $0 * $0 }.reduce(0, +)
        #expect(tail.allSatisfy(\.isFinite) && early > 1e-6 && late < early, "energy \(early) then \(late)")
    }

    @Test func theEqualiserAndTheMixersGainsApply() throws {
        let player = AVAudioPlayerNode(), eq = AVAudioUnitEQ(numberOfBands: 1)
        eq.globalGain = -6.0206
        let engine = try Self.engine([player, eq])
        player.scheduleBuffer(Self.buffer(Self.a))
        player.play()
        // The band is bypassed until set: only the global gain (½) applies.
        let half = try Self.render(engine, 100)
        #expect(zip(half, Self.a).allSatisfy { abs($0 - $1 / 2) < 1e-6 })
        // A player's volume is its input's at the mixer it reaches (through the equaliser), times the mixer's output volume.
        eq.globalGain = 0
        player.volume = 0.25
        engine.mainMixerNode.outputVolume = 0.5
        player.scheduleBuffer(Self.buffer([Float](repeating: 1, count: 2_000)))
        let scaled = try Self.render(engine, 2_000)
        // The mixer glides to its new gain over 10 ms, then holds it: 0.25 × 0.5.
        #expect(scaled[1_000...].allSatisfy { abs($0 - 0.125) < 1e-6 }, "\(scaled[0]) \(scaled[1_000]) \(scaled[1_999])")
    }

    @Test func connectionsChangeBetweenRendersAndTapsSeeTheNodesOutput() throws {
        let player = AVAudioPlayerNode()
        let engine = try Self.engine([player])
        let seen = Calls()
        let frames = FrameCount()
        player.installTap(onBus: 0, bufferSize: 100, format: nil) { buffer, when in
            frames.add(Array(UnsafeBufferPointer(start: buffer.floatChannelData![0], count: Int(buffer.frameLength))), at: when.sampleTime)
            seen.add("tap")
        }
        player.scheduleBuffer(Self.buffer(Self.a + Self.a))
        player.play()
        #expect(try Self.render(engine, 100) == Self.a)
        engine.disconnectNodeOutput(player)
        #expect(try Self.render(engine, 50) == [Float](repeating: 0, count: 50))
        engine.connect(player, to: engine.mainMixerNode, format: Self.format)
        #expect(try Self.render(engine, 100) == Self.a)
        _ = seen.wait(2)
        // The tap saw the player's frames while it was connected, from its first render on.
        #expect(frames.values == Self.a + Self.a && frames.first == 0, "\(frames.values.count) frames from \(frames.first ?? -1)")
        player.removeTap(onBus: 0)
    }

    @Test func aSinkNodeReceivesItsInputAndGivesNothingOn() throws {
        let player = AVAudioPlayerNode()
        let received = FrameCount()
        let sink = AVAudioSinkNode { timestamp, frames, list in
            let buffers = UnsafeMutableAudioBufferListPointer(UnsafeMutablePointer(mutating: list))
            let samples = buffers[0].mData!.assumingMemoryBound(to: Float.self)
            received.add(Array(UnsafeBufferPointer(start: samples, count: Int(frames))), at: Int64(timestamp.pointee.mSampleTime))
            return noErr
        }
        let engine = AVAudioEngine()
        engine.attach(player)
        engine.attach(sink)
        engine.connect(player, to: sink, format: Self.format)
        try engine.enableManualRenderingMode(.offline, format: Self.format, maximumFrameCount: 4096)
        try engine.start()
        player.scheduleBuffer(Self.buffer(Self.a))
        player.play()
        #expect(try Self.render(engine, 150) == [Float](repeating: 0, count: 150))
        #expect(received.values == Self.a + [Float](repeating: 0, count: 50) && received.first == 0)
        #expect(sink.numberOfInputs == 1 && sink.numberOfOutputs == 0)
    }

    @Test func theInputNodeTakesTheCallersFramesInManualRendering() throws {
        let engine = AVAudioEngine()
        #expect(!engine.inputNode.setManualRenderingInputPCMFormat(Self.format) { _ in nil }, "refused outside manual rendering")
        try engine.enableManualRenderingMode(.offline, format: Self.format, maximumFrameCount: 4096)
        let given = AVAudioPCMBuffer(pcmFormat: Self.format, frameCapacity: 4096)!
        let source = Remaining(Self.a)
        let accepted = engine.inputNode.setManualRenderingInputPCMFormat(Self.format) { frames in
            guard let values = source.take(Int(frames)) else { return nil }
            for (index, value) in values.enumerated() { given.floatChannelData![0][index] = value }
            given.frameLength = frames
            return given.audioBufferList
        }
        #expect(accepted)
        engine.connect(engine.inputNode, to: engine.mainMixerNode, format: Self.format)
        try engine.start()
        #expect(try Self.render(engine, 60) == Array(Self.a[0..<60]))
        #expect(try Self.render(engine, 40) == Array(Self.a[60...]))
        // The block has no more: the render is silence and says the input was short.
        let buffer = AVAudioPCMBuffer(pcmFormat: Self.format, frameCapacity: 50)!
        #expect(try engine.renderOffline(50, to: buffer) == .insufficientDataFromInputNode)
        #expect(buffer.frameLength == 50 && (0..<50).allSatisfy { buffer.floatChannelData![0][$0] == 0 })
    }

    @Test func whatTheGraphRefusesIsAnError() throws {
        let engine = AVAudioEngine()
        let buffer = AVAudioPCMBuffer(pcmFormat: Self.format, frameCapacity: 64)!
        #expect(throws: NSError.self) { try engine.renderOffline(64, to: buffer) }
        try engine.enableManualRenderingMode(.offline, format: Self.format, maximumFrameCount: 64)
        #expect(throws: NSError.self) { try engine.renderOffline(64, to: buffer) }
        // An effect fed another format than the one it gives cannot be made.
        let player = AVAudioPlayerNode(), eq = AVAudioUnitEQ()
        engine.attach(player)
        engine.attach(eq)
        engine.connect(player, to: eq, format: AVAudioFormat(standardFormatWithSampleRate: 44_100, channels: 2))
        engine.connect(eq, to: engine.mainMixerNode, format: Self.format)
        let error = try #require(throws: NSError.self) { try engine.start() }
        #expect(error.localizedDescription.contains("eq"), "\(error.localizedDescription)")
        // Mended, it renders; a bigger render than the maximum is refused.
        engine.connect(player, to: eq, format: Self.format)
        try engine.start()
        #expect(try Self.render(engine, 64) == [Float](repeating: 0, count: 64))
        let big = AVAudioPCMBuffer(pcmFormat: Self.format, frameCapacity: 128)!
        #expect(throws: NSError.self) { try engine.renderOffline(128, to: big) }
        #expect(engine.manualRenderingSampleTime == 64)
    }
}

/// What a tap gave, and the time of its first buffer.
final class FrameCount: @unchecked Sendable {
    private let lock = NSLock()
    private var all: [Float] = []
    private var start: Int64?
    func add(_ frames: [Float], at time: Int64) {
        lock.lock()
        if start == nil { start = time }
        all += frames
        lock.unlock()
    }
    var values: [Float] { lock.lock(); defer { lock.unlock() }; return all }
    var first: Int64? { lock.lock(); defer { lock.unlock() }; return start }
}

/// Values handed out in the sizes asked, then nil.
final class Remaining: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [Float]
    init(_ values: [Float]) { self.values = values }
    func take(_ count: Int) -> [Float]? {
        lock.lock()
        defer { lock.unlock() }
        guard values.count >= count else { return nil }
        defer { values.removeFirst(count) }
        return Array(values.prefix(count))
    }
}
