import BufferQueue
import CPulseAudio

extension PulseAudioSink {
    /// The server's sinks (playback devices), the default one marked.
    /// - Parameter server: the server address; nil = the default server.
    /// - Throws: ``/BufferQueue/AudioQueueError/Code/cannotStart`` when no server answers.
    public static func devices(server: String? = nil) throws -> [AudioDeviceInfo] {
        try PulseDeviceList.fetch(server: server, sources: false)
    }
}

extension PulseAudioSource {
    /// The server's sources (capture devices), monitors of sinks included and marked, the default one marked.
    /// - Parameter server: the server address; nil = the default server.
    /// - Throws: ``/BufferQueue/AudioQueueError/Code/cannotStart`` when no server answers.
    public static func devices(server: String? = nil) throws -> [AudioDeviceInfo] {
        try PulseDeviceList.fetch(server: server, sources: true)
    }
}

/// Collects what libpulse's introspection callbacks report.
private final class PulseDeviceList {
    var defaultSink = ""
    var defaultSource = ""
    var devices: [AudioDeviceInfo] = []
    let connection: PulseConnection

    init(connection: PulseConnection) { self.connection = connection }

    func add(_ name: UnsafePointer<CChar>?, _ description: UnsafePointer<CChar>?, _ spec: pa_sample_spec, defaultName: String, isMonitor: Bool) {
        let name = name.map { String(cString: $0) } ?? ""
        devices.append(AudioDeviceInfo(name: name, description: description.map { String(cString: $0) } ?? name,
                                       sampleRate: Double(spec.rate), channels: Int(spec.channels),
                                       isDefault: name == defaultName, isMonitor: isMonitor))
    }

    static func fetch(server: String?, sources: Bool) throws -> [AudioDeviceInfo] {
        let connection = PulseConnection(server: server, applicationName: "BufferQueue", role: "music")
        defer { connection.disconnect() }
        try connection.connect()
        let list = PulseDeviceList(connection: connection)
        let me = Unmanaged.passUnretained(list).toOpaque()
        try connection.withLock {
            guard let context = connection.context else { throw AudioQueueError(.cannotStart, "not connected to PulseAudio") }
            let defaults = try connection.serverDefaults()
            list.defaultSink = defaults.sink
            list.defaultSource = defaults.source
            let gotList: Bool
            if sources {
                gotList = connection.await(pa_context_get_source_info_list(context, { _, info, eol, userdata in
                    guard let userdata else { return }
                    let list = Unmanaged<PulseDeviceList>.fromOpaque(userdata).takeUnretainedValue()
                    if eol == 0, let info {
                        list.add(info.pointee.name, info.pointee.description, info.pointee.sample_spec, defaultName: list.defaultSource,
                                 isMonitor: info.pointee.monitor_of_sink != UInt32.max)
                    }
                    list.connection.signal()
                }, me))
            } else {
                gotList = connection.await(pa_context_get_sink_info_list(context, { _, info, eol, userdata in
                    guard let userdata else { return }
                    let list = Unmanaged<PulseDeviceList>.fromOpaque(userdata).takeUnretainedValue()
                    if eol == 0, let info {
                        list.add(info.pointee.name, info.pointee.description, info.pointee.sample_spec, defaultName: list.defaultSink, isMonitor: false)
                    }
                    list.connection.signal()
                }, me))
            }
            guard gotList else {
                throw AudioQueueError(.sinkError, "the PulseAudio server did not list its devices: \(connection.lastError)")
            }
        }
        return list.devices
    }
}

/// The device a stream is connected to now (for reports); nil when unknown.
func pulseDeviceName(of stream: OpaquePointer) -> String? {
    if let name = pa_stream_get_device_name(stream) { return String(cString: name) }
    return nil
}
