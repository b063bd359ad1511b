import BufferQueue

extension ByteInput {
    /// The frames an Apple Lossless packet starting here holds: its first element's sample count
    /// when the "partial frame" flag is set (the last packet of a stream), otherwise `full`.
    ///
    /// The element header is 3 bits of type, 4 of instance tag, 12 reserved, then the partial,
    /// shift and escape flags (1 + 2 + 1 bits) and, when partial, a 32-bit frame count.
    func alacPacketFrames(size: Int, full: Int) -> Int {
        guard size >= 7, available >= 7 else { return full }
        var header: UInt64 = 0
        for index in 0..<7 { header = header << 8 | UInt64(u8(index)) }
        header <<= 8
        let element = header >> 61
        guard element == 0 || element == 1 || element == 3, (header >> 44) & 1 == 1 else { return full }
        let frames = Int((header >> 9) & 0xFFFF_FFFF)
        return frames > 0 && frames <= full ? frames : full
    }
}

extension ByteInput {
    /// The frames of an AMR packet starting here (one or more storage-format frames, each a ToC
    /// byte and its payload): 160 (NB) or 320 (WB) per frame, counted by walking the ToC bytes;
    /// `fallback` when the packet is not a clean run of frames.
    func amrPacketFrames(size: Int, wideband: Bool, fallback: Int) -> Int {
        guard available >= size else { return fallback }
        var offset = 0, frames = 0
        while offset < size {
            guard let bytes = AMRFrame.storageBytes(type: AMRFrame.type(ofTableOfContents: u8(offset)), wideband: wideband) else { return fallback }
            offset += bytes
            frames += AMRFrame.frames(wideband: wideband)
        }
        return offset == size ? frames : fallback
    }
}
