import AudioStreaming
import Foundation
import FuzzSupport

/// libFuzzer entry: the HLS playlist parser on arbitrary text. It must parse or throw (never
/// crash), parse the same text the same way twice, resolve every URI against the base URL, and
/// number a media playlist's segments consecutively.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeRawBufferPointer(start: bytes, count: count), as: UTF8.self)
    guard let base = URL(string: "http://fuzz.example/a/b/index.m3u8") else { return 0 }
    let first = try? HLSPlaylist.parse(text, url: base)
    let second = try? HLSPlaylist.parse(text, url: base)
    if first != second { fatalError("the playlist parser is not deterministic") }
    switch first {
    case .media(let media):
        for (index, segment) in media.segments.enumerated() {
            if segment.sequence != media.mediaSequence + index { fatalError("segment \(index) has sequence \(segment.sequence)") }
            if segment.duration.isNaN || segment.duration < 0 { fatalError("a negative or NaN EXTINF was accepted") }
            if let range = segment.byteRange, range.length < 0 || range.offset < 0 { fatalError("a negative byte range was accepted") }
        }
    case .master(let master):
        for variant in master.variants where variant.bandwidth < 0 { fatalError("a negative BANDWIDTH was accepted: \(variant.bandwidth)") }
    case nil:
        break
    }
    return 0
}
