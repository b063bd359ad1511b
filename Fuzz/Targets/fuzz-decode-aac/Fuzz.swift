import AudioFileStream
import FuzzSupport

/// libFuzzer entry: parser, decoder and queue offline render end to end.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    FuzzSupport.decode(UnsafeRawBufferPointer(start: bytes, count: count), hint: .mp4)
    return 0
}
