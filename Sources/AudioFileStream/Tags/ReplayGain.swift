import BufferQueue

/// The loudness gains a file's tags carry, in ReplayGain 2.0's terms: the gain that brings the
/// track (or its album) to the reference of −18 LUFS, and the peak as a linear sample value.
///
/// Read from `REPLAYGAIN_TRACK_GAIN`, `…_PEAK`, `REPLAYGAIN_ALBUM_GAIN`, `…_PEAK` — Vorbis comments
/// (FLAC, Ogg Vorbis, Ogg FLAC), ID3v2 `TXXX` frames (MP3) and iTunes freeform items
/// (`----:com.apple.iTunes:replaygain_*`, MP4), names in any case — and for Opus from
/// `R128_TRACK_GAIN` / `R128_ALBUM_GAIN` (RFC 7845 §5.2.1: Q7.8 integers in dB relative to
/// −23 LUFS, on top of the header's output gain, which the decoder always applies), converted
/// to the −18 LUFS reference (+5 dB). An Opus file's `REPLAYGAIN_*` tags are ignored, as the RFC
/// says they must not be used there.
public struct ReplayGain: Sendable, Hashable {
    /// The ReplayGain 2.0 reference loudness.
    public static let referenceLoudness = -18.0
    /// The loudness Opus's R128 gains are relative to.
    public static let opusReferenceLoudness = -23.0

    /// dB that bring the track to ``referenceLoudness``.
    public var trackGain: Double?
    /// The track's peak, linear (1 is full scale); nil when not tagged.
    public var trackPeak: Double?
    /// dB that bring the album to ``referenceLoudness``.
    public var albumGain: Double?
    /// The album's peak, linear.
    public var albumPeak: Double?

    /// Gains in dB and peaks as linear sample values; nil where not tagged.
    public init(trackGain: Double? = nil, trackPeak: Double? = nil, albumGain: Double? = nil, albumPeak: Double? = nil) {
        self.trackGain = trackGain
        self.trackPeak = trackPeak
        self.albumGain = albumGain
        self.albumPeak = albumPeak
    }

    /// The gains `metadata` carries for audio of `format`; nil when it has none (or none that parse).
    public init?(metadata: AudioFileMetadata, format: AudioFormatID) {
        var upper: [String: String] = [:]
        for (name, value) in metadata.tags { upper[name.uppercased()] = value }
        if format == .opus {
            func r128(_ name: String) -> Double? {
                // A Q7.8 integer: dB × 256, relative to −23 LUFS.
                guard let text = upper[name]?.trimmingWhitespace, let value = Int(text), (-32768...32767).contains(value) else { return nil }
                return Double(value) / 256 + (Self.referenceLoudness - Self.opusReferenceLoudness)
            }
            trackGain = r128("R128_TRACK_GAIN")
            albumGain = r128("R128_ALBUM_GAIN")
        } else {
            func decibels(_ name: String) -> Double? {
                // "-6.48 dB", "+2.1 dB", "-6.48".
                guard let text = upper[name]?.trimmingWhitespace else { return nil }
                let number = text.split(separator: " ").first.map { $0.hasPrefix("+") ? String($0.dropFirst()) : String($0) }
                return number.flatMap(Double.init).flatMap { $0.isFinite && abs($0) < 100 ? $0 : nil }
            }
            func peak(_ name: String) -> Double? {
                guard let text = upper[name]?.trimmingWhitespace, let value = Double(text), value.isFinite, value > 0 else { return nil }
                return value
            }
            trackGain = decibels("REPLAYGAIN_TRACK_GAIN")
            trackPeak = peak("REPLAYGAIN_TRACK_PEAK")
            albumGain = decibels("REPLAYGAIN_ALBUM_GAIN")
            albumPeak = peak("REPLAYGAIN_ALBUM_PEAK")
        }
        if trackGain == nil && albumGain == nil { return nil }
    }
}

extension String {
    fileprivate var trimmingWhitespace: String {
        String(drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}
