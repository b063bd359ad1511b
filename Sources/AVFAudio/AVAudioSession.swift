internal import AudioOutput
internal import BufferQueue

/// The application's audio session (Apple's `AVAudioSession`, an iOS API), as a desktop has it:
/// every call succeeds, what is set reads back, and what is asked of the hardware is answered from
/// the output AudioToolbox plays through — its device's rate, channels and name, the sink's latency.
///
/// There is no other application to interrupt or duck on a desktop sound server: categories,
/// modes and options are kept and read back but change nothing; the record permission is granted.
/// When a queue's output moves to another device (the default device changed, followed by the
/// PipeWire and PulseAudio sinks), ``routeChangeNotification`` is posted with the reason and the
/// previous route, as on iOS.
public final class AVAudioSession: NSObject, Sendable {
    /// What can be asked of the session and what it says back.
    private struct State {
        var category = Category.soloAmbient
        var mode = Mode.default
        var options: CategoryOptions = []
        var active = false
        var preferredSampleRate = 0.0
        var preferredIOBufferDuration = 0.0
        /// The device the output plays to, asked when first needed and again on activation and on a move.
        var device: AudioDeviceInfo??
        /// The input's server's sources (the default marked), asked when first needed and again on activation.
        var inputs: [AudioDeviceInfo]?
        var preferredInput: AVAudioSessionPortDescription?
    }

    private let state = Lock(State())
    private let output: @Sendable () -> AudioOutputDevice
    private let lookUp: @Sendable (AudioOutputDevice) -> AudioDeviceInfo?
    private let input: @Sendable () -> AudioOutputDevice
    private let lookUpInputs: @Sendable (AudioOutputDevice) -> [AudioDeviceInfo]

    private static let shared: AVAudioSession = {
        let session = AVAudioSession(output: { OutputRoute.output }, input: { InputRoute.input })
        OutputRoute.observe { _ in session.outputMoved() }
        return session
    }()

    /// The session, one per process.
    public class func sharedInstance() -> AVAudioSession { shared }

    /// A session describing `output` and `input` (the shared one describes AudioToolbox's),
    /// whose devices `lookUp` and `lookUpInputs` ask the servers for.
    init(output: @escaping @Sendable () -> AudioOutputDevice,
         lookUp: @escaping @Sendable (AudioOutputDevice) -> AudioDeviceInfo? = { $0.playbackDevice() },
         input: @escaping @Sendable () -> AudioOutputDevice = { .null(unpaced: false) },
         lookUpInputs: @escaping @Sendable (AudioOutputDevice) -> [AudioDeviceInfo] = { $0.recordingDevices() }) {
        self.output = output
        self.lookUp = lookUp
        self.input = input
        self.lookUpInputs = lookUpInputs
        super.init()
    }

    /// The input's server's sources, asking it when not known yet.
    private var inputDevices: [AudioDeviceInfo] {
        if let known = state.withLock({ $0.inputs }) { return known }
        let asked = lookUpInputs(input())
        state.withLock { $0.inputs = asked }
        return asked
    }

    /// The device a recording takes now: the one the input names, else the default source.
    private var inputDevice: AudioDeviceInfo? { input().recordingDevice(among: inputDevices) }

    /// The device the output plays to, asking its server when not known yet.
    private var device: AudioDeviceInfo? {
        if let known = state.withLock({ $0.device }) { return known }
        let asked = lookUp(output())
        state.withLock { $0.device = .some(asked) }
        return asked
    }

    /// The output moved to another device: the route is asked again and the change is posted.
    func outputMoved() {
        let previous = currentRoute
        state.withLock { $0.device = nil }
        // The old device still there: another became the default; else the old one went away.
        var reason = RouteChangeReason.newDeviceAvailable
        if let old = previous.outputs.first?.uid, lookUp(output().pinned(to: old)) == nil {
            reason = .oldDeviceUnavailable
        }
        NotificationCenter.default.post(name: Self.routeChangeNotification, object: self, userInfo: [
            AVAudioSessionRouteChangeReasonKey: NSNumber(value: reason.rawValue),
            AVAudioSessionRouteChangePreviousRouteKey: previous,
        ])
    }

    // MARK: Category and mode

    /// The category set (`soloAmbient` until one is).
    public var category: Category { state.withLock { $0.category } }
    /// The mode set (`default` until one is).
    public var mode: Mode { state.withLock { $0.mode } }
    /// The options set with the category.
    public var categoryOptions: CategoryOptions { state.withLock { $0.options } }

    /// Sets the category, keeping the mode and clearing the options.
    public func setCategory(_ category: Category) throws {
        state.withLock { $0.category = category; $0.options = [] }
    }

    /// Sets the category and its options, keeping the mode.
    public func setCategory(_ category: Category, options: CategoryOptions = []) throws {
        state.withLock { $0.category = category; $0.options = options }
    }

    /// Sets the category, the mode and the options.
    public func setCategory(_ category: Category, mode: Mode, options: CategoryOptions = []) throws {
        state.withLock { $0.category = category; $0.mode = mode; $0.options = options }
    }

    /// Sets the mode.
    public func setMode(_ mode: Mode) throws {
        state.withLock { $0.mode = mode }
    }

    /// Activates or deactivates the session; activating asks the output's device again.
    public func setActive(_ active: Bool, options: SetActiveOptions = []) throws {
        state.withLock {
            $0.active = active
            if active {
                $0.device = nil
                $0.inputs = nil
            }
        }
    }

    // MARK: What the hardware has

    /// The output device's sample rate (its server's rate when it does not say, else 48 kHz).
    public var sampleRate: Double {
        if let rate = device?.sampleRate, rate > 0 { return rate }
        let preferred = preferredSampleRate
        return preferred > 0 ? preferred : 48000
    }

    /// The rate asked with ``setPreferredSampleRate(_:)`` (0 until one is). The sound server
    /// converts the library's streams to the device's rate, so ``sampleRate`` stays the device's.
    public var preferredSampleRate: Double { state.withLock { $0.preferredSampleRate } }

    /// Asks for a sample rate (kept and read back).
    public func setPreferredSampleRate(_ sampleRate: Double) throws {
        state.withLock { $0.preferredSampleRate = max(sampleRate, 0) }
    }

    /// Seconds of one I/O cycle: the preferred duration when asked, else 1024 frames at
    /// ``sampleRate`` (a sound server's usual quantum).
    public var ioBufferDuration: TimeInterval {
        let preferred = preferredIOBufferDuration
        return preferred > 0 ? preferred : 1024 / sampleRate
    }

    /// The duration asked with ``setPreferredIOBufferDuration(_:)`` (0 until one is).
    public var preferredIOBufferDuration: TimeInterval { state.withLock { $0.preferredIOBufferDuration } }

    /// Asks for an I/O cycle duration (kept and read back as ``ioBufferDuration``).
    public func setPreferredIOBufferDuration(_ duration: TimeInterval) throws {
        state.withLock { $0.preferredIOBufferDuration = max(duration, 0) }
    }

    /// Seconds from a frame handed to the output to its sound: the output's sink latency.
    public var outputLatency: TimeInterval {
        let latency = output().defaultLatency.components
        return Double(latency.seconds) + Double(latency.attoseconds) * 1e-18
    }

    /// Seconds from the sound to the frame captured: one I/O cycle.
    public var inputLatency: TimeInterval { ioBufferDuration }

    /// The output device's channels (2 when it does not say).
    public var outputNumberOfChannels: Int {
        if let channels = device?.channels, channels > 0 { return channels }
        return 2
    }

    /// The input device's channels (2 when it does not say, or there is none).
    public var inputNumberOfChannels: Int {
        if let channels = inputDevice?.channels, channels > 0 { return channels }
        return 2
    }

    /// Whether audio input can be recorded: the input's server has a source (the null input,
    /// and ALSA, have none: a recorder then records silence).
    public var isInputAvailable: Bool { !inputDevices.isEmpty }

    /// The inputs a recording could take: the input's server's sources (a PulseAudio server's
    /// monitors too); nil when there are none, as Apple's says.
    public var availableInputs: [AVAudioSessionPortDescription]? {
        let devices = inputDevices
        return devices.isEmpty ? nil : devices.map { AVAudioSessionPortDescription($0, input: true) }
    }

    /// The input asked for with ``setPreferredInput(_:)`` (read back; recordings take the input
    /// `AQ_INPUT` names).
    public var preferredInput: AVAudioSessionPortDescription? { state.withLock { $0.preferredInput } }

    /// Asks for an input (one of ``availableInputs``, or nil for the default); it reads back.
    public func setPreferredInput(_ inPort: AVAudioSessionPortDescription?) throws {
        state.withLock { $0.preferredInput = inPort }
    }

    /// Whether another application plays: false (no session on a desktop knows of them).
    public var isOtherAudioPlaying: Bool { false }

    /// Whether secondary audio should be silenced: false, as no other application asks it.
    public var secondaryAudioShouldBeSilencedHint: Bool { false }

    /// The record permission: granted (a desktop has no per-application microphone permission).
    public var recordPermission: RecordPermission { .granted }

    /// Answers the record permission request at once: granted.
    public func requestRecordPermission(_ response: @escaping (Bool) -> Void) {
        response(true)
    }

    /// Where audio goes and comes from now: the output's device and the input's (none for the
    /// null device).
    public var currentRoute: AVAudioSessionRouteDescription {
        AVAudioSessionRouteDescription(inputs: inputDevice.map { [AVAudioSessionPortDescription($0, input: true)] } ?? [],
                                       outputs: device.map { [AVAudioSessionPortDescription($0)] } ?? [])
    }
}

extension AVAudioSession {
    /// A session category (Apple's names and string values).
    public struct Category: RawRepresentable, Hashable, Sendable {
        /// The category's string (`AVAudioSessionCategoryPlayback`).
        public var rawValue: String
        /// The category of this string.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// Sound that mixes with others and is silenced with the screen.
        public static let ambient = Category(rawValue: "AVAudioSessionCategoryAmbient")
        /// The default: sound that silences others.
        public static let soloAmbient = Category(rawValue: "AVAudioSessionCategorySoloAmbient")
        /// Playback as the application's main function.
        public static let playback = Category(rawValue: "AVAudioSessionCategoryPlayback")
        /// Recording.
        public static let record = Category(rawValue: "AVAudioSessionCategoryRecord")
        /// Playing and recording at once.
        public static let playAndRecord = Category(rawValue: "AVAudioSessionCategoryPlayAndRecord")
        /// Several outputs at once.
        public static let multiRoute = Category(rawValue: "AVAudioSessionCategoryMultiRoute")
    }

    /// A session mode (Apple's names and string values).
    public struct Mode: RawRepresentable, Hashable, Sendable {
        /// The mode's string (`AVAudioSessionModeDefault`).
        public var rawValue: String
        /// The mode of this string.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The default mode.
        public static let `default` = Mode(rawValue: "AVAudioSessionModeDefault")
        /// Voice over IP.
        public static let voiceChat = Mode(rawValue: "AVAudioSessionModeVoiceChat")
        /// A game's voice chat.
        public static let gameChat = Mode(rawValue: "AVAudioSessionModeGameChat")
        /// Recording video.
        public static let videoRecording = Mode(rawValue: "AVAudioSessionModeVideoRecording")
        /// Measuring: the least processing of input and output.
        public static let measurement = Mode(rawValue: "AVAudioSessionModeMeasurement")
        /// Playing films.
        public static let moviePlayback = Mode(rawValue: "AVAudioSessionModeMoviePlayback")
        /// Video calls.
        public static let videoChat = Mode(rawValue: "AVAudioSessionModeVideoChat")
        /// Spoken audio (podcasts, audiobooks).
        public static let spokenAudio = Mode(rawValue: "AVAudioSessionModeSpokenAudio")
        /// Spoken prompts (navigation).
        public static let voicePrompt = Mode(rawValue: "AVAudioSessionModeVoicePrompt")
    }

    /// Options of a category (Apple's bits).
    public struct CategoryOptions: OptionSet, Sendable {
        /// The options' bits.
        public var rawValue: UInt
        /// Options of these bits.
        public init(rawValue: UInt) { self.rawValue = rawValue }
        /// Mix with other applications' audio.
        public static let mixWithOthers = CategoryOptions(rawValue: 0x1)
        /// Lower other applications' audio.
        public static let duckOthers = CategoryOptions(rawValue: 0x2)
        /// Bluetooth hands-free devices as inputs.
        public static let allowBluetooth = CategoryOptions(rawValue: 0x4)
        /// The speaker rather than the receiver.
        public static let defaultToSpeaker = CategoryOptions(rawValue: 0x8)
        /// Interrupt spoken audio of other applications, mix with the rest.
        public static let interruptSpokenAudioAndMixWithOthers = CategoryOptions(rawValue: 0x11)
        /// Bluetooth A2DP outputs.
        public static let allowBluetoothA2DP = CategoryOptions(rawValue: 0x20)
        /// AirPlay outputs.
        public static let allowAirPlay = CategoryOptions(rawValue: 0x40)
        /// Keep recording when the microphone is muted by hardware.
        public static let overrideMutedMicrophoneInterruption = CategoryOptions(rawValue: 0x80)
    }

    /// Options of ``AVAudioSession/setActive(_:options:)``.
    public struct SetActiveOptions: OptionSet, Sendable {
        /// The options' bits.
        public var rawValue: UInt
        /// Options of these bits.
        public init(rawValue: UInt) { self.rawValue = rawValue }
        /// Tell other applications when this session deactivates.
        public static let notifyOthersOnDeactivation = SetActiveOptions(rawValue: 1)
    }

    /// Why the route changed (the value of ``AVAudioSessionRouteChangeReasonKey``).
    public enum RouteChangeReason: UInt, Sendable {
        /// Not known.
        case unknown = 0
        /// A device became the output (another default device here).
        case newDeviceAvailable = 1
        /// The output device went away.
        case oldDeviceUnavailable = 2
        /// The category changed.
        case categoryChange = 3
        /// The route was overridden.
        case override = 4
        /// The device woke from sleep.
        case wakeFromSleep = 6
        /// No route suits the category.
        case noSuitableRouteForCategory = 7
        /// The route's configuration changed.
        case routeConfigurationChange = 8
    }

    /// Whether the application may record (Apple's four-character values).
    public enum RecordPermission: UInt, Sendable {
        /// Not asked yet (`undt`).
        case undetermined = 1970168948
        /// Refused (`deny`).
        case denied = 1684369017
        /// Granted (`grnt`).
        case granted = 1735552628
    }

    /// The kind of a port (Apple's names and string values).
    public struct Port: RawRepresentable, Hashable, Sendable {
        /// The port type's string.
        public var rawValue: String
        /// The port type of this string.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// A line output.
        public static let lineOut = Port(rawValue: "LineOut")
        /// Headphones.
        public static let headphones = Port(rawValue: "Headphones")
        /// The built-in speaker.
        public static let builtInSpeaker = Port(rawValue: "Speaker")
        /// An HDMI output.
        public static let HDMI = Port(rawValue: "HDMIOutput")
        /// A USB audio device.
        public static let usbAudio = Port(rawValue: "USBAudio")
        /// A Bluetooth A2DP output.
        public static let bluetoothA2DP = Port(rawValue: "BluetoothA2DPOutput")
        /// The built-in microphone.
        public static let builtInMic = Port(rawValue: "MicrophoneBuiltIn")
        /// A line input.
        public static let lineIn = Port(rawValue: "LineIn")
        /// A headset's microphone.
        public static let headsetMic = Port(rawValue: "HeadsetInOut")
        /// A Bluetooth hands-free device (input and output).
        public static let bluetoothHFP = Port(rawValue: "BluetoothHFP")
    }

    /// Posted when the route changes, with ``AVAudioSessionRouteChangeReasonKey`` and
    /// ``AVAudioSessionRouteChangePreviousRouteKey`` in its user info.
    public static let routeChangeNotification = Notification.Name("AVAudioSessionRouteChangeNotification")
    /// Posted when another application interrupts the session: never on a desktop.
    public static let interruptionNotification = Notification.Name("AVAudioSessionInterruptionNotification")
}

/// The key of a route change's reason (an `NSNumber` of ``AVAudioSession/RouteChangeReason``).
public let AVAudioSessionRouteChangeReasonKey = "AVAudioSessionRouteChangeReasonKey"
/// The key of the route before a change (an ``AVAudioSessionRouteDescription``).
public let AVAudioSessionRouteChangePreviousRouteKey = "AVAudioSessionRouteChangePreviousRouteKey"

/// One input or output of a route: a sound server's device.
public final class AVAudioSessionPortDescription: NSObject, Sendable {
    /// The kind of port, from the device's name: for an output HDMI, USB, Bluetooth, headphones,
    /// else a line output; for an input USB, Bluetooth, a microphone, a headset, else a line input.
    public let portType: AVAudioSession.Port
    /// The device's description, as the sound server shows it.
    public let portName: String
    /// The device's name on its server (what a sink is pinned to).
    public let uid: String

    init(_ device: AudioDeviceInfo, input: Bool = false) {
        let name = device.name.lowercased() + " " + device.description.lowercased()
        if input {
            portType = name.contains("usb") ? .usbAudio : name.contains("bluez") || name.contains("bluetooth") ? .bluetoothHFP
                : name.contains("headset") ? .headsetMic : name.contains("mic") ? .builtInMic : .lineIn
        } else {
            portType = name.contains("hdmi") ? .HDMI : name.contains("usb") ? .usbAudio
                : name.contains("bluez") || name.contains("bluetooth") ? .bluetoothA2DP
                : name.contains("headphone") ? .headphones : .lineOut
        }
        portName = device.description
        uid = device.name
        super.init()
    }
}

/// Where audio goes: the inputs and outputs of the session's route.
public final class AVAudioSessionRouteDescription: NSObject, Sendable {
    /// The inputs (not listed here).
    public let inputs: [AVAudioSessionPortDescription]
    /// The outputs: the device the output plays to.
    public let outputs: [AVAudioSessionPortDescription]

    init(inputs: [AVAudioSessionPortDescription], outputs: [AVAudioSessionPortDescription]) {
        self.inputs = inputs
        self.outputs = outputs
        super.init()
    }
}
