import Foundation

/// An audio format: a stream description, with a channel layout where there are more than two
/// channels or one was given (Apple's `AVAudioFormat`).
///
/// The standard format is deinterleaved 32-bit float, the format AVFAudio processes in.
open class AVAudioFormat: NSObject {
    private let asbd: UnsafeMutablePointer<AudioStreamBasicDescription>
    /// The channel layout (nil for mono and stereo made without one).
    public let channelLayout: AVAudioChannelLayout?
    /// What a decoder needs before the first packet (an AAC AudioSpecificConfig, FLAC's STREAMINFO …).
    open var magicCookie: Data?

    /// A format from a stream description; nil when it describes no usable format (no channels,
    /// no sample rate, or a PCM frame size that does not match its channels and bits).
    public init?(streamDescription asbd: UnsafePointer<AudioStreamBasicDescription>) {
        guard Self.isUsable(asbd.pointee) else { return nil }
        self.asbd = .allocate(capacity: 1)
        self.asbd.initialize(to: asbd.pointee)
        channelLayout = nil
        super.init()
    }

    /// A format from a stream description and a layout of as many channels.
    public init?(streamDescription asbd: UnsafePointer<AudioStreamBasicDescription>, channelLayout layout: AVAudioChannelLayout?) {
        guard Self.isUsable(asbd.pointee), layout.map({ $0.channelCount == asbd.pointee.mChannelsPerFrame }) ?? true else { return nil }
        self.asbd = .allocate(capacity: 1)
        self.asbd.initialize(to: asbd.pointee)
        channelLayout = layout
        super.init()
    }

    /// The standard format (deinterleaved float32) at `sampleRate` with `channels`.
    public convenience init?(standardFormatWithSampleRate sampleRate: Double, channels: AVAudioChannelCount) {
        self.init(commonFormat: .pcmFormatFloat32, sampleRate: sampleRate, channels: channels, interleaved: false)
    }

    /// The standard format (deinterleaved float32) at `sampleRate` for `layout`.
    public convenience init(standardFormatWithSampleRate sampleRate: Double, channelLayout layout: AVAudioChannelLayout) {
        self.init(commonFormat: .pcmFormatFloat32, sampleRate: sampleRate, interleaved: false, channelLayout: layout)
    }

    /// PCM of a common sample format; nil for `.otherFormat`, no channels or no sample rate.
    public init?(commonFormat format: AVAudioCommonFormat, sampleRate: Double, channels: AVAudioChannelCount, interleaved: Bool) {
        guard let asbd = Self.pcmDescription(format, sampleRate: sampleRate, channels: channels, interleaved: interleaved) else { return nil }
        self.asbd = .allocate(capacity: 1)
        self.asbd.initialize(to: asbd)
        channelLayout = nil
        super.init()
    }

    /// PCM of a common sample format for `layout` (its channel count). Traps for `.otherFormat`
    /// or a sample rate of 0, as Apple's raises an exception.
    public init(commonFormat format: AVAudioCommonFormat, sampleRate: Double, interleaved: Bool, channelLayout layout: AVAudioChannelLayout) {
        guard let asbd = Self.pcmDescription(format, sampleRate: sampleRate, channels: layout.channelCount, interleaved: interleaved) else {
            preconditionFailure("AVAudioFormat: \(format) at \(sampleRate) Hz with \(layout.channelCount) channels is not a PCM format")
        }
        self.asbd = .allocate(capacity: 1)
        self.asbd.initialize(to: asbd)
        channelLayout = layout
        super.init()
    }

    /// A format from a settings dictionary (``AVFormatIDKey``, ``AVSampleRateKey``,
    /// ``AVNumberOfChannelsKey``, and for linear PCM ``AVLinearPCMBitDepthKey``,
    /// ``AVLinearPCMIsFloatKey``, ``AVLinearPCMIsBigEndianKey``, ``AVLinearPCMIsNonInterleaved``);
    /// nil without a sample rate or channel count.
    public convenience init?(settings: [String: Any]) {
        guard let rate = Self.number(settings[AVSampleRateKey]), rate > 0,
              let channels = Self.number(settings[AVNumberOfChannelsKey]), channels >= 1 else { return nil }
        let formatID = Self.number(settings[AVFormatIDKey]).map { AudioFormatID(UInt32(truncatingIfNeeded: Int64($0))) } ?? kAudioFormatLinearPCM
        var asbd = AudioStreamBasicDescription(mSampleRate: rate, mFormatID: formatID, mFormatFlags: 0, mBytesPerPacket: 0, mFramesPerPacket: 0,
                                               mBytesPerFrame: 0, mChannelsPerFrame: UInt32(channels), mBitsPerChannel: 0, mReserved: 0)
        if formatID == kAudioFormatLinearPCM {
            let bits = Int(Self.number(settings[AVLinearPCMBitDepthKey]) ?? 16)
            let float = settings[AVLinearPCMIsFloatKey] as? Bool ?? false
            let bigEndian = settings[AVLinearPCMIsBigEndianKey] as? Bool ?? false
            let deinterleaved = settings[AVLinearPCMIsNonInterleaved] as? Bool ?? false
            guard [8, 16, 24, 32, 64].contains(bits), !float || bits >= 32 else { return nil }
            var flags: UInt32 = kAudioFormatFlagIsPacked
            flags |= float ? kAudioFormatFlagIsFloat : (bits > 8 ? kAudioFormatFlagIsSignedInteger : 0)
            if bigEndian { flags |= kAudioFormatFlagIsBigEndian }
            if deinterleaved { flags |= kAudioFormatFlagIsNonInterleaved }
            let bytes = UInt32(bits / 8) * (deinterleaved ? 1 : UInt32(channels))
            asbd.mFormatFlags = flags
            asbd.mBitsPerChannel = UInt32(bits)
            asbd.mBytesPerFrame = bytes
            asbd.mBytesPerPacket = bytes
            asbd.mFramesPerPacket = 1
        }
        let layout = (settings[AVChannelLayoutKey] as? Data).flatMap { data -> AVAudioChannelLayout? in
            guard data.count >= MemoryLayout<AudioChannelLayout>.size else { return nil }
            return data.withUnsafeBytes { raw in
                let copy = UnsafeMutableRawPointer.allocate(byteCount: raw.count, alignment: MemoryLayout<AudioChannelLayout>.alignment)
                defer { copy.deallocate() }
                copy.copyMemory(from: raw.baseAddress ?? UnsafeRawPointer(copy), byteCount: raw.count)
                return AVAudioChannelLayout(layout: copy.assumingMemoryBound(to: AudioChannelLayout.self))
            }
        }
        self.init(streamDescription: &asbd, channelLayout: layout?.channelCount == UInt32(channels) ? layout : nil)
    }

    deinit {
        asbd.deinitialize(count: 1)
        asbd.deallocate()
    }

    /// The stream description (valid while this object lives).
    public var streamDescription: UnsafePointer<AudioStreamBasicDescription> { UnsafePointer(asbd) }
    /// Frames per second.
    public var sampleRate: Double { self.asbd.pointee.mSampleRate }
    /// The number of channels.
    public var channelCount: AVAudioChannelCount { self.asbd.pointee.mChannelsPerFrame }
    /// Whether the channels are interleaved in one buffer (always true for one channel, as Apple's).
    public var isInterleaved: Bool { self.asbd.pointee.mFormatFlags & kAudioFormatFlagIsNonInterleaved == 0 || channelCount == 1 }
    /// Whether this is the standard format: deinterleaved float32.
    public var isStandard: Bool { commonFormat == .pcmFormatFloat32 && self.asbd.pointee.mFormatFlags & kAudioFormatFlagIsNonInterleaved != 0 }

    /// The common sample format, or `.otherFormat`.
    public var commonFormat: AVAudioCommonFormat {
        let asbd = self.asbd.pointee
        guard asbd.mFormatID == kAudioFormatLinearPCM, asbd.mFormatFlags & kAudioFormatFlagIsBigEndian == 0,
              asbd.mFormatFlags & kAudioFormatFlagIsPacked != 0 || asbd.mBitsPerChannel % 8 == 0 else { return .otherFormat }
        let float = asbd.mFormatFlags & kAudioFormatFlagIsFloat != 0
        switch (float, asbd.mBitsPerChannel) {
        case (true, 32): return .pcmFormatFloat32
        case (true, 64): return .pcmFormatFloat64
        case (false, 16) where asbd.mFormatFlags & kAudioFormatFlagIsSignedInteger != 0: return .pcmFormatInt16
        case (false, 32) where asbd.mFormatFlags & kAudioFormatFlagIsSignedInteger != 0: return .pcmFormatInt32
        default: return .otherFormat
        }
    }

    /// The format as a settings dictionary (the keys ``init(settings:)`` takes).
    public var settings: [String: Any] {
        let asbd = self.asbd.pointee
        var settings: [String: Any] = [AVFormatIDKey: asbd.mFormatID, AVSampleRateKey: asbd.mSampleRate,
                                       AVNumberOfChannelsKey: Int(asbd.mChannelsPerFrame)]
        if asbd.mFormatID == kAudioFormatLinearPCM {
            settings[AVLinearPCMBitDepthKey] = Int(asbd.mBitsPerChannel)
            settings[AVLinearPCMIsFloatKey] = asbd.mFormatFlags & kAudioFormatFlagIsFloat != 0
            settings[AVLinearPCMIsBigEndianKey] = asbd.mFormatFlags & kAudioFormatFlagIsBigEndian != 0
            settings[AVLinearPCMIsNonInterleaved] = asbd.mFormatFlags & kAudioFormatFlagIsNonInterleaved != 0
        }
        if let channelLayout { settings[AVChannelLayoutKey] = channelLayout.data }
        return settings
    }

    open override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? AVAudioFormat else { return false }
        let (a, b) = (self.asbd.pointee, other.asbd.pointee)
        return a.mSampleRate == b.mSampleRate && a.mFormatID == b.mFormatID && a.mFormatFlags == b.mFormatFlags
            && a.mBytesPerPacket == b.mBytesPerPacket && a.mFramesPerPacket == b.mFramesPerPacket && a.mBytesPerFrame == b.mBytesPerFrame
            && a.mChannelsPerFrame == b.mChannelsPerFrame && a.mBitsPerChannel == b.mBitsPerChannel
            && (channelLayout == nil) == (other.channelLayout == nil) && (channelLayout.map { $0.isEqual(other.channelLayout) } ?? true)
    }

    open override var hash: Int { Int(self.asbd.pointee.mSampleRate) ^ Int(self.asbd.pointee.mChannelsPerFrame) << 20 }

    open override var description: String {
        let asbd = self.asbd.pointee
        let layout = channelLayout.map { ", layout tag \($0.layoutTag)" } ?? ""
        return "<AVAudioFormat: \(asbd.mChannelsPerFrame) ch, \(asbd.mSampleRate) Hz, \(commonFormat == .otherFormat ? fourCC(asbd.mFormatID) : "\(commonFormat)")\(isInterleaved ? ", interleaved" : ", deinterleaved")\(layout)>"
    }

    private func fourCC(_ value: UInt32) -> String {
        String(decoding: [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: value >> $0) }, as: UTF8.self)
    }

    // MARK: helpers

    /// Whether buffers of `other` hold their samples as this format's do: the same common PCM
    /// format, channels, rate and interleaving (a channel layout given or not does not matter).
    func holdsSamples(as other: AVAudioFormat) -> Bool {
        commonFormat == other.commonFormat && commonFormat != .otherFormat && channelCount == other.channelCount
            && sampleRate == other.sampleRate && isInterleaved == other.isInterleaved
    }

    static func pcmDescription(_ format: AVAudioCommonFormat, sampleRate: Double, channels: AVAudioChannelCount, interleaved: Bool) -> AudioStreamBasicDescription? {
        guard sampleRate > 0, channels >= 1 else { return nil }
        let (bits, flags): (UInt32, UInt32)
        switch format {
        case .otherFormat: return nil
        case .pcmFormatFloat32: (bits, flags) = (32, kAudioFormatFlagIsFloat)
        case .pcmFormatFloat64: (bits, flags) = (64, kAudioFormatFlagIsFloat)
        case .pcmFormatInt16: (bits, flags) = (16, kAudioFormatFlagIsSignedInteger)
        case .pcmFormatInt32: (bits, flags) = (32, kAudioFormatFlagIsSignedInteger)
        }
        let deinterleaved = !interleaved && channels > 1
        let bytes = bits / 8 * (deinterleaved ? 1 : channels)
        return AudioStreamBasicDescription(mSampleRate: sampleRate, mFormatID: kAudioFormatLinearPCM,
                                           mFormatFlags: flags | kAudioFormatFlagIsPacked | (deinterleaved ? kAudioFormatFlagIsNonInterleaved : 0),
                                           mBytesPerPacket: bytes, mFramesPerPacket: 1, mBytesPerFrame: bytes, mChannelsPerFrame: channels,
                                           mBitsPerChannel: bits, mReserved: 0)
    }

    static func isUsable(_ asbd: AudioStreamBasicDescription) -> Bool {
        guard asbd.mSampleRate > 0, asbd.mSampleRate.isFinite, asbd.mChannelsPerFrame >= 1 else { return false }
        guard asbd.mFormatID == kAudioFormatLinearPCM else { return true }
        let perFrame = asbd.mFormatFlags & kAudioFormatFlagIsNonInterleaved != 0 ? 1 : asbd.mChannelsPerFrame
        return asbd.mBitsPerChannel > 0 && asbd.mBytesPerFrame >= perFrame * ((asbd.mBitsPerChannel + 7) / 8)
    }

    /// A settings value as a number (Int, Double, UInt32, NSNumber…).
    static func number(_ value: Any?) -> Double? {
        switch value {
        case let value as Double: return value
        case let value as Int: return Double(value)
        case let value as UInt32: return Double(value)
        case let value as Int32: return Double(value)
        case let value as Float: return Double(value)
        case let value as NSNumber: return value.doubleValue
        default: return nil
        }
    }
}
