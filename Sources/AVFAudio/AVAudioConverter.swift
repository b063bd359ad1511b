import Foundation
internal import BufferQueue

/// What an input block says about the buffer it returns (Apple's raw values).
public enum AVAudioConverterInputStatus: Int, Sendable {
    /// The buffer holds data.
    case haveData = 0
    /// No data now; more may come (the conversion returns ``AVAudioConverterOutputStatus/inputRanDry``).
    case noDataNow = 1
    /// No more data: the conversion flushes what it holds.
    case endOfStream = 2
}

/// How a conversion with an input block ended (Apple's raw values).
public enum AVAudioConverterOutputStatus: Int, Sendable {
    /// The output buffer holds data (filled, or the last frames before the end).
    case haveData = 0
    /// The input block had no data now; the output holds what could be made (perhaps nothing).
    case inputRanDry = 1
    /// The end was reached and nothing more came out.
    case endOfStream = 2
    /// The conversion failed (the error says why).
    case error = 3
}

/// How a sample-rate converter is primed (Apple's raw values). The converter here always works
/// as ``normal``: the first output frame is the first input frame's time, nothing is lost at
/// the end, and N input frames give round(N × out / in) output frames.
public enum AVAudioConverterPrimeMethod: Int, Sendable {
    case pre = 0
    case normal = 1
    case none = 2
}

/// Leading and trailing frames of a converter's priming (Apple's `AVAudioConverterPrimeInfo`).
public struct AVAudioConverterPrimeInfo: Sendable, Equatable {
    public var leadingFrames: AVAudioFrameCount
    public var trailingFrames: AVAudioFrameCount
    public init() { (leadingFrames, trailingFrames) = (0, 0) }
    public init(leadingFrames: AVAudioFrameCount, trailingFrames: AVAudioFrameCount) {
        self.leadingFrames = leadingFrames
        self.trailingFrames = trailingFrames
    }
}

/// The block a converter pulls input from: the number of packets it wants, and where to say
/// whether data came (Apple's `AVAudioConverterInputBlock`).
public typealias AVAudioConverterInputBlock = (AVAudioPacketCount, UnsafeMutablePointer<AVAudioConverterInputStatus>) -> AVAudioBuffer?

/// Converts PCM between sample formats, interleaving, channel counts and sample rates (Apple's
/// `AVAudioConverter`), with the library's converter: channels mixed by its documented matrix
/// (stereo to mono is (L + R) / 2), rates by libsoxr at very high quality unless
/// ``sampleRateConverterQuality`` asks for less.
///
/// Compressed input is decoded by the library's decoder for its format (the converter's
/// ``magicCookie``, else the input format's, configures it); as Apple's, nothing is trimmed:
/// an encoder's priming frames come out first.
///
/// PCM is encoded into a compressed output format by the library's encoder for it (AAC, ALAC,
/// FLAC, Opus …) in ``convert(to:error:withInputFrom:)`` with an ``AVAudioCompressedBuffer``:
/// set ``bitRate`` first, size the buffer with ``maximumOutputPacketSize``, and hand the
/// decoder at the other end ``magicCookie``; ``primeInfo`` says how many priming frames the
/// encoder put first.
open class AVAudioConverter: NSObject {
    /// The format of the buffers converted from.
    public let inputFormat: AVAudioFormat
    /// The format of the buffers converted to.
    public let outputFormat: AVAudioFormat
    /// How the sample-rate converter is primed (see ``AVAudioConverterPrimeMethod``).
    open var primeMethod: AVAudioConverterPrimeMethod = .normal
    /// The priming frames (the converter here needs none: it is exact at both ends).
    open var primeInfo = AVAudioConverterPrimeInfo()
    /// Whether more channels are mixed down to fewer (the library always mixes by its matrix).
    open var downmix = false
    /// Whether integer output is dithered (it is not: samples are rounded).
    open var dither = false
    /// The sample-rate converter's quality, an ``AVAudioQuality`` raw value (max by default).
    open var sampleRateConverterQuality: Int = AVAudioQuality.max.rawValue {
        didSet { converter = nil }
    }

    /// What a compressed input's decoder needs (nil: the input format's `magicCookie`); when
    /// encoding, what the encoder made for the decoder at the other end (once it exists: after
    /// ``maximumOutputPacketSize`` is read or the first conversion).
    open var magicCookie: Data?

    /// The encoder's bit rate in bits per second, for a compressed output (0: the encoder's
    /// default, as ``AVAudioFile`` uses: 128 kb/s AAC, 96 kb/s Opus). Set it before the first conversion.
    open var bitRate: Int = 0 {
        didSet { if !encodingStarted { encoder = nil } }
    }

    /// The largest packet the encoder makes, in bytes: the `maximumPacketSize` of the
    /// ``AVAudioCompressedBuffer`` to convert into (0 when the output is PCM).
    open var maximumOutputPacketSize: Int {
        guard isEncoding else { return 0 }
        return (try? makeEncoder())?.maximumPacketSize ?? 0
    }

    /// Compressed output: the library's encoder (made when first needed, with ``bitRate``), the
    /// packets it made and not yet handed out.
    private var encoder: AudioEncodingConverter?
    private var encodingStarted = false
    private let encoded = EncodedPackets()

    private var converter: BufferQueue.AudioConverter?
    private let decoded: DecodedAudio
    /// Compressed input: its decoder, and the frames it made before conversion.
    private var decoder: (any AudioDecoder)?
    private var decodedInput: DecodedAudio?
    private var pending: [Float] = []
    private var pendingStart = 0
    private var inputEnded = false
    private var scratch: [Float] = []

    /// A converter between two PCM formats; nil when either is not linear PCM of a common format.
    /// A converter from PCM or a decodable compressed format to PCM; nil when the output is not
    /// linear PCM of a common format, or no decoder is registered for the input's format.
    /// A converter from PCM to a compressed format whose encoder is registered; nil otherwise.
    public init?(from fromFormat: AVAudioFormat, to toFormat: AVAudioFormat) {
        // The decoders, encoders and the resampler, as AVAudioFile has them: Apple's code registers nothing.
        _ = codecsRegistered
        let compressed = fromFormat.streamDescription.pointee.mFormatID != kAudioFormatLinearPCM
        let encoding = toFormat.streamDescription.pointee.mFormatID != kAudioFormatLinearPCM
        if encoding {
            guard !compressed, fromFormat.commonFormat != .otherFormat,
                  AudioEncoderRegistry.shared.factory(for: toFormat.streamDescription.pointee.library.formatID) != nil else { return nil }
        } else if toFormat.commonFormat == .otherFormat {
            return nil
        }
        if compressed {
            guard AudioDecoderRegistry.shared.factory(for: fromFormat.streamDescription.pointee.library.formatID) != nil else { return nil }
        } else if fromFormat.commonFormat == .otherFormat {
            return nil
        }
        inputFormat = fromFormat
        outputFormat = toFormat
        decoded = DecodedAudio(format: .float32(sampleRate: toFormat.sampleRate, channels: Int(toFormat.channelCount)))
        super.init()
        if !compressed && !encoding { guard (try? makeConverter(rate: fromFormat.sampleRate, channels: Int(fromFormat.channelCount))) != nil else { return nil } }
    }

    /// Forgets what is held (a new stream begins: after an end of stream, or a seek).
    open func reset() {
        encoder?.reset()
        encoded.removeAll()
        converter?.reset()
        decoder?.reset()
        decodedInput?.removeAll()
        decoded.removeAll()
        pending.removeAll(keepingCapacity: true)
        pendingStart = 0
        inputEnded = false
    }

    /// Converts all of `inputBuffer` into `outputBuffer`: sample format, interleaving and channel
    /// count, at one sample rate (as Apple's, this call converts no rate: use
    /// ``convert(to:error:withInputFrom:)``).
    /// - Throws: an `NSError` in `NSOSStatusErrorDomain` when the rates differ, a buffer's format
    ///   is not the converter's, or the output cannot hold the input's frames.
    open func convert(to outputBuffer: AVAudioPCMBuffer, from inputBuffer: AVAudioPCMBuffer) throws {
        guard inputFormat.sampleRate == outputFormat.sampleRate else {
            throw statusError(kAudio_ParamError,
                              "convert(to:from:) converts no sample rate (\(inputFormat.sampleRate) to \(outputFormat.sampleRate) Hz): use convert(to:error:withInputFrom:)")
        }
        try check(inputBuffer, is: inputFormat, "input")
        try check(outputBuffer, is: outputFormat, "output")
        let frames = Int(inputBuffer.frameLength)
        guard frames <= Int(outputBuffer.frameCapacity) else {
            throw statusError(kAudio_ParamError, "the output buffer holds \(outputBuffer.frameCapacity) frames, the input has \(frames)")
        }
        reset()
        try feed(inputBuffer)
        try finish()
        try deliver(into: outputBuffer, upTo: frames)
        reset()
    }

    /// Fills `outputBuffer` with converted frames, pulling input from `inputBlock` as needed.
    ///
    /// - Returns: ``AVAudioConverterOutputStatus/haveData`` when the buffer was filled, or holds
    ///   the last frames after the input ended; ``AVAudioConverterOutputStatus/inputRanDry`` when
    ///   the block had no data now; ``AVAudioConverterOutputStatus/endOfStream`` when the input
    ///   ended and nothing more came out; ``AVAudioConverterOutputStatus/error`` with `outError`
    ///   set when a buffer's format is not the converter's or the conversion failed.
    open func convert(to outputBuffer: AVAudioBuffer, error outError: NSErrorPointer,
                      withInputFrom inputBlock: AVAudioConverterInputBlock) -> AVAudioConverterOutputStatus {
        do {
            if isEncoding { return try encode(to: outputBuffer, withInputFrom: inputBlock) }
            guard let output = outputBuffer as? AVAudioPCMBuffer else {
                throw statusError(kAudio_ParamError, "the output buffer is not a PCM buffer: the output format is linear PCM")
            }
            try check(output, is: outputFormat, "output")
            let capacity = Int(output.frameCapacity)
            var ranDry = false
            while pendingFrames < capacity && !inputEnded {
                var status = AVAudioConverterInputStatus.haveData
                let wanted = max(capacity - pendingFrames, 1)
                let buffer = inputBlock(AVAudioPacketCount(clamping: wanted), &status)
                switch status {
                case .haveData:
                    if let packets = buffer as? AVAudioCompressedBuffer, isDecoding {
                        try feed(packets)
                        break
                    }
                    guard let input = buffer as? AVAudioPCMBuffer, !isDecoding else {
                        throw statusError(kAudio_ParamError, "the input block said it had data and returned no \(isDecoding ? "compressed" : "PCM") buffer")
                    }
                    try check(input, is: inputFormat, "input")
                    try feed(input)
                case .noDataNow:
                    ranDry = true
                case .endOfStream:
                    try finish()
                }
                if ranDry { break }
            }
            let delivered = try deliver(into: output, upTo: capacity)
            if ranDry { return .inputRanDry }
            return delivered > 0 || !inputEnded ? .haveData : .endOfStream
        } catch {
            outError?.pointee = error as NSError
            return .error
        }
    }

    // MARK: encoding

    private var isEncoding: Bool { outputFormat.streamDescription.pointee.mFormatID != kAudioFormatLinearPCM }

    /// The library's encoder from interleaved float32 of the input's rate and channels.
    private func makeEncoder() throws -> AudioEncodingConverter {
        if let encoder { return encoder }
        let made = try AudioEncodingConverter(from: .float32(sampleRate: inputFormat.sampleRate, channels: Int(inputFormat.channelCount)),
                                              to: outputFormat.streamDescription.pointee.library,
                                              settings: AudioEncoderSettings(bitRate: bitRate > 0 ? bitRate : nil), quality: quality())
        encoder = made
        magicCookie = made.magicCookie.map { Data($0) }
        primeInfo = AVAudioConverterPrimeInfo(leadingFrames: AVAudioFrameCount(clamping: made.primingFrames), trailingFrames: 0)
        return made
    }

    /// ``convert(to:error:withInputFrom:)`` into a compressed buffer: pulls PCM until the
    /// buffer's packets are made (or the input ran dry or ended), and hands them out.
    private func encode(to outputBuffer: AVAudioBuffer, withInputFrom inputBlock: AVAudioConverterInputBlock) throws -> AVAudioConverterOutputStatus {
        guard let output = outputBuffer as? AVAudioCompressedBuffer,
              output.format.streamDescription.pointee.mFormatID == outputFormat.streamDescription.pointee.mFormatID else {
            throw statusError(kAudio_ParamError, "the output buffer is not a compressed buffer of the converter's \(outputFormat)")
        }
        let encoder = try makeEncoder()
        encodingStarted = true
        let capacity = Int(output.packetCapacity)
        let framesPerPacket = max(encoder.outputFormat.framesPerPacket, 1)
        var ranDry = false
        while encoded.count < capacity && !inputEnded {
            var status = AVAudioConverterInputStatus.haveData
            let buffer = inputBlock(AVAudioPacketCount(clamping: max(capacity - encoded.count, 1) * framesPerPacket), &status)
            switch status {
            case .haveData:
                guard let input = buffer as? AVAudioPCMBuffer else {
                    throw statusError(kAudio_ParamError, "the input block said it had data and returned no PCM buffer")
                }
                try check(input, is: inputFormat, "input")
                try withInterleavedFloats(of: input) { try encoder.convert(floats: $0, into: encoded) }
            case .noDataNow:
                ranDry = true
            case .endOfStream:
                try encoder.finish(into: encoded)
                inputEnded = true
            }
            if ranDry { break }
        }
        let delivered = try deliver(into: output, upTo: capacity)
        if ranDry { return .inputRanDry }
        return delivered > 0 || !inputEnded ? .haveData : .endOfStream
    }

    /// Moves up to `packets` encoded packets into `output` (as many as its bytes hold), with
    /// their descriptions; returns how many.
    private func deliver(into output: AVAudioCompressedBuffer, upTo packets: Int) throws -> Int {
        let constantFrames = Int(outputFormat.streamDescription.pointee.mFramesPerPacket)
        var count = 0, bytes = 0
        while count < packets && count < encoded.count {
            let packet = encoded.packets[count]
            guard bytes + packet.byteCount <= Int(output.byteCapacity) else {
                if count == 0 {
                    throw statusError(kAudio_ParamError, "the output buffer holds \(output.byteCapacity) bytes and the next packet has \(packet.byteCount): "
                        + "size it with maximumOutputPacketSize (\(maximumOutputPacketSize))")
                }
                break
            }
            let source = encoded.bytes(of: count)
            if let base = source.baseAddress { (output.data + bytes).copyMemory(from: base, byteCount: packet.byteCount) }
            output.packetDescriptions?[count] = AudioStreamPacketDescription(
                mStartOffset: Int64(bytes), mVariableFramesInPacket: packet.frames == constantFrames ? 0 : UInt32(clamping: packet.frames),
                mDataByteSize: UInt32(clamping: packet.byteCount))
            bytes += packet.byteCount
            count += 1
        }
        encoded.removeFirst(count)
        output.packetCount = AVAudioPacketCount(count)
        output.byteLength = UInt32(bytes)
        return count
    }

    // MARK: helpers

    private var pendingFrames: Int { (pending.count - pendingStart) / Int(outputFormat.channelCount) }

    private func quality() -> AudioConverterQuality {
        switch sampleRateConverterQuality {
        case ..<AVAudioQuality.low.rawValue: return .quick
        case ..<AVAudioQuality.medium.rawValue: return .low
        case ..<AVAudioQuality.high.rawValue: return .medium
        case ..<AVAudioQuality.max.rawValue: return .high
        default: return .veryHigh
        }
    }

    private var isDecoding: Bool { inputFormat.streamDescription.pointee.mFormatID != kAudioFormatLinearPCM }

    /// The library's converter from frames of `rate` and `channels` to the output format.
    @discardableResult
    private func makeConverter(rate: Double, channels: Int) throws -> BufferQueue.AudioConverter {
        if let converter, converter.inputFormat.sampleRate == rate, converter.inputFormat.channelsPerFrame == channels { return converter }
        let made = try BufferQueue.AudioConverter(from: .float32(sampleRate: rate, channels: channels),
                                                  to: .float32(sampleRate: outputFormat.sampleRate, channels: Int(outputFormat.channelCount)),
                                                  quality: quality())
        converter = made
        return made
    }

    /// Decodes a compressed buffer's packets and converts the frames into the pending output.
    private func feed(_ input: AVAudioCompressedBuffer) throws {
        let format = inputFormat.streamDescription.pointee
        let decoder: any AudioDecoder
        if let made = self.decoder {
            decoder = made
        } else {
            let cookie = (magicCookie ?? inputFormat.magicCookie).map { [UInt8]($0) }
            decoder = try AudioDecoderRegistry.shared.makeDecoder(for: format.library, magicCookie: cookie)
            self.decoder = decoder
        }
        let frames = decodedInput ?? DecodedAudio(format: decoder.outputFormat)
        decodedInput = frames
        let length = Int(input.byteLength)
        for index in 0..<Int(input.packetCount) {
            let (offset, size, count): (Int, Int, Int)
            if let descriptions = input.packetDescriptions {
                let description = descriptions[index]
                (offset, size, count) = (Int(description.mStartOffset), Int(description.mDataByteSize),
                                         Int(description.mVariableFramesInPacket == 0 ? format.mFramesPerPacket : description.mVariableFramesInPacket))
            } else {
                (offset, size, count) = (index * Int(format.mBytesPerPacket), Int(format.mBytesPerPacket), Int(format.mFramesPerPacket))
            }
            guard offset >= 0, size >= 0, offset + size <= length else {
                throw statusError(kAudio_ParamError, "packet \(index) lies at bytes \(offset)..<\(offset + size), past the buffer's \(length) bytes")
            }
            try decoder.decode(packet: UnsafeRawBufferPointer(start: input.data + offset, count: size), frames: count, into: frames)
        }
        try convertDecodedInput()
    }

    /// Converts what the decoder made into the pending output.
    private func convertDecodedInput() throws {
        guard let frames = decodedInput, frames.sampleCount > 0 else { return }
        let converter = try makeConverter(rate: frames.format.sampleRate, channels: frames.format.channelsPerFrame)
        try frames.withUnsafeSamples { try converter.convert($0, into: decoded) }
        frames.removeAll()
        takeDecoded()
    }

    /// Runs `body` with `input`'s frames interleaved as float32 (in the scratch memory); not at all for an empty buffer.
    private func withInterleavedFloats(of input: AVAudioPCMBuffer, _ body: (UnsafeBufferPointer<Float>) throws -> Void) rethrows {
        let frames = Int(input.frameLength), channels = Int(inputFormat.channelCount)
        guard frames > 0 else { return }
        if scratch.count < frames * channels { scratch = [Float](repeating: 0, count: frames * channels) }
        try scratch.withUnsafeMutableBufferPointer { samples in
            guard let base = samples.baseAddress else { return }
            input.interleavedFloats(into: base, from: 0, count: frames)
            try body(UnsafeBufferPointer(rebasing: samples[0..<(frames * channels)]))
        }
    }

    private func check(_ buffer: AVAudioPCMBuffer, is format: AVAudioFormat, _ side: String) throws {
        guard buffer.format.holdsSamples(as: format) else { throw statusError(kAudio_ParamError, "the \(side) buffer's format \(buffer.format) is not the converter's \(format)") }
    }

    /// Converts a buffer's frames into the pending output.
    private func feed(_ input: AVAudioPCMBuffer) throws {
        let converter = try makeConverter(rate: inputFormat.sampleRate, channels: Int(inputFormat.channelCount))
        try withInterleavedFloats(of: input) { try converter.convert($0, into: decoded) }
        takeDecoded()
    }

    /// The input ended: what the converter holds comes out.
    private func finish() throws {
        if let decoder, let frames = decodedInput {
            try decoder.finish(into: frames)
            try convertDecodedInput()
        }
        try converter?.finish(into: decoded)
        takeDecoded()
        inputEnded = true
    }

    private func takeDecoded() {
        if pendingStart > 0 && pendingStart * 2 >= pending.count {
            pending.removeFirst(pendingStart)
            pendingStart = 0
        }
        decoded.withUnsafeSamples { pending.append(contentsOf: $0) }
        decoded.removeAll()
    }

    /// Moves up to `frames` pending frames into `output`; returns how many.
    @discardableResult
    private func deliver(into output: AVAudioPCMBuffer, upTo frames: Int) throws -> Int {
        let count = min(frames, pendingFrames), channels = Int(outputFormat.channelCount)
        pending.withUnsafeBufferPointer { samples in
            if let base = samples.baseAddress { output.setInterleavedFloats(base + pendingStart, at: 0, count: count) }
        }
        output.frameLength = AVAudioFrameCount(count)
        pendingStart += count * channels
        return count
    }
}
