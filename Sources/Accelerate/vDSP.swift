// The vDSP functions audio code calls most, with Apple's C signatures (as Swift imports them from
// <vDSP.h>), so that code written for a Mac or iOS — levels, gains, sample conversion, spectra —
// compiles and runs unchanged on Linux. Plain Swift, no C library.
//
// As on a Mac, where `import Accelerate` brings Darwin's C library with it, `import Accelerate`
// brings the C library's math (`sqrtf`, `log10f`, `cos`).
#if canImport(Glibc)
@_exported import Glibc
#elseif canImport(Musl)
@_exported import Musl
#elseif canImport(Darwin)
@_exported import Darwin
#endif

/// A count of elements (`vDSP_Length`, C's `unsigned long`).
public typealias vDSP_Length = UInt
/// A distance between elements, in elements (`vDSP_Stride`, C's `long`); negative walks backwards.
public typealias vDSP_Stride = Int

/// One complex value, its parts side by side (`DSPComplex`).
public struct DSPComplex: Sendable, Equatable {
    /// The real part.
    public var real: Float
    /// The imaginary part.
    public var imag: Float
    /// Zero.
    public init() { real = 0; imag = 0 }
    /// The value `real` + i `imag`.
    public init(real: Float, imag: Float) {
        self.real = real
        self.imag = imag
    }
}

/// Complex values as two arrays, of real and of imaginary parts (`DSPSplitComplex`). The caller
/// owns both arrays.
public struct DSPSplitComplex {
    /// The real parts.
    public var realp: UnsafeMutablePointer<Float>
    /// The imaginary parts.
    public var imagp: UnsafeMutablePointer<Float>
    /// Split complex values in these two arrays.
    public init(realp: UnsafeMutablePointer<Float>, imagp: UnsafeMutablePointer<Float>) {
        self.realp = realp
        self.imagp = imagp
    }
}

/// The element `index` of a strided vector.
@inline(__always) private func at(_ index: Int, _ stride: vDSP_Stride) -> Int { index * stride }

/// The largest element of `A` (–infinity when `N` is 0) (`vDSP_maxv`).
public func vDSP_maxv(_ A: UnsafePointer<Float>, _ IA: vDSP_Stride, _ C: UnsafeMutablePointer<Float>, _ N: vDSP_Length) {
    var largest = -Float.infinity
    for index in 0..<Int(N) { largest = max(largest, A[at(index, IA)]) }
    C.pointee = largest
}

/// The largest magnitude of the elements of `A` (0 when `N` is 0) (`vDSP_maxmgv`).
public func vDSP_maxmgv(_ A: UnsafePointer<Float>, _ IA: vDSP_Stride, _ C: UnsafeMutablePointer<Float>, _ N: vDSP_Length) {
    var largest: Float = 0
    for index in 0..<Int(N) { largest = max(largest, abs(A[at(index, IA)])) }
    C.pointee = largest
}

/// The mean of the elements of `A` (0 when `N` is 0), summed in double precision (`vDSP_meanv`).
public func vDSP_meanv(_ A: UnsafePointer<Float>, _ IA: vDSP_Stride, _ C: UnsafeMutablePointer<Float>, _ N: vDSP_Length) {
    guard N > 0 else { C.pointee = 0; return }
    var sum = 0.0
    for index in 0..<Int(N) { sum += Double(A[at(index, IA)]) }
    C.pointee = Float(sum / Double(N))
}

/// The root mean square of the elements of `A` (0 when `N` is 0), summed in double precision
/// (`vDSP_rmsqv`).
public func vDSP_rmsqv(_ A: UnsafePointer<Float>, _ IA: vDSP_Stride, _ C: UnsafeMutablePointer<Float>, _ N: vDSP_Length) {
    guard N > 0 else { C.pointee = 0; return }
    var sum = 0.0
    for index in 0..<Int(N) {
        let value = Double(A[at(index, IA)])
        sum += value * value
    }
    C.pointee = Float((sum / Double(N)).squareRoot())
}

/// `C` = `A` × the scalar `B` (`vDSP_vsmul`); `C` may be `A`.
public func vDSP_vsmul(_ A: UnsafePointer<Float>, _ IA: vDSP_Stride, _ B: UnsafePointer<Float>,
                       _ C: UnsafeMutablePointer<Float>, _ IC: vDSP_Stride, _ N: vDSP_Length) {
    let scalar = B.pointee
    for index in 0..<Int(N) { C[at(index, IC)] = A[at(index, IA)] * scalar }
}

/// `C` = `A` + `B`, element by element (`vDSP_vadd`); `C` may be either input.
public func vDSP_vadd(_ A: UnsafePointer<Float>, _ IA: vDSP_Stride, _ B: UnsafePointer<Float>, _ IB: vDSP_Stride,
                      _ C: UnsafeMutablePointer<Float>, _ IC: vDSP_Stride, _ N: vDSP_Length) {
    for index in 0..<Int(N) { C[at(index, IC)] = A[at(index, IA)] + B[at(index, IB)] }
}

/// `C` = `A` × `B`, element by element (`vDSP_vmul`); `C` may be either input.
public func vDSP_vmul(_ A: UnsafePointer<Float>, _ IA: vDSP_Stride, _ B: UnsafePointer<Float>, _ IB: vDSP_Stride,
                      _ C: UnsafeMutablePointer<Float>, _ IC: vDSP_Stride, _ N: vDSP_Length) {
    for index in 0..<Int(N) { C[at(index, IC)] = A[at(index, IA)] * B[at(index, IB)] }
}

/// Sets `N` elements of `C` to zero (`vDSP_vclr`).
public func vDSP_vclr(_ C: UnsafeMutablePointer<Float>, _ IC: vDSP_Stride, _ N: vDSP_Length) {
    for index in 0..<Int(N) { C[at(index, IC)] = 0 }
}

/// Sets `N` elements of `C` to the scalar `A` (`vDSP_vfill`).
public func vDSP_vfill(_ A: UnsafePointer<Float>, _ C: UnsafeMutablePointer<Float>, _ IC: vDSP_Stride, _ N: vDSP_Length) {
    let value = A.pointee
    for index in 0..<Int(N) { C[at(index, IC)] = value }
}

/// 16-bit integers to floats, exactly: −32768 becomes −32768.0 (`vDSP_vflt16`; scale with
/// `vDSP_vsmul` for ±1.0).
public func vDSP_vflt16(_ A: UnsafePointer<Int16>, _ IA: vDSP_Stride, _ C: UnsafeMutablePointer<Float>,
                        _ IC: vDSP_Stride, _ N: vDSP_Length) {
    for index in 0..<Int(N) { C[at(index, IC)] = Float(A[at(index, IA)]) }
}

/// Floats to 16-bit integers, rounding toward zero as Apple's does (`vDSP_vfix16`). A value out of
/// range is clamped to −32768...32767 and NaN becomes 0, where Apple leaves the result undefined.
public func vDSP_vfix16(_ A: UnsafePointer<Float>, _ IA: vDSP_Stride, _ C: UnsafeMutablePointer<Int16>,
                        _ IC: vDSP_Stride, _ N: vDSP_Length) {
    for index in 0..<Int(N) {
        let value = A[at(index, IA)]
        C[at(index, IC)] = value.isNaN ? 0 : Int16(min(max(value, -32768), 32767).rounded(.towardZero))
    }
}

/// Interleaved complex values (`C`, stride `IC` in floats: 2 for adjacent values) to split
/// complex ones (`vDSP_ctoz`); what a real FFT takes, with `C` the real signal seen as pairs.
public func vDSP_ctoz(_ C: UnsafePointer<DSPComplex>, _ IC: vDSP_Stride, _ Z: UnsafePointer<DSPSplitComplex>,
                      _ IZ: vDSP_Stride, _ N: vDSP_Length) {
    let split = Z.pointee
    C.withMemoryRebound(to: Float.self, capacity: 1) { floats in
        for index in 0..<Int(N) {
            split.realp[at(index, IZ)] = floats[index * IC]
            split.imagp[at(index, IZ)] = floats[index * IC + 1]
        }
    }
}

/// Split complex values to interleaved ones (`C`, stride `IC` in floats) (`vDSP_ztoc`).
public func vDSP_ztoc(_ Z: UnsafePointer<DSPSplitComplex>, _ IZ: vDSP_Stride, _ C: UnsafeMutablePointer<DSPComplex>,
                      _ IC: vDSP_Stride, _ N: vDSP_Length) {
    let split = Z.pointee
    C.withMemoryRebound(to: Float.self, capacity: 1) { floats in
        for index in 0..<Int(N) {
            floats[index * IC] = split.realp[at(index, IZ)]
            floats[index * IC + 1] = split.imagp[at(index, IZ)]
        }
    }
}
