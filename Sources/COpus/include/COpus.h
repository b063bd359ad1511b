// libopus (Debian: libopus-dev, and libopus0 to run). BSD-3-Clause.
//
// libopus is not linked: it is opened when the first Opus decoder or encoder is made (see
// CDynamicLibrary.h). Swift calls the aq_ functions, each of the library function's own type,
// and the copus_ ones, after aq_opus_load() has returned 1.
#include <opus/opus_multistream.h>
#include <opus/opus.h>
#include <CDynamicLibrary.h>

#define AQ_OPUS_FUNCTIONS(X) \
    X(opus_multistream_decoder_create) X(opus_multistream_decode_float) X(opus_multistream_decoder_destroy) \
    X(opus_multistream_encoder_create) X(opus_multistream_surround_encoder_create) \
    X(opus_multistream_encode_float) X(opus_multistream_encoder_destroy) X(opus_strerror)

AQ_OPUS_FUNCTIONS(AQ_DYNAMIC_DECLARE)

/// 1 when libopus is open (the first call opens it), 0 when it cannot be (aq_opus_error says why).
int aq_opus_load(void);
const char *aq_opus_error(void);

// The control calls are variadic, which Swift cannot call: one function each.
int copus_set_gain(OpusMSDecoder *decoder, int gain);
int copus_reset(OpusMSDecoder *decoder);
int copus_encoder_set_bitrate(OpusMSEncoder *encoder, int bitrate);
int copus_encoder_set_complexity(OpusMSEncoder *encoder, int complexity);
/// The encoder's lookahead in samples at 48 kHz, or -1.
int copus_encoder_lookahead(OpusMSEncoder *encoder);
int copus_encoder_reset(OpusMSEncoder *encoder);
int copus_encoder_set_vbr_constraint(OpusMSEncoder *encoder, int constrained);
