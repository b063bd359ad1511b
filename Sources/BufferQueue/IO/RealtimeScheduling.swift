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
    /// The ordinary scheduler; `reason` says why real-time scheduling was not used.
    case normal(reason: String)

    public var description: String {
        switch self {
        case .realtime(let priority): return "SCHED_FIFO priority \(priority)"
        case .normal(let reason): return "normal scheduling (\(reason))"
        }
    }
}

/// Asks real-time scheduling for a render thread, where the system allows it, and falls back
/// silently where it does not (`pthread_setschedparam` needs `CAP_SYS_NICE` or an
/// `RLIMIT_RTPRIO` at least as high; rtkit, which desktop sessions offer over D-Bus, is not asked).
/// `AQ_REALTIME=0` turns the request off.
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
        let reason = result == EPERM ? "not permitted: no CAP_SYS_NICE and an RLIMIT_RTPRIO below \(priority)" : "pthread_setschedparam: error \(result)"
        return .normal(reason: reason)
    }

    /// What the calling thread has when a server's library already made it real-time (PipeWire's
    /// data thread); otherwise asks `SCHED_FIFO` for it as ``requestForCurrentThread()``.
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
