import AudioFileStream
import BufferQueue

// Enums print as words users can read (`loading`, `itemState(index: 2, id: #5, playing)`), also
// where they are nested in another value, not as `AudioPlayback.AudioPlayerItemState.loading`.

extension AudioPlayerEvent: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case let .state(v0): "state(\(v0))"
        case let .itemOpened(v0, v1, v2, v3): "itemOpened(index: \(v0), id: \(v1), format: \(v2), metadata: \(v3.map { "\($0)" } ?? "nil"))"
        case let .itemStarted(v0, v1, v2, v3): "itemStarted(index: \(v0), id: \(v1), outputFrame: \(v2), gain: \(v3))"
        case let .itemSkipped(v0, v1, v2): "itemSkipped(index: \(v0), id: \(v1), \(v2))"
        case let .itemState(v0, v1, v2): "itemState(index: \(v0), id: \(v1), \(v2))"
        case let .streamTitle(v0, v1): "streamTitle(\(v0), index: \(v1))"
        case let .property(v0, v1, v2): "property(name: \(v0), value: \(v1), index: \(v2))"
        case let .itemWarning(v0, v1, v2): "itemWarning(index: \(v0), id: \(v1), \(v2))"
        case let .crossfadeShortened(v0, v1, v2, v3): "crossfadeShortened(index: \(v0), id: \(v1), frames: \(v2), requested: \(v3))"
        }
    }
}

extension AudioPlayerItemFailurePolicy: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .skip: "skip"
        case .stop: "stop"
        }
    }
}

extension AudioPlayerItemState: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .queued: "queued"
        case .connecting: "connecting"
        case .loading: "loading"
        case .reconnecting: "reconnecting"
        case .playing: "playing"
        case .finished: "finished"
        case let .failed(v0): "failed(\(v0))"
        case .removed: "removed"
        }
    }
}

extension AudioSourceEvent: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case let .state(v0): "state(\(v0))"
        case let .streamTitle(v0): "streamTitle(\(v0))"
        case let .property(v0, v1): "property(name: \(v0), value: \(v1))"
        }
    }
}

extension AudioPlayerState: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .connecting: "connecting"
        case .buffering: "buffering"
        case .playing: "playing"
        case .paused: "paused"
        case .seeking: "seeking"
        case .reconnecting: "reconnecting"
        case .finished: "finished"
        case let .failed(v0): "failed(\(v0))"
        }
    }
}

extension AudioPlayer.OutputFormat: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .firstItem: "firstItem"
        case let .fixed(v0, v1): "fixed(sampleRate: \(v0), channels: \(v1))"
        case .itemFormat: "itemFormat"
        }
    }
}

extension ReplayGainSettings.Mode: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .off: "off"
        case .track: "track"
        case .album: "album"
        case .auto: "auto"
        }
    }
}

extension PacketFeeder.Progress: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .enqueued: "enqueued"
        case .waiting: "waiting"
        case .finished: "finished"
        }
    }
}

extension AudioPlayer.Status: CustomStringConvertible {
    /// Where the player is, in words: `item 2 "Title" at 12.5 s of 180.0 s (4.0 s buffered)`
    /// (seconds to the millisecond).
    public var description: String {
        guard let itemIndex else { return "no item" }
        func seconds(_ value: Double) -> String { "\((value * 1000).rounded() / 1000) s" }
        let name = title.map { " \"\($0)\"" } ?? ""
        let length = seconds(duration) + (durationIsEstimated ? " (estimated)" : "")
        return "item \(itemIndex)\(name) at \(seconds(position)) of \(length) (\(seconds(buffered)) buffered)"
    }
}
