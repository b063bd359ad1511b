internal import AudioFileStream
internal import BufferQueue
import Foundation

// Audio File Services' global info (AudioFile.h): which file types are read and written, their
// names, extensions, MIME types and UTIs, and the formats they hold — from AudioFileStream's
// catalog of containers (`AudioFileType`) and the codecs registered here.

/// The size of a global info value: for the lists, how many bytes the list takes; for a
/// `CFString` or `CFArray`, the size of its reference.
@discardableResult
public func AudioFileGetGlobalInfoSize(_ inPropertyID: AudioFilePropertyID, _ inSpecifierSize: UInt32, _ inSpecifier: UnsafeMutableRawPointer?,
                                       _ outDataSize: UnsafeMutablePointer<UInt32>) -> OSStatus {
    fileStatus("AudioFileGetGlobalInfoSize") {
        switch try GlobalInfo.value(inPropertyID, inSpecifierSize, inSpecifier) {
        case .bytes(let bytes): outDataSize.pointee = UInt32(bytes.count)
        case .object: outDataSize.pointee = UInt32(MemoryLayout<UnsafeRawPointer>.size)
        }
    }
}

/// Reads a global info value into `outPropertyData`, whose size `ioDataSize` gives: arrays of
/// `AudioFileTypeID`, `UInt32` format ids or `AudioStreamBasicDescription`s (cut to the size
/// given), or a `CFString` / `CFArray` of `CFString`s the caller owns.
@discardableResult
public func AudioFileGetGlobalInfo(_ inPropertyID: AudioFilePropertyID, _ inSpecifierSize: UInt32, _ inSpecifier: UnsafeMutableRawPointer?,
                                   _ ioDataSize: UnsafeMutablePointer<UInt32>, _ outPropertyData: UnsafeMutableRawPointer) -> OSStatus {
    fileStatus("AudioFileGetGlobalInfo") {
        switch try GlobalInfo.value(inPropertyID, inSpecifierSize, inSpecifier) {
        case .bytes(let bytes):
            try writeValue(bytes, to: outPropertyData, size: ioDataSize, cut: true, badSize: kAudioFileBadPropertySizeError)
        case .object(let make):
            guard Int(ioDataSize.pointee) >= MemoryLayout<UnsafeRawPointer>.size else {
                throw StatusError(kAudioFileBadPropertySizeError, "the value is a reference of \(MemoryLayout<UnsafeRawPointer>.size) bytes, \(ioDataSize.pointee) given")
            }
            // Retained once: the caller owns the result, as Core Foundation's rule says.
            outPropertyData.storeBytes(of: Unmanaged.passRetained(make()).toOpaque(), as: UnsafeMutableRawPointer.self)
            ioDataSize.pointee = UInt32(MemoryLayout<UnsafeRawPointer>.size)
        }
    }
}

enum GlobalInfo {
    /// A value: bytes, or an object made only when it is read (a size query makes none).
    enum Value {
        case bytes([UInt8])
        case object(() -> AnyObject)
    }

    static func value(_ id: AudioFilePropertyID, _ specifierSize: UInt32, _ specifier: UnsafeMutableRawPointer?) throws -> Value {
        Setup.once()
        let readable = AudioFileType.allCases
        func list<T>(_ values: [T]) -> Value { .bytes(values.withUnsafeBytes { Array($0) }) }
        func strings(_ values: [String]) -> Value {
            var seen = Set<String>()
            let unique = values.filter { seen.insert($0).inserted }
            return .object { unique.map { $0 as NSString } as NSArray }
        }
        func type() throws -> AudioFileType {
            guard let specifier, Int(specifierSize) >= MemoryLayout<AudioFileTypeID>.size else {
                throw StatusError(kAudioFileBadPropertySizeError, "\(fourCharacterCode(Int32(bitPattern: id))) needs an AudioFileTypeID as its specifier")
            }
            let id = specifier.loadUnaligned(as: AudioFileTypeID.self)
            guard let type = AudioFileType(typeID: id) else {
                throw StatusError(kAudioFileUnsupportedFileTypeError, "\(fourCharacterCode(Int32(bitPattern: id))) is not a file type read here")
            }
            return type
        }
        func text() throws -> String {
            guard let specifier, Int(specifierSize) >= MemoryLayout<UnsafeRawPointer>.size,
                  let object = specifier.loadUnaligned(as: UnsafeRawPointer?.self) else {
                throw StatusError(kAudioFileBadPropertySizeError, "\(fourCharacterCode(Int32(bitPattern: id))) needs a CFString as its specifier")
            }
            guard let string = Unmanaged<AnyObject>.fromOpaque(object).takeUnretainedValue() as? NSString else {
                throw StatusError(kAudioFileBadPropertySizeError, "\(fourCharacterCode(Int32(bitPattern: id))) needs a CFString as its specifier")
            }
            return (string as String).lowercased()
        }
        switch id {
        case kAudioFileGlobalInfo_ReadableTypes:
            return list(readable.map(\.typeID))
        case kAudioFileGlobalInfo_WritableTypes:
            return list(AudioFileType.writable.map(\.typeID))
        case kAudioFileGlobalInfo_FileTypeName:
            let name = try type().typeName
            return .object { name as NSString }
        case kAudioFileGlobalInfo_AvailableFormatIDs:
            return list(try type().readableFormats.map(\.rawValue))
        case kAudioFileGlobalInfo_AvailableStreamDescriptionsForFormat:
            guard let specifier, Int(specifierSize) >= MemoryLayout<AudioFileTypeAndFormatID>.size else {
                throw StatusError(kAudioFileBadPropertySizeError, "sdid needs an AudioFileTypeAndFormatID as its specifier")
            }
            let pair = specifier.loadUnaligned(as: AudioFileTypeAndFormatID.self)
            guard let type = AudioFileType(typeID: pair.mFileType), type.isWritable else {
                throw StatusError(kAudioFileUnsupportedFileTypeError, "\(fourCharacterCode(Int32(bitPattern: pair.mFileType))) files are not written here")
            }
            return list(try writableDescriptions(type, BufferQueue.AudioFormatID(rawValue: pair.mFormatID)))
        case kAudioFileGlobalInfo_AllExtensions:
            return strings(readable.flatMap(\.pathExtensions))
        case kAudioFileGlobalInfo_AllUTIs:
            return strings(readable.flatMap(\.utis))
        case kAudioFileGlobalInfo_AllMIMETypes:
            return strings(readable.flatMap(\.mimeTypes))
        case kAudioFileGlobalInfo_AllHFSTypeCodes:
            return list(readable.map(\.typeID))
        case kAudioFileGlobalInfo_ExtensionsForType:
            return strings(try type().pathExtensions)
        case kAudioFileGlobalInfo_UTIsForType:
            return strings(try type().utis)
        case kAudioFileGlobalInfo_MIMETypesForType:
            return strings(try type().mimeTypes)
        case kAudioFileGlobalInfo_HFSTypeCodesForType:
            return list([try type().typeID])
        case kAudioFileGlobalInfo_TypesForExtension:
            let name = try text()
            return list(readable.filter { $0.pathExtensions.contains(name) }.map(\.typeID))
        case kAudioFileGlobalInfo_TypesForMIMEType:
            let name = try text()
            return list(readable.filter { $0.mimeTypes.contains(name) }.map(\.typeID))
        case kAudioFileGlobalInfo_TypesForUTI:
            let name = try text()
            return list(readable.filter { $0.utis.contains(name) }.map(\.typeID))
        case kAudioFileGlobalInfo_TypesForHFSTypeCode:
            guard let specifier, Int(specifierSize) >= MemoryLayout<UInt32>.size else {
                throw StatusError(kAudioFileBadPropertySizeError, "thfs needs an HFS type code as its specifier")
            }
            let code = specifier.loadUnaligned(as: UInt32.self)
            return list(readable.filter { $0.typeID == code }.map(\.typeID))
        default:
            throw StatusError(kAudioFileUnsupportedPropertyError, "global info \(fourCharacterCode(Int32(bitPattern: id))) is not supported")
        }
    }

    /// The descriptions a file of `type` can be written with in `format`, as its writer checks
    /// them (``AudioFileType/isWritten(in:)``): linear PCM's sample layouts (integers of 8 to 32
    /// bits and floats, in either byte order), or one description of a compressed format an
    /// encoder here makes. Rates and channel counts are 0: any.
    private static func writableDescriptions(_ type: AudioFileType, _ format: BufferQueue.AudioFormatID) throws -> [AudioStreamBasicDescription] {
        var candidates: [BufferQueue.AudioStreamDescription] = []
        if format == .linearPCM {
            for bigEndian in [false, true] {
                for bits in bigEndian ? [16, 24, 32] : [8, 16, 24, 32] {   // one byte has no order
                    for signed in bits == 8 ? [true, false] : [true] {
                        var flags: BufferQueue.AudioFormatFlags = [.isPacked]
                        if signed { flags.insert(.isSignedInteger) }
                        if bigEndian { flags.insert(.isBigEndian) }
                        candidates.append(pcm(bits, flags))
                    }
                }
                for bits in [32, 64] { candidates.append(pcm(bits, bigEndian ? BufferQueue.AudioFormatFlags([.isFloat, .isPacked, .isBigEndian]) : [.isFloat, .isPacked])) }
            }
        } else if AudioEncoderRegistry.shared.supportedFormats.contains(format) {
            candidates = [BufferQueue.AudioStreamDescription(sampleRate: 44_100, formatID: format, bytesPerPacket: 0, framesPerPacket: 0,
                                                             bytesPerFrame: 0, channelsPerFrame: 2, bitsPerChannel: 0)]
        }
        let written = candidates.filter { type.isWritten(in: $0) }
        guard !written.isEmpty else {
            throw StatusError(kAudioFileUnsupportedDataFormatError, "\(type.typeName) files are not written in \(format.name) here")
        }
        return written.map { description in
            var asbd = AudioStreamBasicDescription(description)
            asbd.mSampleRate = 0
            asbd.mChannelsPerFrame = 0
            if description.isLinearPCM { asbd.mBytesPerFrame = 0; asbd.mBytesPerPacket = 0 }
            return asbd
        }
    }

    /// Linear PCM of `bits` with `flags`, two channels (the container checks look at the layout).
    private static func pcm(_ bits: Int, _ flags: BufferQueue.AudioFormatFlags) -> BufferQueue.AudioStreamDescription {
        BufferQueue.AudioStreamDescription(sampleRate: 44_100, formatID: .linearPCM, formatFlags: flags, bytesPerPacket: bits / 8 * 2,
                                           framesPerPacket: 1, bytesPerFrame: bits / 8 * 2, channelsPerFrame: 2, bitsPerChannel: bits)
    }
}
