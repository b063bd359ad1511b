public import Foundation

/// CoreFoundation's run loop, as far as audio callbacks need one: a thread's queue of work that
/// runs while the thread runs the loop (`CFRunLoopRun`, `CFRunLoopRunInMode`).
///
/// A queue created with a run loop (`AudioQueueNewOutput(…, CFRunLoopGetCurrent(), …)`) delivers
/// its callbacks to that loop, and they run only while its thread runs it, as on a Mac. Modes are
/// accepted and not told apart: work runs in whatever mode the loop is run. Foundation's
/// `RunLoop.run()` does not run this loop; use the CF functions, as code written for a Mac does.
// @unchecked: the work list and the stop flag are read and written only while `condition` (an NSCondition) is locked.
public final class CFRunLoop: @unchecked Sendable, Hashable {
    private let condition = NSCondition()
    private var work: [() -> Void] = []
    private var stopRequested = false

    init() {}

    /// Adds `block` to the loop's work and wakes it.
    func perform(_ block: @escaping () -> Void) {
        condition.lock()
        work.append(block)
        condition.signal()
        condition.unlock()
    }

    func stop() {
        condition.lock()
        stopRequested = true
        condition.broadcast()
        condition.unlock()
    }

    func wakeUp() {
        condition.lock()
        condition.broadcast()
        condition.unlock()
    }

    /// Runs work until `deadline`, a stop, or (with `returnAfterSourceHandled`) the first piece of work.
    func run(until deadline: Date?, returnAfterSourceHandled: Bool) -> CFRunLoopRunResult {
        condition.lock()
        while true {
            if stopRequested {
                stopRequested = false
                condition.unlock()
                return .stopped
            }
            if !work.isEmpty {
                let block = work.removeFirst()
                condition.unlock()
                block()
                if returnAfterSourceHandled { return .handledSource }
                condition.lock()
                continue
            }
            if let deadline {
                if !condition.wait(until: deadline) && work.isEmpty && !stopRequested {
                    condition.unlock()
                    return .timedOut
                }
            } else {
                condition.wait()
            }
        }
    }

    public static func == (lhs: CFRunLoop, rhs: CFRunLoop) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    static let main = CFRunLoop()
    private static let threadKey = "AudioToolbox.CFRunLoop"

    /// The calling thread's loop if it has made one.
    static var currentIfMade: CFRunLoop? {
        if Thread.isMainThread { return main }
        return Thread.current.threadDictionary[threadKey] as? CFRunLoop
    }

    /// The calling thread's loop, made on first use and kept in the thread's dictionary.
    static var current: CFRunLoop {
        if Thread.isMainThread { return main }
        let dictionary = Thread.current.threadDictionary
        if let loop = dictionary[threadKey] as? CFRunLoop { return loop }
        let loop = CFRunLoop()
        dictionary[threadKey] = loop
        return loop
    }
}

/// A run loop mode (`CFRunLoopMode.defaultMode`, `.commonModes`).
/// Sendable by construction: it keeps the mode's name as a Swift string, and hands out a `CFString` of it.
public struct CFRunLoopMode: RawRepresentable, Hashable, Sendable {
    /// The mode's name.
    private let name: String
    /// The mode's name as a `CFString`.
    public var rawValue: CFString { NSString(string: name) }
    /// The mode named `rawValue`.
    public init(rawValue: CFString) { name = String(describing: rawValue) }
    /// The mode named `rawValue`.
    public init(_ rawValue: CFString) { self.init(rawValue: rawValue) }
    public static let defaultMode = CFRunLoopMode(rawValue: "kCFRunLoopDefaultMode" as NSString)
    public static let commonModes = CFRunLoopMode(rawValue: "kCFRunLoopCommonModes" as NSString)
}

public let kCFRunLoopDefaultMode: CFRunLoopMode? = .defaultMode
public let kCFRunLoopCommonModes: CFRunLoopMode? = .commonModes

/// Why `CFRunLoopRunInMode` returned.
public enum CFRunLoopRunResult: Int32, Sendable {
    case finished = 1
    case stopped = 2
    case timedOut = 3
    case handledSource = 4
}

/// The calling thread's run loop.
public func CFRunLoopGetCurrent() -> CFRunLoop! { CFRunLoop.current }
/// The main thread's run loop.
public func CFRunLoopGetMain() -> CFRunLoop! { CFRunLoop.main }

/// Runs the calling thread's loop for up to `seconds`, until `CFRunLoopStop`, or (with
/// `returnAfterSourceHandled`) until one callback ran. Unlike a Mac's, a loop with nothing
/// registered does not return `.finished` at once: it waits out `seconds`, so a program that
/// runs it in a loop sleeps instead of spinning.
@discardableResult
public func CFRunLoopRunInMode(_ mode: CFRunLoopMode!, _ seconds: CFTimeInterval, _ returnAfterSourceHandled: Bool) -> CFRunLoopRunResult {
    let deadline = Date(timeIntervalSinceNow: max(0, seconds))
    return CFRunLoop.current.run(until: deadline, returnAfterSourceHandled: returnAfterSourceHandled)
}

/// Runs the calling thread's loop until `CFRunLoopStop`.
public func CFRunLoopRun() {
    _ = CFRunLoop.current.run(until: nil, returnAfterSourceHandled: false)
}

/// Makes the loop's current (or next) run return `.stopped`.
public func CFRunLoopStop(_ runLoop: CFRunLoop!) {
    runLoop?.stop()
}

/// Wakes the loop (it goes back to waiting if there is nothing to do).
public func CFRunLoopWakeUp(_ runLoop: CFRunLoop!) {
    runLoop?.wakeUp()
}

/// Runs `block` on the loop's thread the next time it runs the loop.
public func CFRunLoopPerformBlock(_ runLoop: CFRunLoop!, _ mode: CFTypeRef!, _ block: (() -> Void)!) {
    guard let runLoop, let block else { return }
    runLoop.perform(block)
}
