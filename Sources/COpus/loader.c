// libopus, opened on first use. See include/COpus.h.
#include "COpus.h"

#define AQ_OPUS_ALL(X) AQ_OPUS_FUNCTIONS(X) X(opus_multistream_decoder_ctl) X(opus_multistream_encoder_ctl)
AQ_DYNAMIC_LIBRARY(opus, AQ_OPUS_ALL, "libopus0", "libopus.so.0", "libopus.so")

AQ_FORWARD(OpusMSDecoder *, opus_multistream_decoder_create,
           (opus_int32 rate, int channels, int streams, int coupled, const unsigned char *mapping, int *error),
           (rate, channels, streams, coupled, mapping, error))
AQ_FORWARD(int, opus_multistream_decode_float,
           (OpusMSDecoder *decoder, const unsigned char *data, opus_int32 length, float *pcm, int frames, int fec),
           (decoder, data, length, pcm, frames, fec))
AQ_FORWARD_VOID(opus_multistream_decoder_destroy, (OpusMSDecoder *decoder), (decoder))
AQ_FORWARD(OpusMSEncoder *, opus_multistream_encoder_create,
           (opus_int32 rate, int channels, int streams, int coupled, const unsigned char *mapping, int application, int *error),
           (rate, channels, streams, coupled, mapping, application, error))
AQ_FORWARD(OpusMSEncoder *, opus_multistream_surround_encoder_create,
           (opus_int32 rate, int channels, int family, int *streams, int *coupled, unsigned char *mapping, int application,
            int *error),
           (rate, channels, family, streams, coupled, mapping, application, error))
AQ_FORWARD(int, opus_multistream_encode_float,
           (OpusMSEncoder *encoder, const float *pcm, int frames, unsigned char *data, opus_int32 capacity),
           (encoder, pcm, frames, data, capacity))
AQ_FORWARD_VOID(opus_multistream_encoder_destroy, (OpusMSEncoder *encoder), (encoder))
AQ_FORWARD(const char *, opus_strerror, (int error), (error))

int copus_set_gain(OpusMSDecoder *decoder, int gain) {
    return p_opus_multistream_decoder_ctl(decoder, OPUS_SET_GAIN(gain));
}
int copus_reset(OpusMSDecoder *decoder) {
    return p_opus_multistream_decoder_ctl(decoder, OPUS_RESET_STATE);
}
int copus_encoder_set_bitrate(OpusMSEncoder *encoder, int bitrate) {
    return p_opus_multistream_encoder_ctl(encoder, OPUS_SET_BITRATE(bitrate));
}
int copus_encoder_set_complexity(OpusMSEncoder *encoder, int complexity) {
    return p_opus_multistream_encoder_ctl(encoder, OPUS_SET_COMPLEXITY(complexity));
}
int copus_encoder_lookahead(OpusMSEncoder *encoder) {
    opus_int32 lookahead = 0;
    if (p_opus_multistream_encoder_ctl(encoder, OPUS_GET_LOOKAHEAD(&lookahead)) != OPUS_OK) return -1;
    return lookahead;
}
int copus_encoder_reset(OpusMSEncoder *encoder) {
    return p_opus_multistream_encoder_ctl(encoder, OPUS_RESET_STATE);
}
int copus_encoder_set_vbr_constraint(OpusMSEncoder *encoder, int constrained) {
    return p_opus_multistream_encoder_ctl(encoder, OPUS_SET_VBR_CONSTRAINT(constrained));
}
