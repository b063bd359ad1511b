import BufferQueue

/// What a container writer is told before the first packet.
struct ContainerStream {
    /// The packets' format.
    var format: AudioStreamDescription
    /// The decoder's cookie as the encoder gives it at the start (final in ``ContainerTotals``).
    var magicCookie: [UInt8]?
    /// The speakers of the channels, in the order they are encoded.
    var channelLayout: AudioChannelLayout?
    /// The encoder's delay.
    var primingFrames: Int
    var maximumPacketSize: Int
    /// Whether the file must stay playable if the process dies (see ``AudioFileWriter``).
    var recording: Bool
    /// About how many frames (of the packets' rate) will be written, when known.
    var expectedFrames: Int64? = nil
}

/// The gapless numbers and the final cookie, at a checkpoint or at the end.
struct ContainerTotals {
    /// Frames of the source in the packets written.
    var validFrames: Int64
    var primingFrames: Int
    /// Frames of padding after the valid ones, as the packets' own frame counts add up.
    var remainderFrames: Int
    var magicCookie: [UInt8]?
}

/// One container's way of laying packets down: a header when made, packets as they come, the
/// numbers filled in at the end. Each writer puts down the gapless numbers its container has.
protocol ContainerWriter: AnyObject {
    /// Appends encoded packets.
    func append(_ packets: EncodedPackets) throws
    /// A recording's periodic point: after it, a process killed at any moment leaves a file that
    /// plays the packets appended so far.
    func checkpoint(_ totals: ContainerTotals) throws
    /// Writes what is left and the final numbers (the output is closed by the caller).
    func finish(_ totals: ContainerTotals) throws
}

extension AudioChannelLayout {
    /// Whether every channel has a speaker (a layout worth writing down).
    var isLabelled: Bool { !channelLabels.contains(.unknown) && !channelLabels.isEmpty }
}
