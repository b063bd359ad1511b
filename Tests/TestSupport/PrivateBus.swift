import Foundation

/// Starts a D-Bus daemon of the test's own (`dbus-daemon --session`, in the foreground) and returns
/// it once it has printed its address (an event, with a deadline): the bus the private PipeWire
/// and the rtkit stand-in run on. `arguments` add to the daemon's (an `--address`, say).
public func startPrivateBus(environment: [String: String], arguments: [String] = []) async throws -> (process: Process, exit: ChildExit, address: String) {
    let output = Pipe()
    let address = Watched<String?>(nil)
    LineReader(output.fileHandleForReading, onEnd: { address.update { $0 = $0 ?? "" } }) { line in
        address.update { $0 = $0 ?? line }
    }.start()
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
    process.arguments = ["--session", "--nofork", "--nopidfile", "--print-address=1"] + arguments
    process.environment = environment
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    let exit = try runWatched(process)
    guard await address.wait(timeout: .seconds(10), until: { $0 != nil }), let line = address.current, !line.isEmpty else {
        kill(process.processIdentifier, SIGKILL)
        throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "dbus-daemon printed no address within 10 s"])
    }
    return (process, exit, line)
}
