// libFLAC, opened on first use. See include/CFLAC.h.
#include "CFLAC.h"

AQ_DYNAMIC_LIBRARY(flac, AQ_FLAC_FUNCTIONS, "libflac12",
                   "libFLAC.so." AQ_STRINGIFY_VALUE(FLAC_API_VERSION_CURRENT), "libFLAC.so")

AQ_FORWARD(FLAC__StreamDecoder *, FLAC__stream_decoder_new, (void), ())
AQ_FORWARD_VOID(FLAC__stream_decoder_delete, (FLAC__StreamDecoder *decoder), (decoder))
AQ_FORWARD(FLAC__StreamDecoderInitStatus, FLAC__stream_decoder_init_stream,
           (FLAC__StreamDecoder *decoder, FLAC__StreamDecoderReadCallback read, FLAC__StreamDecoderSeekCallback seek,
            FLAC__StreamDecoderTellCallback tell, FLAC__StreamDecoderLengthCallback length, FLAC__StreamDecoderEofCallback eof,
            FLAC__StreamDecoderWriteCallback write, FLAC__StreamDecoderMetadataCallback metadata,
            FLAC__StreamDecoderErrorCallback error, void *client),
           (decoder, read, seek, tell, length, eof, write, metadata, error, client))
AQ_FORWARD(FLAC__bool, FLAC__stream_decoder_set_md5_checking, (FLAC__StreamDecoder *decoder, FLAC__bool value), (decoder, value))
AQ_FORWARD(FLAC__bool, FLAC__stream_decoder_process_until_end_of_metadata, (FLAC__StreamDecoder *decoder), (decoder))
AQ_FORWARD(FLAC__bool, FLAC__stream_decoder_process_single, (FLAC__StreamDecoder *decoder), (decoder))
AQ_FORWARD(FLAC__StreamDecoderState, FLAC__stream_decoder_get_state, (const FLAC__StreamDecoder *decoder), (decoder))
AQ_FORWARD(FLAC__bool, FLAC__stream_decoder_flush, (FLAC__StreamDecoder *decoder), (decoder))
AQ_FORWARD(FLAC__bool, FLAC__stream_decoder_finish, (FLAC__StreamDecoder *decoder), (decoder))

AQ_FORWARD(FLAC__StreamEncoder *, FLAC__stream_encoder_new, (void), ())
AQ_FORWARD_VOID(FLAC__stream_encoder_delete, (FLAC__StreamEncoder *encoder), (encoder))
AQ_FORWARD(FLAC__bool, FLAC__stream_encoder_set_channels, (FLAC__StreamEncoder *encoder, uint32_t value), (encoder, value))
AQ_FORWARD(FLAC__bool, FLAC__stream_encoder_set_bits_per_sample, (FLAC__StreamEncoder *encoder, uint32_t value), (encoder, value))
AQ_FORWARD(FLAC__bool, FLAC__stream_encoder_set_sample_rate, (FLAC__StreamEncoder *encoder, uint32_t value), (encoder, value))
AQ_FORWARD(FLAC__bool, FLAC__stream_encoder_set_compression_level, (FLAC__StreamEncoder *encoder, uint32_t value), (encoder, value))
AQ_FORWARD(FLAC__bool, FLAC__stream_encoder_set_blocksize, (FLAC__StreamEncoder *encoder, uint32_t value), (encoder, value))
AQ_FORWARD(FLAC__bool, FLAC__stream_encoder_set_streamable_subset, (FLAC__StreamEncoder *encoder, FLAC__bool value), (encoder, value))
AQ_FORWARD(FLAC__StreamEncoderInitStatus, FLAC__stream_encoder_init_stream,
           (FLAC__StreamEncoder *encoder, FLAC__StreamEncoderWriteCallback write, FLAC__StreamEncoderSeekCallback seek,
            FLAC__StreamEncoderTellCallback tell, FLAC__StreamEncoderMetadataCallback metadata, void *client),
           (encoder, write, seek, tell, metadata, client))
AQ_FORWARD(FLAC__bool, FLAC__stream_encoder_process_interleaved,
           (FLAC__StreamEncoder *encoder, const FLAC__int32 buffer[], uint32_t samples), (encoder, buffer, samples))
AQ_FORWARD(FLAC__StreamEncoderState, FLAC__stream_encoder_get_state, (const FLAC__StreamEncoder *encoder), (encoder))
AQ_FORWARD(FLAC__bool, FLAC__stream_encoder_finish, (FLAC__StreamEncoder *encoder), (encoder))
