import Foundation
import Testing
@testable import AudioFileStream
import BufferQueue
import TestSupport

/// The Ogg and native FLAC parsers on files ffmpeg writes: the same packets at any chunking,
/// the gapless numbers from granule positions and STREAMINFO, chained and multiplexed Ogg, and
/// damage (a page or frame failing its CRC, a cut frame, a lying STREAMINFO).
@Suite(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/ffmpeg"), "ffmpeg is missing (make deps installs it): Ogg/FLAC container tests skipped"))
struct XiphContainerTests {
    /// 1.01 s of a tone at 48 kHz (48 480 frames: no whole number of Opus, Vorbis or FLAC blocks).
    static func make(_ codec: String, _ ext: String, seconds: Double = 1.01, channels: Int = 2) async throws -> [UInt8] {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("xiph-\(UUID()).\(ext)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let result = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=f=440:d=\(seconds):r=48000",
                                                           "-ac", "\(channels)", "-c:a", codec, path])
        try #require(result.status == 0, "ffmpeg could not write \(ext): \(String(decoding: result.errorOutput, as: UTF8.self))")
        return [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    static func stream(_ bytes: [UInt8], chunk: Int = 4096) -> (stream: AudioFileStream, trace: Trace) {
        let stream = AudioFileStream()
        var result = Trace()
        var at = 0
        do {
            while at < bytes.count {
                for event in try stream.parse(bytes[at..<min(at + chunk, bytes.count)]) { record(event, &result, stream) }
                at += chunk
            }
            for event in try stream.finish() { record(event, &result, stream) }
        } catch {
            result.error = "\(error)"
        }
        result.warnings = stream.warnings.map { "\($0)" }
        return (stream, result)
    }

    static func record(_ event: AudioFileStreamEvent, _ trace: inout Trace, _ stream: AudioFileStream) {
        switch event {
        case .packets(let packets):
            for (index, description) in packets.descriptions.enumerated() {
                trace.items.append(.packet(index: packets.firstPacketIndex + Int64(index), offset: packets.fileOffsets[index],
                                           frames: description.variableFramesInPacket > 0 ? description.variableFramesInPacket
                                                                                          : stream.dataFormat?.framesPerPacket ?? 0,
                                           bytes: Array(packets.data[description.startOffset..<(description.startOffset + description.dataByteSize)])))
            }
        case .link(let link):
            trace.items.append(.property("link \(link.index) at \(link.firstPacket) priming \(link.primingFrames) valid \(String(describing: link.validFrames))"))
        case .property(let property):
            trace.items.append(.property("\(property)"))
        default:
            break
        }
    }

    static func frames(_ trace: Trace) -> Int64 { trace.packets.reduce(0) { $0 + Int64($1.frames) } }

    @Test(arguments: [("libopus", "opus"), ("libvorbis", "ogg"), ("flac", "flac"), ("flac", "oga")])
    func theSamePacketsAtAnyChunking(_ codec: String, _ ext: String) async throws {
        let bytes = try await Self.make(codec, ext)
        let whole = Self.stream(bytes, chunk: bytes.count)
        #expect(whole.trace.error == nil && whole.trace.warnings.isEmpty, "\(whole.trace.error ?? "") \(whole.trace.warnings)")
        #expect(whole.stream.fileType == (ext == "flac" ? .flac : .ogg))
        #expect(whole.trace.packets.count > 10)
        for chunk in [1, 7, 1000] {
            let dripped = Self.stream(bytes, chunk: chunk)
            #expect(dripped.trace == whole.trace, "chunk \(chunk)")
        }
        // Every decoded frame is priming, valid or remainder; 1.01 s at 48 kHz is valid.
        let table = try #require(whole.stream.packetTableInfo)
        #expect(table.validFrames == 48_480, "\(table)")
        #expect(Int64(table.primingFrames) + table.validFrames + Int64(table.remainderFrames) == Self.frames(whole.trace), "\(table)")
        if codec == "libopus" {
            let head = try #require(whole.stream.magicCookie)
            #expect(table.primingFrames == Int(head[10]) | Int(head[11]) << 8)
        }
    }

    /// Two files back to back make a chained stream: two links, each with its own pre-skip and
    /// length, the packets numbered on.
    @Test func aChainedOpusStreamHasTwoLinks() async throws {
        let first = try await Self.make("libopus", "opus"), second = try await Self.make("libopus", "opus", seconds: 0.5, channels: 1)
        let result = Self.stream(first + second, chunk: 999)
        #expect(result.trace.error == nil)
        let links = result.stream.links
        try #require(links.count == 2, "\(links)")
        #expect(links[0].validFrames == 48_480 && links[1].validFrames == 24_000)
        #expect(links[0].format.channelsPerFrame == 2 && links[1].format.channelsPerFrame == 1)
        #expect(links[1].primingFrames > 0)
        let alone = Self.stream(first)
        #expect(links[1].firstPacket == Int64(alone.trace.packets.count))
        #expect(links[1].firstFrame == Self.frames(alone.trace))
        // Each link was announced when it began and again when its length was known.
        let announcements = result.trace.items.compactMap { item -> String? in
            if case .property(let text) = item, text.hasPrefix("link") { return text } else { return nil }
        }
        #expect(announcements.count == 4, "\(announcements)")
        #expect(result.stream.packetTableInfo?.validFrames == 72_480)
    }

    /// A link cut without its last page (no end-of-stream flag), then a new one (a radio source
    /// that reconnected): the new beginning ends the first link at its last granule position.
    @Test func aLinkWithoutItsLastPageEndsWhereTheNextBegins() async throws {
        var first = try await Self.make("libopus", "opus")
        let second = try await Self.make("libopus", "opus", seconds: 0.5, channels: 1)
        let last = try #require(OggTestPages.ranges(first).last)
        first[last.lowerBound + 5] &= ~4   // no end of stream
        OggTestPages.fixCRC(&first, page: last)
        let result = Self.stream(first + second, chunk: 777)
        #expect(result.trace.error == nil)
        let links = result.stream.links
        try #require(links.count == 2, "\(links)")
        #expect(links[0].validFrames == 48_480 && links[1].validFrames == 24_000)
        #expect(result.stream.warnings.contains { "\($0)".contains("without its last page") }, "\(result.trace.warnings)")
    }

    /// HLS `CODECS` names (RFC 6381) of Opus and FLAC are formats this library reads: a master
    /// playlist's Opus or FLAC variant is chosen, not skipped.
    @Test func opusAndFLACCodecNames() {
        #expect(AudioFormatID(codecName: "opus") == .opus)
        #expect(AudioFormatID(codecName: "fLaC") == .flac)
        #expect(AudioFormatID(codecName: "ec-3") == nil)
    }

    /// A FLAC frame of CONSTANT subframes (16-bit, rate and size from STREAMINFO): the
    /// header's number is `number` (UTF-8 coded), with the blocking strategy bit as given.
    static func flacFrame(number: Int, blockSize: Int, variableBit: Bool, value: Int16, channels: Int = 1) -> [UInt8] {
        // Block size: a 16-bit field; rate and sample size: STREAMINFO's; independent channels.
        var frame: [UInt8] = [0xFF, variableBit ? 0xF9 : 0xF8, 0x70, UInt8(channels - 1) << 4]
        if number < 0x80 { frame.append(UInt8(number)) } else { frame += [0xC0 | UInt8(number >> 6), 0x80 | UInt8(number & 0x3F)] }
        frame += [UInt8((blockSize - 1) >> 8), UInt8((blockSize - 1) & 0xFF)]
        var crc8: UInt8 = 0
        for byte in frame {
            crc8 ^= byte
            for _ in 0..<8 { crc8 = crc8 & 0x80 != 0 ? (crc8 << 1) ^ 0x07 : crc8 << 1 }
        }
        frame.append(crc8)
        for _ in 0..<channels {   // CONSTANT subframes
            frame += [0x00, UInt8(UInt16(bitPattern: value) >> 8), UInt8(UInt16(bitPattern: value) & 0xFF)]
        }
        var crc16: UInt16 = 0
        for byte in frame {
            crc16 ^= UInt16(byte) << 8
            for _ in 0..<8 { crc16 = crc16 & 0x8000 != 0 ? (crc16 << 1) ^ 0x8005 : crc16 << 1 }
        }
        return frame + [UInt8(crc16 >> 8), UInt8(crc16 & 0xFF)]
    }

    /// Old-format variable block sizes (Flake before 2007): the blocking strategy bit says fixed,
    /// STREAMINFO's minimum and maximum block sizes differ, and the headers count samples, as
    /// libFLAC reads them. (Every frame after the first was taken for damage.)
    @Test func oldFormatVariableBlockSizes() {
        let sizes = [100, 200, 50, 300]
        var streamInfo: [UInt8] = [0, 50, 1, 44, 0, 0, 0, 0, 0, 0]   // blocks 50...300, frame sizes unknown
        streamInfo += [0x0A, 0xC4, 0x40, 0xF0]   // 44 100 Hz (20 bits), 1 channel, 16 bits
        streamInfo += [0, 0, 2, 0x8A] + [UInt8](repeating: 0, count: 16)   // 650 samples, no MD5
        var file = Array("fLaC".utf8) + [0x80, 0, 0, 34] + streamInfo
        var sample = 0
        for (index, size) in sizes.enumerated() {
            file += Self.flacFrame(number: sample, blockSize: size, variableBit: false, value: Int16(index * 1000 + 7))
            sample += size
        }
        let result = Self.stream(file, chunk: 5)
        #expect(result.trace.error == nil && result.trace.warnings.isEmpty, "\(result.trace.error ?? "") \(result.trace.warnings)")
        #expect(result.trace.packets.map(\.frames) == sizes)
        #expect(result.stream.packetTableInfo?.validFrames == 650)
    }

    /// FLAC lets a stream change its channel count (or rate, or sample size) from one frame to
    /// the next: a mono stream that turns stereo keeps every frame (the stereo ones were skipped
    /// as bytes that are not frames).
    @Test func flacFramesMayChangeTheirChannels() {
        let streamInfo: [UInt8] = [0x10, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0x0A, 0xC4, 0x40, 0xF0, 0, 0, 0x40, 0] + [UInt8](repeating: 0, count: 16)
        var file = Array("fLaC".utf8) + [0x80, 0, 0, 34] + streamInfo   // 4096-sample blocks, mono, 16 bits, 16 384 samples
        for index in 0..<4 {
            file += Self.flacFrame(number: index, blockSize: 4096, variableBit: false, value: Int16(index * 100), channels: index < 2 ? 1 : 2)
        }
        let result = Self.stream(file, chunk: 1000)
        #expect(result.trace.error == nil && result.trace.warnings.isEmpty, "\(result.trace.error ?? "") \(result.trace.warnings)")
        #expect(result.trace.packets.count == 4)
        #expect(result.stream.packetTableInfo?.validFrames == 16_384)
    }

    /// An Ogg page, CRC included.
    static func page(serial: UInt32, sequence: UInt32, flags: UInt8, granule: Int64, packet: [UInt8]) -> [UInt8] {
        var lacing = [UInt8](repeating: 255, count: packet.count / 255)
        lacing.append(UInt8(packet.count % 255))
        var page = Array("OggS".utf8) + [0, flags]
        page += (0..<8).map { UInt8(truncatingIfNeeded: UInt64(bitPattern: granule) >> (8 * UInt64($0))) }
        page += (0..<4).map { UInt8(truncatingIfNeeded: serial >> (8 * UInt32($0))) }
        page += (0..<4).map { UInt8(truncatingIfNeeded: sequence >> (8 * UInt32($0))) }
        page += [0, 0, 0, 0, UInt8(lacing.count)] + lacing + packet
        let crc = page.withUnsafeBytes { MPEGCRC32.checksum($0, initial: 0, zeroing: 22..<26) }
        for index in 0..<4 { page[22 + index] = UInt8(truncatingIfNeeded: crc >> (8 * UInt32(index))) }
        return page
    }

    /// A Skeleton stream multiplexed before the audio (its BOS first, its EOS among the audio
    /// pages) is skipped and named; the audio is the same as without it.
    @Test func aSkeletonStreamIsSkipped() async throws {
        let opus = try await Self.make("libopus", "opus")
        let plain = Self.stream(opus)
        let fishead = Array("fishead\0".utf8) + [UInt8](repeating: 0, count: 56)
        let bos = Self.page(serial: 0xABCD, sequence: 0, flags: 2, granule: 0, packet: fishead)
        let eos = Self.page(serial: 0xABCD, sequence: 1, flags: 4, granule: 0, packet: [])
        let pages = OggTestPages.ranges(opus)
        let muxed = bos + Array(opus[pages[0]]) + eos + Array(opus[pages[1].lowerBound...])
        let result = Self.stream(muxed, chunk: 500)
        #expect(result.trace.error == nil)
        #expect(result.trace.packets.map(\.bytes) == plain.trace.packets.map(\.bytes))
        #expect(result.stream.warnings.contains { "\($0)".contains("Skeleton") }, "\(result.trace.warnings)")
    }

    /// Opus channel mapping family 255 (no defined speaker order) is refused with an error naming it.
    @Test func opusMappingFamily255IsRefusedByName() async throws {
        let opus = try await Self.make("libopus", "opus")
        let pages = OggTestPages.ranges(opus)
        let serial = opus[14..<18].enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (8 * UInt32($1.offset)) }
        var head = Array(opus[(pages[0].lowerBound + 28)..<pages[0].upperBound])
        head[18] = 255
        head += [1, 1, 0, 1]   // one stream, coupled; channels 0 and 1
        let file = Self.page(serial: serial, sequence: 0, flags: 2, granule: 0, packet: head) + Array(opus[pages[1].lowerBound...])
        let result = Self.stream(file)
        #expect(result.trace.error?.contains("mapping family 255") == true, "\(result.trace.error ?? "no error")")
        #expect(result.trace.packets.isEmpty)
    }

    /// A page failing its CRC is dropped and reported; the packets on the other pages are read.
    @Test func aDamagedOggPageIsDroppedAndReported() async throws {
        let opus = try await Self.make("libopus", "opus", seconds: 4)
        let plain = Self.stream(opus)
        let pages = OggTestPages.ranges(opus)
        try #require(pages.count > 5)
        var damaged = opus
        damaged[pages[3].lowerBound + 60] ^= 0x10
        let result = Self.stream(damaged, chunk: 777)
        #expect(result.trace.error == nil)
        #expect(result.stream.warnings.contains { "\($0)".contains("fails its CRC") }, "\(result.trace.warnings)")
        let kept = result.trace.packets.map(\.bytes), all = plain.trace.packets.map(\.bytes)
        #expect(kept.count < all.count && kept.count > all.count - 60)
        // What came before the damaged page is all there, in order.
        let before = plain.trace.packets.prefix { $0.offset < Int64(pages[3].lowerBound) }.map(\.bytes)
        #expect(Array(kept.prefix(before.count)) == before)
    }

    /// FLAC frames: one failing its CRC-16 is dropped with a warning, a cut last one too, and a
    /// STREAMINFO total that disagrees with the frames is reported (the frames are played).
    @Test func flacDamage() async throws {
        let flac = try await Self.make("flac", "flac", seconds: 2)
        let plain = Self.stream(flac)
        let packets = plain.trace.packets
        try #require(packets.count > 10)
        var damaged = flac
        damaged[Int(packets[5].offset) + packets[5].bytes.count / 2] ^= 0x01
        let hit = Self.stream(damaged, chunk: 333)
        #expect(hit.trace.error == nil)
        #expect(hit.trace.warnings.contains { $0.contains("CRC-16") }, "\(hit.trace.warnings)")
        #expect(hit.trace.packets.map(\.bytes) == packets.enumerated().filter { $0.offset != 5 }.map(\.element.bytes))

        let cut = Array(flac.prefix(Int(packets[packets.count - 1].offset) + 40))
        let short = Self.stream(cut, chunk: 500)
        #expect(short.trace.error == nil)
        #expect(short.trace.warnings.contains { $0.contains("cut") }, "\(short.trace.warnings)")
        #expect(short.trace.packets.map(\.bytes) == packets.dropLast().map(\.bytes))

        // STREAMINFO's total samples end at byte 25 of the file (`fLaC`, the block header, 18 bytes).
        var lying = flac
        lying[24] ^= 0x01
        let told = Self.stream(lying)
        #expect(told.trace.warnings.contains { $0.contains("STREAMINFO says") }, "\(told.trace.warnings)")
        #expect(told.stream.packetTableInfo?.validFrames == 96_000)
    }

    /// Vorbis comments and pictures, as the reference encoders write them: title, artist and
    /// album as such, other fields as tags, pictures from a FLAC PICTURE block or an Ogg
    /// comment's METADATA_BLOCK_PICTURE; aqinfo prints them and the links of a chain.
    @Test(.enabled(if: ["flac", "opusenc", "oggenc", "sox"].allSatisfy { FileManager.default.isExecutableFile(atPath: "/usr/bin/\($0)") },
                   "flac, opus-tools, vorbis-tools or sox is missing (make deps installs them)"))
    func tagsAndPictures() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("xiph-tags-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let wav = dir.appendingPathComponent("a.wav").path, png = dir.appendingPathComponent("cover.png").path
        _ = try await runTool("/usr/bin/sox", ["-r", "44100", "-n", "-r", "44100", "-c", "2", "-b", "16", wav, "synth", "0.5", "sine", "440"])
        _ = try await runTool("/usr/bin/ffmpeg", ["-v", "error", "-f", "lavfi", "-i", "color=c=red:s=40x30", "-frames:v", "1", png])
        let image = [UInt8](try Data(contentsOf: URL(fileURLWithPath: png)))
        let flac = dir.appendingPathComponent("a.flac").path, opus = dir.appendingPathComponent("a.opus").path, ogg = dir.appendingPathComponent("a.ogg").path
        for (tool, arguments) in [
            ("flac", ["-s", "-f", "--picture=3|image/png|Cover|40x30x24|\(png)", "-T", "TITLE=Tone", "-T", "ARTIST=Sox", "-T", "ALBUM=Tests",
                      "-T", "TRACKNUMBER=3", "-T", "REPLAYGAIN_TRACK_GAIN=-3.50 dB", wav, "-o", flac]),
            ("opusenc", ["--quiet", "--picture", "3|image/png|Cover|40x30x24|\(png)", "--title", "Tone", "--artist", "Sox", "--album", "Tests",
                         "--comment", "TRACKNUMBER=3", "--comment", "R128_TRACK_GAIN=-256", wav, opus]),
            ("oggenc", ["-Q", "-t", "Tone", "-a", "Sox", "-l", "Tests", "-N", "3", "-c", "REPLAYGAIN_TRACK_GAIN=-3.50 dB", wav, "-o", ogg]),
        ] {
            let result = try await runTool("/usr/bin/\(tool)", arguments)
            try #require(result.status == 0, "\(tool): \(result.errorText)")
        }
        for path in [flac, opus, ogg] {
            let result = Self.stream([UInt8](try Data(contentsOf: URL(fileURLWithPath: path))))
            let metadata = result.stream.metadata
            #expect(result.trace.error == nil, "\(path)")
            #expect(metadata.title == "Tone" && metadata.artist == "Sox" && metadata.album == "Tests", "\(path): \(metadata)")
            #expect(metadata.tags["TRACKNUMBER"] == "3", "\(path): \(metadata.tags)")
            if path == opus {
                #expect(metadata.tags["R128_TRACK_GAIN"] == "-256")
            } else {
                #expect(metadata.tags["REPLAYGAIN_TRACK_GAIN"] == "-3.50 dB")
            }
            if path != ogg {
                let picture = try #require(metadata.pictures.first, "\(path)")
                #expect(picture.type == 3 && picture.mimeType == "image/png" && picture.description == "Cover")
                #expect(picture.width == 40 && picture.height == 30 && picture.data == image)
            }
        }
        let aqinfo = SnifferTests.aqinfo
        try #require(FileManager.default.isExecutableFile(atPath: aqinfo), "aqinfo is built with the tests")
        let chain = dir.appendingPathComponent("chain.opus")
        try Data(try Data(contentsOf: URL(fileURLWithPath: opus)) + Data(contentsOf: URL(fileURLWithPath: opus))).write(to: chain)
        let info = try await runTool(aqinfo, ["--json", chain.path])
        try #require(info.status == 0, "\(info.errorText)")
        let json = try #require(try JSONSerialization.jsonObject(with: info.output) as? [String: Any])
        let metadata = try #require(json["metadata"] as? [String: String])
        #expect(metadata["title"] == "Tone" && metadata["TRACKNUMBER"] == "3")
        let pictures = try #require(json["pictures"] as? [[String: Any]])
        #expect(pictures.first?["type"] as? String == "front cover" && pictures.first?["bytes"] as? Int == image.count)
        let links = try #require(json["links"] as? [[String: Any]])
        #expect(links.count == 2 && links.allSatisfy { $0["title"] as? String == "Tone" && $0["validFrames"] as? Int == 24_000 })
    }
}
