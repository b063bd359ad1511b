import AudioFileStream
import AudioPlayback
import BufferQueue

/// Packets a streaming source has parsed and not yet handed to its reader: compressed ones one by
/// one (with their variable frame count), PCM in runs of whole packets.
struct PendingPackets {
    private enum Item {
        /// A packet (PCM: a run of whole packets, `variableFrames` nil) and the frames it decodes to.
        case packet(data: [UInt8], variableFrames: Int?, frames: Int)
        /// What the reader is told at this point instead of packets: a break, a link, a seek's landing.
        case marker(PacketRead)
    }
    private var items: [Item] = []
    private var head = 0
    /// Packet bytes and frames appended so far: the running average bit rate.
    private(set) var parsedBytes: Int64 = 0
    private(set) var parsedFrames: Int64 = 0

    var isEmpty: Bool { head >= items.count }

    /// Marks a break: the packets after it are another encode (an HLS discontinuity); the reader
    /// gets `.discontinuity` there.
    mutating func appendBreak() { items.append(.marker(.discontinuity)) }

    /// Marks where a link of a chained stream begins, or where its length became known (before
    /// its last packets): the reader gets `.link` there.
    mutating func appendLink(_ link: AudioStreamLink) { items.append(.marker(.link(link))) }

    /// Marks where a seek by frame landed: the packets after it begin at decoded frame `frame`.
    mutating func appendResume(atFrame frame: Int64) { items.append(.marker(.resume(atFrame: frame))) }

    mutating func removeAll() {
        items.removeAll()
        head = 0
    }

    /// Appends the packets of one parser event, leaving out the first `dropping` of them.
    /// - Returns: the number of packets in the event.
    @discardableResult
    mutating func append(_ packets: AudioFilePackets, stream: AudioFileStream, format: AudioStreamDescription, dropping: Int = 0) -> Int {
        let perPacket = stream.dataFormat?.framesPerPacket ?? 0
        // The feeder counts decoded frames: a packet's own count is in them already (an MP4 counts
        // HE-AAC at its output rate); the container format's count is scaled up for HE-AAC it
        // declares at half rate.
        let scale = AudioFile.frameScale(of: format, counted: perPacket)
        if packets.descriptions.isEmpty {
            // Constant-size packets (PCM): runs of whole packets, at most 16 KiB each.
            let size = max(stream.dataFormat?.bytesPerPacket ?? 1, 1)
            let perRun = max(16384 / size, 1) * size
            var start = min(max(dropping, 0) * size, packets.data.count / size * size)
            parsedBytes += Int64(packets.data.count - start)
            while start + size <= packets.data.count {
                let end = min(start + perRun, packets.data.count / size * size)
                let frames = (end - start) / size * max(perPacket, 1)
                items.append(.packet(data: Array(packets.data[start..<end]), variableFrames: nil, frames: frames))
                parsedFrames += Int64(frames)
                start = end
            }
            return packets.data.count / size
        }
        for description in packets.descriptions.dropFirst(max(dropping, 0)) {
            let start = description.startOffset, end = start + description.dataByteSize
            guard start >= 0, end <= packets.data.count else { continue }
            let frames = description.variableFramesInPacket > 0 ? description.variableFramesInPacket : perPacket * scale
            items.append(.packet(data: Array(packets.data[start..<end]), variableFrames: description.variableFramesInPacket, frames: frames))
            parsedBytes += Int64(description.dataByteSize)
            parsedFrames += Int64(frames)
        }
        return packets.descriptions.count
    }

    /// The next packets, at most `maxPackets` (compressed) and `maxBytes` (at least one packet);
    /// nil when none are pending.
    mutating func read(maxPackets: Int, maxBytes: Int) -> PacketRead? {
        guard head < items.count else { return nil }
        guard case .packet(_, let firstVariable, _) = items[head] else {
            guard case .marker(let marker) = items[head] else { return nil }
            head += 1
            return marker
        }
        var data: [UInt8] = []
        var descriptions: [AudioPacketDescription] = []
        var frames = 0
        let isPCM = firstVariable == nil
        while head < items.count, descriptions.count < maxPackets || isPCM {
            guard case .packet(let bytes, let variable, let count) = items[head], (variable == nil) == isPCM,
                  data.isEmpty || data.count + bytes.count <= maxBytes else { break }
            if !isPCM {
                descriptions.append(AudioPacketDescription(startOffset: data.count, variableFramesInPacket: variable ?? 0, dataByteSize: bytes.count))
            }
            data += bytes
            frames += count
            head += 1
        }
        if head > 256 && head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
        return .packets(data: data, descriptions: descriptions, frames: frames)
    }
}
