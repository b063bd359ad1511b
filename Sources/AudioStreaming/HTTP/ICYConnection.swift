import BufferQueue
import FoundationEssentials
import NIOCore
import NIOHTTP1
import NIOPosix

/// A plain-HTTP GET for servers that answer `ICY 200 OK` (SHOUTcast v1 and old Icecast), which
/// HTTP parsers refuse: the status line is read as `HTTP/1.0 200 OK`, everything else is HTTP.
/// Used only after AsyncHTTPClient failed to parse such an answer.
enum ICYConnection {
    struct Response {
        var status: Int
        var reason: String
        var headers: HTTPHeaders
        var body: AsyncThrowingStream<ByteBuffer, any Error>
        /// The status line was `ICY …`.
        var wasICY: Bool
    }

    static func get(url: String, headers: [(String, String)], stallTimeout: TimeAmount) async throws -> Response {
        guard let parsed = URL(string: url), parsed.scheme?.lowercased() == "http", let host = parsed.host, !host.isEmpty else {
            throw HTTPStreamError(url: url, byteOffset: 0, message: "not a plain http:// URL")
        }
        let port = parsed.port ?? 80
        // The path and query as sent, percent-encoding kept.
        let path = (parsed.path(percentEncoded: true).isEmpty ? "/" : parsed.path(percentEncoded: true))
            + (parsed.query(percentEncoded: true).map { "?" + $0 } ?? "")
        let rewrote = Lock(false)
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.seconds(10))
            .connect(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(ICYStatusLineRewriter(rewrote: rewrote), position: .first)
                    try channel.pipeline.syncOperations.addHandler(IdleStateHandler(readTimeout: stallTimeout), position: .first)
                    try channel.pipeline.syncOperations.addHandler(CloseOnIdle())
                    return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
                }
            }
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: path)
        head.headers.add(name: "Host", value: parsed.port.map { "\(host):\($0)" } ?? host)
        head.headers.add(name: "Connection", value: "close")
        for (name, value) in headers { head.headers.add(name: name, value: value) }
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: ByteBuffer.self)
        let (headStream, headContinuation) = AsyncThrowingStream.makeStream(of: HTTPResponseHead.self)
        let reader = Task {
            do {
                try await channel.executeThenClose { inbound, outbound in
                    try await outbound.write(.head(head))
                    try await outbound.write(.end(nil))
                    for try await part in inbound {
                        switch part {
                        case .head(let response): headContinuation.yield(response); headContinuation.finish()
                        case .body(let buffer): continuation.yield(buffer)
                        case .end: continuation.finish(); return
                        }
                    }
                    continuation.finish()
                }
            } catch {
                headContinuation.finish(throwing: error)
                continuation.finish(throwing: error)
            }
            headContinuation.finish()
        }
        continuation.onTermination = { _ in reader.cancel() }
        var iterator = headStream.makeAsyncIterator()
        guard let response = try await iterator.next() else {
            throw HTTPStreamError(url: url, byteOffset: 0, message: "the server closed the connection before answering")
        }
        return Response(status: Int(response.status.code), reason: response.status.reasonPhrase, headers: response.headers, body: stream,
                        wasICY: rewrote.withLock { $0 })
    }
}

/// Rewrites a leading `ICY` status line to `HTTP/1.0` before the HTTP decoder sees it. Made on
/// the channel's event loop and used only there (not `Sendable`); it says whether it rewrote
/// through a `Sendable` flag.
final class ICYStatusLineRewriter: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    private var pending: ByteBuffer?
    private let rewrote: Lock<Bool>

    init(rewrote: Lock<Bool>) { self.rewrote = rewrote }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        if var held = pending {
            held.writeBuffer(&buffer)
            buffer = held
            pending = nil
        }
        guard buffer.readableBytes >= 4 else { pending = buffer; return }
        if buffer.getString(at: buffer.readerIndex, length: 4) == "ICY " {
            var rewritten = context.channel.allocator.buffer(capacity: buffer.readableBytes + 5)
            rewritten.writeString("HTTP/1.0 ")
            buffer.moveReaderIndex(forwardBy: 4)
            rewritten.writeBuffer(&buffer)
            buffer = rewritten
            rewrote.withLock { $0 = true }
        }
        context.fireChannelRead(wrapInboundOut(buffer))
        context.pipeline.syncOperations.removeHandler(self, promise: nil)
    }
}

/// Closes the connection when no byte arrived for the read timeout (a stall).
final class CloseOnIdle: ChannelInboundHandler {
    typealias InboundIn = NIOAny
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .read {
            context.close(promise: nil)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }
}
