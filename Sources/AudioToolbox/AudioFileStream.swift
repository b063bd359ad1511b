internal import BufferQueue
internal import AudioFileStream
import Foundation

// AudioFileStream (AudioFileStream.h) over the library's push parser of the same name.

/// What an `AudioFileStreamID` points to: the library's parser and the caller's callbacks.
// @unchecked: a C API object: its calls come one at a time, as Apple's AudioFileStream asks of its caller.
final class StreamObject {
    let stream: AudioFileStream
    let clientData: UserData
    let listener: AudioFileStream_PropertyListenerProc
    let packetsProc: AudioFileStream_PacketsProc
    /// Whether the next bytes follow a seek (`AudioFileStreamSeek`) or a discontinuity.
    var afterSeek = false

    init(stream: AudioFileStream, clientData: UnsafeMutableRawPointer?, listener: @escaping AudioFileStream_PropertyListenerProc,
         packets: @escaping AudioFileStream_PacketsProc) {
        self.stream = stream
        self.clientData = UserData(pointer: clientData)
        self.listener = listener
        packetsProc = packets
    }

    static func from(_ ref: AudioFileStreamID) -> StreamObject { Retained.object(StreamObject.self, ref) }

    /// Calls the caller back for each event, in order: properties through the listener (with
    /// `PropertyIsCached`: every value stays readable), packets through the packets procedure.
    func deliver(_ events: [AudioFileStreamEvent], ref: AudioFileStreamID) {
        for event in events {
            switch event {
            case .property(let property):
                for id in Self.propertyIDs(property) {
                    var flags: AudioFileStreamPropertyFlags = .propertyIsCached
                    listener(clientData.pointer ?? UnsafeMutableRawPointer(ref), ref, id, &flags)
                }
            case .packets(let packets):
                deliver(packets, ref: ref)
            case .link, .seekRequired, .segmentTimestamp, .timedMetadata:
                break
            }
        }
    }

    private func deliver(_ packets: AudioFilePackets, ref: AudioFileStreamID) {
        guard packets.packetCount > 0 else { return }
        // A caller that gave no client data gets a pointer it never reads (Swift's non-optional
        // parameter cannot be null).
        let client = clientData.pointer ?? UnsafeMutableRawPointer(ref)
        packets.data.withUnsafeBytes { bytes in
            guard let base = bytes.baseAddress else { return }
            if packets.descriptions.isEmpty {
                packetsProc(client, UInt32(bytes.count), UInt32(packets.packetCount), base, nil)
            } else {
                var descriptions = packets.descriptions.map(AudioStreamPacketDescription.init)
                descriptions.withUnsafeMutableBufferPointer { pointer in
                    packetsProc(client, UInt32(bytes.count), UInt32(pointer.count), base, pointer.baseAddress)
                }
            }
        }
    }

    /// Apple's property ids for a property the library announces.
    static func propertyIDs(_ property: AudioFileStreamProperty) -> [AudioFileStreamPropertyID] {
        switch property {
        case .fileFormat: return [kAudioFileStreamProperty_FileFormat]
        case .dataFormat: return [kAudioFileStreamProperty_DataFormat]
        case .formatList: return [kAudioFileStreamProperty_FormatList]
        case .magicCookie: return [kAudioFileStreamProperty_MagicCookieData]
        case .dataOffset: return [kAudioFileStreamProperty_DataOffset]
        case .audioDataByteCount: return [kAudioFileStreamProperty_AudioDataByteCount]
        case .audioDataPacketCount: return [kAudioFileStreamProperty_AudioDataPacketCount]
        case .bitRate: return [kAudioFileStreamProperty_BitRate]
        case .maximumPacketSize: return [kAudioFileStreamProperty_MaximumPacketSize, kAudioFileStreamProperty_PacketSizeUpperBound]
        case .channelLayout: return [kAudioFileStreamProperty_ChannelLayout]
        case .packetTableInfo: return [kAudioFileStreamProperty_PacketTableInfo]
        case .metadata: return [kAudioFileStreamProperty_InfoDictionary]
        case .readyToProducePackets: return [kAudioFileStreamProperty_ReadyToProducePackets]
        @unknown default: return []
        }
    }
}

extension AudioFileStreamError.Code {
    /// The result code Apple's AudioFileStream returns for this kind of failure.
    var audioFileStreamStatus: OSStatus {
        switch self {
        case .unsupportedFileType: return kAudioFileStreamError_UnsupportedFileType
        case .unsupportedDataFormat: return kAudioFileStreamError_UnsupportedDataFormat
        case .invalidData, .noAudio, .tooLarge: return kAudioFileStreamError_InvalidFile
        case .truncated: return kAudioFileStreamError_DataUnavailable
        case .indexAfterMediaData: return kAudioFileStreamError_NotOptimized
        case .invalidOperation: return kAudioFileStreamError_IllegalOperation
        }
    }
}

/// Opens a parser. `inPropertyListenerProc` is called as properties become known, in order,
/// ending with `kAudioFileStreamProperty_ReadyToProducePackets`; `inPacketsProc` with each run of
/// packets; both during `AudioFileStreamParseBytes`, on its thread.
@discardableResult
public func AudioFileStreamOpen(_ inClientData: UnsafeMutableRawPointer?,
                                _ inPropertyListenerProc: @escaping AudioFileStream_PropertyListenerProc,
                                _ inPacketsProc: @escaping AudioFileStream_PacketsProc, _ inFileTypeHint: AudioFileTypeID,
                                _ outAudioFileStream: UnsafeMutablePointer<AudioFileStreamID?>) -> OSStatus {
    Setup.once()
    let stream = AudioFileStream(fileTypeHint: AudioFileType(typeID: inFileTypeHint))
    let object = StreamObject(stream: stream, clientData: inClientData, listener: inPropertyListenerProc, packets: inPacketsProc)
    outAudioFileStream.pointee = Retained.hand(object)
    return noErr
}

/// Parses bytes, calling the listener and packets procedures for what they complete. With
/// `.discontinuity` the bytes do not follow the previous ones (after a seek). Zero bytes (or a nil
/// pointer) end the stream: packets held back for confirmation are delivered (Apple's parser has
/// no such call; a stream that is simply abandoned loses nothing else).
@discardableResult
public func AudioFileStreamParseBytes(_ inAudioFileStream: AudioFileStreamID, _ inDataByteSize: UInt32, _ inData: UnsafeRawPointer?,
                                      _ inFlags: AudioFileStreamParseFlags) -> OSStatus {
    let object = StreamObject.from(inAudioFileStream)
    return streamStatus("AudioFileStreamParseBytes") {
        guard let inData, inDataByteSize > 0 else {
            object.deliver(try object.stream.finish(), ref: inAudioFileStream)
            return
        }
        let discontinuity = inFlags.contains(.discontinuity) || object.afterSeek
        object.afterSeek = false
        let events = try object.stream.parse(UnsafeRawBufferPointer(start: inData, count: Int(inDataByteSize)), discontinuity: discontinuity)
        object.deliver(events, ref: inAudioFileStream)
    }
}

/// Where packet `inPacketOffset` starts, counted from the start of the audio data
/// (`kAudioFileStreamProperty_DataOffset`); `.offsetIsEstimated` when it comes from the bit rate.
/// Push bytes from there next.
@discardableResult
public func AudioFileStreamSeek(_ inAudioFileStream: AudioFileStreamID, _ inPacketOffset: Int64, _ outDataByteOffset: UnsafeMutablePointer<Int64>,
                                _ ioFlags: UnsafeMutablePointer<AudioFileStreamSeekFlags>) -> OSStatus {
    let object = StreamObject.from(inAudioFileStream)
    return streamStatus("AudioFileStreamSeek") {
        let result = try object.stream.seek(toPacket: inPacketOffset)
        outDataByteOffset.pointee = result.byteOffset - (object.stream.dataOffset ?? 0)
        ioFlags.pointee = result.isEstimated ? .offsetIsEstimated : []
        object.afterSeek = true
    }
}

/// A property's size, and whether it can be set (none can).
@discardableResult
public func AudioFileStreamGetPropertyInfo(_ inAudioFileStream: AudioFileStreamID, _ inPropertyID: AudioFileStreamPropertyID,
                                           _ outPropertyDataSize: UnsafeMutablePointer<UInt32>?,
                                           _ outWritable: UnsafeMutablePointer<DarwinBoolean>?) -> OSStatus {
    let object = StreamObject.from(inAudioFileStream)
    return streamStatus("AudioFileStreamGetPropertyInfo") {
        let value = try object.propertyValue(inPropertyID, input: nil)
        outPropertyDataSize?.pointee = UInt32(value.count)
        outWritable?.pointee = false
    }
}

/// Reads a property into `outPropertyData`, whose size `ioPropertyDataSize` gives.
@discardableResult
public func AudioFileStreamGetProperty(_ inAudioFileStream: AudioFileStreamID, _ inPropertyID: AudioFileStreamPropertyID,
                                       _ ioPropertyDataSize: UnsafeMutablePointer<UInt32>,
                                       _ outPropertyData: UnsafeMutableRawPointer) -> OSStatus {
    let object = StreamObject.from(inAudioFileStream)
    return streamStatus("AudioFileStreamGetProperty") {
        let input = UnsafeRawBufferPointer(start: outPropertyData, count: Int(ioPropertyDataSize.pointee))
        let value = try object.propertyValue(inPropertyID, input: input)
        let cut = [kAudioFileStreamProperty_MagicCookieData, kAudioFileStreamProperty_ChannelLayout,
                   kAudioFileStreamProperty_FormatList].contains(inPropertyID)
        try writeValue(value, to: outPropertyData, size: ioPropertyDataSize, cut: cut, badSize: kAudioFileStreamError_BadPropertySize)
    }
}

/// Sets a property: none is settable (`kAudioFileStreamError_IllegalOperation`, or
/// `UnsupportedProperty` for an unknown id), as for most of Apple's.
@discardableResult
public func AudioFileStreamSetProperty(_ inAudioFileStream: AudioFileStreamID, _ inPropertyID: AudioFileStreamPropertyID,
                                       _ inPropertyDataSize: UInt32, _ inPropertyData: UnsafeRawPointer) -> OSStatus {
    let object = StreamObject.from(inAudioFileStream)
    return streamStatus("AudioFileStreamSetProperty") {
        _ = try object.propertyValue(inPropertyID, input: nil)
        throw StatusError(kAudioFileStreamError_IllegalOperation, "property \(fourCharacterCode(Int32(bitPattern: inPropertyID))) cannot be set")
    }
}

/// Closes the parser. No callback runs after this.
@discardableResult
public func AudioFileStreamClose(_ inAudioFileStream: AudioFileStreamID) -> OSStatus {
    Retained.release(StreamObject.self, inAudioFileStream)
    return noErr
}

extension StreamObject {
    func propertyValue(_ id: AudioFileStreamPropertyID, input: UnsafeRawBufferPointer?) throws -> [UInt8] {
        func bytes<T>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value) { Array($0) } }
        func given<T>(_ type: T.Type) throws -> T {
            guard let input else {
                return [UInt8](repeating: 0, count: MemoryLayout<T>.size).withUnsafeBytes { $0.loadUnaligned(as: T.self) }
            }
            guard input.count >= MemoryLayout<T>.size else {
                throw StatusError(kAudioFileStreamError_BadPropertySize, "property \(fourCharacterCode(Int32(bitPattern: id))) needs a \(T.self)")
            }
            return input.loadUnaligned(as: T.self)
        }
        func unknown() -> StatusError {
            StatusError(kAudioFileStreamError_ValueUnknown, "property \(fourCharacterCode(Int32(bitPattern: id))) is not known yet")
        }
        let stream = self.stream
        switch id {
        case kAudioFileStreamProperty_ReadyToProducePackets: return bytes(UInt32(stream.isReadyToProducePackets ? 1 : 0))
        case kAudioFileStreamProperty_FileFormat:
            guard let type = stream.fileType else { throw unknown() }
            return bytes(type.typeID)
        case kAudioFileStreamProperty_DataFormat:
            guard let format = stream.dataFormat else { throw unknown() }
            return bytes(AudioStreamBasicDescription(format))
        case kAudioFileStreamProperty_FormatList:
            guard let format = stream.dataFormat else { throw unknown() }
            let formats = stream.formatList.isEmpty ? [format] : stream.formatList
            let items = formats.map {
                AudioFormatListItem(mASBD: AudioStreamBasicDescription($0),
                                    mChannelLayoutTag: kAudioChannelLayoutTag_DiscreteInOrder | UInt32($0.channelsPerFrame))
            }
            return items.withUnsafeBytes { Array($0) }
        case kAudioFileStreamProperty_MagicCookieData:
            guard let cookie = stream.magicCookie else { throw unknown() }
            return cookie
        case kAudioFileStreamProperty_AudioDataByteCount:
            guard let count = stream.audioDataByteCount else { throw unknown() }
            return bytes(UInt64(count))
        case kAudioFileStreamProperty_AudioDataPacketCount:
            guard let count = stream.audioDataPacketCount else { throw unknown() }
            return bytes(UInt64(count))
        case kAudioFileStreamProperty_MaximumPacketSize, kAudioFileStreamProperty_PacketSizeUpperBound:
            guard let size = stream.maximumPacketSize ?? stream.dataFormat.map({ $0.bytesPerPacket }) else { throw unknown() }
            return bytes(UInt32(clamping: size))
        case kAudioFileStreamProperty_DataOffset:
            guard let offset = stream.dataOffset else { throw unknown() }
            return bytes(Int64(offset))
        case kAudioFileStreamProperty_ChannelLayout:
            guard let layout = stream.channelLayout else { throw unknown() }
            return channelLayoutBytes(layout)
        case kAudioFileStreamProperty_PacketTableInfo:
            guard let info = stream.packetTableInfo else { throw unknown() }
            return bytes(CAudioToolbox.AudioFilePacketTableInfo(mNumberValidFrames: info.validFrames, mPrimingFrames: Int32(clamping: info.primingFrames),
                                                                mRemainderFrames: Int32(clamping: info.remainderFrames)))
        case kAudioFileStreamProperty_BitRate:
            guard let rate = stream.bitRate else { throw unknown() }
            return bytes(UInt32(clamping: rate))
        case kAudioFileStreamProperty_AverageBytesPerPacket:
            guard let bytesCount = stream.audioDataByteCount, let packets = stream.audioDataPacketCount, packets > 0 else { throw unknown() }
            return bytes(Float64(bytesCount) / Float64(packets))
        case kAudioFileStreamProperty_PacketToFrame:
            var value = try given(AudioFramePacketTranslation.self)
            guard let frame = stream.frame(forPacket: value.mPacket) else { throw unknown() }
            value.mFrame = frame
            return bytes(value)
        case kAudioFileStreamProperty_FrameToPacket:
            var value = try given(AudioFramePacketTranslation.self)
            guard let (packet, offset) = stream.packet(forFrame: value.mFrame) else { throw unknown() }
            value.mPacket = packet
            value.mFrameOffsetInPacket = UInt32(offset)
            return bytes(value)
        case kAudioFileStreamProperty_PacketToByte:
            var value = try given(AudioBytePacketTranslation.self)
            guard let result = stream.byteOffset(forPacket: value.mPacket) else { throw unknown() }
            value.mByte = result.byteOffset - (stream.dataOffset ?? 0)
            value.mFlags = result.isEstimated ? .bytePacketTranslationFlag_IsEstimate : []
            return bytes(value)
        case kAudioFileStreamProperty_RestrictsRandomAccess: return bytes(UInt32(0))
        case kAudioFileStreamProperty_PacketToRollDistance:
            var value = try given(AudioPacketRollDistanceTranslation.self)
            value.mRollDistance = Int64(abs(stream.packetRollDistance ?? 0))
            return bytes(value)
        case kAudioFileStreamProperty_InfoDictionary:
            var info: [String: String] = [:]
            for (name, value) in stream.metadata.tags { info[name.lowercased()] = value }
            if let title = stream.metadata.title { info["title"] = title }
            if let artist = stream.metadata.artist { info["artist"] = artist }
            if let album = stream.metadata.album { info["album"] = album }
            return bytes(Unmanaged.passRetained(info as NSDictionary).toOpaque())
        default:
            throw StatusError(kAudioFileStreamError_UnsupportedProperty, "no property \(fourCharacterCode(Int32(bitPattern: id)))")
        }
    }
}
