import AudioFileStream
import FuzzSupport

/// libFuzzer entry: the Matroska/WebM parser (EBML headers, unknown sizes, Tracks, Tags,
/// Chapters, Cues, blocks in every lacing) fed arbitrary bytes in arbitrary chunks.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    FuzzSupport.parse(UnsafeRawBufferPointer(start: bytes, count: count), hint: .matroska)
    return 0
}
