// Generated from Docs/ProcessingTaps.md by DocSnippetTests (AQ_WRITE_SNIPPETS=1 swift test --filter DocSnippetTests): do not edit.
import BufferQueue
import Synchronization

// Compiled, never called.
func docSnippets_ProcessingTaps() async throws {
    let queue = try AudioQueue(format: .linearPCM(sampleRate: 44100, channels: 2, bitsPerChannel: 16))
    final class Biquad: Sendable {
        func reset() {}
        func process(_ samples: UnsafeMutablePointer<Float>, frames: Int) {}
    }
    final class Bands: Sendable {
        func reset() {}
        func process(_ samples: UnsafeMutablePointer<Float>, frames: Int) {}
    }
    let equaliser = Bands()
    final class Levels: Sendable { func store(_ peak: Float) {} }
    let levels = Levels()
    @Sendable func peak(_ samples: UnsafeMutablePointer<Float>, frames: Int) -> Float { 0 }
    _ = queue
    _ = equaliser
    _ = levels
    // Docs/ProcessingTaps.md, snippet 1
    let tap = try queue.installProcessingTap(.preEffects) { tap, frames, output, flags in
        if flags.contains(.startOfStream) { equaliser.reset() }
        let got = tap.getSourceAudio(frames: frames, into: output)
        equaliser.process(output, frames: got.frames)     // in place
        return got.frames
    }
    print(tap.maximumFrames, tap.processingFormat)          // 1024, float32 interleaved
    _ = tap
    // Docs/ProcessingTaps.md, snippet 2
    final class Equaliser: @unchecked Sendable {
        let bands: [Biquad]                                     // 31 Hz … 16 kHz, made up front
        init(bands: [Biquad]) { self.bands = bands }
        func reset() { bands.forEach { $0.reset() } }
        func process(_ samples: UnsafeMutablePointer<Float>, frames: Int) {
            for band in bands { band.process(samples, frames: frames) }
        }
    }
    // Docs/ProcessingTaps.md, snippet 3
    try queue.installProcessingTap(.siphon) { _, frames, output, _ in
        levels.store(peak(output, frames: frames))             // an atomic the UI reads
        return 0
    }
}
