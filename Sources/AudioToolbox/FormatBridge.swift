package import BufferQueue

// The one mapping between Apple's stream description and the library's, for AudioToolbox and
// for the layers over it (AVFAudio).

extension AudioStreamBasicDescription {
    package init(_ format: BufferQueue.AudioStreamDescription) {
        self.init(mSampleRate: format.sampleRate, mFormatID: format.formatID.rawValue, mFormatFlags: format.formatFlags.rawValue,
                  mBytesPerPacket: UInt32(clamping: format.bytesPerPacket), mFramesPerPacket: UInt32(clamping: format.framesPerPacket),
                  mBytesPerFrame: UInt32(clamping: format.bytesPerFrame), mChannelsPerFrame: UInt32(clamping: format.channelsPerFrame),
                  mBitsPerChannel: UInt32(clamping: format.bitsPerChannel), mReserved: 0)
    }

    /// The library's description of the same format.
    package var library: BufferQueue.AudioStreamDescription {
        BufferQueue.AudioStreamDescription(
            sampleRate: mSampleRate, formatID: BufferQueue.AudioFormatID(rawValue: mFormatID),
            formatFlags: BufferQueue.AudioFormatFlags(rawValue: mFormatFlags),
            bytesPerPacket: Int(mBytesPerPacket), framesPerPacket: Int(mFramesPerPacket), bytesPerFrame: Int(mBytesPerFrame),
            channelsPerFrame: Int(mChannelsPerFrame), bitsPerChannel: Int(mBitsPerChannel))
    }
}

