@testable import AVFAudio
import AudioOutput
import AudioToolbox
import BufferQueue
import Foundation
import Testing
import TestSupport

/// The session as iOS code uses it: what is set reads back, and what is asked of the hardware is
/// what a real PulseAudio server (started here) says of its default sink; a move to another
/// default device posts the route change with its reason and the previous route.
@Suite(.serialized) struct AVAudioSessionTests {
    @Test func whatIsSetReadsBack() throws {
        let session = AVAudioSession(output: { .null(unpaced: false) })
        #expect(session.category == .soloAmbient && session.mode == .default && session.categoryOptions.isEmpty)
        try session.setCategory(.playback, mode: .spokenAudio, options: [.mixWithOthers, .duckOthers])
        #expect(session.category == .playback && session.mode == .spokenAudio && session.categoryOptions == [.mixWithOthers, .duckOthers])
        try session.setCategory(.playAndRecord)
        #expect(session.category == .playAndRecord && session.mode == .spokenAudio && session.categoryOptions.isEmpty)
        try session.setMode(.measurement)
        try session.setActive(true)
        try session.setPreferredSampleRate(44100)
        try session.setPreferredIOBufferDuration(0.005)
        #expect(session.mode == .measurement && session.preferredSampleRate == 44100)
        #expect(session.ioBufferDuration == 0.005)
        // The null output has no device: the preferred rate, no route, no latency.
        #expect(session.sampleRate == 44100 && session.currentRoute.outputs.isEmpty && session.outputLatency == 0)
        // And no input: nothing to record from, no route in.
        #expect(!session.isInputAvailable && session.availableInputs == nil && session.currentRoute.inputs.isEmpty)
        #expect(session.recordPermission == .granted)
        var granted = false
        session.requestRecordPermission { granted = $0 }
        #expect(granted)
        try session.setActive(false, options: .notifyOthersOnDeactivation)
        // Apple's string values and bits.
        #expect(AVAudioSession.Category.playback.rawValue == "AVAudioSessionCategoryPlayback")
        #expect(AVAudioSession.Mode.default.rawValue == "AVAudioSessionModeDefault")
        #expect(AVAudioSession.CategoryOptions.interruptSpokenAudioAndMixWithOthers.rawValue == 0x11)
        #expect(AVAudioSession.RouteChangeReason.oldDeviceUnavailable.rawValue == 2)
        #expect(AVAudioSession.routeChangeNotification.rawValue == "AVAudioSessionRouteChangeNotification")
    }

    /// The notifications posted by `session` while `body` runs.
    func routeChanges(of session: AVAudioSession, _ body: () async throws -> Void) async rethrows -> [Notification] {
        let seen = Lock<[Notification]>([])
        let token = NotificationCenter.default.addObserver(forName: AVAudioSession.routeChangeNotification, object: session, queue: nil) { note in
            seen.withLock { $0.append(note) }
        }
        defer { NotificationCenter.default.removeObserver(token) }
        try await body()
        return seen.withLock { $0 }
    }

    @Test(.enabled(if: !PrivateServer.missing, "PulseAudio is missing (make deps installs it)"))
    func theRouteIsTheDefaultSinkAndFollowsIt() async throws {
        let server = try await PrivateServer.start(rate: 44100, channels: 2)
        let address = server.address
        let session = AVAudioSession(output: { .pulseAudio(sink: nil) }, lookUp: { $0.playbackDevice(pulseServer: address) })
        try session.setCategory(.playback)
        try session.setActive(true)
        #expect(session.sampleRate == 44100 && session.outputNumberOfChannels == 2)
        #expect(session.currentRoute.outputs.map(\.uid) == ["out"])
        #expect(session.currentRoute.outputs.first?.portType == .lineOut)
        #expect(session.outputLatency == 0.05, "PulseAudioSink's default latency")
        #expect(session.ioBufferDuration == 1024.0 / 44100)

        // Another sink becomes the default: the old one is still there.
        let module = try await server.addSink("second")
        try await server.pactl(["set-default-sink", "second"])
        let moved = await routeChanges(of: session) { session.outputMoved() }
        #expect(moved.count == 1)
        let reason = (moved.first?.userInfo?[AVAudioSessionRouteChangeReasonKey] as? NSNumber)?.uintValue
        #expect(reason == AVAudioSession.RouteChangeReason.newDeviceAvailable.rawValue)
        let previous = moved.first?.userInfo?[AVAudioSessionRouteChangePreviousRouteKey] as? AVAudioSessionRouteDescription
        #expect(previous?.outputs.map(\.uid) == ["out"])
        #expect(session.currentRoute.outputs.map(\.uid) == ["second"])

        // The default sink goes away: the server falls back to `out`, and the reason says so.
        try await server.pactl(["unload-module", "\(module)"])
        let gone = await routeChanges(of: session) { session.outputMoved() }
        let goneReason = (gone.first?.userInfo?[AVAudioSessionRouteChangeReasonKey] as? NSNumber)?.uintValue
        #expect(goneReason == AVAudioSession.RouteChangeReason.oldDeviceUnavailable.rawValue)
        #expect(session.currentRoute.outputs.map(\.uid) == ["out"])
        await server.kill()
    }

    /// The route's input is the server's default source (or the one the input names), among the
    /// available inputs, which list every source of the server; a preferred input reads back.
    @Test(.enabled(if: !PrivateServer.missing, "PulseAudio is missing (make deps installs it)"))
    func theInputIsTheServersDefaultSource() async throws {
        let server = try await PrivateServer.start(rate: 44100, channels: 2)
        let address = server.address
        let module = try await server.addSink("second")
        let source = try await server.pactl(["get-default-source"]).trimmingCharacters(in: .whitespacesAndNewlines)
        let session = AVAudioSession(output: { .pulseAudio(sink: nil) }, lookUp: { $0.playbackDevice(pulseServer: address) },
                                     input: { .pulseAudio(sink: nil) }, lookUpInputs: { $0.recordingDevices(pulseServer: address) })
        #expect(session.isInputAvailable)
        let available = try #require(session.availableInputs).map(\.uid)
        #expect(available.contains("out.monitor") && available.contains("second.monitor"), "\(available)")
        #expect(session.currentRoute.inputs.map(\.uid) == [source])
        #expect(session.currentRoute.inputs.first?.portType == .lineIn)
        #expect(session.inputNumberOfChannels == 2)
        let named = AVAudioSession(output: { .null(unpaced: false) }, input: { .pulseAudio(sink: "second.monitor") },
                                   lookUpInputs: { $0.recordingDevices(pulseServer: address) })
        #expect(named.currentRoute.inputs.map(\.uid) == ["second.monitor"])
        let second = try #require(session.availableInputs?.first { $0.uid == "second.monitor" })
        try session.setPreferredInput(second)
        #expect(session.preferredInput?.uid == "second.monitor")
        try await server.pactl(["unload-module", "\(module)"])
        await server.kill()
    }

    /// A queue's move to another device (AudioToolbox's report of its sink's event) reaches the
    /// shared session, which posts the route change.
    @Test func aQueuesMoveReachesTheSharedSession() async {
        let session = AVAudioSession.sharedInstance()
        let posted = await routeChanges(of: session) { OutputRoute.changed(to: "another") }
        #expect(posted.count == 1)
    }
}
