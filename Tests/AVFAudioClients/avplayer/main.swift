// A program written against Apple's AVFAudio only (Swift 6 mode): AVAudioPlayers with a
// delegate, as an app's sound effects use them.
//
//   avplayer play FILE            plays FILE once and prints how it finished
//   avplayer players LONG SHORT   two players at once (SHORT from memory, looped twice more), a
//                                 pause, a stop, a move of currentTime; prints what it saw
import AVFoundation

final class Watcher: NSObject, AVAudioPlayerDelegate {
    private let lock = NSLock()
    private var names: [ObjectIdentifier: String] = [:]
    private var started: [ObjectIdentifier: Date] = [:]
    private let finishes = DispatchSemaphore(value: 0)
    private(set) var lines: [String] = []

    func watch(_ player: AVAudioPlayer, as name: String) {
        lock.lock()
        names[ObjectIdentifier(player)] = name
        lock.unlock()
        player.delegate = self
    }

    func started(_ player: AVAudioPlayer) {
        lock.lock()
        started[ObjectIdentifier(player)] = Date()
        lock.unlock()
    }

    func audioPlayerDidFinishPlaying(_ player: AVAudioPlayer, successfully flag: Bool) {
        lock.lock()
        let name = names[ObjectIdentifier(player)] ?? "?"
        let seconds = started[ObjectIdentifier(player)].map { Date().timeIntervalSince($0) } ?? -1
        lines.append(String(format: "%@ finished %@ after %.3f s at %.3f", name, flag ? "true" : "false", seconds, player.currentTime))
        lock.unlock()
        finishes.signal()
    }

    func audioPlayerDecodeErrorDidOccur(_ player: AVAudioPlayer, error: Error?) {
        print("decode error: \(error.map { "\($0)" } ?? "none")")
    }

    /// Waits for one finish (false when none came within `seconds`).
    func waitForFinish(within seconds: Double) -> Bool {
        finishes.wait(timeout: .now() + seconds) == .success
    }

    var printed: [String] {
        lock.lock()
        defer { lock.unlock() }
        return lines
    }
}

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    print("usage: avplayer play FILE | avplayer players LONG SHORT")
    exit(2)
}
let watcher = Watcher()

if arguments[1] == "play" {
    let player = try AVAudioPlayer(contentsOf: URL(fileURLWithPath: arguments[2]))
    watcher.watch(player, as: "file")
    guard player.prepareToPlay() else { exit(1) }
    watcher.started(player)
    player.play()
    guard watcher.waitForFinish(within: player.duration + 10) else {
        print("no finish")
        exit(1)
    }
    watcher.printed.forEach { print($0) }
    exit(0)
}

guard arguments.count >= 4 else { exit(2) }
let long = try AVAudioPlayer(contentsOf: URL(fileURLWithPath: arguments[2]))
let short = try AVAudioPlayer(data: try Data(contentsOf: URL(fileURLWithPath: arguments[3])))
print(String(format: "durations %.3f %.3f channels %d %d", long.duration, short.duration, long.numberOfChannels, short.numberOfChannels))
watcher.watch(long, as: "long")
watcher.watch(short, as: "short")
short.numberOfLoops = 2
short.pan = -1
long.volume = 0.5
long.isMeteringEnabled = true
long.prepareToPlay()
watcher.started(long)
watcher.started(short)
long.play()
short.play()

// A quarter of a second in (a user's pause, not a wait for anything): once sound was heard, the
// meter shows a level; then a pause of 0.3 s that holds the position.
Thread.sleep(forTimeInterval: 0.25)
let heard = long.currentTime > 0
long.updateMeters()
let level = long.peakPower(forChannel: 0)
print(String(format: "playing %@ heard %@ metered %@", long.isPlaying ? "true" : "false", heard ? "true" : "false", level > -160 ? "true" : "false"))
long.pause()
let paused = long.currentTime
Thread.sleep(forTimeInterval: 0.3)
print(String(format: "paused %@ held %@ at %.2f", long.isPlaying ? "false" : "true", long.currentTime == paused ? "true" : "false", paused))
long.play()
for _ in 0..<2 where !watcher.waitForFinish(within: 10) { print("a finish did not come") }
print(String(format: "after the end: playing %@ at %.3f", long.isPlaying ? "true" : "false", long.currentTime))

// A stop keeps the position and tells the delegate nothing; currentTime moves the next start.
let stopped = try AVAudioPlayer(contentsOf: URL(fileURLWithPath: arguments[2]))
watcher.watch(stopped, as: "stopped")
stopped.play()
Thread.sleep(forTimeInterval: 0.2)
let before = stopped.currentTime
stopped.stop()
let kept = stopped.currentTime
print(String(format: "stopped playing %@ kept %@", stopped.isPlaying ? "true" : "false", kept >= before && kept - before < 0.05 ? "true" : "false"))
print("after a stop: \(watcher.waitForFinish(within: 1.5) ? "a finish" : "no finish")")
stopped.currentTime = stopped.duration - 0.5
watcher.started(stopped)
stopped.play()
if !watcher.waitForFinish(within: 10) { print("the last finish did not come") }
watcher.printed.forEach { print($0) }

do {
    _ = try AVAudioPlayer(contentsOf: URL(fileURLWithPath: "/nonexistent/sound.wav"))
    print("a missing file opened")
} catch {
    print("missing file: \((error as NSError).domain) \((error as NSError).localizedDescription)")
}
