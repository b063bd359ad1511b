import AudioToolbox
import Foundation
import Testing
import CodecTestSupport

/// Bytes in memory served to AudioFileOpenWithCallbacks.
final class MemoryBytes {
    let data: [UInt8]
    init(_ data: [UInt8]) { self.data = data }
}

let readMemory: AudioFile_ReadProc = { clientData, position, count, buffer, actual in
    let bytes = Unmanaged<MemoryBytes>.fromOpaque(clientData).takeUnretainedValue()
    guard position >= 0, position <= Int64(bytes.data.count) else { return kAudioFilePositionError }
    let available = min(Int(count), bytes.data.count - Int(position))
    bytes.data.withUnsafeBytes { buffer.copyMemory(from: $0.baseAddress! + Int(position), byteCount: available) }
    actual.pointee = UInt32(available)
    return noErr
}

let memorySize: AudioFile_GetSizeProc = { clientData in
    Int64(Unmanaged<MemoryBytes>.fromOpaque(clientData).takeUnretainedValue().data.count)
}

/// Reads every packet of a file as (bytes, descriptions).
func readAllPackets(_ file: AudioFileID) -> (bytes: [UInt8], descriptions: [AudioStreamPacketDescription]) {
    var all: [UInt8] = [], described: [AudioStreamPacketDescription] = []
    var next: Int64 = 0
    var buffer = [UInt8](repeating: 0, count: 65536)
    var descriptions = [AudioStreamPacketDescription](repeating: AudioStreamPacketDescription(), count: 64)
    while true {
        var bytes = UInt32(buffer.count)
        var packets = UInt32(descriptions.count)
        let status = buffer.withUnsafeMutableBytes { raw in
            descriptions.withUnsafeMutableBufferPointer { AudioFileReadPacketData(file, false, &bytes, $0.baseAddress, next, &packets, raw.baseAddress) }
        }
        guard status == noErr, packets > 0 else { break }
        all += buffer[0..<Int(bytes)]
        described += descriptions[0..<Int(packets)]
        next += Int64(packets)
    }
    return (all, described)
}

@Suite struct AudioFileTests {
    @Test(arguments: ["lame-vbr-v2-44k-stereo.mp3", "ffmpeg-aac-44k-moov-last.m4a", "pcm-s16be-8k-mono.aiff"])
    func callbacksReadWhatAPathReads(_ name: String) throws {
        let path = Where.fixture(name)
        let memory = MemoryBytes(Array(try Data(contentsOf: URL(fileURLWithPath: path))))
        var fromCallbacks: AudioFileID?
        try #require(AudioFileOpenWithCallbacks(Unmanaged.passUnretained(memory).toOpaque(), readMemory, nil, memorySize, nil, 0, &fromCallbacks) == noErr)
        var fromPath: AudioFileID?
        try #require(AudioFileOpenURL(URL(fileURLWithPath: path) as CFURL, .readPermission, 0, &fromPath) == noErr)
        let a = try #require(fromCallbacks), b = try #require(fromPath)
        defer {
            AudioFileClose(a)
            AudioFileClose(b)
        }
        var formatA = AudioStreamBasicDescription(), formatB = AudioStreamBasicDescription()
        var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
        #expect(AudioFileGetProperty(a, kAudioFilePropertyDataFormat, &size, &formatA) == noErr)
        #expect(AudioFileGetProperty(b, kAudioFilePropertyDataFormat, &size, &formatB) == noErr)
        #expect(formatA.mFormatID == formatB.mFormatID && formatA.mSampleRate == formatB.mSampleRate)
        let packetsA = readAllPackets(a), packetsB = readAllPackets(b)
        #expect(!packetsA.bytes.isEmpty)
        #expect(packetsA.bytes == packetsB.bytes)
        #expect(packetsA.descriptions.map(\.mDataByteSize) == packetsB.descriptions.map(\.mDataByteSize))
        var count: UInt64 = 0
        size = 8
        #expect(AudioFileGetProperty(a, kAudioFilePropertyAudioDataPacketCount, &size, &count) == noErr)
        #expect(Int(count) == (formatA.mBytesPerPacket > 0 ? packetsA.bytes.count / Int(formatA.mBytesPerPacket) : packetsA.descriptions.count))
    }

    @Test func misusesGetApplesStatuses() throws {
        var file: AudioFileID?
        #expect(AudioFileOpenURL(URL(fileURLWithPath: "/nonexistent/x.mp3") as CFURL, .readPermission, 0, &file) == kAudioFileFileNotFoundError)
        let text = FileManager.default.temporaryDirectory.appendingPathComponent("aq-not-audio-\(UUID().uuidString.prefix(8)).txt").path
        try String(repeating: "not audio at all\n", count: 400).write(toFile: text, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: text) }
        #expect(AudioFileOpenURL(URL(fileURLWithPath: text) as CFURL, .readPermission, 0, &file) == kAudioFileUnsupportedFileTypeError)
        var pcm = AudioStreamBasicDescription(mSampleRate: 8000, mFormatID: kAudioFormatLinearPCM, mFormatFlags: kAudioFormatFlagIsSignedInteger | kAudioFormatFlagIsPacked,
                                              mBytesPerPacket: 2, mFramesPerPacket: 1, mBytesPerFrame: 2, mChannelsPerFrame: 1, mBitsPerChannel: 16, mReserved: 0)
        #expect(AudioFileCreateWithURL(URL(fileURLWithPath: text) as CFURL, kAudioFileWAVEType, &pcm, [], &file) == kAudioFilePermissionsError,
                "an existing file needs EraseFile")
        #expect(AudioFileCreateWithURL(URL(fileURLWithPath: text + ".mp3") as CFURL, kAudioFileMP3Type, &pcm, .eraseFile, &file)
                == kAudioFileUnsupportedFileTypeError)

        try #require(AudioFileOpenURL(URL(fileURLWithPath: Where.fixture("pcm-s16-22k-mono.wav")) as CFURL, .readPermission, 0, &file) == noErr)
        let wav = try #require(file)
        defer { AudioFileClose(wav) }
        var bytes: UInt32 = 100
        var packets: UInt32 = 10
        var buffer = [UInt8](repeating: 0, count: 100)
        #expect(AudioFileReadPacketData(wav, false, &bytes, nil, 1_000_000, &packets, &buffer) == noErr)
        #expect(packets == 0 && bytes == 0, "past the end: no packets, no error")
        var total: UInt64 = 0
        var size = UInt32(8)
        #expect(AudioFileGetProperty(wav, kAudioFilePropertyAudioDataByteCount, &size, &total) == noErr)
        var asked = UInt32(100)
        #expect(AudioFileReadBytes(wav, false, Int64(total) - 10, &asked, &buffer) == kAudioFileEndOfFileError)
        #expect(asked == 10)
        var one = UInt32(1)
        #expect(AudioFileWritePackets(wav, false, 2, nil, 0, &one, buffer) == kAudioFilePermissionsError)
        var table = AudioFilePacketTableInfo()
        size = UInt32(MemoryLayout<AudioFilePacketTableInfo>.size)
        #expect(AudioFileGetProperty(wav, kAudioFilePropertyPacketTableInfo, &size, &table) == kAudioFileUnsupportedPropertyError,
                "linear PCM has no packet table")
        var small = UInt16(0)
        size = 2
        #expect(AudioFileGetProperty(wav, kAudioFilePropertyAudioDataPacketCount, &size, &small) == kAudioFileBadPropertySizeError)
    }

    /// AudioFileStream: bytes that are no audio, and properties asked before they are known.
    @Test func theParserSaysWhatItDoesNotKnow() throws {
        let listener: AudioFileStream_PropertyListenerProc = { _, _, _, _ in }
        let packets: AudioFileStream_PacketsProc = { _, _, _, _, _ in }
        var stream: AudioFileStreamID?
        try #require(AudioFileStreamOpen(nil, listener, packets, 0, &stream) == noErr)
        let parser = try #require(stream)
        defer { AudioFileStreamClose(parser) }
        var format = AudioStreamBasicDescription()
        var size = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
        #expect(AudioFileStreamGetProperty(parser, kAudioFileStreamProperty_DataFormat, &size, &format) == kAudioFileStreamError_ValueUnknown)
        #expect(AudioFileStreamGetProperty(parser, fourCC("zzzz"), &size, &format) == kAudioFileStreamError_UnsupportedProperty)
        // The sniffer looks a bounded way into the bytes; at the end of the stream it is sure.
        let junk = [UInt8](repeating: 0x41, count: 70_000)
        let pushed = AudioFileStreamParseBytes(parser, UInt32(junk.count), junk, [])
        #expect(pushed == noErr || pushed == kAudioFileStreamError_UnsupportedFileType)
        if pushed == noErr {
            #expect(AudioFileStreamParseBytes(parser, 0, nil, []) == kAudioFileStreamError_UnsupportedFileType)
        }
    }
}

/// What the stream's property listener saw of the magic cookie.
final class CookieWatch {
    var sizes: [AudioFileStreamPropertyID: UInt32] = [:]
    var cookie: [UInt8] = []
    var format = AudioStreamBasicDescription()
}

@Suite struct ADTSCookieTests {
    /// Issue 52, class 6a: AudioFileStream opened with `kAudioFileAAC_ADTSType` offers the magic
    /// cookie (the AudioSpecificConfig of the ADTS header) once the data format is known, so a
    /// player that sets the cookie only when offered sets it.
    @Test(.enabled(if: Where.tool("ffmpeg") != nil, "ffmpeg is missing"))
    func anADTSStreamOffersItsCookie() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("aq-adts-\(UUID().uuidString.prefix(8)).aac").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        _ = try await run(try #require(Where.tool("ffmpeg")), ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=f=440:d=0.5:r=48000",
                                                               "-ac", "1", "-c:a", "aac", "-b:a", "64k", path])
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let watch = CookieWatch()
        let listener: AudioFileStream_PropertyListenerProc = { data, stream, property, _ in
            let watch = Unmanaged<CookieWatch>.fromOpaque(data).takeUnretainedValue()
            guard property == kAudioFileStreamProperty_DataFormat || property == kAudioFileStreamProperty_ReadyToProducePackets else { return }
            var size: UInt32 = 0
            var writable: DarwinBoolean = false
            guard AudioFileStreamGetPropertyInfo(stream, kAudioFileStreamProperty_MagicCookieData, &size, &writable) == noErr else { return }
            watch.sizes[property] = size
            watch.cookie = [UInt8](repeating: 0, count: Int(size))
            _ = AudioFileStreamGetProperty(stream, kAudioFileStreamProperty_MagicCookieData, &size, &watch.cookie)
            var formatSize = UInt32(MemoryLayout<AudioStreamBasicDescription>.size)
            _ = AudioFileStreamGetProperty(stream, kAudioFileStreamProperty_DataFormat, &formatSize, &watch.format)
        }
        let packets: AudioFileStream_PacketsProc = { _, _, _, _, _ in }
        var stream: AudioFileStreamID?
        try #require(AudioFileStreamOpen(Unmanaged.passUnretained(watch).toOpaque(), listener, packets, kAudioFileAAC_ADTSType, &stream) == noErr)
        let parser = try #require(stream)
        defer { AudioFileStreamClose(parser) }
        for start in stride(from: 0, to: bytes.count, by: 500) {
            let chunk = Array(bytes[start..<min(start + 500, bytes.count)])
            #expect(AudioFileStreamParseBytes(parser, UInt32(chunk.count), chunk, []) == noErr)
        }
        #expect(watch.sizes[kAudioFileStreamProperty_DataFormat] == 2)
        #expect(watch.sizes[kAudioFileStreamProperty_ReadyToProducePackets] == 2)
        // AAC LC (object type 2), 48 kHz (index 3), mono.
        #expect(watch.cookie == [0x11, 0x88])
        #expect(watch.format.mFormatID == kAudioFormatMPEG4AAC && watch.format.mSampleRate == 48_000)
    }
}

@Suite struct GlobalInfoTests {
    /// A list of `UInt32`s, asked as Apple's callers ask: the size, then the values.
    static func ids(_ id: AudioFilePropertyID, specifier: UInt32? = nil) -> (OSStatus, [UInt32]) {
        var given = specifier ?? 0
        let size = UInt32(specifier == nil ? 0 : 4)
        var bytes: UInt32 = 0
        let sized = withUnsafeMutablePointer(to: &given) { AudioFileGetGlobalInfoSize(id, size, specifier == nil ? nil : UnsafeMutableRawPointer($0), &bytes) }
        guard sized == noErr else { return (sized, []) }
        var values = [UInt32](repeating: 0, count: Int(bytes) / 4)
        let status = withUnsafeMutablePointer(to: &given) { AudioFileGetGlobalInfo(id, size, specifier == nil ? nil : UnsafeMutableRawPointer($0), &bytes, &values) }
        return (status, values)
    }

    /// Issue 52, class 6b: `AudioFileGetGlobalInfoSize` and `AudioFileGetGlobalInfo` answer
    /// Apple's selectors: readable and writable types, a type's name, formats and descriptions,
    /// extensions, MIME types and UTIs, and the types for an extension or a MIME type.
    @Test func globalInfoAnswersApplesSelectors() throws {
        let (readStatus, readable) = Self.ids(kAudioFileGlobalInfo_ReadableTypes)
        #expect(readStatus == noErr)
        for type in [kAudioFileMP3Type, kAudioFileWAVEType, kAudioFileAIFFType, kAudioFileCAFType, kAudioFileM4AType, kAudioFileAAC_ADTSType, kAudioFileFLACType] {
            #expect(readable.contains(type), "type \(type) is readable")
        }
        let (_, writable) = Self.ids(kAudioFileGlobalInfo_WritableTypes)
        #expect(Set(writable).isSuperset(of: [kAudioFileWAVEType, kAudioFileCAFType, kAudioFileM4AType, kAudioFileFLACType, kAudioFileAIFFType]))
        #expect(!writable.contains(kAudioFileMP3Type))

        // A type's name: a CFString the caller owns (taken as Swift code on a Mac takes it).
        var type = kAudioFileWAVEType
        var name: Unmanaged<CFString>?
        var size = UInt32(MemoryLayout<Unmanaged<CFString>?>.size)
        #expect(AudioFileGetGlobalInfo(kAudioFileGlobalInfo_FileTypeName, 4, &type, &size, &name) == noErr)
        #expect(name.map { $0.takeRetainedValue() as String } == "WAVE")

        // Lists of strings: every extension, a type's, its MIME types, every UTI.
        func strings(_ id: AudioFilePropertyID, _ type: AudioFileTypeID?) -> [String]? {
            var specifier = type ?? 0
            var array: Unmanaged<CFArray>?
            var size = UInt32(MemoryLayout<Unmanaged<CFArray>?>.size)
            let status = withUnsafeMutablePointer(to: &specifier) { pointer in
                AudioFileGetGlobalInfo(id, type == nil ? 0 : 4, type == nil ? nil : UnsafeMutableRawPointer(pointer), &size, &array)
            }
            guard status == noErr else { return nil }
            return array?.takeRetainedValue() as? [String]
        }
        let extensions = strings(kAudioFileGlobalInfo_AllExtensions, nil) ?? []
        #expect(Set(["mp3", "wav", "aiff", "caf", "m4a", "aac", "flac", "ogg"]).isSubset(of: Set(extensions)))
        #expect(strings(kAudioFileGlobalInfo_ExtensionsForType, kAudioFileM4AType)?.first == "m4a")
        #expect(strings(kAudioFileGlobalInfo_MIMETypesForType, kAudioFileMP3Type)?.contains("audio/mpeg") == true)
        #expect(strings(kAudioFileGlobalInfo_AllUTIs, nil)?.contains("public.mp3") == true)

        // The types for an extension and for a MIME type (a CFString specifier).
        var ext = Unmanaged.passRetained("M4A" as CFString)
        defer { ext.release() }
        let stringSize = UInt32(MemoryLayout<Unmanaged<CFString>>.size)
        var bytes: UInt32 = 0
        #expect(AudioFileGetGlobalInfoSize(kAudioFileGlobalInfo_TypesForExtension, stringSize, &ext, &bytes) == noErr)
        var types = [UInt32](repeating: 0, count: Int(bytes) / 4)
        #expect(AudioFileGetGlobalInfo(kAudioFileGlobalInfo_TypesForExtension, stringSize, &ext, &bytes, &types) == noErr)
        #expect(types == [kAudioFileM4AType])
        var mime = Unmanaged.passRetained("audio/x-wav" as CFString)
        defer { mime.release() }
        var one: UInt32 = 0
        bytes = 4
        #expect(AudioFileGetGlobalInfo(kAudioFileGlobalInfo_TypesForMIMEType, stringSize, &mime, &bytes, &one) == noErr)
        #expect(one == kAudioFileWAVEType)

        // Formats a type holds, and the descriptions it is written with.
        let (_, wavFormats) = Self.ids(kAudioFileGlobalInfo_AvailableFormatIDs, specifier: kAudioFileWAVEType)
        #expect(wavFormats.contains(kAudioFormatLinearPCM) && wavFormats.contains(kAudioFormatULaw))
        func descriptions(_ file: AudioFileTypeID, _ format: AudioFormatID) -> (OSStatus, [AudioStreamBasicDescription]) {
            var pair = AudioFileTypeAndFormatID(mFileType: file, mFormatID: format)
            var bytes: UInt32 = 0
            let sized = AudioFileGetGlobalInfoSize(kAudioFileGlobalInfo_AvailableStreamDescriptionsForFormat, UInt32(MemoryLayout<AudioFileTypeAndFormatID>.size), &pair, &bytes)
            guard sized == noErr else { return (sized, []) }
            var list = [AudioStreamBasicDescription](repeating: AudioStreamBasicDescription(), count: Int(bytes) / MemoryLayout<AudioStreamBasicDescription>.size)
            return (AudioFileGetGlobalInfo(kAudioFileGlobalInfo_AvailableStreamDescriptionsForFormat, UInt32(MemoryLayout<AudioFileTypeAndFormatID>.size), &pair, &bytes, &list), list)
        }
        let (wavStatus, wavPCM) = descriptions(kAudioFileWAVEType, kAudioFormatLinearPCM)
        #expect(wavStatus == noErr)
        #expect(wavPCM.contains { $0.mBitsPerChannel == 16 && $0.mFormatFlags & kAudioFormatFlagIsSignedInteger != 0 && $0.mFormatFlags & kAudioFormatFlagIsBigEndian == 0 })
        #expect(!wavPCM.contains { $0.mFormatFlags & kAudioFormatFlagIsBigEndian != 0 }, "a WAV is little-endian")
        let (aiffStatus, aiffPCM) = descriptions(kAudioFileAIFFType, kAudioFormatLinearPCM)
        #expect(aiffStatus == noErr && !aiffPCM.isEmpty && aiffPCM.allSatisfy { $0.mFormatFlags & kAudioFormatFlagIsFloat == 0 })
        #expect(descriptions(kAudioFileM4AType, kAudioFormatLinearPCM).0 == kAudioFileUnsupportedDataFormatError)
        #expect(descriptions(kAudioFileMP3Type, kAudioFormatMPEGLayer3).0 == kAudioFileUnsupportedFileTypeError)

        var nothing: UInt32 = 0
        bytes = 4
        #expect(AudioFileGetGlobalInfo(fourCC("zzzz"), 0, nil, &bytes, &nothing) == kAudioFileUnsupportedPropertyError)
        type = fourCC("xxxx")
        #expect(AudioFileGetGlobalInfo(kAudioFileGlobalInfo_FileTypeName, 4, &type, &size, &name) == kAudioFileUnsupportedFileTypeError)
    }
}
