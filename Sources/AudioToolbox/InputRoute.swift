package import BufferQueue
package import AudioOutput

/// The input AudioToolbox's recording queues record from (`AQ_INPUT`; unset: PipeWire or
/// PulseAudio when one answers, else the null device's silence), for AVFAudio's recorder.
package enum InputRoute {
    /// A source of that input; nil for the null device (a real-time source of silence then).
    package static func makeSource() -> (any AudioSource)? { Device.input.makeSource() }

    /// That input as an output choice names it (a `pulseAudio(sink:)` naming a source, or nil:
    /// the default source), for asking its server about the device.
    package static var input: AudioOutputDevice { Device.input.outputDevice }
}
