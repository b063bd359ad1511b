import AudioFileStream
import FuzzSupport

/// libFuzzer entry: the native FLAC parser (metadata blocks, frame search by CRC) fed arbitrary
/// bytes in arbitrary chunks.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    FuzzSupport.parse(UnsafeRawBufferPointer(start: bytes, count: count), hint: .flac)
    return 0
}
