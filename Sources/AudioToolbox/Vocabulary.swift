@_exported import CoreAudioTypes
@_exported import CAudioToolbox
public import Foundation
internal import BufferQueue
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// The Darwin and CoreFoundation names audio code written for a Mac uses and Linux lacks. On a Mac
// they come with Foundation; here they come with `import AudioToolbox`.

/// Darwin's `Boolean` (an `unsigned char`) as Swift sees it behind a pointer: what
/// `AudioFileStreamGetPropertyInfo` and `AudioFileGetPropertyInfo` write their "writable" flag into.
@frozen
public struct DarwinBoolean: ExpressibleByBooleanLiteral, CustomStringConvertible, Hashable, Sendable {
    @usableFromInline var value: UInt8

    @inlinable public init(_ value: Bool) { self.value = value ? 1 : 0 }
    @inlinable public init(booleanLiteral value: Bool) { self.init(value) }
    /// True for any nonzero value, as in C.
    @inlinable public var boolValue: Bool { value != 0 }
    public var description: String { boolValue.description }
    public static func == (lhs: DarwinBoolean, rhs: DarwinBoolean) -> Bool { lhs.boolValue == rhs.boolValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(boolValue) }
}

extension Bool {
    @inlinable public init(_ value: DarwinBoolean) { self = value.boolValue }
}

/// MacTypes' `Boolean`.
public typealias Boolean = DarwinBoolean

// MARK: CoreFoundation's object types, as the Foundation classes they bridge to

/// `CFURL`: on Linux the Foundation class it bridges to, so that `url as CFURL` compiles.
public typealias CFURL = NSURL
/// `CFString`: on Linux the Foundation class it bridges to, so that `"name" as CFString` compiles.
public typealias CFString = NSString
/// `CFDictionary`, for `kAudioFilePropertyInfoDictionary`.
public typealias CFDictionary = NSDictionary
/// `CFData`.
public typealias CFData = NSData
/// `CFArray`, for the lists of Audio File Services' global info.
public typealias CFArray = NSArray
/// `CFIndex`: a count or an index.
public typealias CFIndex = Int
/// `CFTimeInterval`: seconds.
public typealias CFTimeInterval = Double
/// `CFTypeRef`: any CoreFoundation object.
public typealias CFTypeRef = AnyObject

/// `CFAllocator`: the allocators are not modelled; pass `kCFAllocatorDefault` (nil) or nil.
public final class CFAllocator: Sendable {
    private init() {}
}
/// The default allocator (nil, as on a Mac where it means the same).
public let kCFAllocatorDefault: CFAllocator? = nil

/// How `CFURLCreateWithFileSystemPath` reads a path.
public enum CFURLPathStyle: CFIndex, Sendable {
    case cfurlposixPathStyle = 0
    case cfurlhfsPathStyle = 1
    case cfurlWindowsPathStyle = 2
}

/// CoreFoundation's `CFURLCreateWithFileSystemPath`: a file URL for `filePath`.
public func CFURLCreateWithFileSystemPath(_ allocator: CFAllocator?, _ filePath: CFString?, _ pathStyle: CFURLPathStyle,
                                          _ isDirectory: Bool) -> CFURL? {
    guard let filePath else { return nil }
    return NSURL(fileURLWithPath: filePath as String, isDirectory: isDirectory)
}

/// CoreFoundation's `CFRelease`: memory here is managed by Swift, so it does nothing.
public func CFRelease(_ object: CFTypeRef?) {}

// MARK: byte order (CFByteOrder.h)

@inlinable public func CFSwapInt16(_ value: UInt16) -> UInt16 { value.byteSwapped }
@inlinable public func CFSwapInt32(_ value: UInt32) -> UInt32 { value.byteSwapped }
@inlinable public func CFSwapInt64(_ value: UInt64) -> UInt64 { value.byteSwapped }
@inlinable public func CFSwapInt16HostToBig(_ value: UInt16) -> UInt16 { value.bigEndian }
@inlinable public func CFSwapInt32HostToBig(_ value: UInt32) -> UInt32 { value.bigEndian }
@inlinable public func CFSwapInt64HostToBig(_ value: UInt64) -> UInt64 { value.bigEndian }
@inlinable public func CFSwapInt16BigToHost(_ value: UInt16) -> UInt16 { UInt16(bigEndian: value) }
@inlinable public func CFSwapInt32BigToHost(_ value: UInt32) -> UInt32 { UInt32(bigEndian: value) }
@inlinable public func CFSwapInt64BigToHost(_ value: UInt64) -> UInt64 { UInt64(bigEndian: value) }
@inlinable public func CFSwapInt16HostToLittle(_ value: UInt16) -> UInt16 { value.littleEndian }
@inlinable public func CFSwapInt32HostToLittle(_ value: UInt32) -> UInt32 { value.littleEndian }
@inlinable public func CFSwapInt64HostToLittle(_ value: UInt64) -> UInt64 { value.littleEndian }
@inlinable public func CFSwapInt16LittleToHost(_ value: UInt16) -> UInt16 { UInt16(littleEndian: value) }
@inlinable public func CFSwapInt32LittleToHost(_ value: UInt32) -> UInt32 { UInt32(littleEndian: value) }
@inlinable public func CFSwapInt64LittleToHost(_ value: UInt64) -> UInt64 { UInt64(littleEndian: value) }

// MARK: host time (CoreAudio's HostTime.h); a host tick is a nanosecond of the monotonic clock

/// The current host time: nanoseconds of the monotonic clock (`DispatchTime.now()`'s).
public func AudioGetCurrentHostTime() -> UInt64 { DispatchTime.now().uptimeNanoseconds }
/// Host ticks per second: 10⁹.
public func AudioGetHostClockFrequency() -> Float64 { 1_000_000_000 }
/// Host ticks to nanoseconds (the same here).
public func AudioConvertHostTimeToNanos(_ hostTime: UInt64) -> UInt64 { hostTime }
/// Nanoseconds to host ticks (the same here).
public func AudioConvertNanosToHostTime(_ nanos: UInt64) -> UInt64 { nanos }

// MARK: @synchronized (objc_sync_enter / objc_sync_exit)

/// The Objective-C runtime's `objc_sync_enter`: takes a recursive lock tied to `object`'s identity,
/// as `@synchronized(object)` does. Returns 0 (`OBJC_SYNC_SUCCESS`).
@discardableResult
public func objc_sync_enter(_ object: Any) -> Int32 {
    ObjectMonitors.shared.enter(ObjectIdentifier(object as AnyObject))
    return 0
}

/// The Objective-C runtime's `objc_sync_exit`. Returns 0, or -1 (`OBJC_SYNC_NOT_OWNING_THREAD_ERROR`)
/// when the calling thread does not hold `object`'s lock.
@discardableResult
public func objc_sync_exit(_ object: Any) -> Int32 {
    ObjectMonitors.shared.exit(ObjectIdentifier(object as AnyObject)) ? 0 : -1
}

/// Recursive locks keyed by object identity, made on first use and dropped when released.
final class ObjectMonitors: Sendable {
    static let shared = ObjectMonitors()
    private struct Monitor { var owner: pthread_t; var depth: Int }
    /// The monitors held, by object; waiters wait for the one they want to be let go.
    private let monitors = ConditionLock<[ObjectIdentifier: Monitor]>([:])

    func enter(_ id: ObjectIdentifier) {
        let me = pthread_self()
        monitors.wait(until: { table in table[id].map { pthread_equal($0.owner, me) != 0 } ?? true }) { table in
            table[id, default: Monitor(owner: me, depth: 0)].depth += 1
        }
    }

    func exit(_ id: ObjectIdentifier) -> Bool {
        monitors.withLock { table in
            guard var monitor = table[id], pthread_equal(monitor.owner, pthread_self()) != 0 else { return false }
            monitor.depth -= 1
            table[id] = monitor.depth == 0 ? nil : monitor
            return true
        }
    }
}

// MARK: Darwin's C library, with its pointers as a Mac imports them
//
// Darwin declares these without nullability, so on a Mac their pointers are optional (implicitly
// unwrapped); Glibc marks them non-null. Code from a Mac that passes an optional chain
// (`memcpy(buffer?.pointee.mAudioData, source, count)`) finds these overloads; calls with
// non-optional pointers still go to the C library's own (the closer match). A nil pointer with a
// count of 0 does nothing; with more it stops the program with a message, where C would crash.

#if canImport(Glibc) || canImport(Musl)
@inline(__always) private func nonNil<P>(_ pointer: P?, _ count: Int, _ function: StaticString) -> P? {
    precondition(pointer != nil || count == 0, "\(function) of \(count) bytes with a nil pointer")
    return pointer
}

/// Darwin's `memcpy`, taking optional pointers.
@discardableResult
public func memcpy(_ destination: UnsafeMutableRawPointer?, _ source: UnsafeRawPointer?, _ count: Int) -> UnsafeMutableRawPointer? {
    guard let to = nonNil(destination, count, "memcpy"), let from = nonNil(source, count, "memcpy") else { return destination }
    to.copyMemory(from: from, byteCount: count)
    return to
}

/// Darwin's `memmove`, taking optional pointers.
@discardableResult
public func memmove(_ destination: UnsafeMutableRawPointer?, _ source: UnsafeRawPointer?, _ count: Int) -> UnsafeMutableRawPointer? {
    guard let to = nonNil(destination, count, "memmove"), let from = nonNil(source, count, "memmove") else { return destination }
    to.copyMemory(from: from, byteCount: count)   // copyMemory allows overlapping regions
    return to
}

/// Darwin's `memset`, taking an optional pointer.
@discardableResult
public func memset(_ destination: UnsafeMutableRawPointer?, _ value: Int32, _ count: Int) -> UnsafeMutableRawPointer? {
    guard let to = nonNil(destination, count, "memset") else { return destination }
    to.initializeMemory(as: UInt8.self, repeating: UInt8(truncatingIfNeeded: value), count: count)
    return to
}

/// Darwin's `memcmp`, taking optional pointers.
public func memcmp(_ first: UnsafeRawPointer?, _ second: UnsafeRawPointer?, _ count: Int) -> Int32 {
    guard let a = nonNil(first, count, "memcmp"), let b = nonNil(second, count, "memcmp") else { return 0 }
    for index in 0..<count {
        let x = a.load(fromByteOffset: index, as: UInt8.self), y = b.load(fromByteOffset: index, as: UInt8.self)
        if x != y { return Int32(x) - Int32(y) }
    }
    return 0
}

/// Darwin's `bzero`, taking an optional pointer.
public func bzero(_ destination: UnsafeMutableRawPointer?, _ count: Int) {
    guard let to = nonNil(destination, count, "bzero") else { return }
    to.initializeMemory(as: UInt8.self, repeating: 0, count: count)
}
#endif
