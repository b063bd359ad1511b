import BufferQueue
import Dispatch
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The bytes of a `file:` URL: an HLS playlist read from disk, and the segments, keys and init
/// sections it names relative to it. Read on a dispatch queue of its own, never on a thread of
/// the cooperative pool.
enum LocalResource {
    private static let queue = DispatchQueue(label: "AudioStreaming.LocalResource", attributes: .concurrent)

    /// The file's bytes in `range` (all of it when nil, at most `limit`).
    /// - Throws: ``HTTPStreamError`` naming the file and what failed (a missing file, a range past its end).
    static func read(_ url: URL, range: Range<Int64>? = nil, limit: Int = .max, what: String) async throws -> [UInt8] {
        let path = url.path
        return try await withCheckedThrowingContinuation { continuation in
            queue.async {
                continuation.resume(with: Result { () throws(HTTPStreamError) -> [UInt8] in
                    func failure(_ message: String) -> HTTPStreamError {
                        HTTPStreamError(url: url.absoluteString, byteOffset: range?.lowerBound ?? 0, message: "\(what): \(message)")
                    }
                    let fd: FileDescriptor
                    do throws(SystemError) { fd = try FileDescriptor.open(path, O_RDONLY) } catch { throw failure("cannot open \(path): \(error.reason)") }
                    defer { try? fd.close() }
                    let size: Int64
                    do throws(SystemError) { size = Int64(try fd.status().st_size) } catch { throw failure("cannot read \(path): \(error.reason)") }
                    let wanted = range ?? 0..<size
                    guard wanted.upperBound <= size else { throw failure("\(path) ends at byte \(size), before its byte range \(wanted.lowerBound)..<\(wanted.upperBound)") }
                    guard wanted.count <= limit else { throw failure("\(path) holds \(wanted.count) bytes, more than the \(limit) read for it") }
                    var bytes = [UInt8](repeating: 0, count: Int(wanted.count))
                    let read = bytes.withUnsafeMutableBytes { buffer in
                        Result { () throws(SystemError) -> Int in try fd.readAll(into: buffer, at: wanted.lowerBound) }
                    }
                    let done: Int
                    switch read {
                    case .success(let count): done = count
                    case .failure(let error): throw failure("cannot read \(path): \(error.reason)")
                    }
                    guard done == bytes.count else { throw failure("\(path) ended after \(done) of \(bytes.count) bytes") }
                    return bytes
                })
            }
        }
    }

    /// The file's length in bytes.
    static func length(_ url: URL, what: String) async throws -> Int64 {
        let path = url.path
        return try await withCheckedThrowingContinuation { continuation in
            queue.async {
                continuation.resume(with: Result { () throws(HTTPStreamError) -> Int64 in
                    do throws(SystemError) {
                        let fd = try FileDescriptor.open(path, O_RDONLY)
                        defer { try? fd.close() }
                        return Int64(try fd.status().st_size)
                    } catch {
                        throw HTTPStreamError(url: url.absoluteString, byteOffset: 0, message: "\(what): cannot open \(path): \(error.reason)")
                    }
                })
            }
        }
    }
}
