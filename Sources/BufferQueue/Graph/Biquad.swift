#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The shape of one equaliser band: the seven filters of Robert Bristow-Johnson's
/// *Audio EQ Cookbook* (the W3C Audio EQ Cookbook note), AVAudioUnitEQ's names.
public enum AudioEQFilterType: String, Sendable, Hashable, CaseIterable {
    /// A bell around the frequency: `gain` dB at its centre, 0 dB far from it.
    case parametric
    /// `gain` dB below the frequency, 0 dB above it.
    case lowShelf
    /// 0 dB below the frequency, `gain` dB above it.
    case highShelf
    /// Second-order low-pass (12 dB per octave); `gain` is not used.
    case lowPass
    /// Second-order high-pass; `gain` is not used.
    case highPass
    /// Band-pass with 0 dB at its centre; `gain` is not used.
    case bandPass
    /// Band-stop (notch); `gain` is not used.
    case notch

    /// A number for the type (the render side reads bands as numbers; `allCases` would allocate).
    var code: UInt64 {
        switch self {
        case .parametric: 0
        case .lowShelf: 1
        case .highShelf: 2
        case .lowPass: 3
        case .highPass: 4
        case .bandPass: 5
        case .notch: 6
        }
    }

    init(code: UInt64) {
        switch code {
        case 1: self = .lowShelf
        case 2: self = .highShelf
        case 3: self = .lowPass
        case 4: self = .highPass
        case 5: self = .bandPass
        case 6: self = .notch
        default: self = .parametric
        }
    }

    /// Whether `gain` shapes the filter (the peak and the two shelves).
    public var usesGain: Bool { self == .parametric || self == .lowShelf || self == .highShelf }
}

/// One band of an ``AudioEQNode``: a cookbook biquad.
public struct AudioEQBand: Sendable, Hashable {
    /// The filter's shape.
    public var type: AudioEQFilterType
    /// Centre or corner frequency in Hz: above 0 and below half the sample rate.
    public var frequency: Double
    /// Boost (positive) or cut in dB, for ``AudioEQFilterType/parametric`` and the shelves.
    public var gain: Double
    /// The quality factor, above 0: the cookbook's Q (for the shelves, its Q form of the slope;
    /// 0.7071 is the flattest low- and high-pass).
    public var q: Double
    /// A bypassed band passes its input unchanged.
    public var bypass: Bool

    /// A band of `type` at `frequency` Hz, with `gain` dB (peak and shelves), quality `q`, and bypassed or not.
    public init(_ type: AudioEQFilterType, frequency: Double, gain: Double = 0, q: Double = 0.7071, bypass: Bool = false) {
        self.type = type
        self.frequency = frequency
        self.gain = gain
        self.q = q
        self.bypass = bypass
    }

    /// Throws a clear error for a band the filter cannot be: a frequency at or above Nyquist, a
    /// Q at or below 0, a value that is not finite.
    public func validate(sampleRate: Double) throws {
        guard sampleRate.isFinite, sampleRate > 0 else {
            throw AudioQueueError(.invalidParameter, "an EQ needs a sample rate above 0; got \(sampleRate) Hz")
        }
        guard frequency.isFinite, frequency > 0, frequency < sampleRate / 2 else {
            throw AudioQueueError(.invalidParameter,
                "an EQ band's frequency must be above 0 and below half the sample rate (\(sampleRate / 2) Hz); got \(frequency) Hz")
        }
        guard q.isFinite, q > 0 else { throw AudioQueueError(.invalidParameter, "an EQ band's Q must be above 0; got \(q)") }
        guard gain.isFinite, abs(gain) <= 120 else {
            throw AudioQueueError(.invalidParameter, "an EQ band's gain must be within ±120 dB; got \(gain)")
        }
    }

    /// ``validate(sampleRate:)`` without the message (the render side's check).
    func isValid(sampleRate: Double) -> Bool {
        frequency.isFinite && frequency > 0 && frequency < sampleRate / 2 && q.isFinite && q > 0 && gain.isFinite && abs(gain) <= 120
    }

    /// The normalised coefficients (a0 = 1) at `sampleRate`, from the cookbook's formulas.
    func coefficients(sampleRate: Double) -> BiquadCoefficients {
        if bypass { return .identity }
        let w0 = 2 * Double.pi * frequency / sampleRate
        let cosW = cos(w0), sinW = sin(w0)
        let alpha = sinW / (2 * q)
        let a = pow(10, gain / 40)
        let b0, b1, b2, a0, a1, a2: Double
        switch type {
        case .lowPass:
            b0 = (1 - cosW) / 2; b1 = 1 - cosW; b2 = (1 - cosW) / 2
            a0 = 1 + alpha; a1 = -2 * cosW; a2 = 1 - alpha
        case .highPass:
            b0 = (1 + cosW) / 2; b1 = -(1 + cosW); b2 = (1 + cosW) / 2
            a0 = 1 + alpha; a1 = -2 * cosW; a2 = 1 - alpha
        case .bandPass:
            b0 = alpha; b1 = 0; b2 = -alpha
            a0 = 1 + alpha; a1 = -2 * cosW; a2 = 1 - alpha
        case .notch:
            b0 = 1; b1 = -2 * cosW; b2 = 1
            a0 = 1 + alpha; a1 = -2 * cosW; a2 = 1 - alpha
        case .parametric:
            b0 = 1 + alpha * a; b1 = -2 * cosW; b2 = 1 - alpha * a
            a0 = 1 + alpha / a; a1 = -2 * cosW; a2 = 1 - alpha / a
        case .lowShelf:
            let s = 2 * a.squareRoot() * alpha
            b0 = a * ((a + 1) - (a - 1) * cosW + s)
            b1 = 2 * a * ((a - 1) - (a + 1) * cosW)
            b2 = a * ((a + 1) - (a - 1) * cosW - s)
            a0 = (a + 1) + (a - 1) * cosW + s
            a1 = -2 * ((a - 1) + (a + 1) * cosW)
            a2 = (a + 1) + (a - 1) * cosW - s
        case .highShelf:
            let s = 2 * a.squareRoot() * alpha
            b0 = a * ((a + 1) + (a - 1) * cosW + s)
            b1 = -2 * a * ((a - 1) + (a + 1) * cosW)
            b2 = a * ((a + 1) + (a - 1) * cosW - s)
            a0 = (a + 1) - (a - 1) * cosW + s
            a1 = 2 * ((a - 1) - (a + 1) * cosW)
            a2 = (a + 1) - (a - 1) * cosW - s
        }
        return BiquadCoefficients(b0: b0 / a0, b1: b1 / a0, b2: b2 / a0, a1: a1 / a0, a2: a2 / a0)
    }
}

/// A biquad's coefficients with a0 divided out.
struct BiquadCoefficients: Equatable, Sendable {
    var b0, b1, b2, a1, a2: Double
    static let identity = BiquadCoefficients(b0: 1, b1: 0, b2: 0, a1: 0, a2: 0)
}

/// One channel's history of a direct-form-I biquad, in double precision (the filter's poles
/// near the unit circle at low frequencies need it).
struct BiquadState {
    var x1 = 0.0, x2 = 0.0, y1 = 0.0, y2 = 0.0

    @inline(__always)
    mutating func step(_ x: Double, _ c: BiquadCoefficients) -> Double {
        let y = c.b0 * x + c.b1 * x1 + c.b2 * x2 - c.a1 * y1 - c.a2 * y2
        x2 = x1; x1 = x
        y2 = y1; y1 = y
        return y
    }
}
