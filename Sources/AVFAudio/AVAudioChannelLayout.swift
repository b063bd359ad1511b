import Foundation

/// A channel layout: which speaker each channel feeds (Apple's `AVAudioChannelLayout`), holding
/// an `AudioChannelLayout`.
open class AVAudioChannelLayout: NSObject {
    private let storage: UnsafeMutableRawPointer
    private let size: Int

    /// A layout of `layoutTag` (`kAudioChannelLayoutTag_Stereo`, `kAudioChannelLayoutTag_MPEG_5_1_A` …);
    /// nil for a tag that needs channel descriptions or a bitmap.
    public init?(layoutTag: AudioChannelLayoutTag) {
        guard layoutTag != kAudioChannelLayoutTag_UseChannelDescriptions, layoutTag != kAudioChannelLayoutTag_UseChannelBitmap else { return nil }
        size = MemoryLayout<AudioChannelLayout>.size
        storage = .allocate(byteCount: size, alignment: MemoryLayout<AudioChannelLayout>.alignment)
        storage.initializeMemory(as: UInt8.self, repeating: 0, count: size)
        storage.bindMemory(to: AudioChannelLayout.self, capacity: 1).pointee.mChannelLayoutTag = layoutTag
        super.init()
    }

    /// A copy of `layout` (its channel descriptions included).
    public init(layout: UnsafePointer<AudioChannelLayout>) {
        let descriptions = Int(layout.pointee.mNumberChannelDescriptions)
        size = MemoryLayout<AudioChannelLayout>.size + max(descriptions - 1, 0) * MemoryLayout<AudioChannelDescription>.stride
        storage = .allocate(byteCount: size, alignment: MemoryLayout<AudioChannelLayout>.alignment)
        storage.copyMemory(from: UnsafeRawPointer(layout), byteCount: size)
        super.init()
    }

    deinit { storage.deallocate() }

    /// The layout's tag.
    public var layoutTag: AudioChannelLayoutTag { layout.pointee.mChannelLayoutTag }

    /// The `AudioChannelLayout` itself (valid while this object lives).
    public var layout: UnsafePointer<AudioChannelLayout> { UnsafePointer(storage.assumingMemoryBound(to: AudioChannelLayout.self)) }

    /// The number of channels the layout describes.
    public var channelCount: AVAudioChannelCount {
        let value = layout.pointee
        switch value.mChannelLayoutTag {
        case kAudioChannelLayoutTag_UseChannelDescriptions: return value.mNumberChannelDescriptions
        case kAudioChannelLayoutTag_UseChannelBitmap: return UInt32(value.mChannelBitmap.rawValue.nonzeroBitCount)
        default: return value.mChannelLayoutTag & 0xFFFF
        }
    }

    /// The layout's bytes, as `AVChannelLayoutKey` carries them.
    var data: Data { Data(bytes: storage, count: size) }

    open override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? AVAudioChannelLayout, other.size == size else { return false }
        return UnsafeRawBufferPointer(start: storage, count: size).elementsEqual(UnsafeRawBufferPointer(start: other.storage, count: size))
    }

    open override var hash: Int { Int(layoutTag) }
}
