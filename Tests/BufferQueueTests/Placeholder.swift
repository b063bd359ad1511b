import Testing
import BufferQueue

@Test func smoke() throws {
    let format = AudioStreamDescription.float32(sampleRate: 44100, channels: 2)
    let queue = try AudioQueue(format: format)
    let buffer = try queue.allocateBuffer(capacity: 4000 * 8)
    let input = (0..<8000).map { Float($0) / 8000 }
    try input.withUnsafeBytes { try buffer.setData($0) }
    try queue.enqueue(buffer, trimFramesAtStart: 10, trimFramesAtEnd: 20)
    try queue.setOfflineRenderFormat(format)
    let out = try queue.allocateBuffer(capacity: 5000 * 8)
    let n = try queue.offlineRender(at: 0, into: out, frames: 5000)
    #expect(n == 3970)
    let floats = out.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
    #expect(floats == Array(input[20..<(8000 - 40)]))
}
