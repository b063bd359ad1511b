/// The one error type of the queue, its decoders and its sinks.
///
/// ``code`` mirrors the result codes of Apple's Audio Queue Services so that people who know them find
/// their way; ``message`` says what exactly was wrong and what to do about it.
public struct AudioQueueError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    public enum Code: String, Hashable, Sendable, CaseIterable {
        /// The buffer does not belong to this queue, or its contents are inconsistent (`kAudioQueueErr_InvalidBuffer`).
        case invalidBuffer
        /// The buffer holds no data (`kAudioQueueErr_BufferEmpty`).
        case bufferEmpty
        /// The buffer is still owned by the queue (`kAudioQueueErr_BufferInQueue`).
        case bufferInQueue
        /// The call does not fit the queue's current state (`kAudioQueueErr_InvalidRunState`).
        case invalidRunState
        /// A parameter id or value is out of range (`kAudioQueueErr_InvalidParameter`).
        case invalidParameter
        /// A property value is not acceptable (`kAudioQueueErr_InvalidPropertyValue`).
        case invalidPropertyValue
        /// Packet descriptions are missing, too many, or point outside the buffer (`kAudioQueueErr_InvalidPacketDescription`).
        case invalidPacketDescription
        /// Trim frames exceed what the buffer holds.
        case invalidTrim
        /// A start time lies before the end of what is already scheduled.
        case timeNotAscending
        /// No decoder is registered for the format, or the format is not supported (`kAudioQueueErr_CodecNotFound`).
        case codecNotFound
        /// The decoder rejected the data (`kAudioQueueErr_InvalidCodecAccess` / converter errors).
        case decoderError
        /// The sink could not start (`kAudioQueueErr_CannotStart`).
        case cannotStart
        /// The sink failed while running (device lost, server gone).
        case sinkError
        /// The queue is being disposed of (`kAudioQueueErr_DisposalPending`).
        case disposalPending
        /// A stop or a reset is under way (`kAudioQueueErr_EnqueueDuringReset`).
        case enqueueDuringReset
        /// Priming did not finish (`kAudioQueueErr_PrimeTimedOut`).
        case primeTimedOut
        /// Offline rendering was used without an offline render format, or out of order (`kAudioQueueErr_InvalidOfflineMode`).
        case invalidOfflineMode
        /// The decoded format changed; the caller must follow it.
        case formatChanged
        /// Something the call waited for did not happen within its deadline.
        case timedOut
    }

    /// What kind of failure it was.
    public var code: Code
    /// What went wrong, in words, including where and what to do.
    public var message: String

    /// An error of `code`, saying `message`.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
}

extension AudioQueueError {
    /// For the codec modules whose C library is opened on first use (CDynamicLibrary): throws
    /// ``Code/codecNotFound`` with the loader's reason when `loaded` is 0.
    /// - Parameters:
    ///   - loaded: what the library's `aq_…_load()` returned.
    ///   - reason: its `aq_…_error()`, read only on failure.
    package static func requireLibrary(_ loaded: Int32, reason: () -> UnsafePointer<CChar>?) throws {
        guard loaded == 0 else { return }
        throw AudioQueueError(.codecNotFound, reason().map { String(cString: $0) } ?? "a codec library could not be opened")
    }
}
