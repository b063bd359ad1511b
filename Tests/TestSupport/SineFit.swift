import Foundation

/// A least-squares fit of a sine and cosine of `frequency` plus a constant over `samples[range]`:
/// the energy of what the fit leaves (distortion and noise) and of the fitted sine. THD+N in dB is
/// `10 × log10(residual / fundamental)`; summing both over consecutive windows tracks a sine whose
/// phase or level wanders, as a notch filter would.
public func sineFit(_ samples: [Float], frequency: Double, rate: Double, range: Range<Int>) -> (residual: Double, fundamental: Double) {
    var s = [[Double]](repeating: [0, 0, 0], count: 3), b = [0.0, 0.0, 0.0]
    for i in range {
        let w = 2 * Double.pi * frequency * Double(i) / rate
        let basis = [sin(w), cos(w), 1.0]
        for r in 0..<3 {
            b[r] += basis[r] * Double(samples[i])
            for c in 0..<3 { s[r][c] += basis[r] * basis[c] }
        }
    }
    // The 3×3 normal equations, by Gaussian elimination.
    for p in 0..<3 where abs(s[p][p]) > 1e-12 {
        for r in (p + 1)..<3 {
            let f = s[r][p] / s[p][p]
            for c in p..<3 { s[r][c] -= f * s[p][c] }
            b[r] -= f * b[p]
        }
    }
    var x = [0.0, 0.0, 0.0]
    for r in stride(from: 2, through: 0, by: -1) {
        var v = b[r]
        for c in (r + 1)..<3 { v -= s[r][c] * x[c] }
        x[r] = abs(s[r][r]) > 1e-12 ? v / s[r][r] : 0
    }
    var residual = 0.0, fundamental = 0.0
    for i in range {
        let w = 2 * Double.pi * frequency * Double(i) / rate
        let sine = x[0] * sin(w) + x[1] * cos(w)
        let e = Double(samples[i]) - sine - x[2]
        residual += e * e
        fundamental += sine * sine
    }
    return (residual, fundamental)
}
