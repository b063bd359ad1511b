import AudioToolbox
import Foundation
import Testing
import TestSupport

/// `'abcd'` as Apple's headers evaluate it.
func fourCC(_ code: String) -> UInt32 { code.utf8.reduce(0) { $0 << 8 | UInt32($1) } }

/// Every result code and property id against the values Apple documents (AudioQueue.h,
/// AudioFileStream.h, AudioFile.h, AudioFormat.h, AudioConverter.h, ExtendedAudioFile.h,
/// CoreAudioBaseTypes.h), and the Swift types they import with.
@Suite struct ConstantTableTests {
    @Test func audioQueueResultCodes() {
        let table: [(OSStatus, OSStatus)] = [
            (kAudioQueueErr_InvalidBuffer, -66687), (kAudioQueueErr_BufferEmpty, -66686), (kAudioQueueErr_DisposalPending, -66685),
            (kAudioQueueErr_InvalidProperty, -66684), (kAudioQueueErr_InvalidPropertySize, -66683), (kAudioQueueErr_InvalidParameter, -66682),
            (kAudioQueueErr_CannotStart, -66681), (kAudioQueueErr_InvalidDevice, -66680), (kAudioQueueErr_BufferInQueue, -66679),
            (kAudioQueueErr_InvalidRunState, -66678), (kAudioQueueErr_InvalidQueueType, -66677), (kAudioQueueErr_Permissions, -66676),
            (kAudioQueueErr_InvalidPropertyValue, -66675), (kAudioQueueErr_PrimeTimedOut, -66674), (kAudioQueueErr_CodecNotFound, -66673),
            (kAudioQueueErr_InvalidCodecAccess, -66672), (kAudioQueueErr_QueueInvalidated, -66671), (kAudioQueueErr_TooManyTaps, -66670),
            (kAudioQueueErr_InvalidTapContext, -66669), (kAudioQueueErr_RecordUnderrun, -66668), (kAudioQueueErr_InvalidTapType, -66667),
            (kAudioQueueErr_BufferEnqueuedTwice, -66666), (kAudioQueueErr_CannotStartYet, -66665), (kAudioQueueErr_EnqueueDuringReset, -66632),
            (kAudioQueueErr_InvalidOfflineMode, -66626),
        ]
        for (constant, documented) in table { #expect(constant == documented) }
        #expect(noErr == 0)
    }

    @Test func fourCharacterResultCodes() {
        let table: [(OSStatus, String)] = [
            (kAudioFileStreamError_UnsupportedFileType, "typ?"), (kAudioFileStreamError_UnsupportedDataFormat, "fmt?"),
            (kAudioFileStreamError_UnsupportedProperty, "pty?"), (kAudioFileStreamError_BadPropertySize, "!siz"),
            (kAudioFileStreamError_NotOptimized, "optm"), (kAudioFileStreamError_InvalidPacketOffset, "pck?"),
            (kAudioFileStreamError_InvalidFile, "dta?"), (kAudioFileStreamError_ValueUnknown, "unk?"),
            (kAudioFileStreamError_DataUnavailable, "more"), (kAudioFileStreamError_IllegalOperation, "nope"),
            (kAudioFileStreamError_UnspecifiedError, "wht?"), (kAudioFileStreamError_DiscontinuityCantRecover, "dsc!"),
            (kAudioFileUnspecifiedError, "wht?"), (kAudioFileUnsupportedFileTypeError, "typ?"), (kAudioFileUnsupportedDataFormatError, "fmt?"),
            (kAudioFileUnsupportedPropertyError, "pty?"), (kAudioFileBadPropertySizeError, "!siz"), (kAudioFilePermissionsError, "prm?"),
            (kAudioFileNotOptimizedError, "optm"), (kAudioFileInvalidChunkError, "chk?"), (kAudioFileDoesNotAllow64BitDataSizeError, "off?"),
            (kAudioFileInvalidPacketOffsetError, "pck?"), (kAudioFileInvalidPacketDependencyError, "dep?"), (kAudioFileInvalidFileError, "dta?"),
            (kAudioFileOperationNotSupportedError, "op??"), (kAudioFormatUnspecifiedError, "what"), (kAudioFormatUnsupportedPropertyError, "prop"),
            (kAudioFormatBadPropertySizeError, "!siz"), (kAudioFormatBadSpecifierSizeError, "!spc"),
            (kAudioFormatUnsupportedDataFormatError, "fmt?"), (kAudioFormatUnknownFormatError, "!fmt"),
            (kAudioConverterErr_FormatNotSupported, "fmt?"), (kAudioConverterErr_OperationNotSupported, "op??"),
            (kAudioConverterErr_PropertyNotSupported, "prop"), (kAudioConverterErr_InvalidInputSize, "insz"),
            (kAudioConverterErr_InvalidOutputSize, "otsz"), (kAudioConverterErr_UnspecifiedError, "what"),
            (kAudioConverterErr_BadPropertySizeError, "!siz"), (kAudioConverterErr_RequiresPacketDescriptionsError, "!pkd"),
            (kAudioConverterErr_InputSampleRateOutOfRange, "!isr"), (kAudioConverterErr_OutputSampleRateOutOfRange, "!osr"),
            (kAudioHardwareUnknownPropertyError, "who?"), (kAudioHardwareBadObjectError, "!obj"),
        ]
        for (constant, code) in table { #expect(UInt32(bitPattern: constant) == fourCC(code), "\(code)") }
        let numbered: [(OSStatus, OSStatus)] = [
            (kAudioFileNotOpenError, -38), (kAudioFileEndOfFileError, -39), (kAudioFilePositionError, -40), (kAudioFileFileNotFoundError, -43),
            (kExtAudioFileError_InvalidProperty, -66561), (kExtAudioFileError_InvalidPropertySize, -66562),
            (kExtAudioFileError_NonPCMClientFormat, -66563), (kExtAudioFileError_InvalidChannelMap, -66564),
            (kExtAudioFileError_InvalidOperationOrder, -66565), (kExtAudioFileError_InvalidDataFormat, -66566),
            (kExtAudioFileError_MaxPacketSizeUnknown, -66567), (kExtAudioFileError_InvalidSeek, -66568),
            (kExtAudioFileError_AsyncWriteTooLarge, -66569), (kExtAudioFileError_AsyncWriteBufferOverflow, -66570),
        ]
        for (constant, documented) in numbered { #expect(constant == documented) }
    }

    @Test func propertyIDs() {
        let table: [(UInt32, String)] = [
            (kAudioQueueProperty_IsRunning, "aqrn"), (kAudioQueueDeviceProperty_SampleRate, "aqsr"),
            (kAudioQueueDeviceProperty_NumberChannels, "aqdc"), (kAudioQueueProperty_CurrentDevice, "aqcd"),
            (kAudioQueueProperty_MagicCookie, "aqmc"), (kAudioQueueProperty_MaximumOutputPacketSize, "xops"),
            (kAudioQueueProperty_StreamDescription, "aqft"), (kAudioQueueProperty_ChannelLayout, "aqcl"),
            (kAudioQueueProperty_EnableLevelMetering, "aqme"), (kAudioQueueProperty_CurrentLevelMeter, "aqmv"),
            (kAudioQueueProperty_CurrentLevelMeterDB, "aqmd"), (kAudioQueueProperty_DecodeBufferSizeFrames, "dcbf"),
            (kAudioQueueProperty_ConverterError, "qcve"), (kAudioQueueProperty_EnableTimePitch, "q_tp"),
            (kAudioQueueProperty_TimePitchAlgorithm, "qtpa"), (kAudioQueueProperty_TimePitchBypass, "qtpb"),
            (kAudioQueueProperty_ChannelAssignments, "aqca"), (kAudioQueueTimePitchAlgorithm_Spectral, "spec"),
            (kAudioQueueTimePitchAlgorithm_TimeDomain, "tido"), (kAudioQueueTimePitchAlgorithm_Varispeed, "vspd"),
            (kAudioFileStreamProperty_ReadyToProducePackets, "redy"), (kAudioFileStreamProperty_FileFormat, "ffmt"),
            (kAudioFileStreamProperty_DataFormat, "dfmt"), (kAudioFileStreamProperty_FormatList, "flst"),
            (kAudioFileStreamProperty_MagicCookieData, "mgic"), (kAudioFileStreamProperty_AudioDataByteCount, "bcnt"),
            (kAudioFileStreamProperty_AudioDataPacketCount, "pcnt"), (kAudioFileStreamProperty_MaximumPacketSize, "psze"),
            (kAudioFileStreamProperty_DataOffset, "doff"), (kAudioFileStreamProperty_ChannelLayout, "cmap"),
            (kAudioFileStreamProperty_PacketToFrame, "pkfr"), (kAudioFileStreamProperty_FrameToPacket, "frpk"),
            (kAudioFileStreamProperty_PacketToByte, "pkby"), (kAudioFileStreamProperty_ByteToPacket, "bypk"),
            (kAudioFileStreamProperty_PacketTableInfo, "pnfo"), (kAudioFileStreamProperty_PacketSizeUpperBound, "pkub"),
            (kAudioFileStreamProperty_AverageBytesPerPacket, "abpp"), (kAudioFileStreamProperty_BitRate, "brat"),
            (kAudioFileStreamProperty_InfoDictionary, "info"), (kAudioFilePropertyDataFormat, "dfmt"),
            (kAudioFilePropertyMagicCookieData, "mgic"), (kAudioFilePropertyPacketSizeUpperBound, "pkub"),
            (kAudioFilePropertyPacketTableInfo, "pnfo"), (kAudioFileCAFType, "caff"), (kAudioFileMP3Type, "MPG3"),
            (kAudioFileAAC_ADTSType, "adts"), (kAudioFileM4AType, "m4af"), (kAudioFileWAVEType, "WAVE"),
            (kAudioFormatProperty_FormatInfo, "fmti"), (kAudioConverterCurrentOutputStreamDescription, "acod"),
            (kAudioConverterCompressionMagicCookie, "cmgc"), (kAudioConverterPropertyMaximumOutputPacketSize, "xops"),
            (kAudioHardwarePropertyDefaultInputDevice, "dIn "), (kAudioDevicePropertyNominalSampleRate, "nsrt"),
            (kAudioObjectPropertyScopeGlobal, "glob"), (kAudioFormatLinearPCM, "lpcm"), (kAudioFormatMPEG4AAC, "aac "),
            (kAudioFormatMPEGLayer3, ".mp3"), (kAudioFormatAppleIMA4, "ima4"), (kAudioFormatULaw, "ulaw"), (kAudioFormatALaw, "alaw"),
            (kAudioFormatAppleLossless, "alac"), (kAudioFormatMPEG4AAC_HE, "aach"), (kAudioFormatMPEG4AAC_HE_V2, "aacp"),
            (kAudioFormatAMR, "samr"), (kAudioFormatFLAC, "flac"), (kAudioFormatOpus, "opus"),
            (kAudioFileGlobalInfo_ReadableTypes, "afrf"), (kAudioFileGlobalInfo_WritableTypes, "afwf"),
            (kAudioFileGlobalInfo_FileTypeName, "ftnm"), (kAudioFileGlobalInfo_AvailableStreamDescriptionsForFormat, "sdid"),
            (kAudioFileGlobalInfo_AvailableFormatIDs, "fmid"), (kAudioFileGlobalInfo_AllExtensions, "alxt"),
            (kAudioFileGlobalInfo_AllHFSTypeCodes, "ahfs"), (kAudioFileGlobalInfo_AllUTIs, "auti"),
            (kAudioFileGlobalInfo_AllMIMETypes, "amim"), (kAudioFileGlobalInfo_ExtensionsForType, "fext"),
            (kAudioFileGlobalInfo_HFSTypeCodesForType, "fhfs"), (kAudioFileGlobalInfo_UTIsForType, "futi"),
            (kAudioFileGlobalInfo_MIMETypesForType, "fmim"), (kAudioFileGlobalInfo_TypesForMIMEType, "tmim"),
            (kAudioFileGlobalInfo_TypesForUTI, "tuti"), (kAudioFileGlobalInfo_TypesForHFSTypeCode, "thfs"),
            (kAudioFileGlobalInfo_TypesForExtension, "text"),
        ]
        for (constant, code) in table { #expect(constant == fourCC(code), "\(code)") }
        let numbered: [(UInt32, UInt32)] = [
            (kAudioQueueParam_Volume, 1), (kAudioQueueParam_PlayRate, 2), (kAudioQueueParam_Pitch, 3), (kAudioQueueParam_VolumeRampTime, 4),
            (kAudioQueueParam_Pan, 13), (kAudioFormatFlagIsFloat, 1), (kAudioFormatFlagIsBigEndian, 2), (kAudioFormatFlagIsSignedInteger, 4),
            (kAudioFormatFlagIsPacked, 8), (kAudioFormatFlagIsAlignedHigh, 0x10), (kAudioFormatFlagIsNonInterleaved, 0x20),
            (kAudioFormatFlagIsNonMixable, 0x40), (kAudioFormatFlagsAreAllClear, 0x8000_0000), (kAudioFormatFlagsNativeFloatPacked, 9),
            (kAudioChannelLayoutTag_Stereo, (101 << 16) | 2), (kAudioChannelLayoutTag_MPEG_5_1_A, (121 << 16) | 6),
            (kAudioChannelLayoutTag_AAC_5_1, (124 << 16) | 6), (kAudioChannelLayoutTag_DiscreteInOrder, 147 << 16),
        ]
        for (constant, documented) in numbered { #expect(constant == documented) }
    }

    /// The Swift types Apple's headers give these names (callers' casts depend on them).
    @Test func importedTypes() {
        #expect(type(of: kAudioQueueErr_InvalidBuffer) == OSStatus.self)
        #expect(type(of: kAudioQueueProperty_IsRunning) == AudioQueuePropertyID.self)
        #expect(type(of: kAudioQueueParam_Volume) == AudioQueueParameterID.self)
        #expect(type(of: kAudioObjectSystemObject) == Int.self)
        #expect(type(of: noErr) == OSStatus.self)
        #expect(MemoryLayout<AudioStreamBasicDescription>.size == 40)
        #expect(MemoryLayout<AudioQueueBuffer>.size == 56)
        #expect(MemoryLayout<AudioTimeStamp>.size == 64)
        let flags: AudioFileStreamPropertyFlags = [.propertyIsCached, .cacheProperty]
        #expect(flags.rawValue == 3)
        #expect(AudioFileStreamParseFlags.discontinuity.rawValue == 1)
        #expect(AudioFileStreamSeekFlags.offsetIsEstimated.rawValue == 1)
        #expect(AudioFileFlags.eraseFile.rawValue == 1)
        #expect(AudioFilePermissions.readPermission.rawValue == 1)
        #expect(AudioQueueProcessingTapFlags.siphon.rawValue == 4)
        #expect(AudioTimeStampFlags.sampleHostTimeValid == [.sampleTimeValid, .hostTimeValid])
        let swapped: UInt32 = CFSwapInt32HostToBig(0x0102_0304)
        #expect(swapped == 0x0403_0201)
        let writable: DarwinBoolean = true
        #expect(writable.boolValue)
        let asbd = AudioStreamBasicDescription()
        #expect(asbd.mSampleRate == 0 && asbd.mFormatID == 0)
    }
}

/// `objc_sync_enter`/`objc_sync_exit` (Swift's spelling of `@synchronized`): a recursive lock per
/// object, exclusive between threads; exiting one not held is an error.
@Suite struct ObjectSyncTests {
    final class Guarded: @unchecked Sendable {   // @unchecked: `count` is touched only between objc_sync_enter and objc_sync_exit
        var count = 0
    }

    @Test func aMonitorIsRecursiveAndExclusive() async {
        let object = Guarded()
        #expect(objc_sync_exit(object) == -1, "exiting a monitor not held")
        #expect(objc_sync_enter(object) == 0 && objc_sync_enter(object) == 0)
        #expect(objc_sync_exit(object) == 0 && objc_sync_exit(object) == 0)
        #expect(objc_sync_exit(object) == -1)
        // Four threads, each adding 10 000 times under the monitor: no increment is lost.
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    await onOwnThread {
                        for _ in 0..<10_000 {
                            objc_sync_enter(object)
                            object.count += 1
                            objc_sync_exit(object)
                        }
                    }
                }
            }
        }
        #expect(object.count == 40_000)
    }
}
