import Testing
@testable import BufferQueue

/// `setData` fills a buffer from raw bytes in one copy, and from any collection of bytes.
@Suite struct BufferDataTests {
    @Test func setDataTakesRawBytesSlicesAndOtherCollections() throws {
        let queue = try AudioQueue(format: .float32(sampleRate: 48000, channels: 1))
        defer { queue.dispose(immediately: true) }
        let buffer = try queue.allocateBuffer(capacity: 16)
        let bytes: [UInt8] = Array(1...12)
        try bytes.withUnsafeBytes { try buffer.setData($0) }
        #expect(buffer.byteSize == 12)
        #expect(buffer.withUnsafeBytes { Array($0) } == bytes)
        try buffer.setData(bytes[4...])                                   // a contiguous slice
        #expect(buffer.withUnsafeBytes { Array($0) } == Array(5...12))
        try buffer.setData((0..<16).lazy.map { UInt8($0 * 3) })           // not contiguous
        #expect(buffer.withUnsafeBytes { Array($0) } == (0..<16).map { UInt8($0 * 3) })
        try buffer.setData(UnsafeRawBufferPointer(start: nil, count: 0))
        #expect(buffer.byteSize == 0)
    }

    @Test func setDataThatDoesNotFitChangesNothing() throws {
        let queue = try AudioQueue(format: .float32(sampleRate: 48000, channels: 1))
        defer { queue.dispose(immediately: true) }
        let buffer = try queue.allocateBuffer(capacity: 16)
        try buffer.setData([UInt8](repeating: 9, count: 8))
        let big = [UInt8](repeating: 7, count: 17)
        expectError(.invalidBuffer) { try big.withUnsafeBytes { try buffer.setData($0) } }
        expectError(.invalidBuffer) { try buffer.setData(big) }
        expectError(.invalidBuffer) { try buffer.setData(big.lazy.map { $0 }) }
        #expect(buffer.byteSize == 8)
        #expect(buffer.withUnsafeBytes { Array($0) } == [UInt8](repeating: 9, count: 8))
    }
}
