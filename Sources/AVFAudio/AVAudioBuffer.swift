import Foundation
internal import BufferQueue

/// A buffer of audio in a format (Apple's `AVAudioBuffer`): its bytes described by an
/// `AudioBufferList`.
open class AVAudioBuffer: NSObject {
    /// The buffer's format.
    public let format: AVAudioFormat
    private let list: UnsafeMutableRawPointer

    init(format: AVAudioFormat, buffers: Int) {
        self.format = format
        let size = MemoryLayout<AudioBufferList>.size + max(buffers - 1, 0) * MemoryLayout<AudioBuffer>.stride
        list = .allocate(byteCount: size, alignment: MemoryLayout<AudioBufferList>.alignment)
        list.initializeMemory(as: UInt8.self, repeating: 0, count: size)
        list.bindMemory(to: AudioBufferList.self, capacity: 1).pointee.mNumberBuffers = UInt32(buffers)
        super.init()
    }

    deinit { list.deallocate() }

    /// The buffer list (do not change its sizes: use ``mutableAudioBufferList`` to write samples).
    public var audioBufferList: UnsafePointer<AudioBufferList> { UnsafePointer(mutableAudioBufferList) }
    /// The buffer list, writable: a `mDataByteSize` set here is what a consumer of the list takes.
    public var mutableAudioBufferList: UnsafeMutablePointer<AudioBufferList> { list.assumingMemoryBound(to: AudioBufferList.self) }
}

/// A buffer of PCM frames (Apple's `AVAudioPCMBuffer`): one buffer per channel in a deinterleaved
/// format, one for all in an interleaved one. New buffers are zero-filled.
open class AVAudioPCMBuffer: AVAudioBuffer {
    /// Frames the buffer holds at most.
    public let frameCapacity: AVAudioFrameCount
    private let samples: UnsafeMutableRawPointer
    private let channelPointers: UnsafeMutablePointer<UnsafeMutableRawPointer>
    private let bytesPerSample: Int
    private var length: AVAudioFrameCount = 0

    /// A buffer of `frameCapacity` frames of `format`; nil when the format is not PCM or the
    /// capacity does not fit in memory.
    public init?(pcmFormat format: AVAudioFormat, frameCapacity: AVAudioFrameCount) {
        let asbd = format.streamDescription.pointee
        guard asbd.mFormatID == kAudioFormatLinearPCM, asbd.mBytesPerFrame > 0 else { return nil }
        let deinterleaved = !format.isInterleaved
        let channels = Int(format.channelCount)
        let buffers = deinterleaved ? channels : 1
        let bytesPerFrame = Int(asbd.mBytesPerFrame)
        let (total, overflow) = Int(frameCapacity).multipliedReportingOverflow(by: bytesPerFrame * buffers)
        guard !overflow, total < 1 << 40 else { return nil }
        self.frameCapacity = frameCapacity
        bytesPerSample = Int(asbd.mBitsPerChannel + 7) / 8
        samples = .allocate(byteCount: max(total, 1), alignment: 16)
        samples.initializeMemory(as: UInt8.self, repeating: 0, count: max(total, 1))
        channelPointers = .allocate(capacity: buffers)
        for index in 0..<buffers { (channelPointers + index).initialize(to: samples + index * Int(frameCapacity) * bytesPerFrame) }
        super.init(format: format, buffers: buffers)
        let list = UnsafeMutableAudioBufferListPointer(mutableAudioBufferList)
        for index in 0..<buffers {
            list[index] = AudioBuffer(mNumberChannels: UInt32(deinterleaved ? 1 : channels), mDataByteSize: 0, mData: channelPointers[index])
        }
    }

    deinit {
        samples.deallocate()
        channelPointers.deallocate()
    }

    /// Frames that hold audio (at most ``frameCapacity``); setting it sets each buffer's
    /// `mDataByteSize`.
    public var frameLength: AVAudioFrameCount {
        get { length }
        set {
            precondition(newValue <= frameCapacity, "AVAudioPCMBuffer: frameLength \(newValue) exceeds frameCapacity \(frameCapacity)")
            length = newValue
            let bytes = UInt32(Int(newValue) * Int(format.streamDescription.pointee.mBytesPerFrame))
            for index in 0..<Int(mutableAudioBufferList.pointee.mNumberBuffers) {
                UnsafeMutableAudioBufferListPointer(mutableAudioBufferList)[index].mDataByteSize = bytes
            }
        }
    }

    /// Samples from one frame of a channel to the next: the channel count when interleaved, else 1.
    public var stride: Int { format.isInterleaved ? Int(format.channelCount) : 1 }

    /// Each channel's samples (one pointer when interleaved) for a float32 format, else nil.
    public var floatChannelData: UnsafePointer<UnsafeMutablePointer<Float>>? { channels(.pcmFormatFloat32) }
    /// Each channel's samples for an int16 format, else nil.
    public var int16ChannelData: UnsafePointer<UnsafeMutablePointer<Int16>>? { channels(.pcmFormatInt16) }
    /// Each channel's samples for an int32 format, else nil.
    public var int32ChannelData: UnsafePointer<UnsafeMutablePointer<Int32>>? { channels(.pcmFormatInt32) }

    private func channels<T>(_ kind: AVAudioCommonFormat) -> UnsafePointer<UnsafeMutablePointer<T>>? {
        guard format.commonFormat == kind else { return nil }
        return UnsafeRawPointer(channelPointers).assumingMemoryBound(to: UnsafeMutablePointer<T>.self)
    }

    /// How one channel's samples are stored: the library's conversions to and from float32.
    private var sampleLayout: PCMSampleLayout? {
        var one = format.streamDescription.pointee.library
        one.formatFlags.remove(.isNonInterleaved)
        one.channelsPerFrame = 1
        one.bytesPerFrame = bytesPerSample
        one.bytesPerPacket = bytesPerSample
        return try? PCMSampleLayout(one)
    }

    /// The samples of frames `start..<start + count` as interleaved float32, into `destination`.
    func interleavedFloats(into destination: UnsafeMutablePointer<Float>, from start: Int, count: Int) {
        let channels = Int(format.channelCount)
        if !format.isInterleaved && format.commonFormat == .pcmFormatFloat32 && count > 0 {
            // The engine's and the file's usual case: straight copies, no scratch (stereo in one pass).
            if channels == 2 {
                let left = channelPointers[0].assumingMemoryBound(to: Float.self) + start
                let right = channelPointers[1].assumingMemoryBound(to: Float.self) + start
                for frame in 0..<count {
                    destination[2 * frame] = left[frame]
                    destination[2 * frame + 1] = right[frame]
                }
                return
            }
            for channel in 0..<channels {
                let samples = channelPointers[channel].assumingMemoryBound(to: Float.self) + start
                for frame in 0..<count { destination[frame * channels + channel] = samples[frame] }
            }
            return
        }
        guard let layout = sampleLayout, count > 0 else { return }
        if format.isInterleaved {
            layout.toFloat(channelPointers[0] + start * channels * bytesPerSample, count: count * channels, into: destination)
            return
        }
        let scratch = UnsafeMutablePointer<Float>.allocate(capacity: count)
        defer { scratch.deallocate() }
        for channel in 0..<channels {
            layout.toFloat(channelPointers[channel] + start * bytesPerSample, count: count, into: scratch)
            for frame in 0..<count { destination[frame * channels + channel] = scratch[frame] }
        }
    }

    /// Puts `count` interleaved float32 frames into frames `start…` of the buffer, in its sample format.
    func setInterleavedFloats(_ source: UnsafePointer<Float>, at start: Int, count: Int) {
        let channels = Int(format.channelCount)
        if !format.isInterleaved && format.commonFormat == .pcmFormatFloat32 && count > 0 {
            if channels == 2 {
                let left = channelPointers[0].assumingMemoryBound(to: Float.self) + start
                let right = channelPointers[1].assumingMemoryBound(to: Float.self) + start
                for frame in 0..<count {
                    left[frame] = source[2 * frame]
                    right[frame] = source[2 * frame + 1]
                }
                return
            }
            for channel in 0..<channels {
                let samples = channelPointers[channel].assumingMemoryBound(to: Float.self) + start
                for frame in 0..<count { samples[frame] = source[frame * channels + channel] }
            }
            return
        }
        guard let layout = sampleLayout, count > 0 else { return }
        if format.isInterleaved {
            layout.fromFloat(source, count: count * channels, into: channelPointers[0] + start * channels * bytesPerSample)
            return
        }
        let scratch = UnsafeMutablePointer<Float>.allocate(capacity: count)
        defer { scratch.deallocate() }
        for channel in 0..<channels {
            for frame in 0..<count { scratch[frame] = source[frame * channels + channel] }
            layout.fromFloat(scratch, count: count, into: channelPointers[channel] + start * bytesPerSample)
        }
    }
}

/// A buffer of compressed packets (Apple's `AVAudioCompressedBuffer`): their bytes back to back
/// in ``data``, with a description of each when the format's packets vary in size.
open class AVAudioCompressedBuffer: AVAudioBuffer {
    /// Packets the buffer holds at most.
    public let packetCapacity: AVAudioPacketCount
    /// The largest packet, in bytes.
    public let maximumPacketSize: Int
    /// Bytes the buffer holds at most.
    public let byteCapacity: UInt32
    /// The packets' bytes.
    public let data: UnsafeMutableRawPointer
    /// One description per packet (nil for a format whose packets are all one size).
    public let packetDescriptions: UnsafeMutablePointer<AudioStreamPacketDescription>?
    /// Packets held.
    open var packetCount: AVAudioPacketCount = 0
    /// Bytes held; setting it sets the buffer list's `mDataByteSize`.
    open var byteLength: UInt32 = 0 {
        didSet { UnsafeMutableAudioBufferListPointer(mutableAudioBufferList)[0].mDataByteSize = byteLength }
    }

    /// A buffer of `packetCapacity` packets of at most `maximumPacketSize` bytes.
    public init(format: AVAudioFormat, packetCapacity: AVAudioPacketCount, maximumPacketSize: Int) {
        let asbd = format.streamDescription.pointee
        self.packetCapacity = packetCapacity
        self.maximumPacketSize = max(maximumPacketSize, 1)
        let bytes = Int(packetCapacity) * self.maximumPacketSize
        byteCapacity = UInt32(clamping: bytes)
        data = .allocate(byteCount: max(bytes, 1), alignment: 16)
        data.initializeMemory(as: UInt8.self, repeating: 0, count: max(bytes, 1))
        let varies = asbd.mBytesPerPacket == 0 || asbd.mFramesPerPacket == 0
        packetDescriptions = varies ? .allocate(capacity: max(Int(packetCapacity), 1)) : nil
        packetDescriptions?.initialize(repeating: AudioStreamPacketDescription(), count: max(Int(packetCapacity), 1))
        super.init(format: format, buffers: 1)
        UnsafeMutableAudioBufferListPointer(mutableAudioBufferList)[0] = AudioBuffer(mNumberChannels: asbd.mChannelsPerFrame, mDataByteSize: 0, mData: data)
    }

    /// A buffer for a format whose packets are all one size (`mBytesPerPacket`).
    public convenience init(format: AVAudioFormat, packetCapacity: AVAudioPacketCount) {
        self.init(format: format, packetCapacity: packetCapacity, maximumPacketSize: Int(format.streamDescription.pointee.mBytesPerPacket))
    }

    deinit {
        data.deallocate()
        packetDescriptions?.deallocate()
    }
}
