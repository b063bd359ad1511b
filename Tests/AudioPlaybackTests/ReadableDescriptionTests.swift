@testable import AudioPlayback
import AudioFileStream
import BufferQueue
import Testing

/// Values print as words a user can read — `loading`, not `AudioPlayback.AudioPlayerItemState.loading` —
/// on their own and where they are nested in another value (a struct, an array, an event's payload),
/// where Swift's default printing names the module and the type.
@Suite struct ReadableDescriptionTests {
    static let moduleNames = ["BufferQueue.", "AudioFileStream.", "AudioPlayback.", "AudioStreaming."]

    /// What `print(value)` shows, checked not to name a module.
    func printed(_ value: Any) -> String {
        let text = String(describing: value)
        #expect(!Self.moduleNames.contains { text.contains($0) }, "\(text)")
        return text
    }

    struct Holder {
        var state: AudioPlayerItemState
        var algorithm: TimePitchAlgorithm
        var type: AudioFileType
        var policy: AudioPlayerItemFailurePolicy
        var curve: AudioFadeCurve
        var layout: PCMSampleLayout
    }

    @Test func enumsPrintTheirCaseNamesAlsoNested() {
        #expect(printed(AudioPlayerItemState.loading) == "loading")
        #expect(printed([AudioPlayerState.playing, .paused]) == "[playing, paused]")
        let holder = Holder(state: .playing, algorithm: .spectral, type: .mp3, policy: .skip, curve: .equalPower,
                            layout: .float(bytes: 4, bigEndian: false))
        #expect(printed(holder) == "Holder(state: playing, algorithm: spectral, type: mp3, policy: skip, curve: equalPower, layout: float(bytes: 4, bigEndian: false))")
        #expect(printed(AudioPlayer.OutputFormat.fixed(sampleRate: 48000, channels: 2)) == "fixed(sampleRate: 48000.0, channels: 2)")
        #expect(printed(AudioFileStreamEvent.property(.dataFormat)) == "property(dataFormat)")
        #expect(printed(AudioSourceEvent.state(.buffering)) == "state(buffering)")
        #expect(printed(ReplayGainSettings.Mode.album) == "album")
        #expect(printed(AudioFilePacketTableInfo.Source.iTunSMPB) == "iTunSMPB")
        #expect(printed([AudioQueueError.Code.invalidParameter]) == "[invalidParameter]")
        #expect(printed(NullSource.Signal.frames([0, 0, 0])) == "frames(3 samples)")
        #expect(printed(NullSource.Signal.sine(frequency: 440)) == "sine(frequency: 440.0, amplitude: 0.5)")
    }

    @Test func playerEventsAndStatusPrintAsWords() {
        let item = AudioPlayerItem.file("song.flac")
        let event = AudioPlayerEvent.itemState(index: 2, id: item.id, .playing)
        #expect(printed(event) == "itemState(index: 2, id: \(item.id), playing)")
        let failure = AudioPlayerError(.open, itemIndex: 0, itemName: "song.flac", underlying: AudioQueueError(.invalidParameter, "no such file"))
        #expect(printed(AudioPlayerEvent.state(.failed(failure))).hasPrefix("state(failed(open song.flac: "))
        let status = AudioPlayer.Status(itemIndex: 1, itemID: item.id, title: "Song", position: 12.5, duration: 180,
                                        durationIsEstimated: false, buffered: 4, outputFormat: nil)
        #expect(printed(status) == "item 1 \"Song\" at 12.5 s of 180.0 s (4.0 s buffered)")
        #expect(printed([status]) == "[item 1 \"Song\" at 12.5 s of 180.0 s (4.0 s buffered)]")
    }
}
