/// A playback or capture device as a sink or source module lists it (`PulseAudioSink.devices()`,
/// `PulseAudioSource.devices()`, `ALSASink.devices()`).
public struct AudioDeviceInfo: Hashable, Sendable, CustomStringConvertible {
    /// The name to pass as the sink's or source's device (`alsa_output.pci-0000_00_1f.3.analog-stereo`, `hw:0,0`).
    public var name: String
    /// A human-readable description.
    public var description: String
    /// The device's own sample rate, when known (0 otherwise).
    public var sampleRate: Double
    /// The device's channel count, when known (0 otherwise).
    public var channels: Int
    /// Whether this is the server's default device.
    public var isDefault: Bool
    /// For a capture device: whether it records what a playback device plays (a PulseAudio monitor).
    public var isMonitor: Bool

    /// A device as a server lists it.
    public init(name: String, description: String, sampleRate: Double = 0, channels: Int = 0, isDefault: Bool = false, isMonitor: Bool = false) {
        self.name = name
        self.description = description
        self.sampleRate = sampleRate
        self.channels = channels
        self.isDefault = isDefault
        self.isMonitor = isMonitor
    }
}
