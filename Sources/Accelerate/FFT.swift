// vDSP's radix-2 FFTs with Apple's C signatures, scaling and packing: a real FFT of N points done
// as a complex FFT of N/2, the spectrum packed as <vDSP.h> packs it (DC in realp[0], Nyquist in
// imagp[0]), forward results twice the DFT, inverse results unscaled.

/// The tables an FFT of up to 2^log2n points uses (`FFTSetup`), made by `vDSP_create_fftsetup`.
public typealias FFTSetup = OpaquePointer
/// The direction of a transform: `kFFTDirection_Forward` (+1) or `kFFTDirection_Inverse` (−1).
public typealias FFTDirection = Int32
/// The radix of a setup: only `kFFTRadix2` here.
public typealias FFTRadix = Int32

/// A forward transform: from time to frequency, with e^(−2πijk/N).
public var kFFTDirection_Forward: Int { 1 }
/// An inverse transform: from frequency to time, with e^(+2πijk/N), unscaled.
public var kFFTDirection_Inverse: Int { -1 }
/// `FFT_FORWARD`, the same as ``kFFTDirection_Forward``.
public var FFT_FORWARD: Int { 1 }
/// `FFT_INVERSE`, the same as ``kFFTDirection_Inverse``.
public var FFT_INVERSE: Int { -1 }
/// Radix 2: lengths that are powers of two.
public var kFFTRadix2: Int { 0 }
/// Radix 3 (lengths 3 × 2^n): not provided here; a setup of it is nil.
public var kFFTRadix3: Int { 1 }
/// Radix 5 (lengths 5 × 2^n): not provided here; a setup of it is nil.
public var kFFTRadix5: Int { 2 }
/// `FFT_RADIX2`, the same as ``kFFTRadix2``.
public var FFT_RADIX2: Int { 0 }

/// The twiddle factors of the largest transform a setup serves: cos and sin of 2πk/N for
/// k < N/2, computed in double precision.
final class FFTTables: Sendable {
    let log2n: Int
    let cosines: [Float]
    let sines: [Float]

    init(log2n: Int) {
        self.log2n = log2n
        let size = 1 << log2n
        let half = max(size / 2, 1)
        cosines = (0..<half).map { Float(cos(2 * Double.pi * Double($0) / Double(size))) }
        sines = (0..<half).map { Float(sin(2 * Double.pi * Double($0) / Double(size))) }
    }

    /// e^(sign × 2πi × k / 2^log2) as (cos, sin), for a transform of 2^log2 ≤ 2^log2n points.
    @inline(__always) func twiddle(_ k: Int, log2: Int, sign: Float) -> (Float, Float) {
        let index = k << (log2n - log2)
        return (cosines[index], sign * sines[index])
    }

    /// An unscaled complex FFT of 2^log2m points in place, with e^(sign × 2πijk/M).
    func complexFFT(_ re: UnsafeMutablePointer<Float>, _ im: UnsafeMutablePointer<Float>, stride: Int, log2m: Int, sign: Float) {
        let count = 1 << log2m
        guard count > 1 else { return }
        var reversed = 0
        for index in 1..<count {
            var bit = count >> 1
            while reversed & bit != 0 {
                reversed ^= bit
                bit >>= 1
            }
            reversed ^= bit
            if index < reversed {
                swap(&re[index * stride], &re[reversed * stride])
                swap(&im[index * stride], &im[reversed * stride])
            }
        }
        var log2size = 1
        while log2size <= log2m {
            let size = 1 << log2size, half = size >> 1
            for start in Swift.stride(from: 0, to: count, by: size) {
                for k in 0..<half {
                    let (c, s) = twiddle(k, log2: log2size, sign: sign)
                    let a = (start + k) * stride, b = (start + k + half) * stride
                    let tr = re[b] * c - im[b] * s, ti = re[b] * s + im[b] * c
                    re[b] = re[a] - tr
                    im[b] = im[a] - ti
                    re[a] += tr
                    im[a] += ti
                }
            }
            log2size += 1
        }
    }
}

@inline(__always) private func tables(_ setup: FFTSetup) -> FFTTables {
    Unmanaged<FFTTables>.fromOpaque(UnsafeRawPointer(setup)).takeUnretainedValue()
}

/// A setup for FFTs of up to 2^`Log2n` points (`vDSP_create_fftsetup`); nil for a radix other
/// than 2 or more than 2^24 points. Free it with `vDSP_destroy_fftsetup`. It is only read by the
/// transforms, so one setup serves several threads at once.
public func vDSP_create_fftsetup(_ Log2n: vDSP_Length, _ Radix: FFTRadix) -> FFTSetup? {
    guard Radix == FFTRadix(kFFTRadix2), Log2n <= 24 else { return nil }
    return FFTSetup(Unmanaged.passRetained(FFTTables(log2n: Int(Log2n))).toOpaque())
}

/// Frees a setup (`vDSP_destroy_fftsetup`); nil is ignored.
public func vDSP_destroy_fftsetup(_ setupToFree: FFTSetup?) {
    guard let setup = setupToFree else { return }
    Unmanaged<FFTTables>.fromOpaque(UnsafeRawPointer(setup)).release()
}

/// An in-place complex FFT of 2^`Log2N` points (`vDSP_fft_zip`): forward
/// X[k] = Σ x[j] e^(−2πijk/N), inverse with e^(+2πijk/N); neither is scaled.
public func vDSP_fft_zip(_ Setup: FFTSetup, _ C: UnsafePointer<DSPSplitComplex>, _ IC: vDSP_Stride,
                         _ Log2N: vDSP_Length, _ Direction: FFTDirection) {
    let setup = tables(Setup)
    precondition(Int(Log2N) <= setup.log2n, "vDSP_fft_zip: the setup serves at most 2^\(setup.log2n) points")
    setup.complexFFT(C.pointee.realp, C.pointee.imagp, stride: IC, log2m: Int(Log2N), sign: -Float(Direction))
}

/// An in-place real FFT of N = 2^`Log2N` points (`vDSP_fft_zrip`), packed as Apple packs it.
///
/// Forward: the signal goes in as pairs (x[2j] in `realp[j]`, x[2j+1] in `imagp[j]`, as
/// `vDSP_ctoz` with stride 2 puts it), and out come twice the DFT's values: `realp[0]` = 2 X[0],
/// `imagp[0]` = 2 X[N/2] (both real), `realp[k]` + i `imagp[k]` = 2 X[k] for 0 < k < N/2.
/// Inverse: the packed spectrum goes in, and out come the pairs of Σ X[k] e^(+2πijk/N), unscaled,
/// so a forward and an inverse transform return the signal times 2N.
public func vDSP_fft_zrip(_ Setup: FFTSetup, _ C: UnsafePointer<DSPSplitComplex>, _ IC: vDSP_Stride,
                          _ Log2N: vDSP_Length, _ Direction: FFTDirection) {
    let setup = tables(Setup)
    let log2n = Int(Log2N)
    precondition(log2n <= setup.log2n, "vDSP_fft_zrip: the setup serves at most 2^\(setup.log2n) points")
    guard log2n >= 1 else { return }
    let re = C.pointee.realp, im = C.pointee.imagp, stride = IC
    let half = 1 << (log2n - 1)
    if Direction == FFTDirection(kFFTDirection_Forward) {
        setup.complexFFT(re, im, stride: stride, log2m: log2n - 1, sign: -1)
        let (r0, i0) = (re[0], im[0])
        re[0] = 2 * (r0 + i0)
        im[0] = 2 * (r0 - i0)
        // Each pair k, N/2 − k from Z[k] and Z[N/2 − k]: 2X[k] = A − i W^k B, with
        // A = Z[k] + conj(Z[N/2−k]), B = Z[k] − conj(Z[N/2−k]), W = e^(−2πi/N).
        var k = 1
        while k <= half - k {
            let mk = half - k
            let (zr, zi, yr, yi) = (re[k * stride], im[k * stride], re[mk * stride], im[mk * stride])
            let (c, s) = setup.twiddle(k, log2: log2n, sign: -1)
            let (ar, ai, br, bi) = (zr + yr, zi - yi, zr - yr, zi + yi)
            let (wbr, wbi) = (c * br - s * bi, c * bi + s * br)
            re[k * stride] = ar + wbi
            im[k * stride] = ai - wbr
            if mk != k {
                // The same for N/2 − k, whose twiddle W^(N/2−k) = −conj(W^k) = (−c, s).
                let (ar2, ai2, br2, bi2) = (yr + zr, yi - zi, yr - zr, yi + zi)
                let (wbr2, wbi2) = (-c * br2 - s * bi2, -c * bi2 + s * br2)
                re[mk * stride] = ar2 + wbi2
                im[mk * stride] = ai2 - wbr2
            }
            k += 1
        }
    } else {
        let (h0, hm) = (re[0], im[0])
        re[0] = h0 + hm
        im[0] = h0 - hm
        // Z[k] = (X[k] + conj(X[N/2−k])) + i (X[k] − conj(X[N/2−k])) e^(+2πik/N).
        var k = 1
        while k <= half - k {
            let mk = half - k
            let (xr, xi, yr, yi) = (re[k * stride], im[k * stride], re[mk * stride], im[mk * stride])
            let (c, s) = setup.twiddle(k, log2: log2n, sign: 1)
            let (er, ei, dr, di) = (xr + yr, xi - yi, xr - yr, xi + yi)
            let (or, oi) = (dr * c - di * s, dr * s + di * c)
            re[k * stride] = er - oi
            im[k * stride] = ei + or
            if mk != k {
                let (er2, ei2, dr2, di2) = (yr + xr, yi - xi, yr - xr, yi + xi)
                let (or2, oi2) = (-dr2 * c - di2 * s, dr2 * s - di2 * c)
                re[mk * stride] = er2 - oi2
                im[mk * stride] = ei2 + or2
            }
            k += 1
        }
        setup.complexFFT(re, im, stride: stride, log2m: log2n - 1, sign: 1)
    }
}
