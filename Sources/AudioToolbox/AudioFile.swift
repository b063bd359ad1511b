internal import BufferQueue
internal import AudioFileStream
internal import AudioPlayback
import Foundation

// AudioFile (AudioFile.h), reading: over AudioFileStream's `AudioFile`, an index of where every
// packet lies.

/// What an `AudioFileID` points to: a file being read, or one being written (its calls one at a
/// time: a recorder writes from its input callback's thread and sets properties from another).
final class FileObject: Sendable {
    let reader: AudioFile?
    let writer: Lock<FileWriting>?

    init(reader: AudioFile) {
        self.reader = reader
        writer = nil
    }

    init(writer: Lock<FileWriting>) {
        reader = nil
        self.writer = writer
    }

    static func from(_ ref: AudioFileID) -> FileObject { Retained.object(FileObject.self, ref) }
}

extension AudioFileStreamError.Code {
    /// The result code Apple's AudioFile returns for this kind of failure.
    var audioFileStatus: OSStatus {
        switch self {
        case .unsupportedFileType: return kAudioFileUnsupportedFileTypeError
        case .unsupportedDataFormat: return kAudioFileUnsupportedDataFormatError
        case .invalidData, .noAudio, .tooLarge, .indexAfterMediaData: return kAudioFileInvalidFileError
        case .truncated: return kAudioFileEndOfFileError
        case .invalidOperation: return kAudioFileOperationNotSupportedError
        }
    }
}

extension AudioFileType {
    /// The library's container for an Apple file type id (0: none).
    init?(typeID: AudioFileTypeID) {
        switch typeID {
        case kAudioFileMP3Type, kAudioFileMP2Type, kAudioFileMP1Type: self = .mp3
        case kAudioFileAAC_ADTSType: self = .adts
        case kAudioFileMPEG4Type, kAudioFileM4AType, kAudioFileM4BType, kAudioFile3GPType, kAudioFile3GP2Type: self = .mp4
        case kAudioFileCAFType: self = .caf
        case kAudioFileWAVEType: self = .wave
        case kAudioFileAIFFType: self = .aiff
        case kAudioFileAIFCType: self = .aifc
        case kAudioFileAMRType: self = .amr
        case kAudioFileFLACType: self = .flac
        default:
            // Ogg, transport streams and Matroska, by the codes this library gives them.
            guard let own = [AudioFileType.ogg, .mpegTransportStream, .matroska].first(where: { $0.typeID == typeID }) else { return nil }
            self = own
        }
    }

    /// Apple's file type id (Ogg and transport streams, which Apple does not read, keep their own codes).
    var typeID: AudioFileTypeID {
        switch self {
        case .mp3: return kAudioFileMP3Type
        case .adts: return kAudioFileAAC_ADTSType
        case .mp4: return kAudioFileM4AType
        case .caf: return kAudioFileCAFType
        case .wave: return kAudioFileWAVEType
        case .aiff: return kAudioFileAIFFType
        case .aifc: return kAudioFileAIFCType
        case .amr: return kAudioFileAMRType
        case .flac: return kAudioFileFLACType
        case .ogg, .mpegTransportStream, .matroska:
            let code = Array(rawValue.utf8)
            return code.reduce(0) { $0 << 8 | AudioFileTypeID($1) }
        }
    }
}

/// The path of a file URL.
func filePath(_ url: CFURL) throws -> String {
    guard url.isFileURL, let path = url.path else {
        throw StatusError(kAudio_BadFilePathError, "\(url) is not a file URL")
    }
    return path
}

/// Opens an existing file for reading (any container this library reads: MP3, AAC/ADTS, M4A/MP4,
/// CAF, WAV, AIFF/AIFC, FLAC, Ogg, AMR). `inFileTypeHint` may be 0.
@discardableResult
public func AudioFileOpenURL(_ inFileRef: CFURL, _ inPermissions: AudioFilePermissions, _ inFileTypeHint: AudioFileTypeID,
                             _ outAudioFile: UnsafeMutablePointer<AudioFileID?>) -> OSStatus {
    fileStatus("AudioFileOpenURL") {
        let path = try filePath(inFileRef)
        guard inPermissions == .readPermission else {
            throw StatusError(kAudioFilePermissionsError, "\(path): only reading an existing file is supported; create files with AudioFileCreateWithURL")
        }
        guard FileManager.default.fileExists(atPath: path) else {
            throw StatusError(kAudioFileFileNotFoundError, "\(path) does not exist")
        }
        let reader = try AudioFile(path: path, fileTypeHint: AudioFileType(typeID: inFileTypeHint))
        outAudioFile.pointee = Retained.hand(FileObject(reader: reader))
    }
}

/// Closes a file; a file being written is completed first (its gapless numbers and cookie put
/// down). The reference is released either way.
@discardableResult
public func AudioFileClose(_ inAudioFile: AudioFileID) -> OSStatus {
    let object = FileObject.from(inAudioFile)
    let status = fileStatus("AudioFileClose") {
        try object.writer?.withLock { try $0.close() }
    }
    Retained.release(FileObject.self, inAudioFile)
    return status
}

extension FileObject {
    func readerOrThrow() throws -> AudioFile {
        guard let reader else { throw StatusError(kAudioFilePermissionsError, "the file was created for writing; it is read after AudioFileClose") }
        return reader
    }

    func writerOrThrow() throws -> Lock<FileWriting> {
        guard let writer else { throw StatusError(kAudioFilePermissionsError, "the file was opened for reading") }
        return writer
    }
}

/// Reads packets from `inStartingPacket`: as many as `ioNumPackets` asks and `ioNumBytes` holds
/// (both get what was read; 0 packets past the end). Packet descriptions' offsets are into `outBuffer`.
@discardableResult
public func AudioFileReadPacketData(_ inAudioFile: AudioFileID, _ inUseCache: Bool, _ ioNumBytes: UnsafeMutablePointer<UInt32>,
                                    _ outPacketDescriptions: UnsafeMutablePointer<AudioStreamPacketDescription>?,
                                    _ inStartingPacket: Int64, _ ioNumPackets: UnsafeMutablePointer<UInt32>,
                                    _ outBuffer: UnsafeMutableRawPointer?) -> OSStatus {
    let object = FileObject.from(inAudioFile)
    return fileStatus("AudioFileReadPacketData") {
        let file = try object.readerOrThrow()
        try readPackets(file, start: inStartingPacket, packets: ioNumPackets, bytes: ioNumBytes, limitBytes: true,
                        descriptions: outPacketDescriptions, buffer: outBuffer)
    }
}

/// Reads `ioNumPackets` packets from `inStartingPacket` (the buffer must hold them; deprecated on a
/// Mac in favour of `AudioFileReadPacketData`). `outNumBytes` gets the bytes read.
@discardableResult
public func AudioFileReadPackets(_ inAudioFile: AudioFileID, _ inUseCache: Bool, _ outNumBytes: UnsafeMutablePointer<UInt32>,
                                 _ outPacketDescriptions: UnsafeMutablePointer<AudioStreamPacketDescription>?,
                                 _ inStartingPacket: Int64, _ ioNumPackets: UnsafeMutablePointer<UInt32>,
                                 _ outBuffer: UnsafeMutableRawPointer?) -> OSStatus {
    let object = FileObject.from(inAudioFile)
    return fileStatus("AudioFileReadPackets") {
        let file = try object.readerOrThrow()
        try readPackets(file, start: inStartingPacket, packets: ioNumPackets, bytes: outNumBytes, limitBytes: false,
                        descriptions: outPacketDescriptions, buffer: outBuffer)
    }
}

private func readPackets(_ file: AudioFile, start: Int64, packets: UnsafeMutablePointer<UInt32>, bytes: UnsafeMutablePointer<UInt32>,
                         limitBytes: Bool, descriptions: UnsafeMutablePointer<AudioStreamPacketDescription>?,
                         buffer: UnsafeMutableRawPointer?) throws {
    guard start >= 0 else { throw StatusError(kAudioFileInvalidPacketOffsetError, "packet \(start) is before the first") }
    let wanted = Int(packets.pointee)
    guard start < file.packetCount, wanted > 0 else {
        packets.pointee = 0
        bytes.pointee = 0
        return
    }
    let read = try file.readPackets(from: start, count: wanted)
    // Packet sizes: described ones, or the constant size.
    let sizes: [Int] = read.descriptions.isEmpty
        ? Array(repeating: file.dataFormat.bytesPerPacket, count: read.packetCount)
        : read.descriptions.map(\.dataByteSize)
    var count = sizes.count, total = sizes.reduce(0, +)
    if limitBytes {
        let room = Int(bytes.pointee)
        count = 0
        total = 0
        while count < sizes.count, total + sizes[count] <= room {
            total += sizes[count]
            count += 1
        }
        if count == 0, !sizes.isEmpty {
            throw StatusError(kAudioFileInvalidPacketOffsetError, "packet \(start) of \(sizes[0]) bytes does not fit in \(room) bytes")
        }
    }
    if let buffer, total > 0 {
        read.data.withUnsafeBytes { if let base = $0.baseAddress { buffer.copyMemory(from: base, byteCount: total) } }
    }
    if let descriptions {
        if read.descriptions.isEmpty {
            for index in 0..<count {
                descriptions[index] = AudioStreamPacketDescription(mStartOffset: Int64(index * file.dataFormat.bytesPerPacket),
                                                                   mVariableFramesInPacket: 0,
                                                                   mDataByteSize: UInt32(file.dataFormat.bytesPerPacket))
            }
        } else {
            for index in 0..<count { descriptions[index] = AudioStreamPacketDescription(read.descriptions[index]) }
        }
    }
    packets.pointee = UInt32(count)
    bytes.pointee = UInt32(total)
}

/// Reads audio data bytes from `inStartingByte` (counted from the start of the audio data).
/// Returns `kAudioFileEndOfFileError` with the bytes there were when the data ends first.
@discardableResult
public func AudioFileReadBytes(_ inAudioFile: AudioFileID, _ inUseCache: Bool, _ inStartingByte: Int64,
                               _ ioNumBytes: UnsafeMutablePointer<UInt32>, _ outBuffer: UnsafeMutableRawPointer) -> OSStatus {
    let object = FileObject.from(inAudioFile)
    var ended = false
    let status = fileStatus("AudioFileReadBytes") {
        let file = try object.readerOrThrow()
        guard inStartingByte >= 0 else { throw StatusError(kAudioFilePositionError, "byte \(inStartingByte) is before the audio data") }
        let available = max(0, file.audioDataByteCount - inStartingByte)
        let count = Int(min(Int64(ioNumBytes.pointee), available))
        let data = try file.readBytes(at: (file.dataOffset ?? 0) + inStartingByte, count: count)
        data.withUnsafeBytes { if let base = $0.baseAddress { outBuffer.copyMemory(from: base, byteCount: data.count) } }
        ended = data.count < Int(ioNumBytes.pointee)
        ioNumBytes.pointee = UInt32(data.count)
    }
    return status == noErr && ended ? kAudioFileEndOfFileError : status
}

/// Opens audio the caller reads itself: `inReadFunc` copies bytes from a position, and
/// `inGetSizeFunc` says how many there are. Reading only (a write function is not used). The
/// functions are called during this call and while packets are read.
@discardableResult
public func AudioFileOpenWithCallbacks(_ inClientData: UnsafeMutableRawPointer, _ inReadFunc: @escaping AudioFile_ReadProc,
                                       _ inWriteFunc: AudioFile_WriteProc?, _ inGetSizeFunc: @escaping AudioFile_GetSizeProc,
                                       _ inSetSizeFunc: AudioFile_SetSizeProc?, _ inFileTypeHint: AudioFileTypeID,
                                       _ outAudioFile: UnsafeMutablePointer<AudioFileID?>) -> OSStatus {
    fileStatus("AudioFileOpenWithCallbacks") {
        Setup.once()
        let client = UserData(pointer: inClientData)
        let read = UncheckedBox(inReadFunc)
        let size = inGetSizeFunc(inClientData)
        guard size >= 0 else { throw StatusError(kAudioFileInvalidFileError, "the size function says \(size) bytes") }
        let reader = try AudioFile(name: "audio read through callbacks", size: size, fileTypeHint: AudioFileType(typeID: inFileTypeHint)) { offset, into in
            guard let base = into.baseAddress, offset < size else { return 0 }
            var actual = UInt32(0)
            let count = UInt32(min(Int64(into.count), size - offset, Int64(UInt32.max)))
            let status = read.value(client.pointer ?? base, offset, count, base, &actual)
            guard status == noErr || status == kAudioFileEndOfFileError else {
                throw StatusError(status, "the read function returned \(status) at byte \(offset)")
            }
            return Int(min(actual, count))
        }
        outAudioFile.pointee = Retained.hand(FileObject(reader: reader))
    }
}
