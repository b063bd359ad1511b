// The declarations are all in include/CAudioToolbox.h; this file makes the target a C library and
// checks the layouts Swift code relies on.
#include "CAudioToolbox.h"
#include <stddef.h>

_Static_assert(sizeof(AudioQueueBuffer) == 56, "AudioQueueBuffer is 56 bytes, as on a 64-bit Mac");
_Static_assert(offsetof(AudioQueueBuffer, mPacketDescriptions) == 40, "AudioQueueBuffer's packet descriptions at byte 40");
_Static_assert(sizeof(AudioFilePacketTableInfo) == 16, "AudioFilePacketTableInfo is 16 bytes");
_Static_assert(sizeof(AudioFormatListItem) == 48, "AudioFormatListItem is 48 bytes");
