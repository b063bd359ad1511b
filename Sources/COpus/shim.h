// libopus (Debian: libopus-dev). BSD-3-Clause.
#include <opus/opus_multistream.h>

// The control calls are variadic macros, which Swift cannot call: one function each.
static inline int copus_set_gain(OpusMSDecoder *decoder, int gain) {
    return opus_multistream_decoder_ctl(decoder, OPUS_SET_GAIN(gain));
}
static inline int copus_reset(OpusMSDecoder *decoder) {
    return opus_multistream_decoder_ctl(decoder, OPUS_RESET_STATE);
}

#include <opus/opus.h>
static inline int copus_encoder_set_bitrate(OpusMSEncoder *encoder, int bitrate) {
    return opus_multistream_encoder_ctl(encoder, OPUS_SET_BITRATE(bitrate));
}
static inline int copus_encoder_set_complexity(OpusMSEncoder *encoder, int complexity) {
    return opus_multistream_encoder_ctl(encoder, OPUS_SET_COMPLEXITY(complexity));
}
static inline int copus_encoder_lookahead(OpusMSEncoder *encoder) {
    opus_int32 lookahead = 0;
    if (opus_multistream_encoder_ctl(encoder, OPUS_GET_LOOKAHEAD(&lookahead)) != OPUS_OK) return -1;
    return lookahead;
}
static inline int copus_encoder_reset(OpusMSEncoder *encoder) {
    return opus_multistream_encoder_ctl(encoder, OPUS_RESET_STATE);
}
static inline int copus_encoder_set_vbr_constraint(OpusMSEncoder *encoder, int constrained) {
    return opus_multistream_encoder_ctl(encoder, OPUS_SET_VBR_CONSTRAINT(constrained));
}
