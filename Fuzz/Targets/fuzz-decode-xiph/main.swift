import AudioFileStream
import FuzzSupport

/// libFuzzer entry: parser, decoder (libopus, libvorbis, libFLAC) and queue offline render end
/// to end for Ogg and native FLAC.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    FuzzSupport.decode(UnsafeRawBufferPointer(start: bytes, count: count), hint: nil)
    return 0
}
