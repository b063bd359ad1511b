import BufferQueue
import Dispatch
import Synchronization

/// Takes what a siphon sees on the render thread and hands it to a `record` closure on a thread of
/// its own: the render thread only copies into a ring (no allocation, no I/O), and the writer
/// thread drains it, so a recording that writes a file never stalls a real-time sink.
///
/// Nothing is dropped: when the writer falls behind by more than the ring holds (only when
/// playback runs faster than real time, an unpaced null sink), the render thread waits for room.
final class SiphonRecorder: Sendable {
    private let ring: SampleRing
    private let channels: Int
    private let format: AudioStreamDescription
    private let record: @Sendable (UnsafeBufferPointer<Float>, AudioStreamDescription) -> Void
    private let dataReady = DispatchSemaphore(value: 0)
    private let roomFreed = DispatchSemaphore(value: 0)
    private let drained = DispatchSemaphore(value: 0)
    private let finishing = Atomic<Bool>(false)

    init(format: AudioStreamDescription, seconds: Double = 2,
         record: @escaping @Sendable (UnsafeBufferPointer<Float>, AudioStreamDescription) -> Void) {
        self.format = format
        channels = max(format.channelsPerFrame, 1)
        ring = SampleRing(minimumCapacity: Int(format.sampleRate * seconds) * channels)
        self.record = record
        OwnThread.start(name: "AudioPlayback.recorder") { [self] in writerLoop() }
    }

    /// On the render thread: copies `frames` frames into the ring.
    func push(_ samples: UnsafePointer<Float>, frames: Int) {
        let count = frames * channels
        var offset = 0
        while offset < count {
            let room = ring.writable / channels * channels
            if room == 0 {
                roomFreed.wait()   // the writer fell behind: faster than real time only
                continue
            }
            let n = min(room, count - offset)
            ring.write(samples + offset, count: n)
            offset += n
            dataReady.signal()
        }
    }

    /// Hands over everything pushed so far, then ends the writer thread. Call once, after the
    /// last push.
    func finish() {
        finishing.store(true, ordering: .releasing)
        dataReady.signal()
        drained.wait()
    }

    private func writerLoop() {
        let blockSamples = 8192 * channels
        var scratch = [Float](repeating: 0, count: blockSamples)
        while true {
            dataReady.wait()
            let ending = finishing.load(ordering: .acquiring)
            while ring.readable > 0 {
                let n = min(ring.readable / channels * channels, blockSamples)
                if n == 0 { break }
                scratch.withUnsafeMutableBufferPointer { destination in
                    ring.consume(count: n) { source, offset, count in
                        (destination.baseAddress! + offset).update(from: source, count: count)
                    }
                }
                roomFreed.signal()
                scratch.withUnsafeBufferPointer { record(UnsafeBufferPointer(rebasing: $0[0..<n]), format) }
            }
            if ending {
                drained.signal()
                return
            }
        }
    }
}
