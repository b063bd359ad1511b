import Foundation
import Testing
import BufferQueue
import CRenderThreadCounter
import TestSupport

/// Real-time scheduling through rtkit where the process may not ask for it: a thread without
/// CAP_SYS_NICE, in a process whose RLIMIT_RTPRIO is 0 (a desktop user's), asks; the library
/// falls back to rtkit over D-Bus; the stand-in on a private bus (``PrivateRealtimeKit``) grants
/// with rtkit's checks; the kernel then says the thread is SCHED_FIFO.
@Suite(.serialized, .enabled(if: PrivateRealtimeKit.missing == nil, "\(PrivateRealtimeKit.missing ?? ""): rtkit tests skipped"))
struct RealtimeKitTests {
    /// What a thread that may not ask SCHED_FIFO itself got, its id, and what the kernel says
    /// afterwards (policy and priority).
    struct Asked: Sendable {
        var got: RenderThreadScheduling
        var thread: Int32
        var policy: Int32
        var priority: Int32
    }

    /// Asks on a thread of its own with CAP_SYS_NICE dropped and RLIMIT_RTPRIO at 0 (both put
    /// back afterwards), talking to the bus at `bus` as the system bus.
    func askWithoutPermission(bus: String) async throws -> Asked {
        let saved = aq_realtime_limit(0)
        aq_set_realtime_limit(0, aq_limit(current: 0, maximum: saved.maximum))
        setenv("DBUS_SYSTEM_BUS_ADDRESS", bus, 1)
        defer {
            unsetenv("DBUS_SYSTEM_BUS_ADDRESS")
            aq_set_realtime_limit(0, saved)
        }
        return try await onOwnThread { () throws -> Asked in
            guard aq_thread_drop_nice_capability() == 0 else { throw CocoaError(.featureUnsupported) }
            let got = RealtimeScheduling.requestForCurrentThread()
            // The kernel's answer (glibc's pthread_getschedparam may answer from its cache).
            var parameters = sched_param()
            sched_getparam(0, &parameters)
            return Asked(got: got, thread: Int32(aq_thread_id()), policy: sched_getscheduler(0), priority: parameters.sched_priority)
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func rtkitGrantsWhatTheProcessMayNotAsk() async throws {
        let savedTime = aq_realtime_limit(1)
        defer { aq_set_realtime_limit(1, savedTime) }
        let kit = try await PrivateRealtimeKit.start()
        let asked = try await askWithoutPermission(bus: kit.address)
        #expect(asked.got == .realtimeThroughRTKit(priority: RealtimeScheduling.priority), "\(asked.got)")
        #expect(asked.policy & ~0x4000_0000 == SCHED_FIFO && asked.priority == RealtimeScheduling.priority,
                "the kernel says policy \(asked.policy), priority \(asked.priority)")
        // The stand-in's answer line arrives through a pipe read on a thread of its own.
        #expect(await kit.lines.wait(timeout: .seconds(10)) { lines in lines.contains { $0.hasPrefix("granted") || $0.hasPrefix("refused") } })
        #expect(kit.answers == ["granted \(asked.thread) \(RealtimeScheduling.priority)"], "\(kit.lines.current)")
        // rtkit grants only a process whose real-time threads cannot run unbounded: the library
        // lowered RLIMIT_RTTIME to what rtkit allows.
        let time = aq_realtime_limit(1)
        #expect(time.maximum == UInt64(PrivateRealtimeKit.rtTimeUSecMax) && time.current == time.maximum, "\(time)")
        #expect(asked.got.description == "SCHED_FIFO priority 5, granted by rtkit")
    }

    /// Without a bus to ask, the thread stays on the ordinary scheduler and the reason names
    /// both refusals.
    @Test(.timeLimit(.minutes(1)))
    func withoutABusTheReasonSaysSo() async throws {
        let asked = try await askWithoutPermission(bus: "unix:path=\(NSTemporaryDirectory())aq-no-bus-\(UUID().uuidString.prefix(8))")
        guard case .normal(let reason) = asked.got else {
            Issue.record("real-time without a bus: \(asked.got)")
            return
        }
        #expect(reason.contains("not permitted") && reason.contains("rtkit: no system bus"), "\(reason)")
        #expect(asked.policy == SCHED_OTHER)
    }
}
