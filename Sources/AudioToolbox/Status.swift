internal import BufferQueue
internal import AudioFileStream
import Foundation

/// Whether `AQ_TRACE` asks for each failing call's reason on standard error (an OSStatus alone
/// does not say what was wrong or where).
let traceFailures: Bool = ProcessInfo.processInfo.environment["AQ_TRACE"].map { !$0.isEmpty && $0 != "0" } ?? false

func trace(_ function: String, _ status: OSStatus, _ message: String) {
    guard traceFailures else { return }
    FileHandle.standardError.write(Data("AudioToolbox: \(function) → \(status) (\(fourCharacterCode(status))): \(message)\n".utf8))
}

/// `'typ?'` for a four-character status, the decimal number otherwise.
func fourCharacterCode(_ status: OSStatus) -> String {
    let value = UInt32(bitPattern: status)
    let bytes = [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    guard bytes.allSatisfy({ (0x20...0x7E).contains($0) }) else { return String(status) }
    return "'" + String(decoding: bytes, as: UTF8.self) + "'"
}

extension AudioQueueError.Code {
    /// The result code Apple's Audio Queue Services return for this kind of failure.
    var audioQueueStatus: OSStatus {
        switch self {
        case .invalidBuffer, .invalidPacketDescription: return kAudioQueueErr_InvalidBuffer
        case .bufferEmpty: return kAudioQueueErr_BufferEmpty
        case .bufferInQueue: return kAudioQueueErr_BufferInQueue
        case .invalidRunState: return kAudioQueueErr_InvalidRunState
        case .invalidParameter, .invalidTrim, .timeNotAscending: return kAudioQueueErr_InvalidParameter
        case .invalidPropertyValue, .formatChanged: return kAudioQueueErr_InvalidPropertyValue
        case .codecNotFound: return kAudioQueueErr_CodecNotFound
        case .decoderError: return kAudioQueueErr_InvalidCodecAccess
        case .cannotStart: return kAudioQueueErr_CannotStart
        case .sinkError: return kAudioQueueErr_InvalidDevice
        case .disposalPending: return kAudioQueueErr_DisposalPending
        case .enqueueDuringReset: return kAudioQueueErr_EnqueueDuringReset
        case .primeTimedOut, .timedOut: return kAudioQueueErr_PrimeTimedOut
        case .invalidOfflineMode: return kAudioQueueErr_InvalidOfflineMode
        }
    }
}

/// The part of Apple's API a call belongs to: it decides the status a library error becomes.
package enum StatusFamily {
    case queue, file, stream, format, converter, extendedFile, hardware

    /// Apple's status for an error the library threw.
    package func status(for error: any Error) -> (OSStatus, String) {
        switch (self, error) {
        case (_, let failure as StatusError): return (failure.status, failure.message)
        case (.queue, let error as AudioQueueError): return (error.code.audioQueueStatus, error.message)
        case (.stream, let error as AudioFileStreamError): return (error.code.audioFileStreamStatus, error.description)
        case (_, let error as AudioFileStreamError): return (error.code.audioFileStatus, error.description)
        case (.format, let error as AudioQueueError): return (kAudioFormatUnsupportedDataFormatError, error.description)
        case (.converter, let error as AudioQueueError), (.extendedFile, let error as AudioQueueError):
            return (error.code == .codecNotFound ? kAudioConverterErr_FormatNotSupported : kAudioConverterErr_UnspecifiedError, error.description)
        case (_, let error as AudioFileWriterError): return (kAudioFileUnspecifiedError, error.description)
        default: return (fallback, "\(error)")
        }
    }

    /// The status of anything else.
    var fallback: OSStatus {
        switch self {
        case .queue: return kAudioQueueErr_InvalidParameter
        case .file, .extendedFile: return kAudioFileUnspecifiedError
        case .stream: return kAudioFileStreamError_UnspecifiedError
        case .format: return kAudioFormatUnspecifiedError
        case .converter: return kAudioConverterErr_UnspecifiedError
        case .hardware: return kAudioHardwareUnspecifiedError
        }
    }
}

/// Runs `body` and turns what it throws into Apple's status for `function` (traced with its
/// reason when `AQ_TRACE` is set).
func callStatus(_ function: String, _ family: StatusFamily, _ body: () throws -> Void) -> OSStatus {
    do {
        try body()
        return noErr
    } catch {
        let (status, message) = family.status(for: error)
        trace(function, status, message)
        return status
    }
}

func queueStatus(_ function: String, _ body: () throws -> Void) -> OSStatus { callStatus(function, .queue, body) }
func fileStatus(_ function: String, _ body: () throws -> Void) -> OSStatus { callStatus(function, .file, body) }
func streamStatus(_ function: String, _ body: () throws -> Void) -> OSStatus { callStatus(function, .stream, body) }
func formatStatus(_ function: String, _ body: () throws -> Void) -> OSStatus { callStatus(function, .format, body) }
func converterStatus(_ function: String, _ body: () throws -> Void) -> OSStatus { callStatus(function, .converter, body) }
func extStatus(_ function: String, _ body: () throws -> Void) -> OSStatus { callStatus(function, .extendedFile, body) }
func hardwareStatus(_ function: String, _ body: () throws -> Void) -> OSStatus { callStatus(function, .hardware, body) }

/// A failure that already knows its Apple status.
package struct StatusError: Error {
    package var status: OSStatus
    package var message: String
    package init(_ status: OSStatus, _ message: String) {
        self.status = status
        self.message = message
    }
}

extension AudioStreamPacketDescription {
    var library: AudioPacketDescription {
        AudioPacketDescription(startOffset: Int(mStartOffset), variableFramesInPacket: Int(mVariableFramesInPacket),
                               dataByteSize: Int(mDataByteSize))
    }

    init(_ description: AudioPacketDescription) {
        self.init(mStartOffset: Int64(description.startOffset), mVariableFramesInPacket: UInt32(clamping: description.variableFramesInPacket),
                  mDataByteSize: UInt32(clamping: description.dataByteSize))
    }
}

// MARK: property values written into the caller's memory

/// Copies `value` into `data` when `size` says it fits (and says how much was written).
func writeProperty<T>(_ value: T, to data: UnsafeMutableRawPointer, size: UnsafeMutablePointer<UInt32>, badSize: OSStatus) -> OSStatus {
    guard Int(size.pointee) >= MemoryLayout<T>.size else { return badSize }
    data.storeBytes(of: value, toByteOffset: 0, as: T.self)
    size.pointee = UInt32(MemoryLayout<T>.size)
    return noErr
}

/// Copies `bytes` into `data`: all of them, or as many as `size` allows (as Apple's getters of
/// variable-size properties do), and says how many.
func writeBytes(_ bytes: [UInt8], to data: UnsafeMutableRawPointer, size: UnsafeMutablePointer<UInt32>) {
    let count = min(bytes.count, Int(size.pointee))
    bytes.withUnsafeBytes { data.copyMemory(from: $0.baseAddress ?? UnsafeRawPointer(data), byteCount: count) }
    size.pointee = UInt32(count)
}

/// Writes a property's value for a getter: a value of one size must fit (else `badSize`); a
/// variable-size one (`cut`) is cut to the caller's buffer, as Apple's getters do.
func writeValue(_ value: [UInt8], to data: UnsafeMutableRawPointer, size: UnsafeMutablePointer<UInt32>, cut: Bool, badSize: OSStatus) throws {
    guard cut || Int(size.pointee) >= value.count else {
        throw StatusError(badSize, "the value takes \(value.count) bytes, \(size.pointee) given")
    }
    writeBytes(value, to: data, size: size)
}

/// Reads a `T` from the caller's property data, if `size` holds one.
func readProperty<T>(_ type: T.Type, from data: UnsafeRawPointer, size: UInt32) -> T? {
    guard Int(size) >= MemoryLayout<T>.size else { return nil }
    return data.loadUnaligned(as: T.self)
}

// MARK: channel layouts

/// Byte size of an `AudioChannelLayout` with `descriptions` channel descriptions.
func channelLayoutSize(descriptions: Int) -> Int {
    CoreAudioChannelLayout.headerSize + max(descriptions, 0) * CoreAudioChannelLayout.descriptionSize
}

/// The C form of a layout: a tag for mono and stereo, channel descriptions otherwise.
func channelLayoutBytes(_ layout: BufferQueue.AudioChannelLayout) -> [UInt8] {
    CoreAudioChannelLayout(layout, namedTags: true).bytes(bigEndian: false)
}

/// The library's layout for a C `AudioChannelLayout` of `size` bytes, for `channels` channels.
func libraryChannelLayout(_ data: UnsafeRawPointer, size: UInt32, channels: Int) -> BufferQueue.AudioChannelLayout? {
    CoreAudioChannelLayout(bytes: UnsafeRawBufferPointer(start: data, count: Int(size)), bigEndian: false)?.layout(channels: channels)
}
