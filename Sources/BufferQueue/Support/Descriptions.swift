// Enums print as words users can read (`spectral`, `fixed(sampleRate: 48000.0, channels: 2)`), also
// where they are nested in another value, not as `BufferQueue.TimePitchAlgorithm.spectral`.

extension TimePitchAlgorithm: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .timeDomain: "timeDomain"
        case .varispeed: "varispeed"
        case .spectral: "spectral"
        }
    }
}

extension AudioQueueProcessingTapPosition: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .preEffects: "preEffects"
        case .postEffects: "postEffects"
        case .siphon: "siphon"
        }
    }
}

extension AudioConverterQuality: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .quick: "quick"
        case .low: "low"
        case .medium: "medium"
        case .high: "high"
        case .veryHigh: "veryHigh"
        }
    }
}

extension AudioEQFilterType: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .parametric: "parametric"
        case .lowShelf: "lowShelf"
        case .highShelf: "highShelf"
        case .lowPass: "lowPass"
        case .highPass: "highPass"
        case .bandPass: "bandPass"
        case .notch: "notch"
        }
    }
}

extension AudioFadeDirection: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .`in`: "in"
        case .out: "out"
        }
    }
}

extension AudioFadeCurve: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .linear: "linear"
        case .equalPower: "equalPower"
        }
    }
}

extension PCMSampleLayout: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .unsigned8: "unsigned8"
        case .signed8: "signed8"
        case let .signed(v0, v1, v2, v3): "signed(bits: \(v0), bytes: \(v1), alignedHigh: \(v2), bigEndian: \(v3))"
        case let .float(v0, v1): "float(bytes: \(v0), bigEndian: \(v1))"
        }
    }
}

extension AudioQueue.OfflineCallbackDelivery: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .asynchronous: "asynchronous"
        case .beforeReturning: "beforeReturning"
        }
    }
}

extension AudioQueue.SinkFormat: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .followDecoded: "followDecoded"
        case .keepFirst: "keepFirst"
        case let .fixed(v0, v1): "fixed(sampleRate: \(v0), channels: \(v1))"
        }
    }
}

extension AudioChannelLayout.Label: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .unknown: "unknown"
        case .unused: "unused"
        case .left: "left"
        case .right: "right"
        case .center: "center"
        case .lfeScreen: "lfeScreen"
        case .leftSurround: "leftSurround"
        case .rightSurround: "rightSurround"
        case .centerSurround: "centerSurround"
        case .leftSurroundDirect: "leftSurroundDirect"
        case .rightSurroundDirect: "rightSurroundDirect"
        case .mono: "mono"
        }
    }
}

extension NullSink.Pacing: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .realTime: "realTime"
        case .unpaced: "unpaced"
        }
    }
}

extension NullSource.Pacing: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .realTime: "realTime"
        case .unpaced: "unpaced"
        case .manual: "manual"
        }
    }
}

extension NullSource.Signal: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .silence: "silence"
        case let .sine(v0, v1): "sine(frequency: \(v0), amplitude: \(v1))"
        case let .frames(v0): "frames(\(v0.count) samples)"
        }
    }
}

extension AudioQueueError.Code: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .invalidBuffer: "invalidBuffer"
        case .bufferEmpty: "bufferEmpty"
        case .bufferInQueue: "bufferInQueue"
        case .invalidRunState: "invalidRunState"
        case .invalidParameter: "invalidParameter"
        case .invalidPropertyValue: "invalidPropertyValue"
        case .invalidPacketDescription: "invalidPacketDescription"
        case .invalidTrim: "invalidTrim"
        case .timeNotAscending: "timeNotAscending"
        case .codecNotFound: "codecNotFound"
        case .decoderError: "decoderError"
        case .cannotStart: "cannotStart"
        case .sinkError: "sinkError"
        case .disposalPending: "disposalPending"
        case .enqueueDuringReset: "enqueueDuringReset"
        case .primeTimedOut: "primeTimedOut"
        case .invalidOfflineMode: "invalidOfflineMode"
        case .formatChanged: "formatChanged"
        case .timedOut: "timedOut"
        }
    }
}
