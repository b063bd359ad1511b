internal import BufferQueue
internal import PulseAudioSink
internal import ALSASink
internal import PipeWireSink
import Foundation

// A minimal HAL (CoreAudio's AudioHardware.h): the default output and input device, their names,
// nominal rates and channel counts, from the device lists of the sink and source that AQ_OUTPUT
// and AQ_INPUT choose. Object 1 is the system; 2 the default output device; 3 the default input.

enum Hardware {
    static let outputDevice: AudioObjectID = 2
    static let inputDevice: AudioObjectID = 3

    /// The device a queue would use now, as its sink or source lists it.
    static func device(_ id: AudioObjectID) -> AudioDeviceInfo? {
        switch id {
        case outputDevice:
            switch Device.output {
            case .null: return AudioDeviceInfo(name: "null", description: "Null output", sampleRate: 44100, channels: 2, isDefault: true)
            case .pipeWire(let target):
                let devices = (try? PipeWireSink.devices()) ?? []
                return devices.first { target == nil ? $0.isDefault : $0.name == target }
            case .pulse(let name):
                let devices = (try? PulseAudioSink.devices()) ?? []
                return devices.first { name == nil ? $0.isDefault : $0.name == name }
            case .alsa(let pcm):
                return ALSASink.devices().first { $0.name == pcm } ?? AudioDeviceInfo(name: pcm, description: "ALSA \(pcm)")
            }
        case inputDevice:
            switch Device.input {
            case .null, .alsa: return AudioDeviceInfo(name: "null", description: "Null input", sampleRate: 44100, channels: 2, isDefault: true)
            case .pipeWire(let target):
                let devices = (try? PipeWireSource.devices()) ?? []
                return devices.first { target == nil ? $0.isDefault : $0.name == target }
            case .pulse(let name):
                let devices = (try? PulseAudioSource.devices()) ?? []
                return devices.first { name == nil ? $0.isDefault : $0.name == name }
            }
        default: return nil
        }
    }

    static func value(_ object: AudioObjectID, _ address: AudioObjectPropertyAddress) throws -> [UInt8] {
        func bytes<T>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value) { Array($0) } }
        if object == AudioObjectID(kAudioObjectSystemObject) {
            switch address.mSelector {
            case kAudioHardwarePropertyDefaultOutputDevice, kAudioHardwarePropertyDefaultSystemOutputDevice:
                return bytes(outputDevice)
            case kAudioHardwarePropertyDefaultInputDevice: return bytes(inputDevice)
            case kAudioHardwarePropertyDevices: return [outputDevice, inputDevice].withUnsafeBytes { Array($0) }
            default: throw StatusError(kAudioHardwareUnknownPropertyError, "the system object has no property \(fourCharacterCode(Int32(bitPattern: address.mSelector)))")
            }
        }
        guard let device = device(object) else {
            throw StatusError(kAudioHardwareBadObjectError, "no audio object \(object) (1: system, 2: default output, 3: default input)")
        }
        let isInput = object == inputDevice
        switch address.mSelector {
        case kAudioDevicePropertyNominalSampleRate:
            return bytes(Float64(device.sampleRate > 0 ? device.sampleRate : 44100))
        case kAudioDevicePropertyDeviceUID, kAudioObjectPropertyName:
            let text = (address.mSelector == kAudioDevicePropertyDeviceUID ? device.name : device.description) as NSString
            return bytes(Unmanaged.passRetained(text).toOpaque())
        case kAudioDevicePropertyStreamConfiguration:
            // One buffer of the device's channels in the scope asked for, none in the other.
            let wanted = address.mScope == kAudioObjectPropertyScopeGlobal
                || (address.mScope == kAudioObjectPropertyScopeInput) == isInput
            let channels = UInt32(device.channels > 0 ? device.channels : 2)
            var list = [UInt8](repeating: 0, count: MemoryLayout<AudioBufferList>.size)
            list.withUnsafeMutableBytes { raw in
                raw.storeBytes(of: UInt32(wanted ? 1 : 0), toByteOffset: 0, as: UInt32.self)
                raw.storeBytes(of: wanted ? channels : 0, toByteOffset: MemoryLayout<AudioBufferList>.offset(of: \.mBuffers) ?? 8, as: UInt32.self)
            }
            return list
        case kAudioDevicePropertyDeviceIsAlive: return bytes(UInt32(1))
        default:
            throw StatusError(kAudioHardwareUnknownPropertyError, "device \(object) has no property \(fourCharacterCode(Int32(bitPattern: address.mSelector)))")
        }
    }
}

/// Whether the object has the property.
public func AudioObjectHasProperty(_ inObjectID: AudioObjectID, _ inAddress: UnsafePointer<AudioObjectPropertyAddress>) -> Bool {
    (try? Hardware.value(inObjectID, inAddress.pointee)) != nil
}

/// The size of a property's value.
@discardableResult
public func AudioObjectGetPropertyDataSize(_ inObjectID: AudioObjectID, _ inAddress: UnsafePointer<AudioObjectPropertyAddress>,
                                           _ inQualifierDataSize: UInt32, _ inQualifierData: UnsafeRawPointer?,
                                           _ outDataSize: UnsafeMutablePointer<UInt32>) -> OSStatus {
    hardwareStatus("AudioObjectGetPropertyDataSize") {
        outDataSize.pointee = UInt32(try Hardware.value(inObjectID, inAddress.pointee).count)
    }
}

/// Reads a property: the default devices, a device's nominal sample rate, name, UID and stream
/// configuration.
@discardableResult
public func AudioObjectGetPropertyData(_ inObjectID: AudioObjectID, _ inAddress: UnsafePointer<AudioObjectPropertyAddress>,
                                       _ inQualifierDataSize: UInt32, _ inQualifierData: UnsafeRawPointer?,
                                       _ ioDataSize: UnsafeMutablePointer<UInt32>, _ outData: UnsafeMutableRawPointer) -> OSStatus {
    hardwareStatus("AudioObjectGetPropertyData") {
        let value = try Hardware.value(inObjectID, inAddress.pointee)
        try writeValue(value, to: outData, size: ioDataSize, cut: false, badSize: kAudioHardwareBadPropertySizeError)
    }
}

/// Setting hardware properties is not supported: the devices belong to PulseAudio or ALSA.
@discardableResult
public func AudioObjectSetPropertyData(_ inObjectID: AudioObjectID, _ inAddress: UnsafePointer<AudioObjectPropertyAddress>,
                                       _ inQualifierDataSize: UInt32, _ inQualifierData: UnsafeRawPointer?,
                                       _ inDataSize: UInt32, _ inData: UnsafeRawPointer) -> OSStatus {
    hardwareStatus("AudioObjectSetPropertyData") {
        _ = try Hardware.value(inObjectID, inAddress.pointee)
        throw StatusError(kAudioHardwareUnsupportedOperationError, "hardware properties are read-only here: the devices belong to PulseAudio or ALSA")
    }
}
