import AudioFileStream
import FuzzSupport

/// libFuzzer entry: the MPEG transport stream demuxer. The whole input and the same input in
/// chunks (the first byte picks the size) must give the same events and the same error; the
/// elementary stream's bytes never outnumber the input's.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let data = UnsafeRawBufferPointer(start: bytes, count: count)
    func run(chunk: Int) -> ([MPEGTransportStreamDemuxer.Event], String?) {
        let demuxer = MPEGTransportStreamDemuxer()
        var events: [MPEGTransportStreamDemuxer.Event] = []
        do {
            var offset = 0
            while offset < data.count {
                let end = min(offset + chunk, data.count)
                try demuxer.push(UnsafeRawBufferPointer(rebasing: data[offset..<end])) { events.append($0) }
                offset = end
            }
            try demuxer.finish { events.append($0) }
            return (events, nil)
        } catch {
            return (events, "\(error)")
        }
    }
    let whole = run(chunk: Int.max)
    let chunk = FuzzSupport.chunkSize(data)
    let split = run(chunk: chunk == Int.max ? 188 : chunk)
    // Audio events may be cut differently by chunking; their bytes, in order, may not.
    func audio(_ events: [MPEGTransportStreamDemuxer.Event]) -> [UInt8] {
        events.flatMap { event -> [UInt8] in if case .audio(let bytes) = event { return bytes } else { return [] } }
    }
    func others(_ events: [MPEGTransportStreamDemuxer.Event]) -> [MPEGTransportStreamDemuxer.Event] {
        events.filter { if case .audio = $0 { return false } else { return true } }
    }
    if (whole.1 == nil) != (split.1 == nil) { fatalError("the TS demuxer's error depends on chunking: \(whole.1 ?? "none") / \(split.1 ?? "none")") }
    if whole.1 == nil, audio(whole.0) != audio(split.0) || others(whole.0) != others(split.0) { fatalError("the TS demuxer's output depends on chunking") }
    if audio(whole.0).count > count { fatalError("the TS demuxer produced more bytes than it was given") }
    return 0
}
