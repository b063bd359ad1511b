// swift-tools-version: 6.0
import Foundation
import PackageDescription

let package = Package(
    name: "swift-audio-queue",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "BufferQueue", targets: ["BufferQueue"]),
        .library(name: "AudioFileStream", targets: ["AudioFileStream"]),
        .library(name: "AudioPlayback", targets: ["AudioPlayback"]),
        .library(name: "MPG123Decoder", targets: ["MPG123Decoder"]),
        .library(name: "FAADDecoder", targets: ["FAADDecoder"]),
        .library(name: "OpenCoreAMRDecoder", targets: ["OpenCoreAMRDecoder"]),
        // BSD-3-Clause libraries (libopus, libvorbis, libFLAC).
        .library(name: "OpusDecoder", targets: ["OpusDecoder"]),
        .library(name: "VorbisDecoder", targets: ["VorbisDecoder"]),
        .library(name: "FLACDecoder", targets: ["FLACDecoder"]),
        .library(name: "FLACEncoder", targets: ["FLACEncoder"]),
        .library(name: "OpusEncoder", targets: ["OpusEncoder"]),
        // LGPL-2.1-or-later (libavcodec): AAC decoding and encoding without the GPL.
        .library(name: "AVCodecAAC", targets: ["AVCodecAAC"]),
        .library(name: "PulseAudioSink", targets: ["PulseAudioSink"]),
        .library(name: "ALSASink", targets: ["ALSASink"]),
        // MIT (libpipewire-0.3, opened on first use).
        .library(name: "PipeWireSink", targets: ["PipeWireSink"]),
        // Choosing the output: PipeWire, PulseAudio, ALSA or the null sink, probed in that order.
        .library(name: "AudioOutput", targets: ["AudioOutput"]),
        .library(name: "AudioStreaming", targets: ["AudioStreaming"]),
        .library(name: "SoxrConverter", targets: ["SoxrConverter"]),
        // GPL-2.0-or-later (links the Rubber Band Library).
        .library(name: "RubberBandTimePitch", targets: ["RubberBandTimePitch"]),
        .library(name: "AudioToolbox", targets: ["AudioToolbox"]),
        // Every codec and resampler module that links no GPL library, registered by one call.
        .library(name: "AudioCodecs", targets: ["AudioCodecs"]),
        // GPL-2.0-or-later (links libfaad2 and the Rubber Band Library): AudioCodecs and those two.
        .library(name: "AudioCodecsGPL", targets: ["AudioCodecsGPL"]),
        .library(name: "CoreAudioTypes", targets: ["CoreAudioTypes"]),
        // Apple's AVFAudio over the library (LGPL codecs only, as AudioToolbox).
        .library(name: "AVFAudio", targets: ["AVFAudio"]),
        // The audio part of AVFoundation: AVFAudio, AudioToolbox and CoreAudioTypes.
        .library(name: "AVFoundation", targets: ["AVFoundation"]),
        // Accelerate's vDSP functions audio code calls most (levels, gains, conversions, real FFT).
        .library(name: "Accelerate", targets: ["Accelerate"]),
        .executable(name: "playpcm", targets: ["playpcm"]),
        .executable(name: "aqinfo", targets: ["aqinfo"]),
        .executable(name: "aqgain", targets: ["aqgain"]),
        .executable(name: "aqrender", targets: ["aqrender"]),
        .executable(name: "aqplay", targets: ["aqplay"]),
        .executable(name: "aqrecord", targets: ["aqrecord"]),
        .executable(name: "aqmix", targets: ["aqmix"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-crypto", "3.12.0"..<"5.0.0"),
        // `make docs`: the DocC site (a command plugin; nothing of it is linked into a product).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.4.0"),
    ],
    targets: [
        .target(
            name: "BufferQueue",
            dependencies: ["CRealtimeKit"],
            path: "Sources/BufferQueue"
        ),
        // rtkit over D-Bus for real-time scheduling where SCHED_FIFO is refused (libsystemd's
        // sd-bus, opened on first use; see include/CRealtimeKit.h).
        .target(
            name: "CRealtimeKit",
            dependencies: ["CDynamicLibrary"],
            path: "Sources/CRealtimeKit"
        ),
        .target(
            name: "AudioFileStream",
            dependencies: ["BufferQueue"],
            path: "Sources/AudioFileStream"
        ),
        .target(
            name: "CoreAudioTypes",
            path: "Sources/CoreAudioTypes"
        ),
        .target(
            name: "CAudioToolbox",
            dependencies: ["CoreAudioTypes"],
            path: "Sources/CAudioToolbox"
        ),
        .target(
            name: "AudioToolbox",
            dependencies: ["CoreAudioTypes", "CAudioToolbox", "BufferQueue", "AudioFileStream", "AudioPlayback", "AudioCodecs",
                           "PulseAudioSink", "ALSASink", "PipeWireSink", "AudioOutput"],
            path: "Sources/AudioToolbox"
        ),
        .target(
            name: "AVFAudio",
            dependencies: ["AudioToolbox", "CoreAudioTypes", "BufferQueue", "AudioFileStream", "AudioPlayback", "AudioCodecs", "AudioOutput"],
            path: "Sources/AVFAudio"
        ),
        // Plain Swift: Apple's vDSP signatures, scaling and packing.
        .target(
            name: "Accelerate",
            path: "Sources/Accelerate"
        ),
        .target(
            name: "AVFoundation",
            dependencies: ["AVFAudio", "AudioToolbox", "CoreAudioTypes"],
            path: "Sources/AVFoundation"
        ),
        .target(
            name: "AudioPlayback",
            dependencies: ["BufferQueue", "AudioFileStream"],
            path: "Sources/AudioPlayback"
        ),
        // The library's headers; it is opened on first use (see include/CMPG123.h).
        .target(
            name: "CMPG123",
            dependencies: ["CDynamicLibrary"],
            path: "Sources/CMPG123"
        ),
        // The library's headers; it is opened on first use (see include/CFAAD2.h).
        .target(
            name: "CFAAD2",
            dependencies: ["CDynamicLibrary"],
            path: "Sources/CFAAD2"
        ),
        // The library's headers; it is opened on first use (see include/COpenCoreAMR.h).
        .target(
            name: "COpenCoreAMR",
            dependencies: ["CDynamicLibrary"],
            path: "Sources/COpenCoreAMR"
        ),
        .target(
            name: "OpenCoreAMRDecoder",
            dependencies: ["BufferQueue", "COpenCoreAMR"],
            path: "Sources/OpenCoreAMRDecoder"
        ),
        // The library's headers; it is opened on first use (see include/COpus.h).
        .target(
            name: "COpus",
            dependencies: ["CDynamicLibrary"],
            path: "Sources/COpus"
        ),
        .target(
            name: "OpusDecoder",
            dependencies: ["BufferQueue", "COpus"],
            path: "Sources/OpusDecoder"
        ),
        .target(
            name: "OpusEncoder",
            dependencies: ["BufferQueue", "COpus"],
            path: "Sources/OpusEncoder"
        ),
        // Opening a C library on first use instead of linking it (the codec libraries).
        .target(
            name: "CDynamicLibrary",
            path: "Sources/CDynamicLibrary",
            linkerSettings: [.linkedLibrary("dl")]
        ),
        // libavcodec's headers; the libraries are opened on first use (see include/CAVCodec.h).
        .target(
            name: "CAVCodec",
            dependencies: ["CDynamicLibrary"],
            path: "Sources/CAVCodec"
        ),
        .target(
            name: "AVCodecAAC",
            dependencies: ["BufferQueue", "CAVCodec"],
            path: "Sources/AVCodecAAC"
        ),
        // The library's headers; it is opened on first use (see include/CVorbis.h).
        .target(
            name: "CVorbis",
            dependencies: ["CDynamicLibrary"],
            path: "Sources/CVorbis"
        ),
        .target(
            name: "VorbisDecoder",
            dependencies: ["BufferQueue", "CVorbis"],
            path: "Sources/VorbisDecoder"
        ),
        // libFLAC's headers; the library is opened on first use (see include/CFLAC.h).
        .target(
            name: "CFLAC",
            dependencies: ["CDynamicLibrary"],
            path: "Sources/CFLAC"
        ),
        .target(
            name: "FLACDecoder",
            dependencies: ["BufferQueue", "CFLAC"],
            path: "Sources/FLACDecoder"
        ),
        .target(
            name: "FLACEncoder",
            dependencies: ["BufferQueue", "CFLAC"],
            path: "Sources/FLACEncoder"
        ),
        .systemLibrary(
            name: "CPulseAudio",
            path: "Sources/CPulseAudio",
            providers: [.apt(["libpulse-dev"])]
        ),
        // The library's headers; it is opened on first use (see include/CSoxr.h).
        .target(
            name: "CSoxr",
            dependencies: ["CDynamicLibrary"],
            path: "Sources/CSoxr"
        ),
        .target(
            name: "SoxrConverter",
            dependencies: ["BufferQueue", "CSoxr"],
            path: "Sources/SoxrConverter"
        ),
        .target(
            name: "AudioCodecs",
            dependencies: ["BufferQueue", "MPG123Decoder", "AVCodecAAC", "OpenCoreAMRDecoder", "OpusDecoder", "OpusEncoder",
                           "VorbisDecoder", "FLACDecoder", "FLACEncoder", "SoxrConverter"],
            path: "Sources/AudioCodecs"
        ),
        .target(
            name: "AudioCodecsGPL",
            dependencies: ["BufferQueue", "AudioCodecs", "FAADDecoder", "RubberBandTimePitch"],
            path: "Sources/AudioCodecsGPL"
        ),
        // The library's headers; it is opened on first use (see include/CRubberBand.h).
        .target(
            name: "CRubberBand",
            dependencies: ["CDynamicLibrary"],
            path: "Sources/CRubberBand"
        ),
        // GPL-2.0-or-later: links the Rubber Band Library.
        .target(
            name: "RubberBandTimePitch",
            dependencies: ["BufferQueue", "CRubberBand"],
            path: "Sources/RubberBandTimePitch"
        ),
        .systemLibrary(
            name: "CALSA",
            path: "Sources/CALSA",
            providers: [.apt(["libasound2-dev"])]
        ),
        // LGPL-2.1+: links libasound2.
        .target(
            name: "ALSASink",
            dependencies: ["BufferQueue", "CALSA"],
            path: "Sources/ALSASink"
        ),
        // libpipewire's headers are read by loader.c only (`system` links to /usr/include/pipewire-0.3
        // and /usr/include/spa-0.2); the library is opened on first use (see include/CPipeWire.h).
        .target(
            name: "CPipeWire",
            dependencies: ["CDynamicLibrary"],
            path: "Sources/CPipeWire",
            exclude: ["system"],
            cSettings: [.headerSearchPath("system"), .define("_GNU_SOURCE")]
        ),
        .target(
            name: "PipeWireSink",
            dependencies: ["BufferQueue", "CPipeWire"],
            path: "Sources/PipeWireSink"
        ),
        .target(
            name: "AudioOutput",
            dependencies: ["BufferQueue", "PipeWireSink", "PulseAudioSink", "ALSASink"],
            path: "Sources/AudioOutput"
        ),
        .target(
            name: "PulseAudioSink",
            dependencies: ["BufferQueue", "CPulseAudio"],
            path: "Sources/PulseAudioSink"
        ),
        .target(
            name: "AudioStreaming",
            dependencies: [
                "AudioFileStream", "AudioPlayback", "BufferQueue",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            path: "Sources/AudioStreaming"
        ),
        .target(
            name: "MPG123Decoder",
            dependencies: ["BufferQueue", "CMPG123"],
            path: "Sources/MPG123Decoder"
        ),
        .target(
            name: "FAADDecoder",
            dependencies: ["BufferQueue", "CFAAD2"],
            path: "Sources/FAADDecoder"
        ),
        // Programs written against Apple's C API only (Swift 5 mode, no Linux-specific line), run
        // by AudioToolboxTests.
    ] + ["atplayfile", "atstream", "atrecord", "attone", "atoffline", "attap", "atconvert"].map(appleAPIClient) + [
        // A program written against Apple's AVFAudio only, built as a Mac would build it (Swift 5 mode).
        .executableTarget(name: "avlevels", dependencies: ["AVFoundation"], path: "Tests/AVFAudioClients/avlevels",
                          swiftSettings: [.swiftLanguageMode(.v5)]),
        // AVAudioPlayers with a delegate, against Apple's API only, in Swift 6 mode.
        .executableTarget(name: "avplayer", dependencies: ["AVFoundation"], path: "Tests/AVFAudioClients/avplayer"),
        // An AVAudioRecorder with a delegate, against Apple's API only, in Swift 6 mode.
        .executableTarget(name: "avrecorder", dependencies: ["AVFoundation"], path: "Tests/AVFAudioClients/avrecorder"),
        // AVAudioEngine graphs (offline and live), against Apple's API only, in Swift 6 mode.
        .executableTarget(name: "avengine", dependencies: ["AVFoundation"], path: "Tests/AVFAudioClients/avengine"),
        // A seeking file player on AVAudioEngine, against Apple's API only, in Swift 5 mode.
        .executableTarget(name: "avseek", dependencies: ["AVFoundation"], path: "Tests/AVFAudioClients/avseek",
                          swiftSettings: [.swiftLanguageMode(.v5)]),
    ] + [
        .executableTarget(
            name: "playpcm",
            dependencies: [
                "BufferQueue", "AudioFileStream", "AudioOutput", "ExampleOptions",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/playpcm"
        ),
        .executableTarget(
            name: "aqinfo",
            dependencies: [
                "AudioFileStream", "BufferQueue", "AudioStreaming", "AudioPlayback", "AudioCodecs", "ExampleOptions",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/aqinfo"
        ),
        .executableTarget(
            name: "aqgain",
            dependencies: [
                "AudioFileStream", "BufferQueue", "AudioPlayback", "AudioCodecs", "ExampleOptions",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/aqgain"
        ),
        .target(
            name: "ExampleOptions",
            dependencies: ["BufferQueue", "AudioFileStream", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "Examples/ExampleOptions"
        ),
        .executableTarget(
            name: "aqrender",
            dependencies: [
                "AudioFileStream", "AudioPlayback", "BufferQueue", "AudioCodecsGPL", "ExampleOptions",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/aqrender"
        ),
        .executableTarget(
            name: "aqmix",
            dependencies: [
                "AudioFileStream", "AudioPlayback", "BufferQueue", "AudioCodecs", "ExampleOptions",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/aqmix"
        ),
        .executableTarget(
            name: "aqplay",
            dependencies: [
                "AudioFileStream", "AudioPlayback", "AudioStreaming", "BufferQueue", "AudioCodecsGPL",
                "PulseAudioSink", "ALSASink", "PipeWireSink", "AudioOutput", "ExampleOptions",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/aqplay"
        ),
        .executableTarget(
            name: "aqrecord",
            dependencies: ["AudioCodecs", "AudioFileStream", "ExampleOptions",
                "AudioPlayback", "BufferQueue", "PulseAudioSink", "PipeWireSink",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/aqrecord"
        ),
        .executableTarget(
            name: "quickstart",
            dependencies: ["BufferQueue"],
            path: "Examples/quickstart"
        ),
        // The smallest program of the library (BufferQueue, a parser, one codec, the null sink), for
        // the start-up and memory figures.
        .executableTarget(
            name: "aqlean",
            dependencies: ["BufferQueue", "AudioFileStream", "MPG123Decoder"],
            path: "Benchmarks/aqlean"
        ),
        .executableTarget(
            name: "aqbench",
            dependencies: ["BufferQueue", "AudioFileStream", "AudioPlayback", "AudioStreaming", "MPG123Decoder", "FAADDecoder", "PulseAudioSink", "TestSupport",
                           "AVFAudio", "AudioCodecs"],
            path: "Benchmarks/aqbench"
        ),
        .systemLibrary(
            name: "CProcessWait",
            path: "Tests/CProcessWait"
        ),
        .target(
            name: "TestSupport",
            dependencies: ["CProcessWait"],
            path: "Tests/TestSupport"
        ),
        // What the codec and playback tests share (fixtures, tools, renders with every decoder).
        .target(
            name: "CodecTestSupport",
            dependencies: ["AudioFileStream", "AudioPlayback", "BufferQueue", "MPG123Decoder", "FAADDecoder", "OpenCoreAMRDecoder",
                           "OpusDecoder", "VorbisDecoder", "FLACDecoder", "AVCodecAAC", "SoxrConverter", "TestSupport"],
            path: "Tests/CodecTestSupport"
        ),
        .testTarget(
            name: "AudioFileStreamTests",
            dependencies: ["AudioFileStream", "BufferQueue", "TestSupport"],
            path: "Tests/AudioFileStreamTests"
        ),
        .testTarget(
            name: "PulseAudioSinkTests",
            dependencies: ["BufferQueue", "PulseAudioSink", "ALSASink", "PipeWireSink", "AudioOutput", "AudioFileStream", "AudioPlayback", "MPG123Decoder", "FAADDecoder",
                           "SoxrConverter", "OpusDecoder", "FLACDecoder", "AVCodecAAC", "FLACEncoder", "OpusEncoder", "TestSupport"],
            path: "Tests/PulseAudioSinkTests"
        ),
        .testTarget(
            name: "AudioStreamingTests",
            dependencies: ["AudioStreaming", "AudioFileStream", "AudioPlayback", "BufferQueue", "MPG123Decoder", "FAADDecoder", "OpusDecoder",
                           "VorbisDecoder", "FLACDecoder", "AVCodecAAC", "CodecTestSupport", "TestSupport"],
            path: "Tests/AudioStreamingTests"
        ),
        .testTarget(
            name: "CodecTests",
            dependencies: ["AudioFileStream", "AudioPlayback", "BufferQueue", "MPG123Decoder", "FAADDecoder", "OpenCoreAMRDecoder", "SoxrConverter",
                           "AVCodecAAC", "FLACEncoder", "OpusEncoder", "CodecTestSupport", "TestSupport"],
            path: "Tests/CodecTests"
        ),
        .testTarget(
            name: "AudioPlaybackTests",
            dependencies: ["AudioCodecs", "AudioPlayback", "AudioFileStream", "BufferQueue", "MPG123Decoder", "FAADDecoder", "OpenCoreAMRDecoder",
                           "SoxrConverter", "AVCodecAAC", "FLACEncoder", "OpusEncoder", "FLACDecoder", "OpusDecoder", "CodecTestSupport", "TestSupport"],
            path: "Tests/AudioPlaybackTests"
        ),
        // Counts allocations, system calls and waits on the render thread (interposes malloc in
        // the test executable; counts nothing under a sanitizer).
        .target(
            name: "CRenderThreadCounter",
            path: "Tests/CRenderThreadCounter"
        ),
        .testTarget(
            name: "RealtimeTests",
            dependencies: ["BufferQueue", "AudioFileStream", "AudioPlayback", "FLACDecoder", "PulseAudioSink", "ALSASink", "PipeWireSink", "SoxrConverter", "RubberBandTimePitch", "CRenderThreadCounter",
                           "CodecTestSupport", "TestSupport"],
            path: "Tests/RealtimeTests"
        ),
        .testTarget(
            name: "AccelerateTests",
            dependencies: ["Accelerate"],
            path: "Tests/AccelerateTests"
        ),
        .testTarget(
            name: "AVFAudioTests",
            dependencies: ["AVFAudio", "AudioToolbox", "AudioOutput", "BufferQueue", "AudioCodecs", "AudioFileStream", "AudioPlayback", "TestSupport"],
            path: "Tests/AVFAudioTests"
        ),
        .testTarget(
            name: "AudioToolboxTests",
            dependencies: ["AudioToolbox", "AudioPlayback", "AudioFileStream", "BufferQueue", "AVCodecAAC", "CodecTestSupport", "TestSupport"],
            path: "Tests/AudioToolboxTests"
        ),
        // Every Swift snippet of README.md and Docs/, compiled (Tests/DocSnippetTests/Generated).
        .testTarget(
            name: "DocSnippetTests",
            dependencies: ["BufferQueue", "AudioCodecs", "AudioFileStream", "AudioPlayback", "AudioStreaming", "MPG123Decoder", "FAADDecoder",
                           "OpenCoreAMRDecoder", "OpusDecoder", "VorbisDecoder", "FLACDecoder", "PulseAudioSink", "ALSASink", "PipeWireSink",
                           "SoxrConverter", "RubberBandTimePitch", "AudioToolbox", "AVFAudio", "Accelerate"],
            path: "Tests/DocSnippetTests",
            swiftSettings: [.enableUpcomingFeature("MemberImportVisibility")]
        ),
        .testTarget(
            name: "ALSASinkTests",
            dependencies: ["ALSASink", "BufferQueue", "TestSupport"],
            path: "Tests/ALSASinkTests"
        ),
        .testTarget(
            name: "ConverterTests",
            dependencies: ["BufferQueue", "SoxrConverter", "TestSupport"],
            path: "Tests/ConverterTests"
        ),
        .testTarget(
            name: "BufferQueueTests",
            dependencies: [
                "BufferQueue", "RubberBandTimePitch", "TestSupport", "CDynamicLibrary",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            path: "Tests/BufferQueueTests"
        ),
    ],
    swiftLanguageModes: [.v6]
)

// libFuzzer targets (Fuzz/): only with AQ_FUZZ=1, as `make fuzz` builds them with
// `--sanitize=fuzzer --sanitize=address`; they have no `main` of their own.
if ProcessInfo.processInfo.environment["AQ_FUZZ"] != nil {
    package.targets.append(.target(name: "FuzzSupport", dependencies: ["AudioFileStream", "BufferQueue", "MPG123Decoder", "FAADDecoder", "OpenCoreAMRDecoder",
                                                                       "OpusDecoder", "VorbisDecoder", "FLACDecoder"],
                                   path: "Fuzz/Support"))
    for name in ["mp3", "adts", "mp4", "caf", "riff", "amr", "decode-mp3", "decode-aac", "decode-apple", "icy", "ts", "hls-playlist",
                 "ogg", "flac", "decode-xiph", "matroska"] {
        package.targets.append(.executableTarget(name: "fuzz-\(name)", dependencies: ["FuzzSupport", "AudioFileStream", "AudioStreaming"],
                                                 path: "Fuzz/Targets/fuzz-\(name)"))
        package.products.append(.executable(name: "fuzz-\(name)", targets: ["fuzz-\(name)"]))
    }
}

/// A program written against Apple's C API only, built as a Mac would build it (Swift 5 mode).
func appleAPIClient(_ name: String) -> Target {
    .executableTarget(name: name, dependencies: ["AudioToolbox"], path: "Tests/AudioToolboxClients/\(name)",
                      swiftSettings: [.swiftLanguageMode(.v5)])
}
