import AudioFileStream
import BufferQueue

extension LoudnessMeter {
    /// Measures a whole file: its valid frames decoded (gapless: priming and padding trimmed) at
    /// the file's rate, each channel weighted by the file's channel layout.
    ///
    /// - Parameters:
    ///   - file: the file; its codec's decoder must be registered in `registry`.
    ///   - registry: the decoders to use.
    /// - Returns: the meter after the last frame; ``/BufferQueue/LoudnessMeter/reading`` has the numbers.
    /// - Throws: what the renderer throws (no decoder for the format, a packet that fails to decode).
    public static func measuring(_ file: AudioFile, registry: AudioDecoderRegistry = .shared) throws -> LoudnessMeter {
        let renderer = try AudioFileRenderer(file: file, registry: registry)
        let format = renderer.outputFormat
        let channels = format.channelsPerFrame
        // The file's layout, unless the decoder delivers another channel count (parametric stereo).
        let layout = file.channelLayout.flatMap { $0.channelCount == channels ? $0 : nil }
        var meter = try LoudnessMeter(sampleRate: format.sampleRate, channels: channels, channelLayout: layout)
        let chunk = 8192
        var scratch = [Float](repeating: 0, count: chunk * channels)
        try scratch.withUnsafeMutableBufferPointer { buffer in
            while true {
                let frames = try renderer.render(into: buffer, frames: chunk)
                if frames == 0 { break }
                meter.add(UnsafeBufferPointer(rebasing: buffer[0..<(frames * channels)]))
            }
        }
        if let error = renderer.lastConverterError { throw error }
        return meter
    }
}
