import Synchronization

/// A test hook on the real-time render path: a C function called on the sink's render thread as
/// each ``AudioRenderSource/render(into:frames:fillSilence:)`` begins (`1`) and ends (`0`), with
/// the render source's identity (``AudioQueue/renderSourceIdentity``), so an instrument can count
/// what that thread does inside one queue's renders and nothing else (the sink's own work, a
/// server write or a device call, is outside them). Nil in normal use: one atomic load per render.
package enum RenderThreadObserver {
    package typealias Hook = @convention(c) (UnsafeRawPointer?, Int32) -> Void

    private static let installed = Atomic<UInt>(0)

    /// Installs `hook` (nil removes it). Renders already under way finish with the hook they saw.
    package static func install(_ hook: Hook?) {
        installed.store(hook.map { UInt(bitPattern: unsafeBitCast($0, to: UnsafeRawPointer.self)) } ?? 0, ordering: .releasing)
    }

    @inline(__always)
    static var current: Hook? {
        let bits = installed.load(ordering: .acquiring)
        guard let pointer = UnsafeRawPointer(bitPattern: bits) else { return nil }
        return unsafeBitCast(pointer, to: Hook.self)
    }
}
