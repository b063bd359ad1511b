import BufferQueue

/// What ``ByteInput/dropCutFrame(_:headerBytes:_:_:isHeader:confirms:)`` did.
enum CutFrameCheck { case needMore, dropped, whole }

extension ByteInput {
    /// Drops the frame at the read position when it was cut short by another frame starting
    /// inside it (a spliced or damaged MPEG audio or ADTS stream), with a warning. Checked only
    /// when no frame, tag or end of data follows where the frame's header says it ends: emitting
    /// it whole would swallow the start of the good frame after it.
    func dropCutFrame(_ length: Int, headerBytes: Int, _ out: StreamOutput, _ container: AudioFileType,
                      isHeader: (Int) -> Bool, confirms: (Int) -> Confirmation<some Any>) -> CutFrameCheck {
        if available < length + headerBytes {
            guard atEnd else {
                waitFor(length + headerBytes)
                return .needMore
            }
            if available == length { return .whole }
        } else if isHeader(length) || isTag(at: length) {
            return .whole
        }
        for start in 1..<length where u8(start) == 0xFF {
            switch confirms(start) {
            case .yes:
                out.warn(AudioFileStreamError(.invalidData, container, position,
                    "a frame cut short after \(start) of its \(length) bytes is dropped; the next frame starts there"))
                consume(start)
                return .dropped
            case .needMore(let count):
                if !atEnd {
                    waitFor(count)
                    return .needMore
                }
            case .no: break
            }
        }
        return .whole
    }
}
