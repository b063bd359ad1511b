import Foundation
import AudioToolbox
internal import AudioFileStream
internal import AudioPlayback
internal import BufferQueue

/// What an ``AVAudioRecorder`` tells its delegate (Apple's `AVAudioRecorderDelegate`, whose
/// methods are optional: each has an empty default here).
public protocol AVAudioRecorderDelegate: NSObjectProtocol {
    /// The recording ended — ``AVAudioRecorder/stop()``, or the duration given to
    /// ``AVAudioRecorder/record(forDuration:)`` — and the file is complete (`flag` true), or it
    /// ended on an error (false; the file holds what was recorded before it).
    func audioRecorderDidFinishRecording(_ recorder: AVAudioRecorder, successfully flag: Bool)
    /// Encoding or writing failed (the recording stopped there).
    func audioRecorderEncodeErrorDidOccur(_ recorder: AVAudioRecorder, error: (any Error)?)
}

extension AVAudioRecorderDelegate {
    /// Does nothing (the method is optional).
    public func audioRecorderDidFinishRecording(_ recorder: AVAudioRecorder, successfully flag: Bool) {}
    /// Does nothing (the method is optional).
    public func audioRecorderEncodeErrorDidOccur(_ recorder: AVAudioRecorder, error: (any Error)?) {}
}

/// Records from the input AudioToolbox records from (`AQ_INPUT`, else the first of PipeWire,
/// PulseAudio and ALSA that answers; silence when none does) into a file (Apple's
/// `AVAudioRecorder`), over the library's ``/AudioPlayback/AudioFileRecorder``: the container the
/// URL's extension names, the data as the settings say (as ``AVAudioFile`` writes them), and
/// ``record(forDuration:)`` exact to the frame.
///
/// Differences from a Mac: the class is `final` (Sendable by construction: its state is under a
/// lock); the delegate is called on a serial queue of the recorder's, not the main thread.
public final class AVAudioRecorder: NSObject, Sendable {
    /// The file recorded into.
    public let url: URL
    /// The settings it was made with.
    public var settings: [String: Any] { settingsBox.withLock { $0 } }
    /// The format of the data in the file.
    public var format: AVAudioFormat {
        AVAudioFormat(settings: settings) ?? AVAudioFormat(standardFormatWithSampleRate: rate, channels: AVAudioChannelCount(channels))
            ?? AVAudioPlayer.fallbackFormat
    }

    private let settingsBox: Lock<[String: Any]>
    private let rate: Double
    private let channels: Int
    private let encoding: AudioFileEncoding
    private let delegateQueue = DispatchQueue(label: "AVAudioRecorder.delegate")

    private struct State {
        weak var delegate: (any AVAudioRecorderDelegate)?
        var recorder: AudioFileRecorder?
        /// The recorder made is running (its queue started) or paused.
        var started = false
        var recording = false
        var metering = false
        var meters: [AudioLevelMeter] = []
        var scheduled: DispatchWorkItem?
    }
    private let state = Lock(State())

    /// A recorder into `url` (its extension names the container: `.wav`, `.caf`, `.aif`, `.aiff`,
    /// `.m4a`, `.flac`, `.opus`) of the data `settings` describe (``AVFormatIDKey``,
    /// ``AVSampleRateKey``, ``AVNumberOfChannelsKey``, the bit depth and bit rate keys).
    /// - Throws: an `NSError` in `NSOSStatusErrorDomain` for an extension no writer writes or
    ///   settings without a rate and channel count.
    public init(url: URL, settings: [String: Any]) throws {
        guard let rate = AVAudioFormat.number(settings[AVSampleRateKey]), rate > 0,
              let channels = AVAudioFormat.number(settings[AVNumberOfChannelsKey]), channels >= 1, channels <= 64 else {
            throw statusError(kAudio_ParamError, "the settings need AVSampleRateKey and AVNumberOfChannelsKey (1 to 64)")
        }
        guard AudioFileWriter.fileType(forPath: url.path) != nil else {
            throw statusError(kAudioFileUnsupportedFileTypeError, "\(url.path): the extension names no file type this recorder writes "
                + "(.wav, .caf, .aif, .aiff, .m4a, .flac, .opus)")
        }
        self.url = url
        settingsBox = Lock(settings)
        self.rate = rate
        self.channels = Int(channels)
        encoding = AVAudioFile.encoding(settings)
        super.init()
    }

    /// A recorder into `url` of `format`'s data (its settings).
    public convenience init(url: URL, format: AVAudioFormat) throws {
        try self.init(url: url, settings: format.settings)
    }

    deinit {
        if let recorder = state.withLock({ $0.recorder }) { recorder.stop() }
    }

    /// Told when the recording ends and when it fails (held weakly).
    public var delegate: (any AVAudioRecorderDelegate)? {
        get { state.withLock { $0.delegate } }
        set { state.withLock { $0.delegate = newValue } }
    }

    // MARK: recording

    /// Creates the file and gets ready to record; false when the file cannot be made.
    @discardableResult
    public func prepareToRecord() -> Bool {
        state.withLock { (try? prepare(&$0, frameLimit: nil)) != nil }
    }

    private func prepare(_ state: inout State, frameLimit: Int?) throws {
        guard state.recorder == nil else { return }
        _ = codecsRegistered
        let made = try AudioFileRecorder(path: url.path, encoding: encoding, sampleRate: rate, channels: channels,
                                         source: InputRoute.makeSource(), frameLimit: frameLimit)
        made.queue.setLevelMeteringEnabled(state.metering)
        state.recorder = made
    }

    /// Starts recording, or goes on after ``pause()``; true when it records.
    @discardableResult
    public func record() -> Bool { begin(frameLimit: nil) }

    /// Records `duration` seconds — exactly that many frames, rounded — and stops by itself.
    @discardableResult
    public func record(forDuration duration: TimeInterval) -> Bool {
        guard duration.isFinite, duration > 0 else { return false }
        return begin(frameLimit: Int((duration * rate).rounded()))
    }

    /// Starts recording at `time` on the ``deviceCurrentTime`` clock (at once when it has passed).
    @discardableResult
    public func record(atTime time: TimeInterval) -> Bool { schedule(at: time) { $0.record() } }

    /// Starts recording `duration` seconds at `time` on the ``deviceCurrentTime`` clock.
    @discardableResult
    public func record(atTime time: TimeInterval, forDuration duration: TimeInterval) -> Bool {
        schedule(at: time) { $0.record(forDuration: duration) }
    }

    private func schedule(at time: TimeInterval, _ start: @escaping @Sendable (AVAudioRecorder) -> Bool) -> Bool {
        let delay = time - deviceCurrentTime
        guard delay > 0 else { return start(self) }
        let item = DispatchWorkItem { [weak self] in if let self { _ = start(self) } }
        state.withLock { state in
            state.scheduled?.cancel()
            state.scheduled = item
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + delay, execute: item)
        return true
    }

    private func begin(frameLimit: Int?) -> Bool {
        let begun = state.withLock { state -> (AudioFileRecorder, Bool)? in
            state.scheduled?.cancel()
            state.scheduled = nil
            if state.recording { return nil }
            // A recorder prepared without the limit asked for is made again (nothing was recorded).
            if frameLimit != nil, !state.started, let prepared = state.recorder {
                prepared.stop()
                state.recorder = nil
            }
            do { try prepare(&state, frameLimit: frameLimit) } catch { return nil }
            guard let recorder = state.recorder else { return nil }
            let first = !state.started
            state.started = true
            state.recording = true
            return (recorder, first)
        }
        guard let (recorder, first) = begun else { return state.withLock { $0.recording } }
        do {
            if first { try recorder.start() } else { try recorder.resume() }
        } catch {
            state.withLock { $0.recording = false }
            tellEncodeError(error as NSError)
            return false
        }
        if first {
            Task { [self] in
                do {
                    _ = try await recorder.finished()
                    ended(recorder, successfully: true)
                } catch {
                    tellEncodeError(error as NSError)
                    ended(recorder, successfully: false)
                }
            }
        }
        return true
    }

    /// Pauses; ``record()`` goes on in the same file.
    public func pause() {
        state.withLock { state in
            state.scheduled?.cancel()
            guard state.recording, let recorder = state.recorder else { return }
            try? recorder.pause()
            state.recording = false
        }
    }

    /// Stops and completes the file; the delegate is told once it is complete.
    public func stop() {
        let recorder = state.withLock { state -> AudioFileRecorder? in
            state.scheduled?.cancel()
            state.recording = false
            return state.started ? state.recorder : nil
        }
        recorder?.stop()
    }

    /// Stops and removes the file; true when it is gone.
    @discardableResult
    public func deleteRecording() -> Bool {
        let recorder = state.withLock { state -> AudioFileRecorder? in
            state.scheduled?.cancel()
            state.recording = false
            state.started = false
            defer { state.recorder = nil }
            return state.recorder
        }
        recorder?.stop()
        do {
            try FileManager.default.removeItem(at: url)
            return true
        } catch {
            return !FileManager.default.fileExists(atPath: url.path)
        }
    }

    private func ended(_ recorder: AudioFileRecorder, successfully: Bool) {
        let current = state.withLock { state -> Bool in
            guard state.recorder === recorder else { return false }
            state.recorder = nil
            state.started = false
            state.recording = false
            return true
        }
        guard current else { return }
        delegateQueue.async { [self] in
            delegate?.audioRecorderDidFinishRecording(self, successfully: successfully)
        }
    }

    private func tellEncodeError(_ error: NSError) {
        delegateQueue.async { [self] in
            delegate?.audioRecorderEncodeErrorDidOccur(self, error: error)
        }
    }

    /// Whether it is recording now.
    public var isRecording: Bool { state.withLock { $0.recording } }

    /// Seconds recorded so far (0 once the recording ended).
    public var currentTime: TimeInterval {
        guard let recorder = state.withLock({ $0.started ? $0.recorder : nil }) else { return 0 }
        return Double(recorder.queue.currentTime().sampleTime) / rate
    }

    /// The input's clock, in seconds (host time: the monotonic clock, as ``AVAudioTime`` uses).
    public var deviceCurrentTime: TimeInterval {
        AVAudioTime.seconds(forHostTime: AudioGetCurrentHostTime())
    }

    // MARK: metering

    /// Whether the input's levels are measured (read them after ``updateMeters()``).
    public var isMeteringEnabled: Bool {
        get { state.withLock { $0.metering } }
        set {
            state.withLock { state in
                state.metering = newValue
                state.recorder?.queue.setLevelMeteringEnabled(newValue)
            }
        }
    }

    /// Takes the levels of what is recorded now.
    public func updateMeters() {
        state.withLock { state in state.meters = state.metering ? state.recorder?.queue.currentLevelMeters ?? [] : [] }
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
