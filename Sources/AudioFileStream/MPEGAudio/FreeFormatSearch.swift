/// What ``MPEGHeader/measureFreeFormat(_:at:_:)`` keeps between calls.
struct FreeFormatSearch {
    /// Where a search that needed more bytes stopped, so the next call resumes there instead of
    /// starting again (fed a byte at a time, restarting would make it quadratic). `origin` is the
    /// absolute offset of the header searched for, `key` its four bytes, `resume` the absolute offset
    /// of the first candidate not yet decided.
    var pending: (origin: Int64, key: UInt32, resume: Int64)?
    /// New searches still allowed. Each looks up to 8 KiB ahead, so junk full of sync bytes that
    /// look like free-format headers would cost that much per byte; real free-format streams are
    /// found by their first few candidates.
    var triesLeft = 64
}
