import Foundation
import Testing
import ALSASink
import AudioFileStream
@testable import AudioPlayback
import FLACDecoder
import BufferQueue
import PulseAudioSink
import PipeWireSink
import CRenderThreadCounter
import CodecTestSupport
import RubberBandTimePitch
import SoxrConverter
import TestSupport

/// What the instrument counted over a stretch of renders.
struct RenderCounts: CustomStringConvertible {
    /// The counter's totals: renders, allocations, frees, `syscall(2)` calls, reads and writes,
    /// waits, the exempt library's allocations and frees (a documented exception, counted apart)
    /// and wakes of another thread (the render signalling the queue's worker: allowed, at most one
    /// a render).
    var counts: aq_counts
    /// Frames the counted renders gave (offline).
    var frames = 0

    init(_ counts: aq_counts) { self.counts = counts }

    var renders: UInt64 { counts.renders }
    var allocations: UInt64 { counts.allocations }
    var frees: UInt64 { counts.frees }
    var syscalls: UInt64 { counts.syscalls }
    var readWrites: UInt64 { counts.readWrites }
    var waits: UInt64 { counts.waits }
    var exempt: UInt64 { counts.exempt }
    var wakes: UInt64 { counts.wakes }

    var description: String {
        "\(renders) renders\(frames > 0 ? " (\(frames) frames)" : ""): \(allocations) allocations, \(frees) frees, \(syscalls) syscall(2) calls, "
            + "\(readWrites) reads/writes, \(waits) waits, \(wakes) wakes; \(exempt) exempt allocations and frees"
    }

    /// `AQ_RT_VERBOSE=1` prints every count (what the closing figures of a change quote).
    func report(_ what: String) {
        if ProcessInfo.processInfo.environment["AQ_RT_VERBOSE"] != nil { print("render thread, \(what): \(self)") }
    }

    /// Nothing the contract forbids: no allocation, free, futex call, read or write, or wait, and
    /// no more than one wake of the worker a render.
    var isClean: Bool { allocations == 0 && frees == 0 && syscalls == 0 && readWrites == 0 && waits == 0 && wakes <= renders }
}

/// The render path's real-time contract (Docs/Playback.md, "The render thread's contract"): once a stream is
/// under way (its first blocks rendered, no format change ahead) the thread that renders makes no
/// heap allocation or free, makes no system call and never waits.
///
/// - Offline, the rendering thread also decodes: every decoder is checked there.
/// - Through a sink, the sink's thread runs the render stage only (decoding is the worker's): the
///   converter, the three time-pitch algorithms, the taps, volume ramps and metering are checked
///   on it, through the library's hook (`RenderThreadObserver`), which brackets each render so the
///   sink's own work is not counted.
///
/// The instrument (`CRenderThreadCounter`) interposes the allocator in the test executable; under
/// a sanitizer, which interposes it itself, the suite does not run. Each nested suite is
/// `.serialized` as well: the counter is one per process, and the trait does not reach suites
/// declared in an extension.
@Suite(.serialized, .enabled(if: aq_counting_available() != 0, "the render-thread counter does not work under a sanitizer"))
struct RenderThreadContractTests {}

extension RenderThreadContractTests {
    /// The instrument sees each thing the contract forbids, inside a bracketed render and not
    /// outside it (a counter that cannot see would make every other test here pass).
    @Suite(.serialized) struct InstrumentTests {
        @Test func theCounterSeesWhatTheContractForbids() throws {
            let devNull = open("/dev/null", O_WRONLY)
            try #require(devNull >= 0)
            defer { close(devNull) }
            func forbidden() {
                let memory = malloc(64)
                free(memory)
                var byte: UInt8 = 0
                _ = write(devNull, &byte, 1)
                _ = aq_counting_probe_syscall()
                aq_counting_probe_wake()
                usleep(1000)   // blocks: a voluntary context switch, what a wait on a lock is
            }
            // Two made-up render sources: the counted one and another.
            let sources = UnsafeMutableRawPointer.allocate(byteCount: 2, alignment: 1)
            defer { sources.deallocate() }
            let identity = UnsafeRawPointer(sources)
            aq_counting_arm(identity)
            forbidden()   // outside a render: not counted
            aq_render_observed(identity + 1, 1)   // another source's render: not counted
            forbidden()
            aq_render_observed(identity + 1, 0)
            aq_render_observed(identity, 1)
            forbidden()
            aq_render_observed(identity, 0)
            let counts = RenderCounts(aq_counting_disarm())
            #expect(counts.renders == 1)
            #expect(counts.allocations >= 1 && counts.frees >= 1, "\(counts)")
            #expect(counts.readWrites == 1, "\(counts)")
            #expect(counts.syscalls == 1, "\(counts)")
            #expect(counts.wakes == 1, "\(counts)")
            #expect(counts.waits >= 1, "\(counts)")
            #expect(counts.allocations < 10, "the instrument counted more than the probe made: \(counts)")
        }
    }

    @Suite(.serialized) struct OfflineRenderThreadTests {
        /// Renders `path` offline in blocks of `block` frames and counts what the renders between the
        /// first `warmUp` blocks and the approach of the end do on this thread. The warm-up covers what
        /// happens once: the first buffers going back (the runtime instantiates the conformances that
        /// path uses), libsoxr's FIFO growing to its high-water mark. The file's packets are
        /// enqueued as often as it takes to make 120 000 frames, all before the render starts (so
        /// the counted thread does only the render path's work), and the end of the stream (the
        /// decoder's drain and reset, which may allocate) is left out: the queue decodes up to
        /// `decodeBufferFrames` ahead, so counting stops that far and two blocks before the end.
        func offlineSteadyState(_ path: String, aac: AACDecoderChoice = .faad, block: Int = 1024, warmUp: Int = 32,
                                format: AudioStreamDescription? = nil, configure: (AudioQueue) throws -> Void = { _ in }) throws -> RenderCounts {
            SoxrConverter.register()
            let file = try AudioFile(path: path)
            let queue = try AudioQueue(format: file.dataFormat, configuration: .init(decoderRegistry: aac.registry))
            defer { queue.dispose(immediately: true) }
            if let cookie = file.magicCookie { try queue.setMagicCookie(cookie) }
            try configure(queue)
            var chunks: [AudioFilePackets] = []
            var next: Int64 = 0
            while next < file.packetCount {
                // Buffers of about 8192 frames, as a player's are (16 packets where packets vary).
                let framesPerPacket = file.dataFormat.framesPerPacket
                let packets = try file.readPackets(from: next, count: framesPerPacket > 0 ? max(8192 / framesPerPacket, 1) : 16)
                chunks.append(packets)
                next += Int64(packets.packetCount)
            }
            let loops = max(1, Int((120_000 / Double(max(file.totalFrames, 1))).rounded(.up)))
            // Nothing is trimmed: every loop renders the frames its packets declare.
            let framesPerLoop = (0..<file.packetCount).reduce(0) { $0 + file.frames(ofPacket: $1) }
            // The buffers stay this caller's, as a player's do: the last reference to a buffer is not
            // dropped on the rendering thread.
            var buffers: [AudioQueueBuffer] = []
            defer { withExtendedLifetime(buffers) {} }
            for _ in 0..<loops {
                for packets in chunks {
                    let buffer = try queue.allocateBuffer(capacity: max(packets.data.count, 1), packetDescriptionCapacity: packets.descriptions.count)
                    try buffer.setData(packets.data)
                    try queue.enqueue(buffer, packetDescriptions: packets.descriptions)
                    buffers.append(buffer)
                }
            }
            try queue.flush()
            _ = try queue.prime()
            let decoded = queue.outputFormat
            let output = format ?? .float32(sampleRate: decoded.sampleRate, channels: decoded.channelsPerFrame)
            try queue.setOfflineRenderFormat(output)
            let ratio = output.sampleRate / decoded.sampleRate
            let expected = Int((Double(framesPerLoop * loops) * ratio).rounded())
            let stopAt = Int64(Double(expected) - Double(queue.decodeBufferFrames + 8192) * ratio) - Int64(2 * block)
            let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: block * output.channelsPerFrame * 8, alignment: 16)
            defer { bytes.deallocate() }
            var position: Int64 = 0
            var counted = 0
            var rendered = 0
            var countedPeak: Float = 0
            while true {
                let counting = rendered >= warmUp && position < stopAt
                if rendered == warmUp { aq_counting_arm(queue.renderSourceIdentity) }
                if counting { aq_render_observed(queue.renderSourceIdentity, 1) }
                let frames = try queue.offlineRender(at: position, into: bytes, frames: block)
                if counting {
                    aq_render_observed(queue.renderSourceIdentity, 0)
                    counted += frames
                    let samples = bytes.bindMemory(to: Float.self).prefix(frames * output.channelsPerFrame)
                    countedPeak = samples.reduce(countedPeak) { max($0, abs($1)) }
                }
                if frames == 0 { break }
                position += Int64(frames)
                rendered += 1
            }
            var counts = RenderCounts(aq_counting_disarm())
            counts.frames = counted
            // The renders counted were the stream's: all of it came out, and they carried sound.
            #expect(position == Int64(expected), "\(position) frames rendered, \(expected) enqueued")
            #expect(countedPeak > 0.01, "the counted renders were silent (peak \(countedPeak))")
            let converted = format.map { " to \(Int($0.sampleRate)) Hz, \($0.channelsPerFrame) ch" } ?? ""
            counts.report("offline, \(URL(fileURLWithPath: path).lastPathComponent)\(converted) (AAC: \(aac.rawValue))")
            if !counts.isClean { aq_counting_print_sites() }
            return counts
        }

        @Test(arguments: ["lame-vbr-v2-44k-stereo.mp3", "alac-44k-stereo.m4a", "pcm-s16-22k-mono.wav", "pcm-s24-8k-mono-extensible.wav",
                          "ima4-22k-mono.caf", "ima-adpcm-48k-stereo-ffmpeg.wav", "ulaw-8k-mono.caf", "alaw-8k-mono.wav",
                          "amr-nb-8k-mono.amr", "amr-wb-16k-mono.awb"])
        func offlineDecodingAndRenderingIsRealtimeSafe(_ name: String) throws {
            let counts = try offlineSteadyState(Where.fixture(name))
            #expect(counts.frames >= 50_000 && counts.renders > 0, "\(counts)")
            #expect(counts.isClean, "\(name): \(counts)")
        }

        /// AAC through libfaad2: clean. Through libavcodec: libavcodec allocates and frees inside each
        /// `avcodec_send_packet` and `avcodec_receive_frame` (reference-counted packets and frames,
        /// a frame's side data), through libavutil's `av_malloc` and `av_free`: the documented exception,
        /// counted apart. In playback that decoding runs on the queue's worker, never on the sink's thread.
        @Test(arguments: AACDecoderChoice.allCases)
        func offlineAACIsRealtimeSafe(_ aac: AACDecoderChoice) throws {
            if aac == .avcodec { aq_counting_exempt("/libav") }   // libavutil and libavcodec (av_free tail-calls free)
            defer { aq_counting_exempt(nil) }
            let counts = try offlineSteadyState(Where.fixture("ffmpeg-aac-44k-moov-last.m4a"), aac: aac)
            #expect(counts.frames >= 50_000 && counts.renders > 0, "\(counts)")
            #expect(counts.isClean, "\(aac): \(counts)")
            if aac == .avcodec { #expect(counts.exempt > 0, "libavcodec's allocations were not seen: is the exemption still needed? \(counts)") }
        }

        @Test(.enabled(if: ["sox", "flac", "opusenc", "oggenc"].allSatisfy { Where.tool($0) != nil }, "sox, flac, opus-tools or vorbis-tools is missing"),
              arguments: [("flac", "flac"), ("opusenc", "opus"), ("oggenc", "ogg")])
        func offlineXiphDecodingIsRealtimeSafe(_ tool: String, _ ext: String) async throws {
            // Long enough to play once: a Vorbis stream looped into itself decodes a different length at the join.
            let source = try await XiphFiles.source(channels: 2, rate: 48_000, frames: 120_011)
            let file = try await XiphFiles.encode(source, tool, [], ext: ext)
            let counts = try offlineSteadyState(file)
            #expect(counts.frames >= 50_000 && counts.renders > 0, "\(counts)")
            #expect(counts.isClean, "\(ext): \(counts)")
        }

        /// The converter offline: rate (libsoxr) and channel conversion to the render format.
        @Test func offlineConversionIsRealtimeSafe() throws {
            let counts = try offlineSteadyState(Where.fixture("lame-vbr-v2-44k-stereo.mp3"), format: .float32(sampleRate: 48_000, channels: 1))
            #expect(counts.frames >= 50_000, "\(counts)")
            #expect(counts.isClean, "\(counts)")
        }
    }

    /// The render path on a sink's own thread: what the thread does inside each
    /// `AudioRenderSource.render` (bracketed by the library's hook), in steady-state playback of a
    /// 44.1 kHz stereo tone, for each stage the render path can run.
    @Suite(.serialized) struct SinkRenderThreadTests {
        static let rate = 44_100
        static let frames = 3 * rate

        /// A stage of the render path to run.
        enum Stage: String, CaseIterable, CustomTestStringConvertible {
            case plain, conversion, varispeed, timeDomain, spectral, preEffectsTap, postEffectsTap, siphonTap, loudnessMeter, rampPanMetering
            var testDescription: String { rawValue }
        }

        /// Plays the tone through `sink` with `stage` set up and counts the renders between 0.3 s and
        /// 1 s of playback (heard frames, as `waitForWarmUp` and `waitForEnd` tell).
        /// The 3 s stereo tone every stage plays (the right channel at half the left's level, so
        /// that a mix to mono is not silence).
        static let tone = (0..<frames).flatMap { frame -> [Float] in
            let value = Float(0.3 * sin(2 * Double.pi * 440 * Double(frame) / Double(rate)))
            return [value, 0.5 * value]
        }

        static func steadyState(_ stage: Stage, sink: any AudioSink, convertingTo target: (rate: Double, channels: Int) = (48_000, 1),
                                waitFor: (Int) async -> Bool) async throws -> RenderCounts {
            SoxrConverter.register()
            RubberBandTimePitch.register()
            let format = AudioStreamDescription.float32(sampleRate: Double(rate), channels: 2)
            let sinkFormat: AudioQueue.SinkFormat = stage == .conversion ? .fixed(sampleRate: target.rate, channels: target.channels) : .followDecoded
            // An underrun would mean the counted renders gave silence, which costs nothing.
            let underruns = Lock(0)
            let queue = try AudioQueue(format: format, configuration: .init(sink: sink, sinkFormat: sinkFormat, eventHandler: { event in
                if case .underrun = event { underruns.withLock { $0 += 1 } }
            }))
            defer { queue.dispose(immediately: true) }
            switch stage {
            case .plain, .conversion: break
            case .varispeed, .timeDomain, .spectral:
                try queue.setTimePitch(stage == .varispeed ? .varispeed : stage == .timeDomain ? .timeDomain : .spectral)
                try queue.setParameters(.init(playRate: 1.5, pitch: stage == .spectral ? 200 : nil))
            case .preEffectsTap, .postEffectsTap:
                // A tap that pulls its source and halves it: nothing here allocates.
                try queue.installProcessingTap(stage == .preEffectsTap ? .preEffects : .postEffects) { tap, frames, output, _ in
                    let got = tap.getSourceAudio(frames: frames, into: output)
                    let samples = got.frames * tap.processingFormat.channelsPerFrame
                    for index in 0..<samples { output[index] *= 0.5 }
                    return got.frames
                }
            case .siphonTap:
                try queue.installProcessingTap(.siphon) { _, _, _, _ in 0 }
            case .loudnessMeter:
                // The EBU R128 meter on the output, publishing a reading every 100 ms.
                _ = try queue.installLoudnessMeter()
            case .rampPanMetering:
                try queue.setVolumeRampTime(0.05)
                try queue.setParameters(.init(volume: 0.5, pan: -0.3))
                queue.isLevelMeteringEnabled = true
            }
            var buffers: [AudioQueueBuffer] = []
            defer { withExtendedLifetime(buffers) {} }
            let chunk = 8192 * 2
            for start in stride(from: 0, to: tone.count, by: chunk) {
                let part = tone[start..<min(start + chunk, tone.count)]
                let buffer = try queue.allocateBuffer(capacity: part.count * 4)
                try part.withUnsafeBytes { try buffer.setData($0) }
                try queue.enqueue(buffer)
                buffers.append(buffer)
            }
            _ = try queue.prime()
            RenderThreadObserver.install(aq_render_observed)
            defer { RenderThreadObserver.install(nil) }
            try queue.start()
            #expect(await waitFor(rate * 3 / 10), "playback did not reach 0.3 s")
            aq_counting_arm(queue.renderSourceIdentity)
            let reached = await waitFor(rate)
            let counts = RenderCounts(aq_counting_disarm())
            #expect(reached, "playback did not reach 1 s")
            try queue.stop(immediately: true)
            queue.dispose(immediately: true)   // every event posted so far is handled when it returns
            #expect(underruns.withLock { $0 } == 0, "\(stage): the queue ran dry while it was counted")
            if !counts.isClean { aq_counting_print_sites() }
            return counts
        }

        @Test(arguments: Stage.allCases)
        func theSinkThreadRendersWithoutAllocatingOrWaiting(_ stage: Stage) async throws {
            let sink = NullSink(pacing: .realTime, capturing: true)
            let counts = try await Self.steadyState(stage, sink: sink) { frames in
                await sink.waitForFrames(frames * (stage == .conversion ? 48_000 : Self.rate) / Self.rate, timeout: .seconds(10))
            }
            counts.report("null sink, \(stage)")
            // What the sink was given: the tone itself, bit for bit, where nothing transforms it;
            // at least a second of sound through every stage.
            let heard = trimSilence(sink.capturedSamples(), channels: stage == .conversion ? 1 : 2)
            #expect(heard.count >= (stage == .conversion ? 48_000 : 2 * Self.rate), "\(stage): \(heard.count) samples of sound")
            if stage == .plain || stage == .siphonTap || stage == .loudnessMeter {
                // The tone's first frame is silent, and trimmed with the sink's leading silence.
                #expect(difference(heard, Array(Self.tone.dropFirst(2).prefix(heard.count))) == nil, "\(stage)")
            }
            #expect(counts.renders >= 30, "\(stage): \(counts)")
            #expect(counts.isClean, "\(stage): \(counts)")
        }

        /// The same on ALSA's device thread (ALSASink's own), through ALSA's `pulse` plugin to a
        /// private server: the device has a clock. `snd_pcm_writei` is outside the bracket.
        @Test(.enabled(if: !PrivateServer.missing && ALSAPulsePlugin.path != nil,
                       "pulseaudio or ALSA's pulse plugin is missing (make deps installs pulseaudio and libasound2-plugins)"))
        func alsasDeviceThreadRendersWithoutAllocatingOrWaiting() async throws {
            let server = try await PrivateServer.start()
            try await server.startRecording()
            let sink = ALSASink(configuration: .init(device: "aqrealtime", targetLatency: .milliseconds(40),
                                                     extraConfiguration: ALSAPulsePlugin.configuration(name: "aqrealtime", server: server)))
            let counts = try await Self.steadyState(.plain, sink: sink) { frames in
                await server.waitForSound(frames: frames, timeout: .seconds(10))
            }
            _ = await server.stopRecording()
            counts.report("ALSA, plain")
            #expect(counts.renders >= 20, "\(counts)")
            #expect(counts.isClean, "\(counts)")
        }

        /// The same on PulseAudio's own thread, through a private server, at a 20 ms target latency:
        /// the sink's write callback renders, and its own work (`pa_stream_begin_write`,
        /// `pa_stream_write`) is outside the bracket.
        @Test(.enabled(if: !PrivateServer.missing, "pulseaudio or parec is missing (make deps installs them)"),
              arguments: [Stage.plain, .conversion, .timeDomain])
        func pulseAudiosThreadRendersWithoutAllocatingOrWaiting(_ stage: Stage) async throws {
            // The server plays what the sink plays (48 kHz when the queue converts to it).
            let server = try await PrivateServer.start(rate: stage == .conversion ? 48_000 : Self.rate, channels: 2)
            try await server.startRecording()
            let sink = PulseAudioSink(configuration: .init(server: server.address, device: "out", targetLatency: .milliseconds(20),
                                                           applicationName: "RealtimeTests"))
            let counts = try await Self.steadyState(stage, sink: sink, convertingTo: (48_000, 2)) { frames in
                await server.waitForSound(frames: frames * server.rate / Self.rate, timeout: .seconds(10))
            }
            _ = await server.stopRecording()
            counts.report("PulseAudio, \(stage)")
            #expect(counts.renders >= 20, "\(stage): \(counts)")
            #expect(counts.isClean, "\(stage): \(counts)")
        }

        /// The same on PipeWire's data thread, through a private PipeWire at a 20 ms latency (the
        /// stream at the queue's rate, resampled by PipeWire to the sink's 48 kHz): the sink's
        /// process callback renders, and its own work (dequeuing and queuing the buffer) is
        /// outside the bracket.
        @Test(.enabled(if: !PrivatePipeWire.missing, "PipeWire or WirePlumber is missing (make deps installs them)"),
              arguments: [Stage.plain, .conversion])
        func pipeWiresDataThreadRendersWithoutAllocatingOrWaiting(_ stage: Stage) async throws {
            let server = try await PrivatePipeWire.start()
            try await server.startRecording()
            let sink = PipeWireSink(configuration: .init(remote: server.remote, target: "out", targetLatency: .milliseconds(20),
                                                         applicationName: "RealtimeTests"))
            let counts = try await Self.steadyState(stage, sink: sink, convertingTo: (48_000, 2)) { frames in
                await server.waitForSound(frames: frames * 48_000 / Self.rate, timeout: .seconds(10))
            }
            _ = await server.stopRecording()
            counts.report("PipeWire, \(stage)")
            #expect(counts.renders >= 20, "\(stage): \(counts)")
            #expect(counts.isClean, "\(stage): \(counts)")
        }
    }
}

extension RenderThreadContractTests {
    /// The graph's render side: eight sources (one mono, one at 48 kHz: both converted by the
    /// mixer) → the main mixer → a four-band equaliser → the output, rendered as a sink's thread
    /// would, through the graph's own bracket (`RenderThreadObserver` around each render). Over 200
    /// renders after a warm-up of 100 and before the sources end, nothing is allocated, freed,
    /// waited on or called into the kernel; a band changed while counting glides in without either.
    @Suite(.serialized) struct GraphRenderThreadTests {
        @Test func eightSourcesMixerAndEQRenderWithoutAllocatingOrWaiting() throws {
            SoxrConverter.register()
            let graph = try AudioGraph(sampleRate: 44_100, channels: 2)
            let eq = try AudioEQNode(bands: [.init(.highPass, frequency: 40), .init(.lowShelf, frequency: 150, gain: 3),
                                             .init(.parametric, frequency: 2_500, gain: -4, q: 2), .init(.highShelf, frequency: 8_000, gain: 2)],
                                     sampleRate: 44_100, channels: 2)
            try graph.connect(graph.mainMixer, to: eq)
            let seconds = 4
            for i in 0..<8 {
                let rate = i == 7 ? 48_000 : 44_100, channels = i == 6 ? 1 : 2
                let samples = (0..<(seconds * rate * channels)).map { index in
                    Float(0.05 * sin(2 * Double.pi * Double(220 + 110 * i) * Double(index / channels) / Double(rate)))
                }
                let node = try AudioBufferSourceNode(name: "source \(i)", samples: samples, sampleRate: Double(rate), channels: channels)
                try graph.connect(node, to: graph.mainMixer, volume: 0.5, pan: Float(i - 4) / 8, offsetFrames: 37 * i)
            }
            let block = 512
            var buffer = [Float](repeating: 0, count: block * 2)
            RenderThreadObserver.install(aq_render_observed)
            defer { RenderThreadObserver.install(nil) }
            var renders = 0, counted = 0
            var peak: Float = 0
            var taken: aq_counts?
            try buffer.withUnsafeMutableBufferPointer { out in
                while true {
                    if renders == 100 { aq_counting_arm(graph.renderSourceIdentity) }
                    // Counting ends well before the sources do (their ends drain libsoxr, which may allocate).
                    if renders == 300 { taken = aq_counting_disarm() }
                    if renders == 150 { try eq.setBand(2, to: .init(.parametric, frequency: 1_000, gain: 6, q: 1)) }
                    let n = try graph.render(into: out.baseAddress!, frames: block)
                    if renders >= 100 && renders < 300 {
                        counted += n
                        peak = out.prefix(n * 2).reduce(peak) { max($0, abs($1)) }
                    }
                    if n == 0 { break }
                    renders += 1
                }
            }
            let counts = RenderCounts(try #require(taken, "the sources ended before 300 renders"))
            counts.report("graph: 8 sources, mixer, EQ")
            if !counts.isClean { aq_counting_print_sites() }
            #expect(renders > 300 && counts.renders == 200, "\(counts)")
            #expect(counted == 200 * block && peak > 0.05, "the counted renders carried sound: \(counted) frames, peak \(peak)")
            #expect(counts.isClean, "\(counts)")
        }
    
        /// Live: four queues (one at 48 kHz mono, converted by its queue) as source nodes → the
        /// main mixer → the equaliser → the null sink's real-time thread. Between 0.3 s and 1 s
        /// of playback the sink's thread, inside the graph's renders (the queues' renders nested
        /// in them), allocates, frees, waits on and calls into the kernel for nothing but the
        /// allowed wake of each queue's worker.
        @Test func aLiveGraphOfQueuesRendersWithoutAllocatingOrWaiting() async throws {
            SoxrConverter.register()
            let graph = try AudioGraph(sampleRate: 44_100, channels: 2)
            let eq = try AudioEQNode(bands: [.init(.lowShelf, frequency: 150, gain: 3), .init(.parametric, frequency: 2_500, gain: -4, q: 2)],
                                     sampleRate: 44_100, channels: 2)
            try graph.connect(graph.mainMixer, to: eq)
            var queues: [AudioQueue] = []
            var buffers: [AudioQueueBuffer] = []
            let underruns = Lock(0)
            defer {
                for queue in queues { queue.dispose(immediately: true) }
                withExtendedLifetime(buffers) {}
            }
            for i in 0..<4 {
                let rate = i == 3 ? 48_000 : 44_100, channels = i == 3 ? 1 : 2
                let node = try AudioQueueSourceNode(name: "queue \(i)", sampleRate: 44_100, channels: 2)
                let queue = try AudioQueue(format: .float32(sampleRate: Double(rate), channels: channels),
                                           configuration: .init(sink: node, sinkFormat: node.sinkFormat, eventHandler: { event in
                    if case .underrun = event { underruns.withLock { $0 += 1 } }
                }))
                queues.append(queue)
                let samples = (0..<(3 * rate * channels)).map { index in
                    Float(0.1 * sin(2 * Double.pi * Double(330 + 110 * i) * Double(index / channels) / Double(rate)))
                }
                for start in stride(from: 0, to: samples.count, by: 16_384) {
                    let part = samples[start..<min(start + 16_384, samples.count)]
                    let buffer = try queue.allocateBuffer(capacity: part.count * 4)
                    try part.withUnsafeBytes { try buffer.setData($0) }
                    try queue.enqueue(buffer)
                    buffers.append(buffer)
                }
                _ = try queue.prime()
                try graph.connect(node, to: graph.mainMixer, volume: 0.5)
                try queue.start()
            }
            let sink = NullSink(pacing: .realTime, capturing: true)
            RenderThreadObserver.install(aq_render_observed)
            defer { RenderThreadObserver.install(nil) }
            try graph.start(sink: sink)
            #expect(await sink.waitForFrames(44_100 * 3 / 10, timeout: .seconds(10)), "playback did not reach 0.3 s")
            aq_counting_arm(graph.renderSourceIdentity)
            let reached = await sink.waitForFrames(44_100, timeout: .seconds(10))
            let counts = RenderCounts(aq_counting_disarm())
            graph.stop()
            #expect(reached, "playback did not reach 1 s")
            counts.report("live graph: 4 queues, mixer, EQ, null sink")
            if !counts.isClean { aq_counting_print_sites() }
            #expect(underruns.withLock { $0 } == 0, "a queue ran dry while it was counted")
            let heard = sink.capturedSamples()
            #expect(heard.count >= 44_100 * 2 && heard[(22_050 * 2)...].prefix(44_100).contains { abs($0) > 0.05 }, "the graph gave sound")
            #expect(counts.renders >= 30, "\(counts)")
            // Each queue's render may wake its own worker once (to decode ahead): four a graph render.
            #expect(counts.allocations == 0 && counts.frees == 0 && counts.syscalls == 0 && counts.readWrites == 0 && counts.waits == 0
                        && counts.wakes <= 4 * counts.renders, "\(counts)")
        }
}
}

extension RenderThreadContractTests {
    /// The player with everything at once — a crossfade, ReplayGain from tags, an equaliser before
    /// and after volume, a siphon and the loudness meter — on the null sink's real-time thread:
    /// between 0.3 s and 1.2 s of playback (a crossfade's join inside) the render thread
    /// allocates, frees, waits on and calls into the kernel for nothing but the allowed wake of
    /// the queue's worker.
    @Suite(.serialized, .enabled(if: ["sox", "flac", "metaflac"].allSatisfy { Where.tool($0) != nil }, "sox, flac or metaflac is missing"))
    struct PlayerRenderThreadTests {
        @Test func aCrossfadingPlayerWithGainsEffectsAndAMeterRendersWithoutAllocatingOrWaiting() async throws {
            FLACDecoder.register()
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("rt-player-\(UUID())")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            var items: [AudioPlayerItem] = []
            for (index, gain) in [-3.0, 2.0, -1.0].enumerated() {
                let wav = folder.appendingPathComponent("\(index).wav").path, flac = folder.appendingPathComponent("\(index).flac").path
                for (tool, arguments) in [("sox", ["-r", "44100", "-n", "-r", "44100", "-c", "2", "-b", "16", wav, "synth", "0.7", "sine", "\(440 + 110 * index)", "vol", "0.3"]),
                                          ("flac", ["-s", "-f", wav, "-o", flac]),
                                          ("metaflac", [String(format: "--set-tag=REPLAYGAIN_TRACK_GAIN=%.2f dB", gain), flac])] {
                    let result = try await runTool(try #require(Where.tool(tool)), arguments)
                    #expect(result.status == 0, "\(tool)")
                }
                items.append(.file(flac))
            }
            let sink = NullSink(pacing: .realTime, capturing: true)
            var configuration = AudioPlayer.Configuration(replayGain: ReplayGainSettings(mode: .track, preamp: 2))
            configuration.crossfade = try AudioPlayerCrossfade(seconds: 0.2)
            configuration.effects = [
                .init(position: .preEffects, callback: AudioEqualizer(bands: [.init(.highPass, frequency: 40)]).processingTapCallback),
                .init(position: .postEffects, callback: AudioEqualizer(bands: [.init(.lowShelf, frequency: 150, gain: 3)]).processingTapCallback),
                .init(position: .siphon) { _, frames, _, _ in frames },
            ]
            let player = AudioPlayer(items: items, configuration: configuration) { sink }
            let meter = player.installLoudnessMeter()
            RenderThreadObserver.install(aq_render_observed)
            defer { RenderThreadObserver.install(nil) }
            let playing = Task { try await player.play() }
            #expect(await sink.waitForFrames(44_100 * 3 / 10, timeout: .seconds(10)), "playback did not reach 0.3 s")
            let identity = try #require(player.queue?.renderSourceIdentity)
            aq_counting_arm(identity)
            let reached = await sink.waitForFrames(44_100 * 12 / 10, timeout: .seconds(10))
            let counts = RenderCounts(aq_counting_disarm())
            #expect(reached, "playback did not reach 1.2 s")
            let report = try await playing.value
            counts.report("player: crossfade, ReplayGain, two EQs, a siphon, the loudness meter")
            if !counts.isClean { aq_counting_print_sites() }
            #expect(report.framesPlayed == 3 * 30_870 - 2 * 8_820 && report.isComplete, "\(report)")
            #expect(meter.reading.integrated.isFinite, "the meter measured what played")
            #expect(counts.renders >= 30, "\(counts)")
            #expect(counts.isClean, "\(counts)")
        }
    }
}
