// `import AVFoundation` on Linux: the audio part of Apple's framework — AVFAudio, with
// AudioToolbox and CoreAudioTypes as AVFoundation brings them on a Mac.
@_exported import AVFAudio
@_exported import AudioToolbox
@_exported import CoreAudioTypes
