// libFLAC (Debian: libflac-dev, and libflac12 to run). BSD-3-Clause.
//
// libFLAC is not linked: it is opened when the first FLAC decoder or encoder is made (see
// CDynamicLibrary.h). Swift calls the aq_ functions, each of the library function's own type,
// after aq_flac_load() has returned 1.
#include <FLAC/stream_decoder.h>
#include <FLAC/stream_encoder.h>
#include <CDynamicLibrary.h>

#define AQ_FLAC_FUNCTIONS(X) \
    X(FLAC__stream_decoder_new) X(FLAC__stream_decoder_delete) X(FLAC__stream_decoder_init_stream) \
    X(FLAC__stream_decoder_set_md5_checking) X(FLAC__stream_decoder_process_until_end_of_metadata) \
    X(FLAC__stream_decoder_process_single) X(FLAC__stream_decoder_get_state) X(FLAC__stream_decoder_flush) \
    X(FLAC__stream_decoder_finish) \
    X(FLAC__stream_encoder_new) X(FLAC__stream_encoder_delete) X(FLAC__stream_encoder_set_channels) \
    X(FLAC__stream_encoder_set_bits_per_sample) X(FLAC__stream_encoder_set_sample_rate) \
    X(FLAC__stream_encoder_set_compression_level) X(FLAC__stream_encoder_set_blocksize) \
    X(FLAC__stream_encoder_set_streamable_subset) X(FLAC__stream_encoder_init_stream) \
    X(FLAC__stream_encoder_process_interleaved) X(FLAC__stream_encoder_get_state) X(FLAC__stream_encoder_finish)

AQ_FLAC_FUNCTIONS(AQ_DYNAMIC_DECLARE)

/// 1 when libFLAC is open (the first call opens it), 0 when it cannot be (aq_flac_error says why).
int aq_flac_load(void);
const char *aq_flac_error(void);
