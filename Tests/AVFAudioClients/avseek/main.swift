// A program written against Apple's AVFAudio only, built as a Mac would build it (Swift 5 mode):
// a seeking file player, rendered offline so that what it played can be checked.
//
//   avseek IN OUT AT TO   plays IN; once AT frames are out it seeks to frame TO (stop, schedule
//                         the segment from TO to the end, play), and plays to the end; OUT holds
//                         what was played. Prints the position the player reports around the seek.
import AVFoundation

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("avseek: \(message)\n".utf8))
    exit(1)
}

let arguments = CommandLine.arguments
guard arguments.count == 5, let seekAt = AVAudioFramePosition(arguments[3]), let seekTo = AVAudioFramePosition(arguments[4]) else {
    fail("usage: avseek IN OUT AT TO")
}

do {
    let file = try AVAudioFile(forReading: URL(fileURLWithPath: arguments[1]))
    let format = file.processingFormat
    let engine = AVAudioEngine()
    let player = AVAudioPlayerNode()
    engine.attach(player)
    engine.connect(player, to: engine.mainMixerNode, format: format)
    try engine.enableManualRenderingMode(.offline, format: format, maximumFrameCount: 1000)
    try engine.start()

    var segmentStart: AVAudioFramePosition = 0
    /// Where the player is in the file: the segment's start plus the player's time at the last render's end.
    func position(_ rendered: AVAudioFrameCount) -> AVAudioFramePosition {
        guard let now = player.lastRenderTime, let time = player.playerTime(forNodeTime: now) else { return -1 }
        return segmentStart + time.sampleTime + AVAudioFramePosition(rendered)
    }

    player.scheduleSegment(file, startingFrame: 0, frameCount: AVAudioFrameCount(file.length), at: nil, completionHandler: nil)
    player.play()
    let output = try AVAudioFile(forWriting: URL(fileURLWithPath: arguments[2]), settings: format.settings)
    let buffer = AVAudioPCMBuffer(pcmFormat: format, frameCapacity: 1000)!
    var played: AVAudioFramePosition = 0
    let total = seekAt + (file.length - seekTo)
    var seeked = false
    while played < total {
        let limit = seeked ? total : seekAt
        let count = AVAudioFrameCount(min(1000, limit - played))
        guard try engine.renderOffline(count, to: buffer) == .success else { fail("render failed") }
        try output.write(from: buffer)
        played += AVAudioFramePosition(count)
        if !seeked && played == seekAt {
            print("before the seek at \(position(count))")
            player.stop()
            segmentStart = seekTo
            player.scheduleSegment(file, startingFrame: seekTo, frameCount: AVAudioFrameCount(file.length - seekTo), at: nil, completionHandler: nil)
            player.play()
            seeked = true
            guard try engine.renderOffline(1, to: buffer) == .success else { fail("render failed") }
            try output.write(from: buffer)
            played += 1
            print("after the seek at \(position(1))")
        }
    }
    print("played \(played) frames")
} catch {
    fail("\(error)")
}
