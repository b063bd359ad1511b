// The declarations are all in include/CoreAudioTypes.h; this file makes the target a C library
// and checks the layouts Swift code relies on.
#include "CoreAudioTypes.h"
#include <stddef.h>

_Static_assert(sizeof(AudioStreamBasicDescription) == 40, "AudioStreamBasicDescription is 40 bytes, as on a Mac");
_Static_assert(sizeof(AudioStreamPacketDescription) == 16, "AudioStreamPacketDescription is 16 bytes");
_Static_assert(sizeof(SMPTETime) == 24, "SMPTETime is 24 bytes");
_Static_assert(sizeof(AudioTimeStamp) == 64, "AudioTimeStamp is 64 bytes");
_Static_assert(offsetof(AudioBufferList, mBuffers) == 8, "AudioBufferList's buffers start at byte 8");
_Static_assert(sizeof(AudioChannelLayout) == 32, "AudioChannelLayout with one description is 32 bytes");
