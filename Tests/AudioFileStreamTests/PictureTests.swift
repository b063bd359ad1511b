import Testing
@testable import AudioFileStream

/// Pictures as the tag formats carry them: the image facts read from the image's own header, the
/// FLAC PICTURE body and its base64 form (Ogg's `METADATA_BLOCK_PICTURE`), and ID3's `APIC`.
@Suite struct PictureTests {
    /// Every image kind's MIME type and size come from its header (hand-made headers of known sizes).
    @Test func imageFactsAreReadFromTheImagesHeader() {
        func le(_ value: Int, _ count: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
        let bmp = Array("BM".utf8) + [UInt8](repeating: 0, count: 16) + le(640, 4) + le(-480, 4)
        let vp8 = Array("RIFF".utf8) + le(0, 4) + Array("WEBPVP8 ".utf8) + le(0, 4) + [0, 0, 0, 0x9D, 0x01, 0x2A] + le(300, 2) + le(200, 2)
        let vp8l = Array("RIFF".utf8) + le(0, 4) + Array("WEBPVP8L".utf8) + le(0, 4) + [0x2F] + le((299) | (199 << 14), 4) + [0, 0, 0, 0, 0]
        // A JPEG whose APP0 segment comes before its SOF2 (progressive) frame header.
        let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x4A, 0x46, 0xFF, 0xC2, 0x00, 0x11, 0x08, 0x01, 0x2C, 0x02, 0x58, 0x03]
        #expect(AudioFilePicture.imageFacts(bmp).map { [$0.mimeType, "\($0.width)", "\($0.height)"] } == ["image/bmp", "640", "480"])
        #expect(AudioFilePicture.imageFacts(vp8).map { [$0.mimeType, "\($0.width)", "\($0.height)"] } == ["image/webp", "300", "200"])
        #expect(AudioFilePicture.imageFacts(vp8l).map { [$0.mimeType, "\($0.width)", "\($0.height)"] } == ["image/webp", "300", "200"])
        #expect(AudioFilePicture.imageFacts(jpeg).map { [$0.mimeType, "\($0.width)", "\($0.height)"] } == ["image/jpeg", "600", "300"])
        #expect(AudioFilePicture(image: Array("not an image".utf8)) == nil)
    }

    /// A picture survives the FLAC block and base64 (every remainder of three, padding included).
    @Test func flacPicturesAndBase64RoundTrip() {
        for count in [0, 1, 2, 3, 4, 5, 300] {
            let data = (0..<count).map { UInt8(truncatingIfNeeded: $0 * 37 + 11) }
            let picture = AudioFilePicture(type: 4, mimeType: "image/png", description: "Rückseite", width: 7, height: 9, data: data)
            let text = VorbisComment.base64(FLACPicture.encode(picture))
            #expect(text.utf8.count % 4 == 0)
            #expect(VorbisComment.base64(text).flatMap(FLACPicture.parse) == picture)
        }
        #expect(VorbisComment.base64(Array("any carnal pleas".utf8)) == "YW55IGNhcm5hbCBwbGVhcw==")
    }

    /// ID3's `APIC` in each text encoding and v2.2's `PIC`, as the writer makes them and others do.
    @Test func id3PicturesAreReadInEveryEncoding() {
        let image: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13] + Array("IHDR".utf8) + [0, 0, 0, 5, 0, 0, 0, 6]
        for (version, description) in [(UInt8(4), "Vorderseite ü"), (3, "Front"), (3, "Vorderseite ü")] {
            let picture = AudioFilePicture(type: 3, mimeType: "image/png", description: description, width: 5, height: 6, data: image)
            let frame = ID3TagWriter.pictureFrame(picture, version: version)
            #expect(ID3v2.picture(Array(frame.dropFirst(10)), version: version) == picture)
        }
        // UTF-16 big-endian without a BOM (encoding 2), and v2.2's three-letter format.
        let utf16: [UInt8] = [2] + Array("image/png".utf8) + [0, 4, 0, 0x42, 0, 0] + image
        #expect(ID3v2.picture(utf16, version: 4)?.description == "B")
        #expect(ID3v2.picture(utf16, version: 4)?.type == 4)
        let pic: [UInt8] = [0] + Array("JPG".utf8) + [3] + Array("x".utf8) + [0, 0xFF, 0xD8]
        #expect(ID3v2.picture(pic, version: 2).map { ($0.mimeType, $0.description, $0.data) } ?? ("", "", []) == ("image/jpeg", "x", [0xFF, 0xD8]))
    }
}
