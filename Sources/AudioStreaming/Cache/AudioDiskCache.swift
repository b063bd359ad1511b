import BufferQueue
import Crypto
import Dispatch
import FoundationEssentials
import NIOHTTP1
#if canImport(Glibc)
import Glibc
#endif

/// An on-disk cache of HTTP resources for streaming playback (opt-in: set
/// ``HTTPStreamConfiguration/cache``).
///
/// Each resource is a sparse file holding the bytes fetched so far at their own offsets, and a
/// record of the byte ranges held with the resource's validator (`ETag`, `Last-Modified`, length).
/// Playback reads held bytes from the file and fetches only the missing ranges, with `Range` (and
/// `If-Range`, so a resource that changed on the server is noticed); a seek into a held range
/// needs no request, and a fully held resource plays with the server gone. HLS VOD segments and
/// playlists are kept the same way.
///
/// **Crash safety.** Bytes are written first, flushed to disk (`fdatasync`), and only then added
/// to the record, which is replaced atomically (written aside, then renamed): a crash or a kill
/// at any moment leaves a record that claims nothing that is not on disk. Bytes written after
/// the last record update are fetched again.
///
/// **Integrity.** Each whole block of 64 KiB held has a CRC-32C in the record, computed when the
/// block is recorded; every read checks the blocks it touches. A block whose bytes changed on
/// disk is dropped from the record and the read fails, so the bytes are fetched again from the
/// server (or, with the server gone, playback fails with an error naming the block).
///
/// **Size.** When the bytes held exceed ``capacity``, whole resources are evicted, least recently
/// used first (never one that is open). The bytes held are tallied in memory, so checking the cap
/// costs no I/O until it is exceeded.
///
/// File I/O runs on the cache's own serial queue, never on a thread of Swift's cooperative pool.
public final class AudioDiskCache: Sendable {
    /// The folder holding the cache's files.
    public let directory: URL
    /// The most bytes held before least recently used resources are evicted.
    public let capacity: Int64
    /// Bytes written between two record updates (each costs an `fdatasync`).
    let commitInterval: Int64
    private let queue = DispatchQueue(label: "AudioDiskCache.io")
    /// What the lock guards: the open entries, and the bytes held per key, read from the records
    /// once (on the I/O queue) and kept up to date by every record written here: a commit checks
    /// the cap without reading every record again.
    private struct Guarded {
        var entries: [String: Entry] = [:]
        /// How many callers have each open entry.
        var users: [String: Int] = [:]
        var tally: [String: Int64]?
    }
    private let lock = Lock(Guarded())

    /// The bytes each checksum covers.
    static let blockSize: Int64 = 64 << 10

    /// Opens (creating it if needed) a cache in `directory` of at most `capacity` bytes.
    /// - Throws: the error creating the folder.
    public init(directory: String, capacity: Int64 = 1 << 30, commitInterval: Int64 = 256 << 10) throws {
        self.directory = URL(fileURLWithPath: directory, isDirectory: true)
        self.capacity = max(capacity, 0)
        self.commitInterval = max(commitInterval, 4096)
        try FileManager.default.createDirectory(at: self.directory, withIntermediateDirectories: true)
    }

    /// What the record of one resource holds.
    struct Record: Codable, Equatable {
        var key: String
        var etag: String?
        var lastModified: String?
        var length: Int64?
        var contentType: String?
        var acceptsRanges: Bool
        /// Held byte ranges, sorted and disjoint: [start, end).
        var ranges: [[Int64]]
        /// Seconds since 1970 of the last use (for eviction).
        var lastUsed: Double
        /// The CRC-32C of each whole block held (``AudioDiskCache/blockSize`` bytes; the last one
        /// to the resource's end), by block index; reads check them. Records written before
        /// checksums were kept have none.
        var sums: [String: UInt32]?

        var heldBytes: Int64 { ranges.reduce(0) { $0 + $1[1] - $1[0] } }
        var isComplete: Bool { length.map { $0 == 0 || ranges == [[0, $0]] } ?? false }
    }

    /// The validator a response carries: a resource whose validator changed is fetched anew.
    struct Validator: Equatable {
        var etag: String?
        var lastModified: String?
        var length: Int64?
    }

    /// The validator of an HTTP answer: its `ETag`, `Last-Modified`, and the whole resource's
    /// length (from `Content-Range` for a 206, else `Content-Length`), unless `length` is known.
    static func validator(status: Int, headers: HTTPHeaders, length: Int64? = nil) -> Validator {
        let total = length ?? (status == 206 ? headers.first(name: "content-range")?.split(separator: "/").last.flatMap { Int64($0) }
                                             : headers.first(name: "content-length").flatMap { Int64($0) })
        return Validator(etag: headers.first(name: "etag"), lastModified: headers.first(name: "last-modified"), length: total)
    }

    /// A summary of one cached resource.
    public struct Item: Sendable, Equatable {
        /// The resource's key (its URL).
        public var key: String
        /// The resource's length in bytes, once known.
        public var length: Int64?
        /// Bytes held on disk.
        public var heldBytes: Int64
        /// The byte ranges held, in order.
        public var heldRanges: [Range<Int64>]
        /// Whether every byte is held.
        public var isComplete: Bool
    }

    /// Every resource the cache holds (read from the records on disk, synchronously).
    public func items() -> [Item] {
        queue.sync { loadRecords() }.map { record in
            Item(key: record.key, length: record.length, heldBytes: record.heldBytes,
                 heldRanges: record.ranges.map { $0[0]..<$0[1] }, isComplete: record.isComplete)
        }
    }

    /// The bytes held in total.
    public var heldBytes: Int64 { items().reduce(0) { $0 + $1.heldBytes } }

    /// The summary of the resource at `key` (a URL, or a URL and byte range for HLS segments).
    public func item(forKey key: String) -> Item? { items().first { $0.key == key } }

    /// Forgets every resource.
    public func removeAll() {
        queue.sync {
            for record in loadRecords() where !isOpen(record.key) { remove(record.key) }
        }
    }

    // MARK: entries

    /// The open entry for `key` (shared while open); ``Entry/release()`` when done.
    func entry(forKey key: String) async throws -> Entry {
        if let open = lock.withLock({ g -> Entry? in
            let found = g.entries[key]
            if found != nil { g.users[key, default: 0] += 1 }
            return found
        }) { return open }
        let made = try await run { () throws -> Entry in
            let name = Self.name(key)
            let data = self.directory.appendingPathComponent(name + ".data").path
            let fd: FileDescriptor
            do throws(SystemError) { fd = try FileDescriptor.open(data, O_RDWR | O_CREAT) } catch { throw AudioDiskCacheError(path: data, error) }
            var record = self.readRecord(name) ?? Record(key: key, acceptsRanges: false, ranges: [], lastUsed: 0)
            if record.key != key { record = Record(key: key, acceptsRanges: false, ranges: [], lastUsed: 0) }
            // Ranges beyond the data file's end were never written (a record from elsewhere): drop them.
            if let size = try? fd.status().st_size { record.ranges = record.ranges.compactMap { $0[1] <= Int64(size) ? $0 : nil } }
            record.lastUsed = Date().timeIntervalSince1970
            return Entry(cache: self, key: key, name: name, fd: fd, record: record)
        }
        return lock.withLock { g in
            // Another caller may have opened it meanwhile: share theirs.
            if let open = g.entries[key] {
                g.users[key, default: 0] += 1
                try? made.fd.close()
                return open
            }
            g.entries[key] = made
            g.users[key] = 1
            return made
        }
    }

    fileprivate func released(_ entry: Entry) {
        let last = lock.withLock { g -> Bool in
            let users = g.users[entry.key, default: 1] - 1
            g.users[entry.key] = users
            guard users == 0 else { return false }
            g.entries[entry.key] = nil
            g.users[entry.key] = nil
            return true
        }
        if last { queue.async { try? entry.fd.close() } }
    }

    private func isOpen(_ key: String) -> Bool { lock.withLock { g in g.entries[key] != nil } }

    /// Runs `body` on the cache's I/O queue.
    func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try body() }) }
        }
    }

    // MARK: files (on the queue)

    static func name(_ key: String) -> String {
        SHA256.hash(data: Array(key.utf8)).prefix(16).map { formatted("%02x", $0) }.joined()
    }

    private func recordURL(_ name: String) -> URL { directory.appendingPathComponent(name + ".json") }

    private func readRecord(_ name: String) -> Record? {
        guard let data = try? Data(contentsOf: recordURL(name)) else { return nil }
        return try? JSONDecoder().decode(Record.self, from: data)
    }

    /// Replaces the record atomically: written aside, flushed, renamed over the old one.
    func writeRecord(_ record: Record, name: String) throws {
        let data = try JSONEncoder().encode(record)
        let aside = directory.appendingPathComponent(name + ".json.tmp").path
        var failure: SystemError?
        do throws(SystemError) {
            let fd = try FileDescriptor.open(aside, O_WRONLY | O_CREAT | O_TRUNC)
            data.withUnsafeBytes { bytes in
                do throws(SystemError) {
                    var written = 0
                    try fd.writeAll(bytes, written: &written)
                    try fd.sync()
                } catch {
                    failure = error
                }
            }
            try? fd.close()
            if failure == nil { try FileDescriptor.rename(aside, to: recordURL(name).path) }
        } catch {
            failure = error
        }
        if let failure {
            unlink(aside)
            throw AudioDiskCacheError(path: aside, failure)
        }
        recorded(record)
    }

    private func loadRecords() -> [Record] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { $0.hasSuffix(".json") }.compactMap { readRecord(String($0.dropLast(5))) }
    }

    private func remove(_ key: String) {
        let name = Self.name(key)
        // The record goes first: a crash in between leaves a data file without a record, which
        // holds nothing.
        unlink(recordURL(name).path)
        unlink(directory.appendingPathComponent(name + ".data").path)
        lock.withLock { g in g.tally?[key] = nil }
    }

    /// A record was written: the tally follows it, then the cap is enforced (on the I/O queue).
    func recorded(_ record: Record) {
        let known = lock.withLock { g in g.tally != nil }
        if !known {
            let all = Dictionary(loadRecords().map { ($0.key, $0.heldBytes) }, uniquingKeysWith: { a, _ in a })
            lock.withLock { g in g.tally = all }
        }
        let total = lock.withLock { g -> Int64 in
            g.tally?[record.key] = record.heldBytes
            return g.tally?.values.reduce(0, +) ?? 0
        }
        if total > capacity { evict() }
    }

    /// Evicts least recently used resources (not open ones) until the bytes held fit. The records
    /// are read again here (another process may share the folder); the tally is rebuilt from them.
    private func evict() {
        var records = loadRecords().sorted { $0.lastUsed < $1.lastUsed }
        var total = records.reduce(0) { $0 + $1.heldBytes }
        lock.withLock { g in g.tally = Dictionary(records.map { ($0.key, $0.heldBytes) }, uniquingKeysWith: { a, _ in a }) }
        while total > capacity, let index = records.firstIndex(where: { !isOpen($0.key) }) {
            let record = records.remove(at: index)
            remove(record.key)
            total -= record.heldBytes
        }
    }

    /// One open resource: its data file and record.
    final class Entry: Sendable {
        let key: String
        let name: String
        fileprivate let fd: FileDescriptor
        /// The data file, for messages.
        var dataPath: String { cache.directory.appendingPathComponent(name + ".data").path }
        private unowned let cache: AudioDiskCache
        /// Guarded by `lock`: the record as last written, and ranges written since.
        private struct Guarded {
            var record: Record
            var unsynced: [[Int64]] = []
            var unsyncedBytes: Int64 = 0
        }
        private let lock: Lock<Guarded>

        fileprivate init(cache: AudioDiskCache, key: String, name: String, fd: FileDescriptor, record: Record) {
            self.cache = cache
            self.key = key
            self.name = name
            self.fd = fd
            lock = Lock(Guarded(record: record))
        }

        /// Done with the entry: what was written is recorded, and the file closed when no one else has it open.
        func release() async {
            try? await commit()
            cache.released(self)
        }

        var snapshot: Record { lock.withLock { g in g.record } }
        var validator: Validator { lock.withLock { g in Validator(etag: g.record.etag, lastModified: g.record.lastModified, length: g.record.length) } }
        var isComplete: Bool { lock.withLock { g in g.record.isComplete } }
        var hasData: Bool { lock.withLock { g in !g.record.ranges.isEmpty || !g.unsynced.isEmpty } }

        /// The held range (recorded or written) that contains `offset`.
        func held(containing offset: Int64) -> Range<Int64>? {
            lock.withLock { g in
                let all = Self.merged(g.record.ranges + g.unsynced)
                return all.first { $0[0] <= offset && offset < $0[1] }.map { $0[0]..<$0[1] }
            }
        }

        /// Where the next held range after `offset` starts (the end of the missing bytes).
        func nextHeld(after offset: Int64) -> Int64? {
            lock.withLock { g in Self.merged(g.record.ranges + g.unsynced).first { $0[0] > offset }?[0] }
        }

        /// The server's answer for the resource: a different validator than the record's drops
        /// what is held (it belongs to another version). Returns whether anything was dropped.
        @discardableResult
        func validate(_ seen: Validator, contentType: String?, acceptsRanges: Bool) async throws -> Bool {
            let (dropped, updated) = lock.withLock { g -> (Bool, Record) in
                let old = Validator(etag: g.record.etag, lastModified: g.record.lastModified, length: g.record.length)
                let differs = (!g.record.ranges.isEmpty || !g.unsynced.isEmpty) && Self.differs(old, seen)
                if differs {
                    g.record.ranges = []
                    g.record.sums = nil
                    g.unsynced = []
                    g.unsyncedBytes = 0
                }
                g.record.etag = seen.etag
                g.record.lastModified = seen.lastModified
                g.record.length = seen.length
                g.record.contentType = contentType
                g.record.acceptsRanges = acceptsRanges
                return (differs, g.record)
            }
            let fd = self.fd, name = self.name, cache = self.cache
            try await cache.run {
                if dropped { try? fd.truncate(to: 0) }
                try cache.writeRecord(updated, name: name)
            }
            return dropped
        }

        static func differs(_ a: Validator, _ b: Validator) -> Bool {
            if let x = a.etag, let y = b.etag { return x != y }
            if let x = a.lastModified, let y = b.lastModified, x != y { return true }
            if let x = a.length, let y = b.length, x != y { return true }
            // Without any validator in common the bytes cannot be trusted to be the same.
            return a.etag == nil && a.lastModified == nil && a.length == nil
        }

        /// `If-Range` for a request of missing bytes: the strongest validator held.
        var ifRange: String? { lock.withLock { g in g.record.etag.flatMap { $0.hasPrefix("W/") ? nil : $0 } ?? g.record.lastModified } }

        /// The bytes of `range` (held), after checking the checksum of every block it touches.
        /// - Throws: ``AudioDiskCacheError`` when the file cannot be read, or when a block fails
        ///   its checksum: that block is then dropped from the record (it will be fetched again).
        func read(_ range: Range<Int64>) async throws -> [UInt8] {
            let fd = self.fd, path = dataPath
            let (sums, length) = lock.withLock { g in (g.record.sums ?? [:], g.record.length) }
            // Widen to the whole blocks that have a checksum, so each can be checked.
            let size = AudioDiskCache.blockSize
            let firstBlock = range.lowerBound / size, lastBlock = (range.upperBound - 1) / size
            let lower = sums[String(firstBlock)] != nil ? firstBlock * size : range.lowerBound
            let upper = sums[String(lastBlock)] != nil ? min((lastBlock + 1) * size, length ?? Int64.max) : range.upperBound
            let widened = lower..<max(upper, range.upperBound)
            let (bytes, bad) = try await cache.run { () throws -> ([UInt8], Int64?) in
                var bytes = [UInt8](repeating: 0, count: Int(widened.count))
                let done = try bytes.withUnsafeMutableBytes { (buffer: UnsafeMutableRawBufferPointer) throws in
                    do throws(SystemError) { return try fd.readAll(into: buffer, at: widened.lowerBound) } catch {
                        throw AudioDiskCacheError(path: path, error)
                    }
                }
                guard done == bytes.count else {
                    throw AudioDiskCacheError(path: path, message: "the data file ends at byte \(widened.lowerBound + Int64(done)), before the \(bytes.count) bytes its record lists at \(widened.lowerBound)")
                }
                for block in firstBlock...lastBlock {
                    guard let sum = sums[String(block)] else { continue }
                    let start = Int(block * size - widened.lowerBound)
                    let end = min(start + Int(size), bytes.count)
                    guard start >= 0, end > start else { continue }
                    let actual = bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[start..<end])) }
                    if actual != sum { return (bytes, block) }
                }
                return (bytes, nil)
            }
            if let bad {
                try await drop(block: bad)
                let start = bad * size
                throw AudioDiskCacheError(path: path, message: "block \(bad) (bytes \(start)..<\(start + size)) fails its checksum; it was dropped from the cache and will be fetched again")
            }
            let from = Int(range.lowerBound - widened.lowerBound)
            return Array(bytes[from..<(from + Int(range.count))])
        }

        /// Forgets block `block`: its bytes are no longer held, nor its checksum.
        private func drop(block: Int64) async throws {
            let size = AudioDiskCache.blockSize
            let cut = [block * size, (block + 1) * size]
            func without(_ ranges: [[Int64]]) -> [[Int64]] {
                ranges.flatMap { range -> [[Int64]] in
                    guard range[0] < cut[1], cut[0] < range[1] else { return [range] }
                    return [[range[0], cut[0]], [cut[1], range[1]]].filter { $0[1] > $0[0] }
                }
            }
            let updated = lock.withLock { g -> Record in
                g.record.ranges = without(g.record.ranges)
                g.record.sums?[String(block)] = nil
                g.unsynced = without(g.unsynced)
                g.unsyncedBytes = g.unsynced.reduce(0) { $0 + $1[1] - $1[0] }
                return g.record
            }
            let name = self.name, cache = self.cache
            try await cache.run { try cache.writeRecord(updated, name: name) }
        }

        /// Writes bytes of the resource at `offset`; every ``AudioDiskCache/commitInterval``
        /// bytes they are flushed and recorded.
        func write(_ bytes: [UInt8], at offset: Int64) async throws {
            guard !bytes.isEmpty else { return }
            let fd = self.fd, path = dataPath
            try await cache.run {
                var written = 0
                try bytes.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) throws in
                    do throws(SystemError) { try fd.writeAll(buffer, at: offset, written: &written) } catch {
                        throw AudioDiskCacheError(path: path, error, at: offset + Int64(written))
                    }
                }
            }
            let due = lock.withLock { g -> Bool in
                g.unsynced = Self.merged(g.unsynced + [[offset, offset + Int64(bytes.count)]])
                g.unsyncedBytes += Int64(bytes.count)
                return g.unsyncedBytes >= cache.commitInterval
            }
            if due { try await commit() }
        }

        /// Flushes the written bytes to disk, then records them.
        func commit() async throws {
            let (adding, updated) = lock.withLock { g -> ([[Int64]], Record) in
                var next = g.record
                next.ranges = Self.merged(g.record.ranges + g.unsynced)
                next.lastUsed = Date().timeIntervalSince1970
                return (g.unsynced, next)
            }
            let fd = self.fd, name = self.name, cache = self.cache
            let sums = try await cache.run { () throws -> [String: UInt32] in
                // The bytes reach the disk before the record claims them.
                if !adding.isEmpty { _ = try? valueOrErrno("fdatasync") { fdatasync(fd.rawValue) } }
                var record = updated
                record.sums = Self.sums(of: record, reading: fd)
                try cache.writeRecord(record, name: name)
                return record.sums ?? [:]
            }
            lock.withLock { g in
                g.record.ranges = Self.merged(g.record.ranges + adding)
                g.record.lastUsed = updated.lastUsed
                // Blocks dropped meanwhile keep no checksum.
                g.record.sums = sums.filter { key, _ in
                    guard let block = Int64(key) else { return false }
                    let start = block * AudioDiskCache.blockSize
                    return g.record.ranges.contains { $0[0] <= start && start < $0[1] }
                }
                let held = g.record.ranges
                g.unsynced = g.unsynced.filter { range in !held.contains { $0[0] <= range[0] && range[1] <= $0[1] } }
                g.unsyncedBytes = g.unsynced.reduce(0) { $0 + $1[1] - $1[0] }
            }
        }

        /// The record's checksums, with one added for each whole block its ranges now hold (the
        /// last block is whole when it reaches the resource's end), read back from the data file.
        static func sums(of record: Record, reading fd: FileDescriptor) -> [String: UInt32] {
            var sums = record.sums ?? [:]
            let size = AudioDiskCache.blockSize
            var block = [UInt8](repeating: 0, count: Int(size))
            for range in record.ranges {
                var index = (range[0] + size - 1) / size
                while true {
                    let start = index * size
                    let end = min(start + size, record.length ?? Int64.max)
                    guard end > start, end <= range[1], end - start == size || end == record.length else { break }
                    if sums[String(index)] == nil {
                        let count = Int(end - start)
                        let read = block.withUnsafeMutableBytes { buffer -> Int? in
                            try? fd.readAll(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]), at: start)
                        }
                        if read == count { sums[String(index)] = block.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[0..<count])) } }
                    }
                    index += 1
                }
            }
            return sums
        }

        static func merged(_ ranges: [[Int64]]) -> [[Int64]] {
            var out: [[Int64]] = []
            for range in ranges.filter({ $0[1] > $0[0] }).sorted(by: { $0[0] < $1[0] }) {
                if let last = out.last, range[0] <= last[1] {
                    out[out.count - 1][1] = max(last[1], range[1])
                } else {
                    out.append(range)
                }
            }
            return out
        }
    }
}

/// A failure of the disk cache's files: which file, where, and the system's error.
public struct AudioDiskCacheError: Error, CustomStringConvertible, Sendable {
    /// The file.
    public var path: String
    /// The byte offset in it, when the failure was at one.
    public var byteOffset: Int64?
    /// The system call that failed, if one did.
    public var underlying: SystemError?
    /// What went wrong, in words.
    public var message: String

    init(path: String, _ error: SystemError, at offset: Int64? = nil) {
        self.path = path
        byteOffset = offset
        underlying = error
        message = error.isNoSpace ? "the disk is full (\(error))" : "\(error)"
    }

    init(path: String, message: String) {
        self.path = path
        self.message = message
    }

    public var description: String { "cache file \(path)\(byteOffset.map { " at byte \($0)" } ?? ""): \(message)" }
}
