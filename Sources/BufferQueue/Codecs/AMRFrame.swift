/// The AMR storage format (RFC 4867 §5), which `.amr`/`.awb` files, CAF and 3GP carry: each
/// 20 ms frame is a table-of-contents byte (`P FT FT FT FT Q P P`) and a payload whose size the
/// four-bit frame type gives. Shared by the file parser and the decoder.
public enum AMRFrame {
    /// Bytes of a storage-format frame (ToC byte included) of frame type `type` (0–15), or nil for
    /// a type that is reserved.
    public static func storageBytes(type: Int, wideband: Bool) -> Int? {
        (wideband ? widebandBytes : narrowbandBytes)[type & 15]
    }

    /// The frame type in a ToC byte.
    public static func type(ofTableOfContents byte: UInt8) -> Int { Int(byte >> 3) & 15 }

    /// Decoded frames in one AMR frame: 160 (NB, 8 kHz) or 320 (WB, 16 kHz).
    public static func frames(wideband: Bool) -> Int { wideband ? 320 : 160 }

    private static let narrowbandBytes: [Int?] = [13, 14, 16, 18, 20, 21, 27, 32, 6, nil, nil, nil, nil, nil, nil, 1]
    private static let widebandBytes: [Int?] = [18, 24, 33, 37, 41, 47, 51, 59, 61, 6, nil, nil, nil, nil, 1, 1]
}
