import AudioFileStream
import FuzzSupport

/// libFuzzer entry: parser, decoder and queue offline render end to end, for the formats whose
/// containers say what they are (CAF, WAV/AIFC, MP4, raw AMR): G.711, IMA ADPCM, ALAC, AMR.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    FuzzSupport.decode(UnsafeRawBufferPointer(start: bytes, count: count), hint: nil)
    return 0
}
