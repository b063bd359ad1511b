// The C declarations of Apple's AudioToolbox headers (AudioQueue.h, AudioFileStream.h, AudioFile.h,
// AudioFormat.h, AudioConverter.h, ExtendedAudioFile.h) and the few of CoreAudio's AudioHardware
// that audio code on a Mac uses, for the `AudioToolbox` module, which re-exports them. Structs and
// callback types come from C so that Swift imports them exactly as on a Mac (`@convention(c)`
// callbacks, zero and memberwise inits, `OpaquePointer` refs); the functions are Swift, in the
// `AudioToolbox` module, over this library's queue, parsers, decoders and encoders.
#ifndef AQ_CAUDIOTOOLBOX_H
#define AQ_CAUDIOTOOLBOX_H

#include "CoreAudioTypes.h"

#pragma clang assume_nonnull begin

// MARK: AudioQueue.h

typedef UInt32 AudioQueuePropertyID;
typedef UInt32 AudioQueueParameterID;
typedef Float32 AudioQueueParameterValue;
typedef struct OpaqueAudioQueue *AudioQueueRef;
typedef struct OpaqueAudioQueueTimeline *AudioQueueTimelineRef;
typedef struct OpaqueAudioQueueProcessingTap *AudioQueueProcessingTapRef;

enum AQ_CF_ENUM_ATTRIBUTES : OSStatus {
    kAudioQueueErr_InvalidBuffer = -66687,
    kAudioQueueErr_BufferEmpty = -66686,
    kAudioQueueErr_DisposalPending = -66685,
    kAudioQueueErr_InvalidProperty = -66684,
    kAudioQueueErr_InvalidPropertySize = -66683,
    kAudioQueueErr_InvalidParameter = -66682,
    kAudioQueueErr_CannotStart = -66681,
    kAudioQueueErr_InvalidDevice = -66680,
    kAudioQueueErr_BufferInQueue = -66679,
    kAudioQueueErr_InvalidRunState = -66678,
    kAudioQueueErr_InvalidQueueType = -66677,
    kAudioQueueErr_Permissions = -66676,
    kAudioQueueErr_InvalidPropertyValue = -66675,
    kAudioQueueErr_PrimeTimedOut = -66674,
    kAudioQueueErr_CodecNotFound = -66673,
    kAudioQueueErr_InvalidCodecAccess = -66672,
    kAudioQueueErr_QueueInvalidated = -66671,
    kAudioQueueErr_TooManyTaps = -66670,
    kAudioQueueErr_InvalidTapContext = -66669,
    kAudioQueueErr_RecordUnderrun = -66668,
    kAudioQueueErr_InvalidTapType = -66667,
    kAudioQueueErr_BufferEnqueuedTwice = -66666,
    kAudioQueueErr_CannotStartYet = -66665,
    kAudioQueueErr_EnqueueDuringReset = -66632,
    kAudioQueueErr_InvalidOfflineMode = -66626,
};

/* AUComponent.h's errors, which AVAudioEngine's calls throw. */
enum AQ_CF_ENUM_ATTRIBUTES : OSStatus {
    kAudioUnitErr_InvalidProperty = -10879,
    kAudioUnitErr_InvalidParameter = -10878,
    kAudioUnitErr_InvalidElement = -10877,
    kAudioUnitErr_NoConnection = -10876,
    kAudioUnitErr_FailedInitialization = -10875,
    kAudioUnitErr_TooManyFramesToProcess = -10874,
    kAudioUnitErr_InvalidFile = -10871,
    kAudioUnitErr_FormatNotSupported = -10868,
    kAudioUnitErr_Uninitialized = -10867,
    kAudioUnitErr_InvalidScope = -10866,
    kAudioUnitErr_PropertyNotWritable = -10865,
    kAudioUnitErr_CannotDoInCurrentContext = -10863,
    kAudioUnitErr_InvalidPropertyValue = -10851,
    kAudioUnitErr_PropertyNotInUse = -10850,
    kAudioUnitErr_Initialized = -10849,
    kAudioUnitErr_InvalidOfflineRender = -10848,
    kAudioUnitErr_Unauthorized = -10847,
};

enum AQ_CF_ENUM_ATTRIBUTES : AudioQueuePropertyID {
    kAudioQueueProperty_IsRunning = AQ_FOUR_CC('a', 'q', 'r', 'n'),
    kAudioQueueDeviceProperty_SampleRate = AQ_FOUR_CC('a', 'q', 's', 'r'),
    kAudioQueueDeviceProperty_NumberChannels = AQ_FOUR_CC('a', 'q', 'd', 'c'),
    kAudioQueueProperty_CurrentDevice = AQ_FOUR_CC('a', 'q', 'c', 'd'),
    kAudioQueueProperty_MagicCookie = AQ_FOUR_CC('a', 'q', 'm', 'c'),
    kAudioQueueProperty_MaximumOutputPacketSize = AQ_FOUR_CC('x', 'o', 'p', 's'),
    kAudioQueueProperty_StreamDescription = AQ_FOUR_CC('a', 'q', 'f', 't'),
    kAudioQueueProperty_ChannelLayout = AQ_FOUR_CC('a', 'q', 'c', 'l'),
    kAudioQueueProperty_EnableLevelMetering = AQ_FOUR_CC('a', 'q', 'm', 'e'),
    kAudioQueueProperty_CurrentLevelMeter = AQ_FOUR_CC('a', 'q', 'm', 'v'),
    kAudioQueueProperty_CurrentLevelMeterDB = AQ_FOUR_CC('a', 'q', 'm', 'd'),
    kAudioQueueProperty_DecodeBufferSizeFrames = AQ_FOUR_CC('d', 'c', 'b', 'f'),
    kAudioQueueProperty_ConverterError = AQ_FOUR_CC('q', 'c', 'v', 'e'),
    kAudioQueueProperty_EnableTimePitch = AQ_FOUR_CC('q', '_', 't', 'p'),
    kAudioQueueProperty_TimePitchAlgorithm = AQ_FOUR_CC('q', 't', 'p', 'a'),
    kAudioQueueProperty_TimePitchBypass = AQ_FOUR_CC('q', 't', 'p', 'b'),
    kAudioQueueProperty_ChannelAssignments = AQ_FOUR_CC('a', 'q', 'c', 'a'),
};

enum AQ_CF_ENUM_ATTRIBUTES : UInt32 {
    kAudioQueueTimePitchAlgorithm_Spectral = AQ_FOUR_CC('s', 'p', 'e', 'c'),
    kAudioQueueTimePitchAlgorithm_TimeDomain = AQ_FOUR_CC('t', 'i', 'd', 'o'),
    kAudioQueueTimePitchAlgorithm_Varispeed = AQ_FOUR_CC('v', 's', 'p', 'd'),
};

enum AQ_CF_ENUM_ATTRIBUTES : AudioQueueParameterID {
    kAudioQueueParam_Volume = 1,
    kAudioQueueParam_PlayRate = 2,
    kAudioQueueParam_Pitch = 3,
    kAudioQueueParam_VolumeRampTime = 4,
    kAudioQueueParam_Pan = 13,
};

typedef enum AQ_CF_OPTIONS_ATTRIBUTES AudioQueueProcessingTapFlags : UInt32 {
    kAudioQueueProcessingTap_PreEffects = (1U << 0),
    kAudioQueueProcessingTap_PostEffects = (1U << 1),
    kAudioQueueProcessingTap_Siphon = (1U << 2),
    kAudioQueueProcessingTap_StartOfStream = (1U << 8),
    kAudioQueueProcessingTap_EndOfStream = (1U << 9),
} AudioQueueProcessingTapFlags;

typedef struct AudioQueueBuffer {
    const UInt32 mAudioDataBytesCapacity;
    void *const mAudioData;
    UInt32 mAudioDataByteSize;
    void *_Nullable mUserData;
    const UInt32 mPacketDescriptionCapacity;
    AudioStreamPacketDescription *const _Nullable mPacketDescriptions;
    UInt32 mPacketDescriptionCount;
} AudioQueueBuffer;

typedef AudioQueueBuffer *AudioQueueBufferRef;

typedef struct AudioQueueParameterEvent {
    AudioQueueParameterID mID;
    AudioQueueParameterValue mValue;
} AudioQueueParameterEvent;

typedef struct AudioQueueLevelMeterState {
    Float32 mAveragePower;
    Float32 mPeakPower;
} AudioQueueLevelMeterState;

typedef void (*AudioQueueOutputCallback)(void *_Nullable inUserData, AudioQueueRef inAQ, AudioQueueBufferRef inBuffer);
typedef void (*AudioQueueInputCallback)(void *_Nullable inUserData, AudioQueueRef inAQ, AudioQueueBufferRef inBuffer,
                                        const AudioTimeStamp *inStartTime, UInt32 inNumberPacketDescriptions,
                                        const AudioStreamPacketDescription *_Nullable inPacketDescs);
typedef void (*AudioQueuePropertyListenerProc)(void *_Nullable inUserData, AudioQueueRef inAQ, AudioQueuePropertyID inID);
typedef void (*AudioQueueProcessingTapCallback)(void *inClientData, AudioQueueProcessingTapRef inAQTap, UInt32 inNumberFrames,
                                                AudioTimeStamp *ioTimeStamp, AudioQueueProcessingTapFlags *ioFlags,
                                                UInt32 *outNumberFrames, AudioBufferList *ioData);

// MARK: AudioFile.h

typedef UInt32 AudioFileTypeID;
typedef UInt32 AudioFilePropertyID;
typedef struct OpaqueAudioFileID *AudioFileID;

enum AQ_CF_ENUM_ATTRIBUTES : AudioFileTypeID {
    kAudioFileAIFFType = AQ_FOUR_CC('A', 'I', 'F', 'F'),
    kAudioFileAIFCType = AQ_FOUR_CC('A', 'I', 'F', 'C'),
    kAudioFileWAVEType = AQ_FOUR_CC('W', 'A', 'V', 'E'),
    kAudioFileRF64Type = AQ_FOUR_CC('R', 'F', '6', '4'),
    kAudioFileBW64Type = AQ_FOUR_CC('B', 'W', '6', '4'),
    kAudioFileWave64Type = AQ_FOUR_CC('W', '6', '4', 'f'),
    kAudioFileSoundDesigner2Type = AQ_FOUR_CC('S', 'd', '2', 'f'),
    kAudioFileNextType = AQ_FOUR_CC('N', 'e', 'X', 'T'),
    kAudioFileMP3Type = AQ_FOUR_CC('M', 'P', 'G', '3'),
    kAudioFileMP2Type = AQ_FOUR_CC('M', 'P', 'G', '2'),
    kAudioFileMP1Type = AQ_FOUR_CC('M', 'P', 'G', '1'),
    kAudioFileAC3Type = AQ_FOUR_CC('a', 'c', '-', '3'),
    kAudioFileAAC_ADTSType = AQ_FOUR_CC('a', 'd', 't', 's'),
    kAudioFileMPEG4Type = AQ_FOUR_CC('m', 'p', '4', 'f'),
    kAudioFileM4AType = AQ_FOUR_CC('m', '4', 'a', 'f'),
    kAudioFileM4BType = AQ_FOUR_CC('m', '4', 'b', 'f'),
    kAudioFileCAFType = AQ_FOUR_CC('c', 'a', 'f', 'f'),
    kAudioFile3GPType = AQ_FOUR_CC('3', 'g', 'p', 'p'),
    kAudioFile3GP2Type = AQ_FOUR_CC('3', 'g', 'p', '2'),
    kAudioFileAMRType = AQ_FOUR_CC('a', 'm', 'r', 'f'),
    kAudioFileFLACType = AQ_FOUR_CC('f', 'l', 'a', 'c'),
    kAudioFileLATMInLOASType = AQ_FOUR_CC('l', 'o', 'a', 's'),
};

enum AQ_CF_ENUM_ATTRIBUTES : OSStatus {
    kAudioFileUnspecifiedError = AQ_FOUR_CC('w', 'h', 't', '?'),
    kAudioFileUnsupportedFileTypeError = AQ_FOUR_CC('t', 'y', 'p', '?'),
    kAudioFileUnsupportedDataFormatError = AQ_FOUR_CC('f', 'm', 't', '?'),
    kAudioFileUnsupportedPropertyError = AQ_FOUR_CC('p', 't', 'y', '?'),
    kAudioFileBadPropertySizeError = AQ_FOUR_CC('!', 's', 'i', 'z'),
    kAudioFilePermissionsError = AQ_FOUR_CC('p', 'r', 'm', '?'),
    kAudioFileNotOptimizedError = AQ_FOUR_CC('o', 'p', 't', 'm'),
    kAudioFileInvalidChunkError = AQ_FOUR_CC('c', 'h', 'k', '?'),
    kAudioFileDoesNotAllow64BitDataSizeError = AQ_FOUR_CC('o', 'f', 'f', '?'),
    kAudioFileInvalidPacketOffsetError = AQ_FOUR_CC('p', 'c', 'k', '?'),
    kAudioFileInvalidPacketDependencyError = AQ_FOUR_CC('d', 'e', 'p', '?'),
    kAudioFileInvalidFileError = AQ_FOUR_CC('d', 't', 'a', '?'),
    kAudioFileOperationNotSupportedError = 0x6F703F3F,
    kAudioFileNotOpenError = -38,
    kAudioFileEndOfFileError = -39,
    kAudioFilePositionError = -40,
    kAudioFileFileNotFoundError = -43,
};

typedef enum AQ_CF_OPTIONS_ATTRIBUTES AudioFileFlags : UInt32 {
    kAudioFileFlags_EraseFile = 1,
    kAudioFileFlags_DontPageAlignAudioData = 2,
} AudioFileFlags;

typedef enum AQ_CF_ENUM_ATTRIBUTES AudioFilePermissions : SInt8 {
    kAudioFileReadPermission = 0x01,
    kAudioFileWritePermission = 0x02,
    kAudioFileReadWritePermission = 0x03,
} AudioFilePermissions;

enum AQ_CF_ENUM_ATTRIBUTES : AudioFilePropertyID {
    kAudioFilePropertyFileFormat = AQ_FOUR_CC('f', 'f', 'm', 't'),
    kAudioFilePropertyDataFormat = AQ_FOUR_CC('d', 'f', 'm', 't'),
    kAudioFilePropertyIsOptimized = AQ_FOUR_CC('o', 'p', 't', 'm'),
    kAudioFilePropertyMagicCookieData = AQ_FOUR_CC('m', 'g', 'i', 'c'),
    kAudioFilePropertyAudioDataByteCount = AQ_FOUR_CC('b', 'c', 'n', 't'),
    kAudioFilePropertyAudioDataPacketCount = AQ_FOUR_CC('p', 'c', 'n', 't'),
    kAudioFilePropertyMaximumPacketSize = AQ_FOUR_CC('p', 's', 'z', 'e'),
    kAudioFilePropertyDataOffset = AQ_FOUR_CC('d', 'o', 'f', 'f'),
    kAudioFilePropertyChannelLayout = AQ_FOUR_CC('c', 'm', 'a', 'p'),
    kAudioFilePropertyDeferSizeUpdates = AQ_FOUR_CC('d', 's', 'z', 'u'),
    kAudioFilePropertyMarkerList = AQ_FOUR_CC('m', 'k', 'l', 's'),
    kAudioFilePropertyRegionList = AQ_FOUR_CC('r', 'g', 'l', 's'),
    kAudioFilePropertyPacketToFrame = AQ_FOUR_CC('p', 'k', 'f', 'r'),
    kAudioFilePropertyFrameToPacket = AQ_FOUR_CC('f', 'r', 'p', 'k'),
    kAudioFilePropertyRestrictsRandomAccess = AQ_FOUR_CC('r', 'r', 'a', 'p'),
    kAudioFilePropertyPacketToRollDistance = AQ_FOUR_CC('p', 'k', 'r', 'l'),
    kAudioFilePropertyPreviousIndependentPacket = AQ_FOUR_CC('p', 'i', 'n', 'd'),
    kAudioFilePropertyNextIndependentPacket = AQ_FOUR_CC('n', 'i', 'n', 'd'),
    kAudioFilePropertyPacketToDependencyInfo = AQ_FOUR_CC('p', 'k', 'd', 'p'),
    kAudioFilePropertyPacketToByte = AQ_FOUR_CC('p', 'k', 'b', 'y'),
    kAudioFilePropertyByteToPacket = AQ_FOUR_CC('b', 'y', 'p', 'k'),
    kAudioFilePropertyChunkIDs = AQ_FOUR_CC('c', 'h', 'i', 'd'),
    kAudioFilePropertyInfoDictionary = AQ_FOUR_CC('i', 'n', 'f', 'o'),
    kAudioFilePropertyPacketTableInfo = AQ_FOUR_CC('p', 'n', 'f', 'o'),
    kAudioFilePropertyFormatList = AQ_FOUR_CC('f', 'l', 's', 't'),
    kAudioFilePropertyPacketSizeUpperBound = AQ_FOUR_CC('p', 'k', 'u', 'b'),
    kAudioFilePropertyPacketRangeByteCountUpperBound = AQ_FOUR_CC('p', 'r', 'u', 'b'),
    kAudioFilePropertyReserveDuration = AQ_FOUR_CC('r', 's', 'r', 'v'),
    kAudioFilePropertyEstimatedDuration = AQ_FOUR_CC('e', 'd', 'u', 'r'),
    kAudioFilePropertyBitRate = AQ_FOUR_CC('b', 'r', 'a', 't'),
    kAudioFilePropertyID3Tag = AQ_FOUR_CC('i', 'd', '3', 't'),
    kAudioFilePropertyID3TagOffset = AQ_FOUR_CC('i', 'd', '3', 'o'),
    kAudioFilePropertySourceBitDepth = AQ_FOUR_CC('s', 'b', 't', 'd'),
    kAudioFilePropertyAlbumArtwork = AQ_FOUR_CC('a', 'a', 'r', 't'),
    kAudioFilePropertyAudioTrackCount = AQ_FOUR_CC('a', 't', 'c', 't'),
    kAudioFilePropertyUseAudioTrack = AQ_FOUR_CC('u', 'a', 't', 'k'),
};

enum AQ_CF_ENUM_ATTRIBUTES : UInt32 {
    kAudioFileGlobalInfo_ReadableTypes = AQ_FOUR_CC('a', 'f', 'r', 'f'),
    kAudioFileGlobalInfo_WritableTypes = AQ_FOUR_CC('a', 'f', 'w', 'f'),
    kAudioFileGlobalInfo_FileTypeName = AQ_FOUR_CC('f', 't', 'n', 'm'),
    kAudioFileGlobalInfo_AvailableStreamDescriptionsForFormat = AQ_FOUR_CC('s', 'd', 'i', 'd'),
    kAudioFileGlobalInfo_AvailableFormatIDs = AQ_FOUR_CC('f', 'm', 'i', 'd'),
    kAudioFileGlobalInfo_AllExtensions = AQ_FOUR_CC('a', 'l', 'x', 't'),
    kAudioFileGlobalInfo_AllHFSTypeCodes = AQ_FOUR_CC('a', 'h', 'f', 's'),
    kAudioFileGlobalInfo_AllUTIs = AQ_FOUR_CC('a', 'u', 't', 'i'),
    kAudioFileGlobalInfo_AllMIMETypes = AQ_FOUR_CC('a', 'm', 'i', 'm'),
    kAudioFileGlobalInfo_ExtensionsForType = AQ_FOUR_CC('f', 'e', 'x', 't'),
    kAudioFileGlobalInfo_HFSTypeCodesForType = AQ_FOUR_CC('f', 'h', 'f', 's'),
    kAudioFileGlobalInfo_UTIsForType = AQ_FOUR_CC('f', 'u', 't', 'i'),
    kAudioFileGlobalInfo_MIMETypesForType = AQ_FOUR_CC('f', 'm', 'i', 'm'),
    kAudioFileGlobalInfo_TypesForMIMEType = AQ_FOUR_CC('t', 'm', 'i', 'm'),
    kAudioFileGlobalInfo_TypesForUTI = AQ_FOUR_CC('t', 'u', 't', 'i'),
    kAudioFileGlobalInfo_TypesForHFSTypeCode = AQ_FOUR_CC('t', 'h', 'f', 's'),
    kAudioFileGlobalInfo_TypesForExtension = AQ_FOUR_CC('t', 'e', 'x', 't'),
};

/// The specifier of kAudioFileGlobalInfo_AvailableStreamDescriptionsForFormat.
typedef struct AudioFileTypeAndFormatID {
    AudioFileTypeID mFileType;
    UInt32 mFormatID;
} AudioFileTypeAndFormatID;

typedef struct AudioFilePacketTableInfo {
    SInt64 mNumberValidFrames;
    SInt32 mPrimingFrames;
    SInt32 mRemainderFrames;
} AudioFilePacketTableInfo;

typedef struct AudioFramePacketTranslation {
    SInt64 mFrame;
    SInt64 mPacket;
    UInt32 mFrameOffsetInPacket;
} AudioFramePacketTranslation;

typedef enum AQ_CF_OPTIONS_ATTRIBUTES AudioBytePacketTranslationFlags : UInt32 {
    kBytePacketTranslationFlag_IsEstimate = 1,
} AudioBytePacketTranslationFlags;

typedef struct AudioBytePacketTranslation {
    SInt64 mByte;
    SInt64 mPacket;
    UInt32 mByteOffsetInPacket;
    AudioBytePacketTranslationFlags mFlags;
} AudioBytePacketTranslation;

typedef struct AudioFormatListItem {
    AudioStreamBasicDescription mASBD;
    AudioChannelLayoutTag mChannelLayoutTag;
} AudioFormatListItem;

typedef struct AudioPacketRollDistanceTranslation {
    SInt64 mPacket;
    SInt64 mRollDistance;
} AudioPacketRollDistanceTranslation;

typedef struct AudioIndependentPacketTranslation {
    SInt64 mPacket;
    SInt64 mIndependentlyDecodablePacket;
} AudioIndependentPacketTranslation;

typedef OSStatus (*AudioFile_ReadProc)(void *inClientData, SInt64 inPosition, UInt32 requestCount, void *buffer, UInt32 *actualCount);
typedef OSStatus (*AudioFile_WriteProc)(void *inClientData, SInt64 inPosition, UInt32 requestCount, const void *buffer, UInt32 *actualCount);
typedef SInt64 (*AudioFile_GetSizeProc)(void *inClientData);
typedef OSStatus (*AudioFile_SetSizeProc)(void *inClientData, SInt64 inSize);

// MARK: AudioFileStream.h

typedef UInt32 AudioFileStreamPropertyID;
typedef struct OpaqueAudioFileStreamID *AudioFileStreamID;

typedef enum AQ_CF_OPTIONS_ATTRIBUTES AudioFileStreamPropertyFlags : UInt32 {
    kAudioFileStreamPropertyFlag_PropertyIsCached = 1,
    kAudioFileStreamPropertyFlag_CacheProperty = 2,
} AudioFileStreamPropertyFlags;

typedef enum AQ_CF_OPTIONS_ATTRIBUTES AudioFileStreamParseFlags : UInt32 {
    kAudioFileStreamParseFlag_Discontinuity = 1,
} AudioFileStreamParseFlags;

typedef enum AQ_CF_OPTIONS_ATTRIBUTES AudioFileStreamSeekFlags : UInt32 {
    kAudioFileStreamSeekFlag_OffsetIsEstimated = 1,
} AudioFileStreamSeekFlags;

enum AQ_CF_ENUM_ATTRIBUTES : OSStatus {
    kAudioFileStreamError_UnsupportedFileType = AQ_FOUR_CC('t', 'y', 'p', '?'),
    kAudioFileStreamError_UnsupportedDataFormat = AQ_FOUR_CC('f', 'm', 't', '?'),
    kAudioFileStreamError_UnsupportedProperty = AQ_FOUR_CC('p', 't', 'y', '?'),
    kAudioFileStreamError_BadPropertySize = AQ_FOUR_CC('!', 's', 'i', 'z'),
    kAudioFileStreamError_NotOptimized = AQ_FOUR_CC('o', 'p', 't', 'm'),
    kAudioFileStreamError_InvalidPacketOffset = AQ_FOUR_CC('p', 'c', 'k', '?'),
    kAudioFileStreamError_InvalidFile = AQ_FOUR_CC('d', 't', 'a', '?'),
    kAudioFileStreamError_ValueUnknown = AQ_FOUR_CC('u', 'n', 'k', '?'),
    kAudioFileStreamError_DataUnavailable = AQ_FOUR_CC('m', 'o', 'r', 'e'),
    kAudioFileStreamError_IllegalOperation = AQ_FOUR_CC('n', 'o', 'p', 'e'),
    kAudioFileStreamError_UnspecifiedError = AQ_FOUR_CC('w', 'h', 't', '?'),
    kAudioFileStreamError_DiscontinuityCantRecover = AQ_FOUR_CC('d', 's', 'c', '!'),
};

enum AQ_CF_ENUM_ATTRIBUTES : AudioFileStreamPropertyID {
    kAudioFileStreamProperty_ReadyToProducePackets = AQ_FOUR_CC('r', 'e', 'd', 'y'),
    kAudioFileStreamProperty_FileFormat = AQ_FOUR_CC('f', 'f', 'm', 't'),
    kAudioFileStreamProperty_DataFormat = AQ_FOUR_CC('d', 'f', 'm', 't'),
    kAudioFileStreamProperty_FormatList = AQ_FOUR_CC('f', 'l', 's', 't'),
    kAudioFileStreamProperty_MagicCookieData = AQ_FOUR_CC('m', 'g', 'i', 'c'),
    kAudioFileStreamProperty_AudioDataByteCount = AQ_FOUR_CC('b', 'c', 'n', 't'),
    kAudioFileStreamProperty_AudioDataPacketCount = AQ_FOUR_CC('p', 'c', 'n', 't'),
    kAudioFileStreamProperty_MaximumPacketSize = AQ_FOUR_CC('p', 's', 'z', 'e'),
    kAudioFileStreamProperty_DataOffset = AQ_FOUR_CC('d', 'o', 'f', 'f'),
    kAudioFileStreamProperty_ChannelLayout = AQ_FOUR_CC('c', 'm', 'a', 'p'),
    kAudioFileStreamProperty_PacketToFrame = AQ_FOUR_CC('p', 'k', 'f', 'r'),
    kAudioFileStreamProperty_FrameToPacket = AQ_FOUR_CC('f', 'r', 'p', 'k'),
    kAudioFileStreamProperty_RestrictsRandomAccess = AQ_FOUR_CC('r', 'r', 'a', 'p'),
    kAudioFileStreamProperty_PacketToRollDistance = AQ_FOUR_CC('p', 'k', 'r', 'l'),
    kAudioFileStreamProperty_PreviousIndependentPacket = AQ_FOUR_CC('p', 'i', 'n', 'd'),
    kAudioFileStreamProperty_NextIndependentPacket = AQ_FOUR_CC('n', 'i', 'n', 'd'),
    kAudioFileStreamProperty_PacketToDependencyInfo = AQ_FOUR_CC('p', 'k', 'd', 'p'),
    kAudioFileStreamProperty_PacketToByte = AQ_FOUR_CC('p', 'k', 'b', 'y'),
    kAudioFileStreamProperty_ByteToPacket = AQ_FOUR_CC('b', 'y', 'p', 'k'),
    kAudioFileStreamProperty_PacketTableInfo = AQ_FOUR_CC('p', 'n', 'f', 'o'),
    kAudioFileStreamProperty_PacketSizeUpperBound = AQ_FOUR_CC('p', 'k', 'u', 'b'),
    kAudioFileStreamProperty_AverageBytesPerPacket = AQ_FOUR_CC('a', 'b', 'p', 'p'),
    kAudioFileStreamProperty_BitRate = AQ_FOUR_CC('b', 'r', 'a', 't'),
    kAudioFileStreamProperty_InfoDictionary = AQ_FOUR_CC('i', 'n', 'f', 'o'),
};

typedef void (*AudioFileStream_PropertyListenerProc)(void *inClientData, AudioFileStreamID inAudioFileStream,
                                                     AudioFileStreamPropertyID inPropertyID,
                                                     AudioFileStreamPropertyFlags *ioFlags);
typedef void (*AudioFileStream_PacketsProc)(void *inClientData, UInt32 inNumberBytes, UInt32 inNumberPackets,
                                            const void *inInputData,
                                            AudioStreamPacketDescription *_Nullable inPacketDescriptions);

// MARK: AudioFormat.h

typedef UInt32 AudioFormatPropertyID;

enum AQ_CF_ENUM_ATTRIBUTES : AudioFormatPropertyID {
    kAudioFormatProperty_FormatInfo = AQ_FOUR_CC('f', 'm', 't', 'i'),
    kAudioFormatProperty_FormatName = AQ_FOUR_CC('f', 'n', 'a', 'm'),
    kAudioFormatProperty_EncodeFormatIDs = AQ_FOUR_CC('a', 'c', 'o', 'f'),
    kAudioFormatProperty_DecodeFormatIDs = AQ_FOUR_CC('a', 'c', 'i', 'f'),
    kAudioFormatProperty_FormatList = AQ_FOUR_CC('f', 'l', 's', 't'),
    kAudioFormatProperty_ASBDFromESDS = AQ_FOUR_CC('e', 's', 's', 'd'),
    kAudioFormatProperty_ChannelLayoutFromESDS = AQ_FOUR_CC('e', 's', 'c', 'l'),
    kAudioFormatProperty_OutputFormatList = AQ_FOUR_CC('o', 'f', 'l', 's'),
    kAudioFormatProperty_FirstPlayableFormatFromList = AQ_FOUR_CC('f', 'p', 'f', 'l'),
    kAudioFormatProperty_FormatIsVBR = AQ_FOUR_CC('f', 'v', 'b', 'r'),
    kAudioFormatProperty_FormatIsExternallyFramed = AQ_FOUR_CC('f', 'e', 'x', 'f'),
    kAudioFormatProperty_FormatIsEncrypted = AQ_FOUR_CC('c', 'r', 'y', 'p'),
    kAudioFormatProperty_Encoders = AQ_FOUR_CC('a', 'v', 'e', 'n'),
    kAudioFormatProperty_Decoders = AQ_FOUR_CC('a', 'v', 'd', 'e'),
    kAudioFormatProperty_AvailableEncodeBitRates = AQ_FOUR_CC('a', 'e', 'b', 'r'),
    kAudioFormatProperty_AvailableEncodeSampleRates = AQ_FOUR_CC('a', 'e', 's', 'r'),
    kAudioFormatProperty_AvailableEncodeChannelLayoutTags = AQ_FOUR_CC('a', 'e', 'c', 'l'),
    kAudioFormatProperty_AvailableEncodeNumberChannels = AQ_FOUR_CC('a', 'v', 'n', 'c'),
    kAudioFormatProperty_ASBDFromMPEGPacket = AQ_FOUR_CC('a', 'd', 'm', 'p'),
    kAudioFormatProperty_BitmapForLayoutTag = AQ_FOUR_CC('b', 'm', 't', 'g'),
    kAudioFormatProperty_NumberOfChannelsForLayout = AQ_FOUR_CC('n', 'c', 'h', 'm'),
    kAudioFormatProperty_ChannelLayoutForTag = AQ_FOUR_CC('c', 'm', 'p', 'l'),
    kAudioFormatProperty_TagForChannelLayout = AQ_FOUR_CC('c', 'm', 'p', 't'),
    kAudioFormatProperty_ChannelLayoutForBitmap = AQ_FOUR_CC('c', 'm', 'p', 'b'),
    kAudioFormatProperty_TagsForNumberOfChannels = AQ_FOUR_CC('t', 'a', 'g', 'c'),
};

typedef struct AudioFormatInfo {
    AudioStreamBasicDescription mASBD;
    const void *_Nullable mMagicCookie;
    UInt32 mMagicCookieSize;
} AudioFormatInfo;

enum AQ_CF_ENUM_ATTRIBUTES : OSStatus {
    kAudioFormatUnspecifiedError = AQ_FOUR_CC('w', 'h', 'a', 't'),
    kAudioFormatUnsupportedPropertyError = AQ_FOUR_CC('p', 'r', 'o', 'p'),
    kAudioFormatBadPropertySizeError = AQ_FOUR_CC('!', 's', 'i', 'z'),
    kAudioFormatBadSpecifierSizeError = AQ_FOUR_CC('!', 's', 'p', 'c'),
    kAudioFormatUnsupportedDataFormatError = AQ_FOUR_CC('f', 'm', 't', '?'),
    kAudioFormatUnknownFormatError = AQ_FOUR_CC('!', 'f', 'm', 't'),
};

// MARK: AudioConverter.h

typedef struct OpaqueAudioConverter *AudioConverterRef;
typedef UInt32 AudioConverterPropertyID;

enum AQ_CF_ENUM_ATTRIBUTES : AudioConverterPropertyID {
    kAudioConverterPropertyMinimumInputBufferSize = AQ_FOUR_CC('m', 'i', 'b', 's'),
    kAudioConverterPropertyMinimumOutputBufferSize = AQ_FOUR_CC('m', 'o', 'b', 's'),
    kAudioConverterPropertyMaximumInputPacketSize = AQ_FOUR_CC('x', 'i', 'p', 's'),
    kAudioConverterPropertyMaximumOutputPacketSize = AQ_FOUR_CC('x', 'o', 'p', 's'),
    kAudioConverterPropertyCalculateInputBufferSize = AQ_FOUR_CC('c', 'i', 'b', 's'),
    kAudioConverterPropertyCalculateOutputBufferSize = AQ_FOUR_CC('c', 'o', 'b', 's'),
    kAudioConverterSampleRateConverterComplexity = AQ_FOUR_CC('s', 'r', 'c', 'a'),
    kAudioConverterSampleRateConverterQuality = AQ_FOUR_CC('s', 'r', 'c', 'q'),
    kAudioConverterCodecQuality = AQ_FOUR_CC('c', 'd', 'q', 'u'),
    kAudioConverterPrimeMethod = AQ_FOUR_CC('p', 'r', 'm', 'm'),
    kAudioConverterPrimeInfo = AQ_FOUR_CC('p', 'r', 'i', 'm'),
    kAudioConverterChannelMap = AQ_FOUR_CC('c', 'h', 'm', 'p'),
    kAudioConverterDecompressionMagicCookie = AQ_FOUR_CC('d', 'm', 'g', 'c'),
    kAudioConverterCompressionMagicCookie = AQ_FOUR_CC('c', 'm', 'g', 'c'),
    kAudioConverterEncodeBitRate = AQ_FOUR_CC('b', 'r', 'a', 't'),
    kAudioConverterInputChannelLayout = AQ_FOUR_CC('i', 'c', 'l', ' '),
    kAudioConverterOutputChannelLayout = AQ_FOUR_CC('o', 'c', 'l', ' '),
    kAudioConverterApplicableEncodeBitRates = AQ_FOUR_CC('a', 'e', 'b', 'r'),
    kAudioConverterAvailableEncodeBitRates = AQ_FOUR_CC('v', 'e', 'b', 'r'),
    kAudioConverterApplicableEncodeSampleRates = AQ_FOUR_CC('a', 'e', 's', 'r'),
    kAudioConverterAvailableEncodeSampleRates = AQ_FOUR_CC('v', 'e', 's', 'r'),
    kAudioConverterCurrentOutputStreamDescription = AQ_FOUR_CC('a', 'c', 'o', 'd'),
    kAudioConverterCurrentInputStreamDescription = AQ_FOUR_CC('a', 'c', 'i', 'd'),
    kAudioConverterPropertySettings = AQ_FOUR_CC('a', 'c', 'p', 's'),
    kAudioConverterPropertyBitDepthHint = AQ_FOUR_CC('a', 'c', 'b', 'd'),
    kAudioConverterPropertyFormatList = AQ_FOUR_CC('f', 'l', 's', 't'),
};

enum AQ_CF_ENUM_ATTRIBUTES : UInt32 {
    kAudioConverterQuality_Max = 0x7F,
    kAudioConverterQuality_High = 0x60,
    kAudioConverterQuality_Medium = 0x40,
    kAudioConverterQuality_Low = 0x20,
    kAudioConverterQuality_Min = 0,
};

enum AQ_CF_ENUM_ATTRIBUTES : UInt32 {
    kConverterPrimeMethod_Pre = 0,
    kConverterPrimeMethod_Normal = 1,
    kConverterPrimeMethod_None = 2,
};

typedef struct AudioConverterPrimeInfo {
    UInt32 leadingFrames;
    UInt32 trailingFrames;
} AudioConverterPrimeInfo;

enum AQ_CF_ENUM_ATTRIBUTES : OSStatus {
    kAudioConverterErr_FormatNotSupported = AQ_FOUR_CC('f', 'm', 't', '?'),
    kAudioConverterErr_OperationNotSupported = 0x6F703F3F,
    kAudioConverterErr_PropertyNotSupported = AQ_FOUR_CC('p', 'r', 'o', 'p'),
    kAudioConverterErr_InvalidInputSize = AQ_FOUR_CC('i', 'n', 's', 'z'),
    kAudioConverterErr_InvalidOutputSize = AQ_FOUR_CC('o', 't', 's', 'z'),
    kAudioConverterErr_UnspecifiedError = AQ_FOUR_CC('w', 'h', 'a', 't'),
    kAudioConverterErr_BadPropertySizeError = AQ_FOUR_CC('!', 's', 'i', 'z'),
    kAudioConverterErr_RequiresPacketDescriptionsError = AQ_FOUR_CC('!', 'p', 'k', 'd'),
    kAudioConverterErr_InputSampleRateOutOfRange = AQ_FOUR_CC('!', 'i', 's', 'r'),
    kAudioConverterErr_OutputSampleRateOutOfRange = AQ_FOUR_CC('!', 'o', 's', 'r'),
};

typedef OSStatus (*AudioConverterComplexInputDataProc)(AudioConverterRef inAudioConverter, UInt32 *ioNumberDataPackets,
                                                       AudioBufferList *ioData,
                                                       AudioStreamPacketDescription *_Nullable *_Nullable outDataPacketDescription,
                                                       void *_Nullable inUserData);

// MARK: ExtendedAudioFile.h

typedef struct OpaqueExtAudioFile *ExtAudioFileRef;
typedef UInt32 ExtAudioFilePropertyID;

enum AQ_CF_ENUM_ATTRIBUTES : ExtAudioFilePropertyID {
    kExtAudioFileProperty_FileDataFormat = AQ_FOUR_CC('f', 'f', 'm', 't'),
    kExtAudioFileProperty_FileChannelLayout = AQ_FOUR_CC('f', 'c', 'l', 'o'),
    kExtAudioFileProperty_ClientDataFormat = AQ_FOUR_CC('c', 'f', 'm', 't'),
    kExtAudioFileProperty_ClientChannelLayout = AQ_FOUR_CC('c', 'c', 'l', 'o'),
    kExtAudioFileProperty_CodecManufacturer = AQ_FOUR_CC('c', 'm', 'a', 'n'),
    kExtAudioFileProperty_AudioConverter = AQ_FOUR_CC('a', 'c', 'n', 'v'),
    kExtAudioFileProperty_AudioFile = AQ_FOUR_CC('a', 'f', 'i', 'l'),
    kExtAudioFileProperty_FileMaxPacketSize = AQ_FOUR_CC('f', 'm', 'p', 's'),
    kExtAudioFileProperty_ClientMaxPacketSize = AQ_FOUR_CC('c', 'm', 'p', 's'),
    kExtAudioFileProperty_FileLengthFrames = AQ_FOUR_CC('#', 'f', 'r', 'm'),
    kExtAudioFileProperty_ConverterConfig = AQ_FOUR_CC('a', 'c', 'c', 'f'),
    kExtAudioFileProperty_IOBufferSizeBytes = AQ_FOUR_CC('i', 'o', 'b', 's'),
    kExtAudioFileProperty_IOBuffer = AQ_FOUR_CC('i', 'o', 'b', 'f'),
    kExtAudioFileProperty_PacketTable = AQ_FOUR_CC('x', 'p', 't', 'i'),
};

enum AQ_CF_ENUM_ATTRIBUTES : OSStatus {
    kExtAudioFileError_InvalidProperty = -66561,
    kExtAudioFileError_InvalidPropertySize = -66562,
    kExtAudioFileError_NonPCMClientFormat = -66563,
    kExtAudioFileError_InvalidChannelMap = -66564,
    kExtAudioFileError_InvalidOperationOrder = -66565,
    kExtAudioFileError_InvalidDataFormat = -66566,
    kExtAudioFileError_MaxPacketSizeUnknown = -66567,
    kExtAudioFileError_InvalidSeek = -66568,
    kExtAudioFileError_AsyncWriteTooLarge = -66569,
    kExtAudioFileError_AsyncWriteBufferOverflow = -66570,
};

// MARK: AudioHardware (CoreAudio's HAL, as far as audio code asks it)

typedef UInt32 AudioObjectID;
typedef AudioObjectID AudioDeviceID;
typedef UInt32 AudioObjectPropertySelector;
typedef UInt32 AudioObjectPropertyScope;
typedef UInt32 AudioObjectPropertyElement;

typedef struct AudioObjectPropertyAddress {
    AudioObjectPropertySelector mSelector;
    AudioObjectPropertyScope mScope;
    AudioObjectPropertyElement mElement;
} AudioObjectPropertyAddress;

// Untyped in Apple's headers: these import as Int.
enum {
    kAudioObjectSystemObject = 1,
    kAudioObjectUnknown = 0,
    kAudioDeviceUnknown = 0,
};

enum AQ_CF_ENUM_ATTRIBUTES : AudioObjectPropertyScope {
    kAudioObjectPropertyScopeGlobal = AQ_FOUR_CC('g', 'l', 'o', 'b'),
    kAudioObjectPropertyScopeInput = AQ_FOUR_CC('i', 'n', 'p', 't'),
    kAudioObjectPropertyScopeOutput = AQ_FOUR_CC('o', 'u', 't', 'p'),
    kAudioObjectPropertyScopePlayThrough = AQ_FOUR_CC('p', 't', 'r', 'u'),
    kAudioDevicePropertyScopeInput = AQ_FOUR_CC('i', 'n', 'p', 't'),
    kAudioDevicePropertyScopeOutput = AQ_FOUR_CC('o', 'u', 't', 'p'),
};

enum AQ_CF_ENUM_ATTRIBUTES : AudioObjectPropertyElement {
    kAudioObjectPropertyElementMain = 0,
    kAudioObjectPropertyElementMaster = 0,
    kAudioObjectPropertyElementWildcard = 0xFFFFFFFFU,
};

enum AQ_CF_ENUM_ATTRIBUTES : AudioObjectPropertySelector {
    kAudioObjectPropertySelectorWildcard = AQ_FOUR_CC('*', '*', '*', '*'),
    kAudioObjectPropertyName = AQ_FOUR_CC('l', 'n', 'a', 'm'),
    kAudioObjectPropertyManufacturer = AQ_FOUR_CC('l', 'm', 'a', 'k'),
    kAudioHardwarePropertyDevices = AQ_FOUR_CC('d', 'e', 'v', '#'),
    kAudioHardwarePropertyDefaultInputDevice = AQ_FOUR_CC('d', 'I', 'n', ' '),
    kAudioHardwarePropertyDefaultOutputDevice = AQ_FOUR_CC('d', 'O', 'u', 't'),
    kAudioHardwarePropertyDefaultSystemOutputDevice = AQ_FOUR_CC('s', 'O', 'u', 't'),
    kAudioDevicePropertyDeviceUID = AQ_FOUR_CC('u', 'i', 'd', ' '),
    kAudioDevicePropertyDeviceNameCFString = AQ_FOUR_CC('l', 'n', 'a', 'm'),
    kAudioDevicePropertyNominalSampleRate = AQ_FOUR_CC('n', 's', 'r', 't'),
    kAudioDevicePropertyStreamConfiguration = AQ_FOUR_CC('s', 'l', 'a', 'y'),
    kAudioDevicePropertyStreamFormat = AQ_FOUR_CC('s', 'f', 'm', 't'),
    kAudioDevicePropertyBufferFrameSize = AQ_FOUR_CC('f', 's', 'i', 'z'),
    kAudioDevicePropertyDeviceIsAlive = AQ_FOUR_CC('l', 'i', 'v', 'n'),
};

enum AQ_CF_ENUM_ATTRIBUTES : OSStatus {
    kAudioHardwareNoError = 0,
    kAudioHardwareNotRunningError = AQ_FOUR_CC('s', 't', 'o', 'p'),
    kAudioHardwareUnspecifiedError = AQ_FOUR_CC('w', 'h', 'a', 't'),
    kAudioHardwareUnknownPropertyError = AQ_FOUR_CC('w', 'h', 'o', '?'),
    kAudioHardwareBadPropertySizeError = AQ_FOUR_CC('!', 's', 'i', 'z'),
    kAudioHardwareIllegalOperationError = AQ_FOUR_CC('n', 'o', 'p', 'e'),
    kAudioHardwareBadObjectError = AQ_FOUR_CC('!', 'o', 'b', 'j'),
    kAudioHardwareBadDeviceError = AQ_FOUR_CC('!', 'd', 'e', 'v'),
    kAudioHardwareBadStreamError = AQ_FOUR_CC('!', 's', 't', 'r'),
    kAudioHardwareUnsupportedOperationError = AQ_FOUR_CC('u', 'n', 'o', 'p'),
    kAudioDeviceUnsupportedFormatError = AQ_FOUR_CC('!', 'd', 'a', 't'),
    kAudioDevicePermissionsError = AQ_FOUR_CC('!', 'h', 'o', 'g'),
};

#pragma clang assume_nonnull end

#endif
