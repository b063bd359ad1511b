// `--eq TYPE:HZ:DB:Q`: one equaliser band, as aqrender, aqplay and aqmix take it.
import ArgumentParser
import BufferQueue

/// One band of `--eq TYPE:HZ[:DB[:Q]]`: TYPE is peak, lowshelf, highshelf, lowpass, highpass,
/// bandpass or notch; DB (default 0) shapes only the first three; Q defaults to 0.7071.
public struct EQOption: ExpressibleByArgument, Sendable {
    public let band: AudioEQBand

    static let types: [String: AudioEQFilterType] = [
        "peak": .parametric, "lowshelf": .lowShelf, "highshelf": .highShelf, "lowpass": .lowPass,
        "highpass": .highPass, "bandpass": .bandPass, "notch": .notch,
    ]

    public init?(argument: String) {
        let parts = argument.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard (2...4).contains(parts.count), let type = Self.types[parts[0].lowercased()], let frequency = Double(parts[1]) else { return nil }
        let gain = parts.count > 2 && !parts[2].isEmpty ? Double(parts[2]) : 0
        let q = parts.count > 3 && !parts[3].isEmpty ? Double(parts[3]) : 0.7071
        guard let gain, let q else { return nil }
        band = AudioEQBand(type, frequency: frequency, gain: gain, q: q)
    }

    public static let help = "An equaliser band TYPE:HZ[:DB[:Q]], repeatable: TYPE peak, lowshelf, highshelf, lowpass, highpass, "
        + "bandpass or notch; DB (default 0) is used by the first three; Q defaults to 0.7071."
}
