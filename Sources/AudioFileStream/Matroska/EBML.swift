import BufferQueue

/// EBML (RFC 8794), the binary format Matroska and WebM are written in: elements of an ID, a
/// size and a body, the IDs and sizes as variable-length integers whose first byte's leading
/// zeros say how many bytes follow.
enum EBML {
    /// The Matroska element IDs this library reads (RFC 9559), with their marker bits.
    enum ID {
        static let header: UInt32 = 0x1A45_DFA3, docType: UInt32 = 0x4282
        static let segment: UInt32 = 0x1853_8067, seekHead: UInt32 = 0x114D_9B74, info: UInt32 = 0x1549_A966
        static let tracks: UInt32 = 0x1654_AE6B, cues: UInt32 = 0x1C53_BB6B, chapters: UInt32 = 0x1043_A770
        static let tags: UInt32 = 0x1254_C367, attachments: UInt32 = 0x1941_A469, cluster: UInt32 = 0x1F43_B675
        static let void: UInt32 = 0xEC, crc32: UInt32 = 0xBF
        // Info
        static let timestampScale: UInt32 = 0x2A_D7B1, duration: UInt32 = 0x4489, title: UInt32 = 0x7BA9
        // Tracks
        static let trackEntry: UInt32 = 0xAE, trackNumber: UInt32 = 0xD7, trackUID: UInt32 = 0x73C5, trackType: UInt32 = 0x83
        static let codecID: UInt32 = 0x86, codecPrivate: UInt32 = 0x63A2, codecDelay: UInt32 = 0x56AA, seekPreRoll: UInt32 = 0x56BB
        static let flagEnabled: UInt32 = 0xB9, audio: UInt32 = 0xE1, samplingFrequency: UInt32 = 0xB5
        static let outputSamplingFrequency: UInt32 = 0x78B5, channels: UInt32 = 0x9F, bitDepth: UInt32 = 0x6264
        static let contentEncodings: UInt32 = 0x6D80, contentEncoding: UInt32 = 0x6240, contentCompression: UInt32 = 0x5034
        static let contentEncryption: UInt32 = 0x5035, contentCompAlgo: UInt32 = 0x4254, contentCompSettings: UInt32 = 0x4255
        // Clusters
        static let timestamp: UInt32 = 0xE7, simpleBlock: UInt32 = 0xA3, blockGroup: UInt32 = 0xA0, block: UInt32 = 0xA1
        static let discardPadding: UInt32 = 0x75A2
        // Cues
        static let cuePoint: UInt32 = 0xBB, cueTime: UInt32 = 0xB3, cueTrackPositions: UInt32 = 0xB7, cueTrack: UInt32 = 0xF7
        static let cueClusterPosition: UInt32 = 0xF1
        // Tags
        static let tag: UInt32 = 0x7373, targets: UInt32 = 0x63C0, targetTypeValue: UInt32 = 0x68CA, tagTrackUID: UInt32 = 0x63C5
        static let simpleTag: UInt32 = 0x67C8, tagName: UInt32 = 0x45A3, tagString: UInt32 = 0x4487
        // Chapters
        static let editionEntry: UInt32 = 0x45B9, chapterAtom: UInt32 = 0xB6, chapterTimeStart: UInt32 = 0x91
        static let chapterFlagHidden: UInt32 = 0x98, chapterDisplay: UInt32 = 0x80, chapString: UInt32 = 0x85
    }

    /// An element's header: its ID, the size of its body (nil: unknown, a live stream's segment or
    /// cluster) and the header's own length.
    struct Header: Equatable {
        var id: UInt32
        var size: Int64?
        var length: Int
    }

    /// The length of a variable-length integer from its first byte (0: invalid, no marker bit in it).
    @inline(__always) static func vintLength(_ first: UInt8) -> Int { first == 0 ? 0 : first.leadingZeroBitCount + 1 }

    enum Read<T> {
        case value(T)
        case needMore(Int)
        case invalid(String)
    }

    /// Reads an element header `at` bytes ahead from `byte`, of which `count` are available.
    static func header(at start: Int, count: Int, _ byte: (Int) -> UInt8) -> Read<Header> {
        guard start < count else { return .needMore(start + 1) }
        let idLength = vintLength(byte(start))
        guard idLength >= 1, idLength <= 4 else {
            return .invalid("an element ID starting with byte 0x\(String(byte(start), radix: 16)) is not a valid EBML ID")
        }
        guard start + idLength < count else { return .needMore(start + idLength + 1) }
        var id: UInt32 = 0
        for k in 0..<idLength { id = id << 8 | UInt32(byte(start + k)) }
        let first = byte(start + idLength)
        let sizeLength = vintLength(first)
        guard sizeLength >= 1, sizeLength <= 8 else { return .invalid("the element 0x\(String(id, radix: 16)) has an invalid size field") }
        guard start + idLength + sizeLength <= count else { return .needMore(start + idLength + sizeLength) }
        var value = UInt64(first) & (0xFF >> UInt64(sizeLength))
        var allOnes = value == (0xFF >> UInt64(sizeLength))
        for k in 1..<sizeLength {
            let b = byte(start + idLength + k)
            value = value << 8 | UInt64(b)
            allOnes = allOnes && b == 0xFF
        }
        guard value <= UInt64(Int64.max / 2) || allOnes else {
            return .invalid("the element 0x\(String(id, radix: 16)) states a size of \(value) bytes")
        }
        return .value(Header(id: id, size: allOnes ? nil : Int64(value), length: idLength + sizeLength))
    }

    /// A variable-length integer with its marker bit removed (a block's track number, a lace
    /// size): the value and its length.
    static func vint(at start: Int, count: Int, _ byte: (Int) -> UInt8) -> (value: Int64, length: Int, allOnes: Bool)? {
        guard start < count else { return nil }
        let length = vintLength(byte(start))
        guard length >= 1, length <= 8, start + length <= count else { return nil }
        var value = Int64(byte(start)) & (0xFF >> Int64(length))
        var allOnes = value == (0xFF >> Int64(length))
        for k in 1..<length {
            let b = byte(start + k)
            value = value << 8 | Int64(b)
            allOnes = allOnes && b == 0xFF
        }
        return (value, length, allOnes)
    }

    /// The elements of a master element's body held in `bytes[range]`: each one's header and body range.
    /// Throws on a header that does not fit; an element cut short by the end is cut to it.
    static func children(of bytes: [UInt8], _ range: Range<Int>, base: Int64) throws -> [(id: UInt32, body: Range<Int>)] {
        var out: [(id: UInt32, body: Range<Int>)] = []
        var at = range.lowerBound
        while at < range.upperBound {
            switch header(at: at, count: range.upperBound, { bytes[$0] }) {
            case .value(let h):
                let bodyStart = at + h.length
                let size = h.size.map { Int(clamping: $0) } ?? (range.upperBound - bodyStart)
                let end = size > range.upperBound - bodyStart ? range.upperBound : bodyStart + size
                out.append((h.id, bodyStart..<end))
                at = end
            case .needMore:
                return out   // trailing bytes too short for a header: ignored
            case .invalid(let why):
                throw AudioFileStreamError(.invalidData, .matroska, base + Int64(at), why)
            }
        }
        return out
    }

    /// An unsigned integer element's value (0 to 8 bytes, big-endian).
    static func uint(_ bytes: [UInt8], _ range: Range<Int>) -> UInt64 {
        bytes[range.prefix(8)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    }

    /// A signed integer element's value.
    static func int(_ bytes: [UInt8], _ range: Range<Int>) -> Int64 {
        let body = range.prefix(8)
        guard !body.isEmpty else { return 0 }
        let raw = uint(bytes, body)
        let shift = UInt64(64 - 8 * body.count)
        return Int64(bitPattern: raw << shift) >> Int64(shift)
    }

    /// A float element's value (4 or 8 bytes; 0 for an empty body).
    static func float(_ bytes: [UInt8], _ range: Range<Int>) -> Double? {
        switch range.count {
        case 0: return 0
        case 4: return Double(Float(bitPattern: UInt32(truncatingIfNeeded: uint(bytes, range))))
        case 8: return Double(bitPattern: uint(bytes, range))
        default: return nil
        }
    }

    /// A string element's value (UTF-8; a terminating zero and what follows dropped).
    static func string(_ bytes: [UInt8], _ range: Range<Int>) -> String {
        let body = bytes[range]
        let end = body.firstIndex(of: 0) ?? body.endIndex
        return String(decoding: body[body.startIndex..<end], as: UTF8.self)
    }
}
