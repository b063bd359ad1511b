// A program written against Apple's AVFAudio only (Swift 6 mode): an AVAudioRecorder with a
// delegate, as a voice-memo app uses one, recording 16 kHz mono 16-bit WAV.
//
//   avrecorder OUT.wav SECONDS    records SECONDS with record(forDuration:); prints the file's frames
//   avrecorder OUT.wav pause      records, pauses, records on, stops; then deletes a second recording
import AVFoundation

final class Watcher: NSObject, AVAudioRecorderDelegate {
    private let lock = NSLock()
    private var flags: [Bool] = []
    private let finishes = DispatchSemaphore(value: 0)

    func audioRecorderDidFinishRecording(_ recorder: AVAudioRecorder, successfully flag: Bool) {
        lock.lock()
        flags.append(flag)
        lock.unlock()
        finishes.signal()
    }

    func audioRecorderEncodeErrorDidOccur(_ recorder: AVAudioRecorder, error: Error?) {
        print("encode error: \(error.map { "\($0)" } ?? "none")")
    }

    /// Waits for one finish and says how it went (nil: none within `seconds`).
    func waitForFinish(within seconds: Double) -> Bool? {
        guard finishes.wait(timeout: .now() + seconds) == .success else { return nil }
        lock.lock()
        defer { lock.unlock() }
        return flags.removeFirst()
    }
}

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    print("usage: avrecorder OUT.wav SECONDS | avrecorder OUT.wav pause")
    exit(2)
}
let url = URL(fileURLWithPath: arguments[1])
let settings: [String: Any] = [AVFormatIDKey: Int(kAudioFormatLinearPCM), AVSampleRateKey: 16_000.0, AVNumberOfChannelsKey: 1,
                               AVLinearPCMBitDepthKey: 16, AVLinearPCMIsFloatKey: false, AVLinearPCMIsBigEndianKey: false]
let watcher = Watcher()

func describe(_ url: URL) throws -> String {
    let file = try AVAudioFile(forReading: url)
    return "file \(file.length) frames \(Int(file.fileFormat.sampleRate)) Hz \(file.fileFormat.channelCount) ch"
}

if let seconds = Double(arguments[2]) {
    let recorder = try AVAudioRecorder(url: url, settings: settings)
    recorder.delegate = watcher
    recorder.isMeteringEnabled = true
    guard recorder.prepareToRecord(), recorder.record(forDuration: seconds) else {
        print("could not record")
        exit(1)
    }
    print("recording")
    fflush(nil)   // every stream: a pipe's reader waits for this line
    guard let flag = watcher.waitForFinish(within: seconds + 10) else {
        print("no finish")
        exit(1)
    }
    print("finished \(flag)")
    print(try describe(url))
    print(String(format: "after the end: recording %@ at %.3f", recorder.isRecording ? "true" : "false", recorder.currentTime))
    exit(0)
}

let recorder = try AVAudioRecorder(url: url, settings: settings)
recorder.delegate = watcher
recorder.record()
Thread.sleep(forTimeInterval: 0.3)
recorder.pause()
let paused = recorder.currentTime
Thread.sleep(forTimeInterval: 0.2)
print(String(format: "paused %@ held %@", recorder.isRecording ? "false" : "true", recorder.currentTime == paused ? "true" : "false"))
recorder.record()
Thread.sleep(forTimeInterval: 0.3)
print(String(format: "at the stop %.3f s", recorder.currentTime))
recorder.stop()
print("stopped: finished \(watcher.waitForFinish(within: 10).map { "\($0)" } ?? "never")")
print(try describe(url))

let second = url.deletingPathExtension().appendingPathExtension("second.wav")
let deleted = try AVAudioRecorder(url: second, settings: settings)
deleted.delegate = watcher
deleted.record()
Thread.sleep(forTimeInterval: 0.2)
deleted.stop()
print("second: finished \(watcher.waitForFinish(within: 10).map { "\($0)" } ?? "never")")
print("deleted \(deleted.deleteRecording()) exists \(FileManager.default.fileExists(atPath: second.path))")

do {
    _ = try AVAudioRecorder(url: URL(fileURLWithPath: "/tmp/take.xyz"), settings: settings)
    print("an unknown extension was taken")
} catch {
    print("unknown extension: \((error as NSError).domain) \((error as NSError).localizedDescription)")
}
