import Foundation
import Synchronization
internal import BufferQueue

/// A processing node of the engine (Apple's `AVAudioUnit`): the library's effects, in the graph.
open class AVAudioUnit: AVAudioNode {
    override var role: NodeRole { .effect }

    /// The unit's name.
    open var name: String { String(describing: type(of: self)).replacingOccurrences(of: "AVAudioUnit", with: "") }
    /// Who made it.
    open var manufacturerName: String { "swift-audio-queue" }
    /// Its version.
    open var version: Int { 1 }
}

/// An effect that keeps its input's timing (Apple's `AVAudioUnitEffect`).
open class AVAudioUnitEffect: AVAudioUnit {
    /// The parameters its render side reads (the subclass says which float is which).
    let controls: UnitControls

    init(controls: UnitControls) {
        self.controls = controls
        super.init()
    }

    /// Passes the input through untouched.
    open var bypass: Bool {
        get { controls.bypass.load(ordering: .relaxed) }
        set { controls.bypass.store(newValue, ordering: .relaxed) }
    }
}

/// An effect that changes its input's timing (Apple's `AVAudioUnitTimeEffect`).
open class AVAudioUnitTimeEffect: AVAudioUnit {
    weak var stage: AudioTimePitchNode?
    private var bypassed = false

    /// Passes the input through untouched.
    open var bypass: Bool {
        get { bypassed }
        set {
            bypassed = newValue
            stage?.bypass = newValue
        }
    }

    override func coreDropped() { stage = nil }
}

// MARK: - Equaliser

/// The equaliser's filter types (Apple's `AVAudioUnitEQFilterType`), each made with the
/// library's cookbook biquads.
public enum AVAudioUnitEQFilterType: Int, Sendable {
    /// A peak of `gain` around `frequency`, `bandwidth` octaves wide.
    case parametric = 0
    /// Second-order Butterworth low-pass at `frequency`.
    case lowPass = 1
    /// Second-order Butterworth high-pass at `frequency`.
    case highPass = 2
    /// Low-pass with a resonance set by `bandwidth`.
    case resonantLowPass = 3
    /// High-pass with a resonance set by `bandwidth`.
    case resonantHighPass = 4
    /// Band-pass around `frequency`, `bandwidth` octaves wide.
    case bandPass = 5
    /// Band-stop (notch) around `frequency`, `bandwidth` octaves wide.
    case bandStop = 6
    /// Low shelf of `gain` below `frequency`.
    case lowShelf = 7
    /// High shelf of `gain` above `frequency`.
    case highShelf = 8
    /// Low shelf with a resonance set by `bandwidth`.
    case resonantLowShelf = 9
    /// High shelf with a resonance set by `bandwidth`.
    case resonantHighShelf = 10
}

/// One band of an ``AVAudioUnitEQ`` (Apple's `AVAudioUnitEQFilterParameters`); changes apply
/// while the engine plays, gliding over 10 ms without a click.
open class AVAudioUnitEQFilterParameters: NSObject {
    weak var owner: AVAudioUnitEQ?
    let index: Int

    init(owner: AVAudioUnitEQ, index: Int) {
        self.owner = owner
        self.index = index
        super.init()
    }

    /// The filter type (parametric until set).
    open var filterType: AVAudioUnitEQFilterType = .parametric { didSet { owner?.bandChanged(index) } }
    /// The centre or cut-off frequency in hertz, 20...(half the rate) (1000 until set).
    open var frequency: Float = 1000 { didSet { owner?.bandChanged(index) } }
    /// The width in octaves, 0.05...5 (0.5 until set).
    open var bandwidth: Float = 0.5 { didSet { owner?.bandChanged(index) } }
    /// The gain in decibels, -96...24 (parametric and shelves; 0 until set).
    open var gain: Float = 0 { didSet { owner?.bandChanged(index) } }
    /// Whether the band is off (true until set, as the Audio Unit's bands are).
    open var bypass: Bool = true { didSet { owner?.bandChanged(index) } }

    /// The band as the library's equaliser takes it, at `sampleRate`.
    func band(sampleRate: Double) -> AudioEQBand {
        let frequency = min(max(Double(self.frequency), 10), sampleRate * 0.499)
        let octaves = min(max(Double(bandwidth), 0.05), 5)
        let widthQ = pow(2, octaves).squareRoot() / (pow(2, octaves) - 1)
        let gain = min(max(Double(self.gain), -96), 24)
        let butterworth = 0.5.squareRoot()
        let (type, q): (AudioEQFilterType, Double)
        switch filterType {
        case .parametric: (type, q) = (.parametric, widthQ)
        case .lowPass: (type, q) = (.lowPass, butterworth)
        case .highPass: (type, q) = (.highPass, butterworth)
        case .resonantLowPass: (type, q) = (.lowPass, widthQ)
        case .resonantHighPass: (type, q) = (.highPass, widthQ)
        case .bandPass: (type, q) = (.bandPass, widthQ)
        case .bandStop: (type, q) = (.notch, widthQ)
        case .lowShelf: (type, q) = (.lowShelf, butterworth)
        case .highShelf: (type, q) = (.highShelf, butterworth)
        case .resonantLowShelf: (type, q) = (.lowShelf, widthQ)
        case .resonantHighShelf: (type, q) = (.highShelf, widthQ)
        }
        return AudioEQBand(type, frequency: frequency, gain: gain, q: q, bypass: bypass)
    }
}

/// A multi-band equaliser (Apple's `AVAudioUnitEQ`): the library's `AudioEqualizer` (RBJ cookbook
/// biquads in double precision, changes glided) as a node of the graph. Bandwidths in octaves
/// become the cookbook's Q (`√2^N / (2^N − 1)`); frequencies above half the rate are held below it.
open class AVAudioUnitEQ: AVAudioUnitEffect {
    /// The bands, in order.
    public private(set) var bands: [AVAudioUnitEQFilterParameters] = []
    private var globalGainDecibels: Float = 0
    private var equalizer: AudioEqualizer?
    private var sampleRate = 44_100.0

    /// An equaliser of one band.
    public convenience init() {
        self.init(numberOfBands: 1)
    }

    /// An equaliser of `numberOfBands` bands (each parametric at 1 kHz and bypassed until set).
    public init(numberOfBands: Int) {
        super.init(controls: UnitControls(1))
        bands = (0..<max(numberOfBands, 0)).map { AVAudioUnitEQFilterParameters(owner: self, index: $0) }
    }

    /// A gain for every band, in decibels (-96...24).
    open var globalGain: Float {
        get { globalGainDecibels }
        set {
            globalGainDecibels = min(max(newValue, -96), 24)
            controls[0] = Float(pow(10, Double(globalGainDecibels) / 20))
        }
    }

    override func makeCore(_ format: NodeFormat, _ context: NodeContext) throws -> any AudioNode {
        sampleRate = format.sampleRate
        let equalizer = AudioEqualizer(bands: bands.map { $0.band(sampleRate: format.sampleRate) })
        try equalizer.validate(sampleRate: format.sampleRate)
        self.equalizer = equalizer
        return try AudioProcessorEffectNode(name: "eq", sampleRate: format.sampleRate, channels: format.channels,
                                            processor: EQProcessor(equalizer: equalizer, controls: controls, channels: format.channels,
                                                                   sampleRate: format.sampleRate))
    }

    override func coreDropped() { equalizer = nil }

    func bandChanged(_ index: Int) {
        guard let equalizer, index < bands.count else { return }
        try? equalizer.setBand(index, to: bands[index].band(sampleRate: sampleRate), sampleRate: sampleRate)
    }

    /// Clears the filters' history.
    open override func reset() { equalizer?.reset() }
}

/// An effect's parameters as its render side reads them: a few floats and the bypass, each atomic
/// (a parameter changes whole, from the next render on).
final class UnitControls: Sendable {
    private let v0 = Atomic<UInt32>(0), v1 = Atomic<UInt32>(0), v2 = Atomic<UInt32>(0), v3 = Atomic<UInt32>(0)
    let bypass = Atomic<Bool>(false)

    init(_ values: Float...) {
        for (index, value) in values.enumerated() { self[index] = value }
    }

    subscript(index: Int) -> Float {
        get {
            switch index {
            case 0: return Float(bitPattern: v0.load(ordering: .relaxed))
            case 1: return Float(bitPattern: v1.load(ordering: .relaxed))
            case 2: return Float(bitPattern: v2.load(ordering: .relaxed))
            default: return Float(bitPattern: v3.load(ordering: .relaxed))
            }
        }
        set {
            switch index {
            case 0: v0.store(newValue.bitPattern, ordering: .relaxed)
            case 1: v1.store(newValue.bitPattern, ordering: .relaxed)
            case 2: v2.store(newValue.bitPattern, ordering: .relaxed)
            default: v3.store(newValue.bitPattern, ordering: .relaxed)
            }
        }
    }
}

/// The equaliser's render side.
final class EQProcessor: AudioNodeProcessor {
    private let equalizer: AudioEqualizer
    private let controls: UnitControls
    private let channels: Int
    private let sampleRate: Double

    init(equalizer: AudioEqualizer, controls: UnitControls, channels: Int, sampleRate: Double) {
        self.equalizer = equalizer
        self.controls = controls
        self.channels = channels
        self.sampleRate = sampleRate
    }

    func render(input: AudioNodeInput, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
        let (n, end) = input.pull(into: out, frames: frames)
        guard !controls.bypass.load(ordering: .relaxed) else { return (n, end) }
        equalizer.process(out, frames: n, channels: channels, sampleRate: sampleRate)
        let gain = controls[0]
        if gain != 1 { for index in 0..<(n * channels) { out[index] *= gain } }
        return (n, end)
    }
}

// MARK: - Time effects

/// Plays its input faster or slower keeping the pitch (Apple's `AVAudioUnitTimePitch`): the
/// library's time-pitch node, WSOLA in the time domain. A ``pitch`` shift needs the spectral
/// engine (register `RubberBandTimePitch`, GPL): with it registered, a unit made with a shift
/// uses it; without it the shift is not applied. Rates are held within 0.25...4.
open class AVAudioUnitTimePitch: AVAudioUnitTimeEffect {
    private var rateValue: Float = 1
    private var pitchValue: Float = 0

    public override init() {
        super.init()
    }

    /// Playback speed, 1/32...32 in Apple's range; the library plays 0.25...4.
    open var rate: Float {
        get { rateValue }
        set {
            rateValue = min(max(newValue, 1 / 32), 32)
            try? stage?.setRate(Double(min(max(rateValue, 0.25), 4)))
        }
    }

    /// Pitch shift in cents, -2400...2400.
    open var pitch: Float {
        get { pitchValue }
        set {
            pitchValue = min(max(newValue, -2400), 2400)
            if stage?.algorithm == .spectral { try? stage?.setPitch(Double(pitchValue)) }
        }
    }

    /// The analysis windows' overlap, 3...32 (kept; the time-domain algorithm's is fixed).
    open var overlap: Float = 8

    override func makeCore(_ format: NodeFormat, _ context: NodeContext) throws -> any AudioNode {
        let rate = Double(min(max(rateValue, 0.25), 4))
        let node: AudioTimePitchNode
        if pitchValue != 0, let spectral = try? AudioTimePitchNode(algorithm: .spectral, rate: rate, pitch: Double(pitchValue),
                                                                   sampleRate: format.sampleRate, channels: format.channels) {
            node = spectral
        } else {
            node = try AudioTimePitchNode(algorithm: .timeDomain, rate: rate, sampleRate: format.sampleRate, channels: format.channels)
        }
        node.bypass = bypass
        stage = node
        return node
    }
}

/// Plays its input faster or slower with the pitch following, like a tape (Apple's
/// `AVAudioUnitVarispeed`): the library's varispeed resampler as a node. Rate 0.25...4.
open class AVAudioUnitVarispeed: AVAudioUnitTimeEffect {
    private var rateValue: Float = 1

    public override init() {
        super.init()
    }

    /// Playback speed, 0.25...4.
    open var rate: Float {
        get { rateValue }
        set {
            rateValue = min(max(newValue, 0.25), 4)
            try? stage?.setRate(Double(rateValue))
        }
    }

    override func makeCore(_ format: NodeFormat, _ context: NodeContext) throws -> any AudioNode {
        let node = try AudioTimePitchNode(algorithm: .varispeed, rate: Double(rateValue), sampleRate: format.sampleRate, channels: format.channels)
        node.bypass = bypass
        stage = node
        return node
    }
}

// MARK: - Delay

/// An echo (Apple's `AVAudioUnitDelay`): a delay line of up to 2 s per channel whose output is
/// fed back through a one-pole low-pass, mixed with the dry input.
///
/// For input x and the line's output d (x delayed by ``delayTime``): the line takes
/// x + feedback × lowpass(d), and the output is x × (1 − wet) + d × wet, wet = ``wetDryMix`` / 100.
open class AVAudioUnitDelay: AVAudioUnitEffect {
    public init() {
        super.init(controls: UnitControls(1, 50, 15_000, 100))
    }

    /// The delay in seconds, 0...2 (1 until set).
    open var delayTime: TimeInterval {
        get { TimeInterval(controls[0]) }
        set { controls[0] = Float(min(max(newValue, 0), 2)) }
    }

    /// How much of the output goes back into the line, in percent, -100...100 (50 until set).
    open var feedback: Float {
        get { controls[1] }
        set { controls[1] = min(max(newValue, -100), 100) }
    }

    /// The feedback's low-pass cut-off in hertz, 10...(half the rate) (15 000 until set).
    open var lowPassCutoff: Float {
        get { controls[2] }
        set { controls[2] = max(newValue, 10) }
    }

    /// The echo's share of the output in percent, 0...100 (100 until set).
    open var wetDryMix: Float {
        get { controls[3] }
        set { controls[3] = min(max(newValue, 0), 100) }
    }

    override func makeCore(_ format: NodeFormat, _ context: NodeContext) throws -> any AudioNode {
        try AudioProcessorEffectNode(name: "delay", sampleRate: format.sampleRate, channels: format.channels,
                                     processor: DelayProcessor(controls: controls, format: format))
    }
}

/// The delay's render side: the line (interleaved, 2 s and a frame), its write position and
/// each channel's low-pass state.
final class DelayProcessor: AudioNodeProcessor {
    private let controls: UnitControls
    private let channels: Int
    private let sampleRate: Double
    private let capacity: Int
    private let line: UnsafeMutablePointer<Float>
    private let lowpass: UnsafeMutablePointer<Float>
    private var write = 0

    init(controls: UnitControls, format: NodeFormat) {
        self.controls = controls
        channels = format.channels
        sampleRate = format.sampleRate
        capacity = Int(format.sampleRate * 2) + 1
        line = .allocate(capacity: capacity * channels)
        line.initialize(repeating: 0, count: capacity * channels)
        lowpass = .allocate(capacity: channels)
        lowpass.initialize(repeating: 0, count: channels)
    }

    deinit {
        line.deallocate()
        lowpass.deallocate()
    }

    func render(input: AudioNodeInput, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
        let (n, end) = input.pull(into: out, frames: frames)
        guard !controls.bypass.load(ordering: .relaxed) else { return (n, end) }
        let delay = min(max(Int((Double(controls[0]) * sampleRate).rounded()), 0), capacity - 1)
        let feedback = controls[1] / 100
        let cutoff = min(Double(controls[2]), sampleRate * 0.49)
        let smoothing = Float(1 - exp(-2 * Double.pi * cutoff / sampleRate))
        let wet = controls[3] / 100
        for frame in 0..<n {
            let read = (write - delay + capacity) % capacity
            for channel in 0..<channels {
                let x = out[frame * channels + channel]
                let delayed = delay == 0 ? x : line[read * channels + channel]
                lowpass[channel] += smoothing * (delayed - lowpass[channel])
                line[write * channels + channel] = x + feedback * lowpass[channel]
                out[frame * channels + channel] = x * (1 - wet) + delayed * wet
            }
            write = (write + 1) % capacity
        }
        return (n, end)
    }
}

// MARK: - Reverb

/// The reverb's factory presets (Apple's names; the library's own rooms).
public enum AVAudioUnitReverbPreset: Int, Sendable {
    case smallRoom = 0, mediumRoom = 1, largeRoom = 2, mediumHall = 3, largeHall = 4, plate = 5, mediumChamber = 6,
         largeChamber = 7, cathedral = 8, largeRoom2 = 9, mediumHall2 = 10, mediumHall3 = 11, largeHall2 = 12

    /// Room size and damping, 0...1, for the comb filters.
    var room: (size: Float, damping: Float) {
        switch self {
        case .smallRoom: return (0.30, 0.50)
        case .mediumRoom: return (0.50, 0.50)
        case .largeRoom: return (0.70, 0.50)
        case .mediumHall: return (0.75, 0.40)
        case .largeHall: return (0.85, 0.35)
        case .plate: return (0.60, 0.10)
        case .mediumChamber: return (0.60, 0.45)
        case .largeChamber: return (0.75, 0.45)
        case .cathedral: return (0.95, 0.30)
        case .largeRoom2: return (0.72, 0.55)
        case .mediumHall2: return (0.78, 0.42)
        case .mediumHall3: return (0.80, 0.45)
        case .largeHall2: return (0.90, 0.35)
        }
    }
}

/// An algorithmic reverb (Apple's `AVAudioUnitReverb`): per channel, eight parallel damped comb
/// filters into four series all-passes (the Schroeder–Moorer structure, Freeverb's tunings scaled
/// to the rate). The presets set the room's size and damping; it does not sound like Apple's.
open class AVAudioUnitReverb: AVAudioUnitEffect {
    public init() {
        let room = AVAudioUnitReverbPreset.mediumHall.room
        super.init(controls: UnitControls(room.size, room.damping, 100))
    }

    /// Sets the room.
    open func loadFactoryPreset(_ preset: AVAudioUnitReverbPreset) {
        controls[0] = preset.room.size
        controls[1] = preset.room.damping
    }

    /// The reverb's share of the output in percent, 0...100 (100 until set).
    open var wetDryMix: Float {
        get { controls[2] }
        set { controls[2] = min(max(newValue, 0), 100) }
    }

    override func makeCore(_ format: NodeFormat, _ context: NodeContext) throws -> any AudioNode {
        try AudioProcessorEffectNode(name: "reverb", sampleRate: format.sampleRate, channels: format.channels,
                                     processor: ReverbProcessor(controls: controls, format: format))
    }
}

/// The reverb's render side: each channel's combs and all-passes (odd channels offset, for width).
final class ReverbProcessor: AudioNodeProcessor {
    private struct Line {
        let start: Int
        let length: Int
    }

    private static let combTunings = [1116, 1188, 1277, 1356, 1422, 1491, 1557, 1617]
    private static let allpassTunings = [556, 441, 341, 225]
    private let controls: UnitControls
    private let channels: Int
    private let combs: [[Line]]
    private let allpasses: [[Line]]
    private let memory: UnsafeMutablePointer<Float>
    private let memoryCount: Int
    private let positions: UnsafeMutablePointer<Int>
    private let positionCount: Int
    private let filterState: UnsafeMutablePointer<Float>

    init(controls: UnitControls, format: NodeFormat) {
        self.controls = controls
        channels = format.channels
        let scale = format.sampleRate / 44_100
        var next = 0
        var combs: [[Line]] = []
        var allpasses: [[Line]] = []
        for channel in 0..<format.channels {
            let spread = channel % 2 == 1 ? 23 : 0
            combs.append(Self.combTunings.map { tuning in
                let length = max(Int((Double(tuning + spread) * scale).rounded()), 1)
                defer { next += length }
                return Line(start: next, length: length)
            })
            allpasses.append(Self.allpassTunings.map { tuning in
                let length = max(Int((Double(tuning + spread) * scale).rounded()), 1)
                defer { next += length }
                return Line(start: next, length: length)
            })
        }
        self.combs = combs
        self.allpasses = allpasses
        memoryCount = max(next, 1)
        memory = .allocate(capacity: memoryCount)
        memory.initialize(repeating: 0, count: memoryCount)
        positionCount = format.channels * 12
        positions = .allocate(capacity: positionCount)
        positions.initialize(repeating: 0, count: positionCount)
        filterState = .allocate(capacity: format.channels * 8)
        filterState.initialize(repeating: 0, count: format.channels * 8)
    }

    deinit {
        memory.deallocate()
        positions.deallocate()
        filterState.deallocate()
    }

    func render(input: AudioNodeInput, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
        let (n, end) = input.pull(into: out, frames: frames)
        guard !controls.bypass.load(ordering: .relaxed) else { return (n, end) }
        let feedback = controls[0] * 0.28 + 0.7
        let damping = controls[1] * 0.4
        let wet = controls[2] / 100
        for channel in 0..<channels {
            let combLines = combs[channel], allpassLines = allpasses[channel]
            let position = positions + channel * 12
            let state = filterState + channel * 8
            for frame in 0..<n {
                let x = out[frame * channels + channel]
                let input = x * 0.015
                var sum: Float = 0
                for (index, line) in combLines.enumerated() {
                    let cell = memory + line.start + position[index]
                    let y = cell.pointee
                    state[index] = y * (1 - damping) + state[index] * damping
                    cell.pointee = input + state[index] * feedback
                    sum += y
                    position[index] = position[index] + 1 == line.length ? 0 : position[index] + 1
                }
                for (index, line) in allpassLines.enumerated() {
                    let cell = memory + line.start + position[8 + index]
                    let buffered = cell.pointee
                    let y = buffered - sum
                    cell.pointee = sum + buffered * 0.5
                    sum = y
                    position[8 + index] = position[8 + index] + 1 == line.length ? 0 : position[8 + index] + 1
                }
                out[frame * channels + channel] = x * (1 - wet) + sum * 3 * wet
            }
        }
        return (n, end)
    }
}
