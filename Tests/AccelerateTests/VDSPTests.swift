import Accelerate
import Testing

/// vDSP's functions as Apple documents them, called as code written for a Mac calls them: the
/// results against plain references — exact where Apple's are exact (arithmetic, conversions,
/// maxima), and the FFTs against a DFT computed in double precision, with Apple's scaling and packing.
@Suite struct VDSPTests {
    /// Deterministic samples in −1...1.
    static func noise(_ count: Int, seed: UInt64 = 7) -> [Float] {
        var state = seed
        return (0..<count).map { _ in
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return Float(Int64(bitPattern: state >> 11) % 2_000_001 - 1_000_000) / 1_000_000
        }
    }

    @Test func levelsOfAVector() {
        let x: [Float] = [0.5, -0.75, 0.25, 1.0, -0.125, 0.0, -1.5, 0.375]
        var result: Float = 0
        vDSP_maxv(x, 1, &result, vDSP_Length(x.count))
        #expect(result == 1.0)
        vDSP_maxmgv(x, 1, &result, vDSP_Length(x.count))
        #expect(result == 1.5)
        vDSP_meanv(x, 1, &result, vDSP_Length(x.count))
        #expect(result == Float(x.map(Double.init).reduce(0, +) / 8))
        vDSP_rmsqv(x, 1, &result, vDSP_Length(x.count))
        #expect(result == Float((x.map { Double($0) * Double($0) }.reduce(0, +) / 8).squareRoot()))
        // Every other element (a stride of 2): 0.5, 0.25, -0.125, -1.5.
        vDSP_maxv(x, 2, &result, 4)
        #expect(result == 0.5)
        vDSP_maxmgv(x, 2, &result, 4)
        #expect(result == 1.5)
        // No elements.
        vDSP_maxv(x, 1, &result, 0)
        #expect(result == -.infinity)
        vDSP_meanv(x, 1, &result, 0)
        #expect(result == 0)
    }

    @Test func arithmeticIsExact() {
        let a = Self.noise(64, seed: 1), b = Self.noise(64, seed: 2)
        var c = [Float](repeating: 0, count: 64)
        var gain: Float = 0.25
        vDSP_vsmul(a, 1, &gain, &c, 1, 64)
        #expect(c == a.map { $0 * 0.25 })
        vDSP_vadd(a, 1, b, 1, &c, 1, 64)
        #expect(c == zip(a, b).map { $0 + $1 })
        vDSP_vmul(a, 1, b, 1, &c, 1, 64)
        #expect(c == zip(a, b).map { $0 * $1 })
        // In place, and into every other element.
        var d = a
        vDSP_vsmul(d, 1, &gain, &d, 1, 64)
        #expect(d == a.map { $0 * 0.25 })
        var e = [Float](repeating: 9, count: 8)
        vDSP_vclr(&e, 2, 4)
        #expect(e == [0, 9, 0, 9, 0, 9, 0, 9])
        var fill: Float = -3
        vDSP_vfill(&fill, &e, 1, 3)
        #expect(e == [-3, -3, -3, 9, 0, 9, 0, 9])
    }

    @Test func sixteenBitConversions() {
        let ints: [Int16] = [-32768, -1, 0, 1, 32767]
        var floats = [Float](repeating: 0, count: 5)
        vDSP_vflt16(ints, 1, &floats, 1, 5)
        #expect(floats == [-32768, -1, 0, 1, 32767])
        let values: [Float] = [1.9, -1.9, 32767.9, 40000, -40000, .nan, 0.49]
        var fixed = [Int16](repeating: 7, count: values.count)
        vDSP_vfix16(values, 1, &fixed, 1, vDSP_Length(values.count))
        #expect(fixed == [1, -1, 32767, 32767, -32768, 0, 0])
    }

    /// X[k] = Σ x[j] e^(sign 2πijk/N), in double precision.
    static func dft(re: [Double], im: [Double], sign: Double) -> (re: [Double], im: [Double]) {
        let count = re.count
        var outRe = [Double](repeating: 0, count: count), outIm = [Double](repeating: 0, count: count)
        for k in 0..<count {
            for j in 0..<count {
                let angle = sign * 2 * Double.pi * Double((j * k) % count) / Double(count)
                outRe[k] += re[j] * cos(angle) - im[j] * sin(angle)
                outIm[k] += re[j] * sin(angle) + im[j] * cos(angle)
            }
        }
        return (outRe, outIm)
    }

    /// The real signal `x` as pairs (`vDSP_ctoz`, stride 2), transformed forward by `vDSP_fft_zrip`.
    static func forwardRealFFT(_ x: [Float], setup: FFTSetup, log2n: vDSP_Length) -> (realp: [Float], imagp: [Float]) {
        let half = x.count / 2
        var realp = [Float](repeating: 0, count: half), imagp = [Float](repeating: 0, count: half)
        realp.withUnsafeMutableBufferPointer { rp in
            imagp.withUnsafeMutableBufferPointer { ip in
                var split = DSPSplitComplex(realp: rp.baseAddress!, imagp: ip.baseAddress!)
                x.withUnsafeBufferPointer { input in
                    input.baseAddress!.withMemoryRebound(to: DSPComplex.self, capacity: half) {
                        vDSP_ctoz($0, 2, &split, 1, vDSP_Length(half))
                    }
                }
                vDSP_fft_zrip(setup, &split, 1, log2n, FFTDirection(kFFTDirection_Forward))
            }
        }
        return (realp, imagp)
    }

    @Test func realFFTIsTwiceTheDFTPackedAsApplePacksIt() throws {
        let log2n: vDSP_Length = 10, n = 1 << 10
        let x = Self.noise(n)
        let setup = try #require(vDSP_create_fftsetup(log2n, FFTRadix(kFFTRadix2)))
        defer { vDSP_destroy_fftsetup(setup) }
        var (realp, imagp) = Self.forwardRealFFT(x, setup: setup, log2n: log2n)
        let reference = Self.dft(re: x.map(Double.init), im: [Double](repeating: 0, count: n), sign: -1)
        let scale = reference.re.map(abs).max()! * 2
        var worst = abs(Double(realp[0]) - 2 * reference.re[0]) / scale
        worst = max(worst, abs(Double(imagp[0]) - 2 * reference.re[n / 2]) / scale)
        for k in 1..<(n / 2) {
            worst = max(worst, abs(Double(realp[k]) - 2 * reference.re[k]) / scale, abs(Double(imagp[k]) - 2 * reference.im[k]) / scale)
        }
        #expect(worst < 2e-6, "largest error \(worst) of the largest value")

        // The inverse of the packed spectrum is the signal times 2N, as pairs.
        var back = [Float](repeating: 0, count: n)
        realp.withUnsafeMutableBufferPointer { rp in
            imagp.withUnsafeMutableBufferPointer { ip in
                var split = DSPSplitComplex(realp: rp.baseAddress!, imagp: ip.baseAddress!)
                vDSP_fft_zrip(setup, &split, 1, log2n, FFTDirection(kFFTDirection_Inverse))
                back.withUnsafeMutableBufferPointer { output in
                    output.baseAddress!.withMemoryRebound(to: DSPComplex.self, capacity: n / 2) {
                        vDSP_ztoc(&split, 1, $0, 2, vDSP_Length(n / 2))
                    }
                }
            }
        }
        var scaleBack = 1 / Float(2 * n)
        vDSP_vsmul(back, 1, &scaleBack, &back, 1, vDSP_Length(n))
        let roundTrip = zip(back, x).map { abs($0 - $1) }.max()!
        #expect(roundTrip < 1e-5, "round trip error \(roundTrip)")
    }

    @Test func dcAndNyquistArePackedIntoTheFirstPair() throws {
        let setup = try #require(vDSP_create_fftsetup(3, FFTRadix(kFFTRadix2)))
        defer { vDSP_destroy_fftsetup(setup) }
        for (signal, dc, nyquist) in [([Float](repeating: 1, count: 8), Float(16), Float(0)),
                                      ([1, -1, 1, -1, 1, -1, 1, -1], 0, 16)] {
            var realp = stride(from: 0, to: 8, by: 2).map { signal[$0] }
            var imagp = stride(from: 1, to: 8, by: 2).map { signal[$0] }
            realp.withUnsafeMutableBufferPointer { rp in
                imagp.withUnsafeMutableBufferPointer { ip in
                    var split = DSPSplitComplex(realp: rp.baseAddress!, imagp: ip.baseAddress!)
                    vDSP_fft_zrip(setup, &split, 1, 3, FFTDirection(FFT_FORWARD))
                }
            }
            #expect(realp[0] == dc && imagp[0] == nyquist)
            #expect(realp[1...].allSatisfy { abs($0) < 1e-6 } && imagp[1...].allSatisfy { abs($0) < 1e-6 }, "\(realp) \(imagp)")
        }
    }

    @Test func aSineLandsInItsBin() throws {
        // 4096 points at 48 kHz; a sine of amplitude 0.5 exactly on bin 100 (1171.875 Hz).
        let n = 4096, bin = 100
        let x = (0..<n).map { Float(0.5 * sin(2 * Double.pi * Double(bin * $0) / Double(n))) }
        let setup = try #require(vDSP_create_fftsetup(12, FFTRadix(kFFTRadix2)))
        defer { vDSP_destroy_fftsetup(setup) }
        let (realp, imagp) = Self.forwardRealFFT(x, setup: setup, log2n: 12)
        var magnitudes = [Float](repeating: 0, count: n / 2)
        for k in 1..<(n / 2) { magnitudes[k] = sqrtf(realp[k] * realp[k] + imagp[k] * imagp[k]) }
        var peak: Float = 0
        vDSP_maxv(magnitudes, 1, &peak, vDSP_Length(n / 2))
        #expect(magnitudes.firstIndex(of: peak) == bin)
        // 2 × (N/2 × amplitude) = N × amplitude.
        #expect(abs(peak - Float(n) * 0.5) < 0.01, "\(peak)")
    }

    @Test func complexFFTIsTheUnscaledDFT() throws {
        let n = 256
        let re0 = Self.noise(n, seed: 3), im0 = Self.noise(n, seed: 4)
        var re = re0, im = im0
        let setup = try #require(vDSP_create_fftsetup(8, FFTRadix(kFFTRadix2)))
        defer { vDSP_destroy_fftsetup(setup) }
        re.withUnsafeMutableBufferPointer { rp in
            im.withUnsafeMutableBufferPointer { ip in
                var split = DSPSplitComplex(realp: rp.baseAddress!, imagp: ip.baseAddress!)
                vDSP_fft_zip(setup, &split, 1, 8, FFTDirection(kFFTDirection_Forward))
            }
        }
        let reference = Self.dft(re: re0.map(Double.init), im: im0.map(Double.init), sign: -1)
        let scale = reference.re.map(abs).max()!
        let worst = (0..<n).map { max(abs(Double(re[$0]) - reference.re[$0]), abs(Double(im[$0]) - reference.im[$0])) / scale }.max()!
        #expect(worst < 2e-6, "\(worst)")
        re.withUnsafeMutableBufferPointer { rp in
            im.withUnsafeMutableBufferPointer { ip in
                var split = DSPSplitComplex(realp: rp.baseAddress!, imagp: ip.baseAddress!)
                vDSP_fft_zip(setup, &split, 1, 8, FFTDirection(kFFTDirection_Inverse))
            }
        }
        let back = (0..<n).map { max(abs(re[$0] / Float(n) - re0[$0]), abs(im[$0] / Float(n) - im0[$0])) }.max()!
        #expect(back < 1e-5, "\(back)")
    }

    @Test func onlyRadixTwoSetupsAreMade() {
        #expect(vDSP_create_fftsetup(10, FFTRadix(kFFTRadix3)) == nil)
        #expect(vDSP_create_fftsetup(25, FFTRadix(kFFTRadix2)) == nil)
        vDSP_destroy_fftsetup(nil)
    }
}
