/// Finds SBR and PS payloads in AAC raw data blocks without decoding them, for streams whose
/// AudioSpecificConfig leaves SBR and PS open (ADTS, and MP4 with implicit signalling).
///
/// The spectral data before them cannot be skipped without its Huffman codebooks, so the scan
/// works from the end of the block, whose layout is fixed: the `END` element (`111`), then zero
/// bits to the byte boundary. Fill elements (`FIL`, id `110`) precede it: an SBR payload
/// (extension type 13, or 14 with a CRC), possibly followed by padding fills (types 0 and 1,
/// whose bytes must all be `0xA5`). A fill element's start follows from its length, so each
/// candidate is checked by its id, its count field and its extension type.
///
/// Parametric stereo sits at the end of the SBR payload, as the SBR extended data: a flag, a
/// byte count, then extension id 2. Again the count fixes where the header must be.
///
/// One packet can match by chance; a stream is called HE-AAC when three quarters of the scanned
/// packets carry an SBR payload (every packet of a real one does: each frame has SBR data), and
/// HE-AAC v2 when three quarters of those also carry PS. Measured on the fixtures: every packet
/// of the fdk-aac and Nero HE-AAC files matches; AAC-LC files from ffmpeg, iTunes, faac, Nero,
/// fdk-aac and Apple match in at most 1 packet of 40; the PS check matches every packet of the
/// HE-AAC v2 files and at most 4 in 40 of the v1 files.
enum AACExtensionScan {
    struct Finding: Equatable {
        var sbr: Bool
        var ps: Bool
    }

    /// How many packets to look at.
    static let packetsToScan = 8

    /// SBR and PS as found in `packets` (the first few of the stream); `monoCore` allows PS.
    static func scan(_ packets: [[UInt8]], monoCore: Bool) -> Finding {
        let scanned = packets.prefix(packetsToScan)
        guard !scanned.isEmpty else { return Finding(sbr: false, ps: false) }
        var sbrPackets = 0, psPackets = 0
        for packet in scanned {
            let bits = Bits(packet)
            guard let sbr = sbrPayload(bits) else { continue }
            sbrPackets += 1
            if monoCore && hasParametricStereo(bits, sbr) { psPackets += 1 }
        }
        let sbr = sbrPackets * 4 >= scanned.count * 3
        return Finding(sbr: sbr, ps: sbr && monoCore && psPackets * 4 >= sbrPackets * 3)
    }

    /// Bit access to one packet, most significant bit first.
    struct Bits {
        let bytes: [UInt8]
        init(_ bytes: [UInt8]) { self.bytes = bytes }
        var count: Int { bytes.count * 8 }
        func bit(_ index: Int) -> Int { Int(bytes[index >> 3] >> (7 - UInt8(index & 7)) & 1) }
        /// `width` bits from `index` (the caller keeps them inside the packet).
        func value(_ index: Int, _ width: Int) -> Int {
            var value = 0
            for i in index..<(index + width) { value = value << 1 | bit(i) }
            return value
        }
        func allZero(_ range: Range<Int>) -> Bool { range.allSatisfy { bit($0) == 0 } }
    }

    /// An SBR fill element: where its payload (the extension type) starts, its byte count and type.
    struct SBRPayload {
        let payload: Int
        let count: Int
        let type: Int
    }

    static func sbrPayload(_ bits: Bits) -> SBRPayload? {
        // The END element ends 0...7 zero bits before the end of the packet.
        for padding in 0..<8 {
            let end = bits.count - padding
            guard end >= 3 + 7 else { break }
            guard bits.value(end - 3, 3) == 0b111, bits.allZero(end..<bits.count) else { continue }
            var frontier = [end - 3]
            for _ in 0..<4 {   // an SBR element, after at most three padding fills
                var next: [Int] = []
                for position in frontier {
                    for fill in fills(endingAt: position, bits) {
                        if let type = fill.type, type == 13 || type == 14 { return SBRPayload(payload: fill.payload, count: fill.count, type: type) }
                        next.append(fill.start)
                    }
                }
                frontier = next
                if frontier.isEmpty { break }
            }
        }
        return nil
    }

    /// Fill elements whose last bit is just before `end`: SBR payloads, and padding fills whose
    /// bytes are all 0xA5.
    static func fills(endingAt end: Int, _ bits: Bits) -> [(start: Int, payload: Int, count: Int, type: Int?)] {
        var found: [(start: Int, payload: Int, count: Int, type: Int?)] = []
        for count in 0..<270 {
            let escaped = count >= 15
            let header = escaped ? 15 : 7
            let start = end - 8 * count - header
            guard start >= 0 else { break }
            guard bits.value(start, 3) == 0b110 else { continue }
            let field = bits.value(start + 3, 4)
            if escaped {
                guard field == 15, bits.value(start + 7, 8) + 14 == count else { continue }
            } else {
                guard field == count else { continue }
            }
            let payload = start + header
            if count == 0 { found.append((start, payload, 0, nil)); continue }
            let type = bits.value(payload, 4)
            switch type {
            case 13, 14:
                found.append((start, payload, count, type))
            case 0, 1:
                guard bits.value(payload + 4, 4) == 0,
                      (1..<count).allSatisfy({ bits.value(payload + 8 * $0, 8) == 0xA5 }) else { continue }
                found.append((start, payload, count, type))
            default:
                continue
            }
        }
        return found
    }

    /// Whether the SBR payload ends with extended data whose first extension is parametric stereo.
    static func hasParametricStereo(_ bits: Bits, _ sbr: SBRPayload) -> Bool {
        let first = sbr.payload + 4 + (sbr.type == 14 ? 10 : 0)
        let payloadEnd = sbr.payload + 8 * sbr.count
        for fill in 0..<8 {
            let end = payloadEnd - fill
            guard bits.allZero(end..<payloadEnd) else { continue }
            for bytes in 1..<270 {
                let extensionStart = end - 8 * bytes
                if bytes < 15 {
                    guard extensionStart - 5 >= first else { break }
                    guard bits.bit(extensionStart - 5) == 1, bits.value(extensionStart - 4, 4) == bytes else { continue }
                } else {
                    guard extensionStart - 13 >= first else { break }
                    guard bits.bit(extensionStart - 13) == 1, bits.value(extensionStart - 12, 4) == 15,
                          bits.value(extensionStart - 8, 8) == bytes - 15 else { continue }
                }
                if bits.value(extensionStart, 2) == 2 { return true }
            }
        }
        return false
    }
}

extension AudioSpecificConfig {
    /// This config with SBR (and PS) found in-band: the readings implicit signalling leaves to the
    /// decoder, told before decoding. Only for cores at 24 kHz or less, where SBR doubles the rate.
    func withInBand(_ finding: AACExtensionScan.Finding) -> AudioSpecificConfig? {
        guard sbrPresent == nil, finding.sbr, sampleRate <= 24000, objectType == 2 else { return nil }
        var config = self
        config.sbrPresent = true
        config.psPresent = finding.ps
        config.extensionSampleRate = sampleRate * 2
        config.signalling = "implicit (found in the first packets)"
        return config
    }
}
