import Foundation
import Testing
@testable import BufferQueue

/// The one wrapper of system calls: errno kept with the call's name, whole transfers.
@Suite struct SystemCallTests {
    /// What a call threw, if it threw a ``SystemError``.
    static func failure(_ body: () throws(SystemError) -> Void) -> SystemError? {
        do { try body() } catch { return error }
        return nil
    }

    static func write(_ bytes: [UInt8], to fd: FileDescriptor, at offset: Int64?) throws(SystemError) -> Int {
        var written = 0
        var failure: SystemError?
        bytes.withUnsafeBytes { buffer in
            do throws(SystemError) { try fd.writeAll(buffer, at: offset, written: &written) } catch { failure = error }
        }
        if let failure { throw failure }
        return written
    }

    static func read(_ count: Int, from fd: FileDescriptor, at offset: Int64) throws(SystemError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        var failure: SystemError?
        bytes.withUnsafeMutableBytes { buffer in
            do throws(SystemError) { done = try fd.readAll(into: buffer, at: offset) } catch { failure = error }
        }
        if let failure { throw failure }
        return Array(bytes.prefix(done))
    }

    @Test func failuresKeepTheCallAndErrno() {
        let missing = Self.failure { () throws(SystemError) in _ = try FileDescriptor.open("/nonexistent-\(UUID().uuidString)/x", O_RDONLY) }
        #expect(missing == SystemError(call: "open", errno: ENOENT))
        #expect(missing?.description == "open: No such file or directory")
        let full = Self.failure { () throws(SystemError) in
            let fd = try FileDescriptor.open("/dev/full", O_WRONLY)
            defer { try? fd.close() }
            _ = try Self.write([UInt8](repeating: 1, count: 100), to: fd, at: nil)
        }
        #expect(full?.call == "write" && full?.isNoSpace == true, "\(String(describing: full))")
    }

    @Test func writesAndReadsAreWhole() throws {
        let path = NSTemporaryDirectory() + "syscalls-\(UUID().uuidString)"
        defer { unlink(path) }
        let fd = try FileDescriptor.open(path, O_RDWR | O_CREAT)
        defer { try? fd.close() }
        let bytes = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 * 31) }
        #expect(try Self.write(bytes, to: fd, at: 1000) == bytes.count)
        #expect(try fd.status().st_size == 201_000)
        // A read past the end gives what there is.
        #expect(try Self.read(300_000, from: fd, at: 1000) == bytes)
        try fd.truncate(to: 10)
        #expect(try fd.status().st_size == 10)
    }
}
