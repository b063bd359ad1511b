internal import BufferQueue
internal import AudioFileStream
internal import AudioPlayback
import Foundation

// Extended Audio File Services (ExtendedAudioFile.h): reading any file as linear PCM in the
// client's format (over AudioPlayback's `AudioFileRenderer`: decoded, trimmed to the valid frames,
// converted in rate and channels), and writing PCM into any format this library encodes (over
// `AudioFileWriter`).

/// What an `ExtAudioFileRef` points to.
// @unchecked: a C API object: its calls come one at a time, as Apple's ExtAudioFile asks of its caller.
final class ExtFileObject {
    enum Mode {
        case reading(AudioFile)
        case writing(path: String, type: AudioFileType, fileFormat: BufferQueue.AudioStreamDescription, layout: BufferQueue.AudioChannelLayout?)
    }

    let mode: Mode
    /// The file's format as the caller sees it.
    var fileFormat: AudioStreamBasicDescription
    /// The PCM the caller reads or writes.
    var clientFormat: AudioStreamBasicDescription
    var clientLayout: BufferQueue.AudioChannelLayout?
    /// Reading: the renderer, made at the first read (and again after a seek), and where it started.
    private var renderer: AudioFileRenderer?
    private var start: Int64 = 0
    private var floats: [Float] = []
    /// Writing: made at the first write, once the client format is settled.
    private var writer: AudioFileWriter?
    var settings = AudioEncoderSettings()
    /// An AudioFileID over the same file, handed out for kExtAudioFileProperty_AudioFile.
    var fileID: AudioFileID?

    init(reading file: AudioFile) {
        mode = .reading(file)
        fileFormat = AudioStreamBasicDescription(file.dataFormat)
        clientFormat = fileFormat
    }

    init(path: String, type: AudioFileType, fileFormat: AudioStreamBasicDescription, layout: BufferQueue.AudioChannelLayout?) {
        mode = .writing(path: path, type: type, fileFormat: fileFormat.library, layout: layout)
        self.fileFormat = fileFormat
        clientFormat = fileFormat
        clientLayout = layout
    }

    deinit {
        if let fileID { Retained.release(FileObject.self, fileID) }
    }

    static func from(_ ref: ExtAudioFileRef) -> ExtFileObject { Retained.object(ExtFileObject.self, ref) }

    var isPCMClient: Bool { clientFormat.mFormatID == kAudioFormatLinearPCM }
    var isInterleavedClient: Bool { clientFormat.mFormatFlags & kAudioFormatFlagIsNonInterleaved == 0 }

    /// One channel's (or, interleaved, one frame's) layout of the client format.
    private func sampleLayout(channels: Int) throws -> PCMSampleLayout {
        var single = clientFormat.library
        single.formatFlags.remove(.isNonInterleaved)
        let bytesPerSample = isInterleavedClient ? single.bytesPerFrame / max(single.channelsPerFrame, 1) : single.bytesPerFrame
        single.channelsPerFrame = channels
        single.bytesPerFrame = bytesPerSample * channels
        single.bytesPerPacket = single.bytesPerFrame
        return try PCMSampleLayout(single)
    }

    // MARK: reading

    /// The valid frames of the file, in the client's rate.
    var lengthInClientFrames: Int64 {
        guard case .reading(let file) = mode else { return writer?.validFrames ?? 0 }
        let decoded = file.formatList.first ?? file.dataFormat
        let valid = file.packetTableInfo?.validFrames ?? file.totalFrames * Int64(file.indexFrameScale)
        guard clientFormat.mSampleRate > 0, decoded.sampleRate > 0, clientFormat.mSampleRate != decoded.sampleRate else { return valid }
        return Int64((Double(valid) * clientFormat.mSampleRate / decoded.sampleRate).rounded())
    }

    var position: Int64 { start + (renderer?.framesRendered ?? 0) }

    func seek(to frame: Int64) throws {
        guard case .reading = mode else { throw StatusError(kExtAudioFileError_InvalidOperationOrder, "seeking is for reading") }
        guard frame >= 0 else { throw StatusError(kExtAudioFileError_InvalidSeek, "cannot seek to frame \(frame)") }
        renderer = nil
        start = frame
    }

    /// Client format changes start the render again where it was.
    func clientFormatChanged() {
        if renderer != nil {
            start = position
            renderer = nil
        }
    }

    func read(frames wanted: Int, into list: UnsafeMutableAudioBufferListPointer) throws -> Int {
        guard case .reading(let file) = mode else { throw StatusError(kExtAudioFileError_InvalidOperationOrder, "the file was created for writing") }
        guard isPCMClient else { throw StatusError(kExtAudioFileError_NonPCMClientFormat, "set a linear PCM client format to read a compressed file") }
        let channels = Int(clientFormat.mChannelsPerFrame)
        if renderer == nil {
            let decoded = file.formatList.first ?? file.dataFormat
            let fileStart = decoded.sampleRate > 0 && clientFormat.mSampleRate != decoded.sampleRate
                ? Int64((Double(start) * decoded.sampleRate / clientFormat.mSampleRate).rounded()) : start
            renderer = try AudioFileRenderer(file: file, startFrame: fileStart, sampleRate: clientFormat.mSampleRate, channels: channels)
        }
        guard let renderer else { return 0 }
        // The caller's buffers bound the frames.
        let bytesPerFrame = Int(clientFormat.mBytesPerFrame)
        var room = wanted
        for buffer in list { room = min(room, Int(buffer.mDataByteSize) / max(bytesPerFrame, 1)) }
        guard room > 0 else { return 0 }
        if floats.count < room * channels { floats = [Float](repeating: 0, count: room * channels) }
        var done = 0
        try floats.withUnsafeMutableBufferPointer { all in
            while done < room {
                let slice = UnsafeMutableBufferPointer(rebasing: all[(done * channels)..<(room * channels)])
                let count = try renderer.render(into: slice, frames: room - done)
                if count == 0 { break }
                done += count
            }
        }
        try store(frames: done, channels: channels, into: list)
        return done
    }

    /// Converts the rendered floats into the caller's buffers in the client layout.
    private func store(frames: Int, channels: Int, into list: UnsafeMutableAudioBufferListPointer) throws {
        if isInterleavedClient {
            let layout = try sampleLayout(channels: channels)
            guard let data = list[0].mData else { return }
            floats.withUnsafeBufferPointer { if let base = $0.baseAddress { layout.fromFloat(base, count: frames * channels, into: data) } }
            list[0].mDataByteSize = UInt32(frames * Int(clientFormat.mBytesPerFrame))
        } else {
            let layout = try sampleLayout(channels: 1)
            var plane = [Float](repeating: 0, count: frames)
            for channel in 0..<min(channels, list.count) {
                for frame in 0..<frames { plane[frame] = floats[frame * channels + channel] }
                guard let data = list[channel].mData else { continue }
                plane.withUnsafeBufferPointer { if let base = $0.baseAddress { layout.fromFloat(base, count: frames, into: data) } }
                list[channel].mDataByteSize = UInt32(frames * Int(clientFormat.mBytesPerFrame))
            }
        }
    }

    // MARK: writing

    func write(frames: Int, from list: UnsafeMutableAudioBufferListPointer) throws {
        guard case .writing(let path, let type, let fileFormat, let layout) = mode else {
            throw StatusError(kExtAudioFileError_InvalidOperationOrder, "the file was opened for reading")
        }
        guard isPCMClient else { throw StatusError(kExtAudioFileError_NonPCMClientFormat, "the client format must be linear PCM") }
        let channels = Int(clientFormat.mChannelsPerFrame)
        var interleavedClient = clientFormat.library
        interleavedClient.formatFlags.remove(.isNonInterleaved)
        let bytesPerSample = isInterleavedClient ? Int(clientFormat.mBytesPerFrame) / max(channels, 1) : Int(clientFormat.mBytesPerFrame)
        interleavedClient.bytesPerFrame = bytesPerSample * channels
        interleavedClient.bytesPerPacket = interleavedClient.bytesPerFrame
        if writer == nil {
            do {
                writer = try AudioFileWriter(path: path, fileType: type, format: fileFormat, clientFormat: interleavedClient,
                                             clientLayout: clientLayout ?? layout, settings: settings)
            } catch let error as AudioFileWriterError {
                throw StatusError(kExtAudioFileError_InvalidDataFormat, error.description)
            } catch let error as AudioQueueError {
                throw StatusError(kAudioConverterErr_FormatNotSupported, error.description)
            }
        }
        guard let writer, frames > 0 else { return }
        let bytes = frames * interleavedClient.bytesPerFrame
        if isInterleavedClient {
            guard let data = list[0].mData else { throw StatusError(kExtAudioFileError_InvalidDataFormat, "the buffer has no data") }
            try writer.write(UnsafeRawBufferPointer(start: data, count: bytes))
        } else {
            // Channels side by side, sample by sample: bytes moved, not converted.
            guard list.count >= channels else {
                throw StatusError(kExtAudioFileError_InvalidDataFormat, "\(list.count) buffers for \(channels) non-interleaved channels")
            }
            var interleaved = [UInt8](repeating: 0, count: bytes)
            interleaved.withUnsafeMutableBytes { out in
                guard let base = out.baseAddress else { return }
                for channel in 0..<channels {
                    guard let data = list[channel].mData else { continue }
                    for frame in 0..<frames {
                        (base + (frame * channels + channel) * bytesPerSample).copyMemory(from: data + frame * bytesPerSample, byteCount: bytesPerSample)
                    }
                }
            }
            try interleaved.withUnsafeBytes { try writer.write($0) }
        }
    }

    func close() throws {
        if case .writing = mode, writer == nil {
            // Nothing written: the file still gets its header.
            let empty = AudioBufferList.allocate(maximumBuffers: 1)
            defer { free(empty.unsafeMutablePointer) }
            try write(frames: 0, from: empty)
        }
        do {
            try writer?.close()
        } catch let error as AudioFileWriterError {
            throw StatusError(kAudioFileUnspecifiedError, error.description)
        }
    }
}

/// Opens a file for reading as PCM. Set `kExtAudioFileProperty_ClientDataFormat` to read a
/// compressed file (or to convert rate, channels or sample layout).
@discardableResult
public func ExtAudioFileOpenURL(_ inURL: CFURL, _ outExtAudioFile: UnsafeMutablePointer<ExtAudioFileRef?>) -> OSStatus {
    extStatus("ExtAudioFileOpenURL") {
        Setup.once()
        let path = try filePath(inURL)
        guard FileManager.default.fileExists(atPath: path) else { throw StatusError(kAudioFileFileNotFoundError, "\(path) does not exist") }
        outExtAudioFile.pointee = Retained.hand(ExtFileObject(reading: try AudioFile(path: path)))
    }
}

/// Creates a file of `inStreamDesc` (any format this library encodes into `inFileType`'s
/// container); write PCM of `kExtAudioFileProperty_ClientDataFormat` (by default the file's
/// format, when that is PCM).
@discardableResult
public func ExtAudioFileCreateWithURL(_ inURL: CFURL, _ inFileType: AudioFileTypeID, _ inStreamDesc: UnsafePointer<AudioStreamBasicDescription>,
                                      _ inChannelLayout: UnsafePointer<CoreAudioTypes.AudioChannelLayout>?, _ inFlags: UInt32,
                                      _ outExtAudioFile: UnsafeMutablePointer<ExtAudioFileRef?>) -> OSStatus {
    extStatus("ExtAudioFileCreateWithURL") {
        Setup.once()
        let path = try filePath(inURL)
        guard let type = AudioFileType(typeID: inFileType), type.isWritable else {
            throw StatusError(kAudioFileUnsupportedFileTypeError, "\(fourCharacterCode(Int32(bitPattern: inFileType))) files are not written")
        }
        if FileManager.default.fileExists(atPath: path), AudioFileFlags(rawValue: inFlags).contains(.eraseFile) == false {
            throw StatusError(kAudioFilePermissionsError, "\(path) exists; pass kAudioFileFlags_EraseFile to replace it")
        }
        var format = inStreamDesc.pointee
        if format.mFormatID != kAudioFormatLinearPCM, format.mFramesPerPacket == 0 {
            format = (try? FormatInfo.complete(format)) ?? format
        }
        var layout: BufferQueue.AudioChannelLayout?
        if let inChannelLayout {
            let size = channelLayoutSize(descriptions: Int(inChannelLayout.pointee.mNumberChannelDescriptions))
            layout = libraryChannelLayout(UnsafeRawPointer(inChannelLayout), size: UInt32(size), channels: Int(format.mChannelsPerFrame))
        }
        outExtAudioFile.pointee = Retained.hand(ExtFileObject(path: path, type: type, fileFormat: format, layout: layout))
    }
}

/// Reads up to `ioNumberFrames` frames into `ioData` in the client format; `ioNumberFrames` gets
/// how many (0 at the end). Only the file's valid frames are read (priming and padding trimmed).
@discardableResult
public func ExtAudioFileRead(_ inExtAudioFile: ExtAudioFileRef, _ ioNumberFrames: UnsafeMutablePointer<UInt32>,
                             _ ioData: UnsafeMutablePointer<AudioBufferList>) -> OSStatus {
    let object = ExtFileObject.from(inExtAudioFile)
    return extStatus("ExtAudioFileRead") {
        let frames = try object.read(frames: Int(ioNumberFrames.pointee), into: UnsafeMutableAudioBufferListPointer(ioData))
        ioNumberFrames.pointee = UInt32(frames)
    }
}

/// Writes `inNumberFrames` frames of the client format.
@discardableResult
public func ExtAudioFileWrite(_ inExtAudioFile: ExtAudioFileRef, _ inNumberFrames: UInt32, _ ioData: UnsafePointer<AudioBufferList>) -> OSStatus {
    let object = ExtFileObject.from(inExtAudioFile)
    return extStatus("ExtAudioFileWrite") {
        try object.write(frames: Int(inNumberFrames), from: UnsafeMutableAudioBufferListPointer(UnsafeMutablePointer(mutating: ioData)))
    }
}

/// Writes as `ExtAudioFileWrite` does, before returning (a call with no data, which Apple's
/// recorders make to set up the writer, only does that).
@discardableResult
public func ExtAudioFileWriteAsync(_ inExtAudioFile: ExtAudioFileRef, _ inNumberFrames: UInt32, _ ioData: UnsafePointer<AudioBufferList>?) -> OSStatus {
    let object = ExtFileObject.from(inExtAudioFile)
    return extStatus("ExtAudioFileWriteAsync") {
        guard let ioData else {
            let empty = AudioBufferList.allocate(maximumBuffers: 1)
            defer { free(empty.unsafeMutablePointer) }
            try object.write(frames: 0, from: empty)
            return
        }
        try object.write(frames: Int(inNumberFrames), from: UnsafeMutableAudioBufferListPointer(UnsafeMutablePointer(mutating: ioData)))
    }
}

/// Moves the read position to `inFrameOffset` (client frames, from the first valid frame): the
/// next read starts exactly there.
@discardableResult
public func ExtAudioFileSeek(_ inExtAudioFile: ExtAudioFileRef, _ inFrameOffset: Int64) -> OSStatus {
    let object = ExtFileObject.from(inExtAudioFile)
    return extStatus("ExtAudioFileSeek") { try object.seek(to: inFrameOffset) }
}

/// The read position (client frames from the first valid frame).
@discardableResult
public func ExtAudioFileTell(_ inExtAudioFile: ExtAudioFileRef, _ outFrameOffset: UnsafeMutablePointer<Int64>) -> OSStatus {
    outFrameOffset.pointee = ExtFileObject.from(inExtAudioFile).position
    return noErr
}

/// Closes the file (a written file is completed) and releases the reference.
@discardableResult
public func ExtAudioFileDispose(_ inExtAudioFile: ExtAudioFileRef) -> OSStatus {
    let object = ExtFileObject.from(inExtAudioFile)
    let status = extStatus("ExtAudioFileDispose") { try object.close() }
    Retained.release(ExtFileObject.self, inExtAudioFile)
    return status
}

/// A property's size, and whether it can be set.
@discardableResult
public func ExtAudioFileGetPropertyInfo(_ inExtAudioFile: ExtAudioFileRef, _ inPropertyID: ExtAudioFilePropertyID,
                                        _ outSize: UnsafeMutablePointer<UInt32>?, _ outWritable: UnsafeMutablePointer<DarwinBoolean>?) -> OSStatus {
    let object = ExtFileObject.from(inExtAudioFile)
    return extStatus("ExtAudioFileGetPropertyInfo") {
        outSize?.pointee = UInt32(try object.propertyValue(inPropertyID).count)
        outWritable?.pointee = DarwinBoolean([kExtAudioFileProperty_ClientDataFormat, kExtAudioFileProperty_ClientChannelLayout,
                                              kExtAudioFileProperty_ConverterConfig].contains(inPropertyID))
    }
}

/// Reads a property: file and client formats and layouts, the length in frames, the largest
/// packets, the underlying AudioFileID, the packet table.
@discardableResult
public func ExtAudioFileGetProperty(_ inExtAudioFile: ExtAudioFileRef, _ inPropertyID: ExtAudioFilePropertyID,
                                    _ ioPropertyDataSize: UnsafeMutablePointer<UInt32>, _ outPropertyData: UnsafeMutableRawPointer) -> OSStatus {
    let object = ExtFileObject.from(inExtAudioFile)
    return extStatus("ExtAudioFileGetProperty") {
        let value = try object.propertyValue(inPropertyID)
        let cut = [kExtAudioFileProperty_FileChannelLayout, kExtAudioFileProperty_ClientChannelLayout].contains(inPropertyID)
        try writeValue(value, to: outPropertyData, size: ioPropertyDataSize, cut: cut, badSize: kExtAudioFileError_InvalidPropertySize)
    }
}

/// Sets the client format or layout (what reads give and writes take), or the converter
/// configuration (accepted; encoder settings come from the file format).
@discardableResult
public func ExtAudioFileSetProperty(_ inExtAudioFile: ExtAudioFileRef, _ inPropertyID: ExtAudioFilePropertyID, _ inPropertyDataSize: UInt32,
                                    _ inPropertyData: UnsafeRawPointer?) -> OSStatus {
    let object = ExtFileObject.from(inExtAudioFile)
    return extStatus("ExtAudioFileSetProperty") {
        switch inPropertyID {
        case kExtAudioFileProperty_ClientDataFormat:
            guard let inPropertyData, let format = readProperty(AudioStreamBasicDescription.self, from: inPropertyData, size: inPropertyDataSize) else {
                throw StatusError(kExtAudioFileError_InvalidPropertySize, "the client format is an AudioStreamBasicDescription")
            }
            guard format.mFormatID == kAudioFormatLinearPCM else {
                throw StatusError(kExtAudioFileError_NonPCMClientFormat, "the client format must be linear PCM")
            }
            var interleaved = format.library
            interleaved.formatFlags.remove(.isNonInterleaved)
            if format.mFormatFlags & kAudioFormatFlagIsNonInterleaved != 0 {
                interleaved.bytesPerFrame *= max(interleaved.channelsPerFrame, 1)
                interleaved.bytesPerPacket = interleaved.bytesPerFrame
            }
            do { _ = try PCMSampleLayout(interleaved) } catch let error as AudioQueueError {
                throw StatusError(kExtAudioFileError_InvalidDataFormat, error.message)
            }
            object.clientFormat = format
            object.clientFormatChanged()
        case kExtAudioFileProperty_ClientChannelLayout:
            guard let inPropertyData,
                  let layout = libraryChannelLayout(inPropertyData, size: inPropertyDataSize, channels: Int(object.clientFormat.mChannelsPerFrame)) else {
                throw StatusError(kExtAudioFileError_InvalidChannelMap, "the layout does not describe the client's channels")
            }
            object.clientLayout = layout
        case kExtAudioFileProperty_ConverterConfig:
            break
        default:
            throw StatusError(kExtAudioFileError_InvalidProperty, "property \(fourCharacterCode(Int32(bitPattern: inPropertyID))) cannot be set")
        }
    }
}

extension ExtFileObject {
    func propertyValue(_ id: ExtAudioFilePropertyID) throws -> [UInt8] {
        func bytes<T>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value) { Array($0) } }
        switch id {
        case kExtAudioFileProperty_FileDataFormat: return bytes(fileFormat)
        case kExtAudioFileProperty_ClientDataFormat: return bytes(clientFormat)
        case kExtAudioFileProperty_FileLengthFrames: return bytes(lengthInClientFrames)
        case kExtAudioFileProperty_FileChannelLayout:
            switch mode {
            case .reading(let file): return channelLayoutBytes(file.channelLayout ?? .default(channels: Int(fileFormat.mChannelsPerFrame)))
            case .writing(_, _, _, let layout): return channelLayoutBytes(layout ?? .default(channels: Int(fileFormat.mChannelsPerFrame)))
            }
        case kExtAudioFileProperty_ClientChannelLayout:
            return channelLayoutBytes(clientLayout ?? .default(channels: Int(clientFormat.mChannelsPerFrame)))
        case kExtAudioFileProperty_FileMaxPacketSize:
            if case .reading(let file) = mode { return bytes(UInt32(clamping: file.maximumPacketSize ?? file.dataFormat.bytesPerPacket)) }
            return bytes(fileFormat.mBytesPerPacket)
        case kExtAudioFileProperty_ClientMaxPacketSize: return bytes(clientFormat.mBytesPerPacket)
        case kExtAudioFileProperty_AudioFile:
            guard case .reading(let file) = mode else {
                throw StatusError(kExtAudioFileError_InvalidProperty, "a file being written has no AudioFileID here")
            }
            if fileID == nil { fileID = Retained.hand(FileObject(reader: file)) }
            return bytes(fileID)
        case kExtAudioFileProperty_PacketTable:
            guard case .reading(let file) = mode, let info = file.packetTableInfo else {
                throw StatusError(kExtAudioFileError_InvalidProperty, "the file has no packet table")
            }
            return bytes(CAudioToolbox.AudioFilePacketTableInfo(mNumberValidFrames: info.validFrames, mPrimingFrames: Int32(clamping: info.primingFrames),
                                                                mRemainderFrames: Int32(clamping: info.remainderFrames)))
        default:
            throw StatusError(kExtAudioFileError_InvalidProperty, "property \(fourCharacterCode(Int32(bitPattern: id))) is not supported")
        }
    }
}
