#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
// What Swift's CoreAudio overlay adds to the C types on a Mac: a collection view of an
// AudioBufferList's buffers, allocation of a list with room for N buffers, and typed views of a
// buffer's data.

/// A mutable collection of the `AudioBuffer`s of an `AudioBufferList` (which C declares with one
/// buffer and callers extend).
public struct UnsafeMutableAudioBufferListPointer: MutableCollection, RandomAccessCollection {
    /// The list.
    public var unsafeMutablePointer: UnsafeMutablePointer<AudioBufferList>
    /// The list, read-only.
    public var unsafePointer: UnsafePointer<AudioBufferList> { UnsafePointer(unsafeMutablePointer) }

    public init(_ p: UnsafeMutablePointer<AudioBufferList>) { unsafeMutablePointer = p }

    public init?(_ p: UnsafeMutablePointer<AudioBufferList>?) {
        guard let p else { return nil }
        unsafeMutablePointer = p
    }

    /// How many buffers the list says it has (`mNumberBuffers`).
    public var count: Int {
        get { Int(unsafeMutablePointer.pointee.mNumberBuffers) }
        nonmutating set { unsafeMutablePointer.pointee.mNumberBuffers = UInt32(newValue) }
    }

    private var buffers: UnsafeMutablePointer<AudioBuffer> {
        (UnsafeMutableRawPointer(unsafeMutablePointer) + (MemoryLayout<AudioBufferList>.offset(of: \.mBuffers) ?? 8))
            .assumingMemoryBound(to: AudioBuffer.self)
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { count }

    public subscript(index: Int) -> AudioBuffer {
        get {
            precondition(index >= 0 && index < count, "audio buffer index out of range")
            return buffers[index]
        }
        nonmutating set {
            precondition(index >= 0 && index < count, "audio buffer index out of range")
            buffers[index] = newValue
        }
    }
}

extension AudioBufferList {
    /// Bytes of a list with room for `maximumBuffers` buffers.
    public static func sizeInBytes(maximumBuffers: Int) -> Int {
        precondition(maximumBuffers >= 1, "an AudioBufferList has at least one buffer")
        return (MemoryLayout<AudioBufferList>.offset(of: \.mBuffers) ?? 8) + MemoryLayout<AudioBuffer>.stride * maximumBuffers
    }

    /// A zeroed list with room for `maximumBuffers` buffers and `mNumberBuffers` set to it;
    /// release it with `free(list.unsafeMutablePointer)`.
    public static func allocate(maximumBuffers: Int) -> UnsafeMutableAudioBufferListPointer {
        let size = sizeInBytes(maximumBuffers: maximumBuffers)
        guard let memory = calloc(1, size) else { fatalError("cannot allocate an AudioBufferList of \(size) bytes") }
        let list = memory.assumingMemoryBound(to: AudioBufferList.self)
        list.pointee.mNumberBuffers = UInt32(maximumBuffers)
        return UnsafeMutableAudioBufferListPointer(list)
    }
}

extension AudioBuffer {
    /// A buffer over `typedBuffer`'s memory with `numberOfChannels` interleaved channels.
    public init<Element>(_ typedBuffer: UnsafeMutableBufferPointer<Element>, numberOfChannels: Int) {
        self.init(mNumberChannels: UInt32(numberOfChannels), mDataByteSize: UInt32(typedBuffer.count * MemoryLayout<Element>.stride),
                  mData: typedBuffer.baseAddress.map { UnsafeMutableRawPointer($0) })
    }
}

extension UnsafeBufferPointer {
    /// The buffer's data as `Element`s.
    public init(_ audioBuffer: AudioBuffer) {
        self.init(start: audioBuffer.mData?.assumingMemoryBound(to: Element.self),
                  count: Int(audioBuffer.mDataByteSize) / MemoryLayout<Element>.stride)
    }
}

extension UnsafeMutableBufferPointer {
    /// The buffer's data as `Element`s.
    public init(_ audioBuffer: AudioBuffer) {
        self.init(start: audioBuffer.mData?.assumingMemoryBound(to: Element.self),
                  count: Int(audioBuffer.mDataByteSize) / MemoryLayout<Element>.stride)
    }
}
