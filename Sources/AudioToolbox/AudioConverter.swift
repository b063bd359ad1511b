internal import BufferQueue
import Foundation

// Audio Converter Services (AudioConverter.h): decode (any format with a registered decoder to
// PCM), encode (PCM to any format with a registered encoder) and PCM to PCM (sample layout, rate,
// channels), over the library's decoders, `AudioEncodingConverter`, `AudioConverter` and PCM
// layouts. The caller's input procedure is pulled as Apple's is; what it gives beyond what a call
// needs is kept for the next call.

/// What an `AudioConverterRef` points to.
// @unchecked: a C API object: its calls come one at a time, as Apple's AudioConverter asks of its caller.
final class ConverterObject {
    let input: AudioStreamBasicDescription
    var output: AudioStreamBasicDescription
    var decompressionCookie: [UInt8]?
    var settings = AudioEncoderSettings()
    var quality: AudioConverterQuality = .veryHigh

    // Made at the first conversion (after the cookie and settings are set).
    private var decoder: (any AudioDecoder)?
    private var decoded: DecodedAudio?
    private var resampler: BufferQueue.AudioConverter?
    private var converted: DecodedAudio?
    private var encoder: AudioEncodingConverter?
    private let encodedBlock = EncodedPackets()
    /// Float frames (interleaved, output rate and channels) not yet handed out.
    private var pendingFloats: [Float] = []
    private var pendingStart = 0
    /// Encoded packets not yet handed out.
    private var pendingPackets: [(bytes: [UInt8], frames: Int)] = []
    private var inputEnded = false
    private var scratch: [Float] = []

    var isEncoding: Bool { output.mFormatID != kAudioFormatLinearPCM }
    var isDecoding: Bool { input.mFormatID != kAudioFormatLinearPCM }

    init(input: AudioStreamBasicDescription, output: AudioStreamBasicDescription) throws {
        Setup.once()
        self.input = input
        self.output = output
        if isDecoding && isEncoding {
            throw StatusError(kAudioConverterErr_FormatNotSupported, "one side must be linear PCM (decode, encode, or PCM to PCM)")
        }
        if isDecoding {
            let formatID = BufferQueue.AudioFormatID(rawValue: input.mFormatID)
            guard AudioDecoderRegistry.shared.factory(for: formatID) != nil else {
                throw StatusError(kAudioConverterErr_FormatNotSupported, AudioDecoderRegistry.shared.missingDecoder(for: formatID).message)
            }
        } else {
            _ = try layout(of: input)
        }
        if isEncoding {
            let made = try makeEncoder()
            self.output = AudioStreamBasicDescription(made.outputFormat)
        } else {
            _ = try layout(of: output)
        }
    }

    static func from(_ ref: AudioConverterRef) -> ConverterObject { Retained.object(ConverterObject.self, ref) }

    /// The interleaved layout of one side (a non-interleaved side is handled a channel at a time).
    func layout(of format: AudioStreamBasicDescription, channels: Int? = nil) throws -> PCMSampleLayout {
        var single = format.library
        let planar = single.formatFlags.contains(.isNonInterleaved)
        single.formatFlags.remove(.isNonInterleaved)
        let count = channels ?? single.channelsPerFrame
        let bytesPerSample = planar ? single.bytesPerFrame : single.bytesPerFrame / max(single.channelsPerFrame, 1)
        single.channelsPerFrame = count
        single.bytesPerFrame = bytesPerSample * count
        single.bytesPerPacket = single.bytesPerFrame
        do { return try PCMSampleLayout(single) } catch let error as AudioQueueError {
            throw StatusError(kAudioConverterErr_FormatNotSupported, error.message)
        }
    }

    private func makeEncoder() throws -> AudioEncodingConverter {
        var client = input.library
        if client.formatFlags.contains(.isNonInterleaved) {
            client.formatFlags.remove(.isNonInterleaved)
            client.bytesPerFrame *= max(client.channelsPerFrame, 1)
            client.bytesPerPacket = client.bytesPerFrame
        }
        var target = output.library
        if target.channelsPerFrame == 0 { target.channelsPerFrame = client.channelsPerFrame }
        if target.sampleRate == 0 { target.sampleRate = client.sampleRate }
        do {
            return try AudioEncodingConverter(from: client, to: target, settings: settings, quality: quality)
        } catch let error as AudioQueueError {
            throw StatusError(kAudioConverterErr_FormatNotSupported, error.message)
        }
    }

    private var channelsOut: Int { Int(output.mChannelsPerFrame) }
    private var isPlanar: (input: Bool, output: Bool) {
        (input.mFormatFlags & kAudioFormatFlagIsNonInterleaved != 0, output.mFormatFlags & kAudioFormatFlagIsNonInterleaved != 0)
    }

    func reset() {
        decoder?.reset()
        resampler?.reset()
        encoder?.reset()
        encodedBlock.removeAll()
        pendingFloats.removeAll()
        pendingStart = 0
        pendingPackets.removeAll()
        inputEnded = false
    }

    /// The frames available (output side, float), appended as the input is converted.
    private var floatsAvailable: Int { (pendingFloats.count - pendingStart) / max(channelsOut, 1) }

    /// Appends float frames at the input's rate and channels, converted to the output's.
    private func appendConverted(_ floats: UnsafeBufferPointer<Float>, rate: Double, channels: Int) throws {
        if rate == output.mSampleRate && channels == channelsOut {
            pendingFloats.append(contentsOf: floats)
            return
        }
        if resampler == nil || resampler?.inputFormat.sampleRate != rate || resampler?.inputFormat.channelsPerFrame != channels {
            do {
                resampler = try BufferQueue.AudioConverter(from: .float32(sampleRate: rate, channels: channels),
                                                           to: .float32(sampleRate: output.mSampleRate, channels: channelsOut), quality: quality)
            } catch let error as AudioQueueError {
                throw StatusError(kAudioConverterErr_FormatNotSupported, error.message)
            }
            converted = DecodedAudio(format: .float32(sampleRate: output.mSampleRate, channels: channelsOut))
        }
        guard let resampler, let converted else { return }
        try resampler.convert(floats, into: converted)
        converted.withUnsafeSamples { pendingFloats.append(contentsOf: $0) }
        converted.removeAll()
    }

    private func finishConversion() throws {
        if let resampler, let converted {
            try resampler.finish(into: converted)
            converted.withUnsafeSamples { pendingFloats.append(contentsOf: $0) }
            converted.removeAll()
        }
    }

    /// Pulls one batch of input from the caller: `packets` packets (or frames). Returns false at
    /// the end of the input; throws the caller's status when it returned one.
    private func pull(_ proc: AudioConverterComplexInputDataProc, _ userData: UnsafeMutableRawPointer?, _ ref: AudioConverterRef,
                      packets: Int) throws -> Bool {
        let buffers = isPlanar.input ? Int(input.mChannelsPerFrame) : 1
        let list = AudioBufferList.allocate(maximumBuffers: max(buffers, 1))
        defer { free(list.unsafeMutablePointer) }
        var count = UInt32(max(packets, 1))
        var descriptions: UnsafeMutablePointer<AudioStreamPacketDescription>?
        let status = input.mBytesPerPacket == 0
            ? proc(ref, &count, list.unsafeMutablePointer, &descriptions, userData)
            : proc(ref, &count, list.unsafeMutablePointer, nil, userData)
        guard status == noErr else { throw StatusError(status, "the input procedure returned \(status)") }
        if count == 0 { return false }
        if isDecoding {
            try decode(list, packets: Int(count), descriptions: descriptions)
        } else {
            try takePCM(list, frames: Int(count))
        }
        return true
    }

    private func decode(_ list: UnsafeMutableAudioBufferListPointer, packets: Int, descriptions: UnsafeMutablePointer<AudioStreamPacketDescription>?) throws {
        guard let data = list[0].mData else { throw StatusError(kAudioConverterErr_InvalidInputSize, "the input buffer has no data") }
        if decoder == nil {
            do {
                decoder = try AudioDecoderRegistry.shared.makeDecoder(for: input.library, magicCookie: decompressionCookie)
            } catch let error as AudioQueueError {
                throw StatusError(kAudioConverterErr_FormatNotSupported, error.message)
            }
            decoded = DecodedAudio(format: .float32(sampleRate: input.mSampleRate, channels: Int(input.mChannelsPerFrame)))
        }
        guard let decoder, let decoded else { return }
        let size = Int(list[0].mDataByteSize)
        for index in 0..<packets {
            let offset: Int, length: Int, frames: Int
            if let descriptions {
                offset = Int(descriptions[index].mStartOffset)
                length = Int(descriptions[index].mDataByteSize)
                frames = Int(descriptions[index].mVariableFramesInPacket != 0 ? descriptions[index].mVariableFramesInPacket : input.mFramesPerPacket)
            } else {
                guard input.mBytesPerPacket > 0 else {
                    throw StatusError(kAudioConverterErr_RequiresPacketDescriptionsError, "packets of varying size need descriptions")
                }
                offset = index * Int(input.mBytesPerPacket)
                length = Int(input.mBytesPerPacket)
                frames = Int(input.mFramesPerPacket)
            }
            guard offset >= 0, length > 0, offset + length <= size else {
                throw StatusError(kAudioConverterErr_InvalidInputSize, "packet \(index) (\(length) bytes at \(offset)) lies outside the \(size) bytes given")
            }
            do {
                try decoder.decode(packet: UnsafeRawBufferPointer(start: data + offset, count: length), frames: frames, into: decoded)
            } catch let error as AudioQueueError {
                throw StatusError(kAudioConverterErr_UnspecifiedError, error.message)
            }
        }
        try drainDecoded()
    }

    private func drainDecoded() throws {
        guard let decoded, decoded.sampleCount > 0 else { return }
        let format = decoded.format
        try decoded.withUnsafeSamples { try appendConverted($0, rate: format.sampleRate, channels: format.channelsPerFrame) }
        decoded.removeAll()
    }

    private func takePCM(_ list: UnsafeMutableAudioBufferListPointer, frames: Int) throws {
        let channels = Int(input.mChannelsPerFrame)
        if isEncoding {
            if encoder == nil { encoder = try makeEncoder() }
            guard let encoder else { return }
            if scratch.count < frames * channels { scratch = [Float](repeating: 0, count: frames * channels) }
            if isPlanar.input {
                // Interleave bytes for the encoder's integer path to stay bit-exact.
                let bytesPerSample = Int(input.mBytesPerFrame)
                var bytes = [UInt8](repeating: 0, count: frames * channels * bytesPerSample)
                bytes.withUnsafeMutableBytes { out in
                    guard let base = out.baseAddress else { return }
                    for channel in 0..<min(channels, list.count) {
                        guard let data = list[channel].mData else { continue }
                        for frame in 0..<frames {
                            (base + (frame * channels + channel) * bytesPerSample).copyMemory(from: data + frame * bytesPerSample, byteCount: bytesPerSample)
                        }
                    }
                }
                try bytes.withUnsafeBytes { try encoder.convert($0, into: encodedBlock) }
            } else {
                guard let data = list[0].mData else { return }
                try encoder.convert(UnsafeRawBufferPointer(start: data, count: frames * Int(input.mBytesPerFrame)), into: encodedBlock)
            }
            takeEncoded()
            return
        }
        if scratch.count < frames * channels { scratch = [Float](repeating: 0, count: frames * channels) }
        try toFloats(list, frames: frames, into: &scratch)
        try scratch.withUnsafeBufferPointer {
            try appendConverted(UnsafeBufferPointer(rebasing: $0[0..<(frames * channels)]), rate: input.mSampleRate, channels: channels)
        }
    }

    /// The input's samples as interleaved floats.
    private func toFloats(_ list: UnsafeMutableAudioBufferListPointer, frames: Int, into floats: inout [Float]) throws {
        let channels = Int(input.mChannelsPerFrame)
        if isPlanar.input {
            let single = try layout(of: input, channels: 1)
            var plane = [Float](repeating: 0, count: frames)
            for channel in 0..<min(channels, list.count) {
                guard let data = list[channel].mData else { continue }
                plane.withUnsafeMutableBufferPointer { if let base = $0.baseAddress { single.toFloat(data, count: frames, into: base) } }
                for frame in 0..<frames { floats[frame * channels + channel] = plane[frame] }
            }
        } else {
            let all = try layout(of: input)
            guard let data = list[0].mData else { return }
            floats.withUnsafeMutableBufferPointer { if let base = $0.baseAddress { all.toFloat(data, count: frames * channels, into: base) } }
        }
    }

    private func takeEncoded() {
        for index in 0..<encodedBlock.count {
            pendingPackets.append((Array(encodedBlock.bytes(of: index)), encodedBlock.packets[index].frames))
        }
        encodedBlock.removeAll()
    }

    private func endInput() throws {
        inputEnded = true
        if let decoder, let decoded {
            do { try decoder.finish(into: decoded) } catch let error as AudioQueueError {
                throw StatusError(kAudioConverterErr_UnspecifiedError, error.message)
            }
            try drainDecoded()
        }
        if let encoder {
            try encoder.finish(into: encodedBlock)
            takeEncoded()
        } else {
            try finishConversion()
        }
    }

    /// `AudioConverterFillComplexBuffer`: up to `wanted` output packets into `list` (and
    /// `descriptions`); returns how many.
    func fill(_ proc: AudioConverterComplexInputDataProc, _ userData: UnsafeMutableRawPointer?, _ ref: AudioConverterRef, wanted: Int,
              into list: UnsafeMutableAudioBufferListPointer, descriptions: UnsafeMutablePointer<AudioStreamPacketDescription>?) throws -> Int {
        if isEncoding {
            guard descriptions != nil || output.mBytesPerPacket > 0 else {
                throw StatusError(kAudioConverterErr_RequiresPacketDescriptionsError, "\(FormatInfo.name(output.mFormatID)) packets vary in size: pass packet descriptions")
            }
            let framesPerPacket = max(Int(output.mFramesPerPacket), 1)
            while pendingPackets.count < wanted && !inputEnded {
                let frames = (wanted - pendingPackets.count) * framesPerPacket
                if try !pull(proc, userData, ref, packets: frames) { try endInput() }
            }
            return copyPackets(wanted: wanted, into: list, descriptions: descriptions)
        }
        // PCM out: frames are packets.
        let bytesPerFrame = Int(output.mBytesPerFrame)
        var room = wanted
        for buffer in list { room = min(room, Int(buffer.mDataByteSize) / max(bytesPerFrame, 1)) }
        let inputFramesPerPacket = max(Int(input.mFramesPerPacket), 1)
        while floatsAvailable < room && !inputEnded {
            let missing = room - floatsAvailable
            let scaled = Int((Double(missing) * input.mSampleRate / max(output.mSampleRate, 1)).rounded(.up))
            if try !pull(proc, userData, ref, packets: max(1, scaled / inputFramesPerPacket)) { try endInput() }
        }
        let frames = min(room, floatsAvailable)
        try storeFloats(frames: frames, into: list)
        return frames
    }

    private func copyPackets(wanted: Int, into list: UnsafeMutableAudioBufferListPointer,
                             descriptions: UnsafeMutablePointer<AudioStreamPacketDescription>?) -> Int {
        guard let data = list[0].mData else { return 0 }
        let room = Int(list[0].mDataByteSize)
        var used = 0, count = 0
        while count < wanted, count < pendingPackets.count, used + pendingPackets[count].bytes.count <= room {
            let packet = pendingPackets[count]
            packet.bytes.withUnsafeBytes { if let base = $0.baseAddress { (data + used).copyMemory(from: base, byteCount: packet.bytes.count) } }
            descriptions?[count] = AudioStreamPacketDescription(
                mStartOffset: Int64(used),
                mVariableFramesInPacket: packet.frames == Int(output.mFramesPerPacket) ? 0 : UInt32(packet.frames),
                mDataByteSize: UInt32(packet.bytes.count))
            used += packet.bytes.count
            count += 1
        }
        pendingPackets.removeFirst(count)
        list[0].mDataByteSize = UInt32(used)
        return count
    }

    private func storeFloats(frames: Int, into list: UnsafeMutableAudioBufferListPointer) throws {
        let channels = channelsOut
        defer {
            pendingStart += frames * channels
            if pendingStart > 65536 || pendingStart == pendingFloats.count {
                pendingFloats.removeFirst(pendingStart)
                pendingStart = 0
            }
        }
        if isPlanar.output {
            let single = try layout(of: output, channels: 1)
            var plane = [Float](repeating: 0, count: frames)
            for channel in 0..<min(channels, list.count) {
                for frame in 0..<frames { plane[frame] = pendingFloats[pendingStart + frame * channels + channel] }
                guard let data = list[channel].mData else { continue }
                plane.withUnsafeBufferPointer { if let base = $0.baseAddress { single.fromFloat(base, count: frames, into: data) } }
                list[channel].mDataByteSize = UInt32(frames * Int(output.mBytesPerFrame))
            }
        } else {
            let all = try layout(of: output)
            guard let data = list[0].mData else { return }
            pendingFloats.withUnsafeBufferPointer { buffer in
                if let base = buffer.baseAddress { all.fromFloat(base + pendingStart, count: frames * channels, into: data) }
            }
            list[0].mDataByteSize = UInt32(frames * Int(output.mBytesPerFrame))
        }
    }

    /// `AudioConverterConvertComplexBuffer` / `ConvertBuffer`: PCM to PCM at one rate, all at once.
    func convertAll(frames: Int, from inputList: UnsafeMutableAudioBufferListPointer, into outputList: UnsafeMutableAudioBufferListPointer) throws {
        guard !isDecoding, !isEncoding else {
            throw StatusError(kAudioConverterErr_OperationNotSupported, "only PCM to PCM converts a buffer at once; use AudioConverterFillComplexBuffer")
        }
        guard input.mSampleRate == output.mSampleRate else {
            throw StatusError(kAudioConverterErr_OperationNotSupported, "a buffer at once cannot change the sample rate; use AudioConverterFillComplexBuffer")
        }
        let channels = Int(input.mChannelsPerFrame)
        var floats = [Float](repeating: 0, count: frames * channels)
        try toFloats(inputList, frames: frames, into: &floats)
        pendingFloats.removeAll()
        pendingStart = 0
        try floats.withUnsafeBufferPointer { try appendConverted($0, rate: input.mSampleRate, channels: channels) }
        try storeFloats(frames: min(frames, floatsAvailable), into: outputList)
    }

    var primingFrames: Int { encoder?.primingFrames ?? ((try? makeEncoder())?.primingFrames ?? 0) }

    func propertyValue(_ id: AudioConverterPropertyID) throws -> [UInt8] {
        func bytes<T>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value) { Array($0) } }
        switch id {
        case kAudioConverterCurrentInputStreamDescription: return bytes(input)
        case kAudioConverterCurrentOutputStreamDescription: return bytes(output)
        case kAudioConverterCompressionMagicCookie:
            guard isEncoding else { throw StatusError(kAudioConverterErr_PropertyNotSupported, "only an encoder has a compression cookie") }
            if encoder == nil { encoder = try makeEncoder() }
            return encoder?.magicCookie ?? []
        case kAudioConverterDecompressionMagicCookie:
            return decompressionCookie ?? []
        case kAudioConverterPropertyMaximumOutputPacketSize:
            if isEncoding {
                if encoder == nil { encoder = try makeEncoder() }
                return bytes(UInt32(clamping: encoder?.maximumPacketSize ?? 0))
            }
            return bytes(output.mBytesPerPacket)
        case kAudioConverterPropertyMaximumInputPacketSize:
            return bytes(input.mBytesPerPacket > 0 ? input.mBytesPerPacket : UInt32(65536))
        case kAudioConverterPropertyMinimumInputBufferSize: return bytes(max(input.mBytesPerPacket, 1))
        case kAudioConverterPropertyMinimumOutputBufferSize:
            if isEncoding {
                if encoder == nil { encoder = try makeEncoder() }
                return bytes(UInt32(clamping: encoder?.maximumPacketSize ?? 0))
            }
            return bytes(output.mBytesPerPacket)
        case kAudioConverterPrimeInfo:
            return bytes(AudioConverterPrimeInfo(leadingFrames: UInt32(isEncoding ? primingFrames : 0), trailingFrames: 0))
        case kAudioConverterPrimeMethod: return bytes(UInt32(kConverterPrimeMethod_Normal))
        case kAudioConverterEncodeBitRate:
            guard isEncoding else { throw StatusError(kAudioConverterErr_PropertyNotSupported, "only an encoder has a bit rate") }
            return bytes(UInt32(clamping: settings.bitRate ?? 0))
        case kAudioConverterCodecQuality:
            return bytes(UInt32((settings.quality ?? 10) * 127 / 10))
        case kAudioConverterSampleRateConverterQuality:
            return bytes(UInt32(kAudioConverterQuality_Max))
        default:
            throw StatusError(kAudioConverterErr_PropertyNotSupported, "property \(fourCharacterCode(Int32(bitPattern: id))) is not supported")
        }
    }

    func setProperty(_ id: AudioConverterPropertyID, _ data: UnsafeRawBufferPointer) throws {
        func number() throws -> UInt32 {
            guard data.count >= 4 else { throw StatusError(kAudioConverterErr_BadPropertySizeError, "the value is a UInt32") }
            return data.loadUnaligned(as: UInt32.self)
        }
        switch id {
        case kAudioConverterDecompressionMagicCookie:
            decompressionCookie = Array(data)
            decoder = nil
        case kAudioConverterEncodeBitRate:
            guard isEncoding else { throw StatusError(kAudioConverterErr_PropertyNotSupported, "only an encoder has a bit rate") }
            settings.bitRate = Int(try number())
            encoder = try makeEncoder()
        case kAudioConverterCodecQuality:
            settings.quality = Int(try number()) * 10 / 127
            if isEncoding { encoder = try makeEncoder() }
        case kAudioConverterSampleRateConverterQuality:
            let value = try number()
            quality = value >= kAudioConverterQuality_High ? .veryHigh : value >= kAudioConverterQuality_Medium ? .high : .medium
            resampler = nil
        case kAudioConverterPrimeMethod, kAudioConverterSampleRateConverterComplexity:
            break
        default:
            throw StatusError(kAudioConverterErr_PropertyNotSupported, "property \(fourCharacterCode(Int32(bitPattern: id))) cannot be set")
        }
    }
}

/// Makes a converter from `inSourceFormat` to `inDestinationFormat`: decode, encode or PCM to PCM.
@discardableResult
public func AudioConverterNew(_ inSourceFormat: UnsafePointer<AudioStreamBasicDescription>,
                              _ inDestinationFormat: UnsafePointer<AudioStreamBasicDescription>,
                              _ outAudioConverter: UnsafeMutablePointer<AudioConverterRef?>) -> OSStatus {
    converterStatus("AudioConverterNew") {
        let object = try ConverterObject(input: inSourceFormat.pointee, output: inDestinationFormat.pointee)
        outAudioConverter.pointee = Retained.hand(object)
    }
}

/// Releases the converter.
@discardableResult
public func AudioConverterDispose(_ inAudioConverter: AudioConverterRef) -> OSStatus {
    Retained.release(ConverterObject.self, inAudioConverter)
    return noErr
}

/// Forgets the stream: buffered input and output and the codecs' state.
@discardableResult
public func AudioConverterReset(_ inAudioConverter: AudioConverterRef) -> OSStatus {
    ConverterObject.from(inAudioConverter).reset()
    return noErr
}

/// Converts into `outOutputData` up to `ioOutputDataPacketSize` packets (frames for PCM),
/// pulling input from `inInputDataProc`, which returns 0 packets at the end of the input (the
/// converter then drains) or a status of its own to stop for now (returned here, with what was
/// converted; the next call goes on).
@discardableResult
public func AudioConverterFillComplexBuffer(_ inAudioConverter: AudioConverterRef, _ inInputDataProc: AudioConverterComplexInputDataProc,
                                            _ inInputDataProcUserData: UnsafeMutableRawPointer?,
                                            _ ioOutputDataPacketSize: UnsafeMutablePointer<UInt32>,
                                            _ outOutputData: UnsafeMutablePointer<AudioBufferList>,
                                            _ outPacketDescription: UnsafeMutablePointer<AudioStreamPacketDescription>?) -> OSStatus {
    let object = ConverterObject.from(inAudioConverter)
    var produced = 0
    let status = converterStatus("AudioConverterFillComplexBuffer") {
        produced = try object.fill(inInputDataProc, inInputDataProcUserData, inAudioConverter, wanted: Int(ioOutputDataPacketSize.pointee),
                                   into: UnsafeMutableAudioBufferListPointer(outOutputData), descriptions: outPacketDescription)
    }
    ioOutputDataPacketSize.pointee = UInt32(produced)
    return status
}

/// Converts PCM to PCM at one rate, one buffer of each (interleaved).
@discardableResult
public func AudioConverterConvertBuffer(_ inAudioConverter: AudioConverterRef, _ inInputDataSize: UInt32, _ inInputData: UnsafeRawPointer,
                                        _ ioOutputDataSize: UnsafeMutablePointer<UInt32>, _ outOutputData: UnsafeMutableRawPointer) -> OSStatus {
    let object = ConverterObject.from(inAudioConverter)
    return converterStatus("AudioConverterConvertBuffer") {
        let frames = Int(inInputDataSize) / max(Int(object.input.mBytesPerFrame), 1)
        guard frames * Int(object.output.mBytesPerFrame) <= Int(ioOutputDataSize.pointee) else {
            throw StatusError(kAudioConverterErr_InvalidOutputSize, "\(frames) frames need \(frames * Int(object.output.mBytesPerFrame)) bytes of output")
        }
        let inList = AudioBufferList.allocate(maximumBuffers: 1)
        let outList = AudioBufferList.allocate(maximumBuffers: 1)
        defer {
            free(inList.unsafeMutablePointer)
            free(outList.unsafeMutablePointer)
        }
        inList[0] = AudioBuffer(mNumberChannels: object.input.mChannelsPerFrame, mDataByteSize: inInputDataSize, mData: UnsafeMutableRawPointer(mutating: inInputData))
        outList[0] = AudioBuffer(mNumberChannels: object.output.mChannelsPerFrame, mDataByteSize: ioOutputDataSize.pointee, mData: outOutputData)
        try object.convertAll(frames: frames, from: inList, into: outList)
        ioOutputDataSize.pointee = outList[0].mDataByteSize
    }
}

/// Converts `inNumberPCMFrames` PCM frames to PCM at one rate, buffer lists in and out.
@discardableResult
public func AudioConverterConvertComplexBuffer(_ inAudioConverter: AudioConverterRef, _ inNumberPCMFrames: UInt32,
                                               _ inInputData: UnsafePointer<AudioBufferList>,
                                               _ outOutputData: UnsafeMutablePointer<AudioBufferList>) -> OSStatus {
    let object = ConverterObject.from(inAudioConverter)
    return converterStatus("AudioConverterConvertComplexBuffer") {
        try object.convertAll(frames: Int(inNumberPCMFrames), from: UnsafeMutableAudioBufferListPointer(UnsafeMutablePointer(mutating: inInputData)),
                              into: UnsafeMutableAudioBufferListPointer(outOutputData))
    }
}

/// A property's size, and whether it can be set.
@discardableResult
public func AudioConverterGetPropertyInfo(_ inAudioConverter: AudioConverterRef, _ inPropertyID: AudioConverterPropertyID,
                                          _ outSize: UnsafeMutablePointer<UInt32>?, _ outWritable: UnsafeMutablePointer<DarwinBoolean>?) -> OSStatus {
    let object = ConverterObject.from(inAudioConverter)
    return converterStatus("AudioConverterGetPropertyInfo") {
        outSize?.pointee = UInt32(try object.propertyValue(inPropertyID).count)
        outWritable?.pointee = DarwinBoolean([kAudioConverterDecompressionMagicCookie, kAudioConverterEncodeBitRate, kAudioConverterCodecQuality,
                                              kAudioConverterSampleRateConverterQuality, kAudioConverterPrimeMethod].contains(inPropertyID))
    }
}

/// Reads a property: formats, cookies, packet sizes, prime info, bit rate, qualities.
@discardableResult
public func AudioConverterGetProperty(_ inAudioConverter: AudioConverterRef, _ inPropertyID: AudioConverterPropertyID,
                                      _ ioPropertyDataSize: UnsafeMutablePointer<UInt32>, _ outPropertyData: UnsafeMutableRawPointer) -> OSStatus {
    let object = ConverterObject.from(inAudioConverter)
    return converterStatus("AudioConverterGetProperty") {
        let value = try object.propertyValue(inPropertyID)
        let cut = [kAudioConverterCompressionMagicCookie, kAudioConverterDecompressionMagicCookie].contains(inPropertyID)
        try writeValue(value, to: outPropertyData, size: ioPropertyDataSize, cut: cut, badSize: kAudioConverterErr_BadPropertySizeError)
    }
}

/// Sets a property: the decompression cookie, the encoder's bit rate and quality, the
/// resampler's quality (the prime method and complexity are accepted).
@discardableResult
public func AudioConverterSetProperty(_ inAudioConverter: AudioConverterRef, _ inPropertyID: AudioConverterPropertyID, _ inPropertyDataSize: UInt32,
                                      _ inPropertyData: UnsafeRawPointer) -> OSStatus {
    let object = ConverterObject.from(inAudioConverter)
    return converterStatus("AudioConverterSetProperty") {
        try object.setProperty(inPropertyID, UnsafeRawBufferPointer(start: inPropertyData, count: Int(inPropertyDataSize)))
    }
}
