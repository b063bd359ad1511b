// libfaad2, opened on first use. See include/CFAAD2.h.
#include "CFAAD2.h"

AQ_DYNAMIC_LIBRARY(faad, AQ_FAAD_FUNCTIONS, "libfaad2", "libfaad.so.2", "libfaad.so")

AQ_FORWARD(NeAACDecHandle, NeAACDecOpen, (void), ())
AQ_FORWARD(NeAACDecConfigurationPtr, NeAACDecGetCurrentConfiguration, (NeAACDecHandle decoder), (decoder))
AQ_FORWARD(unsigned char, NeAACDecSetConfiguration, (NeAACDecHandle decoder, NeAACDecConfigurationPtr configuration),
           (decoder, configuration))
AQ_FORWARD(char, NeAACDecInit2,
           (NeAACDecHandle decoder, unsigned char *info, unsigned long size, unsigned long *rate, unsigned char *channels),
           (decoder, info, size, rate, channels))
AQ_FORWARD(void *, NeAACDecDecode, (NeAACDecHandle decoder, NeAACDecFrameInfo *frame, unsigned char *buffer, unsigned long size),
           (decoder, frame, buffer, size))
AQ_FORWARD_VOID(NeAACDecPostSeekReset, (NeAACDecHandle decoder, long frame), (decoder, frame))
AQ_FORWARD(char *, NeAACDecGetErrorMessage, (unsigned char code), (code))
AQ_FORWARD_VOID(NeAACDecClose, (NeAACDecHandle decoder), (decoder))
