import Foundation
import Testing
import AudioFileStream

/// `.cue` text: the tracks, their places in sample frames, and malformed sheets named by line.
@Suite struct CueSheetTests {
    static let album = """
        \u{FEFF}REM GENRE Test
        PERFORMER "The Band"
        TITLE "An Album"
        FILE "album.flac" WAVE
          TRACK 01 AUDIO
            TITLE "First"
            INDEX 01 00:00:00
          TRACK 02 AUDIO
            TITLE "Second Song"
            PERFORMER "A Guest"
            INDEX 00 00:02:50
            INDEX 01 00:03:00
          TRACK 03 AUDIO
            TITLE Third
            INDEX 01 01:00:74
        FILE "bonus.wav" WAVE
          TRACK 04 AUDIO
            INDEX 01 00:00:00
        """

    @Test func tracksAndTheirFrames() throws {
        let sheet = try CueSheet(text: Self.album.replacingOccurrences(of: "\n", with: "\r\n"))
        #expect(sheet.title == "An Album" && sheet.performer == "The Band")
        #expect(sheet.tracks.map(\.number) == [1, 2, 3, 4])
        #expect(sheet.tracks.map(\.title) == ["First", "Second Song", "Third", nil])
        #expect(sheet.tracks.map(\.file) == ["album.flac", "album.flac", "album.flac", "bonus.wav"])
        #expect(sheet.tracks[1].pregap == .cdFrames(2 * 75 + 50))
        let tracks = try sheet.resolvedTracks { file in file == "album.flac" ? (frames: 4_000_000, rate: 44_100) : (frames: 1000, rate: 48_000) }
        // 588 samples a CD frame at 44.1 kHz: track 2 from 3 s (the pregap ends track 1), track 3
        // from 1:00:74 = 60 s + 74 frames.
        let third: Int64 = 2_646_000 + 74 * 588
        let starts: [Int64] = [0, 132_300, third, 0]
        let lengths: [Int64] = [132_300, third - 132_300, 4_000_000 - third, 1000]
        #expect(tracks.map(\.startFrame) == starts)
        #expect(tracks.map(\.frames) == lengths)
        #expect(tracks.map(\.performer) == ["The Band", "A Guest", "The Band", "The Band"])
    }

    @Test(arguments: [
        ("TRACK 01 AUDIO\nINDEX 01 00:00:00", 1, "before any FILE"),
        ("FILE \"a.wav\" WAVE\nINDEX 01 00:00:00", 2, "INDEX before any TRACK"),
        ("FILE \"a.wav\" WAVE\nTRACK 01 AUDIO\nINDEX 01 00:60:00", 3, "is not a time"),
        ("FILE \"a.wav\" WAVE\nTRACK 01 AUDIO\nINDEX 01 00:00:75", 3, "is not a time"),
        ("FILE \"a.wav\" WAVE\nTRACK 01 AUDIO\nTITLE x\nTRACK 02 AUDIO\nINDEX 01 00:01:00", 2, "has no INDEX 01"),
        ("FILE \"a.wav\" WAVE\nTRACK 02 AUDIO\nINDEX 01 00:00:00\nTRACK 01 AUDIO\nINDEX 01 00:01:00", 4, "must rise"),
        ("FILE \"a.wav\" WAVE\nTRACK 01 AUDIO\nINDEX 01 00:05:00\nTRACK 02 AUDIO\nINDEX 01 00:01:00", 0, "starts at or before"),
        ("FILE \"a.wav\" WAVE\nTRACK 01 AUDIO\nINDEX 00 00:05:00\nINDEX 01 00:01:00", 4, "before the track's INDEX 00"),
        ("FILE \"a.wav\" WAVE\nFOO bar", 2, "unknown command FOO"),
        ("REM nothing", 0, "no TRACK"),
    ])
    func malformedSheetsNameTheLine(_ text: String, _ line: Int, _ message: String) {
        do {
            _ = try CueSheet(text: text)
            Issue.record("'\(text)' was accepted")
        } catch let error as CueSheetError {
            #expect(error.line == line, "\(error)")
            #expect(error.message.contains(message), "\(error)")
        } catch {
            Issue.record("\(error)")
        }
    }

    /// A sheet read from a file names the file in its errors, with the line.
    @Test func aMalformedSheetFileIsNamedWithTheLine() throws {
        let path = NSTemporaryDirectory() + "aq-bad-\(UUID().uuidString.prefix(8)).cue"
        try Data("FILE \"a.wav\" WAVE\nINDEX 01 00:00:00\n".utf8).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            _ = try CueSheet(contentsOfFile: path)
            Issue.record("a sheet with an INDEX before any TRACK was read")
        } catch let error as CueSheetError {
            #expect(error.path == path && error.line == 2)
            #expect("\(error)".hasPrefix("\(path) line 2: "), "\(error)")
        }
    }

    @Test func aTrackPastItsFilesEndIsAnError() throws {
        let sheet = try CueSheet(text: "FILE \"a.wav\" WAVE\nTRACK 01 AUDIO\nINDEX 01 00:00:00\nTRACK 02 AUDIO\nINDEX 01 00:10:00")
        #expect(throws: CueSheetError.self) { try sheet.resolvedTracks { _ in (frames: 44_100, rate: 44_100) } }
    }
}
