/// Encodes Apple Lossless (`'alac'`), 16-, 20-, 24- and 32-bit, 1–8 channels: the packets
/// ``ALACDecoder`` (and Apple's, and ffmpeg's) decode back to the source bit for bit.
///
/// Each packet (4 096 frames by default) is coded on its own. Per channel it finds linear
/// prediction coefficients (Levinson–Durbin on the autocorrelation of the packet, windowed), quantized to
/// 9 fractional bits, runs ALAC's adaptive predictor with them as its starting weights, and codes
/// the residuals with ALAC's adaptive Golomb-Rice code; of the orders tried (8; with a higher
/// quality also 2, 4 and 16) the one whose bits count fewest is kept. A pair of channels is first decorrelated with the weight
/// (of Apple's five) that leaves the smallest differences. Samples of 24 and 32 bits have their
/// low one or two bytes stored as they are (as Apple's encoder does), so the predictor works on
/// 16 bits. When coding would not save anything the packet holds the samples uncompressed.
///
/// Channels go in in ALAC's order (Apple's layouts for ALAC: for 3–8 channels centre, left,
/// right, then the surrounds and LFE), which ``channelLayout`` gives.
public final class ALACEncoder: AudioEncoder {
    public let inputFormat: AudioStreamDescription
    public let outputFormat: AudioStreamDescription
    public var primingFrames: Int { 0 }
    public let maximumPacketSize: Int
    /// The order channels go in.
    public let channelLayout: AudioChannelLayout?
    private let depth: Int
    private let channels: Int
    private let frameLength: Int
    private let shiftBytes: Int
    /// The predictor orders tried (one up to quality 5, two up to 8, four above).
    private let orders: [Int]
    /// Frames waiting for a whole packet (interleaved, at the stream's bit depth).
    private let pending: UnsafeMutablePointer<Int32>
    private var pendingFrames = 0
    /// The largest packet so far, and all bytes and frames, for the cookie.
    private var largestPacket = 0
    private var totalBytes = 0
    private var totalFrames = 0
    // Scratch, per packet: the element's channels, their mix, residuals (the chosen and a trial),
    // the shifted-off low bits, the windowed samples and the predictor's working weights.
    private let channelU, channelV, mixU, mixV, trial: UnsafeMutablePointer<Int32>
    private var residualsU, residualsV: UnsafeMutablePointer<Int32>
    private let shiftedU, shiftedV: UnsafeMutablePointer<UInt32>
    private let windowed: UnsafeMutablePointer<Double>
    /// The Welch window for a full packet, computed once.
    private let window: UnsafeMutablePointer<Double>
    private let weights: UnsafeMutablePointer<Int16>
    private var writer: ALACBitWriter

    /// Elements per channel count, in Apple's order: SCE, CPE, LFE (for 1–8 channels).
    static let elements: [[ElementKind]] = [
        [.single], [.pair], [.single, .pair], [.single, .pair, .single], [.single, .pair, .pair],
        [.single, .pair, .pair, .lfe], [.single, .pair, .pair, .single, .lfe], [.single, .pair, .pair, .pair, .lfe],
    ]

    enum ElementKind: UInt32 { case single = 0, pair = 1, lfe = 3 }

    /// The layout ALAC puts `channels` channels in (the AAC order ``AudioChannelLayout/default(channels:)``
    /// gives for 1–6; 7 and 8 add a back centre or a side pair before the LFE).
    public static func channelLayout(channels: Int) -> AudioChannelLayout {
        switch channels {
        case 7: return AudioChannelLayout(channelLabels: [.center, .left, .right, .leftSurround, .rightSurround, .centerSurround, .lfeScreen])
        case 8: return AudioChannelLayout(channelLabels: [.center, .leftSurroundDirect, .rightSurroundDirect, .left, .right,
                                                          .leftSurround, .rightSurround, .lfeScreen])
        default: return .default(channels: channels)
        }
    }

    /// - Parameters:
    ///   - format: the rate, 1–8 channels and `bitsPerChannel` 16, 20, 24 or 32 (0 means 16).
    ///   - settings: `framesPerPacket` (default 4 096, at most 65 536); `quality` 0–5 (5 by
    ///     default) tries one predictor order, 6–8 two, 9–10 four.
    public init(format: AudioStreamDescription, settings: AudioEncoderSettings = .init()) throws {
        guard format.formatID == .appleLossless else {
            throw AudioQueueError(.codecNotFound, "\(format.formatID) is not Apple Lossless")
        }
        let depth = format.bitsPerChannel == 0 ? 16 : format.bitsPerChannel
        let channels = format.channelsPerFrame
        guard [16, 20, 24, 32].contains(depth) else {
            throw AudioQueueError(.invalidPropertyValue, "Apple Lossless codes 16, 20, 24 or 32 bits per sample, not \(depth)")
        }
        guard (1...8).contains(channels), format.sampleRate >= 1, format.sampleRate <= Double(UInt32.max) else {
            throw AudioQueueError(.invalidPropertyValue, "Apple Lossless codes 1–8 channels at a whole rate; asked for \(channels) at \(format.sampleRate) Hz")
        }
        let frameLength = settings.framesPerPacket ?? 4096
        guard (1...ALACSpecificConfig.maximumFrameLength).contains(frameLength) else {
            throw AudioQueueError(.invalidPropertyValue, "Apple Lossless packets hold 1–\(ALACSpecificConfig.maximumFrameLength) frames, not \(frameLength)")
        }
        let quality = settings.quality ?? 5
        orders = quality <= 5 ? [4] : quality <= 8 ? [4, 8] : [2, 4, 8, 16]
        self.depth = depth
        self.channels = channels
        self.frameLength = frameLength
        shiftBytes = depth == 32 ? 2 : depth == 24 ? 1 : 0
        channelLayout = Self.channelLayout(channels: channels)
        // 16-bit samples come as 16-bit integers; deeper ones as full-scale 32-bit integers.
        inputFormat = depth == 16 ? .int16(sampleRate: format.sampleRate, channels: channels) : .int32(sampleRate: format.sampleRate, channels: channels)
        let flag: UInt32 = depth == 16 ? 1 : depth == 20 ? 2 : depth == 24 ? 3 : 4
        outputFormat = AudioStreamDescription(sampleRate: format.sampleRate, formatID: .appleLossless, formatFlags: AudioFormatFlags(rawValue: flag),
                                              bytesPerPacket: 0, framesPerPacket: frameLength, bytesPerFrame: 0,
                                              channelsPerFrame: channels, bitsPerChannel: 0)
        // An uncompressed element per element, with its headers, and the END tag.
        maximumPacketSize = (frameLength * channels * depth + Self.elements[channels - 1].count * 56 + 3 + 7) / 8 + 8
        pending = .allocate(capacity: frameLength * channels)
        channelU = .allocate(capacity: frameLength); channelV = .allocate(capacity: frameLength)
        mixU = .allocate(capacity: frameLength); mixV = .allocate(capacity: frameLength); trial = .allocate(capacity: frameLength)
        residualsU = .allocate(capacity: frameLength); residualsV = .allocate(capacity: frameLength)
        shiftedU = .allocate(capacity: frameLength); shiftedV = .allocate(capacity: frameLength)
        windowed = .allocate(capacity: frameLength)
        window = .allocate(capacity: frameLength)
        Self.welch(window, frames: frameLength)
        weights = .allocate(capacity: 32)
        writer = ALACBitWriter(capacity: maximumPacketSize + 64)
    }

    deinit {
        for buffer in [pending, channelU, channelV, mixU, mixV, trial, residualsU, residualsV] { buffer.deallocate() }
        shiftedU.deallocate(); shiftedV.deallocate(); windowed.deallocate(); window.deallocate(); weights.deallocate()
        writer.deallocate()
    }

    /// Every packet encodes on its own.
    public static let factory = AudioEncoderFactory(name: "Apple Lossless", formats: [.appleLossless], traits: .independent) { format, settings in
        try ALACEncoder(format: format, settings: settings)
    }

    /// The `ALACSpecificConfig` (24 bytes), with the largest packet and the average bit rate of
    /// what was encoded so far.
    public var magicCookie: [UInt8]? {
        var cookie: [UInt8] = []
        func be32(_ value: Int) { withUnsafeBytes(of: UInt32(truncatingIfNeeded: value).bigEndian) { cookie += $0 } }
        be32(frameLength)
        cookie += [0, UInt8(depth), Self.historyMultiplier, Self.initialHistory, Self.riceLimit, UInt8(channels), 0, 255]
        be32(largestPacket > 0 ? largestPacket : maximumPacketSize)
        let seconds = Double(totalFrames) / outputFormat.sampleRate
        be32(seconds > 0 ? Int((Double(totalBytes * 8) / seconds).rounded()) : 0)
        be32(Int(outputFormat.sampleRate))
        return cookie
    }

    static let historyMultiplier: UInt8 = 40
    static let initialHistory: UInt8 = 10
    static let riceLimit: UInt8 = 14

    public func encode(_ frames: UnsafeRawBufferPointer, into output: EncodedPackets) throws {
        let sampleBytes = depth == 16 ? 2 : 4
        let count = frames.count / (sampleBytes * channels)
        guard count > 0, let source = frames.baseAddress else { return }
        let shift = 32 - depth
        var frame = 0
        while frame < count {
            let take = min(count - frame, frameLength - pendingFrames)
            let target = pending + pendingFrames * channels
            let first = frame * channels
            if depth == 16 {
                for i in 0..<(take * channels) {
                    target[i] = Int32(Int16(littleEndian: source.loadUnaligned(fromByteOffset: 2 * (first + i), as: Int16.self)))
                }
            } else {
                for i in 0..<(take * channels) {
                    target[i] = Self.reduce(Int32(littleEndian: source.loadUnaligned(fromByteOffset: 4 * (first + i), as: Int32.self)), shift: shift)
                }
            }
            pendingFrames += take
            frame += take
            if pendingFrames == frameLength { encodePacket(into: output) }
        }
    }

    public func finish(into output: EncodedPackets) throws {
        if pendingFrames > 0 { encodePacket(into: output) }
    }

    /// Adds the other encoders' packets to the largest packet and bit rate the cookie reports.
    public func mergeStatistics(of others: [any AudioEncoder]) {
        for case let other as ALACEncoder in others {
            largestPacket = max(largestPacket, other.largestPacket)
            totalBytes += other.totalBytes
            totalFrames += other.totalFrames
        }
    }

    /// A full-scale 32-bit sample at `32 − shift` bits, rounded to nearest (halves up) and kept in range.
    @inline(__always)
    static func reduce(_ sample: Int32, shift: Int) -> Int32 {
        guard shift > 0 else { return sample }
        let rounded = (Int64(sample) + Int64(1) << (shift - 1)) >> shift
        return Int32(min(rounded, Int64(Int32.max) >> shift))
    }

    // MARK: packets

    private func encodePacket(into output: EncodedPackets) {
        let frames = pendingFrames
        writer.reset()
        var channel = 0
        for kind in Self.elements[channels - 1] {
            let width = kind == .pair ? 2 : 1
            encodeElement(kind, channel: channel, width: width, frames: frames)
            channel += width
        }
        writer.write(7, bits: 3)
        writer.alignToByte()
        let bytes = writer.byteCount
        let space = output.reserve(bytes: bytes)
        writer.copy(to: space)
        output.commit(bytes: bytes, frames: frames)
        largestPacket = max(largestPacket, bytes)
        totalBytes += bytes
        totalFrames += frames
        pendingFrames = 0
    }

    /// Writes one element: coded when that takes fewer bits than the samples themselves.
    private func encodeElement(_ kind: ElementKind, channel: Int, width: Int, frames: Int) {
        for i in 0..<frames {
            channelU[i] = pending[i * channels + channel]
            if width == 2 { channelV[i] = pending[i * channels + channel + 1] }
        }
        let partial = frames != frameLength
        let shiftBits = shiftBytes * 8
        let chanBits = depth - shiftBits + width - 1

        // Shift off the low bytes, then decorrelate a pair.
        let mask = UInt32((1 << shiftBits) - 1)
        for i in 0..<frames {
            if shiftBits > 0 {
                shiftedU[i] = UInt32(bitPattern: channelU[i]) & mask
                if width == 2 { shiftedV[i] = UInt32(bitPattern: channelV[i]) & mask }
            }
            mixU[i] = channelU[i] >> Int32(shiftBits)
            if width == 2 { mixV[i] = channelV[i] >> Int32(shiftBits) }
        }
        let mixShift: Int32 = 2
        var weight: Int32 = 0
        if width == 2 {
            weight = chooseMixWeight(frames: frames, shift: mixShift)
            if weight != 0 {
                for i in 0..<frames {
                    let left = mixU[i], right = mixV[i]
                    let v = left &- right
                    mixU[i] = right &+ ((weight &* v) >> mixShift)
                    mixV[i] = v
                }
            }
        }
        let planU = choosePredictor(mixU, residuals: &residualsU, frames: frames, chanBits: chanBits)
        let planV = width == 2 ? choosePredictor(mixV, residuals: &residualsV, frames: frames, chanBits: chanBits) : nil
        let headerBits = 23 + (partial ? 32 : 0)
        let codedBits = headerBits + 16 + 16 * width + planU.bits + (planV?.bits ?? 0) + shiftBits * width * frames
        let uncompressedBits = headerBits + frames * width * depth
        if codedBits > uncompressedBits {
            writeElementHeader(kind, partial: partial, frames: frames, shiftBytes: 0, uncompressed: true)
            for i in 0..<frames {
                writer.write(UInt32(bitPattern: channelU[i]), bits: depth)
                if width == 2 { writer.write(UInt32(bitPattern: channelV[i]), bits: depth) }
            }
            return
        }
        writeElementHeader(kind, partial: partial, frames: frames, shiftBytes: shiftBytes, uncompressed: false)
        writer.write(UInt32(width == 2 ? mixShift : 0), bits: 8)
        writer.write(UInt32(bitPattern: weight) & 0xFF, bits: 8)
        for plan in [planU] + (planV.map { [$0] } ?? []) {
            writer.write(UInt32(Self.quantization), bits: 8)   // mode 0, quantization shift
            writer.write(UInt32(Self.historyFactor) << 5 | UInt32(plan.order), bits: 8)
            for c in plan.coefficients { writer.write(UInt32(UInt16(bitPattern: c)), bits: 16) }
        }
        if shiftBits > 0 {
            for i in 0..<frames {
                writer.write(shiftedU[i], bits: shiftBits)
                if width == 2 { writer.write(shiftedV[i], bits: shiftBits) }
            }
        }
        var sink = RiceWriter(writer: writer)
        Self.code(residualsU, frames: frames, chanBits: chanBits, into: &sink)
        if width == 2 { Self.code(residualsV, frames: frames, chanBits: chanBits, into: &sink) }
        writer = sink.writer
    }

    private func writeElementHeader(_ kind: ElementKind, partial: Bool, frames: Int, shiftBytes: Int, uncompressed: Bool) {
        writer.write(kind.rawValue, bits: 3)
        writer.write(0, bits: 4)      // element instance tag
        writer.write(0, bits: 12)     // reserved
        writer.write((partial ? 8 : 0) | UInt32(shiftBytes) << 1 | (uncompressed ? 1 : 0), bits: 4)
        if partial { writer.write(UInt32(frames), bits: 32) }
    }

    /// Apple's weights for a pair (with a shift of 2): none, and four mixes of left − right into
    /// right; the one whose sum of first differences is smallest wins.
    private func chooseMixWeight(frames: Int, shift: Int32) -> Int32 {
        guard frames > 2 else { return 0 }
        var cost0: Int64 = 0, cost1: Int64 = 0, cost2: Int64 = 0, cost3: Int64 = 0, cost4: Int64 = 0
        var previousLeft = Int64(mixU[0]), previousRight = Int64(mixV[0])
        var previousV = previousLeft - previousRight
        for i in 1..<frames {
            let left = Int64(mixU[i]), right = Int64(mixV[i])
            let dl = left - previousLeft, dr = right - previousRight
            let v = left - right
            let dv = abs(dl - dr)
            // u = right + (w × v) >> 2, v = left − right: the differences of u for each weight.
            cost0 += abs(dl) + abs(dr)
            cost1 += abs(dr + (v >> 2) - (previousV >> 2)) + dv
            cost2 += abs(dr + ((2 * v) >> 2) - ((2 * previousV) >> 2)) + dv
            cost3 += abs(dr + ((3 * v) >> 2) - ((3 * previousV) >> 2)) + dv
            cost4 += abs(dr + v - previousV) + dv
            previousLeft = left; previousRight = right; previousV = v
        }
        let costs = [cost0, cost1, cost2, cost3, cost4]
        var best = 0
        for weight in 1...4 where costs[weight] < costs[best] { best = weight }
        return Int32(best)
    }

    // MARK: prediction

    static let quantization = 9
    static let historyFactor = 4

    struct PredictorPlan {
        var order: Int
        var coefficients: [Int16]
        /// The residuals' bits.
        var bits: Int
    }

    /// Tries the predictor orders, leaving the residuals of the cheapest in `residuals`.
    private func choosePredictor(_ samples: UnsafeMutablePointer<Int32>, residuals: inout UnsafeMutablePointer<Int32>, frames: Int,
                                 chanBits: Int) -> PredictorPlan {
        let candidates = orders.filter { $0 < frames }
        guard let largest = candidates.last else {
            // Too few frames for a predictor: the samples as they are (order 0).
            Self.predict(samples, into: residuals, frames: frames, coefficients: [], weights: weights, chanBits: chanBits)
            var counter = RiceCounter()
            Self.code(residuals, frames: frames, chanBits: chanBits, into: &counter)
            return PredictorPlan(order: 0, coefficients: [], bits: counter.bits)
        }
        let lpc = lpcCoefficients(samples, frames: frames, maxOrder: largest)
        var best: PredictorPlan?
        var scratch = trial
        for order in candidates {
            let coefficients = lpc[order]
            Self.predict(samples, into: scratch, frames: frames, coefficients: coefficients, weights: weights, chanBits: chanBits)
            var counter = RiceCounter()
            Self.code(scratch, frames: frames, chanBits: chanBits, into: &counter)
            let bits = counter.bits + 16 * order
            if best == nil || bits < best?.bits ?? Int.max {
                best = PredictorPlan(order: order, coefficients: coefficients, bits: bits)
                swap(&scratch, &residuals)
            }
        }
        // The trial buffer is whichever of the two the best did not keep.
        if scratch != trial { swapTrial(with: scratch, residuals: &residuals) }
        return best ?? PredictorPlan(order: 0, coefficients: [], bits: 0)
    }

    /// Keeps `trial` the scratch buffer: when the best residuals were left in it, they are moved
    /// to the residual buffer that is now free.
    private func swapTrial(with free: UnsafeMutablePointer<Int32>, residuals: inout UnsafeMutablePointer<Int32>) {
        // `residuals` points at `trial`, `free` at the element's own residual buffer.
        free.update(from: residuals, count: frameLength)
        residuals = free
    }

    /// The residuals ALAC's adaptive predictor leaves, the exact inverse of the decoder's
    /// reconstruction: the first sample as it is, then first differences up to the order, then
    /// what remains after the weighted sum of the previous samples (relative to the oldest),
    /// the weights stepping with each residual's sign as the decoder's do. Order 0 copies.
    static func predict(_ input: UnsafePointer<Int32>, into out: UnsafeMutablePointer<Int32>, frames: Int,
                        coefficients initial: [Int16], weights c: UnsafeMutablePointer<Int16>, chanBits: Int) {
        let chanShift = Int32(32 - chanBits)
        @inline(__always) func extend(_ value: Int32) -> Int32 { (value &<< chanShift) &>> chanShift }
        let order = initial.count
        guard frames > 0 else { return }
        out[0] = input[0]
        if order == 0 {
            // The decoder copies: so are the residuals the samples.
            if frames > 1 { for j in 1..<frames { out[j] = input[j] } }
            return
        }
        for k in 0..<order { c[k] = initial[k] }
        let warmUp = min(order, frames - 1)
        if warmUp >= 1 { for j in 1...warmUp { out[j] = extend(input[j] &- input[j - 1]) } }
        let lim = order + 1
        guard lim < frames else { return }
        let shift = Int32(quantization)
        let half: Int32 = 1 << (shift - 1)
        for j in lim..<frames {
            let top = input[j - lim]
            let recent = input + (j - 1)
            var sum: Int32 = 0
            for k in 0..<order { sum = sum &+ Int32(c[k]) &* (recent[-k] &- top) }
            let residual = extend(input[j] &- top &- ((sum &+ half) &>> shift))
            out[j] = residual
            ALACDecoder.adapt(c, order: order, top: top, recent: recent, residual: residual, shift: shift)
        }
    }

    /// Linear-prediction coefficients for orders 1…`maxOrder` (index = order), from the
    /// autocorrelation of the samples under a Welch window (Levinson–Durbin), in ALAC's form
    /// (weights of the previous samples, most recent first) with 9 fractional bits.
    private func lpcCoefficients(_ samples: UnsafePointer<Int32>, frames: Int, maxOrder: Int) -> [[Int16]] {
        var result = [[Int16]](repeating: [], count: maxOrder + 1)
        guard frames > maxOrder + 1 else {
            for order in 1...maxOrder { result[order] = [Int16](repeating: 0, count: order) }
            return result
        }
        if frames == frameLength {
            for i in 0..<frames { windowed[i] = Double(samples[i]) * window[i] }
        } else {
            Self.welch(windowed, frames: frames)
            for i in 0..<frames { windowed[i] *= Double(samples[i]) }
        }
        var r = [Double](repeating: 0, count: maxOrder + 1)
        for lag in 0...maxOrder {
            var sum = 0.0
            for i in lag..<frames { sum += windowed[i] * windowed[i - lag] }
            r[lag] = sum
        }
        var a = [Double](repeating: 0, count: maxOrder + 1)
        var error = r[0] * (1 + 1e-9) + 1e-9
        for order in 1...maxOrder {
            var acc = r[order]
            for i in 1..<order { acc -= a[i] * r[order - i] }
            let k = acc / error
            var next = a
            next[order] = k
            for i in 1..<order { next[i] = a[i] - k * a[order - i] }
            a = next
            error *= max(1 - k * k, 1e-9)
            let scale = Double(1 << Self.quantization)
            result[order] = (1...order).map { Int16(max(min((a[$0] * scale).rounded(), 32767), -32768)) }
        }
        return result
    }

    /// The Welch window (1 − x², x from −1 to 1 across the frames).
    static func welch(_ out: UnsafeMutablePointer<Double>, frames: Int) {
        let half = Double(frames - 1) / 2
        for i in 0..<frames {
            let x = (Double(i) - half) / (half + 1)
            out[i] = 1 - x * x
        }
    }

    // MARK: entropy coding

    /// Walks the residuals as the decoder's adaptive coder does, handing each coded value with its
    /// rice parameter to `sink`: the parameter follows a running mean; after a low mean a count of
    /// zero residuals is coded instead.
    @inline(__always)
    static func code<Sink: RiceSink>(_ residuals: UnsafePointer<Int32>, frames: Int, chanBits: Int, into sink: inout Sink) {
        let multiplier = UInt32(Int(historyMultiplier) * historyFactor / 4)
        let limit = Int(riceLimit)
        let runMask = UInt32((1 << limit) - 1)
        var history = UInt32(initialHistory)
        var zeroMode: UInt32 = 0
        var c = 0
        while c < frames {
            let k = ALACDecoder.riceParameter(history, limit: limit)
            let residual = residuals[c]
            let value = residual >= 0 ? UInt32(bitPattern: residual) &<< 1 : (UInt32(bitPattern: ~residual) &<< 1) | 1
            let n = value &- zeroMode
            sink.emit(n, k: k, m: UInt32((1 << k) - 1), escapeBits: chanBits)
            c += 1
            history = ALACDecoder.nextHistory(history, value: value, coded: n, multiplier: multiplier)
            zeroMode = 0
            if history &<< 2 < 512 && c < frames {
                zeroMode = 1
                let k = ALACDecoder.runParameter(history)
                var run = 0
                while c + run < frames && residuals[c + run] == 0 && run < 65535 { run += 1 }
                sink.emit(UInt32(run), k: k, m: UInt32((1 << k) - 1) & runMask, escapeBits: 16)
                c += run
                if run >= 65535 { zeroMode = 0 }
                history = 0
            }
        }
    }
}

/// Where the adaptive Golomb-Rice coder's values go: counted, or written.
protocol RiceSink {
    mutating func emit(_ value: UInt32, k: Int, m: UInt32, escapeBits: Int)
}

/// Counts the bits ``RiceWriter`` would write.
struct RiceCounter: RiceSink {
    var bits = 0
    @inline(__always)
    mutating func emit(_ value: UInt32, k: Int, m: UInt32, escapeBits: Int) {
        let (q, r) = riceSplit(value, m)
        if q >= 9 { bits += 9 + escapeBits; return }
        bits += q + 1
        if k > 1 { bits += r == 0 ? k - 1 : k }
    }
}

/// `value / m` and `value % m` for ALAC's rice code, the quotient capped at 9 (an escape): by
/// subtraction, since the quotient is small but for escapes (no division on the hot path).
@inline(__always)
func riceSplit(_ value: UInt32, _ m: UInt32) -> (quotient: Int, remainder: UInt32) {
    guard m > 0 else { return (value == 0 ? 0 : 9, 0) }
    if value >= 9 &* m || m > 0x1C71_C71C { return value / m >= 9 ? (9, 0) : (Int(value / m), value % m) }
    var q = 0, r = value
    while r >= m { r &-= m; q += 1 }
    return (q, r)
}

/// Writes each value in ALAC's Golomb-Rice form, as `BitCursor.rice` reads it.
struct RiceWriter: RiceSink {
    var writer: ALACBitWriter
    @inline(__always)
    mutating func emit(_ value: UInt32, k: Int, m: UInt32, escapeBits: Int) { writer.writeRice(value, k: k, m: m, escapeBits: escapeBits) }
}

/// Writes big-endian bits into a buffer of fixed capacity, 64 bits at a time.
struct ALACBitWriter {
    private let bytes: UnsafeMutablePointer<UInt8>
    private let capacity: Int
    /// Whole bytes written, and the bits not yet stored (left-aligned in `cache`).
    private var stored = 0
    private var cache: UInt64 = 0
    private var cached = 0

    init(capacity: Int) {
        self.capacity = capacity
        bytes = .allocate(capacity: capacity + 8)
    }

    func deallocate() { bytes.deallocate() }

    /// Bits written.
    var bitCount: Int { stored * 8 + cached }
    var byteCount: Int { (bitCount + 7) / 8 }

    mutating func reset() {
        stored = 0
        cache = 0
        cached = 0
    }

    /// Writes the low `bits` bits (0…32) of `value`.
    @inline(__always)
    mutating func write(_ value: UInt32, bits: Int) {
        guard bits > 0 else { return }
        let masked = UInt64(value) & (UInt64.max >> UInt64(64 - bits))
        cache |= masked << UInt64(64 - cached - bits)
        cached += bits
        if cached >= 32 {
            let word = UInt32(truncatingIfNeeded: cache >> 32).bigEndian
            assert(stored + 4 <= capacity + 8, "ALAC packet larger than its buffer")
            UnsafeMutableRawPointer(bytes + stored).storeBytes(of: word, as: UInt32.self)
            stored += 4
            cache <<= 32
            cached -= 32
        }
    }

    /// One value in ALAC's Golomb-Rice form, as `BitCursor.rice` reads it.
    @inline(__always)
    mutating func writeRice(_ value: UInt32, k: Int, m: UInt32, escapeBits: Int) {
        let (q, r) = riceSplit(value, m)
        if q >= 9 {
            write(0x1FF, bits: 9)
            write(value, bits: escapeBits)
            return
        }
        // q ones and a zero, then k − 1 zero bits or k bits of r + 1: one write (at most 24 bits).
        let prefix = (UInt32(1) << UInt32(q + 1)) - 2
        guard k > 1 else { return write(prefix, bits: q + 1) }
        if r == 0 {
            write(prefix << UInt32(k - 1), bits: q + k)
        } else {
            write(prefix << UInt32(k) | (r + 1), bits: q + 1 + k)
        }
    }

    mutating func alignToByte() {
        let pad = (8 - cached % 8) % 8
        if pad > 0 { write(0, bits: pad) }
    }

    /// Copies the bytes written (call after ``alignToByte()``).
    func copy(to space: UnsafeMutableRawBufferPointer) {
        guard let target = space.baseAddress else { return }
        target.copyMemory(from: bytes, byteCount: min(stored, space.count))
        var rest = cache
        var offset = stored
        var left = cached
        while left > 0 && offset < space.count {
            target.storeBytes(of: UInt8(truncatingIfNeeded: rest >> 56), toByteOffset: offset, as: UInt8.self)
            rest <<= 8
            left -= 8
            offset += 1
        }
    }
}
