/// The decoder settings an Apple Lossless stream carries in its magic cookie (`ALACSpecificConfig`).
///
/// The cookie is 24 big-endian bytes: frame length (4), compatible version (1), bit depth (1),
/// the entropy coder's history multiplier `pb`, initial history `mb` and rice limit `kb` (1 each),
/// channels (1), maximum run (2), maximum frame bytes (4), average bit rate (4), sample rate (4).
/// MP4 and CAF files wrap it in an `alac` atom (with version and flags), sometimes after a
/// `frma` atom; ``init(cookie:)`` accepts all three forms.
public struct ALACSpecificConfig: Hashable, Sendable {
    /// Frames per packet (4096 by default).
    public var frameLength: Int
    /// The ALAC version the stream is compatible with (0).
    public var compatibleVersion: Int
    /// Bits per sample: 16, 20, 24 or 32.
    public var bitDepth: Int
    /// The adaptive Golomb coder's history multiplier (`pb`).
    public var historyMultiplier: Int
    /// The adaptive Golomb coder's initial history (`mb`).
    public var initialHistory: Int
    /// The adaptive Golomb coder's rice parameter limit (`kb`).
    public var riceLimit: Int
    /// Channels, 1–8.
    public var channels: Int
    /// The longest run of a value the coder writes (255).
    public var maxRun: Int
    /// The largest packet in bytes (0: not known).
    public var maxFrameBytes: Int
    /// The average bit rate in bits per second (0: not known).
    public var averageBitRate: Int
    /// Frames per second.
    public var sampleRate: Int

    /// The most frames a packet may hold that the decoder accepts.
    public static let maximumFrameLength = 1 << 16

    /// Reads the configuration from a magic cookie; nil when it holds none or the values are not
    /// ones a decoder can use (bit depth 16, 20, 24 or 32; 1–8 channels; frame length 1–65 536).
    public init?(cookie: [UInt8]) {
        var offset = 0
        func tag(at position: Int) -> String? {
            guard position + 8 <= cookie.count else { return nil }
            return String(decoding: cookie[(position + 4)..<(position + 8)], as: UTF8.self)
        }
        if tag(at: offset) == "frma" { offset += 12 }
        if tag(at: offset) == "alac" { offset += 12 }
        guard offset + 24 <= cookie.count else { return nil }
        func u32(_ at: Int) -> Int {
            Int(cookie[offset + at]) << 24 | Int(cookie[offset + at + 1]) << 16 | Int(cookie[offset + at + 2]) << 8 | Int(cookie[offset + at + 3])
        }
        frameLength = u32(0)
        compatibleVersion = Int(cookie[offset + 4])
        bitDepth = Int(cookie[offset + 5])
        historyMultiplier = Int(cookie[offset + 6])
        initialHistory = Int(cookie[offset + 7])
        riceLimit = Int(cookie[offset + 8])
        channels = Int(cookie[offset + 9])
        maxRun = Int(cookie[offset + 10]) << 8 | Int(cookie[offset + 11])
        maxFrameBytes = u32(12)
        averageBitRate = u32(16)
        sampleRate = u32(20)
        guard compatibleVersion == 0, [16, 20, 24, 32].contains(bitDepth), (1...8).contains(channels),
              (1...Self.maximumFrameLength).contains(frameLength), (1...31).contains(riceLimit) else { return nil }
    }
}

/// Decodes Apple Lossless (`'alac'`), 16-, 20-, 24- and 32-bit, 1–8 channels, bit-exact.
///
/// A packet is a sequence of elements, each one channel (SCE, LFE) or a channel pair (CPE), ended
/// by an END element. An element holds per channel a prediction mode, quantization shift, history
/// factor and up to 31 predictor coefficients; its residuals are coded with an adaptive
/// Golomb-Rice code (with runs of zeros coded as counts); an adaptive FIR predictor (whose
/// coefficients follow the sign of each residual) restores the samples; a pair is decorrelated
/// from mid/side-like weighted sums; samples deeper than 16 bits may carry their low bytes
/// uncompressed ("shifted" bytes). An element may instead hold the samples uncompressed.
///
/// Channels come out in the order of the elements, which is the order Apple's layouts for ALAC
/// give them (for 3–6 channels: centre, left, right, then surrounds and LFE, as for AAC).
/// Samples are scaled by 1 / 2^(bitDepth − 1).
public final class ALACDecoder: AudioDecoder {
    public let outputFormat: AudioStreamDescription
    /// The configuration read from the magic cookie.
    public let config: ALACSpecificConfig
    private let scale: Float
    private let capacity: Int
    /// Residuals (per channel of a pair), restored samples, and shifted-off low bits.
    private let residualU, residualV, mixU, mixV: UnsafeMutablePointer<Int32>
    private let shiftedU, shiftedV: UnsafeMutablePointer<UInt32>
    /// Each channel's predictor coefficients (at most 31), adapted as the element decodes.
    private let coefficientsU, coefficientsV: UnsafeMutablePointer<Int16>
    /// The packet's bytes with zero padding, so bit reads need no bounds test.
    private var packetBytes: UnsafeMutablePointer<UInt8>
    private var packetCapacity: Int

    /// - Throws: ``AudioQueueError/Code/invalidPropertyValue`` when the cookie is missing or
    ///   unusable, or disagrees with the format's channel count.
    public init(format: AudioStreamDescription, magicCookie: [UInt8]?) throws {
        guard format.formatID == .appleLossless else {
            throw AudioQueueError(.codecNotFound, "\(format.formatID) is not Apple Lossless")
        }
        guard let cookie = magicCookie else {
            throw AudioQueueError(.invalidPropertyValue, "Apple Lossless needs its magic cookie (the ALACSpecificConfig); none was given")
        }
        guard let config = ALACSpecificConfig(cookie: cookie) else {
            throw AudioQueueError(.invalidPropertyValue,
                "the Apple Lossless magic cookie (\(cookie.count) bytes) holds no usable ALACSpecificConfig (16/20/24/32-bit, 1–8 channels, frame length 1–\(ALACSpecificConfig.maximumFrameLength))")
        }
        guard format.channelsPerFrame == 0 || format.channelsPerFrame == config.channels else {
            throw AudioQueueError(.invalidPropertyValue,
                "the stream says \(format.channelsPerFrame) channels but its Apple Lossless cookie says \(config.channels)")
        }
        self.config = config
        let rate = format.sampleRate > 0 ? format.sampleRate : Double(config.sampleRate)
        outputFormat = .float32(sampleRate: rate, channels: config.channels)
        scale = Float(sign: .plus, exponent: -(config.bitDepth - 1), significand: 1)
        capacity = config.frameLength
        residualU = .allocate(capacity: capacity); residualV = .allocate(capacity: capacity)
        mixU = .allocate(capacity: capacity); mixV = .allocate(capacity: capacity)
        shiftedU = .allocate(capacity: capacity); shiftedV = .allocate(capacity: capacity)
        coefficientsU = .allocate(capacity: 32); coefficientsV = .allocate(capacity: 32)
        packetCapacity = max(config.maxFrameBytes, 4096) + 16
        packetBytes = .allocate(capacity: packetCapacity)
    }

    deinit {
        for buffer in [residualU, residualV, mixU, mixV] { buffer.deallocate() }
        shiftedU.deallocate(); shiftedV.deallocate()
        coefficientsU.deallocate(); coefficientsV.deallocate()
        packetBytes.deallocate()
    }

    /// The registry entry for Apple Lossless.
    /// Every packet decodes on its own: no pre-roll, and pieces decoded apart join exactly.
    public static let factory = AudioDecoderFactory(name: "Apple Lossless", formats: [.appleLossless], traits: .independentPackets) { format, cookie in
        try ALACDecoder(format: format, magicCookie: cookie)
    }

    public func finish(into output: DecodedAudio) throws {}
    public func reset() {}

    public func decode(packet: UnsafeRawBufferPointer, frames: Int, into output: DecodedAudio) throws {
        guard !packet.isEmpty else { return }
        if packet.count + 16 > packetCapacity {
            packetBytes.deallocate()
            packetCapacity = packet.count + 16
            packetBytes = .allocate(capacity: packetCapacity)
        }
        guard let source = packet.bindMemory(to: UInt8.self).baseAddress else { return }
        packetBytes.update(from: source, count: packet.count)
        (packetBytes + packet.count).update(repeating: 0, count: 16)
        let space = output.reserve(frames: capacity)
        do {
            let count = try decodeElements(BitCursor(packetBytes, byteCount: packet.count), into: space)
            output.commit(frames: count)
        } catch let error as AudioQueueError {
            let silent = min(frames > 0 ? frames : capacity, capacity)
            space.update(repeating: 0)
            output.commit(frames: silent)
            output.reportError(error)
        }
    }

    // MARK: elements

    private enum Element: UInt32 {
        case single = 0, pair = 1, coupling = 2, lfe = 3, data = 4, programConfig = 5, fill = 6, end = 7
    }

    /// Decodes every element of a packet into `space`; returns the frames decoded.
    private func decodeElements(_ start: BitCursor, into space: UnsafeMutableBufferPointer<Float>) throws -> Int {
        var bits = start
        var channel = 0
        var frames: Int?
        while true {
            guard bits.position + 3 <= bits.limit else { throw Self.damaged("the packet ends before its END element") }
            let raw = bits.read(3)
            guard let element = Element(rawValue: raw) else { throw Self.damaged("unknown element \(raw)") }
            switch element {
            case .single, .lfe, .pair:
                let width = element == .pair ? 2 : 1
                guard channel + width <= config.channels else {
                    throw Self.damaged("the packet holds more than the \(config.channels) channels its cookie declares")
                }
                let count = try decodeChannels(width, &bits, defaultFrames: frames ?? capacity)
                if let frames, frames != count {
                    throw Self.damaged("its elements disagree on the frame count (\(frames) and \(count))")
                }
                frames = count
                write(width, frames: count, channel: channel, into: space)
                channel += width
            case .data:
                _ = bits.read(4)
                let aligned = bits.read(1) != 0
                var count = Int(bits.read(8))
                if count == 255 { count += Int(bits.read(8)) }
                if aligned { bits.alignToByte() }
                bits.position += count * 8
            case .fill:
                var count = Int(bits.read(4))
                if count == 15 { count += Int(bits.read(8)) - 1 }
                bits.position += count * 8
            case .end:
                guard bits.position <= bits.limit else { throw Self.damaged("its elements run past the end of the packet") }
                guard channel == config.channels, let frames else {
                    throw Self.damaged("the packet decodes \(channel) of the \(config.channels) channels its cookie declares")
                }
                return frames
            case .coupling, .programConfig:
                throw Self.damaged("element type \(raw) is not used by Apple Lossless")
            }
            guard bits.position <= bits.limit else { throw Self.damaged("an element runs past the end of the packet") }
        }
    }

    /// One channel's prediction settings; its coefficients go to `coefficients`.
    private struct ChannelHeader {
        let mode, quantization, historyFactor, order: Int
        let coefficients: UnsafeMutablePointer<Int16>

        init(_ bits: inout BitCursor, coefficients: UnsafeMutablePointer<Int16>) {
            let first = bits.read(8), second = bits.read(8)
            mode = Int(first >> 4)
            quantization = Int(first & 0x0F)
            historyFactor = Int(second >> 5)
            order = Int(second & 0x1F)
            self.coefficients = coefficients
            for index in 0..<order { coefficients[index] = Int16(truncatingIfNeeded: bits.read(16)) }
        }
    }

    /// Decodes one SCE/LFE (`width` 1, into `mixU`) or CPE (`width` 2, `mixU` and `mixV`, already
    /// recombined to left and right); returns its frame count.
    private func decodeChannels(_ width: Int, _ bits: inout BitCursor, defaultFrames: Int) throws -> Int {
        _ = bits.read(4)   // element instance tag
        guard bits.read(12) == 0 else { throw Self.damaged("an element's reserved header bits are not zero") }
        let flags = bits.read(4)
        let partial = flags & 8 != 0, shiftedBytes = Int((flags >> 1) & 3), uncompressed = flags & 1 != 0
        guard shiftedBytes != 3 else { throw Self.damaged("an element shifts off 3 bytes") }
        var frames = capacity
        if partial {
            frames = Int(bits.read(32))
            guard frames >= 1, frames <= capacity else {
                throw Self.damaged("an element holds \(frames) frames; the cookie's frame length is \(capacity)")
            }
        }
        let depth = config.bitDepth
        if uncompressed {
            let shift = 32 - depth
            for i in 0..<frames {
                guard bits.position < bits.limit else { throw Self.damaged("its uncompressed samples run past the end") }
                mixU[i] = Int32(bitPattern: bits.read(depth) &<< UInt32(shift)) &>> Int32(shift)
                if width == 2 { mixV[i] = Int32(bitPattern: bits.read(depth) &<< UInt32(shift)) &>> Int32(shift) }
            }
            return frames
        }
        let mixShift = Int(bits.read(8))
        let mixWeight = Int32(Int8(truncatingIfNeeded: bits.read(8)))
        let headerU = ChannelHeader(&bits, coefficients: coefficientsU)
        let headerV = width == 2 ? ChannelHeader(&bits, coefficients: coefficientsV) : nil
        let shiftBits = shiftedBytes * 8
        var shiftCursor = bits
        if shiftBits > 0 { bits.position += shiftBits * width * frames }
        let chanBits = depth - shiftBits + width - 1
        guard chanBits <= 32 else { throw Self.damaged("an element needs \(chanBits)-bit residuals") }
        guard bits.position < bits.limit else { throw Self.damaged("an element's header runs past the end") }

        try decompress(&bits, into: residualU, frames: frames, chanBits: chanBits, factor: headerU.historyFactor)
        try predict(residualU, into: mixU, frames: frames, chanBits: chanBits, header: headerU)
        if let header = headerV {
            try decompress(&bits, into: residualV, frames: frames, chanBits: chanBits, factor: header.historyFactor)
            try predict(residualV, into: mixV, frames: frames, chanBits: chanBits, header: header)
            if mixWeight != 0 {
                for i in 0..<frames {
                    let u = mixU[i], v = mixV[i]
                    let left = u &+ v &- ((mixWeight &* v) &>> Int32(mixShift))
                    mixU[i] = left
                    mixV[i] = left &- v
                }
            }
        }
        if shiftBits > 0 {
            guard shiftCursor.position + shiftBits * width * frames <= shiftCursor.limit else {
                throw Self.damaged("its shifted-off bits run past the end")
            }
            for i in 0..<frames {
                shiftedU[i] = shiftCursor.read(shiftBits)
                if width == 2 { shiftedV[i] = shiftCursor.read(shiftBits) }
            }
            for i in 0..<frames {
                mixU[i] = (mixU[i] &<< Int32(shiftBits)) | Int32(bitPattern: shiftedU[i])
                if width == 2 { mixV[i] = (mixV[i] &<< Int32(shiftBits)) | Int32(bitPattern: shiftedV[i]) }
            }
        }
        return frames
    }

    /// Writes the decoded channel(s) as floats, each sample cut to the stream's bit depth.
    private func write(_ width: Int, frames: Int, channel: Int, into space: UnsafeMutableBufferPointer<Float>) {
        let stride = config.channels, shift = Int32(32 - config.bitDepth), scale = scale
        guard let base = space.baseAddress else { return }
        var out = base + channel
        for i in 0..<frames {
            out[0] = Float((mixU[i] &<< shift) &>> shift) * scale
            if width == 2 { out[1] = Float((mixV[i] &<< shift) &>> shift) * scale }
            out += stride
        }
    }

    // MARK: entropy decoding

    /// The adaptive Golomb-Rice decoder: each residual's rice parameter follows a running mean of
    /// the values before it; when the mean falls low, a count of zero residuals follows.
    private func decompress(_ bits: inout BitCursor, into residuals: UnsafeMutablePointer<Int32>, frames: Int, chanBits: Int, factor: Int) throws {
        let multiplier = UInt32(config.historyMultiplier * factor / 4)
        let limit = config.riceLimit
        let runMask = UInt32((1 << limit) - 1)
        var history = UInt32(config.initialHistory)
        var zeroMode: UInt32 = 0
        var c = 0
        while c < frames {
            guard bits.position < bits.limit else { throw Self.damaged("its residuals run past the end of the packet") }
            let k = Self.riceParameter(history, limit: limit)
            let n = bits.rice(k: k, m: UInt32((1 << k) - 1), escapeBits: chanBits)
            let value = n &+ zeroMode
            residuals[c] = Int32(bitPattern: (value >> 1) ^ (0 &- (value & 1)))
            c += 1
            history = Self.nextHistory(history, value: value, coded: n, multiplier: multiplier)
            zeroMode = 0
            if history &<< 2 < 512 && c < frames {
                zeroMode = 1
                let k = Self.runParameter(history)
                let run = Int(bits.rice(k: k, m: UInt32((1 << k) - 1) & runMask, escapeBits: 16))
                guard c + run <= frames else { throw Self.damaged("a run of \(run) zero residuals passes the frame's end") }
                (residuals + c).update(repeating: 0, count: run)
                c += run
                if run >= 65535 { zeroMode = 0 }
                history = 0
            }
        }
    }

    /// The adaptive Golomb-Rice coder's parameter for the next value: from the running mean.
    @inline(__always)
    static func riceParameter(_ history: UInt32, limit: Int) -> Int {
        min(31 - Int(((history >> 9) + 3).leadingZeroBitCount), limit)
    }

    /// The running mean after a value (`coded` is the value as coded, less the zero-run mode).
    @inline(__always)
    static func nextHistory(_ history: UInt32, value: UInt32, coded: UInt32, multiplier: UInt32) -> UInt32 {
        coded > 0xFFFF ? 0xFFFF : multiplier &* value &+ history &- ((multiplier &* history) >> 9)
    }

    /// The parameter of a count of zero residuals, after the mean fell low.
    @inline(__always)
    static func runParameter(_ history: UInt32) -> Int {
        history.leadingZeroBitCount - 24 + Int((history &+ 16) >> 6)
    }

    // MARK: prediction

    /// Undoes the adaptive FIR predictor: `order` 0 copies, 31 is a first difference, otherwise
    /// each sample adds a weighted sum of the previous `order` samples (relative to the oldest)
    /// and the weights step against the residual's sign. Mode 15 runs a first difference
    /// before the predictor.
    private func predict(_ residuals: UnsafeMutablePointer<Int32>, into out: UnsafeMutablePointer<Int32>, frames: Int, chanBits: Int,
                         header: ChannelHeader) throws {
        guard header.mode == 0 || header.mode == 15 else { throw Self.damaged("prediction mode \(header.mode) is not defined") }
        if header.mode == 15 {
            unpredict(residuals, residuals, frames: frames, coefficients: nil, order: 31, chanBits: chanBits, shift: 0)
        }
        unpredict(residuals, out, frames: frames, coefficients: header.coefficients, order: header.order, chanBits: chanBits,
                  shift: header.quantization)
    }

    private func unpredict(_ input: UnsafeMutablePointer<Int32>, _ out: UnsafeMutablePointer<Int32>, frames: Int,
                           coefficients: UnsafeMutablePointer<Int16>?, order: Int, chanBits: Int, shift: Int) {
        let chanShift = Int32(32 - chanBits)
        @inline(__always) func extend(_ value: Int32) -> Int32 { (value &<< chanShift) &>> chanShift }
        out[0] = input[0]
        guard frames > 1 else { return }
        if order == 0 {
            if input != out { (out + 1).update(from: input + 1, count: frames - 1) }
            return
        }
        if order == 31 || coefficients == nil {
            var previous = out[0]
            for j in 1..<frames {
                previous = extend(input[j] &+ previous)
                out[j] = previous
            }
            return
        }
        guard let coefficients else { return }
        let warmUp = min(order, frames - 1)
        for j in 1...warmUp { out[j] = extend(input[j] &+ out[j - 1]) }
        let lim = order + 1
        guard lim < frames else { return }
        let half: Int32 = shift > 0 ? 1 << Int32(shift - 1) : 0
        let shift = Int32(shift)
        for j in lim..<frames {
            let top = out[j - lim]
            let recent = out + (j - 1)
            var sum: Int32 = 0
            for k in 0..<order { sum = sum &+ Int32(coefficients[k]) &* (recent[-k] &- top) }
            let residual = input[j]
            out[j] = extend(residual &+ top &+ ((sum &+ half) &>> shift))
            Self.adapt(coefficients, order: order, top: top, recent: UnsafePointer(recent), residual: residual, shift: shift)
        }
    }

    /// How ALAC's predictor weights step after a residual, the same in the decoder and the
    /// encoder: towards the residual's sign, from the oldest weight down, until what is left of
    /// the residual changes sign.
    @inline(__always)
    static func adapt(_ c: UnsafeMutablePointer<Int16>, order: Int, top: Int32, recent: UnsafePointer<Int32>, residual: Int32, shift: Int32) {
        var remaining = residual
        if residual > 0 {
            var k = order - 1
            while k >= 0 {
                let difference = top &- recent[-k]
                let sign = Self.sign(difference)
                c[k] = c[k] &- Int16(truncatingIfNeeded: sign)
                remaining = remaining &- Int32(order - k) &* ((sign &* difference) &>> shift)
                if remaining <= 0 { break }
                k -= 1
            }
        } else if residual < 0 {
            var k = order - 1
            while k >= 0 {
                let difference = top &- recent[-k]
                let sign = Self.sign(difference)
                c[k] = c[k] &+ Int16(truncatingIfNeeded: sign)
                remaining = remaining &- Int32(order - k) &* ((0 &- sign &* difference) &>> shift)
                if remaining >= 0 { break }
                k -= 1
            }
        }
    }

    @inline(__always)
    static func sign(_ value: Int32) -> Int32 { value > 0 ? 1 : (value < 0 ? -1 : 0) }

    static func damaged(_ what: String) -> AudioQueueError {
        AudioQueueError(.decoderError, "an Apple Lossless packet is damaged: \(what); its frames are silent")
    }
}

/// Reads big-endian bits from a buffer padded with at least 8 zero bytes past `limit`.
struct BitCursor {
    let base: UnsafePointer<UInt8>
    /// Bits of real data.
    let limit: Int
    private let lastByte: Int
    var position = 0

    init(_ base: UnsafePointer<UInt8>, byteCount: Int) {
        self.base = base
        limit = byteCount * 8
        lastByte = byteCount
    }

    /// The next 32 bits (zeros past the end), without consuming them.
    @inline(__always)
    func peek32() -> UInt32 {
        let byte = min(max(position >> 3, 0), lastByte)
        let word = UInt64(bigEndian: UnsafeRawPointer(base + byte).loadUnaligned(as: UInt64.self))
        return UInt32(truncatingIfNeeded: (word &<< UInt64(position & 7)) >> 32)
    }

    /// Reads `count` bits (0...32).
    @inline(__always)
    mutating func read(_ count: Int) -> UInt32 {
        guard count > 0 else { return 0 }
        let value = peek32() >> UInt32(32 - count)
        position += count
        return value
    }

    mutating func alignToByte() { position = (position + 7) & ~7 }

    /// One Golomb-Rice value as ALAC codes it: a unary prefix (at most 8 ones ended by a zero);
    /// 9 ones mean `escapeBits` raw bits follow; otherwise `k` bits `v` give prefix × m + v − 1
    /// when v ≥ 2, else prefix × m with only k − 1 bits used.
    @inline(__always)
    mutating func rice(k: Int, m: UInt32, escapeBits: Int) -> UInt32 {
        let prefix = (~peek32()).leadingZeroBitCount
        if prefix >= 9 {
            position += 9
            return read(escapeBits)
        }
        position += prefix + 1
        guard k > 1 else { return k == 1 ? UInt32(prefix) : UInt32(prefix) &* m }
        let v = peek32() >> UInt32(32 - k)
        var result = UInt32(prefix) &* m
        if v >= 2 {
            result = result &+ (v - 1)
            position += k
        } else {
            position += k - 1
        }
        return result
    }
}
