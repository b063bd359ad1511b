import Foundation
import Testing
@testable import BufferQueue

/// The render stage's parameters as one block: read whole or not at all, every set counted.
@Suite struct RenderParametersTests {
    @Test func aBlockIsReadAsPublished() throws {
        let block = RenderParameters()
        #expect(block.generation == 0 && block.read(at: 0) == RenderParameters.Values())
        block.update { $0.volume = 0.5; $0.volumeSets += 1; $0.rampSeconds = 0.2 }
        let generation = block.generation
        #expect(generation == 2)
        let values = try #require(block.read(at: generation))
        #expect(values.volume == 0.5 && values.volumeSets == 1 && values.rampSeconds == 0.2 && values.panSets == 0)
        // A generation that is no longer current is not read.
        block.update { $0.volume = 0.5; $0.volumeSets += 1 }
        #expect(block.read(at: generation) == nil)
        #expect(block.read(at: block.generation)?.volumeSets == 2)
        // An odd generation (a write under way) is never read.
        #expect(block.read(at: 3) == nil)
    }

    /// A writer publishing volume = pan = n while a reader reads, each on a thread of its own, a
    /// bounded number of times: every block read is one the writer published (never half of
    /// one), and the counts only grow.
    @Test func aReaderNeverSeesHalfABlock() async {
        let block = RenderParameters()
        // The reader starts once the first block is written (it waits on its own thread).
        let firstWritten = DispatchSemaphore(value: 0)
        async let written: Int = onOwnThread {
            for n in 1...100_000 {
                block.update { $0.volume = Float(n); $0.pan = Float(n); $0.volumeSets = n; $0.panSets = n }
                if n == 1 { firstWritten.signal() }
            }
            return 100_000
        }
        async let checked: (torn: Int, read: Int) = onOwnThread {
            firstWritten.wait()
            var torn = 0, read = 0, last = 0
            for _ in 0..<1_000_000 {
                // Before the first write the block holds the defaults (volume 1, pan 0).
                guard let values = block.read(at: block.generation), values.volumeSets > 0 else { continue }
                read += 1
                if values.volume != values.pan || values.volumeSets != values.panSets || Int(values.volume) != values.volumeSets
                    || values.volumeSets < last { torn += 1 }
                last = values.volumeSets
            }
            return (torn, read)
        }
        let (count, result) = await (written, checked)
        #expect(count == 100_000)
        #expect(result.torn == 0, "\(result.torn) of \(result.read) blocks read were not as published")
        #expect(result.read > 0)
        // After the writer: the last block is read whole.
        #expect(block.read(at: block.generation)?.volumeSets == 100_000)
    }
}
