// libopus (Debian: libopus-dev). BSD-3-Clause.
#include <opus/opus_multistream.h>

// The control calls are variadic macros, which Swift cannot call: one function each.
static inline int copus_set_gain(OpusMSDecoder *decoder, int gain) {
    return opus_multistream_decoder_ctl(decoder, OPUS_SET_GAIN(gain));
}
static inline int copus_reset(OpusMSDecoder *decoder) {
    return opus_multistream_decoder_ctl(decoder, OPUS_RESET_STATE);
}
