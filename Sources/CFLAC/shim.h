// libFLAC (Debian: libflac-dev). BSD-3-Clause.
#include <FLAC/stream_decoder.h>
#include <FLAC/stream_encoder.h>
