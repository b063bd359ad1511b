import AudioFileStream
import BufferQueue
import FAADDecoder
import FLACDecoder
import OpenCoreAMRDecoder
import MPG123Decoder
import OpusDecoder
import VorbisDecoder

/// Shared by the libFuzzer targets (built only by `make fuzz`, with `AQ_FUZZ=1`).
///
/// The first input byte chooses the chunking (1 to 4 096 bytes, or one piece), so the fuzzer
/// explores how the parsers cope with data split anywhere; the rest is the file.
public enum FuzzSupport {
    public static func chunkSize(_ data: UnsafeRawBufferPointer) -> Int {
        guard let first = data.first else { return 1 }
        switch first % 8 {
        case 0: return data.count <= 1024 ? 1 : 61   // byte by byte only for small inputs: keeps executions fast
        case 1: return 7
        case 2: return 188
        case 3: return 4096
        case 4: return Int(first) + 1
        default: return Int.max
        }
    }

    /// Parses the bytes after the first in chunks; returns the stream and its packets.
    @discardableResult
    public static func parse(_ data: UnsafeRawBufferPointer, hint: AudioFileType?) -> (AudioFileStream, [AudioFilePackets]) {
        // An MP4 index elsewhere is followed, boundedly.
        let driver = AudioFileStreamDriver(fileTypeHint: hint, maximumSeeks: 8)
        let stream = driver.stream
        var packets: [AudioFilePackets] = []
        guard data.count > 1 else { return (stream, packets) }
        let body = UnsafeRawBufferPointer(rebasing: data[1...])
        let chunk = chunkSize(data)
        func take(_ event: AudioFileStreamEvent) {
            if case .packets(let p) = event { packets.append(p) }
        }
        do {
            while driver.position >= 0 && driver.position < Int64(body.count) {
                let offset = Int(driver.position)
                let end = offset + min(chunk, body.count - offset)
                try driver.feed(UnsafeRawBufferPointer(rebasing: body[offset..<end]), take)
            }
            try driver.finish(take)
        } catch {
            // Errors are the expected outcome for most inputs; crashes, hangs and leaks are not.
        }
        return (stream, packets)
    }

    /// Parses, then decodes every packet through an offline queue with the stream's trims.
    public static func decode(_ data: UnsafeRawBufferPointer, hint: AudioFileType?) {
        MPG123Decoder.register()
        FAADDecoder.register()
        AMRDecoder.register()
        OpusDecoder.register()
        VorbisDecoder.register()
        FLACDecoder.register()
        let (stream, packets) = parse(data, hint: hint)
        guard let format = stream.formatList.first ?? stream.dataFormat, !packets.isEmpty,
              let queue = try? AudioQueue(format: format, configuration: .init(decodeBufferFrames: 16384)) else { return }
        defer { queue.dispose(immediately: true) }
        if let cookie = stream.magicCookie { try? queue.setMagicCookie(cookie) }
        var scratch = [Float](repeating: 0, count: 4096 * 8)
        var prepared = false
        for group in packets.prefix(64) {
            guard !group.data.isEmpty, let buffer = try? queue.allocateBuffer(capacity: group.data.count,
                                                                              packetDescriptionCapacity: max(group.descriptions.count, 1)) else { continue }
            do {
                try buffer.setData(group.data)
                try queue.enqueue(buffer, packetDescriptions: group.descriptions)
                if !prepared {
                    try queue.prime()
                    let out = queue.outputFormat
                    guard out.channelsPerFrame <= 8 else { return }
                    try queue.setOfflineRenderFormat(out)
                    prepared = true
                }
                try drain(queue, &scratch)
            } catch {
                continue
            }
        }
        if prepared {
            try? queue.flush()
            try? drain(queue, &scratch)
        }
    }

    private static func drain(_ queue: AudioQueue, _ scratch: inout [Float]) throws {
        let channels = max(queue.outputFormat.channelsPerFrame, 1)
        let frames = scratch.count / channels
        for _ in 0..<10_000 {
            let n = try scratch.withUnsafeMutableBytes { try queue.offlineRender(at: queue.offlineRenderPosition, into: $0, frames: frames) }
            if n == 0 { return }
        }
    }
}
