import AudioFileStream
import AudioStreaming
import FuzzSupport

/// libFuzzer entry: the ICY metadata de-interleaver. The first two bytes set the interval; the
/// audio it passes through must be exactly the input minus the metadata it reports.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    guard count > 2 else { return 0 }
    let data = UnsafeRawBufferPointer(start: bytes, count: count)
    let interval = Int(data[0]) << 8 | Int(data[1]) + 1
    let body = UnsafeRawBufferPointer(rebasing: data[2...])
    var whole = ICYMetadataFilter(interval: interval)
    var split = ICYMetadataFilter(interval: interval)
    var audioWhole: [UInt8] = [], audioSplit: [UInt8] = []
    let titlesWhole = whole.process(body, audio: &audioWhole)
    var titlesSplit: [ICYMetadataFilter.Update] = []
    var offset = 0
    let chunk = FuzzSupport.chunkSize(data) == Int.max ? 13 : FuzzSupport.chunkSize(data)
    while offset < body.count {
        let end = min(offset + chunk, body.count)
        titlesSplit += split.process(UnsafeRawBufferPointer(rebasing: body[offset..<end]), audio: &audioSplit)
        offset = end
    }
    // Chunking must not change anything.
    if audioWhole != audioSplit || titlesWhole != titlesSplit || audioWhole.count > body.count { fatalError("ICY filter depends on chunking") }
    return 0
}
