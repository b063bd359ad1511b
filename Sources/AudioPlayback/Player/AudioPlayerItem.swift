import AudioFileStream
import BufferQueue
import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the player reports as it goes. `index` is the item's place in the list when reported.
public enum AudioPlayerEvent: Sendable {
    /// The player's state: the state of the item heard now (a prefetched item's states are its own).
    case state(AudioPlayerState)
    /// Item `index` was opened and is being read ahead of what is heard: the format it decodes
    /// to and its tags as its source knows them then (a stream's come with its header). It comes
    /// before the item's ``itemStarted(index:id:outputFrame:gain:)`` (or its ``itemSkipped(index:id:_:)``).
    case itemOpened(index: Int, id: AudioPlayerItem.ID, format: AudioStreamDescription, metadata: AudioFileMetadata?)
    /// The first frame of item `index` is heard (its frames follow the previous item's without a gap,
    /// or under the crossfade's curve). `outputFrame`: where on the output that first frame plays,
    /// in frames handed to the sink since ``AudioPlayer/play()`` began (exact when the item plays
    /// at the output rate; a converted item's to a frame). `gain`: the gain the player applied to
    /// the item, in dB (its ``AudioPlayerItem/gain`` times what its ReplayGain or R128 tags gave;
    /// 0 when none; `-infinity` for a gain of 0).
    case itemStarted(index: Int, id: AudioPlayerItem.ID, outputFrame: Int64, gain: Double)
    /// Item `index` could not be opened or read and the list plays on without it
    /// (``AudioPlayerItemFailurePolicy/skip``); what was enqueued of it before the failure plays.
    /// Its state becomes ``AudioPlayerItemState/failed(_:)`` at the same time.
    case itemSkipped(index: Int, id: AudioPlayerItem.ID, AudioPlayerError)
    /// Item `index` (with the given id) is in a new state.
    case itemState(index: Int, id: AudioPlayerItem.ID, AudioPlayerItemState)
    /// A stream announced a new title (ICY `StreamTitle`) for item `index`.
    case streamTitle(String, index: Int)
    /// A stream property such as `icy-name` or `icy-genre`, for item `index`.
    case property(name: String, value: String, index: Int)
    /// Item `index` has a problem that did not stop it — a cut or damaged end, a length its header
    /// claims and its packets do not hold — reported once, when it is opened. What the item holds
    /// before the damage plays.
    case itemWarning(index: Int, id: AudioPlayerItem.ID, String)
    /// The crossfade into item `index` is `frames` frames long instead of the `requested` D: an
    /// item (the outgoing one, what is left of it after its own crossfade in, or the incoming one)
    /// is shorter than D. `frames` 0: the join is gapless.
    case crossfadeShortened(index: Int, id: AudioPlayerItem.ID, frames: Int, requested: Int)
}

/// What the player does when an item cannot be opened or read.
public enum AudioPlayerItemFailurePolicy: Sendable, Equatable {
    /// The item is reported (``AudioPlayerEvent/itemSkipped(index:id:_:)``, its state
    /// ``AudioPlayerItemState/failed(_:)``) and the list plays on from the next item (gaplessly, or
    /// with the crossfade: a crossfade into an item that fails becomes the outgoing item played to
    /// its end); what was enqueued of the failed item plays. `play()` returns a
    /// ``AudioPlayer/Report`` that lists every skipped item with its error; it throws the first
    /// skipped item's error only when nothing could play at all.
    case skip
    /// Playback ends with the error once what was enqueued has played.
    case stop
}

/// Where one item of the list is.
public enum AudioPlayerItemState: Sendable, Equatable {
    /// In the list, not opened yet.
    case queued
    /// Its stream is connecting.
    case connecting
    /// Opened; its packets are being read and enqueued ahead of what is heard.
    case loading
    /// Its stream lost the connection and is reconnecting.
    case reconnecting
    /// Heard now.
    case playing
    /// Heard to its end (or to where the next item took over).
    case finished
    /// Its source failed; what was enqueued of it played.
    case failed(AudioPlayerError)
    /// Taken out of the list.
    case removed
}

/// Why playback ended early: what failed, for which item, and the underlying error.
public struct AudioPlayerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The step of playing an item that failed.
    public enum Stage: String, Sendable, Equatable {
        /// The item could not be opened (a missing file, a refused URL).
        case open
        /// Its packets could not be read (a damaged file, a lost stream).
        case read
        /// The queue refused its audio (no decoder, a format it cannot take).
        case decode
        /// The sink failed (the server went away, the device was removed).
        case sink
        /// The caller asked for something the player cannot do.
        case request
    }
    /// What failed.
    public var stage: Stage
    /// The item's place in the list and its name, when an item failed.
    public var itemIndex: Int?
    /// The failed item's name (its path or URL, or the name it was given).
    public var itemName: String?
    /// The error that was thrown.
    public var underlying: any Error

    /// An error of `stage`, for the item at `itemIndex` named `itemName`, caused by `underlying`.
    public init(_ stage: Stage, itemIndex: Int? = nil, itemName: String? = nil, underlying: any Error) {
        self.stage = stage
        self.itemIndex = itemIndex
        self.itemName = itemName
        self.underlying = underlying
    }

    public var description: String {
        let item = itemName.map { " \($0)" } ?? itemIndex.map { " item \($0)" } ?? ""
        return "\(stage.rawValue)\(item): \(underlying)"
    }

    /// Equal when the same stage and item failed with errors that read the same.
    public static func == (a: AudioPlayerError, b: AudioPlayerError) -> Bool {
        a.stage == b.stage && a.itemIndex == b.itemIndex && a.itemName == b.itemName && "\(a.underlying)" == "\(b.underlying)"
    }
}

/// What a source reports about itself; the player adds the item's index.
public enum AudioSourceEvent: Sendable {
    /// Opening a connection, reconnecting, buffering.
    case state(AudioPlayerState)
    /// A new title (ICY `StreamTitle`).
    case streamTitle(String)
    /// A stream property such as `icy-name`.
    case property(name: String, value: String)
}

/// Where the player is.
public enum AudioPlayerState: Sendable, Equatable {
    /// Opening a stream (before its first bytes).
    case connecting
    /// Decoding ahead before playback starts, or after an underrun.
    case buffering
    /// Audio is being heard.
    case playing
    /// Paused by ``AudioPlayer/pause()``.
    case paused
    /// Moving to a new position.
    case seeking
    /// A stream lost its connection and is reconnecting.
    case reconnecting
    /// Everything played (final).
    case finished
    /// Stopped by an error (final).
    case failed(AudioPlayerError)
}

/// How a source tells the player about itself: its events, and that more packets arrived.
public struct AudioSourceContext: Sendable {
    /// Events about the source (titles, connection state).
    public let report: @Sendable (AudioSourceEvent) -> Void
    /// More packets can be read now (after ``PacketRead/waiting``).
    public let available: @Sendable () -> Void

    /// A context that passes the source's events to `report` and its readiness to `available`.
    public init(report: @escaping @Sendable (AudioSourceEvent) -> Void = { _ in }, available: @escaping @Sendable () -> Void = {}) {
        self.report = report
        self.available = available
    }
}

/// One entry of the player's list: how to open its packets.
public struct AudioPlayerItem: Sendable, Identifiable {
    /// An item's identity: unique in the process, kept while the list changes around it.
    public struct ID: Hashable, Sendable, CustomStringConvertible {
        let value: Int
        public var description: String { "#\(value)" }
    }
    private static let nextID = Lock(0)

    public let id: ID
    /// A name for messages and the status line.
    public let name: String
    /// Opens the item's packets; `context` takes what the source has to tell.
    public let open: @Sendable (_ context: AudioSourceContext) throws -> any PacketSource
    /// A linear gain on this item's frames, 0...16 (1: as it is): the hook for loudness
    /// normalisation (ReplayGain, R128). It applies exactly from the item's first frame and
    /// multiplies the player's volume (``AudioPlayer/setVolume(_:)``), which it leaves as it is;
    /// in a crossfade it scales the item before the mix. Out of range values are clamped.
    public var gain: Float = 1 {
        didSet { gain = gain.isFinite ? min(max(gain, 0), 16) : 1 }
    }

    /// This item with a gain of `decibels` (see ``gain``).
    public func withGain(decibels: Double) -> AudioPlayerItem {
        var item = self
        item.gain = Float(pow(10, decibels / 20))
        return item
    }

    /// The item's album (``/AudioFileStream/AudioFileMetadata/albumKey``) read before it plays, for ReplayGain's
    /// `auto` mode to see whether its neighbours are of the same album; nil when it cannot be
    /// known ahead (a stream). Local files and cue tracks give it.
    public var albumKey: (@Sendable () -> String?)?

    /// An item named `name` whose source `open` makes when the player needs it (on the player's queue).
    public init(name: String, open: @escaping @Sendable (_ context: AudioSourceContext) throws -> any PacketSource) {
        id = ID(value: Self.nextID.withLock { $0 += 1; return $0 })
        self.name = name
        self.open = open
    }

    /// Opens `path` once (kept in `cache`, which several items may share), however often it is asked.
    static func opener(_ path: String, _ cache: Lock<AudioFile?>) -> @Sendable () throws -> AudioFile {
        {
            try cache.withLock { cached -> AudioFile in
                if let cached { return cached }
                let made = try AudioFile(path: path)
                cached = made
                return made
            }
        }
    }

    /// A local file; it is opened and indexed once, however often the item is played.
    public static func file(_ path: String) -> AudioPlayerItem {
        let opened = opener(path, Lock(nil))
        var item = AudioPlayerItem(name: path) { _ in FilePacketSource(file: try opened()) }
        item.albumKey = { (try? opened())?.metadata.albumKey }
        return item
    }
}


extension AudioPlayerItem {
    /// A cue sheet's track: its stretch of `path` (``FrameRangePacketSource``), named by its title
    /// and performer. The file is opened and indexed when the item is first played.
    public static func track(_ track: CueTrack, in path: String) -> AudioPlayerItem {
        .track(track, in: path, file: Lock(nil))
    }

    /// A track whose file is opened once for every track made with `file`.
    static func track(_ track: CueTrack, in path: String, file: Lock<AudioFile?>) -> AudioPlayerItem {
        let name = track.title.map { "\(path) #\(track.number) \($0)" } ?? "\(path) #\(track.number)"
        let open = opener(path, file)
        // The tracks of one file are one album, tagged or not.
        var item = AudioPlayerItem(name: name) { _ in
            let opened = try open()
            var metadata = opened.metadata
            metadata.title = track.title ?? metadata.title
            metadata.artist = track.performer ?? metadata.artist
            metadata.cueSheet = nil
            return try FrameRangePacketSource(base: FilePacketSource(file: opened), range: track.startFrame..<(track.startFrame + track.frames),
                                              metadata: metadata)
        }
        item.albumKey = { (try? open())?.metadata.albumKey ?? "cue sheet of \(path)" }
        return item
    }

    /// The tracks of a `.cue` sheet (each file it names opened once), or of the sheet embedded in
    /// an audio file (a FLAC `CUESHEET` block, a `CUESHEET` comment), in order: played one after
    /// the other they are the album, gapless.
    /// - Throws: ``/AudioFileStream/CueSheetError``, what opening a file throws, and ``/BufferQueue/AudioQueueError`` for an
    ///   audio file with no sheet embedded.
    public static func tracks(ofCueSheet path: String) throws -> [AudioPlayerItem] {
        if AudioSniffer.pathExtension(of: path) == "cue" {
            let placed = try CueSheet(contentsOfFile: path).tracks(ofSheetAt: path)
            var files: [String: Lock<AudioFile?>] = [:]
            return placed.map { entry in
                let file = files[entry.path] ?? Lock(nil)
                files[entry.path] = file
                return .track(entry.track, in: entry.path, file: file)
            }
        }
        let file = try AudioFile(path: path)
        guard let tracks = file.cueTracks else {
            throw AudioQueueError(.invalidParameter, "\(path) has no cue sheet embedded (a FLAC CUESHEET block or a CUESHEET comment)")
        }
        let shared = Lock<AudioFile?>(file)
        return tracks.map { .track($0, in: path, file: shared) }
    }
}
