import Foundation
internal import AudioPlayback
import AudioToolbox
internal import BufferQueue

/// What an ``AVAudioPlayer`` tells its delegate (Apple's `AVAudioPlayerDelegate`, whose methods
/// are optional: each has an empty default here).
public protocol AVAudioPlayerDelegate: NSObjectProtocol {
    /// The sound played to its end (`flag` true), or stopped because it could not be decoded
    /// (false). Not called after ``AVAudioPlayer/stop()``.
    func audioPlayerDidFinishPlaying(_ player: AVAudioPlayer, successfully flag: Bool)
    /// The sound could not be decoded (the file is damaged, or its data ended early).
    func audioPlayerDecodeErrorDidOccur(_ player: AVAudioPlayer, error: (any Error)?)
}

extension AVAudioPlayerDelegate {
    /// Does nothing (the method is optional).
    public func audioPlayerDidFinishPlaying(_ player: AVAudioPlayer, successfully flag: Bool) {}
    /// Does nothing (the method is optional).
    public func audioPlayerDecodeErrorDidOccur(_ player: AVAudioPlayer, error: (any Error)?) {}
}

/// Plays one sound from a file or from memory (Apple's `AVAudioPlayer`), through the output
/// AudioToolbox plays through (`AQ_OUTPUT`, else the first of PipeWire, PulseAudio and ALSA that
/// answers), over the library's ``/AudioPlayback/AudioPlayer``: gapless loops
/// (``numberOfLoops``), frame-exact ``currentTime``, volume, pan, rate with the pitch kept
/// (``enableRate``), metering.
///
/// Differences from a Mac: the class is `final` (Sendable by construction: its state is under a
/// lock); the delegate is called on a serial queue of the player's, not the main thread (a
/// Linux program need not run a main loop); ``play(atTime:)`` starts within a few milliseconds
/// of the time, not on its sample.
public final class AVAudioPlayer: NSObject, Sendable {
    /// The file played (nil when made from data).
    public let url: URL?
    /// The data played (nil when made from a file).
    public let data: Data?
    /// The sound's format as stored (compressed formats as the library reads them); a new
    /// object at each call, equal to the last.
    public var format: AVAudioFormat {
        var description = streamDescription
        // Made from this description once already (the file's format), so it is made again.
        return AVAudioFormat(streamDescription: &description) ?? Self.fallbackFormat
    }
    private let streamDescription: AudioStreamBasicDescription
    static var fallbackFormat: AVAudioFormat {
        // A literal format (two channels at 44.1 kHz), which always exists.
        AVAudioFormat(standardFormatWithSampleRate: 44_100, channels: 2)!
    }
    /// The sound's length in seconds: its valid frames (gapless: an encoder's delay and padding
    /// are not counted) at its rate.
    public let duration: TimeInterval
    /// The sound's channels.
    public let numberOfChannels: Int

    private let path: String
    /// Data is played from a file of its own, removed with the player.
    private let ownsFile: Bool
    private let delegateQueue = DispatchQueue(label: "AVAudioPlayer.delegate")

    private struct State {
        weak var delegate: (any AVAudioPlayerDelegate)?
        var player: AudioPlayback.AudioPlayer?
        /// Which playback is current: a stop starts a new one, so the old one's end is no finish.
        var generation = 0
        var playing = false
        /// The player made has begun playing (it is paused when not `playing`).
        var started = false
        var volume: Float = 1
        var pan: Float = 0
        var enableRate = false
        var rate: Float = 1
        var numberOfLoops = 0
        var metering = false
        var meters: [AudioLevelMeter] = []
        /// Where the next playback starts (seconds into the sound), and a seek not yet done.
        var start: TimeInterval = 0
        var pendingSeek: TimeInterval?
        /// Where a pause found playback: ``currentTime`` holds it from the call on (the output's
        /// short fade out still plays after it, as on a Mac the device's latency does).
        var pausedAt: TimeInterval?
        var scheduled: DispatchWorkItem?
    }
    private let state = Lock(State())

    /// A player of the file at `url`.
    /// - Throws: an `NSError` in `NSOSStatusErrorDomain` naming the file when it cannot be read.
    public init(contentsOf url: URL) throws {
        let file = try AVAudioFile(forReading: url)
        self.url = url
        data = nil
        path = url.path
        ownsFile = false
        streamDescription = file.fileFormat.streamDescription.pointee
        duration = Double(file.length) / file.processingFormat.sampleRate
        numberOfChannels = Int(file.fileFormat.channelCount)
        super.init()
    }

    /// A player of the file at `url`; the hint is not needed (the format is read from the bytes).
    public convenience init(contentsOf url: URL, fileTypeHint utiString: String?) throws {
        try self.init(contentsOf: url)
    }

    /// A player of `data`: a file's bytes, in any format the library reads.
    public init(data: Data) throws {
        let path = NSTemporaryDirectory() + "/AVAudioPlayer-\(UUID().uuidString)"
        guard FileManager.default.createFile(atPath: path, contents: data) else {
            throw statusError(kAudioFileUnspecifiedError, "the data could not be kept in \(path)")
        }
        let file: AVAudioFile
        do { file = try AVAudioFile(forReading: URL(fileURLWithPath: path)) } catch {
            try? FileManager.default.removeItem(atPath: path)
            throw error
        }
        url = nil
        self.data = data
        self.path = path
        ownsFile = true
        streamDescription = file.fileFormat.streamDescription.pointee
        duration = Double(file.length) / file.processingFormat.sampleRate
        numberOfChannels = Int(file.fileFormat.channelCount)
        super.init()
    }

    /// A player of `data`; the hint is not needed (the format is read from the bytes).
    public convenience init(data: Data, fileTypeHint utiString: String?) throws {
        try self.init(data: data)
    }

    deinit {
        state.withLock { $0.player }?.stop()
        if ownsFile { try? FileManager.default.removeItem(atPath: path) }
    }

    /// Told when the sound finishes and when it cannot be decoded (held weakly).
    public var delegate: (any AVAudioPlayerDelegate)? {
        get { state.withLock { $0.delegate } }
        set { state.withLock { $0.delegate = newValue } }
    }

    /// The format's settings dictionary.
    public var settings: [String: Any] { format.settings }

    // MARK: playing

    /// Gets ready to play (opens the output when playback begins); true when it can.
    @discardableResult
    public func prepareToPlay() -> Bool {
        state.withLock { prepare(&$0) }
        return true
    }

    private func prepare(_ state: inout State) {
        guard state.player == nil else { return }
        _ = codecsRegistered
        let name = url?.lastPathComponent ?? "data"
        let loops = state.numberOfLoops < 0 ? Int.max : state.numberOfLoops + 1
        var configuration = AudioPlayback.AudioPlayer.Configuration(loops: loops, startSeconds: state.start, volume: state.volume, pan: state.pan)
        configuration.timePitch = state.enableRate ? .timeDomain : nil
        configuration.playRate = state.enableRate ? state.rate : 1
        configuration.onEvent = { [weak self] event in
            guard case .itemWarning(_, _, let message) = event else { return }
            self?.tellDecodeError(statusError(kAudioFileInvalidFileError, "\(name): \(message)"))
        }
        state.player = AudioPlayback.AudioPlayer(items: [.file(path)], configuration: configuration) {
            OutputRoute.output.makeSink(applicationName: "AVAudioPlayer", streamName: name)
        }
        state.player?.isMeteringEnabled = state.metering
    }

    /// Plays from ``currentTime`` (resumes after ``pause()``); true when playback begins.
    @discardableResult
    public func play() -> Bool {
        let begun = state.withLock { state -> (AudioPlayback.AudioPlayer, Int)? in
            state.scheduled?.cancel()
            state.scheduled = nil
            guard !state.playing else { return nil }
            state.playing = true
            if let player = state.player, state.started {
                state.pausedAt = nil
                player.resume()
                return nil
            }
            prepare(&state)
            state.started = true
            state.generation += 1
            return state.player.map { ($0, state.generation) }
        }
        guard let (player, generation) = begun else { return state.withLock { $0.playing } }
        Task { [self] in
            do {
                // Its one file failing part-way is a decode error, as on a Mac (the player's
                // report lists it as skipped: what was read before it played).
                if let failure = try await player.play().skipped.first { throw failure }
                finished(generation, successfully: true)
            } catch {
                tellDecodeError(error as NSError)
                finished(generation, successfully: false)
            }
        }
        return true
    }

    /// Plays at `time` on the ``deviceCurrentTime`` clock (at once when it has passed); true
    /// when scheduled.
    @discardableResult
    public func play(atTime time: TimeInterval) -> Bool {
        let delay = time - deviceCurrentTime
        guard delay > 0 else { return play() }
        let item = DispatchWorkItem { [weak self] in _ = self?.play() }
        state.withLock { state in
            state.scheduled?.cancel()
            state.scheduled = item
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + delay, execute: item)
        return true
    }

    /// Pauses; ``play()`` goes on from here.
    public func pause() {
        state.withLock { state in
            state.scheduled?.cancel()
            guard state.playing, let player = state.player else { return }
            state.pausedAt = position(state)
            player.pause()
            state.playing = false
        }
    }

    /// Stops and lets the output go; ``currentTime`` stays where playback was (as on a Mac), and
    /// the delegate is not told.
    public func stop() {
        let player = state.withLock { state -> AudioPlayback.AudioPlayer? in
            state.scheduled?.cancel()
            state.start = position(state)
            state.pendingSeek = nil
            state.pausedAt = nil
            state.generation += 1
            state.playing = false
            state.started = false
            defer { state.player = nil }
            return state.player
        }
        player?.stop()
    }

    private func finished(_ generation: Int, successfully: Bool) {
        let current = state.withLock { state -> Bool in
            guard state.generation == generation else { return false }
            state.playing = false
            state.started = false
            state.player = nil
            state.start = 0
            state.pendingSeek = nil
            return true
        }
        guard current else { return }
        delegateQueue.async { [self] in
            delegate?.audioPlayerDidFinishPlaying(self, successfully: successfully)
        }
    }

    private func tellDecodeError(_ error: NSError) {
        delegateQueue.async { [self] in
            delegate?.audioPlayerDecodeErrorDidOccur(self, error: error)
        }
    }

    /// Whether it is playing now.
    public var isPlaying: Bool { state.withLock { $0.playing } }

    // MARK: where and how

    /// Seconds into the sound: where it plays now, or where it will start. Setting it moves
    /// there, frame-exact (while playing too).
    public var currentTime: TimeInterval {
        get { state.withLock { position($0) } }
        set {
            let target = min(max(newValue.isFinite ? newValue : 0, 0), duration)
            let player = state.withLock { state -> AudioPlayback.AudioPlayer? in
                guard let player = state.player, state.started else {
                    state.start = target
                    state.player = nil   // made again from the new start
                    return nil
                }
                state.pendingSeek = target
                if state.pausedAt != nil { state.pausedAt = target }
                return player
            }
            guard let player else { return }
            Task { [self] in
                _ = try? await player.seek(to: target)
                state.withLock { if $0.pendingSeek == target { $0.pendingSeek = nil } }
            }
        }
    }

    private func position(_ state: State) -> TimeInterval {
        if let seek = state.pendingSeek { return seek }
        guard let player = state.player, state.started else { return state.start }
        return state.pausedAt ?? player.status.position
    }

    /// The output's clock, in seconds (host time: the monotonic clock, as ``AVAudioTime`` uses).
    public var deviceCurrentTime: TimeInterval {
        AVAudioTime.seconds(forHostTime: AudioGetCurrentHostTime())
    }

    /// The volume, 0...1.
    public var volume: Float {
        get { state.withLock { $0.volume } }
        set { setVolume(newValue, fadeDuration: 0) }
    }

    /// Sets the volume (the change glides over the library's short ramp; `duration` is not used).
    public func setVolume(_ volume: Float, fadeDuration duration: TimeInterval) {
        let value = min(max(volume.isFinite ? volume : 1, 0), 1)
        state.withLock { state in
            state.volume = value
            try? state.player?.setVolume(value)
        }
    }

    /// The balance, -1 (left) ... 1 (right).
    public var pan: Float {
        get { state.withLock { $0.pan } }
        set {
            let value = min(max(newValue.isFinite ? newValue : 0, -1), 1)
            state.withLock { state in
                state.pan = value
                try? state.player?.setPan(value)
            }
        }
    }

    /// Whether ``rate`` applies; set it before ``prepareToPlay()`` or ``play()``.
    public var enableRate: Bool {
        get { state.withLock { $0.enableRate } }
        set { state.withLock { $0.enableRate = newValue } }
    }

    /// The play rate, 0.5...2 (the pitch kept), once ``enableRate`` is set.
    public var rate: Float {
        get { state.withLock { $0.rate } }
        set {
            let value = min(max(newValue.isFinite ? newValue : 1, 0.5), 2)
            state.withLock { state in
                state.rate = value
                if state.enableRate { try? state.player?.setPlayRate(value) }
            }
        }
    }

    /// Times the sound plays again after the first (0: once; a negative number: until stopped).
    /// Set it before playback begins.
    public var numberOfLoops: Int {
        get { state.withLock { $0.numberOfLoops } }
        set { state.withLock { $0.numberOfLoops = newValue } }
    }

    // MARK: metering

    /// Whether the output's levels are measured (read them after ``updateMeters()``).
    public var isMeteringEnabled: Bool {
        get { state.withLock { $0.metering } }
        set {
            state.withLock { state in
                state.metering = newValue
                state.player?.isMeteringEnabled = newValue
            }
        }
    }

    /// Takes the levels of what is heard now.
    public func updateMeters() {
        state.withLock { state in state.meters = state.metering ? state.player?.levelMeters ?? [] : [] }
    }

    /// The peak level of `channelNumber` at the last ``updateMeters()``, in dBFS (-160 silent).
    public func peakPower(forChannel channelNumber: Int) -> Float {
        state.withLock { $0.meters.power(ofChannel: channelNumber, \.peak) }
    }

    /// The average (RMS) level of `channelNumber` at the last ``updateMeters()``, in dBFS (-160 silent).
    public func averagePower(forChannel channelNumber: Int) -> Float {
        state.withLock { $0.meters.power(ofChannel: channelNumber, \.average) }
    }

}

extension Array where Element == AudioLevelMeter {
    /// Apple's meter reading of `channel`: the `level` in dBFS, -160 for silence or a channel not
    /// metered (the library's own `decibels` floors at -120).
    func power(ofChannel channel: Int, _ level: KeyPath<AudioLevelMeter, Float>) -> Float {
        guard indices.contains(channel) else { return -160 }
        let value = self[channel][keyPath: level]
        return value > 0 ? Swift.max(20 * log10(value), -160) : -160
    }
}
