import BufferQueue

// Enums print as words users can read (`mp3`, `property(dataFormat)`), also where they are nested
// in another value, not as `AudioFileStream.AudioFileType.mp3`.

extension AudioFileType: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .mp3: "mp3"
        case .adts: "adts"
        case .mp4: "mp4"
        case .caf: "caf"
        case .wave: "wave"
        case .aiff: "aiff"
        case .aifc: "aifc"
        case .amr: "amr"
        case .ogg: "ogg"
        case .flac: "flac"
        case .mpegTransportStream: "mpegTransportStream"
        case .matroska: "matroska"
        }
    }
}

extension AudioFileStreamProperty: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .fileFormat: "fileFormat"
        case .dataFormat: "dataFormat"
        case .formatList: "formatList"
        case .magicCookie: "magicCookie"
        case .dataOffset: "dataOffset"
        case .audioDataByteCount: "audioDataByteCount"
        case .audioDataPacketCount: "audioDataPacketCount"
        case .bitRate: "bitRate"
        case .maximumPacketSize: "maximumPacketSize"
        case .channelLayout: "channelLayout"
        case .packetTableInfo: "packetTableInfo"
        case .metadata: "metadata"
        case .readyToProducePackets: "readyToProducePackets"
        }
    }
}

extension AudioFileStreamEvent: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case let .property(v0): "property(\(v0))"
        case let .packets(v0): "packets(\(v0.packetCount) from \(v0.firstPacketIndex), \(v0.data.count) bytes)"
        case let .seekRequired(v0): "seekRequired(byteOffset: \(v0))"
        case let .segmentTimestamp(v0): "segmentTimestamp(\(v0))"
        case let .timedMetadata(v0): "timedMetadata(\(v0))"
        case let .link(v0): "link(\(v0))"
        }
    }
}

extension AudioFileTagUpdate: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .inPlace: "inPlace"
        case .rewritten: "rewritten"
        }
    }
}

extension AudioFileStreamError.Code: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .unsupportedFileType: "unsupportedFileType"
        case .unsupportedDataFormat: "unsupportedDataFormat"
        case .invalidData: "invalidData"
        case .truncated: "truncated"
        case .noAudio: "noAudio"
        case .tooLarge: "tooLarge"
        case .indexAfterMediaData: "indexAfterMediaData"
        case .invalidOperation: "invalidOperation"
        }
    }
}

extension AudioFilePacketTableInfo.Source: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .lameTag: "lameTag"
        case .iTunSMPB: "iTunSMPB"
        case .editList: "editList"
        case .pakt: "pakt"
        case .sampleDurations: "sampleDurations"
        case .containerFrameCount: "containerFrameCount"
        case .granulePosition: "granulePosition"
        case .frameRange: "frameRange"
        case .codecDelay: "codecDelay"
        }
    }
}

extension AudioStreamTimestamp.Source: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .pesPTS: "pesPTS"
        case .id3: "id3"
        case .tfdt: "tfdt"
        }
    }
}

extension AudioFileWriterError.Code: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .cannotCreate: "cannotCreate"
        case .unsupportedFormat: "unsupportedFormat"
        case .writeFailed: "writeFailed"
        case .closeFailed: "closeFailed"
        case .closed: "closed"
        }
    }
}

extension PCMFileWriter.Container: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case .wav: "wav"
        case .caf: "caf"
        }
    }
}

extension CueSheet.Position: CustomStringConvertible {
    /// The case's name (and its values), without the module's and type's names.
    public var description: String {
        switch self {
        case let .cdFrames(v0): "cdFrames(\(v0))"
        case let .sampleFrame(v0): "sampleFrame(\(v0))"
        }
    }
}
