import Testing
import BufferQueue

/// Core Audio's channel-layout form, read and written in one place (CAF's `chan`, AudioToolbox's
/// `AudioChannelLayout`).
@Suite struct CoreAudioChannelLayoutTests {
    static let fiveOne = AudioChannelLayout(channelLabels: [.left, .right, .center, .lfeScreen, .leftSurround, .rightSurround])

    @Test(arguments: [true, false])
    func descriptionsRoundTripInEitherByteOrder(_ bigEndian: Bool) throws {
        let bytes = CoreAudioChannelLayout(Self.fiveOne, namedTags: false).bytes(bigEndian: bigEndian)
        #expect(bytes.count == 12 + 6 * 20)
        // CAF's big-endian words: tag 0, bitmap 0, count 6, then the first label (1, left).
        if bigEndian { #expect(Array(bytes[8..<16]) == [0, 0, 0, 6, 0, 0, 0, 1]) }
        let read = try #require(bytes.withUnsafeBytes { CoreAudioChannelLayout(bytes: $0, bigEndian: bigEndian) })
        #expect(read.channelCount == 6)
        #expect(read.layout(channels: 6) == Self.fiveOne)
    }

    @Test func namedTagsAndBitmaps() {
        #expect(CoreAudioChannelLayout(.stereo, namedTags: true) == CoreAudioChannelLayout(tag: CoreAudioChannelLayout.stereo))
        #expect(CoreAudioChannelLayout(.mono, namedTags: true).bytes(bigEndian: false).count == 12)
        #expect(CoreAudioChannelLayout(tag: CoreAudioChannelLayout.mpeg5_1_A).layout(channels: 6) == Self.fiveOne)
        #expect(CoreAudioChannelLayout(tag: CoreAudioChannelLayout.mpeg5_1_D).layout(channels: 6)?.channelLabels.first == .center)
        #expect(CoreAudioChannelLayout(tag: CoreAudioChannelLayout.stereoHeadphones).layout(channels: 2) == .stereo)
        // WAVE's 5.1 bits, in bit order.
        let bitmap = CoreAudioChannelLayout(tag: CoreAudioChannelLayout.useChannelBitmap, bitmap: 0x3F)
        #expect(bitmap.channelCount == 6 && bitmap.layout(channels: 6) == Self.fiveOne)
        // Another named tag: its count, the default order; another count: nothing.
        let quad: UInt32 = 108 << 16 | 4
        #expect(CoreAudioChannelLayout(tag: quad).channelCount == 4)
        #expect(CoreAudioChannelLayout(tag: quad).layout(channels: 4) == .default(channels: 4))
        #expect(CoreAudioChannelLayout(tag: quad).layout(channels: 2) == nil)
    }

    @Test func bytesTooFewForTheirDescriptionsAreRefused() {
        var bytes = CoreAudioChannelLayout(Self.fiveOne, namedTags: false).bytes(bigEndian: true)
        bytes.removeLast(1)
        #expect(bytes.withUnsafeBytes { CoreAudioChannelLayout(bytes: $0, bigEndian: true) } == nil)
        #expect([UInt8](repeating: 0, count: 11).withUnsafeBytes { CoreAudioChannelLayout(bytes: $0, bigEndian: true) } == nil)
    }
}
