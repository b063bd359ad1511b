import Testing
@testable import BufferQueue

/// The delivery line keeps its two reserved arrays through every drain, so that putting items
/// in line from a rendering thread never allocates (the render thread's contract).
@Suite struct EventDeliveryTests {
    @Test func drainsKeepBothReservedArrays() {
        let delivery = EventDelivery(label: "test.delivery", target: nil, outputCallback: nil)
        defer { delivery.shutDown() }
        for round in 0..<4 {
            #expect(delivery.post([.event(.underrun)]))
            delivery.drainOnCallingThread()
            // A drain that finds nothing in line (as the wake signal's does after a drain on the
            // calling thread) must leave both arrays in place.
            delivery.drainOnCallingThread()
            let capacities = delivery.reservedCapacities
            #expect(capacities.line > 0, "round \(round): the line lost its storage")
            #expect(capacities.spare > 0, "round \(round): the spare array was dropped")
        }
    }
}
