import Foundation

/// A stand-in for rtkit (`org.freedesktop.RealtimeKit1`) on a private D-Bus, for the test of the
/// library's rtkit client: the real daemon cannot run here (it asks polkit, which needs a logind
/// session, for every grant). The stand-in answers as rtkit does — the properties
/// `MaxRealtimePriority`, `MinNiceLevel` and `RTTimeUSecMax`, and `MakeThreadRealtime(t thread,
/// u priority)` — with rtkit's checks: the thread belongs to the caller's process (the bus says
/// which), the priority is at most the maximum, and the process's hard `RLIMIT_RTTIME` is set and
/// at most `RTTimeUSecMax`. A grant is real: the stand-in (root) makes the thread `SCHED_FIFO`
/// with `sched_setscheduler`, and the kernel is what the test asks afterwards.
///
/// It runs under `/usr/bin/python3` with Debian's `python3-dbus` and `python3-gi`. Every wait is
/// on an event with a deadline: the bus is ready when `dbus-daemon` prints its address, the
/// service when it prints `ready`, and each answer is a line the test waits for.
public final class PrivateRealtimeKit: Sendable {
    public static let python = "/usr/bin/python3"
    /// Why the stand-in cannot run here; nil when it can.
    public static let missing: String? = {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon") else { return "dbus-daemon is missing" }
        guard FileManager.default.isExecutableFile(atPath: python) else { return "\(python) is missing" }
        guard getuid() == 0 else { return "the stand-in grants SCHED_FIFO as root only" }
        let packages = ["dbus", "gi"].filter { !FileManager.default.fileExists(atPath: "/usr/lib/python3/dist-packages/\($0)/__init__.py") }
        return packages.isEmpty ? nil : "python3-dbus or python3-gi is missing (make deps installs them)"
    }()

    /// The most rtkit grants, and the longest a real-time thread may run without sleeping.
    public static let maxRealtimePriority = 20
    public static let rtTimeUSecMax = 200_000

    /// The bus the stand-in serves (for `DBUS_SYSTEM_BUS_ADDRESS`).
    public let address: String
    /// What it printed, in order: `ready`, then its answers (`granted THREAD PRIORITY` or
    /// `refused REASON`), `ended` when it exited.
    public let lines: Watched<[String]>
    private let children: [(Process, ChildExit)]
    private let directory: String

    private init(address: String, lines: Watched<[String]>, children: [(Process, ChildExit)], directory: String) {
        self.address = address
        self.lines = lines
        self.children = children
        self.directory = directory
    }

    deinit {
        for (process, _) in children { kill(process.processIdentifier, SIGKILL) }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Its answers so far: `granted THREAD PRIORITY` or `refused REASON`.
    public var answers: [String] { lines.current.filter { $0.hasPrefix("granted") || $0.hasPrefix("refused") } }

    public struct Failure: Error, CustomStringConvertible { public let description: String }

    /// A private bus with the stand-in on it, ready.
    public static func start() async throws -> PrivateRealtimeKit {
        let directory = NSTemporaryDirectory() + "aq-rtkit-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var children: [(Process, ChildExit)] = []
        func spawn(_ tool: String, _ arguments: [String], environment: [String: String], output: Pipe) throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: tool)
            process.arguments = arguments
            process.environment = environment
            process.standardInput = FileHandle.nullDevice
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            children.append((process, try runWatched(process)))
        }
        do {
            let environment = ["HOME": directory, "PATH": "/usr/bin:/bin"]
            let bus = try await startPrivateBus(environment: environment, arguments: ["--address=unix:path=\(directory)/bus"])
            children.append((bus.process, bus.exit))
            let address = bus.address
            let script = directory + "/rtkit.py"
            try service.write(toFile: script, atomically: true, encoding: .utf8)
            let serviceOutput = Pipe()
            let lines = Watched<[String]>([])
            LineReader(serviceOutput.fileHandleForReading, onEnd: { lines.update { $0.append("ended") } }) { line in
                lines.update { $0.append(line) }
            }.start()
            try spawn(python, [script, "\(maxRealtimePriority)", "\(rtTimeUSecMax)"],
                      environment: environment.merging(["DBUS_SESSION_BUS_ADDRESS": address]) { $1 }, output: serviceOutput)
            guard await lines.wait(timeout: .seconds(10), until: { $0.contains("ready") || $0.contains("ended") }), lines.current.contains("ready") else {
                throw Failure(description: "the rtkit stand-in did not start within 10 s: \(lines.current)")
            }
            let kit = PrivateRealtimeKit(address: address, lines: lines, children: children, directory: directory)
            return kit
        } catch {
            for (process, _) in children { kill(process.processIdentifier, SIGKILL) }
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
    }

    /// The stand-in: rtkit's interface and checks (rtkit-daemon.c's, as documented in its D-Bus
    /// introspection and README), with the grant made by the kernel.
    static let service = #"""
    import os, sys
    import dbus, dbus.service, dbus.mainloop.glib
    from gi.repository import GLib

    NAME = "org.freedesktop.RealtimeKit1"
    MAX_PRIORITY, RTTIME_MAX = int(sys.argv[1]), int(sys.argv[2])

    def say(line):
        print(line, flush=True)

    def hard_rttime(pid):
        with open("/proc/%d/limits" % pid) as limits:
            for line in limits:
                if line.startswith("Max realtime timeout"):
                    hard = line.split()[4]
                    return None if hard == "unlimited" else int(hard)
        return None

    class RealtimeKit(dbus.service.Object):
        def __init__(self, bus):
            super().__init__(bus, "/org/freedesktop/RealtimeKit1")
            self.bus = bus
            self.daemon = dbus.Interface(bus.get_object("org.freedesktop.DBus", "/org/freedesktop/DBus"), "org.freedesktop.DBus")

        def refuse(self, reason):
            say("refused " + reason)
            raise dbus.exceptions.DBusException(reason, name="org.freedesktop.DBus.Error.AccessDenied")

        @dbus.service.method(NAME, in_signature="tu", out_signature="", sender_keyword="sender")
        def MakeThreadRealtime(self, thread, priority, sender=None):
            pid = int(self.daemon.GetConnectionUnixProcessID(sender))
            if not os.path.exists("/proc/%d/task/%d" % (pid, thread)):
                self.refuse("thread %d is not one of process %d's" % (thread, pid))
            if priority < 1 or priority > MAX_PRIORITY:
                self.refuse("priority %d is outside 1...%d" % (priority, MAX_PRIORITY))
            hard = hard_rttime(pid)
            if hard is None or hard > RTTIME_MAX:
                self.refuse("RLIMIT_RTTIME of process %d is %s, not at most %d" % (pid, hard, RTTIME_MAX))
            os.sched_setscheduler(int(thread), os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(int(priority)))
            say("granted %d %d" % (thread, priority))

        @dbus.service.method("org.freedesktop.DBus.Properties", in_signature="ss", out_signature="v")
        def Get(self, interface, name):
            values = {"MaxRealtimePriority": dbus.Int32(MAX_PRIORITY), "MinNiceLevel": dbus.Int32(-15),
                      "RTTimeUSecMax": dbus.Int64(RTTIME_MAX)}
            if interface != NAME or name not in values:
                raise dbus.exceptions.DBusException("no property %s.%s" % (interface, name),
                                                    name="org.freedesktop.DBus.Error.UnknownProperty")
            return values[name]

    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.SessionBus()
    kit = RealtimeKit(bus)
    name = dbus.service.BusName(NAME, bus)
    say("ready")
    GLib.MainLoop().run()
    """#
}
