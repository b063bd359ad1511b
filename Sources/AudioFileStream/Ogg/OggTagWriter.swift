import BufferQueue

/// Rewrites the comment header of an Ogg Opus, Vorbis or FLAC file (its first logical stream):
/// the header packets after the identification header are laid out in new pages, which the file gets
/// in place of the old ones (written anew beside it and renamed over it). The identification page
/// and every audio page keep their bytes when the header takes as many pages as before; otherwise
/// the stream's later pages are renumbered (sequence and CRC only: granule positions and packets
/// are untouched).
enum OggTagWriter {
    /// One page's bytes and the fields the rewrite reads.
    struct Page {
        var bytes: [UInt8]
        var serial: UInt32 { bytes[14..<18].enumerated().reduce(0) { $0 | UInt32($1.element) << (8 * $1.offset) } }
        var sequence: UInt32 { bytes[18..<22].enumerated().reduce(0) { $0 | UInt32($1.element) << (8 * $1.offset) } }
        var segmentCount: Int { Int(bytes[26]) }
        var lacing: ArraySlice<UInt8> { bytes[27..<(27 + segmentCount)] }
        var body: ArraySlice<UInt8> { bytes[(27 + segmentCount)...] }
        var continued: Bool { bytes[5] & 1 != 0 }
    }

    /// The page at `offset`, checked; nil at the end of the file.
    static func readPage(_ file: FileDescriptor, path: String, at offset: Int64) throws -> Page? {
        func read(_ count: Int, _ at: Int64) throws -> [UInt8] {
            var bytes = [UInt8](repeating: 0, count: count)
            let got: Int
            do { got = try bytes.withUnsafeMutableBytes { (raw: UnsafeMutableRawBufferPointer) in try file.readAll(into: raw, at: at) } } catch {
                throw AudioFileWriterError(.cannotCreate, path: path, byteOffset: at, underlying: error as? SystemError, "cannot read the file")
            }
            return Array(bytes.prefix(got))
        }
        let header = try read(27, offset)
        if header.isEmpty { return nil }
        guard header.count == 27, header.starts(with: Array("OggS".utf8)), header[4] == 0 else {
            throw AudioFileWriterError(.unsupportedFormat, path: path, byteOffset: offset, "no Ogg page here: the file is left as it is")
        }
        let lacing = try read(Int(header[26]), offset + 27)
        let bodySize = lacing.reduce(0) { $0 + Int($1) }
        let body = try read(bodySize, offset + 27 + Int64(lacing.count))
        guard lacing.count == Int(header[26]), body.count == bodySize else {
            throw AudioFileWriterError(.unsupportedFormat, path: path, byteOffset: offset, "the Ogg page here is cut short: the file is left as it is")
        }
        var page = header + lacing + body
        let stored = page[22..<26]
        OggOpusWriter.seal(&page)
        guard page[22..<26] == stored else {
            throw AudioFileWriterError(.unsupportedFormat, path: path, byteOffset: offset, "the Ogg page here fails its CRC: the file is left as it is")
        }
        return Page(bytes: page)
    }

    static func update(_ file: FileDescriptor, path: String, _ changes: [(name: String, value: String?)],
                       pictures: [AudioFilePicture]?) throws -> AudioFileTagUpdate {
        // The header pages: the identification page, then pages until the last header packet ends.
        guard let first = try readPage(file, path: path, at: 0) else {
            throw AudioFileWriterError(.unsupportedFormat, path: path, "the file is empty")
        }
        let serial = first.serial
        var firstPage = first.bytes
        let identification = Array(first.body)
        // Header packets after the identification packet: a count, or (Ogg FLAC's count 0) until
        // the metadata block flagged last.
        var expected: Int?
        let commentMagic: [UInt8]
        var flac = false
        if identification.starts(with: Array("OpusHead".utf8)) {
            (expected, commentMagic) = (1, Array("OpusTags".utf8))
        } else if identification.starts(with: [1] + Array("vorbis".utf8)) {
            (expected, commentMagic) = (2, [3] + Array("vorbis".utf8))
        } else if identification.starts(with: [0x7F] + Array("FLAC".utf8)), identification.count >= 51,
                  identification[9..<13].elementsEqual("fLaC".utf8) {
            // Ogg FLAC: the mapping packet carries STREAMINFO; each other metadata block is a packet.
            flac = true
            commentMagic = []
            let declared = Int(identification[7]) << 8 | Int(identification[8])
            expected = identification[13] & 0x80 != 0 ? 0 : declared == 0 ? nil : declared
        } else {
            throw AudioFileWriterError(.unsupportedFormat, path: path, "writing tags into this Ogg codec's files is not built (Ogg Opus, Vorbis and FLAC are)")
        }
        guard first.lacing.last.map({ $0 < 255 }) == true, first.lacing.filter({ $0 < 255 }).count == 1 else {
            throw AudioFileWriterError(.unsupportedFormat, path: path, "the first Ogg page holds more than the identification header: the file is left as it is")
        }
        var packets: [[UInt8]] = []
        var current: [UInt8] = []
        var offset = Int64(first.bytes.count)
        var oldHeaderPages = 0
        func moreHeaders() -> Bool {
            if let expected { return packets.count < expected }
            return packets.last.map { ($0.first ?? 0x80) & 0x80 == 0 } ?? true
        }
        while moreHeaders() {
            guard let page = try readPage(file, path: path, at: offset) else {
                throw AudioFileWriterError(.unsupportedFormat, path: path, byteOffset: offset, "the file ends inside its Ogg headers: the file is left as it is")
            }
            guard page.serial == serial else {
                throw AudioFileWriterError(.unsupportedFormat, path: path, byteOffset: offset, "another logical stream's page inside the headers (a multiplexed Ogg): not rewritten")
            }
            var at = page.body.startIndex
            for value in page.lacing {
                current += page.bytes[at..<(at + Int(value))]
                at += Int(value)
                if value < 255 {
                    packets.append(current)
                    current = []
                }
            }
            offset += Int64(page.bytes.count)
            oldHeaderPages += 1
            if !moreHeaders(), !current.isEmpty || (expected.map { packets.count > $0 } ?? false) {
                throw AudioFileWriterError(.unsupportedFormat, path: path, byteOffset: offset,
                                           "audio shares a page with the last Ogg header: not rewritten (the file is left as it is)")
            }
        }
        if expected == nil, packets.firstIndex(where: { ($0.first ?? 0x80) & 0x80 != 0 }) != packets.count - 1 {
            throw AudioFileWriterError(.unsupportedFormat, path: path, byteOffset: offset,
                                       "audio shares a page with the last Ogg header: not rewritten (the file is left as it is)")
        }
        if flac {
            try rewriteFLACComment(&packets, changes, path: path)
            if let pictures {
                try replaceFLACPictures(&packets, with: pictures, path: path)
                // The mapping packet counts the header packets after it (0: not counted).
                let bodyStart = firstPage.count - identification.count
                if Int(identification[7]) << 8 | Int(identification[8]) != 0 {
                    guard packets.count <= 0xFFFF else {
                        throw AudioFileWriterError(.unsupportedFormat, path: path, "\(packets.count) header packets are more than Ogg FLAC counts")
                    }
                    firstPage[bodyStart + 7] = UInt8(packets.count >> 8)
                    firstPage[bodyStart + 8] = UInt8(packets.count & 0xFF)
                    OggOpusWriter.seal(&firstPage)
                }
            }
        } else {
            // The comment: after its magic, a Vorbis comment (and, for Vorbis, a framing bit; for
            // Opus perhaps binary data after it, kept).
            guard packets[0].starts(with: commentMagic), let raw = VorbisComment.rawFields(packets[0], from: commentMagic.count) else {
                throw AudioFileWriterError(.unsupportedFormat, path: path, byteOffset: Int64(first.bytes.count),
                                           "the Ogg comment header is damaged: the file is left as it is")
            }
            let trailing = Array(packets[0][raw.end...])
            // Pictures are `METADATA_BLOCK_PICTURE` fields: a FLAC PICTURE block in base64.
            let pictureChanges: [(name: String, value: String?)] = pictures.map { pictures in
                [(Self.pictureField, nil)] + pictures.map { (Self.pictureField, VorbisComment.base64(FLACPicture.encode($0))) }
            } ?? []
            packets[0] = commentMagic + VorbisComment.encode(vendor: raw.vendor, fields: VorbisComment.applying(changes + pictureChanges, to: raw.fields)) + trailing
        }
        let pages = headerPages(packets, serial: serial)
        let shift = Int64(pages.count - oldHeaderPages)
        try AudioFileRewrite.replace(path: path, original: file) { write in
            try firstPage.withUnsafeBytes { try write($0) }
            for page in pages { try page.withUnsafeBytes { try write($0) } }
            if shift == 0 { return try AudioFileRewrite.copy(file, path: path, from: offset, write) }
            // The stream's later pages renumbered; other streams' (a chain's next links) as they are.
            var at = offset
            while var page = try readPage(file, path: path, at: at) {
                at += Int64(page.bytes.count)
                if page.serial == serial {
                    let sequence = UInt32(truncatingIfNeeded: Int64(page.sequence) + shift)
                    for index in 0..<4 { page.bytes[18 + index] = UInt8(truncatingIfNeeded: sequence >> (8 * index)) }
                    OggOpusWriter.seal(&page.bytes)
                }
                try page.bytes.withUnsafeBytes { try write($0) }
            }
        }
        return .rewritten
    }

    /// Ogg FLAC's comment: the VORBIS_COMMENT block among the header packets, rewritten (its
    /// last-block flag kept).
    static func rewriteFLACComment(_ packets: inout [[UInt8]], _ changes: [(name: String, value: String?)], path: String) throws {
        func block(_ type: UInt8, last: Bool, _ body: [UInt8]) throws -> [UInt8] {
            guard body.count < 1 << 24 else {
                throw AudioFileWriterError(.unsupportedFormat, path: path, "the tags take \(body.count) bytes, more than a FLAC metadata block holds")
            }
            return [type | (last ? 0x80 : 0), UInt8(body.count >> 16), UInt8((body.count >> 8) & 0xFF), UInt8(body.count & 0xFF)] + body
        }
        if let index = packets.firstIndex(where: { ($0.first ?? 0) & 0x7F == FLACMetadataType.vorbisComment.rawValue }) {
            let packet = packets[index]
            guard packet.count >= 4, let raw = VorbisComment.rawFields(Array(packet[4...])) else {
                throw AudioFileWriterError(.unsupportedFormat, path: path, "the Ogg FLAC comment block is damaged: the file is left as it is")
            }
            packets[index] = try block(FLACMetadataType.vorbisComment.rawValue, last: packet[0] & 0x80 != 0,
                                       VorbisComment.encode(vendor: raw.vendor, fields: VorbisComment.applying(changes, to: raw.fields)))
            return
        }
        // The mapping requires the comment as the first header packet after it: a stream without
        // one is not one to guess about.
        throw AudioFileWriterError(.unsupportedFormat, path: path, "the Ogg FLAC stream has no VORBIS_COMMENT block: the file is left as it is")
    }

    /// The comment field that carries a picture in Ogg Vorbis and Opus.
    static let pictureField = "METADATA_BLOCK_PICTURE"

    /// Ogg FLAC's pictures: its PICTURE packets replaced by `pictures`, after the comment block,
    /// the last packet flagged last.
    static func replaceFLACPictures(_ packets: inout [[UInt8]], with pictures: [AudioFilePicture], path: String) throws {
        let type = FLACMetadataType.picture.rawValue
        let blocks = try pictures.map { picture -> [UInt8] in
            let body = FLACPicture.encode(picture)
            guard body.count < 1 << 24 else {
                throw AudioFileWriterError(.unsupportedFormat, path: path,
                                           "the picture \"\(picture.description)\" takes \(body.count) bytes, more than a FLAC PICTURE block holds (16 MiB)")
            }
            return [type, UInt8(body.count >> 16), UInt8((body.count >> 8) & 0xFF), UInt8(body.count & 0xFF)] + body
        }
        packets.removeAll { ($0.first ?? 0) & 0x7F == type }
        let comment = packets.firstIndex { ($0.first ?? 0) & 0x7F == FLACMetadataType.vorbisComment.rawValue } ?? 0
        packets.insert(contentsOf: blocks, at: comment + 1)
        for index in packets.indices where !packets[index].isEmpty {
            packets[index][0] = packets[index][0] & 0x7F | (index == packets.count - 1 ? 0x80 : 0)
        }
    }

    /// Pages (sequence 1 on) holding `packets` in order, the first starting a page and the last
    /// ending one; granule position 0, as header pages have.
    static func headerPages(_ packets: [[UInt8]], serial: UInt32) -> [[UInt8]] {
        // Every packet as lacing values: 255s, then the rest (0 when a multiple of 255).
        var segments: [(value: UInt8, bytes: ArraySlice<UInt8>)] = []
        for packet in packets {
            var at = 0
            while packet.count - at >= 255 {
                segments.append((255, packet[at..<(at + 255)]))
                at += 255
            }
            segments.append((UInt8(packet.count - at), packet[at...]))
        }
        var pages: [[UInt8]] = []
        var index = 0, continued = false
        while index < segments.count {
            let slice = segments[index..<min(index + 255, segments.count)]
            var page = Array("OggS".utf8) + [0, continued ? 1 : 0] + [UInt8](repeating: 0, count: 8)
            for shift in stride(from: 0, to: 32, by: 8) { page.append(UInt8(truncatingIfNeeded: serial >> UInt32(shift))) }
            let sequence = UInt32(pages.count + 1)
            for shift in stride(from: 0, to: 32, by: 8) { page.append(UInt8(truncatingIfNeeded: sequence >> UInt32(shift))) }
            page += [0, 0, 0, 0, UInt8(slice.count)]
            page += slice.map(\.value)
            for segment in slice { page += segment.bytes }
            OggOpusWriter.seal(&page)
            pages.append(page)
            continued = slice.last.map { $0.value == 255 } ?? false
            index += slice.count
        }
        return pages
    }
}
