extension String {
    /// The text of a C function's message buffer: the bytes before the first NUL, as UTF-8
    /// (invalid sequences repaired).
    package init(nulTerminated characters: [CChar]) {
        self.init(decoding: characters.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
