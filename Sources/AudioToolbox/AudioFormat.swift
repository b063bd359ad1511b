internal import BufferQueue
import Foundation

// Audio Format Services (AudioFormat.h): what a format is, from the codecs registered here.

enum FormatInfo {
    /// Fills in a partly given description: linear PCM's sizes from its bits and channels; a
    /// compressed format's from the encoder registered for it (frames per packet, bytes per
    /// packet when constant, the bit depth a lossless encoder keeps).
    static func complete(_ given: AudioStreamBasicDescription) throws -> AudioStreamBasicDescription {
        var format = given
        if format.mFormatID == kAudioFormatLinearPCM {
            guard format.mChannelsPerFrame > 0, format.mBitsPerChannel > 0 else {
                throw StatusError(kAudioFormatUnsupportedDataFormatError, "linear PCM needs its channels and bits per channel")
            }
            let bytesPerSample = (format.mBitsPerChannel + 7) / 8
            let interleaved = format.mFormatFlags & kAudioFormatFlagIsNonInterleaved == 0
            if format.mBytesPerFrame == 0 { format.mBytesPerFrame = bytesPerSample * (interleaved ? format.mChannelsPerFrame : 1) }
            if format.mFramesPerPacket == 0 { format.mFramesPerPacket = 1 }
            if format.mBytesPerPacket == 0 { format.mBytesPerPacket = format.mBytesPerFrame * format.mFramesPerPacket }
            return format
        }
        Setup.once()
        guard format.mSampleRate > 0, format.mChannelsPerFrame > 0 else {
            throw StatusError(kAudioFormatUnsupportedDataFormatError, "give the sample rate and channel count of \(fourCharacterCode(Int32(bitPattern: format.mFormatID)))")
        }
        let encoder = try AudioEncoderRegistry.shared.makeEncoder(for: format.library)
        let made = AudioStreamBasicDescription(encoder.outputFormat)
        format.mFramesPerPacket = made.mFramesPerPacket
        format.mBytesPerPacket = made.mBytesPerPacket
        format.mBytesPerFrame = made.mBytesPerFrame
        if format.mFormatFlags == 0 { format.mFormatFlags = made.mFormatFlags }
        if format.mBitsPerChannel == 0 { format.mBitsPerChannel = made.mBitsPerChannel }
        return format
    }

    static func name(_ id: CoreAudioTypes.AudioFormatID) -> String { BufferQueue.AudioFormatID(rawValue: id).name }
}

private func ids(_ formats: Set<BufferQueue.AudioFormatID>) -> [CoreAudioTypes.AudioFormatID] {
    formats.map(\.rawValue).sorted()
}

/// A property's size: for the format lists, how many bytes the list takes.
@discardableResult
public func AudioFormatGetPropertyInfo(_ inPropertyID: AudioFormatPropertyID, _ inSpecifierSize: UInt32, _ inSpecifier: UnsafeRawPointer?,
                                       _ outPropertyDataSize: UnsafeMutablePointer<UInt32>) -> OSStatus {
    formatStatus("AudioFormatGetPropertyInfo") {
        outPropertyDataSize.pointee = UInt32(try formatProperty(inPropertyID, inSpecifierSize, inSpecifier, ioData: nil).count)
    }
}

/// Reads a property: `FormatInfo` (a description completed from its format id), `FormatIsVBR`,
/// `FormatName`, `EncodeFormatIDs` and `DecodeFormatIDs` (what is registered here), `FormatList`.
@discardableResult
public func AudioFormatGetProperty(_ inPropertyID: AudioFormatPropertyID, _ inSpecifierSize: UInt32, _ inSpecifier: UnsafeRawPointer?,
                                   _ ioPropertyDataSize: UnsafeMutablePointer<UInt32>?, _ outPropertyData: UnsafeMutableRawPointer?) -> OSStatus {
    formatStatus("AudioFormatGetProperty") {
        guard let ioPropertyDataSize else { throw StatusError(kAudioFormatBadPropertySizeError, "no size given") }
        let given = outPropertyData.map { UnsafeRawBufferPointer(start: $0, count: Int(ioPropertyDataSize.pointee)) }
        let value = try formatProperty(inPropertyID, inSpecifierSize, inSpecifier, ioData: given)
        guard let outPropertyData else {
            ioPropertyDataSize.pointee = UInt32(value.count)
            return
        }
        let listed = [kAudioFormatProperty_EncodeFormatIDs, kAudioFormatProperty_DecodeFormatIDs, kAudioFormatProperty_FormatList].contains(inPropertyID)
        try writeValue(value, to: outPropertyData, size: ioPropertyDataSize, cut: listed, badSize: kAudioFormatBadPropertySizeError)
    }
}

private func formatProperty(_ id: AudioFormatPropertyID, _ specifierSize: UInt32, _ specifier: UnsafeRawPointer?,
                            ioData: UnsafeRawBufferPointer?) throws -> [UInt8] {
    func bytes<T>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value) { Array($0) } }
    func specified<T>(_ type: T.Type) throws -> T {
        guard let specifier, Int(specifierSize) >= MemoryLayout<T>.size else {
            throw StatusError(kAudioFormatBadSpecifierSizeError, "the specifier is a \(T.self)")
        }
        return specifier.loadUnaligned(as: T.self)
    }
    Setup.once()
    switch id {
    case kAudioFormatProperty_FormatInfo:
        // The description to complete is the property data itself.
        guard let ioData, ioData.count >= MemoryLayout<AudioStreamBasicDescription>.size else {
            return bytes(AudioStreamBasicDescription())
        }
        return bytes(try FormatInfo.complete(ioData.loadUnaligned(as: AudioStreamBasicDescription.self)))
    case kAudioFormatProperty_FormatIsVBR:
        let format = try specified(AudioStreamBasicDescription.self)
        let complete = (try? FormatInfo.complete(format)) ?? format
        return bytes(UInt32(complete.mBytesPerPacket == 0 ? 1 : 0))
    case kAudioFormatProperty_FormatIsExternallyFramed:
        let format = try specified(AudioStreamBasicDescription.self)
        return bytes(UInt32(format.mFormatID == kAudioFormatLinearPCM ? 0 : 1))
    case kAudioFormatProperty_FormatIsEncrypted:
        return bytes(UInt32(0))
    case kAudioFormatProperty_FormatName:
        let format = try specified(AudioStreamBasicDescription.self)
        return bytes(Unmanaged.passRetained(FormatInfo.name(format.mFormatID) as NSString).toOpaque())
    case kAudioFormatProperty_EncodeFormatIDs:
        return ids(AudioEncoderRegistry.shared.supportedFormats.union([.linearPCM])).withUnsafeBytes { Array($0) }
    case kAudioFormatProperty_DecodeFormatIDs:
        return ids(AudioDecoderRegistry.shared.supportedFormats.union([.linearPCM])).withUnsafeBytes { Array($0) }
    case kAudioFormatProperty_FormatList:
        let item = try specified(AudioFormatInfo.self)
        let format = try FormatInfo.complete(item.mASBD)
        return bytes(AudioFormatListItem(mASBD: format, mChannelLayoutTag: kAudioChannelLayoutTag_DiscreteInOrder | format.mChannelsPerFrame))
    case kAudioFormatProperty_NumberOfChannelsForLayout:
        // The specifier is an AudioChannelLayout: its tag, bitmap and description count.
        guard let specifier, Int(specifierSize) >= channelLayoutSize(descriptions: 0) else {
            throw StatusError(kAudioFormatBadSpecifierSizeError, "the specifier is an AudioChannelLayout")
        }
        // The header alone tells the count (the descriptions need not all be there).
        let header = UnsafeRawBufferPointer(start: specifier, count: CoreAudioChannelLayout.headerSize)
        let tag = header.loadUnaligned(fromByteOffset: 0, as: UInt32.self), bitmap = header.loadUnaligned(fromByteOffset: 4, as: UInt32.self)
        let described = Int(header.loadUnaligned(fromByteOffset: 8, as: UInt32.self))
        let form = CoreAudioChannelLayout(tag: tag, bitmap: bitmap, labels: Array(repeating: 0, count: tag == CoreAudioChannelLayout.useChannelDescriptions ? described : 0))
        return bytes(UInt32(form.channelCount))
    default:
        throw StatusError(kAudioFormatUnsupportedPropertyError, "property \(fourCharacterCode(Int32(bitPattern: id))) is not supported")
    }
}
