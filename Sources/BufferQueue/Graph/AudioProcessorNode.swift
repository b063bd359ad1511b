/// The render side of a node made in another module of this package (AVFAudio's player, source,
/// tap and effect nodes): it writes frames on request, pulling its one input where it has one.
///
/// It runs on the graph's render thread only, one render at a time (the node's claim), as every
/// node's render side does. Whether it may lock or allocate is its maker's contract: the nodes of
/// this module never do.
package protocol AudioNodeProcessor: AnyObject {
    /// Writes up to `frames` interleaved float32 frames of the node's format into `out` and says
    /// why it stopped short (``PullEnd/starved``: nothing now; ``PullEnd/boundary``: ended).
    func render(input: AudioNodeInput, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd)
}

/// What a processor pulls: its node's one input (none for a source), valid during one render.
package struct AudioNodeInput {
    let program: GraphProgram
    let node: AudioGraphNode

    /// Whether something is connected to the node's input.
    package var isConnected: Bool { program.inputs(of: node).count > 0 }

    /// Pulls up to `frames` frames of the input (in the node's format: an effect takes its own)
    /// into `out`; nothing connected gives `(0, .boundary)`.
    @inline(__always)
    package func pull(into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
        let inputs = program.inputs(of: node)
        guard inputs.count > 0 else { return (0, .boundary) }
        return program.pull(inputs.connections[0].source, into: out, frames: frames)
    }
}

/// A processor's place in the graph: hands the render to it with its input.
final class ProcessorRenderer: AudioNodeRenderer {
    private let processor: any AudioNodeProcessor

    init(processor: any AudioNodeProcessor) {
        self.processor = processor
    }

    func render(_ program: GraphProgram, node: AudioGraphNode, into out: UnsafeMutablePointer<Float>, frames: Int) -> (Int, PullEnd) {
        processor.render(input: AudioNodeInput(program: program, node: node), into: out, frames: frames)
    }
}

/// A source node whose frames a processor of another module writes (AVFAudio's player and
/// source nodes). It takes no input.
package final class AudioProcessorSourceNode: AudioNode {
    /// The node as its graph sees it.
    package let graphNode: AudioGraphNode

    /// A source named `name` of `channels` channels at `sampleRate`, rendered by `processor`
    /// (which the node owns from here on: its render side).
    package init(name: String, sampleRate: Double, channels: Int, processor: sending any AudioNodeProcessor) throws {
        graphNode = try AudioGraphNode(name: name, sampleRate: sampleRate, channels: channels, kind: .source,
                                       renderer: ProcessorRenderer(processor: processor))
    }
}

/// An effect node — one input of its own format — whose frames a processor of another module
/// writes (AVFAudio's taps, delay, reverb and output clock).
package final class AudioProcessorEffectNode: AudioEffectNode {
    /// The node as its graph sees it.
    package let graphNode: AudioGraphNode

    /// An effect named `name` of `channels` channels at `sampleRate`, rendered by `processor`
    /// (which the node owns from here on: its render side).
    package init(name: String, sampleRate: Double, channels: Int, processor: sending any AudioNodeProcessor) throws {
        graphNode = try AudioGraphNode(name: name, sampleRate: sampleRate, channels: channels, kind: .effect,
                                       renderer: ProcessorRenderer(processor: processor))
    }
}
