import BufferQueue

/// One MPEG-1/2/2.5 Layer I/II/III frame header.
struct MPEGHeader: Equatable {
    enum Version: Int { case mpeg1 = 3, mpeg2 = 2, mpeg25 = 0 }
    let version: Version
    let layer: Int
    let hasCRC: Bool
    let bitRateIndex: Int
    /// Bits per second. For free format (bit-rate index 0): 0 until the frame size is measured,
    /// then what that size means (see ``withFreeFormatBase(_:)``).
    private(set) var bitRate: Int
    /// A free-format stream's frame size without the padding slot, header included; nil until measured.
    private(set) var freeFormatBase: Int?
    let sampleRate: Int
    let padding: Bool
    let channelMode: Int   // 3 = mono

    static let bitRates: [[Int]] = [
        [0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448],   // V1 L1
        [0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384],      // V1 L2
        [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320],       // V1 L3
        [0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256],      // V2 L1
        [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],           // V2 L2, L3
    ]

    /// Parses four bytes; nil when they are not a valid header (reserved values included).
    init?(_ b0: UInt8, _ b1: UInt8, _ b2: UInt8, _ b3: UInt8) {
        guard b0 == 0xFF, b1 & 0xE0 == 0xE0 else { return nil }
        guard let version = Version(rawValue: Int(b1 >> 3) & 3) else { return nil }
        let layerBits = Int(b1 >> 1) & 3
        guard layerBits != 0 else { return nil }
        let layer = 4 - layerBits
        let bitRateIndex = Int(b2 >> 4), rateIndex = Int(b2 >> 2) & 3
        guard bitRateIndex != 15, rateIndex != 3, b3 & 3 != 2 else { return nil }
        self.version = version
        self.layer = layer
        hasCRC = b1 & 1 == 0
        self.bitRateIndex = bitRateIndex
        let table = version == .mpeg1 ? layer - 1 : (layer == 1 ? 3 : 4)
        bitRate = Self.bitRates[table][bitRateIndex] * 1000
        let rates = [44100, 48000, 32000]
        sampleRate = rates[rateIndex] / (version == .mpeg1 ? 1 : version == .mpeg2 ? 2 : 4)
        padding = b2 & 2 != 0
        channelMode = Int(b3 >> 6)
    }

    var channels: Int { channelMode == 3 ? 1 : 2 }
    var samplesPerFrame: Int { layer == 1 ? 384 : (layer == 3 && version != .mpeg1) ? 576 : 1152 }
    var isFreeFormat: Bool { bitRateIndex == 0 }
    /// The padding slot: four bytes in Layer I, one in Layers II and III.
    var paddingBytes: Int { padding ? (layer == 1 ? 4 : 1) : 0 }

    /// Bytes in the frame, header included. For free format, from the measured size (0 before).
    var frameLength: Int {
        if isFreeFormat { return freeFormatBase.map { $0 + paddingBytes } ?? 0 }
        if layer == 1 { return (12 * bitRate / sampleRate + (padding ? 1 : 0)) * 4 }
        let factor = (layer == 3 && version != .mpeg1) ? 72 : 144
        return factor * bitRate / sampleRate + (padding ? 1 : 0)
    }

    /// This header with a free-format stream's measured frame size (without the padding slot),
    /// and the bit rate that size means.
    func withFreeFormatBase(_ base: Int) -> MPEGHeader {
        var copy = self
        copy.freeFormatBase = base
        let bytesPerBitPerSecond = layer == 1 ? 48 : (layer == 3 && version != .mpeg1) ? 72 : 144
        copy.bitRate = base * sampleRate / bytesPerBitPerSecond
        return copy
    }

    /// The largest free-format frame looked for (Layer III at 640 kbit/s and 32 kHz is 2 880 bytes).
    static let maximumFreeFormatFrame = 8192

    var formatID: AudioFormatID { layer == 3 ? .mpegLayer3 : layer == 2 ? .mpegLayer2 : .mpegLayer1 }

    /// Whether two headers belong to the same stream (what may not change between frames).
    func sameStream(_ other: MPEGHeader) -> Bool {
        version == other.version && layer == other.layer && sampleRate == other.sampleRate && isFreeFormat == other.isFreeFormat
    }

    /// Where a Xing/Info tag sits in a Layer III frame: after the header, CRC and side information.
    var xingOffset: Int {
        let side = version == .mpeg1 ? (channels == 1 ? 17 : 32) : (channels == 1 ? 9 : 17)
        return 4 + (hasCRC ? 2 : 0) + side
    }

    /// Where a Xing/Info tag may start: after the side information, and for a frame that says it
    /// has a CRC also where it would be without one (LAME 3.93 set the protection bit on its Info
    /// frame but wrote the tag at the unprotected offset).
    var xingOffsets: [Int] { hasCRC ? [xingOffset, xingOffset - 2] : [xingOffset] }

    var format: AudioStreamDescription {
        AudioStreamDescription(sampleRate: Double(sampleRate), formatID: formatID, bytesPerPacket: 0,
                               framesPerPacket: samplesPerFrame, bytesPerFrame: 0, channelsPerFrame: channels, bitsPerChannel: 0)
    }

    var summary: String {
        let name = version == .mpeg1 ? "MPEG-1" : version == .mpeg2 ? "MPEG-2" : "MPEG-2.5"
        return "\(name) Layer \(layer == 1 ? "I" : layer == 2 ? "II" : "III") \(sampleRate) Hz"
    }

    /// Reads a header `offset` bytes ahead in `input`, if 4 bytes are there.
    static func at(_ input: ByteInput, _ offset: Int) -> MPEGHeader? {
        guard offset + 4 <= input.available else { return nil }
        return MPEGHeader(input.u8(offset), input.u8(offset + 1), input.u8(offset + 2), input.u8(offset + 3))
    }
}

/// A decision about bytes ahead: made, or waiting until `needMore`'s count of bytes (from the read
/// position) has arrived; fewer cannot change the answer.
enum Confirmation<T> { case yes(T), no, needMore(Int) }

extension MPEGHeader {
    /// Whether a frame starting `offset` bytes ahead is real: the next frame's header follows and
    /// belongs to the same stream, or the frame carries a Xing/Info/VBRI tag. With `lastFrameMayEnd`,
    /// a frame ending exactly at the end of the stream is accepted too.
    static func confirm(_ input: ByteInput, at offset: Int, matching lock: MPEGHeader?, lastFrameMayEnd: Bool) -> Confirmation<MPEGHeader> {
        let header: MPEGHeader
        switch confirmHeader(input, at: offset, lock: lock) {
        case .yes(let found): header = found
        case .no: return .no
        case .needMore(let count): return .needMore(count)
        }
        let next = offset + header.frameLength
        if next + 4 <= input.available {
            if let following = at(input, next), following.sameStream(header) { return .yes(header) }
            if tagFollows(input, at: next) { return .yes(header) }   // a tag follows the last frame
        }
        if header.layer == 3, next <= input.available, MPEGTags.hasTag(input, frameAt: offset, header) { return .yes(header) }
        if next + 4 > input.available {
            // A layer III frame with a tag is confirmed as soon as it is whole.
            if !input.atEnd { return .needMore(header.layer == 3 && next > input.available ? next : next + 4) }
            if lastFrameMayEnd && next == input.available { return .yes(header) }
        }
        return .no
    }
}

extension MPEGHeader {
    /// Frames that must agree before bytes with no container are taken for MPEG audio.
    static let framesToAgree = 3

    /// Whether a stream of MPEG audio starts `offset` bytes ahead (the sniffer's test, stricter
    /// than ``confirm(_:at:matching:lastFrameMayEnd:)``'s): ``framesToAgree`` frames in a row whose
    /// headers agree in version, layer, sample rate and mono/stereo; fewer only when the stream
    /// ends after two agreeing frames (right after one, or inside the second: a cut file), when a
    /// tag (ID3v1, APE, Lyrics3, ID3v2) follows a frame, or when the first frame carries a
    /// Xing/Info/VBRI tag. So a one-frame file is MP3 when tagged; a lone frame header with
    /// nothing after it is not (ffmpeg and mpg123 play nothing of it either).
    ///
    /// With `followsTag` (the frame comes right after an ID3v2 tag at the stream's start), a lone
    /// frame that ends exactly at the end of the stream is taken too: the tag already said this
    /// is an MPEG audio file (ISO's one-frame conformance vectors are such files).
    static func confirmStream(_ input: ByteInput, at offset: Int, followsTag: Bool = false) -> Confirmation<MPEGHeader> {
        let first: MPEGHeader
        switch confirmHeader(input, at: offset, lock: nil) {
        case .yes(let header): first = header
        case .no: return .no
        case .needMore(let count): return .needMore(count)
        }
        if first.layer == 3, offset + first.frameLength <= input.available, MPEGTags.hasTag(input, frameAt: offset, first) { return .yes(first) }
        var header = first, frameStart = offset, agreeing = 1
        while true {
            let next = frameStart + header.frameLength
            if next + 4 > input.available {
                if !input.atEnd { return .needMore(next + 4) }
                // The stream ends after agreeing frames (right after one, or inside the last: a cut
                // file). A lone untagged frame is not taken: ffmpeg and mpg123 play none either.
                return agreeing > 1 || (followsTag && agreeing == 1 && next == input.available) ? .yes(first) : .no
            }
            if Self.tagFollows(input, at: next) { return .yes(first) }
            // Bytes that may still become a tag's marker or an APE item's head: decide on more.
            if !input.atEnd, Self.tagUndecided(input, at: next) { return .needMore(input.available + 1) }
            guard let following = Self.at(input, next), following.sameStream(first), following.isMono == first.isMono else {
                // An APE tag without a header is known by its footer at the stream's end: wait
                // for the end when what follows is its first item (and the end is near).
                if !input.atEnd, Self.apeItem(input, at: next) == true { return .needMore(next + Self.apeTagSearch) }
                return .no
            }
            agreeing += 1
            if agreeing >= framesToAgree { return .yes(first) }
            header = first.isFreeFormat ? following.withFreeFormatBase(first.freeFormatBase ?? 0) : following
            frameStart = next
        }
    }

    /// A header at `offset`, its free-format size measured: what ``confirm(_:at:matching:lastFrameMayEnd:)`` starts with.
    private static func confirmHeader(_ input: ByteInput, at offset: Int, lock: MPEGHeader?) -> Confirmation<MPEGHeader> {
        guard offset + 4 <= input.available else { return input.atEnd ? .no : .needMore(offset + 4) }
        guard let header = at(input, offset) else { return .no }
        if let lock, !lock.sameStream(header) { return .no }
        guard header.isFreeFormat else { return .yes(header) }
        if let base = lock?.freeFormatBase { return .yes(header.withFreeFormatBase(base)) }
        switch measureFreeFormat(input, at: offset, header) {
        case .yes(let base): return .yes(header.withFreeFormatBase(base))
        case .no: return .no
        case .needMore(let count): return .needMore(count)
        }
    }

    /// A tag that may follow the last frame: ID3v1 (`TAG`), APEv2 (`APETAGEX`), Lyrics3
    /// (`LYRICSBEGIN`) or an appended ID3v2 tag (`ID3`).
    static func tagFollows(_ input: ByteInput, at offset: Int) -> Bool {
        input.matches("TAG", at: offset) || input.matches("APETAGEX", at: offset) || input.matches("LYRICSBEGIN", at: offset)
            || input.matches("ID3", at: offset) || apeTagWithoutHeader(input, startsAt: offset)
    }

    /// Whether the bytes at hand from `offset` are too few to tell whether a tag starts there: a
    /// part of a tag's marker, or of an APE item's head.
    static func tagUndecided(_ input: ByteInput, at offset: Int) -> Bool {
        let have = input.available - offset
        for marker in ["TAG", "APETAGEX", "LYRICSBEGIN", "ID3"] where have < marker.utf8.count {
            if zip(0..<have, marker.utf8).allSatisfy({ input.u8(offset + $0) == $1 }) { return true }
        }
        return apeItem(input, at: offset) == nil
    }

    /// How far past a frame the end of the stream is waited for when an APE item may follow it.
    static let apeTagSearch = 64 << 10

    /// Whether an APE tag item starts at `offset`: a value size below 16 MiB, flags below 8, then
    /// a printable key of 2 to 255 characters ended by a zero byte. nil while the bytes at hand
    /// fit one but are too few to tell.
    static func apeItem(_ input: ByteInput, at offset: Int) -> Bool? {
        let have = input.available - offset
        for index in 0..<max(min(have, 8 + 256), 0) {
            let byte = input.u8(offset + index)
            switch index {
            case 3, 5, 6, 7: if byte != 0 { return false }
            case 4: if byte >= 8 { return false }
            case 8...:
                if byte == 0 { return index >= 10 }
                if !(0x20...0x7E).contains(byte) { return false }
            default: break
            }
        }
        return have >= 8 + 256 ? false : nil
    }

    /// Whether an APE tag written without a header (items, then its footer, as APEv1 and most
    /// APEv2 writers do) fills the stream from `offset` to its end, or to an ID3v1 tag there.
    /// Known only once the whole rest of the stream is at hand.
    static func apeTagWithoutHeader(_ input: ByteInput, startsAt offset: Int) -> Bool {
        guard input.atEnd else { return false }
        var end = input.available
        if end - 128 >= offset, input.matches("TAG", at: end - 128) { end -= 128 }
        let footer = end - 32
        guard footer >= offset, input.matches("APETAGEX", at: footer) else { return false }
        let size = Int(input.u32le(footer + 12))   // items and footer, not the header
        return end - size == offset
    }

    var isMono: Bool { channelMode == 3 }
}

extension MPEGHeader {
    /// A free-format frame's size without its padding slot: the distance to the next header of the
    /// same free-format stream, confirmed by a third header (or the end of the stream) where that
    /// size says the next frame ends. A stream gets 64 new searches (``FreeFormatSearch/triesLeft``);
    /// after that, free-format candidates are refused.
    static func measureFreeFormat(_ input: ByteInput, at offset: Int, _ header: MPEGHeader) -> Confirmation<Int> {
        let first = offset + header.xingOffset   // no frame is shorter than its header and side information
        let origin = input.position + Int64(offset), key = input.u32be(offset)
        var candidate = first
        if let scan = input.freeFormatSearch.pending, scan.origin == origin, scan.key == key {
            // Candidates before it were decided, and more bytes cannot change those decisions.
            candidate = max(first, Int(scan.resume - input.position))
        } else {
            guard input.freeFormatSearch.triesLeft > 0 else { return .no }
            input.freeFormatSearch.triesLeft -= 1
        }
        let last = offset + maximumFreeFormatFrame
        while candidate <= last {
            guard candidate + 4 <= input.available else {
                if input.atEnd { return .no }
                return needMore(at: candidate, count: candidate + 4)
            }
            guard let sync = input.firstIndex(of: 0xFF, from: candidate, to: min(last + 1, input.available - 3)) else {
                // No candidate up to the last one whose four bytes have arrived.
                candidate = max(candidate, min(last + 1, input.available - 3))
                continue
            }
            candidate = sync
            if let second = at(input, candidate), second.sameStream(header) {
                let base = candidate - offset - header.paddingBytes
                let third = candidate + second.withFreeFormatBase(base).frameLength
                if third + 4 <= input.available {
                    if let next = at(input, third), next.sameStream(header) { return .yes(base) }
                } else if input.atEnd {
                    if third == input.available { return .yes(base) }
                } else {
                    return needMore(at: candidate, count: third + 4)
                }
            }
            candidate += 1
        }
        return .no

        func needMore(at candidate: Int, count: Int) -> Confirmation<Int> {
            input.freeFormatSearch.pending = (origin, key, input.position + Int64(candidate))
            return .needMore(count)
        }
    }
}

/// Xing/Info (+LAME) and VBRI headers in the first frame.
enum MPEGTags {
    struct Xing {
        var frames: Int?
        var bytes: Int?
        var toc: [UInt8]?
        var encoderDelay: Int?
        var padding: Int?
        var isInfo: Bool
    }
    struct VBRI {
        var frames: Int
        var bytes: Int
        var toc: [Int]
        var framesPerEntry: Int
    }

    static func hasTag(_ input: ByteInput, frameAt offset: Int, _ header: MPEGHeader) -> Bool {
        header.xingOffsets.contains { input.matches("Xing", at: offset + $0) || input.matches("Info", at: offset + $0) }
            || input.matches("VBRI", at: offset + 36)
    }

    static func xing(_ frame: [UInt8], _ header: MPEGHeader) -> Xing? {
        for offset in header.xingOffsets {
            if let xing = xing(frame, at: offset) { return xing }
        }
        return nil
    }

    private static func xing(_ frame: [UInt8], at offset: Int) -> Xing? {
        var r = FieldReader(frame, from: offset, base: 0, container: .mp3)
        guard let tag = try? r.tag(), tag == "Xing" || tag == "Info", let flags = try? r.u32be() else { return nil }
        var xing = Xing(isInfo: tag == "Info")
        if flags & 1 != 0 { xing.frames = (try? r.u32be()).map(Int.init) }
        if flags & 2 != 0 { xing.bytes = (try? r.u32be()).map(Int.init) }
        if flags & 4 != 0 { xing.toc = try? r.take(100) }
        if flags & 8 != 0 { _ = try? r.u32be() }
        // LAME-style extension: a printable 9-byte encoder string, then delay/padding at +21.
        if r.remaining >= 24, frame[r.offset..<(r.offset + 4)].allSatisfy({ (0x20...0x7E).contains($0) }) {
            let at = r.offset + 21
            let delay = Int(frame[at]) << 4 | Int(frame[at + 1]) >> 4
            let padding = Int(frame[at + 1] & 0x0F) << 8 | Int(frame[at + 2])
            xing.encoderDelay = delay
            xing.padding = padding
        }
        return xing
    }

    static func vbri(_ frame: [UInt8]) -> VBRI? {
        var r = FieldReader(frame, from: 36, base: 0, container: .mp3)
        guard (try? r.tag()) == "VBRI" else { return nil }
        guard let _ = try? r.u16be(), let _ = try? r.u16be(), let _ = try? r.u16be(),
              let bytes = try? r.u32be(), let frames = try? r.u32be(), let entries = try? r.u16be(),
              let scale = try? r.u16be(), let entrySize = try? r.u16be(), let perEntry = try? r.u16be(),
              (1...4).contains(entrySize) else { return nil }
        var toc: [Int] = []
        for _ in 0..<entries {
            var value = 0
            for _ in 0..<entrySize { guard let byte = try? r.u8() else { break }; value = value << 8 | Int(byte) }
            toc.append(value * Int(scale))
        }
        return VBRI(frames: Int(frames), bytes: Int(bytes), toc: toc, framesPerEntry: Int(perEntry))
    }
}

/// The push parser for MPEG audio elementary streams (MP3, MP2, MP1).
final class MPEGAudioParser: ContainerParser, PacketLocating {
    /// Junk the parser skips looking for the next frame before it gives up.
    static let resyncBudget = 64 * 1024
    /// MPEG-1 Layer III decoder delay, added to the LAME encoder delay.
    static let decoderDelay = 529

    private var lock: MPEGHeader?
    private var sawFirstFrame = false
    private var resyncing = false
    private var skippedJunk = 0
    private var xing: MPEGTags.Xing?
    private var vbri: MPEGTags.VBRI?
    private var iTunSMPB: String?
    private var firstAudioOffset: Int64?
    /// Absolute offset of every audio frame seen (the exact seek index).
    private(set) var frameOffsets: [Int64] = []
    private var framesSeen: Int64 = 0
    private var bitRates = Set<Int>()
    private var lastFrameStart: Int64 = 0

    /// Whether the stream began with an ID3v2 tag that the first frame follows directly.
    private let followsTag: Bool

    init(iTunSMPB: String?, followsTag: Bool = false) {
        self.iTunSMPB = iTunSMPB
        self.followsTag = followsTag
    }

    func parse(_ input: ByteInput, _ out: StreamOutput) throws {
        while true {
            if input.skipPending > 0 || out.pauseRequested { return }   // the next decision needs the bytes after the skip
            if resyncing || lock == nil {
                guard try resync(input, out) else { return }
            }
            guard input.available >= 4 else { return }
            if try skipTrailingTag(input, out) { continue }
            guard var header = MPEGHeader.at(input, 0) else {
                resyncing = true
                continue
            }
            if let lock, !lock.sameStream(header) {
                // A new sample rate, layer or free format: a format change only if the next frame confirms it.
                switch MPEGHeader.confirm(input, at: 0, matching: nil, lastFrameMayEnd: true) {
                case .needMore(let count):
                    input.waitFor(count)
                    return
                case .no: resyncing = true; continue
                case .yes(let confirmed):
                    if out.mustDeferChange { out.pauseRequested = true; return }
                    header = confirmed
                    changeFormat(to: header, input, out)
                }
            } else if header.isFreeFormat, let base = lock?.freeFormatBase {
                header = header.withFreeFormatBase(base)
            }
            let length = header.frameLength
            guard length > 4 else { resyncing = true; continue }
            guard input.available >= length else {
                input.waitFor(length)
                return
            }
            let lockNow = lock ?? header
            switch input.dropCutFrame(length, headerBytes: 4, out, .mp3, isHeader: { MPEGHeader.at(input, $0) != nil },
                                      confirms: { MPEGHeader.confirm(input, at: $0, matching: lockNow, lastFrameMayEnd: true) }) {
            case .needMore: return
            case .dropped: continue
            case .whole: break
            }
            if !sawFirstFrame {
                sawFirstFrame = true
                lock = header
                let frame = input.bytes(0, length)
                if header.layer == 3, let tag = MPEGTags.xing(frame, header) {
                    xing = tag
                    input.consume(length)
                    continue
                }
                if header.layer == 3, let tag = MPEGTags.vbri(frame) {
                    vbri = tag
                    input.consume(length)
                    continue
                }
            }
            if !out.isReady { announce(header, input, out) }
            frameOffsets.append(input.position)
            lastFrameStart = input.position
            bitRates.insert(header.bitRate)
            framesSeen += 1
            out.emitPacket(from: input, size: length, frames: header.samplesPerFrame)
        }
    }

    /// Skips ID3v1, APE and appended ID3v2 tags found where a frame should start.
    private func skipTrailingTag(_ input: ByteInput, _ out: StreamOutput) throws -> Bool {
        if input.matches("TAG", at: 0) {
            input.skip(128)
            return true
        }
        if input.available >= 32, input.matches("APETAGEX", at: 0) {
            let size = Int64(input.u32le(12)), flags = input.u32le(20)
            input.skip(flags & 0x2000_0000 != 0 ? 32 + size : 32)   // header: the items follow it
            return true
        }
        if input.available >= 10, input.matches("ID3", at: 0), let size = ID3v2.totalSize(header: input.bytes(0, 10)) {
            input.skip(Int64(size))
            return true
        }
        return false
    }

    /// Searches for the next confirmed frame. Returns false when it needs more bytes.
    private func resync(_ input: ByteInput, _ out: StreamOutput) throws -> Bool {
        var offset = 0
        let budget = lock == nil ? 256 * 1024 : Self.resyncBudget
        while true {
            if skippedJunk + offset > budget {
                let start = input.position - Int64(skippedJunk)
                throw AudioFileStreamError(.noAudio, .mp3, start,
                    "no \(lock == nil ? "MPEG audio frame" : "frame of the \(lock!.summary) stream") in \(skippedJunk + offset) bytes; giving up")
            }
            if offset + 4 > input.available {
                if input.atEnd { break }
                input.consume(offset)
                skippedJunk += offset
                return false
            }
            if input.u8(offset) != 0xFF {   // jump to the next sync byte
                offset = input.firstIndex(of: 0xFF, from: offset, to: input.available - 3) ?? input.available - 3
                continue
            }
            // The first frame meets the sniffer's test; later ones only need to fit the stream.
            let found = lock == nil
                ? MPEGHeader.confirmStream(input, at: offset, followsTag: followsTag && offset + skippedJunk == 0 && framesSeen == 0)
                : MPEGHeader.confirm(input, at: offset, matching: lock, lastFrameMayEnd: true)
            switch found {
            case .needMore(let count):
                input.consume(offset)
                skippedJunk += offset
                input.waitFor(count - offset)
                return false
            case .yes(let header):
                input.consume(offset)
                skippedJunk += offset
                if skippedJunk > 0 && (lock != nil || out.isReady) {
                    out.warn(AudioFileStreamError(.invalidData, .mp3, input.position - Int64(skippedJunk),
                        "skipped \(skippedJunk) bytes that are not MPEG audio frames"))
                }
                skippedJunk = 0
                resyncing = false
                if lock == nil { lock = header }
                return true
            case .no:
                break
            }
            offset += 1
        }
        // End of data while searching.
        input.consume(input.available)
        skippedJunk += offset
        return false
    }

    private func changeFormat(to header: MPEGHeader, _ input: ByteInput, _ out: StreamOutput) {
        lock = header
        out.dataFormat = header.format
        out.formatList = [header.format]
        out.framesPerPacket = header.samplesPerFrame
        out.warn(AudioFileStreamError(.invalidData, .mp3, input.position, "the stream changes to \(header.summary) here"))
        out.announce(.dataFormat)
    }

    private func announce(_ header: MPEGHeader, _ input: ByteInput, _ out: StreamOutput) {
        out.dataFormat = header.format
        out.formatList = [header.format]
        out.dataOffset = input.position
        firstAudioOffset = input.position
        let spf = header.samplesPerFrame
        var packets: Int?
        if let frames = xing?.frames, frames > 0 { packets = frames }
        if let vbri { packets = max(vbri.frames - 1, 0) }
        if let packets { out.audioDataPacketCount = Int64(packets) }
        if let bytes = xing?.bytes ?? vbri?.bytes, let packets, packets > 0 {
            let audioBytes = bytes - (xing != nil || vbri != nil ? header.frameLength : 0)
            if audioBytes > 0 {
                out.audioDataByteCount = Int64(audioBytes)
                out.bitRate = Int(Double(audioBytes) * 8 * Double(header.sampleRate) / Double(packets * spf))
            }
        }
        if out.bitRate == nil { out.bitRate = header.bitRate }
        let maxBitRate = MPEGHeader.bitRates[header.version == .mpeg1 ? header.layer - 1 : (header.layer == 1 ? 3 : 4)].last! * 1000
        out.maximumPacketSize = max((header.layer == 3 && header.version != .mpeg1 ? 72 : 144) * maxBitRate / header.sampleRate + 4,
                                    header.frameLength + 4)
        out.packetTableInfo = packetTableInfo(spf: spf, packets: packets)
        packetCountForSeeking = out.audioDataPacketCount
        audioBytesForSeeking = out.audioDataByteCount
        out.announceReady()
    }

    /// The gapless numbers of a LAME tag (the encoder's delay and padding, plus the decoder's
    /// 529-frame delay; delay and padding 0, as repackagers write, still mean that delay, as
    /// mpg123 applies it), else of an iTunSMPB comment. Priming and remainder that cover all the
    /// coded frames leave 0 valid frames.
    private func packetTableInfo(spf: Int, packets: Int?) -> AudioFilePacketTableInfo? {
        if let xing, let packets, packets > 0, let delay = xing.encoderDelay, let padding = xing.padding {
            let coded = Int64(packets * spf)
            let priming = Int(min(Int64(delay + Self.decoderDelay), coded))
            let remainder = Int(min(Int64(max(padding - Self.decoderDelay, 0)), coded - Int64(priming)))
            let valid = coded - Int64(priming) - Int64(remainder)
            return AudioFilePacketTableInfo(validFrames: valid, primingFrames: priming, remainderFrames: remainder, source: .lameTag,
                note: valid == 0 ? "the LAME tag's delay \(delay) and padding \(padding) cover all \(coded) coded frames" : nil)
        }
        if let text = iTunSMPB, let smpb = parseITunSMPB(text) {
            return AudioFilePacketTableInfo(validFrames: smpb.valid, primingFrames: smpb.priming, remainderFrames: smpb.remainder, source: .iTunSMPB)
        }
        return nil
    }

    func finish(_ input: ByteInput, _ out: StreamOutput) throws {
        input.atEnd = true
        try parse(input, out)
        let leftover = input.available
        if framesSeen == 0 {
            let where_ = input.position
            if lock != nil, leftover > 0 {
                throw AudioFileStreamError(.truncated, .mp3, where_,
                    "the first frame needs \(lock!.frameLength) bytes but the stream ends after \(leftover)")
            }
            throw AudioFileStreamError(.noAudio, .mp3, where_, xing != nil || vbri != nil
                ? "the stream has a \(xing != nil ? "Xing/Info" : "VBRI") header but no audio frame after it"
                : "no confirmed MPEG audio frame in the stream")
        }
        if leftover > 0 {
            out.warn(AudioFileStreamError(.truncated, .mp3, input.position, "the last \(leftover) bytes are an incomplete frame or junk"))
        }
        if positionEstimated, let promised = out.audioDataPacketCount, framesSeen != promised {
            // After a seek to an estimated position the packet numbers are approximate: the count
            // says nothing about damage.
            out.warn(AudioFileStreamError(.invalidData, .mp3, input.position,
                "after a seek to an estimated position the stream ended at packet \(framesSeen) of \(promised)"))
        } else if let promised = out.audioDataPacketCount, framesSeen != promised, let spf = lock?.samplesPerFrame {
            // Trust what is there: correct the count and the gapless numbers.
            out.audioDataPacketCount = framesSeen
            out.announce(.audioDataPacketCount)
            if let info = out.packetTableInfo {
                // The start trim stays; the end trim belongs to frames that are not there.
                let total = framesSeen * Int64(spf)
                let priming = Int(min(Int64(info.primingFrames), total))
                let remainder = framesSeen < promised ? 0 : Int(min(Int64(info.remainderFrames), total - Int64(priming)))
                out.packetTableInfo = AudioFilePacketTableInfo(validFrames: total - Int64(priming) - Int64(remainder),
                    primingFrames: priming, remainderFrames: remainder, source: info.source,
                    note: "the header promised \(promised) frames; \(framesSeen) are present")
                out.announce(.packetTableInfo)
            }
            if framesSeen < promised {
                // A cut-off file: what is there plays, exactly (mpg123 and ffmpeg do the same).
                out.warn(AudioFileStreamError(.truncated, .mp3, input.position,
                    "the \(xing != nil ? "Xing/Info" : "VBRI") header promises \(promised) frames but the stream ends after \(framesSeen)"))
                return
            }
            out.warn(AudioFileStreamError(.invalidData, .mp3, firstAudioOffset ?? 0,
                "the \(xing != nil ? "Xing/Info" : "VBRI") header says \(promised) frames; the stream has \(framesSeen)"))
        }
    }

    /// Exact for packets already parsed; otherwise through the Xing TOC, else the bit rate.
    func byteOffset(forPacket packet: Int64) -> AudioFileStreamSeekResult? {
        guard let lock, let first = firstAudioOffset, packet >= 0 else { return nil }
        if packet < Int64(frameOffsets.count) {
            return AudioFileStreamSeekResult(byteOffset: frameOffsets[Int(packet)], isEstimated: false)
        }
        // An "Info" tag marks a constant-bit-rate file: the arithmetic below is exact to a byte,
        // where the 100-entry table of contents is only as fine as 1/256 of the file.
        if xing?.isInfo != true, let total = packetCountForSeeking, total > 0, let toc = xing?.toc, toc.count == 100, let bytes = audioBytesForSeeking {
            let percent = min(max(Double(packet) / Double(total) * 100, 0), 99.999)
            let index = Int(percent)
            let low = Double(toc[index]), high = index < 99 ? Double(toc[index + 1]) : 256
            let fraction = (low + (high - low) * (percent - Double(index))) / 256
            return AudioFileStreamSeekResult(byteOffset: first + Int64(fraction * Double(bytes)), isEstimated: true)
        }
        let averageFrame = Double(lock.bitRate) * Double(lock.samplesPerFrame) / 8 / Double(lock.sampleRate)
        // Constant bit rate: frame k starts within a byte of k × the average frame length (the
        // padding bit spreads the remainder). Resynchronise from a few bytes before, so the first
        // header found is frame k itself and not the one after it.
        let estimate = Int64((Double(packet) * averageFrame).rounded(.down))
        return AudioFileStreamSeekResult(byteOffset: first + max(estimate - (packet > 0 ? 4 : 0), 0), isEstimated: true)
    }

    private var packetCountForSeeking: Int64?
    /// A seek went to an estimated byte position: packet numbers from there are approximate.
    private var positionEstimated = false
    private var audioBytesForSeeking: Int64?

    func seek(toPacket packet: Int64, _ input: ByteInput, _ out: StreamOutput) throws -> AudioFileStreamSeekResult {
        packetCountForSeeking = out.audioDataPacketCount
        audioBytesForSeeking = out.audioDataByteCount
        guard let result = byteOffset(forPacket: packet) else {
            throw AudioFileStreamError(.invalidOperation, .mp3, input.position, "cannot seek before the first frame has been parsed")
        }
        reposition(input, out, offset: result.byteOffset, packet: packet, resync: result.isEstimated)
        return result
    }

    private func reposition(_ input: ByteInput, _ out: StreamOutput, offset: Int64, packet: Int64, resync: Bool) {
        input.reset(to: offset)
        out.nextPacketIndex = packet
        resyncing = resync
        if resync { positionEstimated = true }
        skippedJunk = 0
        if Int64(frameOffsets.count) > packet { frameOffsets.removeSubrange(Int(packet)...) }
        framesSeen = packet
    }

    func discontinuity(_ input: ByteInput, _ out: StreamOutput) {
        input.dropBuffered()
        resyncing = true
        skippedJunk = 0
    }

    func frames(beforePacket packet: Int64) -> Int64? { lock.map { packet * Int64($0.samplesPerFrame) } }

    func packet(forFrame frame: Int64) -> (packet: Int64, frameOffset: Int)? {
        guard let spf = lock?.samplesPerFrame else { return nil }
        return (frame / Int64(spf), Int(frame % Int64(spf)))
    }
}
