import Foundation

/// The log-spectral distance between two signals of one channel, in dB: over Hann-windowed
/// frames of 1024 samples (hop 512), the root mean square over bins of the difference of their
/// power spectra in dB, averaged over frames. Powers below −100 dB of full scale count as −100 dB,
/// so silence compares as equal and a codec is not judged on noise far below hearing.
public func logSpectralDistance(_ a: [Float], _ b: [Float]) -> Double {
    let size = 1024, hop = 512
    let count = min(a.count, b.count)
    guard count >= size else { return 0 }
    let window = (0..<size).map { 0.5 - 0.5 * cos(2 * Double.pi * Double($0) / Double(size)) }
    var total = 0.0, frames = 0
    var start = 0
    while start + size <= count {
        let pa = powerSpectrum(a[start..<(start + size)], window), pb = powerSpectrum(b[start..<(start + size)], window)
        var sum = 0.0
        for bin in 0..<pa.count {
            let da = 10 * log10(max(pa[bin], 1e-10)), db = 10 * log10(max(pb[bin], 1e-10))
            sum += (da - db) * (da - db)
        }
        total += (sum / Double(pa.count)).squareRoot()
        frames += 1
        start += hop
    }
    return total / Double(max(frames, 1))
}

/// The power of each bin 0…n/2 of a windowed frame (n a power of two), normalised so a
/// full-scale sine peaks near 1.
func powerSpectrum(_ samples: ArraySlice<Float>, _ window: [Double]) -> [Double] {
    let n = window.count
    var re = [Double](repeating: 0, count: n), im = [Double](repeating: 0, count: n)
    for (index, sample) in samples.enumerated() { re[index] = Double(sample) * window[index] }
    fft(&re, &im)
    let scale = 4.0 / Double(n * n)
    return (0...(n / 2)).map { (re[$0] * re[$0] + im[$0] * im[$0]) * scale }
}

/// In-place radix-2 FFT of `re` + i`im` (count a power of two): bit-reversed order, then butterflies.
public func fft(_ re: inout [Double], _ im: inout [Double]) {
    let n = re.count
    var j = 0
    for i in 1..<n {
        var bit = n >> 1
        while j & bit != 0 { j ^= bit; bit >>= 1 }
        j |= bit
        if i < j { re.swapAt(i, j); im.swapAt(i, j) }
    }
    var length = 2
    while length <= n {
        let angle = -2 * Double.pi / Double(length)
        for start in stride(from: 0, to: n, by: length) {
            for k in 0..<(length / 2) {
                let wr = cos(angle * Double(k)), wi = sin(angle * Double(k))
                let a = start + k, b = a + length / 2
                let tr = re[b] * wr - im[b] * wi, ti = re[b] * wi + im[b] * wr
                re[b] = re[a] - tr; im[b] = im[a] - ti
                re[a] += tr; im[a] += ti
            }
        }
        length <<= 1
    }
}
