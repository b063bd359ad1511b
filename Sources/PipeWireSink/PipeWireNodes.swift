import BufferQueue
import CPipeWire

/// An audio node of a PipeWire server: a device's sink or source, or another program's stream.
public struct PipeWireNode: Sendable, Hashable {
    /// The server's id of the node (changes when the node is made again).
    public var id: UInt32
    /// `node.name`: what ``PipeWireSink/Configuration-swift.struct/target`` takes.
    public var name: String
    /// `node.description` (or the stream's `media.name`).
    public var description: String
    /// `media.class`: `Audio/Sink`, `Audio/Source`, `Stream/Output/Audio`…
    public var mediaClass: String
    /// The node's channel count and rate where it says them (0 otherwise).
    public var channels: Int
    /// The node's rate where it says it (0 otherwise).
    public var sampleRate: Double
    /// Whether the session manager's `default` metadata names it as the default sink or source.
    public var isDefault: Bool
}

extension PipeWireSink {
    /// The audio nodes of the server at `remote` (see ``Configuration-swift.struct/remote``).
    /// - Throws: when libpipewire cannot be opened or no server answers within `timeout`.
    public static func nodes(remote: String? = nil, timeout: Duration = .seconds(2)) throws -> [PipeWireNode] {
        var message = [CChar](repeating: 0, count: 512)
        let milliseconds = Int32(Self.milliseconds(timeout))
        guard let connection = aq_pw_connect(remote, "BufferQueue", milliseconds, &message, message.count) else {
            throw AudioQueueError(.sinkError, String(nulTerminated: message))
        }
        defer { aq_pw_disconnect(connection) }
        var found: [PipeWireNode] = []
        let count = withUnsafeMutablePointer(to: &found) { list in
            aq_pw_list_nodes(connection, { context, id, name, description, mediaClass, channels, rate, isDefault in
                guard let context else { return }
                let list = context.assumingMemoryBound(to: [PipeWireNode].self)
                list.pointee.append(PipeWireNode(id: id, name: name.map { String(cString: $0) } ?? "",
                                                 description: description.map { String(cString: $0) } ?? "",
                                                 mediaClass: mediaClass.map { String(cString: $0) } ?? "",
                                                 channels: Int(channels), sampleRate: Double(rate), isDefault: isDefault != 0))
            }, list, milliseconds)
        }
        guard count >= 0 else { throw AudioQueueError(.sinkError, "the PipeWire server at \(place(remote)) did not list its nodes within \(timeout)") }
        return found
    }

    /// The server's sinks, as the other sink modules list their devices.
    public static func devices(remote: String? = nil) throws -> [AudioDeviceInfo] {
        try nodes(remote: remote).filter { $0.mediaClass == "Audio/Sink" }.map {
            AudioDeviceInfo(name: $0.name, description: $0.description, sampleRate: $0.sampleRate, channels: $0.channels, isDefault: $0.isDefault)
        }
    }
}
