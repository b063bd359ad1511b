/// Collects interleaved frames into blocks of a fixed number of frames: the whole packets an
/// encoder codes (IMA's 64 frames, Opus's 960, AAC's 1 024). Frames arrive in any amounts; each
/// block is handed over as soon as it is full, and what is left at the end can be padded with
/// silence (zero bytes) to a last whole block.
public final class FrameBlocks {
    /// Frames in a block.
    public let framesPerBlock: Int
    /// Bytes in a frame.
    public let bytesPerFrame: Int
    private let storage: UnsafeMutableRawPointer
    /// Frames in the block being filled.
    public private(set) var frames = 0

    /// Blocks of `framesPerBlock` frames of `bytesPerFrame` bytes.
    public init(framesPerBlock: Int, bytesPerFrame: Int) {
        self.framesPerBlock = framesPerBlock
        self.bytesPerFrame = bytesPerFrame
        storage = .allocate(byteCount: max(framesPerBlock * bytesPerFrame, 1), alignment: 16)
    }

    deinit { storage.deallocate() }

    /// Appends whole frames (a trailing partial frame is ignored), calling `full` with each block
    /// as it fills.
    public func add(_ bytes: UnsafeRawBufferPointer, full: (UnsafeRawBufferPointer) throws -> Void) rethrows {
        let count = bytes.count / bytesPerFrame
        guard count > 0, let source = bytes.baseAddress else { return }
        var done = 0
        while done < count {
            let take = min(count - done, framesPerBlock - frames)
            (storage + frames * bytesPerFrame).copyMemory(from: source + done * bytesPerFrame, byteCount: take * bytesPerFrame)
            frames += take
            done += take
            if frames == framesPerBlock {
                frames = 0
                try full(UnsafeRawBufferPointer(start: storage, count: framesPerBlock * bytesPerFrame))
            }
        }
    }

    /// The frames held, as a whole block padded with zero bytes when `padded`, or as they are;
    /// nil when none are held. The block is empty afterwards.
    public func takeRest(padded: Bool) -> UnsafeRawBufferPointer? {
        guard frames > 0 else { return nil }
        let held = frames
        frames = 0
        guard padded else { return UnsafeRawBufferPointer(start: storage, count: held * bytesPerFrame) }
        (storage + held * bytesPerFrame).initializeMemory(as: UInt8.self, repeating: 0, count: (framesPerBlock - held) * bytesPerFrame)
        return UnsafeRawBufferPointer(start: storage, count: framesPerBlock * bytesPerFrame)
    }

    /// A block of silence (for an encoder that must run on past the end of its input).
    public func silence() -> UnsafeRawBufferPointer {
        storage.initializeMemory(as: UInt8.self, repeating: 0, count: framesPerBlock * bytesPerFrame)
        frames = 0
        return UnsafeRawBufferPointer(start: storage, count: framesPerBlock * bytesPerFrame)
    }
}
