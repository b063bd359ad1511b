// A program written against Apple's AVFAudio only (Swift 6 mode): AVAudioEngine graphs, as a
// podcast renderer, a sampler and a tone generator build them.
//
//   avengine render IN OUT [RATE]   player → EQ (→ time-pitch at RATE) → main mixer, rendered
//                                   offline in manual rendering mode into a float WAV
//   avengine schedule IN OUT        the first half of IN as a file segment, the second half read
//                                   into a buffer, scheduled back to back; prints the completions
//                                   in the order they came and the player's times
//   avengine tone OUT HZ SECONDS    an AVAudioSourceNode sine, tapped on the main mixer
//   avengine mix OUT IN...          a player per input (read into a buffer) into one mixer (volumes
//                                   1/n, pans spread), real-time manual rendering into an AAC file
//   avengine live IN                plays IN through the output device; prints when it was heard
//   avengine follow IN              loops IN through the output device until the engine says its
//                                   configuration changed (the output moved)
//   avengine listen OUT SECONDS     a tap on the input node, converted to 16 kHz mono Int16 by an
//                                   AVAudioConverter, written to a WAV of exactly SECONDS
import AVFoundation
import Foundation

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("avengine: \(message)\n".utf8))
    exit(1)
}

/// Renders `frames` frames of the engine's output into `file`, `chunk` at a time.
func renderOffline(_ engine: AVAudioEngine, frames: AVAudioFramePosition, into file: AVAudioFile) throws {
    let buffer = AVAudioPCMBuffer(pcmFormat: engine.manualRenderingFormat, frameCapacity: engine.manualRenderingMaximumFrameCount)!
    while engine.manualRenderingSampleTime < frames {
        let left = frames - engine.manualRenderingSampleTime
        let count = AVAudioFrameCount(min(AVAudioFramePosition(buffer.frameCapacity), left))
        let status = try engine.renderOffline(count, to: buffer)
        guard status == .success else { fail("render status \(status.rawValue)") }
        try file.write(from: buffer)
    }
}

func floatWAVSettings(_ format: AVAudioFormat) -> [String: Any] {
    [AVFormatIDKey: kAudioFormatLinearPCM, AVSampleRateKey: format.sampleRate, AVNumberOfChannelsKey: format.channelCount,
     AVLinearPCMBitDepthKey: 32, AVLinearPCMIsFloatKey: true]
}

/// Waits for `count` signals, each within `seconds`.
final class Completions: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    private let semaphore = DispatchSemaphore(value: 0)

    func add(_ line: String) {
        lock.lock()
        lines.append(line)
        lock.unlock()
        semaphore.signal()
    }

    func wait(for count: Int, seconds: Double) -> Bool {
        for _ in 0..<count where semaphore.wait(timeout: .now() + seconds) == .timedOut { return false }
        return true
    }

    var all: [String] {
        lock.lock()
        defer { lock.unlock() }
        return lines
    }
}

let arguments = CommandLine.arguments
guard arguments.count >= 3 else { fail("usage: avengine render|schedule|tone|mix|live ...") }

do {
    switch arguments[1] {
    case "render":
        let input = try AVAudioFile(forReading: URL(fileURLWithPath: arguments[2]))
        let rate = arguments.count > 4 ? Float(arguments[4]) ?? 1 : 1
        let engine = AVAudioEngine()
        let player = AVAudioPlayerNode()
        let eq = AVAudioUnitEQ(numberOfBands: 2)
        eq.bands[0].filterType = .parametric
        eq.bands[0].frequency = 1000
        eq.bands[0].bandwidth = 1
        eq.bands[0].gain = -6
        eq.bands[0].bypass = false
        eq.bands[1].filterType = .highPass
        eq.bands[1].frequency = 80
        eq.bands[1].bypass = false
        engine.attach(player)
        engine.attach(eq)
        let format = input.processingFormat
        engine.connect(player, to: eq, format: format)
        var frames = input.length
        if rate != 1 {
            let timePitch = AVAudioUnitTimePitch()
            timePitch.rate = rate
            engine.attach(timePitch)
            engine.connect(eq, to: timePitch, format: format)
            engine.connect(timePitch, to: engine.mainMixerNode, format: format)
            frames = AVAudioFramePosition((Double(frames) / Double(rate)).rounded())
        } else {
            engine.connect(eq, to: engine.mainMixerNode, format: format)
        }
        try engine.enableManualRenderingMode(.offline, format: format, maximumFrameCount: 4096)
        player.scheduleFile(input, at: nil)
        try engine.start()
        player.play()
        let output = try AVAudioFile(forWriting: URL(fileURLWithPath: arguments[3]), settings: floatWAVSettings(format))
        try renderOffline(engine, frames: frames, into: output)
        output.close()
        engine.stop()
        print("rendered \(engine.manualRenderingSampleTime) frames")

    case "schedule":
        let url = URL(fileURLWithPath: arguments[2])
        let file = try AVAudioFile(forReading: url)
        let half = file.length / 2
        let second = try AVAudioFile(forReading: url)
        second.framePosition = half
        let buffer = AVAudioPCMBuffer(pcmFormat: second.processingFormat, frameCapacity: AVAudioFrameCount(file.length - half))!
        try second.read(into: buffer)
        let engine = AVAudioEngine()
        let player = AVAudioPlayerNode()
        engine.attach(player)
        engine.connect(player, to: engine.mainMixerNode, format: file.processingFormat)
        try engine.enableManualRenderingMode(.offline, format: file.processingFormat, maximumFrameCount: 1024)
        let completions = Completions()
        player.scheduleSegment(file, startingFrame: 0, frameCount: AVAudioFrameCount(half), at: nil,
                               completionCallbackType: .dataRendered) { type in completions.add("segment \(type.rawValue)") }
        player.scheduleBuffer(buffer, at: nil, options: [], completionCallbackType: .dataPlayedBack) { type in
            completions.add("buffer \(type.rawValue)")
        }
        try engine.start()
        player.play()
        let output = try AVAudioFile(forWriting: URL(fileURLWithPath: arguments[3]), settings: floatWAVSettings(file.processingFormat))
        try renderOffline(engine, frames: file.length + 1000, into: output)
        guard completions.wait(for: 2, seconds: 10) else { fail("the completions did not come: \(completions.all)") }
        for line in completions.all { print(line) }
        if let render = player.lastRenderTime, let time = player.playerTime(forNodeTime: render) {
            print("player time \(time.sampleTime) at node time \(render.sampleTime)")
        }
        player.stop()
        print("playing \(player.isPlaying)")

    case "tone":
        guard arguments.count >= 5, let hertz = Double(arguments[3]), let seconds = Double(arguments[4]) else { fail("tone OUT HZ SECONDS") }
        let format = AVAudioFormat(standardFormatWithSampleRate: 48_000, channels: 1)!
        let engine = AVAudioEngine()
        let phase = PhaseBox()
        let source = AVAudioSourceNode(format: format) { _, _, frameCount, list in
            let buffers = UnsafeMutableAudioBufferListPointer(list)
            let samples = buffers[0].mData!.assumingMemoryBound(to: Float.self)
            for frame in 0..<Int(frameCount) {
                samples[frame] = Float(0.5 * sin(2 * Double.pi * hertz * Double(phase.next()) / 48_000))
            }
            return noErr
        }
        engine.attach(source)
        engine.connect(source, to: engine.mainMixerNode, format: format)
        try engine.enableManualRenderingMode(.offline, format: format, maximumFrameCount: 512)
        let tapped = Completions()
        let tapFrames = TapCounter()
        engine.mainMixerNode.installTap(onBus: 0, bufferSize: 4800, format: nil) { buffer, when in
            tapFrames.add(Int(buffer.frameLength), at: when.sampleTime)
            tapped.add("tap")
        }
        try engine.start()
        let output = try AVAudioFile(forWriting: URL(fileURLWithPath: arguments[2]), settings: floatWAVSettings(format))
        let total = AVAudioFramePosition((seconds * 48_000).rounded())
        try renderOffline(engine, frames: total, into: output)
        let buffers = Int(total) / 4800
        guard tapped.wait(for: buffers, seconds: 10) else { fail("the tap gave \(tapped.all.count) buffers of \(buffers)") }
        engine.mainMixerNode.removeTap(onBus: 0)
        print("rendered \(engine.manualRenderingSampleTime) frames; tap \(tapFrames.summary)")

    case "mix":
        let inputs = try arguments[3...].map { try AVAudioFile(forReading: URL(fileURLWithPath: $0)) }
        guard !inputs.isEmpty else { fail("mix OUT IN...") }
        let format = AVAudioFormat(standardFormatWithSampleRate: 44_100, channels: 2)!
        let engine = AVAudioEngine()
        let mixer = AVAudioMixerNode()
        engine.attach(mixer)
        engine.connect(mixer, to: engine.mainMixerNode, format: format)
        var players: [AVAudioPlayerNode] = []
        for (index, input) in inputs.enumerated() {
            let player = AVAudioPlayerNode()
            engine.attach(player)
            engine.connect(player, to: mixer, format: input.processingFormat)
            player.volume = 1 / Float(inputs.count)
            player.pan = inputs.count > 1 ? -1 + 2 * Float(index) / Float(inputs.count - 1) : 0
            // A real-time render must not wait for a file to decode: the inputs are read into memory first.
            let buffer = AVAudioPCMBuffer(pcmFormat: input.processingFormat, frameCapacity: AVAudioFrameCount(input.length))!
            try input.read(into: buffer)
            player.scheduleBuffer(buffer, completionHandler: nil)
            players.append(player)
        }
        try engine.enableManualRenderingMode(.realtime, format: format, maximumFrameCount: 1024)
        try engine.start()
        for player in players { player.play() }
        let settings: [String: Any] = [AVFormatIDKey: kAudioFormatMPEG4AAC, AVSampleRateKey: 44_100, AVNumberOfChannelsKey: 2,
                                       AVEncoderBitRateKey: 128_000]
        let output = try AVAudioFile(forWriting: URL(fileURLWithPath: arguments[2]), settings: settings)
        let longest = inputs.map { AVAudioFramePosition((Double($0.length) * 44_100 / $0.processingFormat.sampleRate).rounded()) }.max() ?? 0
        let render = engine.manualRenderingBlock
        let buffer = AVAudioPCMBuffer(pcmFormat: format, frameCapacity: 1024)!
        var done: AVAudioFramePosition = 0
        while done < longest {
            let count = AVAudioFrameCount(min(1024, longest - done))
            var status: OSStatus = noErr
            let result = render(count, buffer.mutableAudioBufferList, &status)
            guard result == .success else { fail("render status \(result.rawValue) (\(status))") }
            buffer.frameLength = count
            try output.write(from: buffer)
            done += AVAudioFramePosition(count)
        }
        output.close()
        print("mixed \(inputs.count) inputs into \(done) frames")

    case "live":
        let file = try AVAudioFile(forReading: URL(fileURLWithPath: arguments[2]))
        let engine = AVAudioEngine()
        let player = AVAudioPlayerNode()
        engine.attach(player)
        engine.connect(player, to: engine.mainMixerNode, format: file.processingFormat)
        let heard = Completions()
        player.scheduleFile(file, at: nil, completionCallbackType: .dataPlayedBack) { _ in heard.add("played back") }
        try engine.start()
        let started = Date()
        player.play()
        let seconds = Double(file.length) / file.processingFormat.sampleRate
        guard heard.wait(for: 1, seconds: seconds + 10) else { fail("the file was not played back") }
        print(String(format: "played back after %.3f s of %.3f s; running %@", Date().timeIntervalSince(started), seconds,
                     engine.isRunning ? "true" : "false"))
        engine.stop()

    case "follow":
        let file = try AVAudioFile(forReading: URL(fileURLWithPath: arguments[2]))
        let buffer = AVAudioPCMBuffer(pcmFormat: file.processingFormat, frameCapacity: AVAudioFrameCount(file.length))!
        try file.read(into: buffer)
        let engine = AVAudioEngine()
        let player = AVAudioPlayerNode()
        engine.attach(player)
        engine.connect(player, to: engine.mainMixerNode, format: file.processingFormat)
        player.scheduleBuffer(buffer, at: nil, options: .loops)
        let changed = Completions()
        let token = NotificationCenter.default.addObserver(forName: .AVAudioEngineConfigurationChange, object: engine, queue: nil) { _ in
            changed.add("changed")
        }
        try engine.start()
        player.play()
        print("playing")
        fflush(nil)
        guard changed.wait(for: 1, seconds: 30) else { fail("no configuration change came") }
        print("configuration changed; running \(engine.isRunning)")
        NotificationCenter.default.removeObserver(token)
        engine.stop()

    case "listen":
        guard arguments.count >= 4, let seconds = Double(arguments[3]) else { fail("listen OUT SECONDS") }
        let engine = AVAudioEngine()
        let input = engine.inputNode
        let inputFormat = input.outputFormat(forBus: 0)
        let target = AVAudioFormat(commonFormat: .pcmFormatInt16, sampleRate: 16_000, channels: 1, interleaved: true)!
        guard let converter = AVAudioConverter(from: inputFormat, to: target) else { fail("no converter from \(inputFormat)") }
        let settings: [String: Any] = [AVFormatIDKey: kAudioFormatLinearPCM, AVSampleRateKey: 16_000, AVNumberOfChannelsKey: 1, AVLinearPCMBitDepthKey: 16]
        let file = try AVAudioFile(forWriting: URL(fileURLWithPath: arguments[2]), settings: settings, commonFormat: .pcmFormatInt16, interleaved: true)
        let wanted = AVAudioFramePosition((seconds * 16_000).rounded())
        let done = Completions()
        let writer = TapWriter(file: file, converter: converter, target: target, wanted: wanted) { done.add("done") }
        input.installTap(onBus: 0, bufferSize: 4_410, format: inputFormat) { buffer, _ in writer.take(buffer) }
        try engine.start()
        print("listening at \(Int(inputFormat.sampleRate)) Hz, \(inputFormat.channelCount) ch")
        fflush(nil)
        guard done.wait(for: 1, seconds: seconds + 20) else { fail("the tap did not fill the file") }
        input.removeTap(onBus: 0)
        engine.stop()
        print("file \(writer.written) frames")

    default:
        fail("unknown command \(arguments[1])")
    }
} catch {
    fail("\(error)")
}

/// The tone's sample counter (the render block is called on the render thread).
final class PhaseBox: @unchecked Sendable {
    private var count = 0
    func next() -> Int {
        defer { count += 1 }
        return count
    }
}

/// What the tap saw: frames, and whether each buffer began where the one before ended.
final class TapCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var frames = 0
    private var contiguous = true
    private var first: Int64?

    func add(_ count: Int, at time: Int64) {
        lock.lock()
        if first == nil { first = time }
        if time != (first ?? 0) + Int64(frames) { contiguous = false }
        frames += count
        lock.unlock()
    }

    var summary: String {
        lock.lock()
        defer { lock.unlock() }
        return "\(frames) frames from \(first ?? -1), contiguous \(contiguous)"
    }
}

/// Converts what the tap gives to 16 kHz Int16 and writes it until the file holds `wanted` frames.
final class TapWriter: @unchecked Sendable {
    private let file: AVAudioFile
    private let converter: AVAudioConverter
    private let target: AVAudioFormat
    private let wanted: AVAudioFramePosition
    private let finished: () -> Void
    private(set) var written: AVAudioFramePosition = 0

    init(file: AVAudioFile, converter: AVAudioConverter, target: AVAudioFormat, wanted: AVAudioFramePosition, finished: @escaping () -> Void) {
        self.file = file
        self.converter = converter
        self.target = target
        self.wanted = wanted
        self.finished = finished
    }

    func take(_ buffer: AVAudioPCMBuffer) {
        guard written < wanted else { return }
        let capacity = AVAudioFrameCount(Double(buffer.frameLength) * 16_000 / buffer.format.sampleRate) + 64
        guard let out = AVAudioPCMBuffer(pcmFormat: target, frameCapacity: capacity) else { return }
        var given = false
        var error: NSError?
        _ = converter.convert(to: out, error: &error) { _, status in
            if given {
                status.pointee = .noDataNow
                return nil
            }
            given = true
            status.pointee = .haveData
            return buffer
        }
        if let error { fail("convert: \(error)") }
        let keep = min(AVAudioFramePosition(out.frameLength), wanted - written)
        out.frameLength = AVAudioFrameCount(keep)
        do { try file.write(from: out) } catch { fail("write: \(error)") }
        written += keep
        if written == wanted {
            file.close()
            finished()
        }
    }
}
