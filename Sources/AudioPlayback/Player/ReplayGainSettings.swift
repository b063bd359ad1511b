#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import AudioFileStream

/// How a player applies ReplayGain (and Opus's R128) tags.
public struct ReplayGainSettings: Sendable, Hashable {
    /// Which gain.
    public enum Mode: String, Sendable, Hashable, CaseIterable {
        /// No tag gain (Opus's header output gain still applies: the decoder owns it).
        case off
        /// The track's gain.
        case track
        /// The album's gain, the track's where the album has none.
        case album
        /// The album's gain when the item plays among its album — the item before or after it in
        /// the list has the same album tags (``/AudioFileStream/AudioFileMetadata/albumKey``) — else the track's.
        case auto
    }
    /// Which gain applies: none, the track's, the album's, or the album's when the list is one album.
    public var mode: Mode
    /// dB added to every tagged gain.
    public var preamp: Double
    /// dB for an item without tags (nil: unchanged).
    public var fallback: Double?
    /// Keeps the gain low enough that the tagged peak stays at or under full scale (1.0).
    public var preventClipping: Bool

    /// Settings of `mode`, with `preamp` dB added, `fallback` dB for untagged items (nil: none), clipping prevented or not.
    public init(mode: Mode, preamp: Double = 0, fallback: Double? = nil, preventClipping: Bool = true) {
        self.mode = mode
        self.preamp = preamp
        self.fallback = fallback
        self.preventClipping = preventClipping
    }

    /// The linear gain for an item whose tags say `gains` (nil: it has none); `amongItsAlbum`
    /// decides ``Mode/auto`` (an item played next to another of its album).
    public func linearGain(_ gains: ReplayGain?, amongItsAlbum: Bool = false) -> Float {
        guard mode != .off else { return 1 }
        let track = gains?.trackGain.map { ($0, gains?.trackPeak) }
        let chosen: (gain: Double, peak: Double?)?
        switch mode {
        case .off: chosen = nil
        case .track: chosen = track
        case .album: chosen = gains?.albumGain.map { ($0, gains?.albumPeak) } ?? track
        case .auto: chosen = amongItsAlbum ? gains?.albumGain.map { ($0, gains?.albumPeak) } ?? track : track
        }
        guard let chosen else { return fallback.map { Float(Self.linear($0)) } ?? 1 }
        var linear = Self.linear(chosen.gain + preamp)
        if preventClipping, let peak = chosen.peak, peak * linear > 1 { linear = 1 / peak }
        return Float(min(linear, 16))
    }

    static func linear(_ decibels: Double) -> Double { pow(10, decibels / 20) }
}
