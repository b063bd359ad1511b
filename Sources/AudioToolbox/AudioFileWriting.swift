internal import BufferQueue
internal import AudioFileStream
internal import AudioPlayback
import Foundation

// AudioFile (AudioFile.h), writing: AudioFileCreateWithURL and AudioFileWritePackets over
// AudioPlayback's `AudioFileWriter` in packet mode, whose container writers live in AudioFileStream.

/// A file being written through the C API. The library's writer is made when the format, cookie
/// and layout are settled (re-made while no packet is written, as those properties are set), and
/// closed with the packet table the caller set.
final class FileWriting {
    static let settable: Set<AudioFilePropertyID> = [
        kAudioFilePropertyMagicCookieData, kAudioFilePropertyChannelLayout, kAudioFilePropertyPacketTableInfo,
        kAudioFilePropertyDataFormat, kAudioFilePropertyDeferSizeUpdates, kAudioFilePropertyReserveDuration,
    ]

    let path: String
    let type: AudioFileType
    let typeID: AudioFileTypeID
    private(set) var format: BufferQueue.AudioStreamDescription
    private(set) var cookie: [UInt8]?
    private(set) var layout: BufferQueue.AudioChannelLayout?
    private var table: AudioEncodingTotals?
    private var writer: AudioFileWriter?
    private(set) var packets: Int64 = 0
    private(set) var bytes: Int64 = 0
    private var largestPacket = 0
    private var closed = false

    init(path: String, type: AudioFileType, typeID: AudioFileTypeID, format: BufferQueue.AudioStreamDescription) throws {
        self.path = path
        self.type = type
        self.typeID = typeID
        self.format = format
        try remake()
    }

    /// (Re)creates the library's writer with what is known now; only before the first packet.
    private func remake() throws {
        try writer?.close()
        writer = nil
        do {
            writer = try AudioFileWriter(path: path, fileType: type, packetFormat: format, magicCookie: cookie, channelLayout: layout,
                                         maximumPacketSize: largestPacket)
        } catch let error as AudioFileWriterError {
            let status: OSStatus = error.code == .unsupportedFormat ? kAudioFileUnsupportedDataFormatError : kAudioFilePermissionsError
            throw StatusError(status, error.description)
        }
    }

    func write(_ data: UnsafeRawBufferPointer, descriptions: [AudioPacketDescription], packetCount: Int) throws {
        guard !closed, let writer else { throw StatusError(kAudioFileNotOpenError, "\(path) is closed") }
        do {
            try writer.writePackets(data, descriptions: descriptions)
        } catch let error as AudioFileWriterError {
            throw StatusError(error.code == .unsupportedFormat ? kAudioFileInvalidPacketOffsetError : kAudioFileUnspecifiedError, error.description)
        }
        packets += Int64(packetCount)
        bytes += Int64(descriptions.isEmpty ? data.count : descriptions.reduce(0) { $0 + $1.dataByteSize })
        largestPacket = max(largestPacket, descriptions.map(\.dataByteSize).max() ?? format.bytesPerPacket)
    }

    func close() throws {
        guard !closed else { return }
        closed = true
        do {
            try writer?.close(totals: table, magicCookie: cookie)
        } catch let error as AudioFileWriterError {
            throw StatusError(kAudioFileUnspecifiedError, error.description)
        }
    }

    func setProperty(_ id: AudioFilePropertyID, _ data: UnsafeRawBufferPointer) throws {
        func before(_ what: String) throws {
            guard packets == 0 else {
                throw StatusError(kAudioFileOperationNotSupportedError, "\(what) can change only before the first packet is written")
            }
        }
        switch id {
        case kAudioFilePropertyMagicCookieData:
            cookie = Array(data)
            // The container states the cookie ahead of the packets: once they are written, a new
            // cookie goes down at close (in place, where the container allows).
            if packets == 0 { try remake() }
        case kAudioFilePropertyChannelLayout:
            try before("the channel layout")
            guard let base = data.baseAddress,
                  let given = libraryChannelLayout(base, size: UInt32(data.count), channels: format.channelsPerFrame) else {
                throw StatusError(kAudioFileInvalidChunkError, "the channel layout does not describe \(format.channelsPerFrame) channels")
            }
            layout = given
            try remake()
        case kAudioFilePropertyDataFormat:
            try before("the data format")
            guard data.count >= MemoryLayout<AudioStreamBasicDescription>.size else {
                throw StatusError(kAudioFileBadPropertySizeError, "the data format is an AudioStreamBasicDescription")
            }
            format = data.loadUnaligned(as: AudioStreamBasicDescription.self).library
            try remake()
        case kAudioFilePropertyPacketTableInfo:
            guard data.count >= MemoryLayout<CAudioToolbox.AudioFilePacketTableInfo>.size else {
                throw StatusError(kAudioFileBadPropertySizeError, "the packet table is an AudioFilePacketTableInfo")
            }
            let info = data.loadUnaligned(as: CAudioToolbox.AudioFilePacketTableInfo.self)
            guard info.mNumberValidFrames >= 0, info.mPrimingFrames >= 0, info.mRemainderFrames >= 0 else {
                throw StatusError(kAudioFileInvalidPacketOffsetError, "a packet table counts no negative frames")
            }
            table = AudioEncodingTotals(validFrames: info.mNumberValidFrames, primingFrames: Int(info.mPrimingFrames),
                                        remainderFrames: Int(info.mRemainderFrames))
        case kAudioFilePropertyDeferSizeUpdates, kAudioFilePropertyReserveDuration:
            // Sizes are put down at close (and at a recording's checkpoints) anyway.
            break
        default:
            throw StatusError(kAudioFileUnsupportedPropertyError, "property \(fourCharacterCode(Int32(bitPattern: id))) cannot be set")
        }
    }

    func propertyValue(_ id: AudioFilePropertyID) throws -> [UInt8] {
        func bytes<T>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value) { Array($0) } }
        switch id {
        case kAudioFilePropertyFileFormat: return bytes(typeID)
        case kAudioFilePropertyDataFormat: return bytes(AudioStreamBasicDescription(format))
        case kAudioFilePropertyMagicCookieData:
            guard let cookie else { throw StatusError(kAudioFileUnsupportedPropertyError, "no magic cookie was set") }
            return cookie
        case kAudioFilePropertyChannelLayout: return channelLayoutBytes(layout ?? .default(channels: format.channelsPerFrame))
        case kAudioFilePropertyAudioDataPacketCount: return bytes(UInt64(packets))
        case kAudioFilePropertyAudioDataByteCount: return bytes(UInt64(self.bytes))
        case kAudioFilePropertyMaximumPacketSize, kAudioFilePropertyPacketSizeUpperBound:
            return bytes(UInt32(clamping: max(largestPacket, format.bytesPerPacket)))
        case kAudioFilePropertyPacketTableInfo:
            let info = table ?? AudioEncodingTotals(validFrames: writer?.validFrames ?? 0, primingFrames: 0, remainderFrames: 0)
            return bytes(CAudioToolbox.AudioFilePacketTableInfo(mNumberValidFrames: info.validFrames, mPrimingFrames: Int32(clamping: info.primingFrames),
                                                                mRemainderFrames: Int32(clamping: info.remainderFrames)))
        default:
            throw StatusError(kAudioFileUnsupportedPropertyError, "property \(fourCharacterCode(Int32(bitPattern: id))) is not known while writing")
        }
    }
}

/// Creates a file to write packets of `inFormat` into: CAF, WAVE, AIFF, AIFC, M4A/MP4 or FLAC
/// (`kAudioFileFlags_EraseFile` replaces an existing file; without it an existing file is refused).
@discardableResult
public func AudioFileCreateWithURL(_ inFileRef: CFURL, _ inFileType: AudioFileTypeID, _ inFormat: UnsafePointer<AudioStreamBasicDescription>,
                                   _ inFlags: AudioFileFlags, _ outAudioFile: UnsafeMutablePointer<AudioFileID?>) -> OSStatus {
    fileStatus("AudioFileCreateWithURL") {
        Setup.once()
        let path = try filePath(inFileRef)
        guard let type = AudioFileType(typeID: inFileType), type.isWritable else {
            throw StatusError(kAudioFileUnsupportedFileTypeError,
                              "\(fourCharacterCode(Int32(bitPattern: inFileType))) files are not written (CAF, WAVE, AIFF, AIFC, M4A and FLAC are)")
        }
        if FileManager.default.fileExists(atPath: path), !inFlags.contains(.eraseFile) {
            throw StatusError(kAudioFilePermissionsError, "\(path) exists; pass kAudioFileFlags_EraseFile to replace it")
        }
        let writing = try FileWriting(path: path, type: type, typeID: inFileType, format: inFormat.pointee.library)
        outAudioFile.pointee = Retained.hand(FileObject(writer: Lock(writing)))
    }
}

/// Appends packets: `inStartingPacket` must be the number of packets written so far. Packets of
/// variable size need their descriptions (offsets into `inBuffer`).
@discardableResult
public func AudioFileWritePackets(_ inAudioFile: AudioFileID, _ inUseCache: Bool, _ inNumBytes: UInt32,
                                  _ inPacketDescriptions: UnsafePointer<AudioStreamPacketDescription>?, _ inStartingPacket: Int64,
                                  _ ioNumPackets: UnsafeMutablePointer<UInt32>, _ inBuffer: UnsafeRawPointer) -> OSStatus {
    let object = FileObject.from(inAudioFile)
    return fileStatus("AudioFileWritePackets") {
        try object.writerOrThrow().withLock { writing in
            guard inStartingPacket == writing.packets else {
                throw StatusError(kAudioFileInvalidPacketOffsetError,
                                  "packets are appended: the next is packet \(writing.packets), not \(inStartingPacket)")
            }
            let count = Int(ioNumPackets.pointee)
            var descriptions: [AudioPacketDescription] = []
            if let inPacketDescriptions, count > 0 {
                descriptions = UnsafeBufferPointer(start: inPacketDescriptions, count: count).map(\.library)
            } else if writing.format.bytesPerPacket > 0 {
                guard Int(inNumBytes) >= count * writing.format.bytesPerPacket else {
                    throw StatusError(kAudioFileInvalidPacketOffsetError,
                                      "\(count) packets of \(writing.format.bytesPerPacket) bytes do not fit in \(inNumBytes) bytes")
                }
            } else {
                throw StatusError(kAudioFileInvalidPacketOffsetError, "packets of varying size need their descriptions")
            }
            let length = descriptions.isEmpty ? count * writing.format.bytesPerPacket : Int(inNumBytes)
            try writing.write(UnsafeRawBufferPointer(start: inBuffer, count: length), descriptions: descriptions, packetCount: count)
        }
    }
}

/// Appends bytes of a constant-packet-size format (linear PCM): `inStartingByte` must be the
/// number of bytes written so far.
@discardableResult
public func AudioFileWriteBytes(_ inAudioFile: AudioFileID, _ inUseCache: Bool, _ inStartingByte: Int64,
                                _ ioNumBytes: UnsafeMutablePointer<UInt32>, _ inBuffer: UnsafeRawPointer) -> OSStatus {
    let object = FileObject.from(inAudioFile)
    return fileStatus("AudioFileWriteBytes") {
        try object.writerOrThrow().withLock { writing in
            let size = writing.format.bytesPerPacket
            guard size > 0 else { throw StatusError(kAudioFileOperationNotSupportedError, "bytes are written only for constant-size packets") }
            guard inStartingByte == writing.bytes else {
                throw StatusError(kAudioFilePositionError, "bytes are appended: the next is byte \(writing.bytes), not \(inStartingByte)")
            }
            let count = Int(ioNumBytes.pointee) / size
            try writing.write(UnsafeRawBufferPointer(start: inBuffer, count: count * size), descriptions: [], packetCount: count)
            ioNumBytes.pointee = UInt32(count * size)
        }
    }
}
