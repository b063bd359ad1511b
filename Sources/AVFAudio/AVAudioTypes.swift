@_exported import AudioToolbox
// As on a Mac, `import AVFAudio` brings Foundation (URL, NSError, Data) with it.
@_exported import Foundation

/// A number of sample frames (Apple's `AVAudioFrameCount`).
public typealias AVAudioFrameCount = UInt32
/// A number of packets (Apple's `AVAudioPacketCount`).
public typealias AVAudioPacketCount = UInt32
/// A position in a file or a timeline, in sample frames (Apple's `AVAudioFramePosition`).
public typealias AVAudioFramePosition = Int64
/// A number of channels (Apple's `AVAudioChannelCount`).
public typealias AVAudioChannelCount = UInt32
/// The index of a node's bus (Apple's `AVAudioNodeBus`).
public typealias AVAudioNodeBus = Int

/// The sample formats an ``AVAudioFormat`` names (Apple's raw values).
public enum AVAudioCommonFormat: UInt, Sendable {
    /// Not one of the others (compressed, or PCM of another layout).
    case otherFormat = 0
    /// 32-bit native-endian float.
    case pcmFormatFloat32 = 1
    /// 64-bit native-endian float.
    case pcmFormatFloat64 = 2
    /// 16-bit native-endian signed integer.
    case pcmFormatInt16 = 3
    /// 32-bit native-endian signed integer.
    case pcmFormatInt32 = 4
}

/// An encoder's quality setting (`AVEncoderAudioQualityKey`), Apple's raw values.
public enum AVAudioQuality: Int, Sendable {
    case min = 0
    case low = 0x20
    case medium = 0x40
    case high = 0x60
    case max = 0x7F
}

// Keys of the settings dictionaries of AVAudioFormat, AVAudioFile and AVAudioRecorder (their
// string values are Apple's).
/// The format id (`kAudioFormatLinearPCM`, `kAudioFormatMPEG4AAC`, `kAudioFormatFLAC` …), a UInt32.
public let AVFormatIDKey = "AVFormatIDKey"
/// The sample rate in hertz, a Double.
public let AVSampleRateKey = "AVSampleRateKey"
/// The number of channels, an Int.
public let AVNumberOfChannelsKey = "AVNumberOfChannelsKey"
/// Linear PCM's bits per sample (8, 16, 24 or 32), an Int.
public let AVLinearPCMBitDepthKey = "AVLinearPCMBitDepthKey"
/// Linear PCM stored big-endian, a Bool.
public let AVLinearPCMIsBigEndianKey = "AVLinearPCMIsBigEndianKey"
/// Linear PCM as floating point, a Bool.
public let AVLinearPCMIsFloatKey = "AVLinearPCMIsFloatKey"
/// Linear PCM with each channel in a buffer of its own, a Bool.
public let AVLinearPCMIsNonInterleaved = "AVLinearPCMIsNonInterleaved"
/// An encoder's bit rate in bits per second, an Int.
public let AVEncoderBitRateKey = "AVEncoderBitRateKey"
/// An encoder's quality, an ``AVAudioQuality`` raw value.
public let AVEncoderAudioQualityKey = "AVEncoderAudioQualityKey"
/// A lossless encoder's bits per sample (ALAC, FLAC), an Int.
public let AVEncoderBitDepthHintKey = "AVEncoderBitDepthHintKey"
/// The channel layout, `Data` holding an `AudioChannelLayout`.
public let AVChannelLayoutKey = "AVChannelLayoutKey"

/// The error AVFAudio's calls throw: Apple's `NSOSStatusErrorDomain` with the Core Audio status,
/// and the reason in `localizedDescription`.
func statusError(_ status: OSStatus, _ message: String) -> NSError {
    NSError(domain: NSOSStatusErrorDomain, code: Int(status), userInfo: [NSLocalizedDescriptionKey: message])
}

/// Where a call that reports errors Objective-C's way puts its error (`var error: NSError?`,
/// passed as `&error`): Foundation on Linux does not declare Apple's `NSErrorPointer`.
public typealias NSErrorPointer = UnsafeMutablePointer<NSError?>?
