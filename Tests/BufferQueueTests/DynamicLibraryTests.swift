import CDynamicLibrary
import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The loader the codec modules open their C libraries with (CDynamicLibrary): what it opens,
/// what it resolves, and what it says when it cannot.
@Suite struct DynamicLibraryTests {
    /// Loads a description with the given sonames and function names; returns the result, the
    /// message and the resolved addresses (keeping the C strings alive for the call).
    static func load(sonames: [String], names: [String], twice: Bool = false) -> (loaded: Int32, error: String, slots: [UnsafeMutableRawPointer?]) {
        let sonameStrings = sonames.map { strdup($0) }, nameStrings = names.map { strdup($0) }, install = strdup("the-package")
        defer { (sonameStrings + nameStrings + [install]).forEach { free($0) } }
        var sonameList: [UnsafePointer<CChar>?] = sonameStrings.map { UnsafePointer($0) } + [nil]
        var nameList: [UnsafePointer<CChar>?] = nameStrings.map { UnsafePointer($0) } + [nil]
        let slots = UnsafeMutablePointer<UnsafeMutableRawPointer?>.allocate(capacity: max(names.count, 1))
        slots.initialize(repeating: nil, count: max(names.count, 1))
        defer { slots.deallocate() }
        var slotList: [UnsafeMutablePointer<UnsafeMutableRawPointer?>?] = (0..<names.count).map { slots + $0 } + [nil]
        var library = aq_dynamic_library()
        return sonameList.withUnsafeMutableBufferPointer { sonamePointers in
            nameList.withUnsafeMutableBufferPointer { namePointers in
                slotList.withUnsafeMutableBufferPointer { slotPointers in
                    library.sonames = UnsafePointer(sonamePointers.baseAddress)
                    library.names = UnsafePointer(namePointers.baseAddress)
                    library.slots = UnsafePointer(slotPointers.baseAddress)
                    library.install = UnsafePointer(install)
                    var loaded = aq_dynamic_library_load(&library)
                    if twice { loaded = aq_dynamic_library_load(&library) }
                    let error = withUnsafeBytes(of: library.error) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                    return (loaded, error, (0..<names.count).map { slots[$0] })
                }
            }
        }
    }

    @Test func aLibraryThatIsThereIsOpenedAndItsFunctionsResolved() {
        let result = Self.load(sonames: ["libm.so.6"], names: ["cos", "sqrt"], twice: true)
        #expect(result.loaded == 1, "\(result.error)")
        #expect(result.error.isEmpty)
        let cosine = unsafeBitCast(result.slots[0], to: (@convention(c) (Double) -> Double).self)
        #expect(cosine(0) == 1)
        let root = unsafeBitCast(result.slots[1], to: (@convention(c) (Double) -> Double).self)
        #expect(root(6.25) == 2.5)
    }

    @Test func theNextNameIsTriedWhenTheFirstIsMissing() {
        let result = Self.load(sonames: ["libaq-no-such-library.so.7", "libm.so.6"], names: ["cos"])
        #expect(result.loaded == 1, "\(result.error)")
        #expect(result.slots[0] != nil)
    }

    @Test func aMissingLibraryIsNamedWithWhatToInstall() {
        let result = Self.load(sonames: ["libaq-no-such-library.so.7", "libaq-no-such-library.so"], names: ["cos"])
        #expect(result.loaded == 0)
        #expect(result.error.hasPrefix("cannot open libaq-no-such-library.so.7 (install the-package): "), "\(result.error)")
        #expect(result.slots[0] == nil)
    }

    @Test func aMissingFunctionIsNamed() {
        let result = Self.load(sonames: ["libm.so.6"], names: ["cos", "aq_no_such_function"])
        #expect(result.loaded == 0)
        #expect(result.error == "libm.so.6 has no function aq_no_such_function (install the-package)")
    }

    /// The test executable links every codec module, and none of their libraries: each is opened
    /// when first used (a `link` in a module map or a linker setting would add it here).
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/readelf"), "readelf (binutils) is missing"))
    func noCodecLibraryIsLinked() async throws {
        let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let result = try await runTool("/usr/bin/readelf", ["-d", executable])
        try #require(result.status == 0, "\(String(decoding: result.errorOutput, as: UTF8.self))")
        let needed = String(decoding: result.output, as: UTF8.self).split(separator: "\n").filter { $0.contains("(NEEDED)") }
        #expect(needed.contains { $0.contains("libc.so") }, "readelf listed no NEEDED entries: \(needed)")
        for library in ["libmpg123", "libfaad", "libopencore-amr", "libopus", "libvorbis", "libogg", "libFLAC", "libsoxr",
                        "librubberband", "libavcodec", "libavutil"] {
            #expect(!needed.contains { $0.contains("[\(library)") }, "\(library) is linked: \(needed)")
        }
    }
}
