// Command-line options the example programs share.
import ArgumentParser
import BufferQueue

/// `--rate`, `--pitch` and `--time-pitch`, as `aqplay` and `aqrender` take them.
public struct TimePitchOptions: ParsableArguments {
    @Option(help: "Play rate, 0.25...4.")
    public var rate: Double?
    @Option(parsing: .unconditional, help: "Pitch shift in cents, -2400...2400 (spectral only).")
    public var pitch: Double?

    public enum Choice: String, ExpressibleByArgument, CaseIterable {
        case timedomain, spectral, varispeed
        var algorithm: TimePitchAlgorithm {
            switch self {
            case .timedomain: .timeDomain
            case .spectral: .spectral
            case .varispeed: .varispeed
            }
        }
    }
    @Option(name: .customLong("time-pitch"),
            help: "How --rate plays: timedomain keeps the pitch (WSOLA), spectral keeps it or shifts it by --pitch (Rubber Band), varispeed lets it follow the rate. Default: spectral with --pitch, else timedomain.")
    public var timePitch: Choice?

    public init() {}

    public func validate() throws {
        if let rate, !(0.25...4).contains(rate) { throw ValidationError("--rate must be 0.25...4") }
        if let pitch {
            guard (-2400...2400).contains(pitch) else { throw ValidationError("--pitch must be -2400...2400 cents") }
            if let timePitch, timePitch != .spectral { throw ValidationError("--pitch needs --time-pitch spectral") }
        }
    }

    /// The algorithm: `--time-pitch`, else spectral with `--pitch`, else time-domain.
    public var algorithm: TimePitchAlgorithm { (timePitch ?? (pitch == nil ? .timedomain : .spectral)).algorithm }

    /// ``algorithm`` when any of the three options is given; nil (time-pitch off) otherwise.
    public var requested: TimePitchAlgorithm? { rate != nil || pitch != nil || timePitch != nil ? algorithm : nil }
}
