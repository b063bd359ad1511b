import Dispatch
/// The gapless numbers of an encoded stream: what a container writes so that a reader plays
/// exactly the valid frames (`priming + valid + remainder` = the frames the packets decode to).
public struct AudioEncodingTotals: Hashable, Sendable {
    /// Frames of audio encoded (the client's frames, at the encoder's rate).
    public var validFrames: Int64
    /// Frames of the encoder's delay at the start.
    public var primingFrames: Int
    /// Frames of padding at the end of the last packet.
    public var remainderFrames: Int

    /// Totals of `validFrames`, with `primingFrames` before and `remainderFrames` after.
    public init(validFrames: Int64, primingFrames: Int, remainderFrames: Int) {
        self.validFrames = validFrames
        self.primingFrames = primingFrames
        self.remainderFrames = remainderFrames
    }
}

/// The converter's encode direction: linear PCM of any layout, rate and channel count in,
/// packets of a compressed (or PCM) format out, with the gapless numbers counted.
///
/// Frames are converted to what the encoder takes: bit for bit when the client's samples already
/// are in the encoder's layout (integers to a lossless encoder stay integers); otherwise through
/// 32-bit float, reordered to the codec's channel order when the client's layout is known, and
/// through an ``AudioConverter`` when the rate or channel count differs (exact lengths, so a
/// resampled encode still has `round(N × out / in)` valid frames).
///
/// After ``finish(into:)`` the numbers a container writes are final: ``validFrames`` (the frames
/// given to the encoder), ``primingFrames`` (the encoder's delay) and ``remainderFrames`` (the
/// padding of the last packet): priming + valid + remainder = the frames the packets decode to.
/// One instance serves one stream from one thread at a time.
public final class AudioEncodingConverter {
    /// The client's PCM.
    public let inputFormat: AudioStreamDescription
    /// The packets' format.
    public var outputFormat: AudioStreamDescription { encoder.outputFormat }
    /// The encoder doing the work.
    public let encoder: any AudioEncoder
    /// What the layers around the encoder may rely on.
    public let traits: AudioEncoderTraits
    /// The speakers of the encoded channels: the codec's order when it has one, else the
    /// client's layout (when the channel count is kept).
    public let channelLayout: AudioChannelLayout?

    private let clientLayout: PCMSampleLayout
    private let encoderLayout: PCMSampleLayout
    private let resampler: AudioConverter?
    /// For each channel given to the encoder, the client channel it comes from.
    private let reorder: [Int]?
    private let passThrough: Bool
    private let clientChannels: Int
    private let encoderChannels: Int
    private static let blockFrames = 4096
    private var floats: [Float]
    private var shuffled: [Float]
    private var converted: DecodedAudio?
    private var encoderBytes: [UInt8]
    /// More encoders of the same stream for parallel rounds (empty: one encoder), the input
    /// waiting for a round, and each encoder's packets of the round.
    private let helpers: [any AudioEncoder]
    private var roundInput: [UInt8] = []
    private var roundOutputs: [EncodedPackets] = []
    /// Packets a job takes in a round.
    private static let packetsPerJob = 32

    /// Client frames taken.
    public private(set) var inputFrames: Int64 = 0
    /// Frames given to the encoder: the valid frames of the stream.
    public private(set) var validFrames: Int64 = 0
    /// Frames the packets made so far decode to.
    public private(set) var packetFrames: Int64 = 0
    /// Whether ``finish(into:)`` has ended the stream (the numbers are final).
    public private(set) var isFinished = false

    /// Frames of encoder delay at the start of the decoded packets.
    public var primingFrames: Int { encoder.primingFrames }
    /// The padding of the last packet (final after ``finish(into:)``).
    public var remainderFrames: Int { max(0, Int(packetFrames - Int64(primingFrames) - validFrames)) }
    /// The gapless numbers so far (final after ``finish(into:)``).
    public var totals: AudioEncodingTotals {
        AudioEncodingTotals(validFrames: validFrames, primingFrames: primingFrames, remainderFrames: remainderFrames)
    }
    /// What a decoder needs besides the packets (final after ``finish(into:)``).
    public var magicCookie: [UInt8]? { encoder.magicCookie }
    /// The largest packet the encoder makes.
    public var maximumPacketSize: Int { encoder.maximumPacketSize }
    /// Encoders at work at once: `jobs` for a format whose packets stand alone, else 1.
    public var encodingJobs: Int { helpers.count + 1 }

    /// - Parameters:
    ///   - client: the client's interleaved linear PCM (any ``PCMSampleLayout``).
    ///   - clientLayout: the speakers of the client's channels, when known: frames are reordered to
    ///     the codec's order.
    ///   - format: the format to encode: its id, and a rate and channel count (0 for the client's);
    ///     `bitsPerChannel` asks the lossless codecs for a bit depth (0: the client's integer depth,
    ///     or 24 for a float client where 24 is possible, else 16). An encoder may take another rate
    ///     (Opus encodes at 48 kHz); the frames are resampled to it.
    ///   - settings: bit rate, quality, packet size.
    ///   - containerLayout: the order a container wants the channels in when the codec has none
    ///     of its own (WAV's speaker order for PCM); with a `clientLayout`, frames are reordered to it.
    ///   - jobs: encoders working at once, for a format whose packets encode on their own
    ///     (``AudioEncoderTraits/independentPackets``: ALAC, WAV IMA ADPCM …): blocks of whole
    ///     packets go to `jobs` encoders on threads of their own, and the packets come out in order,
    ///     the same bytes as one encoder's. Other formats use one. The calling thread waits for
    ///     each round, so call it from a thread of your own, never from Swift's cooperative pool.
    ///   - quality: the resampler's quality, when the encoder takes another rate.
    ///   - encoders: where the encoder is found.
    ///   - resamplers: where the resampler is found.
    /// - Throws: ``AudioQueueError/Code/codecNotFound`` when no encoder (or, for a rate change,
    ///   no resampler) is registered; what the encoder throws for settings it cannot take.
    public init(from client: AudioStreamDescription, clientLayout: AudioChannelLayout? = nil, to format: AudioStreamDescription,
                settings: AudioEncoderSettings = .init(), containerLayout: AudioChannelLayout? = nil, quality: AudioConverterQuality = .veryHigh,
                encoders: AudioEncoderRegistry = .shared, resamplers: AudioResamplerRegistry = .shared, jobs: Int = 1) throws {
        self.clientLayout = try PCMSampleLayout(client)
        var target = format
        if target.sampleRate <= 0 { target.sampleRate = client.sampleRate }
        if target.channelsPerFrame <= 0 { target.channelsPerFrame = client.channelsPerFrame }
        if target.bitsPerChannel == 0 && !target.isLinearPCM {
            target.bitsPerChannel = client.formatFlags.contains(.isFloat) ? 24 : max(16, client.bitsPerChannel)
        }
        let encoder = try encoders.makeEncoder(for: target, settings: settings)
        self.encoder = encoder
        traits = encoders.factory(for: target.formatID)?.traits ?? .dependent
        if jobs > 1, encoder.outputFormat.framesPerPacket > 0, traits.independentPackets(encoder.outputFormat) {
            helpers = try (1..<jobs).map { _ in try encoders.makeEncoder(for: target, settings: settings) }
        } else {
            helpers = []
        }
        inputFormat = client
        let input = encoder.inputFormat
        encoderLayout = try PCMSampleLayout(input)
        clientChannels = client.channelsPerFrame
        encoderChannels = input.channelsPerFrame
        var order: [Int]?
        let wanted = encoder.channelLayout ?? containerLayout
        if clientChannels == encoderChannels, clientChannels > 1, let from = clientLayout, let to = wanted,
           from.channelCount == clientChannels, to.channelCount == encoderChannels {
            let sources = to.channelLabels.map { label in from.channelLabels.firstIndex(of: label) }
            let found = sources.compactMap { $0 }
            if found.count == encoderChannels, Set(found).count == encoderChannels, found != Array(0..<encoderChannels) { order = found }
        }
        reorder = order
        channelLayout = order != nil ? wanted : encoder.channelLayout ?? (clientChannels == encoderChannels ? clientLayout : nil)
        if client.sampleRate != input.sampleRate || clientChannels != encoderChannels {
            resampler = try AudioConverter(from: client, to: input, quality: quality, registry: resamplers)
        } else {
            resampler = nil
        }
        passThrough = resampler == nil && order == nil && self.clientLayout == encoderLayout
        floats = passThrough ? [] : Array(repeating: 0, count: Self.blockFrames * clientChannels)
        shuffled = order == nil ? [] : Array(repeating: 0, count: Self.blockFrames * clientChannels)
        converted = resampler.map { DecodedAudio(format: $0.outputFormat, capacityFrames: Self.blockFrames * 2) }
        encoderBytes = encoderLayout.isNativeFloat32 ? [] : Array(repeating: 0, count: Self.blockFrames * 4 * encoderChannels * 2)
    }

    /// Converts and encodes whole client frames (a trailing partial frame is ignored), appending
    /// the packets that are complete to `output`.
    public func convert(_ bytes: UnsafeRawBufferPointer, into output: EncodedPackets) throws {
        let frameBytes = inputFormat.bytesPerFrame
        let frames = bytes.count / frameBytes
        guard frames > 0, let base = bytes.baseAddress else { return }
        inputFrames += Int64(frames)
        let before = output.frameCount
        defer { packetFrames += Int64(output.frameCount - before) }
        if passThrough {
            try feed(UnsafeRawBufferPointer(start: base, count: frames * frameBytes), into: output)
            validFrames += Int64(frames)
            return
        }
        var done = 0
        while done < frames {
            let count = min(Self.blockFrames, frames - done)
            let samples = count * clientChannels
            try floats.withUnsafeMutableBufferPointer { floats in
                guard let target = floats.baseAddress else { return }
                clientLayout.toFloat(base + done * frameBytes, count: samples, into: target)
                try process(UnsafeBufferPointer(start: target, count: samples), into: output)
            }
            done += count
        }
    }

    /// Converts and encodes interleaved float frames of the client's rate and channel count (a
    /// float front end, whatever the client's sample layout).
    public func convert(floats input: UnsafeBufferPointer<Float>, into output: EncodedPackets) throws {
        let frames = input.count / clientChannels
        guard frames > 0 else { return }
        inputFrames += Int64(frames)
        let before = output.frameCount
        defer { packetFrames += Int64(output.frameCount - before) }
        var done = 0
        while done < frames {
            let count = min(Self.blockFrames, frames - done)
            try process(UnsafeBufferPointer(rebasing: input[(done * clientChannels)..<((done + count) * clientChannels)]), into: output)
            done += count
        }
    }

    /// Ends the stream: the resampler's and the encoder's tails, the last packet padded. The
    /// gapless numbers are final afterwards.
    public func finish(into output: EncodedPackets) throws {
        let before = output.frameCount
        defer { packetFrames += Int64(output.frameCount - before) }
        if let resampler, let converted {
            converted.removeAll()
            try resampler.finish(into: converted)
            try encodeConverted(converted, into: output)
        }
        try finishEncoding(into: output)
        isFinished = true
    }

    /// Forgets the stream (an input queue's reset, or a new recording with the same encoder): what
    /// the encoder holds is encoded and dropped, the counts start again.
    public func reset() {
        // An encoder that has had nothing, or was finished, holds nothing.
        if inputFrames > 0 && !isFinished {
            let dropped = EncodedPackets()
            try? finishEncoding(into: dropped)
        }
        resampler?.reset()
        converted?.removeAll()
        roundInput.removeAll()
        inputFrames = 0
        validFrames = 0
        packetFrames = 0
        isFinished = false
    }

    /// Hands encoder input to the encoder, or collects it for a parallel round.
    private func feed(_ bytes: UnsafeRawBufferPointer, into output: EncodedPackets) throws {
        guard !helpers.isEmpty else { return try encoder.encode(bytes, into: output) }
        roundInput.append(contentsOf: bytes)
        let sliceBytes = Self.packetsPerJob * encoder.outputFormat.framesPerPacket * encoder.inputFormat.bytesPerFrame
        let roundBytes = sliceBytes * (helpers.count + 1)
        if roundInput.count >= roundBytes {
            try runRound(bytes: roundBytes, sliceBytes: sliceBytes, into: output)
        }
    }

    /// Encodes the first `bytes` of the round's input, a slice of whole packets per encoder at
    /// once, and appends their packets in order.
    private func runRound(bytes: Int, sliceBytes: Int, into output: EncodedPackets) throws {
        let all = [encoder] + helpers
        if roundOutputs.count != all.count { roundOutputs = all.map { _ in EncodedPackets() } }
        let outputs = roundOutputs
        let failures = Lock<[any Error]>([])
        try roundInput.withUnsafeBytes { input in
            let slices = (0..<all.count).map { index in
                let start = min(index * sliceBytes, bytes)
                return UnsafeRawBufferPointer(rebasing: input[start..<min(start + sliceBytes, bytes)])
            }
            let work = ParallelSlices(encoders: all, slices: slices, outputs: outputs, failures: failures)
            DispatchQueue.concurrentPerform(iterations: all.count) { work.run($0) }
            if let failure = failures.withLock({ $0.first }) { throw failure }
        }
        roundInput.removeFirst(bytes)
        for packets in outputs {
            for index in 0..<packets.count { output.append(packets.bytes(of: index), frames: packets.packets[index].frames) }
            packets.removeAll()
        }
    }

    /// Ends the encoding: the last round's input in slices of whole packets (the last one short),
    /// then every encoder finished in order, their statistics merged into the first.
    private func finishEncoding(into output: EncodedPackets) throws {
        guard !helpers.isEmpty else { return try encoder.finish(into: output) }
        let packetBytes = encoder.outputFormat.framesPerPacket * encoder.inputFormat.bytesPerFrame
        let count = roundInput.count
        // Packets left, the partial one included, shared out in whole packets.
        let packets = (count + packetBytes - 1) / packetBytes
        let perJob = (packets + helpers.count) / (helpers.count + 1) * packetBytes
        if count > 0 {
            // Only the last slice may end inside a packet: it goes to the encoder finished last.
            try runRound(bytes: count, sliceBytes: max(perJob, packetBytes), into: output)
        }
        for other in helpers { try other.finish(into: output) }
        try encoder.finish(into: output)
        encoder.mergeStatistics(of: helpers)
    }

    /// Reorders, resamples and encodes float frames of the client's channel count (at most a block).
    private func process(_ samples: UnsafeBufferPointer<Float>, into output: EncodedPackets) throws {
        var source = samples
        if let reorder {
            let frames = samples.count / clientChannels
            shuffled.withUnsafeMutableBufferPointer { out in
                for frame in 0..<frames {
                    for (channel, from) in reorder.enumerated() { out[frame * clientChannels + channel] = samples[frame * clientChannels + from] }
                }
            }
            source = shuffled.withUnsafeBufferPointer { UnsafeBufferPointer(rebasing: $0[0..<samples.count]) }
        }
        if let resampler, let converted {
            converted.removeAll()
            try resampler.convert(source, into: converted)
            try encodeConverted(converted, into: output)
        } else {
            try encodeFloats(source, into: output)
        }
    }

    private func encodeConverted(_ block: DecodedAudio, into output: EncodedPackets) throws {
        try block.withUnsafeSamples { try encodeFloats($0, into: output) }
        block.removeAll()
    }

    /// Puts float frames of the encoder's rate and channels in its layout and encodes them.
    private func encodeFloats(_ samples: UnsafeBufferPointer<Float>, into output: EncodedPackets) throws {
        guard let base = samples.baseAddress else { return }
        if encoderLayout.isNativeFloat32 {
            try feed(UnsafeRawBufferPointer(samples), into: output)
            validFrames += Int64(samples.count / encoderChannels)
            return
        }
        let sampleBytes = encoderLayout.bytesPerSample
        let perBlock = encoderBytes.count / sampleBytes / encoderChannels * encoderChannels
        var done = 0
        while done < samples.count {
            let count = min(perBlock, samples.count - done)
            try encoderBytes.withUnsafeMutableBytes { bytes in
                guard let target = bytes.baseAddress else { return }
                encoderLayout.fromFloat(base + done, count: count, into: target)
                try feed(UnsafeRawBufferPointer(start: target, count: count * sampleBytes), into: output)
            }
            validFrames += Int64(count / encoderChannels)
            done += count
        }
    }
}

/// One parallel round: each encoder encodes its slice into its own packets. Sendable by
/// construction: each slice's job is claimed by the one iteration that runs it.
private final class ParallelSlices: Sendable {
    /// An encoder, the bytes it encodes, and where its packets go.
    struct Job {
        let encoder: any AudioEncoder
        let slice: UnsafeRawBufferPointer
        let output: EncodedPackets
    }
    let jobs: [ClaimedState<Job>]
    let failures: Lock<[any Error]>

    init(encoders: [any AudioEncoder], slices: [UnsafeRawBufferPointer], outputs: [EncodedPackets], failures: Lock<[any Error]>) {
        jobs = encoders.indices.map { ClaimedState(Job(encoder: encoders[$0], slice: slices[$0], output: outputs[$0])) }
        self.failures = failures
    }

    func run(_ index: Int) {
        let failure = jobs[index].withClaim { job -> (any Error)? in
            guard !job.slice.isEmpty else { return nil }
            do { try job.encoder.encode(job.slice, into: job.output) } catch { return error }
            return nil
        }
        if let error = failure ?? nil { failures.withLock { $0.append(error) } }
    }
}
