import AsyncHTTPClient
import BufferQueue

/// The one fetch task that fills a ``ByteChannel``: each restart drops what was queued, cancels
/// the running task and starts the next once it has ended; closing ends both and shuts the HTTP
/// client down in the background. ``HTTPFetcher`` and ``HLSLoader`` run their requests in it.
final class ChannelTask<Item: ChannelItem>: Sendable {
    let channel: ByteChannel<Item>
    let client: HTTPClient
    private let task = Lock<Task<Void, Never>?>(nil)

    init(channel: ByteChannel<Item>, configuration: HTTPStreamConfiguration) {
        self.channel = channel
        let timeout = HTTPClient.Configuration.Timeout(connect: .init(configuration.connectTimeout), read: .init(configuration.stallTimeout))
        client = HTTPClient(eventLoopGroupProvider: .singleton,
                            configuration: .init(redirectConfiguration: .follow(max: 8, allowCycles: false), timeout: timeout,
                                                 // Only what asks for it comes compressed (playlists): audio requests send no Accept-Encoding.
                                                 decompression: .enabled(limit: .ratio(100))))
    }

    /// Starts `body` with the channel's new generation (what it pushes under an older one is dropped).
    func restart(_ body: @escaping @Sendable (_ generation: Int) async -> Void) {
        let generation = channel.restart()
        let previous = task.withLock { $0 }
        previous?.cancel()
        let made = Task {
            await previous?.value
            await body(generation)
        }
        task.withLock { $0 = made }
    }

    /// Stops fetching and releases the connection. Does not wait: the client shuts down once the
    /// running task has ended (it keeps itself alive until then).
    func close() {
        channel.close()
        let running = task.withLock { $0 }
        running?.cancel()
        let client = self.client
        Task {
            await running?.value
            try? await client.shutdown()
        }
    }
}

extension HTTPStreamConfiguration {
    /// The back-off before retry `attempt` (1, 2, …): ``initialBackoff`` doubled per attempt, at most 4 s.
    func backoff(attempt: Int) -> Duration {
        min(initialBackoff * Int(1 << min(max(attempt - 1, 0), 10)), .seconds(4))
    }
}
