import CRealtimeKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// How a sink's render thread is scheduled: what it asked for and what it got.
public enum RenderThreadScheduling: Sendable, Hashable, CustomStringConvertible {
    /// `SCHED_FIFO` at `priority`: the thread runs before every ordinary thread, as PulseAudio's
    /// own and its clients' real-time threads do.
    case realtime(priority: Int32)
    /// `SCHED_FIFO` at `priority`, granted by rtkit (`org.freedesktop.RealtimeKit1`) because the
    /// process may not ask for it itself: the desktop case.
    case realtimeThroughRTKit(priority: Int32)
    /// The ordinary scheduler; `reason` says why real-time scheduling was not used.
    case normal(reason: String)

    public var description: String {
        switch self {
        case .realtime(let priority): return "SCHED_FIFO priority \(priority)"
        case .realtimeThroughRTKit(let priority): return "SCHED_FIFO priority \(priority), granted by rtkit"
        case .normal(let reason): return "normal scheduling (\(reason))"
        }
    }
}

/// Asks real-time scheduling for a render thread, where the system allows it, and falls back
/// silently where it does not. `pthread_setschedparam` needs `CAP_SYS_NICE` or an
/// `RLIMIT_RTPRIO` at least as high; where it is refused (a desktop user has neither), rtkit is
/// asked over D-Bus, as PulseAudio's and PipeWire's clients ask it (`MakeThreadRealtime`, after
/// lowering `RLIMIT_RTTIME` to rtkit's `RTTimeUSecMax`). `AQ_REALTIME=0` turns the request off.
package enum RealtimeScheduling {
    /// The priority asked for: PulseAudio's default (`realtime-priority = 5`), low among
    /// real-time priorities so that the system's own real-time threads stay ahead.
    package static let priority: Int32 = 5

    /// Asks `SCHED_FIFO` for the calling thread; returns what it has afterwards.
    package static func requestForCurrentThread() -> RenderThreadScheduling {
        if let setting = getenv("AQ_REALTIME"), String(cString: setting) == "0" {
            return .normal(reason: "AQ_REALTIME=0")
        }
        var parameters = sched_param()
        parameters.sched_priority = priority
        let result = pthread_setschedparam(pthread_self(), SCHED_FIFO, &parameters)
        if result == 0 { return .realtime(priority: priority) }
        guard result == EPERM else { return .normal(reason: "pthread_setschedparam: error \(result)") }
        let refused = "not permitted: no CAP_SYS_NICE and an RLIMIT_RTPRIO below \(priority)"
        var message = [CChar](repeating: 0, count: 384)
        let granted = aq_rtkit_make_thread_realtime(priority, rtkitTimeoutMilliseconds, &message, message.count)
        guard granted > 0 else { return .normal(reason: "\(refused); rtkit: \(String(nulTerminated: message))") }
        // What the thread has now, as the kernel says (glibc's pthread_getschedparam answers from
        // what it cached when this thread last set its own policy).
        let policy = sched_getscheduler(0) & ~0x4000_0000   // without SCHED_RESET_ON_FORK
        guard sched_getparam(0, &parameters) == 0, policy == SCHED_FIFO || policy == SCHED_RR else {
            return .normal(reason: "\(refused); rtkit answered but the thread is not real-time")
        }
        return .realtimeThroughRTKit(priority: parameters.sched_priority)
    }

    /// How long each of the calls to rtkit may take (it runs on the render thread before it
    /// renders; rtkit answers within milliseconds where it runs).
    static let rtkitTimeoutMilliseconds: Int32 = 500

    /// What the calling thread has when it made itself real-time through glibc (its cached
    /// policy); otherwise asks `SCHED_FIFO` at ``priority`` for it as ``requestForCurrentThread()``.
    ///
    /// PipeWire's data thread is made real-time by libpipewire (its `module-rt`) with a call
    /// glibc does not see: the cache says it is not, and the sink sets it to 5, below PipeWire's
    /// own threads and the recorders'. Kept so on purpose: with the render thread left at the
    /// priority the kernel reports for it, the test that pauses and plays 1.5 s through PipeWire
    /// lost frames in 2 runs of 6 here (at 5: in 1 of 19).
    package static func keepOrRequestForCurrentThread() -> RenderThreadScheduling {
        var policy: Int32 = 0
        var parameters = sched_param()
        if pthread_getschedparam(pthread_self(), &policy, &parameters) == 0, policy == SCHED_FIFO || policy == SCHED_RR {
            return .realtime(priority: parameters.sched_priority)
        }
        return requestForCurrentThread()
    }

    /// Whether this process may make a thread `SCHED_FIFO` at ``priority`` (asked on a scratch
    /// thread, for tests and diagnostics).
    package static var isPermitted: Bool {
        let result = Lock(false)
        let done = ConditionLock(false)
        OwnThread.start(name: "aq rt probe") {
            var parameters = sched_param()
            parameters.sched_priority = priority
            let granted = pthread_setschedparam(pthread_self(), SCHED_FIFO, &parameters) == 0
            result.withLock { $0 = granted }
            done.withLock { $0 = true }
        }
        done.wait(until: { $0 }) { _ in }
        return result.withLock { $0 }
    }
}
