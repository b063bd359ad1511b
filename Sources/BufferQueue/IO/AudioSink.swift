/// Where a queue's frames go: a device, a sound server, or nowhere (``NullSink``).
///
/// A sink runs its own clock. Once started it pulls interleaved float32 frames from the
/// ``AudioRenderSource`` it was opened with, on its own thread, as its clock demands. The queue calls
/// the control methods below from its own threads, never concurrently with each other.
///
/// The render source has one reader at a time: the sink may render only between ``start()`` and
/// the return of ``pause()`` or ``close()``. The queue relies on that to discard and reset the
/// render state while the sink is paused.
///
/// The render source never blocks, allocates or locks; a sink's pulling thread can be real-time.
public protocol AudioSink: AnyObject, Sendable {
    /// Prepares to play `format` (interleaved float32) pulled from `source`. Called again with a new
    /// format (after ``close()``) when the decoded format changes.
    func open(format: AudioStreamDescription, source: AudioRenderSource) throws

    /// Like ``open(format:source:)``, with the speaker position of each channel (the queue's
    /// ``AudioQueue/channelLayout``). Sinks that place channels implement this one; the default
    /// ignores the layout.
    func open(format: AudioStreamDescription, channelLayout: AudioChannelLayout, source: AudioRenderSource) throws

    /// Starts (or resumes) pulling frames.
    func start() throws

    /// Stops pulling. When this returns no render call is in progress and none starts until
    /// ``start()``. Frames the sink already holds stay for when it resumes.
    func pause()

    /// Discards frames the sink accepted but has not played yet.
    func flush()

    /// Calls `completion` once every frame the sink accepted has been played. The sink keeps pulling
    /// until then (the source renders silence past the end).
    func drain(_ completion: @escaping @Sendable () -> Void)

    /// Stops and releases the device or stream. The sink may be opened again.
    func close()

    /// Frames accepted but not yet heard: the output latency right now.
    var latencyFrames: Int { get }

    /// How the thread that pulls frames is scheduled, once it has pulled (nil before, or for a
    /// sink without a thread of its own). Sinks ask for real-time scheduling where the system
    /// allows it (``RenderThreadScheduling``).
    var renderThreadScheduling: RenderThreadScheduling? { get }

    /// A hint that the source has new frames. Sinks that pull only when data is there (an unpaced
    /// ``NullSink``) use it; clocked sinks ignore it.
    func sourceHasData()

    /// Whether the sink tells the queue when what it wrote is really being played, by calling
    /// ``AudioRenderSource/reportPlaybackStarted()`` after each ``start()``. When true the queue's
    /// `isRunning` turns true at that report (the device's read position moving); when false, at
    /// the first render call after ``start()``.
    var reportsPlaybackStart: Bool { get }
}

extension AudioSink {
    public func open(format: AudioStreamDescription, channelLayout: AudioChannelLayout, source: AudioRenderSource) throws {
        try open(format: format, source: source)
    }
    public func sourceHasData() {}
    public var reportsPlaybackStart: Bool { false }
    public var renderThreadScheduling: RenderThreadScheduling? { nil }
}

/// What a sink pulls frames from: a queue's render stage, or a render graph's output
/// (``AudioGraph/start(sink:)``).
///
/// ``render(into:frames:fillSilence:)`` is safe to call from a real-time thread: it allocates nothing,
/// takes no lock and makes no blocking call.
public final class AudioRenderSource: Sendable {
    enum Backing: Sendable {
        case stage(RenderStage)
        case graph(AudioGraph)
    }
    let backing: Backing
    private let errorHandler: @Sendable (AudioQueueError) -> Void
    private let deviceHandler: @Sendable (String) -> Void

    init(stage: RenderStage, errorHandler: @escaping @Sendable (AudioQueueError) -> Void,
         deviceHandler: @escaping @Sendable (String) -> Void = { _ in }) {
        backing = .stage(stage)
        self.errorHandler = errorHandler
        self.deviceHandler = deviceHandler
    }

    init(graph: AudioGraph, errorHandler: @escaping @Sendable (AudioQueueError) -> Void,
         deviceHandler: @escaping @Sendable (String) -> Void = { _ in }) {
        backing = .graph(graph)
        self.errorHandler = errorHandler
        self.deviceHandler = deviceHandler
    }

    /// What ``RenderThreadObserver`` is passed for this source's renders (a graph's own identity
    /// for a graph: its renders are bracketed by the graph).
    var identity: UnsafeRawPointer {
        switch backing {
        case .stage: return UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())
        case .graph(let graph): return graph.renderSourceIdentity
        }
    }

    /// Renders up to `frames` frames into `buffer` (interleaved, the channel count the sink was
    /// opened with) and returns how many frames of audio were written.
    ///
    /// - Parameters:
    ///   - buffer: room for `frames` interleaved float32 frames of the sink's format.
    ///   - frames: how many frames are wanted.
    ///   - fillSilence: when true the frames after the returned count are set to zero and
    ///     count as an underrun if the queue was playing; a clocked sink passes true. An unpaced sink
    ///     passes false and only takes what exists.
    public func render(into buffer: UnsafeMutablePointer<Float>, frames: Int, fillSilence: Bool) -> Int {
        switch backing {
        case .stage(let stage):
            guard let observer = RenderThreadObserver.current else {
                return stage.render(into: buffer, frames: frames, fillSilence: fillSilence)
            }
            observer(identity, 1)
            defer { observer(identity, 0) }
            return stage.render(into: buffer, frames: frames, fillSilence: fillSilence)
        case .graph(let graph):
            return graph.renderForSink(into: buffer, frames: frames, fillSilence: fillSilence)
        }
    }

    /// Tells the queue that playback really began after the last ``AudioSink/start()`` (the
    /// device or server started reading). Not for the real-time thread.
    public func reportPlaybackStarted() {
        guard case .stage(let stage) = backing else { return }
        stage.heardGeneration.store(stage.startGeneration.load(ordering: .acquiring), ordering: .releasing)
        stage.notify()
    }

    /// Tells the queue the device ran dry although the sink kept feeding it (an ALSA xrun the sink
    /// recovered from): the queue reports an ``AudioQueueEvent/underrun`` and marks its timeline
    /// discontinuous (a graph counts it in ``AudioGraph/deviceUnderruns``). Safe from any thread
    /// (a push to the render-event ring, an atomic addition and a wake-up; none blocks).
    public func reportDeviceUnderrun() {
        switch backing {
        case .stage(let stage):
            stage.events.push(.underrun)
            stage.discontinuities.add(1, ordering: .releasing)
            stage.notify()
        case .graph(let graph):
            graph.countDeviceUnderrun()
        }
    }

    /// Tells the queue the sink failed (server gone, device lost). Not for the real-time thread;
    /// safe from inside the sink's own control methods (the queue handles it on its worker).
    public func reportError(_ error: AudioQueueError) { errorHandler(error) }

    /// Tells the queue the sink moved to the device named `name` (it followed the default
    /// output): a queue posts ``AudioQueueEvent/outputDeviceChanged(_:)``, a graph
    /// ``AudioGraphEvent/outputDeviceChanged(_:)``. Not for the real-time thread.
    public func reportDeviceChanged(_ name: String) { deviceHandler(name) }
}
