/// Encodes Apple Lossless (`'alac'`), 16-, 20-, 24- and 32-bit, 1–8 channels: the packets
/// ``ALACDecoder`` (and Apple's, and ffmpeg's) decode back to the source bit for bit.
///
/// Each packet (4 096 frames by default) is coded on its own. Per channel it finds linear
/// prediction coefficients (Levinson–Durbin on the autocorrelation of the packet, windowed), quantized to
/// 9 fractional bits, runs ALAC's adaptive predictor with them as its starting weights, and codes
/// the residuals with ALAC's adaptive Golomb-Rice code; of the orders tried (4 and 8) the one
/// whose bits count fewest is kept. A pair of channels is first decorrelated with the weight
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
    /// Whether to try more predictor orders (quality ≥ 7) or only one (quality ≤ 2).
    private let orders: [Int]
    /// Frames waiting for a whole packet (interleaved, at the stream's bit depth).
    private var pending: [Int32]
    private var pendingFrames = 0
    /// The largest packet so far, and all bytes and frames, for the cookie.
    private var largestPacket = 0
    private var totalBytes = 0
    private var totalFrames = 0
    // Scratch, per packet.
    private var channelU: [Int32], channelV: [Int32], mixU: [Int32], mixV: [Int32]
    private var residualsA: [Int32], residualsB: [Int32], shiftedU: [UInt32], shiftedV: [UInt32]
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
    ///   - settings: `framesPerPacket` (default 4 096, at most 65 536); `quality` 0–2 tries one
    ///     predictor order, 3–6 two, 7–10 four.
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
        orders = quality <= 2 ? [8] : quality <= 6 ? [4, 8] : [2, 4, 8, 16]
        self.depth = depth
        self.channels = channels
        self.frameLength = frameLength
        shiftBytes = depth == 32 ? 2 : depth == 24 ? 1 : 0
        channelLayout = Self.channelLayout(channels: channels)
        inputFormat = .int32(sampleRate: format.sampleRate, channels: channels)
        let flag: UInt32 = depth == 16 ? 1 : depth == 20 ? 2 : depth == 24 ? 3 : 4
        outputFormat = AudioStreamDescription(sampleRate: format.sampleRate, formatID: .appleLossless, formatFlags: AudioFormatFlags(rawValue: flag),
                                              bytesPerPacket: 0, framesPerPacket: frameLength, bytesPerFrame: 0,
                                              channelsPerFrame: channels, bitsPerChannel: 0)
        // An uncompressed element per element, with its headers, and the END tag.
        maximumPacketSize = (frameLength * channels * depth + Self.elements[channels - 1].count * 56 + 3 + 7) / 8 + 8
        pending = Array(repeating: 0, count: frameLength * channels)
        channelU = Array(repeating: 0, count: frameLength); channelV = channelU
        mixU = channelU; mixV = channelU; residualsA = channelU; residualsB = channelU
        shiftedU = Array(repeating: 0, count: frameLength); shiftedV = shiftedU
        // A coded attempt is measured before it may be dropped: room for every residual escaped.
        writer = ALACBitWriter(capacity: maximumPacketSize + (frameLength * channels * (9 + 17) + 7) / 8 + 64)
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
        let count = frames.count / (4 * channels)
        guard count > 0 else { return }
        let shift = 32 - depth
        var frame = 0
        while frame < count {
            let take = min(count - frame, frameLength - pendingFrames)
            pending.withUnsafeMutableBufferPointer { pending in
                for i in 0..<(take * channels) {
                    let sample = Int32(littleEndian: frames.loadUnaligned(fromByteOffset: 4 * ((frame * channels) + i), as: Int32.self))
                    pending[pendingFrames * channels + i] = Self.reduce(sample, shift: shift)
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

    /// Writes one element; falls back to uncompressed samples when coding saves nothing.
    private func encodeElement(_ kind: ElementKind, channel: Int, width: Int, frames: Int) {
        for i in 0..<frames {
            channelU[i] = pending[i * channels + channel]
            if width == 2 { channelV[i] = pending[i * channels + channel + 1] }
        }
        let start = writer.bitCount
        let partial = frames != frameLength
        let shiftBits = shiftBytes * 8
        let chanBits = depth - shiftBits + width - 1
        writeElementHeader(kind, partial: partial, frames: frames, shiftBytes: shiftBytes, uncompressed: false)

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
        writer.write(UInt32(width == 2 ? mixShift : 0), bits: 8)
        writer.write(UInt32(bitPattern: weight) & 0xFF, bits: 8)

        // Choose each channel's predictor, then write the headers, the shifted bytes and the residuals.
        let planU = choosePredictor(&mixU, residuals: &residualsA, frames: frames, chanBits: chanBits)
        var planV: PredictorPlan?
        if width == 2 { planV = choosePredictor(&mixV, residuals: &residualsB, frames: frames, chanBits: chanBits) }
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
        residualsA.withUnsafeBufferPointer { writeResiduals($0, frames: frames, chanBits: chanBits) }
        if width == 2 { residualsB.withUnsafeBufferPointer { writeResiduals($0, frames: frames, chanBits: chanBits) } }

        // Uncompressed when that is smaller.
        let uncompressedBits = 23 + (partial ? 32 : 0) + frames * width * depth
        if writer.bitCount - start > uncompressedBits {
            writer.rewind(to: start)
            writeElementHeader(kind, partial: partial, frames: frames, shiftBytes: 0, uncompressed: true)
            for i in 0..<frames {
                writer.write(UInt32(bitPattern: channelU[i]), bits: depth)
                if width == 2 { writer.write(UInt32(bitPattern: channelV[i]), bits: depth) }
            }
        }
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
        var best: Int32 = 0
        var bestCost = Int64.max
        for weight: Int32 in [0, 1, 2, 3, 4] {
            var cost: Int64 = 0
            var previousU: Int32 = 0, previousV: Int32 = 0
            for i in 0..<frames {
                let u: Int32, v: Int32
                if weight == 0 {
                    u = mixU[i]; v = mixV[i]
                } else {
                    v = mixU[i] &- mixV[i]
                    u = mixV[i] &+ ((weight &* v) >> shift)
                }
                if i > 0 { cost += Int64(abs(Int(u &- previousU))) + Int64(abs(Int(v &- previousV))) }
                previousU = u; previousV = v
            }
            if cost < bestCost { bestCost = cost; best = weight }
        }
        return best
    }

    // MARK: prediction

    static let quantization = 9
    static let historyFactor = 4

    struct PredictorPlan {
        var order: Int
        var coefficients: [Int16]
    }

    /// Tries the predictor orders, leaving the residuals of the cheapest in `residuals`.
    private func choosePredictor(_ samples: inout [Int32], residuals: inout [Int32], frames: Int, chanBits: Int) -> PredictorPlan {
        let lpc = samples.withUnsafeBufferPointer { Self.lpcCoefficients($0, frames: frames, maxOrder: orders.last ?? 8) }
        var best: (plan: PredictorPlan, bits: Int)?
        var trial = [Int32](repeating: 0, count: frames)
        for order in orders where order < frames {
            let coefficients = lpc[order]
            samples.withUnsafeBufferPointer { input in
                trial.withUnsafeMutableBufferPointer { out in
                    Self.predict(input, into: out, frames: frames, coefficients: coefficients, chanBits: chanBits)
                }
            }
            let bits = trial.withUnsafeBufferPointer { countResidualBits($0, frames: frames, chanBits: chanBits) } + 16 * order
            if best == nil || bits < best?.bits ?? Int.max {
                best = (PredictorPlan(order: order, coefficients: coefficients), bits)
                swap(&trial, &residuals)
                if trial.count < frames { trial = [Int32](repeating: 0, count: frames) }
            }
        }
        if let best { return best.plan }
        // Too few frames for a predictor: first differences only (order 31 would also do).
        samples.withUnsafeBufferPointer { input in
            residuals.withUnsafeMutableBufferPointer { out in
                Self.predict(input, into: out, frames: frames, coefficients: [], chanBits: chanBits)
            }
        }
        return PredictorPlan(order: 0, coefficients: [])
    }

    /// The residuals ALAC's adaptive predictor leaves, the exact inverse of the decoder's
    /// reconstruction: the first sample as it is, then first differences up to the order, then
    /// what remains after the weighted sum of the previous samples (relative to the oldest),
    /// the weights stepping with each residual's sign as the decoder's do. Order 0 copies.
    static func predict(_ input: UnsafeBufferPointer<Int32>, into out: UnsafeMutableBufferPointer<Int32>, frames: Int,
                        coefficients initial: [Int16], chanBits: Int) {
        let chanShift = Int32(32 - chanBits)
        @inline(__always) func extend(_ value: Int32) -> Int32 { (value &<< chanShift) &>> chanShift }
        let order = initial.count
        guard frames > 0 else { return }
        out[0] = input[0]
        if order == 0 {
            for j in 1..<max(frames, 1) { out[j] = input[j] }
            return
        }
        var coefficients = initial
        let warmUp = min(order, frames - 1)
        if warmUp >= 1 { for j in 1...warmUp { out[j] = extend(input[j] &- input[j - 1]) } }
        let lim = order + 1
        guard lim < frames else { return }
        let shift = Int32(quantization)
        let half: Int32 = 1 << (shift - 1)
        coefficients.withUnsafeMutableBufferPointer { c in
            for j in lim..<frames {
                let top = input[j - lim]
                var sum: Int32 = 0
                for k in 0..<order { sum = sum &+ Int32(c[k]) &* (input[j - 1 - k] &- top) }
                let residual = extend(input[j] &- top &- ((sum &+ half) &>> shift))
                out[j] = residual
                var remaining = residual
                if residual > 0 {
                    var k = order - 1
                    while k >= 0 {
                        let difference = top &- input[j - 1 - k]
                        let sign = ALACDecoder.sign(difference)
                        c[k] = c[k] &- Int16(truncatingIfNeeded: sign)
                        remaining = remaining &- Int32(order - k) &* ((sign &* difference) &>> shift)
                        if remaining <= 0 { break }
                        k -= 1
                    }
                } else if residual < 0 {
                    var k = order - 1
                    while k >= 0 {
                        let difference = top &- input[j - 1 - k]
                        let sign = ALACDecoder.sign(difference)
                        c[k] = c[k] &+ Int16(truncatingIfNeeded: sign)
                        remaining = remaining &- Int32(order - k) &* ((0 &- sign &* difference) &>> shift)
                        if remaining >= 0 { break }
                        k -= 1
                    }
                }
            }
        }
    }

    /// Linear-prediction coefficients for orders 1…`maxOrder` (index = order), from the
    /// autocorrelation of the samples under a Welch window (Levinson–Durbin), in ALAC's form
    /// (weights of the previous samples, most recent first) with 9 fractional bits.
    static func lpcCoefficients(_ samples: UnsafeBufferPointer<Int32>, frames: Int, maxOrder: Int) -> [[Int16]] {
        var result = [[Int16]](repeating: [], count: maxOrder + 1)
        guard frames > maxOrder + 1 else {
            for order in 1...maxOrder { result[order] = [Int16](repeating: 0, count: order) }
            return result
        }
        var windowed = [Double](repeating: 0, count: frames)
        let half = Double(frames - 1) / 2
        for i in 0..<frames {
            let x = (Double(i) - half) / (half + 1)
            windowed[i] = Double(samples[i]) * (1 - x * x)
        }
        var r = [Double](repeating: 0, count: maxOrder + 1)
        windowed.withUnsafeBufferPointer { w in
            for lag in 0...maxOrder {
                var sum = 0.0
                for i in lag..<frames { sum += w[i] * w[i - lag] }
                r[lag] = sum
            }
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
            let scale = Double(1 << quantization)
            result[order] = (1...order).map { Int16(max(min((a[$0] * scale).rounded(), 32767), -32768)) }
        }
        return result
    }

    // MARK: entropy coding

    /// Bits the residuals take with ALAC's adaptive Golomb-Rice code.
    private func countResidualBits(_ residuals: UnsafeBufferPointer<Int32>, frames: Int, chanBits: Int) -> Int {
        var bits = 0
        Self.code(residuals, frames: frames, chanBits: chanBits) { value, k, m, escape in
            bits += Self.riceLength(value, k: k, m: m, escapeBits: escape)
        }
        return bits
    }

    private func writeResiduals(_ residuals: UnsafeBufferPointer<Int32>, frames: Int, chanBits: Int) {
        Self.code(residuals, frames: frames, chanBits: chanBits) { value, k, m, escape in
            writer.writeRice(value, k: k, m: m, escapeBits: escape)
        }
    }

    /// Walks the residuals as the decoder's adaptive coder does, handing each coded value with its
    /// rice parameter to `emit`: the parameter follows a running mean; after a low mean a count of
    /// zero residuals is coded instead.
    @inline(__always)
    static func code(_ residuals: UnsafeBufferPointer<Int32>, frames: Int, chanBits: Int,
                     _ emit: (_ value: UInt32, _ k: Int, _ m: UInt32, _ escapeBits: Int) -> Void) {
        let multiplier = UInt32(Int(historyMultiplier) * historyFactor / 4)
        let limit = Int(riceLimit)
        let runMask = UInt32((1 << limit) - 1)
        var history = UInt32(initialHistory)
        var zeroMode: UInt32 = 0
        var c = 0
        while c < frames {
            let k = min(31 - Int(((history >> 9) + 3).leadingZeroBitCount), limit)
            let residual = residuals[c]
            let value = residual >= 0 ? UInt32(bitPattern: residual) &<< 1 : (UInt32(bitPattern: ~residual) &<< 1) | 1
            let n = value &- zeroMode
            emit(n, k, UInt32((1 << k) - 1), chanBits)
            c += 1
            history = multiplier &* value &+ history &- ((multiplier &* history) >> 9)
            if n > 0xFFFF { history = 0xFFFF }
            zeroMode = 0
            if history &<< 2 < 512 && c < frames {
                zeroMode = 1
                let k = history.leadingZeroBitCount - 24 + Int((history &+ 16) >> 6)
                var run = 0
                while c + run < frames && residuals[c + run] == 0 && run < 65535 { run += 1 }
                emit(UInt32(run), k, UInt32((1 << k) - 1) & runMask, 16)
                c += run
                if run >= 65535 { zeroMode = 0 }
                history = 0
            }
        }
    }

    /// The bits ``ALACBitWriter/writeRice(_:k:m:escapeBits:)`` writes for `value`.
    @inline(__always)
    static func riceLength(_ value: UInt32, k: Int, m: UInt32, escapeBits: Int) -> Int {
        let q = m == 0 ? 0 : value / m
        if q >= 9 || m == 0 && value != 0 { return 9 + escapeBits }
        guard k > 1 else { return Int(q) + 1 }
        return Int(q) + 1 + (value % m == 0 ? k - 1 : k)
    }
}

/// Writes big-endian bits into a buffer of fixed capacity.
struct ALACBitWriter {
    private var bytes: [UInt8]
    /// Bits written.
    private(set) var bitCount = 0

    init(capacity: Int) { bytes = [UInt8](repeating: 0, count: capacity) }

    var byteCount: Int { (bitCount + 7) / 8 }

    mutating func reset() { rewind(to: 0) }

    /// Goes back to `bit`, clearing what was written after it.
    mutating func rewind(to bit: Int) {
        let first = bit / 8
        if bit % 8 != 0 { bytes[first] &= UInt8(truncatingIfNeeded: 0xFF00 >> (bit % 8)) }
        let clearFrom = bit % 8 != 0 ? first + 1 : first
        if clearFrom < byteCount { for index in clearFrom..<byteCount { bytes[index] = 0 } }
        bitCount = bit
    }

    /// Writes the low `bits` bits (0…32) of `value`.
    @inline(__always)
    mutating func write(_ value: UInt32, bits: Int) {
        guard bits > 0 else { return }
        let masked = bits == 32 ? UInt64(value) : UInt64(value) & ((1 << UInt64(bits)) - 1)
        var remaining = bits
        while remaining > 0 {
            let index = bitCount >> 3
            let free = 8 - (bitCount & 7)
            let take = min(free, remaining)
            let chunk = UInt8(truncatingIfNeeded: (masked >> UInt64(remaining - take)) & ((1 << UInt64(take)) - 1))
            bytes[index] |= chunk << UInt8(free - take)
            bitCount += take
            remaining -= take
        }
    }

    /// One value in ALAC's Golomb-Rice form, as `BitCursor.rice` reads it.
    @inline(__always)
    mutating func writeRice(_ value: UInt32, k: Int, m: UInt32, escapeBits: Int) {
        let q = m == 0 ? (value == 0 ? 0 : 9) : value / m
        if q >= 9 {
            write(0x1FF, bits: 9)
            write(value, bits: escapeBits)
            return
        }
        // q ones and a zero.
        write((UInt32(1) << UInt32(q + 1)) - 2, bits: Int(q) + 1)
        guard k > 1 else { return }
        let r = value % m
        if r == 0 { write(0, bits: k - 1) } else { write(r + 1, bits: k) }
    }

    mutating func alignToByte() { bitCount = (bitCount + 7) & ~7 }

    func copy(to space: UnsafeMutableRawBufferPointer) {
        bytes.withUnsafeBytes { space.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[0..<min(byteCount, space.count)])) }
    }
}
