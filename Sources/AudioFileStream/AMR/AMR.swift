import BufferQueue

/// Raw AMR files (RFC 4867 §5, the storage format): `#!AMR\n` (narrowband, 8 kHz) or
/// `#!AMR-WB\n` (wideband, 16 kHz), then frames back to back, each a table-of-contents byte whose
/// four-bit frame type gives the payload's size, and the payload. Every frame is one packet of
/// 20 ms (160 or 320 frames). The multichannel variants (`#!AMR_MC1.0\n`) are refused.
final class AMRParser: ContainerParser, PacketLocating {
    private var wideband = false
    private var headerDone = false
    private var packetsSeen: Int64 = 0
    private var frameOffsets: [Int64] = []
    private var framesPerPacket: Int { AMRFrame.frames(wideband: wideband) }

    static let narrowbandMagic = Array("#!AMR\n".utf8)
    static let widebandMagic = Array("#!AMR-WB\n".utf8)

    /// Whether the bytes begin with an AMR magic (nil: too few bytes to tell).
    static func hasMagic(_ input: ByteInput) -> Bool? {
        let prefix: StaticString = "#!AMR"
        let bytes = prefix.utf8Start
        for index in 0..<prefix.utf8CodeUnitCount {
            guard index < input.available else { return input.atEnd ? false : nil }
            if input.u8(index) != bytes[index] { return false }
        }
        return true
    }

    func parse(_ input: ByteInput, _ out: StreamOutput) throws {
        if !headerDone {
            guard input.available >= 9 || (input.atEnd && input.available >= 6) else { return }
            if input.bytes(0, 6) == Self.narrowbandMagic {
                wideband = false
                input.consume(6)
            } else if input.available >= 9, input.bytes(0, 9) == Self.widebandMagic {
                wideband = true
                input.consume(9)
            } else {
                let text = String(decoding: input.bytes(0, min(input.available, 12)).prefix { $0 != 0x0A }, as: UTF8.self)
                throw AudioFileStreamError(.unsupportedDataFormat, .amr, 0,
                    "'\(text)' is not a single-channel AMR or AMR-WB storage file (#!AMR or #!AMR-WB); multichannel AMR is not supported")
            }
            headerDone = true
            let format = AudioStreamDescription(sampleRate: wideband ? 16000 : 8000, formatID: wideband ? .amrWideband : .amr,
                                                bytesPerPacket: 0, framesPerPacket: framesPerPacket, bytesPerFrame: 0,
                                                channelsPerFrame: 1, bitsPerChannel: 0)
            out.dataFormat = format
            out.formatList = [format]
            out.channelLayout = .mono
            out.dataOffset = input.position
            out.maximumPacketSize = wideband ? 61 : 32
            out.announceReady()
        }
        while input.skipPending == 0, input.available >= 1 {
            let type = AMRFrame.type(ofTableOfContents: input.u8(0))
            guard let size = AMRFrame.storageBytes(type: type, wideband: wideband) else {
                throw AudioFileStreamError(.invalidData, .amr, input.position,
                    "frame \(packetsSeen) has the reserved frame type \(type); this is not an AMR\(wideband ? "-WB" : "") stream")
            }
            guard input.available >= size else { return }
            frameOffsets.append(input.position)
            packetsSeen += 1
            out.emitPacket(from: input, size: size, frames: framesPerPacket)
        }
    }

    func finish(_ input: ByteInput, _ out: StreamOutput) throws {
        input.atEnd = true
        try parse(input, out)
        guard headerDone else {
            throw AudioFileStreamError(.truncated, .amr, 0, "the stream ends inside the AMR magic")
        }
        if input.available > 0 {
            let type = AMRFrame.type(ofTableOfContents: input.u8(0))
            out.warn(AudioFileStreamError(.truncated, .amr, input.position,
                "the last frame needs \(AMRFrame.storageBytes(type: type, wideband: wideband) ?? 0) bytes but the stream ends after \(input.available); it was dropped"))
            input.consume(input.available)
        }
        if packetsSeen == 0 {
            throw AudioFileStreamError(.noAudio, .amr, input.position, "the AMR file holds no frame")
        }
        out.audioDataPacketCount = packetsSeen
        out.announce(.audioDataPacketCount)
    }

    func seek(toPacket packet: Int64, _ input: ByteInput, _ out: StreamOutput) throws -> AudioFileStreamSeekResult {
        guard let result = byteOffset(forPacket: packet) else {
            throw AudioFileStreamError(.invalidOperation, .amr, input.position,
                "packet \(packet) has not been parsed yet; AMR has no index to seek ahead with")
        }
        input.reset(to: result.byteOffset)
        out.nextPacketIndex = packet
        frameOffsets.removeSubrange(Int(packet)...)
        packetsSeen = packet
        return result
    }

    func discontinuity(_ input: ByteInput, _ out: StreamOutput) { input.dropBuffered() }

    func byteOffset(forPacket packet: Int64) -> AudioFileStreamSeekResult? {
        guard packet >= 0, packet < Int64(frameOffsets.count) else { return nil }
        return AudioFileStreamSeekResult(byteOffset: frameOffsets[Int(packet)], isEstimated: false)
    }

    func frames(beforePacket packet: Int64) -> Int64? { packet * Int64(framesPerPacket) }
    func packet(forFrame frame: Int64) -> (packet: Int64, frameOffset: Int)? {
        (frame / Int64(framesPerPacket), Int(frame % Int64(framesPerPacket)))
    }
}
