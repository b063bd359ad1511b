import AudioFileStream
import FuzzSupport

/// libFuzzer entry: the Ogg parser (pages, CRCs, packets across pages, chains, the Opus, Vorbis
/// and FLAC mappings) fed arbitrary bytes in arbitrary chunks.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    FuzzSupport.parse(UnsafeRawBufferPointer(start: bytes, count: count), hint: .ogg)
    return 0
}
