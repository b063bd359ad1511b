/// Separates SHOUTcast/Icecast ("ICY") in-band metadata from the audio bytes of a stream.
///
/// A server that was sent `Icy-MetaData: 1` and answered with `icy-metaint: N` inserts a metadata
/// block after every N audio bytes: one length byte L, then L × 16 bytes of text such as
/// `StreamTitle='Artist - Song';StreamUrl='…';`, padded with NULs. The filter takes the bytes in any
/// chunking and hands back only audio, so metadata never reaches a parser or decoder.
public struct ICYMetadataFilter: Sendable {
    /// Audio bytes between metadata blocks (`icy-metaint`).
    public let interval: Int
    private var audioLeft: Int
    private var lengthPending = false
    private var block: [UInt8] = []
    private var blockLeft = 0
    /// Audio bytes passed through so far.
    public private(set) var audioBytes: Int64 = 0
    /// Metadata blocks seen so far (empty ones included).
    public private(set) var blocks = 0

    /// - Parameter interval: the server's `icy-metaint` (must be positive).
    public init(interval: Int) {
        self.interval = max(interval, 1)
        audioLeft = self.interval
    }

    /// One metadata update: the fields of a non-empty block, e.g. `["StreamTitle": "…"]`.
    public struct Update: Hashable, Sendable {
        /// Every `Key='value'` of the block.
        public var fields: [String: String]
        /// Byte offset in the audio (metadata removed) where the update was inserted.
        public var audioOffset: Int64
        /// `StreamTitle`, usually "Artist - Title".
        public var streamTitle: String? { fields["StreamTitle"] }
    }

    /// Filters `bytes`: appends their audio to `audio` and returns the metadata updates they completed.
    public mutating func process(_ bytes: UnsafeRawBufferPointer, audio: inout [UInt8]) -> [Update] {
        var updates: [Update] = []
        var index = 0
        while index < bytes.count {
            if blockLeft > 0 {
                let take = min(blockLeft, bytes.count - index)
                block.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index..<(index + take)]))
                blockLeft -= take
                index += take
                if blockLeft == 0 {
                    if let update = Self.parse(block, at: audioBytes) { updates.append(update) }
                    block.removeAll(keepingCapacity: true)
                    audioLeft = interval
                }
            } else if lengthPending {
                let length = Int(bytes[index]) * 16
                index += 1
                lengthPending = false
                blocks += 1
                if length == 0 { audioLeft = interval } else { blockLeft = length }
            } else {
                let take = min(audioLeft, bytes.count - index)
                audio.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index..<(index + take)]))
                audioLeft -= take
                audioBytes += Int64(take)
                index += take
                if audioLeft == 0 { lengthPending = true }
            }
        }
        return updates
    }

    /// Filters an array of bytes.
    public mutating func process(_ bytes: [UInt8], audio: inout [UInt8]) -> [Update] {
        bytes.withUnsafeBytes { process($0, audio: &audio) }
    }

    /// Parses `Key='value';Key2='value';` (values may contain quotes and semicolons; a field ends
    /// at `';` followed by a key or the end). Invalid UTF-8 is read as Latin-1, as servers send both.
    static func parse(_ block: [UInt8], at offset: Int64) -> Update? {
        let end = block.firstIndex(of: 0) ?? block.count
        let bytes = Array(block[..<end])
        guard !bytes.isEmpty else { return nil }
        let text = String(validating: bytes, as: UTF8.self) ?? String(bytes.map { Character(Unicode.Scalar($0)) })
        var fields: [String: String] = [:]
        var rest = Substring(text)
        while let equals = rest.firstIndex(of: "=") {
            let key = rest[..<equals].trimmingCharacters(in: " ;")
            var value = rest[rest.index(after: equals)...]
            guard value.first == "'" else { break }
            value = value.dropFirst()
            // The value ends at the last "';" before the next "Key='" or at the end.
            var close = value.endIndex
            var search = value.startIndex
            while let quote = value[search...].firstIndex(of: "'") {
                let after = value[value.index(after: quote)...]
                if after.isEmpty || (after.first == ";" && (after.dropFirst().isEmpty || Self.startsField(after.dropFirst()))) {
                    close = quote
                    break
                }
                search = value.index(after: quote)
            }
            if !key.isEmpty { fields[String(key)] = String(value[..<close]) }
            guard close < value.endIndex else { break }
            rest = value[value.index(after: close)...].drop(while: { $0 == ";" })
        }
        return fields.isEmpty ? nil : Update(fields: fields, audioOffset: offset)
    }

    private static func startsField(_ text: Substring) -> Bool {
        guard let equals = text.firstIndex(of: "=") else { return false }
        let key = text[..<equals]
        return !key.isEmpty && key.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" } && text[text.index(after: equals)...].first == "'"
    }
}

private extension Substring {
    func trimmingCharacters(in set: String) -> Substring {
        var s = self
        while let first = s.first, set.contains(first) { s = s.dropFirst() }
        while let last = s.last, set.contains(last) { s = s.dropLast() }
        return s
    }
}
