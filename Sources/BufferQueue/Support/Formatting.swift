#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `String(format:)` for numbers (`%d`, `%.3f`, `%02x` …) through the C library's `vsnprintf`:
/// for the modules and programs that must not load Foundation (and its ICU) to print a number.
/// `%@` is not supported; interpolate strings instead.
package func formatted(_ format: String, _ arguments: CVarArg...) -> String {
    var size = 128
    while true {
        var buffer = [CChar](repeating: 0, count: size)
        let needed = withVaList(arguments) { list in
            buffer.withUnsafeMutableBufferPointer { vsnprintf($0.baseAddress, size, format, list) }
        }
        guard needed >= 0 else { return format }
        if Int(needed) < size {
            return String(decoding: buffer.prefix(Int(needed)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        size = Int(needed) + 1
    }
}

extension StringProtocol {
    /// The text without the spaces, tabs and line breaks at either end (Foundation's
    /// `trimmingCharacters(in: .whitespaces…)` without Foundation).
    package var trimmingWhitespace: String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[first...last])
    }
}
