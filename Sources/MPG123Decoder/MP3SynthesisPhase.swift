/// Chooses where a libmpg123 decode that should reproduce a decode from the first packet begins.
///
/// libmpg123's polyphase synthesis writes each 32-sample step into a ring whose start index moves
/// on by one every step, and it sums the window taps in ring order. The same samples therefore
/// round differently (by one unit in the last place) in another phase of the ring, and a decoder
/// started a few packets before a position gives the same values but not the same bits — unless
/// it has taken the same number of steps, modulo the ring's period, by the time it gets there.
///
/// Measured on MPEG-1, 2 and 2.5 files, mono and stereo, by decoding from every packet: the phase
/// repeats every 2304 frames (2 MPEG-1 or 4 MPEG-2/2.5 packets; stereo every 1152).
///
/// Not every packet takes its steps. A fresh decoder has an empty bit reservoir; a frame whose
/// `main_data_begin` reaches back further than the bytes it has seen is "patched" by libmpg123
/// (`layer3.c`, since 2008): the pointer is set to what is available and the side information
/// zeroed — from its third byte on. In MPEG-2 and 2.5 the second byte still holds the top bits of
/// the first granule's `part2_3_length`; when those exceed the bits available the frame is
/// dropped before synthesis (silence of its length, no steps). The reservoir count only grows
/// (capped at 511 bytes for MPEG-1, 255 for MPEG-2/2.5), so this happens only in the first few
/// frames after a start. This type replays that bookkeeping from the packets' headers and side
/// information, for the decode from the first packet and for each candidate start.
public struct MP3SynthesisPhase {
    /// Frames per packet of the stream (1152 for MPEG-1, 576 for MPEG-2 and 2.5).
    public let framesPerPacket: Int
    /// Reads `count` packets from `first`: each packet's bytes, header included (fewer at the end).
    private let read: (_ first: Int64, _ count: Int) -> [[UInt8]]

    /// A phase reader for a stream of `framesPerPacket`-frame packets whose bytes `read` returns.
    public init(framesPerPacket: Int, read: @escaping (_ first: Int64, _ count: Int) -> [[UInt8]]) {
        self.framesPerPacket = framesPerPacket
        self.read = read
    }

    /// Packets per period of the synthesis phase.
    private var period: Int64 { Int64(framesPerPacket > 0 && 2304 % framesPerPacket == 0 ? 2304 / framesPerPacket : 1) }

    /// The latest packet at or before `packet - preRoll` from which a fresh decoder reaches
    /// `packet` in the phase the decode from packet 0 has there; nil when none of the
    /// 8 periods before it does (a damaged stream), so a seek does not fall back to decoding
    /// from the start.
    public func decodeStart(before packet: Int64, preRoll: Int) -> Int64? {
        let latest = max(packet - Int64(preRoll), 0)
        guard latest > 0 else { return 0 }
        let wanted = Int64(droppedFrames(from: 0)) % period
        // Each candidate replays a few packets; the phase matches within a period or two.
        for start in stride(from: latest, through: max(latest - 8 * period, 0), by: -1)
        where start == 0 || (start + Int64(droppedFrames(from: start))) % period == wanted {
            return start
        }
        return nil
    }

    /// Frames a fresh decoder started at `start` drops before synthesis, counted until its
    /// reservoir is full (after which none can be). Every valid frame adds to it: an MPEG-1 frame
    /// at least 58 bytes (32 kb/s at 48 kHz), an MPEG-2 frame as little as 1 byte (8 kb/s at
    /// 24 kHz, stereo, with CRC), so it fills within 255 frames. Frames that add nothing (a damaged
    /// stream) stop the count at `replayLimit` frames, so a seek never reads on to the end of
    /// the file.
    public func droppedFrames(from start: Int64) -> Int {
        var reservoir = 0
        var dropped = 0
        var next = start
        while next - start < Self.replayLimit {
            let packets = read(next, 16)
            if packets.isEmpty { return dropped }
            for bytes in packets {
                guard let frame = SideInfo(bytes) else { return dropped }
                if frame.mainDataBegin > reservoir {
                    let available = (frame.dataBytes + reservoir) * 8
                    if frame.isLSF && frame.patchedPart23Length > available { dropped += 1 }
                }
                reservoir = min(reservoir + frame.dataBytes, frame.reservoirLimit)
                if reservoir >= frame.reservoirLimit { return dropped }
            }
            next += Int64(packets.count)
        }
        return dropped
    }

    /// Frames replayed at most from one start.
    static let replayLimit: Int64 = 256

    /// What the bookkeeping needs from a layer III frame.
    struct SideInfo {
        let isLSF: Bool
        let mainDataBegin: Int
        /// Bytes after the header and side information (CRC included in the latter).
        let dataBytes: Int
        let reservoirLimit: Int
        /// `part2_3_length` of the first granule as libmpg123 reads it after patching: the top
        /// bits left in the side information's second byte.
        let patchedPart23Length: Int

        init?(_ bytes: [UInt8]) {
            guard bytes.count >= 6, bytes[0] == 0xFF, bytes[1] & 0xE0 == 0xE0, bytes[1] >> 1 & 3 == 1 else { return nil }
            isLSF = bytes[1] >> 3 & 3 != 3
            let mono = bytes[3] >> 6 == 3
            let crc = bytes[1] & 1 == 0
            let sideBytes = (isLSF ? (mono ? 9 : 17) : (mono ? 17 : 32)) + (crc ? 2 : 0)
            let side = 4 + (crc ? 2 : 0)
            guard bytes.count >= 4 + sideBytes else { return nil }
            mainDataBegin = isLSF ? Int(bytes[side]) : Int(bytes[side]) << 1 | Int(bytes[side + 1] >> 7)
            dataBytes = bytes.count - 4 - sideBytes
            reservoirLimit = isLSF ? 255 : 511
            patchedPart23Length = mono ? Int(bytes[side + 1] & 0x7F) << 5 : Int(bytes[side + 1] & 0x3F) << 6
        }
    }
}
