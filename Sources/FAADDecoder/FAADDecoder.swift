import BufferQueue
import CFAAD2

/// An ``/BufferQueue/AudioDecoder`` for AAC-LC, HE-AAC (SBR) and HE-AAC v2 (PS) on libfaad2.
///
/// Configured from the magic cookie (the AudioSpecificConfig from an MP4 `esds`, a CAF `kuki`, or
/// the one `AudioFileStream` builds from an ADTS header). Output is float32 at the real output
/// rate: the first decoded frame decides (SBR and PS may only show up in-band), and a difference
/// from what the configuration said is announced as a format change before any frame of it.
///
/// Known libfaad2 habits it corrects: the first frame is no longer swallowed (so priming numbers
/// trim exactly); mono stays mono unless PS makes it stereo (the PS-enabled build up-mixes every
/// mono stream); plain low-rate AAC-LC is not doubled in rate by implicit-SBR guessing. Packets are
/// checked before libfaad2 sees them (libfaad2 2.10 has known CVEs): an empty or oversized packet,
/// or one it cannot decode, becomes silence of the packet's length and a converter error.
///
/// Licence: libfaad2 is GPL-2.0-or-later. A program that links this module is bound by the GPL:
/// the module opens libfaad2 (`dlopen`) when its first decoder is made, which for the GPL is the
/// same as linking it. The other modules of this package are MIT and never load it.
public final class FAADDecoder: AudioDecoder {
    public private(set) var outputFormat: AudioStreamDescription
    private var handle: NeAACDecHandle?
    private let config: [UInt8]
    private let declaredRate: Double
    private let coreIsMono: Bool
    private var noUpsampling = false
    private var firstFrame = true
    /// Largest access unit accepted: 6144 bits per channel for 8 channels.
    static let maximumPacketSize = 6144

    /// The registry entry: AAC-LC, HE-AAC, HE-AAC v2.
    /// libfaad2's needs. Pre-roll: 2 packets for AAC-LC (the MDCT overlaps one frame); 16 for
    /// HE-AAC and HE-AAC v2, whose SBR decoder starts exact only after the next SBR header and a
    /// few frames of settling (encoders repeat the header every few frames: fdk-aac every 10).
    /// Parallel pieces: AAC-LC joins bit-exactly — except bands coded with perceptual noise
    /// substitution, which libfaad2 fills from a random generator whose state runs on from the
    /// first frame (encode with `ffmpeg … -c:a aac -aac_pns 0` to avoid them; the parallel
    /// renderer's join check finds them); HE-AAC does not. Every packet decodes to a whole frame.
    public static let traits = AudioDecoderTraits(
        preRollPackets: { format in format.formatID == .aacLC ? 2 : 16 },
        parallelRefusal: { format in
            format.formatID == .aacLC ? nil
                : "\(format.formatID): FAAD2's SBR and parametric-stereo state does not converge to the same bits from another start"
        },
        // Every AAC frame decodes to 1024 frames (2048 with SBR), however short its sample says it is.
        decodesWholeFrames: true)

    /// The factory ``register(in:)`` adds: AAC-LC, HE-AAC and HE-AAC v2.
    public static let factory = AudioDecoderFactory(name: "libfaad2", formats: [.aacLC, .heAAC, .heAACv2], priority: 10, traits: traits) { format, cookie in
        try FAADDecoder(format: format, magicCookie: cookie)
    }

    /// Registers ``factory`` with a registry (the shared one by default).
    public static func register(in registry: AudioDecoderRegistry = .shared) { registry.register(factory) }

    /// Without a cookie, the config the stream description implies (``/BufferQueue/AACConfig/implied(by:)``),
    /// as Core Audio decodes AAC from its description alone.
    /// - Throws: ``/BufferQueue/AudioQueueError/Code/codecNotFound`` without a usable AudioSpecificConfig.
    public init(format: AudioStreamDescription, magicCookie: [UInt8]?) throws {
        let given = magicCookie?.isEmpty == false ? magicCookie : AACConfig.implied(by: format)
        guard let cookie = given, cookie.count >= 2, cookie.count <= 64 else {
            throw AudioQueueError(.codecNotFound, "AAC needs its AudioSpecificConfig as the magic cookie (got \(magicCookie?.count ?? 0) bytes), "
                + "or a stream description that implies one (this one: \(format.sampleRate) Hz, \(format.channelsPerFrame) channels)")
        }
        config = cookie
        declaredRate = format.sampleRate
        // Channel configuration: after the object type (5 bits, or 11 when escaped) and the rate index (4, or 28).
        var bits = cookie.reduce(UInt64(0)) { $0 << 8 | UInt64($1) } << UInt64(64 - 8 * min(cookie.count, 8))
        func take(_ n: Int) -> Int { defer { bits <<= UInt64(n) }; return Int(bits >> UInt64(64 - n)) }
        let objectType = take(5) == 31 ? 32 + take(6) : 0
        _ = objectType
        let rateIndex = take(4)
        if rateIndex == 15 { _ = take(24) }
        coreIsMono = take(4) == 1
        outputFormat = .float32(sampleRate: format.sampleRate, channels: coreIsMono ? 1 : max(format.channelsPerFrame, 1))
        try open()
    }

    deinit { if let handle { aq_NeAACDecClose(handle) } }

    private func open() throws {
        if let handle { aq_NeAACDecClose(handle) }
        try AudioQueueError.requireLibrary(aq_faad_load(), reason: aq_faad_error)
        guard let made = aq_NeAACDecOpen() else { throw AudioQueueError(.codecNotFound, "libfaad2 could not make a decoder") }
        handle = made
        if let configuration = aq_NeAACDecGetCurrentConfiguration(made) {
            configuration.pointee.outputFormat = UInt8(FAAD_FMT_FLOAT)
            configuration.pointee.defObjectType = UInt8(LC)
            configuration.pointee.dontUpSampleImplicitSBR = noUpsampling ? 1 : 0
            aq_NeAACDecSetConfiguration(made, configuration)
        }
        var rate: UInt = 0
        var channels: UInt8 = 0
        let result = config.withUnsafeBufferPointer { cookie in
            aq_NeAACDecInit2(made, UnsafeMutablePointer(mutating: cookie.baseAddress), UInt(cookie.count), &rate, &channels)
        }
        guard result == 0 else {
            throw AudioQueueError(.codecNotFound, "libfaad2 rejected the AudioSpecificConfig \(config.map { String($0, radix: 16) }.joined(separator: " "))")
        }
        // libfaad2 drops the first decoded frame unless told it follows a seek.
        aq_NeAACDecPostSeekReset(made, 1)
        firstFrame = true
    }

    public func decode(packet: UnsafeRawBufferPointer, frames: Int, into out: DecodedAudio) throws {
        guard let handle, let base = packet.baseAddress, !packet.isEmpty, packet.count <= Self.maximumPacketSize else {
            silence(frames, out, "an AAC packet of \(packet.count) bytes is outside 1...\(Self.maximumPacketSize)")
            return
        }
        var info = NeAACDecFrameInfo()
        var samples = aq_NeAACDecDecode(handle, &info, UnsafeMutablePointer(mutating: base.assumingMemoryBound(to: UInt8.self)), UInt(packet.count))
        if firstFrame && info.error == 0 && info.sbr == UInt8(NO_SBR_UPSAMPLED) && !noUpsampling {
            // Plain AAC-LC that libfaad2 doubled on the guess of implicit SBR: decode at the real rate.
            noUpsampling = true
            try open()
            guard let reopened = self.handle else { return }
            info = NeAACDecFrameInfo()
            samples = aq_NeAACDecDecode(reopened, &info, UnsafeMutablePointer(mutating: base.assumingMemoryBound(to: UInt8.self)), UInt(packet.count))
        }
        guard info.error == 0, let samples, info.channels > 0, info.samples > 0 else {
            let reason = info.error != 0 ? String(cString: aq_NeAACDecGetErrorMessage(info.error)) : "no samples"
            silence(frames, out, "libfaad2 could not decode a \(packet.count)-byte packet (\(reason))")
            return
        }
        firstFrame = false
        let channels = Int(info.channels)
        let frameCount = Int(info.samples) / channels
        let mono = coreIsMono && info.ps == 0 && channels == 2
        let format = AudioStreamDescription.float32(sampleRate: Double(info.samplerate), channels: mono ? 1 : channels)
        if format != outputFormat {
            outputFormat = format
            out.changeFormat(format)
        }
        let floats = samples.assumingMemoryBound(to: Float.self)
        if mono {
            // The PS-enabled build writes mono content to both channels: keep one.
            let space = out.reserve(frames: frameCount)
            for i in 0..<frameCount { space[i] = floats[2 * i] }
            out.commit(frames: frameCount)
        } else {
            out.append(UnsafeBufferPointer(start: floats, count: frameCount * channels))
        }
    }

    /// Silence for a packet that could not be decoded, at the output rate.
    private func silence(_ frames: Int, _ out: DecodedAudio, _ message: String) {
        let scale = max(Int((outputFormat.sampleRate / declaredRate).rounded()), 1)
        out.appendSilence(frames: frames * scale)
        out.reportError(AudioQueueError(.decoderError, message + "; \(frames * scale) frames of silence in its place"))
    }

    public func finish(into out: DecodedAudio) throws {
        reset()
    }

    public func reset() {
        if let handle { aq_NeAACDecPostSeekReset(handle, 1) }
        // A new run starts clean: reopen so no state carries over.
        try? open()
    }
}
