// A level analyser written against Apple's AVFAudio only (built in Swift 5 mode, as a Mac would
// build it): reads a file in buffers, prints each channel's peak and RMS, and writes its mono
// mix normalised to a peak of 1 into a 32-bit float WAV (a second pass after seeking to 0).
import AVFoundation

let arguments = CommandLine.arguments
guard arguments.count == 3 else {
    print("usage: avlevels INPUT OUTPUT.wav")
    exit(2)
}

do {
    let input = try AVAudioFile(forReading: URL(fileURLWithPath: arguments[1]))
    let format = input.processingFormat
    let channels = Int(format.channelCount)
    guard let buffer = AVAudioPCMBuffer(pcmFormat: format, frameCapacity: 4096) else { exit(1) }
    var peaks = [Float](repeating: 0, count: channels)
    var squares = [Double](repeating: 0, count: channels)
    var monoPeak: Float = 0
    var frames = 0
    while true {
        try input.read(into: buffer)
        if buffer.frameLength == 0 { break }
        guard let data = buffer.floatChannelData else { exit(1) }
        for frame in 0..<Int(buffer.frameLength) {
            var sum: Float = 0
            for channel in 0..<channels {
                let sample = data[channel][frame]
                peaks[channel] = max(peaks[channel], abs(sample))
                squares[channel] += Double(sample) * Double(sample)
                sum += sample
            }
            monoPeak = max(monoPeak, abs(sum / Float(channels)))
        }
        frames += Int(buffer.frameLength)
    }
    print("frames \(frames)")
    for channel in 0..<channels {
        print(String(format: "channel %d peak %.6f rms %.6f", channel, peaks[channel], (squares[channel] / Double(max(frames, 1))).squareRoot()))
    }

    input.framePosition = 0
    let settings: [String: Any] = [AVFormatIDKey: kAudioFormatLinearPCM, AVSampleRateKey: format.sampleRate, AVNumberOfChannelsKey: 1,
                                   AVLinearPCMBitDepthKey: 32, AVLinearPCMIsFloatKey: true]
    let output = try AVAudioFile(forWriting: URL(fileURLWithPath: arguments[2]), settings: settings)
    guard let mono = AVAudioPCMBuffer(pcmFormat: output.processingFormat, frameCapacity: 4096) else { exit(1) }
    let gain: Float = monoPeak > 0 ? 1 / monoPeak : 1
    while true {
        try input.read(into: buffer)
        if buffer.frameLength == 0 { break }
        guard let data = buffer.floatChannelData, let out = mono.floatChannelData else { exit(1) }
        for frame in 0..<Int(buffer.frameLength) {
            var sum: Float = 0
            for channel in 0..<channels { sum += data[channel][frame] }
            out[0][frame] = sum / Float(channels) * gain
        }
        mono.frameLength = buffer.frameLength
        try output.write(from: mono)
    }
    print("written \(output.length) frames")
} catch let error as NSError {
    print("avlevels: \(error.localizedDescription) (\(error.domain) \(error.code))")
    exit(1)
}
