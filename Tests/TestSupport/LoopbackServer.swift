import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A small HTTP/1.1 server on 127.0.0.1 (real sockets, one thread per connection) serving one
/// resource (or a few, by path), with Range support and the faults the streaming tests inject.
public final class LoopbackServer: @unchecked Sendable {
    public struct Faults: Sendable {
        public init() {}
        /// Honour `Range` (206 answers); otherwise every answer is 200 with the whole body.
        public var ranges = true
        /// The first response closes the connection after this many body bytes.
        public var closeAfter: Int?
        /// The first response stops sending (keeps the connection open) after this many body bytes.
        public var stallAfter: Int?
        /// Every response stalls (a dead server) after this many bytes.
        public var alwaysStallAfter: Int?
        /// Send the body one byte per write.
        public var drip = false
        /// Bytes per write otherwise.
        public var writeSize = 8192
        /// The first connection is closed before any answer.
        public var dropFirstRequest = false
        /// Interleave ICY metadata every this many audio bytes (titles cycle through `titles`).
        public var icyInterval: Int?
        public var titles: [String] = ["First Song", "Second Song"]
        /// Answer with `ICY 200 OK` instead of `HTTP/1.1 200 OK`.
        public var icyStatusLine = false
        /// Leave out Content-Length (a live stream).
        public var live = false
        public var contentType = "application/octet-stream"
        /// Requests after this many are answered 404 (the stream is gone).
        public var goneAfterRequests: Int?
        /// The first answer claims this many bytes more than there are (then closes at the real end).
        public var overstateLength = 0
    }

    public let body: [UInt8]
    public let faults: Faults
    /// Resources by path (without the leading slash), when serving several; others are 404.
    private let files: [String: [UInt8]]?
    /// Answers computed per request (path without the leading slash, query without the `?`):
    /// nil falls through to `files`. It runs on the connection's own thread and may block there,
    /// as a server holding a request does.
    public typealias Handler = @Sendable (_ path: String, _ query: String) -> (status: Int, body: [UInt8])?
    private let handler: Handler?
    /// Answers with headers of their own (a redirect's `Location`, `Content-Encoding`), given the
    /// request's head as text; nil falls through.
    public typealias RawHandler = @Sendable (_ path: String, _ query: String, _ requestHead: String) -> (status: Int, headers: [String], body: [UInt8])?
    private var rawHandler: RawHandler?
    /// The path the faults apply to (nil: every request).
    private let faultyPath: String?
    private var faultyResponses = 0
    public let port: Int
    private let lock = NSLock()
    private var requests: [(path: String, range: String)] = []
    private var queries: [(path: String, query: String)] = []
    private var responses = 0
    private var closed = false
    /// Open client sockets (a serving thread removes its own before closing it, under the lock, so
    /// that `shutdown()` never touches a descriptor number the process has reused).
    private var connections: [Int32] = []
    /// Written by `shutdown()` to wake the accept loop, which owns and closes the listener.
    private let wake: (read: Int32, write: Int32)

    public convenience init(body: [UInt8], faults: Faults = Faults()) throws {
        try self.init(body: body, files: nil, faults: faults, faultyPath: nil)
    }

    /// Serves `files` by path (an HLS presentation, say); `faults` apply to `faultyPath` only,
    /// counting its requests ("the first response" is the first for that path).
    public convenience init(files: [String: [UInt8]], faults: Faults = Faults(), faultyPath: String?) throws {
        try self.init(body: [], files: files, faults: faults, faultyPath: faultyPath)
    }

    /// Serves `files` by path, asking `handler` first for every request (no faults).
    public convenience init(files: [String: [UInt8]], handler: @escaping Handler) throws {
        try self.init(body: [], files: files, faults: Faults(), faultyPath: nil, handler: handler)
    }

    /// Serves `files` by path, asking `handler` first for every request; it sets the status line's
    /// code and any headers besides `Content-Length` and `Connection` (no faults).
    public convenience init(files: [String: [UInt8]], rawHandler: @escaping RawHandler) throws {
        try self.init(body: [], files: files, faults: Faults(), faultyPath: nil, handler: nil, rawHandler: rawHandler)
    }

    private init(body: [UInt8], files: [String: [UInt8]]?, faults: Faults, faultyPath: String?, handler: Handler? = nil,
                 rawHandler: RawHandler? = nil) throws {
        self.rawHandler = rawHandler
        self.body = body
        self.files = files
        self.handler = handler
        self.faultyPath = faultyPath
        self.faults = faults
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, listen(fd, 16) == 0 else { close(fd); throw POSIXError(.EADDRINUSE) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        port = Int(UInt16(bigEndian: address.sin_port))
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { close(fd); throw POSIXError(.EMFILE) }
        wake = (ends[0], ends[1])
        let thread = Thread { [weak self] in self?.acceptLoop(fd) }
        thread.start()
    }

    public func url(_ name: String = "audio") -> String { "http://127.0.0.1:\(port)/\(name)" }

    /// The `Range` header of every request, in order ("" when none).
    public var ranges: [String] { lock.lock(); defer { lock.unlock() }; return requests.map(\.range) }
    /// Every request's path and `Range` header, in order.
    public var requestLog: [(path: String, range: String)] { lock.lock(); defer { lock.unlock() }; return requests }
    /// Every request's path and query ("" when none), in order.
    public var queryLog: [(path: String, query: String)] { lock.lock(); defer { lock.unlock() }; return queries }

    public func shutdown() {
        lock.lock()
        guard !closed else { lock.unlock(); return }
        closed = true
        for fd in connections { Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
        lock.unlock()
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
    }

    /// Accepts until `shutdown()` wakes it (no timeout: it sleeps in `poll` until a client or the
    /// wake-up arrives), then closes the listener and the wake pipe.
    private func acceptLoop(_ fd: Int32) {
        defer {
            close(fd)
            close(wake.read)
            close(wake.write)
        }
        while true {
            var waiting = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&waiting, 2, -1)
            lock.lock(); let isClosed = closed; lock.unlock()
            if isClosed || waiting[1].revents != 0 { return }
            if ready <= 0 { continue }   // interrupted by a signal
            let client = accept(fd, nil, nil)
            if client < 0 { return }
            lock.lock()
            if closed { lock.unlock(); close(client); return }
            connections.append(client)
            lock.unlock()
            var noSigpipe: Int32 = 1
            setsockopt(client, SOL_SOCKET, SO_KEEPALIVE, &noSigpipe, socklen_t(MemoryLayout<Int32>.size))
            Thread { [weak self] in
                self?.serve(client)
                self?.forget(client)
                close(client)
            }.start()
        }
    }

    private func forget(_ client: Int32) {
        lock.lock()
        connections.removeAll { $0 == client }
        lock.unlock()
    }

    private func serve(_ fd: Int32) {
        var request: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while !(request.count >= 4 && request.suffix(4) == [13, 10, 13, 10]) {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, 4096, 0) }
            if n <= 0 { return }
            request += chunk[0..<n]
        }
        let text = String(decoding: request, as: UTF8.self)
        var range = ""
        var wantsICY = false
        let target = text.split(separator: " ", maxSplits: 2).dropFirst().first.map(String.init) ?? "/"
        let pathAndQuery = target.dropFirst().split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let path = String(pathAndQuery.first ?? ""), query = pathAndQuery.count > 1 ? String(pathAndQuery[1]) : ""
        for line in text.split(separator: "\r\n") {
            let lower = line.lowercased()
            if lower.hasPrefix("range:") { range = String(line.dropFirst(6)).trimmingCharacters(in: .whitespaces) }
            if lower.hasPrefix("icy-metadata: 1") { wantsICY = true }
        }
        lock.lock()
        requests.append((path, range))
        queries.append((path, query))
        responses += 1
        let isFaulty = faultyPath == nil || faultyPath == path
        if isFaulty { faultyResponses += 1 }
        let index = isFaulty ? faultyResponses : 0
        lock.unlock()
        if let answer = rawHandler?(path, query, text) {
            let head = "HTTP/1.1 \(answer.status) Status \(answer.status)\r\n" + answer.headers.map { $0 + "\r\n" }.joined()
                + "Content-Length: \(answer.body.count)\r\nConnection: close\r\n\r\n"
            guard send(fd, Array(head.utf8)) else { return }
            _ = send(fd, answer.body)
            return
        }
        if let answer = handler?(path, query) {
            let reason = answer.status == 200 ? "OK" : "Status \(answer.status)"
            let head = "HTTP/1.1 \(answer.status) \(reason)\r\nContent-Type: application/vnd.apple.mpegurl\r\n"
                + "Content-Length: \(answer.body.count)\r\nConnection: close\r\n\r\n"
            guard send(fd, Array(head.utf8)) else { return }
            _ = send(fd, answer.body)
            return
        }
        let body: [UInt8]
        if let files {
            guard let file = files[path] else {
                _ = send(fd, Array("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8))
                return
            }
            body = file
        } else {
            body = self.body
        }
        let faults = isFaulty ? self.faults : Faults()

        if faults.dropFirstRequest && index == 1 { return }
        if let gone = faults.goneAfterRequests, index > gone {
            _ = send(fd, Array("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8))
            return
        }
        var start = 0
        if faults.ranges, range.hasPrefix("bytes="), let from = Int(range.dropFirst(6).split(separator: "-").first ?? "") { start = from }
        var head: String
        if faults.ranges && !range.isEmpty && start >= body.count {
            head = "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */\(body.count)\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            _ = send(fd, Array(head.utf8))
            return
        }
        let partial = faults.ranges && !range.isEmpty
        head = faults.icyStatusLine ? "ICY 200 OK\r\n" : (partial ? "HTTP/1.1 206 Partial Content\r\n" : "HTTP/1.1 200 OK\r\n")
        let type = files != nil && path.hasSuffix(".m3u8") ? "application/vnd.apple.mpegurl" : faults.contentType
        head += "Content-Type: \(type)\r\nConnection: close\r\n"
        if faults.ranges { head += "Accept-Ranges: bytes\r\n" }
        let icy = wantsICY ? faults.icyInterval : nil
        if let icy { head += "icy-metaint: \(icy)\r\nicy-name: Loopback Radio\r\nicy-genre: Test\r\n" }
        if let icy, !faults.live {
            // A finite ICY resource: the length counts the metadata too (no Range then).
            head += "Content-Length: \(Self.interleave(Array(body[start...]), every: icy, titles: faults.titles).count)\r\n"
        }
        if !faults.live && icy == nil {
            let extra = index == 1 ? faults.overstateLength : 0
            head += "Content-Length: \(body.count - start + extra)\r\n"
            if partial { head += "Content-Range: bytes \(start)-\(body.count - 1 + extra)/\(body.count + extra)\r\n" }
        }
        head += "\r\n"
        guard send(fd, Array(head.utf8)) else { return }

        var payload = Array(body[start...])
        if let icy { payload = Self.interleave(payload, every: icy, titles: faults.titles) }
        let closeAfter = index == 1 ? faults.closeAfter : nil
        let stallAfter = index == 1 ? faults.stallAfter : faults.alwaysStallAfter
        var sent = 0
        while sent < payload.count {
            var step = faults.drip ? 1 : faults.writeSize
            if let limit = closeAfter { if sent >= limit { return }; step = min(step, limit - sent) }
            if let limit = stallAfter ?? faults.alwaysStallAfter {
                if sent >= limit { waitUntilClosed(fd); return }
                step = min(step, limit - sent)
            }
            step = min(step, payload.count - sent)
            guard send(fd, Array(payload[sent..<(sent + step)])) else { return }
            sent += step
        }
    }

    /// Holds a stalled connection until the client gives up on it (or the server shuts down).
    private func waitUntilClosed(_ fd: Int32) {
        var byte: UInt8 = 0
        while true {
            let n = recv(fd, &byte, 1, 0)
            if n <= 0 { return }
        }
    }

    private func send(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { raw in
                raw.baseAddress.map { Glibc.send(fd, $0 + done, bytes.count - done, Int32(MSG_NOSIGNAL)) } ?? -1
            }
            if n <= 0 { return false }
            done += n
        }
        return true
    }

    /// Inserts an ICY block after every `every` audio bytes: a title block, then empty ones.
    public static func interleave(_ audio: [UInt8], every: Int, titles: [String]) -> [UInt8] {
        var out: [UInt8] = []
        var index = 0, block = 0
        while index < audio.count {
            let end = min(index + every, audio.count)
            out += audio[index..<end]
            let full = end - index == every
            index = end
            if full {
                if block % 3 == 0 {
                    let title = titles[(block / 3) % titles.count]
                    var text = Array("StreamTitle='\(title)';StreamUrl='';".utf8)
                    let length = (text.count + 15) / 16
                    text += [UInt8](repeating: 0, count: length * 16 - text.count)
                    out.append(UInt8(length))
                    out += text
                } else {
                    out.append(0)
                }
                block += 1
            }
        }
        return out
    }
}
