import Synchronization

/// Volume, pan, play rate, pitch and the volume ramp as one block: the control path publishes the
/// whole block under one generation, the render thread reads it whole (a sequence lock: the
/// generation is odd while a write is under way, and a read that saw it change is not used).
/// Each value carries how many times it was set, so the render thread applies exactly the values
/// set since it last looked — also one set to what it already was, which restarts its ramp — and
/// a render that meets a write under way keeps the values it has until the next block.
/// Never blocks, allocates or locks on the render side.
final class RenderParameters: Sendable {
    /// The block's values as one value type.
    struct Values: Equatable, Sendable {
        var volume: Float = 1
        var pan: Float = 0
        var playRate: Float = 1
        var pitch: Float = 0
        /// The multiplier on the volume (``AudioQueueParameters/gain``).
        var gain: Float = 1
        /// Seconds over which volume and pan changes glide.
        var rampSeconds: Float = 0
        /// How many times each was set (the render thread compares them with what it applied).
        var volumeSets = 0
        var panSets = 0
        var playRateSets = 0
        var pitchSets = 0
        var gainSets = 0
    }

    /// Odd while a write is under way; each write adds 2.
    private let sequence = Atomic<Int>(0)
    private let volume = Atomic<UInt32>(Float(1).bitPattern)
    private let pan = Atomic<UInt32>(Float(0).bitPattern)
    private let playRate = Atomic<UInt32>(Float(1).bitPattern)
    private let pitch = Atomic<UInt32>(Float(0).bitPattern)
    private let gain = Atomic<UInt32>(Float(1).bitPattern)
    private let gainSets = Atomic<Int>(0)
    private let rampSeconds = Atomic<UInt32>(Float(0).bitPattern)
    private let volumeSets = Atomic<Int>(0)
    private let panSets = Atomic<Int>(0)
    private let playRateSets = Atomic<Int>(0)
    private let pitchSets = Atomic<Int>(0)
    /// The writers' copy: writes are serialised here (they come from any thread).
    private let current = Lock(Values())

    /// The values last published (for the control path's getters).
    var values: Values { current.withLock { $0 } }

    /// The generation: changes with every publication (odd while one is under way).
    var generation: Int { sequence.load(ordering: .acquiring) }

    /// Changes values and publishes the whole block.
    func update(_ change: (inout Values) -> Void) {
        current.withLock { values in
            change(&values)
            sequence.add(1, ordering: .relaxed)
            atomicMemoryFence(ordering: .releasing)
            volume.store(values.volume.bitPattern, ordering: .relaxed)
            pan.store(values.pan.bitPattern, ordering: .relaxed)
            playRate.store(values.playRate.bitPattern, ordering: .relaxed)
            pitch.store(values.pitch.bitPattern, ordering: .relaxed)
            gain.store(values.gain.bitPattern, ordering: .relaxed)
            gainSets.store(values.gainSets, ordering: .relaxed)
            rampSeconds.store(values.rampSeconds.bitPattern, ordering: .relaxed)
            volumeSets.store(values.volumeSets, ordering: .relaxed)
            panSets.store(values.panSets, ordering: .relaxed)
            playRateSets.store(values.playRateSets, ordering: .relaxed)
            pitchSets.store(values.pitchSets, ordering: .relaxed)
            sequence.add(1, ordering: .releasing)
        }
    }

    /// The whole block as published at `generation` (from ``generation``), or nil when a write
    /// was under way or came meanwhile (read again at the next block). Render thread.
    func read(at generation: Int) -> Values? {
        guard generation & 1 == 0 else { return nil }
        var values = Values()
        values.volume = Float(bitPattern: volume.load(ordering: .relaxed))
        values.pan = Float(bitPattern: pan.load(ordering: .relaxed))
        values.playRate = Float(bitPattern: playRate.load(ordering: .relaxed))
        values.pitch = Float(bitPattern: pitch.load(ordering: .relaxed))
        values.gain = Float(bitPattern: gain.load(ordering: .relaxed))
        values.gainSets = gainSets.load(ordering: .relaxed)
        values.rampSeconds = Float(bitPattern: rampSeconds.load(ordering: .relaxed))
        values.volumeSets = volumeSets.load(ordering: .relaxed)
        values.panSets = panSets.load(ordering: .relaxed)
        values.playRateSets = playRateSets.load(ordering: .relaxed)
        values.pitchSets = pitchSets.load(ordering: .relaxed)
        atomicMemoryFence(ordering: .acquiring)
        return sequence.load(ordering: .relaxed) == generation ? values : nil
    }
}
