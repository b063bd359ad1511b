// Generated from Docs/FileStreams.md by DocSnippetTests (AQ_WRITE_SNIPPETS=1 swift test --filter DocSnippetTests): do not edit.
import AudioFileStream
import BufferQueue

// Compiled, never called.
func docSnippets_FileStreams() async throws {
    let chunks: [[UInt8]] = []
    func enqueue(_ data: [UInt8], _ descriptions: [AudioPacketDescription]) {}
    func resumeReading(at offset: Int64) {}
    _ = chunks
    // Docs/FileStreams.md, snippet 1

    let stream = AudioFileStream()                       // sourceIsSeekable: true for files / HTTP Range
    for chunk in chunks {
        for event in try stream.parse(chunk) {
            switch event {
            case .property(.readyToProducePackets):
                print(stream.dataFormat!, stream.packetTableInfo as Any)
            case .packets(let packets):
                enqueue(packets.data, packets.descriptions)   // descriptions empty for PCM
            case .seekRequired(let offset):
                resumeReading(at: offset)                 // then stream.resume(atByteOffset: offset)
            default:
                break
            }
        }
    }
    _ = try stream.finish()                              // reports what is missing or cut
    _ = stream
}
