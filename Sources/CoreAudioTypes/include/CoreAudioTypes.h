// CoreAudioTypes for Linux: the C declarations Apple's CoreAudioTypes framework (and the parts of
// MacTypes.h audio code uses) makes, with Apple's names, layouts and values, written so that Swift
// imports them on Linux exactly as it does on a Mac: structs with a zero `init()` and a memberwise
// init, CF_OPTIONS as option sets, CF_ENUMs as enums, typed and untyped constants with the types
// Apple's headers give them.
#ifndef AQ_COREAUDIOTYPES_H
#define AQ_COREAUDIOTYPES_H

#include <stdint.h>

// What CF_ENUM and CF_OPTIONS expand to, for a C compiler that only accepts the defining form.
#define AQ_CF_ENUM_ATTRIBUTES __attribute__((enum_extensibility(open)))
#define AQ_CF_OPTIONS_ATTRIBUTES __attribute__((flag_enum, enum_extensibility(open)))
// A four-character code, as the multi-character literal 'abcd' in Apple's headers evaluates.
#define AQ_FOUR_CC(a, b, c, d) ((uint32_t)(((uint32_t)(a) << 24) | ((uint32_t)(b) << 16) | ((uint32_t)(c) << 8) | (uint32_t)(d)))

#pragma clang assume_nonnull begin

// MARK: MacTypes.h

typedef uint8_t UInt8;
typedef int8_t SInt8;
typedef uint16_t UInt16;
typedef int16_t SInt16;
typedef uint32_t UInt32;
typedef int32_t SInt32;
typedef uint64_t UInt64;
typedef int64_t SInt64;
typedef float Float32;
typedef double Float64;
typedef SInt32 OSStatus;
typedef SInt16 OSErr;
typedef UInt32 FourCharCode;
typedef FourCharCode OSType;

enum AQ_CF_ENUM_ATTRIBUTES : OSStatus {
    noErr = 0,
    paramErr = -50,
    unimpErr = -4,
    kAudio_UnimplementedError = -4,
    kAudio_FileNotFoundError = -43,
    kAudio_FilePermissionError = -54,
    kAudio_TooManyFilesOpenError = -42,
    kAudio_BadFilePathError = AQ_FOUR_CC('!', 'p', 't', 'h'),
    kAudio_ParamError = -50,
    kAudio_MemFullError = -108,
};

// MARK: AudioStreamBasicDescription

typedef UInt32 AudioFormatID;
typedef UInt32 AudioFormatFlags;

typedef struct AudioStreamBasicDescription {
    Float64 mSampleRate;
    AudioFormatID mFormatID;
    AudioFormatFlags mFormatFlags;
    UInt32 mBytesPerPacket;
    UInt32 mFramesPerPacket;
    UInt32 mBytesPerFrame;
    UInt32 mChannelsPerFrame;
    UInt32 mBitsPerChannel;
    UInt32 mReserved;
} AudioStreamBasicDescription;

enum AQ_CF_ENUM_ATTRIBUTES : AudioFormatID {
    kAudioFormatLinearPCM = AQ_FOUR_CC('l', 'p', 'c', 'm'),
    kAudioFormatAC3 = AQ_FOUR_CC('a', 'c', '-', '3'),
    kAudioFormat60958AC3 = AQ_FOUR_CC('c', 'a', 'c', '3'),
    kAudioFormatAppleIMA4 = AQ_FOUR_CC('i', 'm', 'a', '4'),
    kAudioFormatMPEG4AAC = AQ_FOUR_CC('a', 'a', 'c', ' '),
    kAudioFormatMPEG4CELP = AQ_FOUR_CC('c', 'e', 'l', 'p'),
    kAudioFormatMPEG4HVXC = AQ_FOUR_CC('h', 'v', 'x', 'c'),
    kAudioFormatMPEG4TwinVQ = AQ_FOUR_CC('t', 'w', 'v', 'q'),
    kAudioFormatMACE3 = AQ_FOUR_CC('M', 'A', 'C', '3'),
    kAudioFormatMACE6 = AQ_FOUR_CC('M', 'A', 'C', '6'),
    kAudioFormatULaw = AQ_FOUR_CC('u', 'l', 'a', 'w'),
    kAudioFormatALaw = AQ_FOUR_CC('a', 'l', 'a', 'w'),
    kAudioFormatQDesign = AQ_FOUR_CC('Q', 'D', 'M', 'C'),
    kAudioFormatQDesign2 = AQ_FOUR_CC('Q', 'D', 'M', '2'),
    kAudioFormatQUALCOMM = AQ_FOUR_CC('Q', 'c', 'l', 'p'),
    kAudioFormatMPEGLayer1 = AQ_FOUR_CC('.', 'm', 'p', '1'),
    kAudioFormatMPEGLayer2 = AQ_FOUR_CC('.', 'm', 'p', '2'),
    kAudioFormatMPEGLayer3 = AQ_FOUR_CC('.', 'm', 'p', '3'),
    kAudioFormatTimeCode = AQ_FOUR_CC('t', 'i', 'm', 'e'),
    kAudioFormatMIDIStream = AQ_FOUR_CC('m', 'i', 'd', 'i'),
    kAudioFormatParameterValueStream = AQ_FOUR_CC('a', 'p', 'v', 's'),
    kAudioFormatAppleLossless = AQ_FOUR_CC('a', 'l', 'a', 'c'),
    kAudioFormatMPEG4AAC_HE = AQ_FOUR_CC('a', 'a', 'c', 'h'),
    kAudioFormatMPEG4AAC_LD = AQ_FOUR_CC('a', 'a', 'c', 'l'),
    kAudioFormatMPEG4AAC_ELD = AQ_FOUR_CC('a', 'a', 'c', 'e'),
    kAudioFormatMPEG4AAC_ELD_SBR = AQ_FOUR_CC('a', 'a', 'c', 'f'),
    kAudioFormatMPEG4AAC_ELD_V2 = AQ_FOUR_CC('a', 'a', 'c', 'g'),
    kAudioFormatMPEG4AAC_HE_V2 = AQ_FOUR_CC('a', 'a', 'c', 'p'),
    kAudioFormatMPEG4AAC_Spatial = AQ_FOUR_CC('a', 'a', 'c', 's'),
    kAudioFormatMPEGD_USAC = AQ_FOUR_CC('u', 's', 'a', 'c'),
    kAudioFormatAMR = AQ_FOUR_CC('s', 'a', 'm', 'r'),
    kAudioFormatAMR_WB = AQ_FOUR_CC('s', 'a', 'w', 'b'),
    kAudioFormatAudible = AQ_FOUR_CC('A', 'U', 'D', 'B'),
    kAudioFormatiLBC = AQ_FOUR_CC('i', 'l', 'b', 'c'),
    kAudioFormatDVIIntelIMA = 0x6D730011,
    kAudioFormatMicrosoftGSM = 0x6D730031,
    kAudioFormatAES3 = AQ_FOUR_CC('a', 'e', 's', '3'),
    kAudioFormatEnhancedAC3 = AQ_FOUR_CC('e', 'c', '-', '3'),
    kAudioFormatFLAC = AQ_FOUR_CC('f', 'l', 'a', 'c'),
    kAudioFormatOpus = AQ_FOUR_CC('o', 'p', 'u', 's'),
    kAudioFormatAPAC = AQ_FOUR_CC('a', 'p', 'a', 'c'),
};

enum AQ_CF_ENUM_ATTRIBUTES : AudioFormatFlags {
    kAudioFormatFlagIsFloat = (1U << 0),
    kAudioFormatFlagIsBigEndian = (1U << 1),
    kAudioFormatFlagIsSignedInteger = (1U << 2),
    kAudioFormatFlagIsPacked = (1U << 3),
    kAudioFormatFlagIsAlignedHigh = (1U << 4),
    kAudioFormatFlagIsNonInterleaved = (1U << 5),
    kAudioFormatFlagIsNonMixable = (1U << 6),
    kAudioFormatFlagsAreAllClear = 0x80000000U,

    kLinearPCMFormatFlagIsFloat = kAudioFormatFlagIsFloat,
    kLinearPCMFormatFlagIsBigEndian = kAudioFormatFlagIsBigEndian,
    kLinearPCMFormatFlagIsSignedInteger = kAudioFormatFlagIsSignedInteger,
    kLinearPCMFormatFlagIsPacked = kAudioFormatFlagIsPacked,
    kLinearPCMFormatFlagIsAlignedHigh = kAudioFormatFlagIsAlignedHigh,
    kLinearPCMFormatFlagIsNonInterleaved = kAudioFormatFlagIsNonInterleaved,
    kLinearPCMFormatFlagIsNonMixable = kAudioFormatFlagIsNonMixable,
    kLinearPCMFormatFlagsSampleFractionShift = 7,
    kLinearPCMFormatFlagsSampleFractionMask = (0x3FU << kLinearPCMFormatFlagsSampleFractionShift),
    kLinearPCMFormatFlagsAreAllClear = kAudioFormatFlagsAreAllClear,

    kAppleLosslessFormatFlag_16BitSourceData = 1,
    kAppleLosslessFormatFlag_20BitSourceData = 2,
    kAppleLosslessFormatFlag_24BitSourceData = 3,
    kAppleLosslessFormatFlag_32BitSourceData = 4,
};

// Native byte order on every Linux target this builds for (little-endian).
enum AQ_CF_ENUM_ATTRIBUTES : AudioFormatFlags {
    kAudioFormatFlagsNativeEndian = 0,
    kAudioFormatFlagsCanonical = kAudioFormatFlagIsFloat | kAudioFormatFlagsNativeEndian | kAudioFormatFlagIsPacked,
    kAudioFormatFlagsAudioUnitCanonical = kAudioFormatFlagIsFloat | kAudioFormatFlagsNativeEndian | kAudioFormatFlagIsPacked | kAudioFormatFlagIsNonInterleaved,
    kAudioFormatFlagsNativeFloatPacked = kAudioFormatFlagIsFloat | kAudioFormatFlagsNativeEndian | kAudioFormatFlagIsPacked,
};

typedef struct AudioStreamPacketDescription {
    SInt64 mStartOffset;
    UInt32 mVariableFramesInPacket;
    UInt32 mDataByteSize;
} AudioStreamPacketDescription;

typedef struct AudioValueRange {
    Float64 mMinimum;
    Float64 mMaximum;
} AudioValueRange;

typedef struct AudioValueTranslation {
    void *mInputData;
    UInt32 mInputDataSize;
    void *mOutputData;
    UInt32 mOutputDataSize;
} AudioValueTranslation;

typedef struct AudioClassDescription {
    OSType mType;
    OSType mSubType;
    OSType mManufacturer;
} AudioClassDescription;

// MARK: Buffers

typedef struct AudioBuffer {
    UInt32 mNumberChannels;
    UInt32 mDataByteSize;
    void *_Nullable mData;
} AudioBuffer;

typedef struct AudioBufferList {
    UInt32 mNumberBuffers;
    AudioBuffer mBuffers[1];
} AudioBufferList;

// MARK: Time stamps

typedef enum AQ_CF_ENUM_ATTRIBUTES SMPTETimeType : UInt32 {
    kSMPTETimeType24 = 0,
    kSMPTETimeType25 = 1,
    kSMPTETimeType30Drop = 2,
    kSMPTETimeType30 = 3,
    kSMPTETimeType2997 = 4,
    kSMPTETimeType2997Drop = 5,
    kSMPTETimeType60 = 6,
    kSMPTETimeType5994 = 7,
    kSMPTETimeType60Drop = 8,
    kSMPTETimeType5994Drop = 9,
    kSMPTETimeType50 = 10,
    kSMPTETimeType2398 = 11,
} SMPTETimeType;

typedef enum AQ_CF_OPTIONS_ATTRIBUTES SMPTETimeFlags : UInt32 {
    kSMPTETimeUnknown = 0,
    kSMPTETimeValid = (1U << 0),
    kSMPTETimeRunning = (1U << 1),
} SMPTETimeFlags;

typedef struct SMPTETime {
    SInt16 mSubframes;
    SInt16 mSubframeDivisor;
    UInt32 mCounter;
    SMPTETimeType mType;
    SMPTETimeFlags mFlags;
    SInt16 mHours;
    SInt16 mMinutes;
    SInt16 mSeconds;
    SInt16 mFrames;
} SMPTETime;

typedef enum AQ_CF_OPTIONS_ATTRIBUTES AudioTimeStampFlags : UInt32 {
    kAudioTimeStampNothingValid = 0,
    kAudioTimeStampSampleTimeValid = (1U << 0),
    kAudioTimeStampHostTimeValid = (1U << 1),
    kAudioTimeStampRateScalarValid = (1U << 2),
    kAudioTimeStampWordClockTimeValid = (1U << 3),
    kAudioTimeStampSMPTETimeValid = (1U << 4),
    kAudioTimeStampSampleHostTimeValid = (kAudioTimeStampSampleTimeValid | kAudioTimeStampHostTimeValid),
} AudioTimeStampFlags;

typedef struct AudioTimeStamp {
    Float64 mSampleTime;
    UInt64 mHostTime;
    Float64 mRateScalar;
    UInt64 mWordClockTime;
    SMPTETime mSMPTETime;
    AudioTimeStampFlags mFlags;
    UInt32 mReserved;
} AudioTimeStamp;

// MARK: Channel layouts

typedef UInt32 AudioChannelLabel;
typedef UInt32 AudioChannelLayoutTag;

enum AQ_CF_ENUM_ATTRIBUTES : AudioChannelLabel {
    kAudioChannelLabel_Unknown = 0xFFFFFFFFU,
    kAudioChannelLabel_Unused = 0,
    kAudioChannelLabel_UseCoordinates = 100,
    kAudioChannelLabel_Left = 1,
    kAudioChannelLabel_Right = 2,
    kAudioChannelLabel_Center = 3,
    kAudioChannelLabel_LFEScreen = 4,
    kAudioChannelLabel_LeftSurround = 5,
    kAudioChannelLabel_RightSurround = 6,
    kAudioChannelLabel_LeftCenter = 7,
    kAudioChannelLabel_RightCenter = 8,
    kAudioChannelLabel_CenterSurround = 9,
    kAudioChannelLabel_LeftSurroundDirect = 10,
    kAudioChannelLabel_RightSurroundDirect = 11,
    kAudioChannelLabel_TopCenterSurround = 12,
    kAudioChannelLabel_VerticalHeightLeft = 13,
    kAudioChannelLabel_VerticalHeightCenter = 14,
    kAudioChannelLabel_VerticalHeightRight = 15,
    kAudioChannelLabel_TopBackLeft = 16,
    kAudioChannelLabel_TopBackCenter = 17,
    kAudioChannelLabel_TopBackRight = 18,
    kAudioChannelLabel_RearSurroundLeft = 33,
    kAudioChannelLabel_RearSurroundRight = 34,
    kAudioChannelLabel_LeftWide = 35,
    kAudioChannelLabel_RightWide = 36,
    kAudioChannelLabel_LFE2 = 37,
    kAudioChannelLabel_LeftTotal = 38,
    kAudioChannelLabel_RightTotal = 39,
    kAudioChannelLabel_HearingImpaired = 40,
    kAudioChannelLabel_Narration = 41,
    kAudioChannelLabel_Mono = 42,
    kAudioChannelLabel_DialogCentricMix = 43,
    kAudioChannelLabel_CenterSurroundDirect = 44,
    kAudioChannelLabel_Haptic = 45,
    kAudioChannelLabel_Discrete = 400,
    kAudioChannelLabel_Discrete_0 = (1U << 16) | 0,
};

typedef enum AQ_CF_OPTIONS_ATTRIBUTES AudioChannelBitmap : UInt32 {
    kAudioChannelBit_Left = (1U << 0),
    kAudioChannelBit_Right = (1U << 1),
    kAudioChannelBit_Center = (1U << 2),
    kAudioChannelBit_LFEScreen = (1U << 3),
    kAudioChannelBit_LeftSurround = (1U << 4),
    kAudioChannelBit_RightSurround = (1U << 5),
    kAudioChannelBit_LeftCenter = (1U << 6),
    kAudioChannelBit_RightCenter = (1U << 7),
    kAudioChannelBit_CenterSurround = (1U << 8),
    kAudioChannelBit_LeftSurroundDirect = (1U << 9),
    kAudioChannelBit_RightSurroundDirect = (1U << 10),
    kAudioChannelBit_TopCenterSurround = (1U << 11),
    kAudioChannelBit_VerticalHeightLeft = (1U << 12),
    kAudioChannelBit_VerticalHeightCenter = (1U << 13),
    kAudioChannelBit_VerticalHeightRight = (1U << 14),
    kAudioChannelBit_TopBackLeft = (1U << 15),
    kAudioChannelBit_TopBackCenter = (1U << 16),
    kAudioChannelBit_TopBackRight = (1U << 17),
} AudioChannelBitmap;

typedef enum AQ_CF_OPTIONS_ATTRIBUTES AudioChannelFlags : UInt32 {
    kAudioChannelFlags_AllOff = 0,
    kAudioChannelFlags_RectangularCoordinates = (1U << 0),
    kAudioChannelFlags_SphericalCoordinates = (1U << 1),
    kAudioChannelFlags_Meters = (1U << 2),
} AudioChannelFlags;

typedef struct AudioChannelDescription {
    AudioChannelLabel mChannelLabel;
    AudioChannelFlags mChannelFlags;
    Float32 mCoordinates[3];
} AudioChannelDescription;

typedef struct AudioChannelLayout {
    AudioChannelLayoutTag mChannelLayoutTag;
    AudioChannelBitmap mChannelBitmap;
    UInt32 mNumberChannelDescriptions;
    AudioChannelDescription mChannelDescriptions[1];
} AudioChannelLayout;

enum AQ_CF_ENUM_ATTRIBUTES : AudioChannelLayoutTag {
    kAudioChannelLayoutTag_UseChannelDescriptions = (0U << 16) | 0,
    kAudioChannelLayoutTag_UseChannelBitmap = (1U << 16) | 0,
    kAudioChannelLayoutTag_Mono = (100U << 16) | 1,
    kAudioChannelLayoutTag_Stereo = (101U << 16) | 2,
    kAudioChannelLayoutTag_StereoHeadphones = (102U << 16) | 2,
    kAudioChannelLayoutTag_MatrixStereo = (103U << 16) | 2,
    kAudioChannelLayoutTag_MidSide = (104U << 16) | 2,
    kAudioChannelLayoutTag_XY = (105U << 16) | 2,
    kAudioChannelLayoutTag_Binaural = (106U << 16) | 2,
    kAudioChannelLayoutTag_Ambisonic_B_Format = (107U << 16) | 4,
    kAudioChannelLayoutTag_Quadraphonic = (108U << 16) | 4,
    kAudioChannelLayoutTag_Pentagonal = (109U << 16) | 5,
    kAudioChannelLayoutTag_Hexagonal = (110U << 16) | 6,
    kAudioChannelLayoutTag_Octagonal = (111U << 16) | 8,
    kAudioChannelLayoutTag_Cube = (112U << 16) | 8,
    kAudioChannelLayoutTag_MPEG_1_0 = kAudioChannelLayoutTag_Mono,
    kAudioChannelLayoutTag_MPEG_2_0 = kAudioChannelLayoutTag_Stereo,
    kAudioChannelLayoutTag_MPEG_3_0_A = (113U << 16) | 3,
    kAudioChannelLayoutTag_MPEG_3_0_B = (114U << 16) | 3,
    kAudioChannelLayoutTag_MPEG_4_0_A = (115U << 16) | 4,
    kAudioChannelLayoutTag_MPEG_4_0_B = (116U << 16) | 4,
    kAudioChannelLayoutTag_MPEG_5_0_A = (117U << 16) | 5,
    kAudioChannelLayoutTag_MPEG_5_0_B = (118U << 16) | 5,
    kAudioChannelLayoutTag_MPEG_5_0_C = (119U << 16) | 5,
    kAudioChannelLayoutTag_MPEG_5_0_D = (120U << 16) | 5,
    kAudioChannelLayoutTag_MPEG_5_1_A = (121U << 16) | 6,
    kAudioChannelLayoutTag_MPEG_5_1_B = (122U << 16) | 6,
    kAudioChannelLayoutTag_MPEG_5_1_C = (123U << 16) | 6,
    kAudioChannelLayoutTag_MPEG_5_1_D = (124U << 16) | 6,
    kAudioChannelLayoutTag_MPEG_6_1_A = (125U << 16) | 7,
    kAudioChannelLayoutTag_MPEG_7_1_A = (126U << 16) | 8,
    kAudioChannelLayoutTag_MPEG_7_1_B = (127U << 16) | 8,
    kAudioChannelLayoutTag_MPEG_7_1_C = (128U << 16) | 8,
    kAudioChannelLayoutTag_Emagic_Default_7_1 = (129U << 16) | 8,
    kAudioChannelLayoutTag_SMPTE_DTV = (130U << 16) | 8,
    kAudioChannelLayoutTag_ITU_1_0 = kAudioChannelLayoutTag_Mono,
    kAudioChannelLayoutTag_ITU_2_0 = kAudioChannelLayoutTag_Stereo,
    kAudioChannelLayoutTag_ITU_2_1 = (131U << 16) | 3,
    kAudioChannelLayoutTag_ITU_2_2 = (132U << 16) | 4,
    kAudioChannelLayoutTag_ITU_3_0 = kAudioChannelLayoutTag_MPEG_3_0_A,
    kAudioChannelLayoutTag_ITU_3_1 = kAudioChannelLayoutTag_MPEG_4_0_A,
    kAudioChannelLayoutTag_ITU_3_2 = kAudioChannelLayoutTag_MPEG_5_0_A,
    kAudioChannelLayoutTag_ITU_3_2_1 = kAudioChannelLayoutTag_MPEG_5_1_A,
    kAudioChannelLayoutTag_ITU_3_4_1 = kAudioChannelLayoutTag_MPEG_7_1_C,
    kAudioChannelLayoutTag_AAC_3_0 = kAudioChannelLayoutTag_MPEG_3_0_B,
    kAudioChannelLayoutTag_AAC_Quadraphonic = kAudioChannelLayoutTag_Quadraphonic,
    kAudioChannelLayoutTag_AAC_4_0 = kAudioChannelLayoutTag_MPEG_4_0_B,
    kAudioChannelLayoutTag_AAC_5_0 = kAudioChannelLayoutTag_MPEG_5_0_D,
    kAudioChannelLayoutTag_AAC_5_1 = kAudioChannelLayoutTag_MPEG_5_1_D,
    kAudioChannelLayoutTag_AAC_6_0 = (141U << 16) | 6,
    kAudioChannelLayoutTag_AAC_6_1 = (142U << 16) | 7,
    kAudioChannelLayoutTag_AAC_7_0 = (143U << 16) | 7,
    kAudioChannelLayoutTag_AAC_7_1 = kAudioChannelLayoutTag_MPEG_7_1_B,
    kAudioChannelLayoutTag_AAC_Octagonal = (144U << 16) | 8,
    kAudioChannelLayoutTag_WAVE_2_1 = (183U << 16) | 3,
    kAudioChannelLayoutTag_WAVE_3_0 = kAudioChannelLayoutTag_MPEG_3_0_A,
    kAudioChannelLayoutTag_WAVE_4_0_A = kAudioChannelLayoutTag_ITU_2_2,
    kAudioChannelLayoutTag_WAVE_4_0_B = (184U << 16) | 4,
    kAudioChannelLayoutTag_WAVE_5_0_A = kAudioChannelLayoutTag_MPEG_5_0_A,
    kAudioChannelLayoutTag_WAVE_5_0_B = (185U << 16) | 5,
    kAudioChannelLayoutTag_WAVE_5_1_A = kAudioChannelLayoutTag_MPEG_5_1_A,
    kAudioChannelLayoutTag_WAVE_5_1_B = (186U << 16) | 6,
    kAudioChannelLayoutTag_WAVE_6_1 = (187U << 16) | 7,
    kAudioChannelLayoutTag_WAVE_7_1 = (188U << 16) | 8,
    kAudioChannelLayoutTag_DiscreteInOrder = (147U << 16) | 0,
    kAudioChannelLayoutTag_Unknown = 0xFFFF0000U,
};

#pragma clang assume_nonnull end

#endif
