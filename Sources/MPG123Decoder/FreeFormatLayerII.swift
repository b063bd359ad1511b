/// Free-format Layer II for libmpg123. A Layer II decoder picks its bit-allocation table from the
/// bit rate per channel; libmpg123 picks it from the header's bit-rate index, which free format
/// leaves at 0, so it reads every frame of a free-format stream whose rate calls for another
/// table with the wrong one: noise (ffmpeg does not read such streams at all). A frame's audio
/// data does not depend on its length, so each frame is given to libmpg123 under the fixed-rate
/// header of the same table whose frame is at least as long, padded with zero bytes (ancillary
/// data): decoded with the table ISO 11172-3 (B.2) gives the stream's rate.
enum FreeFormatLayerII {
    /// MPEG-1 Layer II bit rates by index, kbit/s.
    static let rates = [0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384]
    /// The table libmpg123 uses for a bit-rate index: [sampling index][stereo 0 / mono 1][index].
    static let tableOfIndex: [[[Int]]] = [
        [[0, 2, 2, 2, 2, 2, 2, 0, 0, 0, 1, 1, 1, 1, 1], [0, 2, 2, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1]],   // 44.1 kHz
        [[0, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0], [0, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]],   // 48 kHz
        [[0, 3, 3, 3, 3, 3, 3, 0, 0, 0, 1, 1, 1, 1, 1], [0, 3, 3, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1]],   // 32 kHz
    ]
    static let sampleRates = [44100, 48000, 32000]

    /// The table ISO 11172-3 gives a bit rate per channel (kbit/s) at a sampling index.
    static func table(perChannel rate: Double, samplingIndex: Int) -> Int {
        if rate < 56 { return samplingIndex == 2 ? 3 : 2 }
        if samplingIndex == 1 || rate < 96 { return 0 }
        return 1
    }

    /// The frame to give libmpg123 for a free-format MPEG-1 Layer II frame: the same bytes under
    /// a fixed-rate header, zero-padded to that rate's length; nil when the frame is not one, or
    /// no fixed rate of the right table is long enough (it is then given as it is).
    static func rewritten(_ frame: UnsafeRawBufferPointer) -> [UInt8]? {
        guard frame.count > 4, frame[0] == 0xFF, frame[1] & 0xF8 == 0xF8,   // MPEG-1
              (frame[1] >> 1) & 3 == 2,                                     // Layer II
              frame[2] >> 4 == 0 else { return nil }                        // free format
        let samplingIndex = Int(frame[2] >> 2) & 3
        guard samplingIndex < 3 else { return nil }
        let mono = frame[3] >> 6 == 3
        let padding = Int(frame[2] >> 1) & 1
        let sampleRate = Double(sampleRates[samplingIndex])
        // A frame is floor(144 × rate / sampling rate) bytes (and its padding slot): a standard
        // rate in that interval is the stream's, else its lower end.
        let low = Double(frame.count - padding) * sampleRate / 144 / 1000, high = Double(frame.count - padding + 1) * sampleRate / 144 / 1000
        let bitRate = rates.first { Double($0) >= low && Double($0) < high }.map(Double.init) ?? low
        let wanted = table(perChannel: bitRate / (mono ? 1 : 2), samplingIndex: samplingIndex)
        for index in 1..<rates.count where tableOfIndex[samplingIndex][mono ? 1 : 0][index] == wanted {
            let length = 144 * rates[index] * 1000 / sampleRates[samplingIndex]
            guard length >= frame.count else { continue }
            var bytes = [UInt8](frame)
            bytes[2] = UInt8(index << 4) | (frame[2] & 0x0D)   // the index; no padding slot
            bytes += [UInt8](repeating: 0, count: length - frame.count)
            return bytes
        }
        return nil
    }
}
