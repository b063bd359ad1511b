internal import BufferQueue
import Foundation

// Parameters, properties, listeners, time and offline rendering of Audio Queue Services.

/// Reads a parameter: volume, pan, play rate, pitch or volume ramp time.
@discardableResult
public func AudioQueueGetParameter(_ inAQ: AudioQueueRef, _ inParamID: AudioQueueParameterID,
                                   _ outValue: UnsafeMutablePointer<AudioQueueParameterValue>) -> OSStatus {
    let object = QueueObject.from(inAQ)
    return queueStatus("AudioQueueGetParameter") {
        guard let queue = object.output else {
            guard inParamID == kAudioQueueParam_Volume else {
                throw StatusError(kAudioQueueErr_InvalidParameter, "an input queue has only a volume parameter")
            }
            outValue.pointee = 1
            return
        }
        switch inParamID {
        case kAudioQueueParam_Volume: outValue.pointee = queue.volume
        case kAudioQueueParam_Pan: outValue.pointee = queue.pan
        case kAudioQueueParam_PlayRate: outValue.pointee = queue.playRate
        case kAudioQueueParam_Pitch: outValue.pointee = queue.pitch
        case kAudioQueueParam_VolumeRampTime: outValue.pointee = Float(queue.volumeRampTime)
        default: throw StatusError(kAudioQueueErr_InvalidParameter, "no parameter \(inParamID)")
        }
    }
}

/// Sets a parameter now: volume (0…1), pan (−1…1), play rate (0.5…2, with time-pitch enabled),
/// pitch (cents, −2400…2400, Spectral only) or volume ramp time (seconds).
@discardableResult
public func AudioQueueSetParameter(_ inAQ: AudioQueueRef, _ inParamID: AudioQueueParameterID,
                                   _ inValue: AudioQueueParameterValue) -> OSStatus {
    let object = QueueObject.from(inAQ)
    return queueStatus("AudioQueueSetParameter") {
        guard let queue = object.output else {
            guard inParamID == kAudioQueueParam_Volume else {
                throw StatusError(kAudioQueueErr_InvalidParameter, "an input queue has only a volume parameter")
            }
            return
        }
        switch inParamID {
        case kAudioQueueParam_Volume: try queue.setParameters(AudioQueueParameters(volume: inValue))
        case kAudioQueueParam_Pan: try queue.setParameters(AudioQueueParameters(pan: inValue))
        case kAudioQueueParam_PlayRate: try queue.setParameters(AudioQueueParameters(playRate: inValue))
        case kAudioQueueParam_Pitch: try queue.setParameters(AudioQueueParameters(pitch: inValue))
        case kAudioQueueParam_VolumeRampTime: try queue.setVolumeRampTime(Double(inValue))
        default: throw StatusError(kAudioQueueErr_InvalidParameter, "no parameter \(inParamID)")
        }
    }
}

/// A property's current size in bytes.
@discardableResult
public func AudioQueueGetPropertySize(_ inAQ: AudioQueueRef, _ inID: AudioQueuePropertyID,
                                      _ outDataSize: UnsafeMutablePointer<UInt32>) -> OSStatus {
    let object = QueueObject.from(inAQ)
    return queueStatus("AudioQueueGetPropertySize") {
        outDataSize.pointee = UInt32(try object.propertyValue(inID).count)
    }
}

/// Reads a property into `outData`, whose size `ioDataSize` gives (and gets what was written).
@discardableResult
public func AudioQueueGetProperty(_ inAQ: AudioQueueRef, _ inID: AudioQueuePropertyID, _ outData: UnsafeMutableRawPointer,
                                  _ ioDataSize: UnsafeMutablePointer<UInt32>) -> OSStatus {
    let object = QueueObject.from(inAQ)
    return queueStatus("AudioQueueGetProperty") {
        let bytes = try object.propertyValue(inID)
        try writeValue(bytes, to: outData, size: ioDataSize, cut: !object.hasFixedSize(inID), badSize: kAudioQueueErr_InvalidPropertySize)
    }
}

/// Sets a property: magic cookie, channel layout, level metering, time-pitch (enable, algorithm,
/// bypass) and the decode buffer size (which must stay the queue's).
@discardableResult
public func AudioQueueSetProperty(_ inAQ: AudioQueueRef, _ inID: AudioQueuePropertyID, _ inData: UnsafeRawPointer,
                                  _ inDataSize: UInt32) -> OSStatus {
    let object = QueueObject.from(inAQ)
    return queueStatus("AudioQueueSetProperty") {
        try object.setProperty(inID, inData, inDataSize)
    }
}

/// Calls `inProc` (on the callbacks' run loop or thread) whenever the property changes; only
/// `kAudioQueueProperty_IsRunning` changes by itself.
@discardableResult
public func AudioQueueAddPropertyListener(_ inAQ: AudioQueueRef, _ inID: AudioQueuePropertyID,
                                          _ inProc: AudioQueuePropertyListenerProc, _ inUserData: UnsafeMutableRawPointer?) -> OSStatus {
    let object = QueueObject.from(inAQ)
    return queueStatus("AudioQueueAddPropertyListener") {
        guard QueueObject.knownProperties.contains(inID) else {
            throw StatusError(kAudioQueueErr_InvalidProperty, "no property \(fourCharacterCode(Int32(bitPattern: inID)))")
        }
        object.state.withLock { $0.listeners.append(.init(property: inID, proc: inProc, userData: UserData(pointer: inUserData))) }
    }
}

/// Removes a listener added with the same property, procedure and user data.
@discardableResult
public func AudioQueueRemovePropertyListener(_ inAQ: AudioQueueRef, _ inID: AudioQueuePropertyID,
                                             _ inProc: AudioQueuePropertyListenerProc, _ inUserData: UnsafeMutableRawPointer?) -> OSStatus {
    let object = QueueObject.from(inAQ)
    let procAddress = unsafeBitCast(inProc, to: UnsafeRawPointer.self)
    return queueStatus("AudioQueueRemovePropertyListener") {
        let removed = object.state.withLock { state -> Bool in
            guard let index = state.listeners.firstIndex(where: {
                $0.property == inID && unsafeBitCast($0.proc, to: UnsafeRawPointer.self) == procAddress && $0.userData.pointer == inUserData
            }) else { return false }
            state.listeners.remove(at: index)
            return true
        }
        guard removed else { throw StatusError(kAudioQueueErr_InvalidParameter, "no such listener") }
    }
}

extension QueueObject {
    static let knownProperties: Set<AudioQueuePropertyID> = [
        kAudioQueueProperty_IsRunning, kAudioQueueDeviceProperty_SampleRate, kAudioQueueDeviceProperty_NumberChannels,
        kAudioQueueProperty_MagicCookie, kAudioQueueProperty_MaximumOutputPacketSize, kAudioQueueProperty_StreamDescription,
        kAudioQueueProperty_ChannelLayout, kAudioQueueProperty_EnableLevelMetering, kAudioQueueProperty_CurrentLevelMeter,
        kAudioQueueProperty_CurrentLevelMeterDB, kAudioQueueProperty_DecodeBufferSizeFrames, kAudioQueueProperty_ConverterError,
        kAudioQueueProperty_EnableTimePitch, kAudioQueueProperty_TimePitchAlgorithm, kAudioQueueProperty_TimePitchBypass,
        kAudioConverterCurrentOutputStreamDescription, kAudioConverterCurrentInputStreamDescription,
        kAudioConverterCompressionMagicCookie, kAudioConverterPropertyMaximumOutputPacketSize,
    ]

    /// Whether a property has one size (a short buffer is an error); the others (cookie, layout,
    /// meters) are cut to the buffer, as Apple's are.
    func hasFixedSize(_ id: AudioQueuePropertyID) -> Bool {
        ![kAudioQueueProperty_MagicCookie, kAudioQueueProperty_ChannelLayout, kAudioQueueProperty_CurrentLevelMeter,
          kAudioQueueProperty_CurrentLevelMeterDB, kAudioConverterCompressionMagicCookie].contains(id)
    }

    /// A property's value as the bytes Apple's getter writes.
    func propertyValue(_ id: AudioQueuePropertyID) throws -> [UInt8] {
        func bytes<T>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value) { Array($0) } }
        switch (id, queue) {
        case (kAudioQueueProperty_IsRunning, _):
            let now: Bool
            switch queue {
            case .output(let queue): now = queue.isRunning
            case .input(let queue): now = queue.isRunning
            }
            return bytes(UInt32(now ? 1 : 0))
        case (kAudioQueueProperty_StreamDescription, .output(let queue)):
            return bytes(AudioStreamBasicDescription(queue.currentStreamDescription))
        case (kAudioQueueProperty_StreamDescription, .input(let queue)),
             (kAudioConverterCurrentOutputStreamDescription, .input(let queue)):
            return bytes(AudioStreamBasicDescription(queue.streamDescription))
        case (kAudioConverterCurrentInputStreamDescription, .input(let queue)):
            return bytes(AudioStreamBasicDescription(queue.sourceFormat ?? queue.streamDescription))
        case (kAudioConverterCurrentOutputStreamDescription, .output(let queue)):
            return bytes(AudioStreamBasicDescription(queue.outputFormat))
        case (kAudioQueueDeviceProperty_SampleRate, .output(let queue)):
            return bytes(Float64(queue.outputFormat.sampleRate))
        case (kAudioQueueDeviceProperty_SampleRate, .input(let queue)):
            return bytes(Float64((queue.sourceFormat ?? queue.streamDescription).sampleRate))
        case (kAudioQueueDeviceProperty_NumberChannels, .output(let queue)):
            return bytes(UInt32(queue.outputFormat.channelsPerFrame))
        case (kAudioQueueDeviceProperty_NumberChannels, .input(let queue)):
            return bytes(UInt32((queue.sourceFormat ?? queue.streamDescription).channelsPerFrame))
        case (kAudioQueueProperty_MagicCookie, .output(let queue)):
            return queue.magicCookie ?? []
        case (kAudioQueueProperty_MagicCookie, .input(let queue)), (kAudioConverterCompressionMagicCookie, .input(let queue)):
            return queue.magicCookie ?? []
        case (kAudioQueueProperty_MaximumOutputPacketSize, .input(let queue)),
             (kAudioConverterPropertyMaximumOutputPacketSize, .input(let queue)):
            return bytes(UInt32(clamping: queue.maximumPacketSize))
        case (kAudioQueueProperty_ChannelLayout, .output(let queue)):
            return channelLayoutBytes(queue.channelLayout)
        case (kAudioQueueProperty_ChannelLayout, .input(let queue)):
            return channelLayoutBytes(.default(channels: queue.streamDescription.channelsPerFrame))
        case (kAudioQueueProperty_EnableLevelMetering, .output(let queue)):
            return bytes(UInt32(queue.isLevelMeteringEnabled ? 1 : 0))
        case (kAudioQueueProperty_EnableLevelMetering, .input(let queue)):
            return bytes(UInt32(queue.isLevelMeteringEnabled ? 1 : 0))
        case (kAudioQueueProperty_CurrentLevelMeter, _), (kAudioQueueProperty_CurrentLevelMeterDB, _):
            var meters: [AudioLevelMeter]
            let channels: Int
            switch queue {
            case .output(let queue):
                meters = queue.currentLevelMeters
                channels = queue.outputFormat.channelsPerFrame
            case .input(let queue):
                meters = queue.currentLevelMeters
                channels = queue.streamDescription.channelsPerFrame
            }
            if id == kAudioQueueProperty_CurrentLevelMeterDB { meters = meters.map(\.decibels) }
            let silence: Float = id == kAudioQueueProperty_CurrentLevelMeterDB ? -120 : 0
            let states = (0..<max(channels, meters.count)).map { index -> AudioQueueLevelMeterState in
                guard index < meters.count else { return AudioQueueLevelMeterState(mAveragePower: silence, mPeakPower: silence) }
                return AudioQueueLevelMeterState(mAveragePower: meters[index].average, mPeakPower: meters[index].peak)
            }
            return states.withUnsafeBytes { Array($0) }
        case (kAudioQueueProperty_DecodeBufferSizeFrames, .output(let queue)):
            return bytes(UInt32(clamping: queue.decodeBufferFrames))
        case (kAudioQueueProperty_ConverterError, .output(let queue)):
            return bytes(Int32(queue.lastConverterError.map { $0.code.audioQueueStatus } ?? noErr))
        case (kAudioQueueProperty_EnableTimePitch, .output):
            return bytes(UInt32(state.withLock { $0.timePitchEnabled } ? 1 : 0))
        case (kAudioQueueProperty_TimePitchAlgorithm, .output):
            return bytes(state.withLock { $0.timePitchAlgorithm })
        case (kAudioQueueProperty_TimePitchBypass, .output(let queue)):
            return bytes(UInt32(queue.isTimePitchBypassed ? 1 : 0))
        default:
            throw StatusError(kAudioQueueErr_InvalidProperty, "no property \(fourCharacterCode(Int32(bitPattern: id))) on this queue")
        }
    }

    func setProperty(_ id: AudioQueuePropertyID, _ data: UnsafeRawPointer, _ size: UInt32) throws {
        func flag() throws -> Bool {
            guard let value = readProperty(UInt32.self, from: data, size: size) else {
                throw StatusError(kAudioQueueErr_InvalidPropertySize, "property \(fourCharacterCode(Int32(bitPattern: id))) is a UInt32")
            }
            return value != 0
        }
        switch (id, queue) {
        case (kAudioQueueProperty_MagicCookie, .output(let queue)):
            try queue.setMagicCookie(Array(UnsafeRawBufferPointer(start: data, count: Int(size))))
        case (kAudioQueueProperty_ChannelLayout, .output(let queue)):
            guard let layout = libraryChannelLayout(data, size: size, channels: queue.streamDescription.channelsPerFrame) else {
                throw StatusError(kAudioQueueErr_InvalidPropertyValue, "the channel layout does not describe \(queue.streamDescription.channelsPerFrame) channels")
            }
            try queue.setChannelLayout(layout)
        case (kAudioQueueProperty_EnableLevelMetering, .output(let queue)):
            queue.isLevelMeteringEnabled = try flag()
        case (kAudioQueueProperty_EnableLevelMetering, .input(let queue)):
            queue.setLevelMeteringEnabled(try flag())
        case (kAudioQueueProperty_EnableTimePitch, .output):
            let enabled = try flag()
            state.withLock { $0.timePitchEnabled = enabled }
            try applyTimePitch()
        case (kAudioQueueProperty_TimePitchAlgorithm, .output):
            guard let value = readProperty(UInt32.self, from: data, size: size) else {
                throw StatusError(kAudioQueueErr_InvalidPropertySize, "the algorithm is a UInt32")
            }
            guard [kAudioQueueTimePitchAlgorithm_Spectral, kAudioQueueTimePitchAlgorithm_TimeDomain,
                   kAudioQueueTimePitchAlgorithm_Varispeed].contains(value) else {
                throw StatusError(kAudioQueueErr_InvalidPropertyValue, "no time-pitch algorithm \(fourCharacterCode(Int32(bitPattern: value)))")
            }
            state.withLock { $0.timePitchAlgorithm = value }
            try applyTimePitch()
        case (kAudioQueueProperty_TimePitchBypass, .output(let queue)):
            queue.isTimePitchBypassed = try flag()
        case (kAudioQueueProperty_DecodeBufferSizeFrames, .output(let queue)):
            guard let frames = readProperty(UInt32.self, from: data, size: size) else {
                throw StatusError(kAudioQueueErr_InvalidPropertySize, "the decode buffer size is a UInt32")
            }
            // The library's queue has one decode-ahead size, chosen at creation.
            guard Int(frames) == queue.decodeBufferFrames else {
                throw StatusError(kAudioQueueErr_InvalidPropertyValue, "the decode buffer holds \(queue.decodeBufferFrames) frames and cannot change")
            }
        case (kAudioQueueProperty_IsRunning, _), (kAudioQueueProperty_StreamDescription, _), (kAudioQueueProperty_ConverterError, _),
             (kAudioQueueProperty_CurrentLevelMeter, _), (kAudioQueueProperty_CurrentLevelMeterDB, _):
            throw StatusError(kAudioQueueErr_InvalidPropertyValue, "property \(fourCharacterCode(Int32(bitPattern: id))) is read-only")
        default:
            throw StatusError(kAudioQueueErr_InvalidProperty, "no settable property \(fourCharacterCode(Int32(bitPattern: id))) on this queue")
        }
    }

    /// Turns the library's time-pitch on with the chosen algorithm, or off.
    private func applyTimePitch() throws {
        guard let queue = output else { return }
        let (enabled, algorithm) = state.withLock { ($0.timePitchEnabled, $0.timePitchAlgorithm) }
        guard enabled else { return try queue.setTimePitch(nil) }
        switch algorithm {
        case kAudioQueueTimePitchAlgorithm_Varispeed: try queue.setTimePitch(.varispeed)
        case kAudioQueueTimePitchAlgorithm_Spectral:
            // The spectral engine (Rubber Band) is GPL and not linked here: time-domain stands in
            // for it unless the program registered one.
            do { try queue.setTimePitch(.spectral) } catch let error as AudioQueueError where error.code == .codecNotFound {
                try queue.setTimePitch(.timeDomain)
            }
        default: try queue.setTimePitch(.timeDomain)
        }
    }
}

// MARK: time

/// The time being heard: `mSampleTime` on the queue's timeline; with a timeline, whether there
/// was a discontinuity (an underrun or a reset) since it last asked.
@discardableResult
public func AudioQueueGetCurrentTime(_ inAQ: AudioQueueRef, _ inTimeline: AudioQueueTimelineRef?,
                                     _ outTimeStamp: UnsafeMutablePointer<AudioTimeStamp>?,
                                     _ outTimelineDiscontinuity: UnsafeMutablePointer<DarwinBoolean>?) -> OSStatus {
    let object = QueueObject.from(inAQ)
    return queueStatus("AudioQueueGetCurrentTime") {
        let time: AudioQueueTime
        switch object.queue {
        case .output(let queue):
            let timeline = inTimeline.flatMap { ref in object.state.withLock { $0.timelines[UInt(bitPattern: ref)] } }
            if inTimeline != nil, timeline == nil {
                throw StatusError(kAudioQueueErr_InvalidParameter, "the timeline is not this queue's")
            }
            time = queue.currentTime(in: timeline)
        case .input(let queue): time = queue.currentTime()
        }
        if let outTimeStamp {
            var stamp = AudioTimeStamp()
            stamp.mSampleTime = Float64(time.sampleTime)
            stamp.mHostTime = AudioGetCurrentHostTime()
            stamp.mRateScalar = 1
            stamp.mFlags = [.sampleTimeValid, .hostTimeValid, .rateScalarValid]
            outTimeStamp.pointee = stamp
        }
        outTimelineDiscontinuity?.pointee = DarwinBoolean(time.discontinuity)
    }
}

/// The device's time now: the host time, and the frames the device has played at its rate.
@discardableResult
public func AudioQueueDeviceGetCurrentTime(_ inAQ: AudioQueueRef, _ outTimeStamp: UnsafeMutablePointer<AudioTimeStamp>) -> OSStatus {
    let object = QueueObject.from(inAQ)
    return queueStatus("AudioQueueDeviceGetCurrentTime") {
        var stamp = AudioTimeStamp()
        stamp.mHostTime = AudioGetCurrentHostTime()
        stamp.mRateScalar = 1
        stamp.mFlags = [.hostTimeValid, .rateScalarValid]
        if let queue = object.output {
            stamp.mSampleTime = Float64(queue.currentTime().sampleTime)
            stamp.mFlags.insert(.sampleTimeValid)
        }
        outTimeStamp.pointee = stamp
    }
}

/// Makes a timeline: an observer with its own discontinuity flag.
@discardableResult
public func AudioQueueCreateTimeline(_ inAQ: AudioQueueRef, _ outTimeline: UnsafeMutablePointer<AudioQueueTimelineRef?>) -> OSStatus {
    let object = QueueObject.from(inAQ)
    return queueStatus("AudioQueueCreateTimeline") {
        guard let queue = object.output else {
            throw StatusError(kAudioQueueErr_InvalidQueueType, "only an output queue has timelines")
        }
        let timeline = try queue.makeTimeline()
        let ref = OpaquePointer(Unmanaged.passUnretained(timeline).toOpaque())
        object.state.withLock { $0.timelines[UInt(bitPattern: ref)] = timeline }
        outTimeline.pointee = ref
    }
}

/// Disposes of a timeline.
@discardableResult
public func AudioQueueDisposeTimeline(_ inAQ: AudioQueueRef, _ inTimeline: AudioQueueTimelineRef) -> OSStatus {
    let object = QueueObject.from(inAQ)
    return queueStatus("AudioQueueDisposeTimeline") {
        let removed = object.state.withLock { $0.timelines.removeValue(forKey: UInt(bitPattern: inTimeline)) }
        guard removed != nil else { throw StatusError(kAudioQueueErr_InvalidParameter, "the timeline is not this queue's") }
    }
}

// MARK: offline rendering

/// Switches to rendering into memory in `inFormat` (linear PCM), or back to the device with nil.
@discardableResult
public func AudioQueueSetOfflineRenderFormat(_ inAQ: AudioQueueRef, _ inFormat: UnsafePointer<AudioStreamBasicDescription>?,
                                             _ inLayout: UnsafePointer<CoreAudioTypes.AudioChannelLayout>?) -> OSStatus {
    let object = QueueObject.from(inAQ)
    return queueStatus("AudioQueueSetOfflineRenderFormat") {
        guard let queue = object.output else {
            throw StatusError(kAudioQueueErr_InvalidQueueType, "only an output queue renders offline")
        }
        try queue.setOfflineRenderFormat(inFormat.map { $0.pointee.library })
    }
}

/// Renders `inNumberFrames` frames at `inTimestamp`'s sample time into `ioBuffer` (whose
/// `mAudioDataByteSize` gets the bytes rendered).
@discardableResult
public func AudioQueueOfflineRender(_ inAQ: AudioQueueRef, _ inTimestamp: UnsafePointer<AudioTimeStamp>,
                                    _ ioBuffer: AudioQueueBufferRef, _ inNumberFrames: UInt32) -> OSStatus {
    let object = QueueObject.from(inAQ)
    return queueStatus("AudioQueueOfflineRender") {
        guard let queue = object.output else {
            throw StatusError(kAudioQueueErr_InvalidQueueType, "only an output queue renders offline")
        }
        guard let record = object.record(for: ioBuffer) else {
            throw StatusError(kAudioQueueErr_InvalidBuffer, "the buffer is not one of this queue's")
        }
        _ = try queue.offlineRender(at: Int64(inTimestamp.pointee.mSampleTime), into: record.buffer, frames: Int(inNumberFrames))
        ioBuffer.pointee.mAudioDataByteSize = UInt32(clamping: record.buffer.byteSize)
    }
}
