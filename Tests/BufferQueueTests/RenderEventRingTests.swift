import Foundation
import Testing
@testable import BufferQueue

/// The render path's events: taken in the order pushed, from any number of threads, none lost.
@Suite struct RenderEventRingTests {
    @Test func eventsComeOutInOrder() {
        let ring = RenderEventRing()
        #expect(!ring.hasEvents)
        ring.push(.underrun)
        ring.push(.shortfall(frames: 12))
        ring.push(.endOfStream)
        #expect(ring.hasEvents)
        var events: [RenderEvent] = []
        ring.drain(into: &events)
        #expect(events == [.underrun, .shortfall(frames: 12), .endOfStream])
        #expect(!ring.hasEvents)
        events.removeAll()
        ring.drain(into: &events)
        #expect(events.isEmpty)
    }

    /// Past the ring's capacity nothing is lost: the rest are counted by kind and come after.
    @Test func aFullRingCountsWhatItCannotHold() {
        let ring = RenderEventRing()
        for n in 1...RenderEventRing.capacity { ring.push(.shortfall(frames: n)) }
        ring.push(.underrun)
        ring.push(.endOfStream)
        ring.push(.shortfall(frames: 5))
        ring.push(.shortfall(frames: 7))
        var events: [RenderEvent] = []
        ring.drain(into: &events)
        #expect(events.count == RenderEventRing.capacity + 3)
        #expect(Array(events.prefix(RenderEventRing.capacity)) == (1...RenderEventRing.capacity).map { .shortfall(frames: $0) })
        #expect(Array(events.suffix(3)) == [.underrun, .endOfStream, .shortfall(frames: 12)])
        // The ring is usable again, slot by slot, around its end.
        for _ in 0..<3 {
            for n in 0..<200 { ring.push(.shortfall(frames: n)) }
            events.removeAll()
            ring.drain(into: &events)
            #expect(events == (0..<200).map { .shortfall(frames: $0) })
        }
    }

    /// Two producers on threads of their own, rounds of 100 numbered events each (within the
    /// ring's capacity), drained after each round: every event arrives once, each producer's in
    /// its order, however the pushes interleaved. Bounded: 300 rounds.
    @Test func concurrentProducersReorderNothing() async {
        let ring = RenderEventRing()
        var misplaced = 0, missing = 0
        for round in 0..<300 {
            let base = round * 1000
            async let first: Void = onOwnThread { for n in 0..<100 { ring.push(.shortfall(frames: base + 2 * n)) } }
            async let second: Void = onOwnThread { for n in 0..<100 { ring.push(.shortfall(frames: base + 2 * n + 1)) } }
            _ = await (first, second)
            var events: [RenderEvent] = []
            ring.drain(into: &events)
            let frames = events.compactMap { if case .shortfall(let f) = $0 { return f } else { return nil } }
            if frames.count != 200 { missing += 1 }
            let evens = frames.filter { $0 % 2 == 0 }, odds = frames.filter { $0 % 2 == 1 }
            if evens != (0..<100).map({ base + 2 * $0 }) || odds != (0..<100).map({ base + 2 * $0 + 1 }) { misplaced += 1 }
        }
        #expect(missing == 0 && misplaced == 0, "\(missing) rounds lost events, \(misplaced) reordered them")
    }

    /// Two producers and a consumer draining meanwhile, the ring filling now and then: what a
    /// full ring cannot hold is counted and comes later, so nothing is lost. Bounded.
    @Test func aConsumerThatFallsBehindLosesNothing() async {
        let ring = RenderEventRing()
        let perProducer = 50_000
        async let first: Void = onOwnThread { for _ in 0..<perProducer { ring.push(.shortfall(frames: 1)) } }
        async let second: Void = onOwnThread { for _ in 0..<perProducer { ring.push(.underrun) } }
        async let drained: [RenderEvent] = onOwnThread {
            var all: [RenderEvent] = []
            for _ in 0..<2_000 { ring.drain(into: &all) }
            return all
        }
        _ = await (first, second)
        var all = await drained
        ring.drain(into: &all)   // what came after the consumer's last look
        let frames = all.reduce(0) { if case .shortfall(let f) = $1 { return $0 + f } else { return $0 } }
        let underruns = all.filter { $0 == .underrun }.count
        #expect(frames == perProducer && underruns == perProducer)
    }
}
