import AudioFileStream
import FuzzSupport

/// libFuzzer entry: the raw AMR parser fed arbitrary bytes in arbitrary chunks.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    FuzzSupport.parse(UnsafeRawBufferPointer(start: bytes, count: count), hint: .amr)
    return 0
}
