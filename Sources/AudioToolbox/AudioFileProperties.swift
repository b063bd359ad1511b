internal import BufferQueue
internal import AudioFileStream
import Foundation

// AudioFile's properties (reading side).

/// A property's size, and whether it can be set.
@discardableResult
public func AudioFileGetPropertyInfo(_ inAudioFile: AudioFileID, _ inPropertyID: AudioFilePropertyID,
                                     _ outDataSize: UnsafeMutablePointer<UInt32>?, _ isWritable: UnsafeMutablePointer<UInt32>?) -> OSStatus {
    let object = FileObject.from(inAudioFile)
    return fileStatus("AudioFileGetPropertyInfo") {
        let value = try object.propertyValue(inPropertyID, input: nil)
        outDataSize?.pointee = UInt32(value.count)
        isWritable?.pointee = object.isWritable(inPropertyID) ? 1 : 0
    }
}

/// Reads a property into `outPropertyData`, whose size `ioDataSize` gives (and gets what was written).
@discardableResult
public func AudioFileGetProperty(_ inAudioFile: AudioFileID, _ inPropertyID: AudioFilePropertyID,
                                 _ ioDataSize: UnsafeMutablePointer<UInt32>, _ outPropertyData: UnsafeMutableRawPointer) -> OSStatus {
    let object = FileObject.from(inAudioFile)
    return fileStatus("AudioFileGetProperty") {
        let input = UnsafeRawBufferPointer(start: outPropertyData, count: Int(ioDataSize.pointee))
        let value = try object.propertyValue(inPropertyID, input: input)
        try writeValue(value, to: outPropertyData, size: ioDataSize, cut: FileObject.variableSize.contains(inPropertyID),
                       badSize: kAudioFileBadPropertySizeError)
    }
}

extension FileObject {
    /// Properties whose value is cut to the caller's buffer rather than refused when it is short.
    static let variableSize: Set<AudioFilePropertyID> = [
        kAudioFilePropertyMagicCookieData, kAudioFilePropertyChannelLayout, kAudioFilePropertyFormatList,
    ]

    func isWritable(_ id: AudioFilePropertyID) -> Bool {
        writer != nil && FileWriting.settable.contains(id)
    }

    /// A property's value as the bytes Apple's getter writes; `input` is what the caller passed in
    /// (for the translations, which read a struct and fill in the rest).
    func propertyValue(_ id: AudioFilePropertyID, input: UnsafeRawBufferPointer?) throws -> [UInt8] {
        func bytes<T>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value) { Array($0) } }
        func given<T>(_ type: T.Type) throws -> T {
            // GetPropertyInfo passes no input: the translations are sized by a zeroed struct.
            guard let input else {
                return [UInt8](repeating: 0, count: MemoryLayout<T>.size).withUnsafeBytes { $0.loadUnaligned(as: T.self) }
            }
            guard input.count >= MemoryLayout<T>.size else {
                throw StatusError(kAudioFileBadPropertySizeError, "property \(fourCharacterCode(Int32(bitPattern: id))) needs a \(T.self)")
            }
            return input.loadUnaligned(as: T.self)
        }
        if let writer { return try writer.withLock { try $0.propertyValue(id) } }
        let file = try readerOrThrow()
        let decoded = file.formatList.first ?? file.dataFormat
        let scale = Int64(file.indexFrameScale)
        switch id {
        case kAudioFilePropertyFileFormat: return bytes(file.fileType.typeID)
        case kAudioFilePropertyDataFormat: return bytes(AudioStreamBasicDescription(file.dataFormat))
        case kAudioFilePropertyFormatList:
            let formats = file.formatList.isEmpty ? [file.dataFormat] : file.formatList
            let items = formats.map { format in
                AudioFormatListItem(mASBD: AudioStreamBasicDescription(format),
                                    mChannelLayoutTag: kAudioChannelLayoutTag_DiscreteInOrder | UInt32(format.channelsPerFrame))
            }
            return items.withUnsafeBytes { Array($0) }
        case kAudioFilePropertyIsOptimized: return bytes(UInt32(1))
        case kAudioFilePropertyMagicCookieData:
            guard let cookie = file.magicCookie else {
                throw StatusError(kAudioFileUnsupportedPropertyError, "\(file.path) has no magic cookie")
            }
            return cookie
        case kAudioFilePropertyAudioDataByteCount: return bytes(UInt64(file.audioDataByteCount))
        case kAudioFilePropertyAudioDataPacketCount: return bytes(UInt64(file.packetCount))
        case kAudioFilePropertyMaximumPacketSize, kAudioFilePropertyPacketSizeUpperBound:
            return bytes(UInt32(clamping: file.maximumPacketSize ?? file.dataFormat.bytesPerPacket))
        case kAudioFilePropertyDataOffset: return bytes(Int64(file.dataOffset ?? 0))
        case kAudioFilePropertyChannelLayout:
            return channelLayoutBytes(file.channelLayout ?? .default(channels: decoded.channelsPerFrame))
        case kAudioFilePropertyPacketTableInfo:
            let info = try packetTable(file)
            return bytes(CAudioToolbox.AudioFilePacketTableInfo(mNumberValidFrames: info.valid, mPrimingFrames: Int32(clamping: info.priming),
                                                                mRemainderFrames: Int32(clamping: info.remainder)))
        case kAudioFilePropertyEstimatedDuration:
            let valid = (try? packetTable(file).valid) ?? file.totalFrames * scale
            return bytes(Float64(valid) / max(decoded.sampleRate, 1))
        case kAudioFilePropertyBitRate:
            if let rate = file.bitRate { return bytes(UInt32(clamping: rate)) }
            let seconds = Double(file.totalFrames * scale) / max(decoded.sampleRate, 1)
            return bytes(UInt32(clamping: seconds > 0 ? Int(Double(file.audioDataByteCount * 8) / seconds) : 0))
        case kAudioFilePropertyRestrictsRandomAccess: return bytes(UInt32(0))
        case kAudioFilePropertyPacketToRollDistance:
            var value = try given(AudioPacketRollDistanceTranslation.self)
            value.mRollDistance = Int64(abs(file.packetRollDistance ?? 0))
            return bytes(value)
        case kAudioFilePropertyPacketToFrame:
            var value = try given(AudioFramePacketTranslation.self)
            value.mFrame = file.frame(forPacket: value.mPacket) * scale
            return bytes(value)
        case kAudioFilePropertyFrameToPacket:
            var value = try given(AudioFramePacketTranslation.self)
            let frame = value.mFrame / scale
            if let (packet, offset) = file.packet(forFrame: frame) {
                value.mPacket = packet
                value.mFrameOffsetInPacket = UInt32(Int64(offset) * scale + value.mFrame % scale)
            } else {
                value.mPacket = file.packetCount
                value.mFrameOffsetInPacket = 0
            }
            return bytes(value)
        case kAudioFilePropertyPacketToByte:
            var value = try given(AudioBytePacketTranslation.self)
            guard let offset = file.byteOffset(ofPacket: value.mPacket) else {
                throw StatusError(kAudioFileInvalidPacketOffsetError, "no packet \(value.mPacket) (the file has \(file.packetCount))")
            }
            value.mByte = offset - (file.dataOffset ?? 0)
            value.mFlags = []
            return bytes(value)
        case kAudioFilePropertyInfoDictionary:
            let dictionary = infoDictionary(file) as NSDictionary
            return bytes(Unmanaged.passRetained(dictionary).toOpaque())
        default:
            throw StatusError(kAudioFileUnsupportedPropertyError, "property \(fourCharacterCode(Int32(bitPattern: id))) is not supported")
        }
    }

    /// Valid, priming and remainder frames in decoded frames.
    private func packetTable(_ file: AudioFile) throws -> (valid: Int64, priming: Int, remainder: Int) {
        if let info = file.packetTableInfo { return (info.validFrames, info.primingFrames, info.remainderFrames) }
        guard !file.dataFormat.isLinearPCM else {
            throw StatusError(kAudioFileUnsupportedPropertyError, "\(file.path) holds linear PCM: every frame is valid")
        }
        return (file.totalFrames * Int64(file.indexFrameScale), 0, 0)
    }

    private func infoDictionary(_ file: AudioFile) -> [String: String] {
        var info: [String: String] = [:]
        for (name, value) in file.metadata.tags { info[name.lowercased()] = value }
        if let title = file.metadata.title { info["title"] = title }
        if let artist = file.metadata.artist { info["artist"] = artist }
        if let album = file.metadata.album { info["album"] = album }
        let decoded = file.formatList.first ?? file.dataFormat
        let valid = (try? packetTable(file).valid) ?? file.totalFrames
        info["approximate duration in seconds"] = String(format: "%.3f", Double(valid) / max(decoded.sampleRate, 1))
        return info
    }
}

/// Sets a property of a file being written: the magic cookie, channel layout and data format
/// (before the first packet), the packet table (valid, priming and remainder frames, put down at
/// close), and the hints a writer may ignore (deferred size updates, reserved duration).
@discardableResult
public func AudioFileSetProperty(_ inAudioFile: AudioFileID, _ inPropertyID: AudioFilePropertyID, _ inDataSize: UInt32,
                                 _ inPropertyData: UnsafeRawPointer) -> OSStatus {
    let object = FileObject.from(inAudioFile)
    return fileStatus("AudioFileSetProperty") {
        guard let writer = object.writer else {
            throw StatusError(kAudioFileUnsupportedPropertyError, "the file was opened for reading: its properties cannot change")
        }
        try writer.withLock { try $0.setProperty(inPropertyID, UnsafeRawBufferPointer(start: inPropertyData, count: Int(inDataSize))) }
    }
}
