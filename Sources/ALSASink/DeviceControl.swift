/// What the ALSA device thread is asked to do and what it is doing, as one value: the caller's
/// commands (start, pause, flush, drain, close) change it, and the device thread asks it for its
/// next step. The sink keeps it in a ``/BufferQueue/ConditionLock`` (the package's one lock style):
/// the device thread parks on it, a caller waits on it until the thread has acted. Every
/// transition is testable as a value (`DeviceControlTests`).
struct DeviceControl {
    /// What the caller wants the device to do.
    enum Wanted: Equatable { case paused, running, draining, closed }

    /// What the device thread does next.
    enum Step: Equatable {
        /// Wait for a command (paused and the device paused, or the device failed).
        case park
        /// Drop what the device holds and prepare it again.
        case flush
        /// Stop the device and end the thread.
        case close
        /// Pause the device (it was playing).
        case pause
        /// Play: render and write (`draining`: play out what was written, then report).
        case play(draining: Bool)
    }

    private(set) var wanted = Wanted.paused
    /// The device thread is inside the queue's render.
    private(set) var inRender = false
    /// The device thread waits for a command.
    private(set) var parked = false
    private(set) var flushRequested = false
    /// The device thread runs (from open until it ends).
    private(set) var threadRunning = false
    /// Called once a drain has played out (or at close).
    private(set) var completions: [@Sendable () -> Void] = []

    // MARK: the caller

    /// The device was opened and its thread is about to run: paused, nothing pending.
    mutating func opened() {
        wanted = .paused
        flushRequested = false
        threadRunning = true
    }

    /// `start()`: false when the device is not open.
    mutating func start() -> Bool {
        guard threadRunning else { return false }
        wanted = .running
        return true
    }

    /// `pause()`: whether the caller must wait (``pauseTookEffect``) for the device thread.
    mutating func pause() -> Bool {
        guard threadRunning else { return false }
        if wanted == .running { wanted = .paused }
        return true
    }

    /// The device thread has paused (no render in progress, and parked when pause was asked).
    var pauseTookEffect: Bool { !threadRunning || (!inRender && !(wanted == .paused && !parked)) }

    /// `flush()`: whether the caller must wait (``flushTookEffect``).
    mutating func requestFlush() -> Bool {
        guard threadRunning else { return false }
        flushRequested = true
        return true
    }

    var flushTookEffect: Bool { !flushRequested || !threadRunning }

    /// `drain(_:)`: false when the device is not open (the completion is called at once).
    mutating func drain(_ completion: @escaping @Sendable () -> Void) -> Bool {
        guard threadRunning else { return false }
        completions.append(completion)
        wanted = .draining
        return true
    }

    /// `close()`: whether the caller must wait (``threadEnded``) for the thread to end.
    mutating func close() -> Bool {
        guard threadRunning else { return false }
        wanted = .closed
        return true
    }

    var threadEnded: Bool { !threadRunning }

    /// After the thread ended: the drain completions still owed.
    mutating func takeCompletions() -> [@Sendable () -> Void] {
        defer { completions.removeAll() }
        return completions
    }

    // MARK: the device thread

    /// The next step, given what the thread last applied to the device and whether it failed.
    func nextStep(applied: Wanted, failed: Bool) -> Step {
        if flushRequested { return .flush }
        switch wanted {
        case .closed: return .close
        case _ where failed: return .park
        case .paused: return applied == .paused ? .park : .pause
        case .running: return .play(draining: false)
        case .draining: return .play(draining: true)
        }
    }

    /// The thread parks (or wakes from parking).
    mutating func setParked(_ value: Bool) { parked = value }

    mutating func flushed() { flushRequested = false }

    /// Before a render: false when a pause or close came meanwhile (no render then).
    mutating func beginRender() -> Bool {
        guard wanted == .running else { return false }
        inRender = true
        return true
    }

    mutating func endRender() { inRender = false }

    /// A drain played out: paused again; the completions to call.
    mutating func drained() -> [@Sendable () -> Void] {
        if wanted == .draining { wanted = .paused }
        return takeCompletions()
    }

    mutating func threadExited() { threadRunning = false }
}
