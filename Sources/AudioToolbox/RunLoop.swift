public import Foundation
internal import BufferQueue

/// CoreFoundation's run loop, as far as audio callbacks need one: a thread's queue of work that
/// runs while the thread runs the loop (`CFRunLoopRun`, `CFRunLoopRunInMode`).
///
/// A queue created with a run loop (`AudioQueueNewOutput(…, CFRunLoopGetCurrent(), …)`) delivers
/// its callbacks to that loop, and they run only while its thread runs it, as on a Mac. Modes are
/// accepted and not told apart: work runs in whatever mode the loop is run. Foundation's
/// `RunLoop.run()` does not run this loop; use the CF functions, as code written for a Mac does.
/// Sendable by construction: its work list and stop request are one value under a condition lock.
public final class CFRunLoop: Sendable, Hashable {
    private struct State {
        /// Blocks handed over from any thread, run on the loop's.
        var work: [() -> Void] = []
        var stopRequested = false
        var ready: Bool { stopRequested || !work.isEmpty }
    }
    private enum Next {
        case stop, run(() -> Void)
    }
    private let state = ConditionLock(State())

    init() {}

    /// Adds `block` to the loop's work and wakes it.
    func perform(_ block: @escaping () -> Void) {
        state.withLock { $0.work.append(block) }
    }

    func stop() {
        state.withLock { $0.stopRequested = true }
    }

    /// Wakes the loop's waiter, which waits on when there is nothing to do.
    func wakeUp() {
        state.withLock { _ in }
    }

    /// Runs work until `deadline`, a stop, or (with `returnAfterSourceHandled`) the first piece of work.
    func run(until deadline: Date?, returnAfterSourceHandled: Bool) -> CFRunLoopRunResult {
        let limit = deadline.map { date -> timespec in
            let seconds = date.timeIntervalSince1970.rounded(.down)
            return timespec(tv_sec: Int(seconds), tv_nsec: Int((date.timeIntervalSince1970 - seconds) * 1e9))
        }
        let take = { (state: inout State) -> Next in
            if state.stopRequested {
                state.stopRequested = false
                return .stop
            }
            return .run(state.work.removeFirst())
        }
        while true {
            let next: Next?
            if let limit {
                next = state.wait(until: { $0.ready }, deadline: limit, then: take)
            } else {
                next = state.wait(until: { $0.ready }, then: take)
            }
            switch next {
            case nil: return .timedOut
            case .stop: return .stopped
            case .run(let block):
                block()
                if returnAfterSourceHandled { return .handledSource }
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
