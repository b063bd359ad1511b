import BufferQueue
import Dispatch

/// Fades without a click at pause, resume, stop, seek and skip (``AudioPlayer/transitionFade``):
/// the queue's output is held (``/BufferQueue/AudioQueue/setOutputHold(_:fadeFrames:)``), which fades
/// the next frames out and then gives silence without taking any, and what the player does next
/// waits until that fade has been heard. All on `work`.
extension AudioPlayer {
    /// The fade's length in the sink's frames (0: no fade).
    var transitionFadeFrames: Int {
        guard transitionFade > 0, let rate = queue?.sinkStreamFormat?.sampleRate else { return 0 }
        return Int((transitionFade * rate).rounded())
    }

    /// Fades the output out when sound plays and fades are on, then runs `body` once the fade is
    /// heard; at once otherwise. Bodies asked for meanwhile run after it, in order.
    func afterFadingOut(_ body: @escaping () -> Void) {
        let frames = transitionFadeFrames
        // The queue's own state, not the player's `soundRunning`: that follows the queue's events,
        // which reach `work` after whatever feeding work was queued before them.
        guard frames > 0, let queue, queue.isSinkPulling || !feed.afterFade.isEmpty else { return body() }
        feed.afterFade.append(body)
        guard feed.afterFade.count == 1 else { return }
        queue.setOutputHold(true, fadeFrames: frames)
        // A sink that stops taking frames cannot play the fade: the wait is bounded.
        feed.fadeDeadline = .now() + 0.5 + transitionFade
        checkFadeHeard()
    }

    /// Runs what waits for the fade once it has been heard; else checks again when it will have
    /// been: the frames the sink still plays before the silence, or the fade's own length while
    /// the render has not finished it yet.
    func checkFadeHeard() {
        feed.fadeCheck?.cancel()
        feed.fadeCheck = nil
        guard !feed.afterFade.isEmpty else { return }
        guard let queue, queue.isSinkPulling, let rate = queue.sinkStreamFormat?.sampleRate, rate > 0 else { return runAfterFade() }
        let left = queue.outputFramesUntilHoldIsHeard()
        if left == 0 || DispatchTime.now() >= feed.fadeDeadline { return runAfterFade() }
        let frames = left ?? transitionFadeFrames
        let check = DispatchWorkItem { [weak self] in self?.checkFadeHeard() }
        feed.fadeCheck = check
        work.asyncAfter(deadline: .now() + Double(frames) / rate + 0.002, execute: check)
    }

    private func runAfterFade() {
        let bodies = feed.afterFade
        feed.afterFade.removeAll()
        for body in bodies { body() }
    }

    /// Lets the output go (fading in from where it is) before the queue plays again; what waited
    /// for a fade out runs now (it checks whether it still applies).
    func releaseOutputHold() {
        guard let queue, queue.isOutputHoldRequested else { return }
        queue.setOutputHold(false, fadeFrames: transitionFadeFrames)
        feed.fadeCheck?.cancel()
        feed.fadeCheck = nil
        runAfterFade()
    }
}
