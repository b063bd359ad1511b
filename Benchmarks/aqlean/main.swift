// aqlean FILE.mp3: the smallest program of the library, for the start-up and memory figures of
// Docs/Performance.md: BufferQueue, AudioFileStream (to read the file), MPG123Decoder and the null
// sink, unpaced; no Foundation, no argument parser. Plays the file's valid frames and says how many.
#if canImport(Glibc)
import Glibc
#endif
import AudioFileStream
import BufferQueue
import Dispatch
import MPG123Decoder

guard CommandLine.arguments.count == 2 else {
    print("usage: aqlean FILE.mp3")
    exit(2)
}
MPG123Decoder.register()
do {
    let file = try AudioFile(path: CommandLine.arguments[1])
    let sink = NullSink(pacing: .unpaced)
    let stopped = DispatchSemaphore(value: 0)
    let queue = try AudioQueue(format: file.dataFormat, configuration: .init(sink: sink, eventHandler: { event in
        if case .runningChanged(false) = event { stopped.signal() }
    }))
    let info = file.packetTableInfo
    var primingLeft = Int64(info?.primingFrames ?? 0), validLeft = info?.validFrames ?? Int64.max
    var next: Int64 = 0
    while next < file.packetCount {
        let packets = try file.readPackets(from: next, count: 256)
        let buffer = try queue.allocateBuffer(capacity: packets.data.count, packetDescriptionCapacity: packets.descriptions.count)
        try buffer.setData(packets.data)
        var frames: Int64 = 0
        for packet in next..<(next + Int64(packets.packetCount)) { frames += Int64(file.frames(ofPacket: packet)) }
        let trimStart = min(primingLeft, frames)
        primingLeft -= trimStart
        let kept = min(frames - trimStart, validLeft)
        validLeft -= kept
        try queue.enqueue(buffer, packetDescriptions: packets.descriptions, trimFramesAtStart: Int(trimStart),
                          trimFramesAtEnd: Int(frames - trimStart - kept))
        next += Int64(packets.packetCount)
    }
    try queue.start()
    try queue.stop(immediately: false)
    stopped.wait()
    print("played \(queue.currentTime().sampleTime) frames")
    queue.dispose(immediately: true)
    // AQLEAN_SMAPS=1: where the resident memory is, by mapping (what the memory figures need).
    if getenv("AQLEAN_SMAPS") != nil, let smaps = fopen("/proc/self/smaps", "r") {
        var line = [CChar](repeating: 0, count: 512)
        var name = ""
        var totals: [String: Int] = [:]
        while fgets(&line, Int32(line.count), smaps) != nil {
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let fields = text.split(separator: " ", omittingEmptySubsequences: true)
            if let first = fields.first, first.contains("-"), first.first?.isHexDigit == true {
                name = fields.count >= 6 ? String(fields[5...].joined(separator: " ").dropLast()) : "[anonymous]"
            } else if fields.first == "Rss:", fields.count >= 2, let kilobytes = Int(fields[1]) {
                totals[name, default: 0] += kilobytes
            }
        }
        fclose(smaps)
        for (mapping, kilobytes) in totals.sorted(by: { $0.value > $1.value }) where kilobytes > 0 {
            print("\(kilobytes) kB  \(mapping)")
        }
    }
} catch {
    print("aqlean: \(error)")
    exit(1)
}
