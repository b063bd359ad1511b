// libavcodec and libavutil (Debian: libavcodec-dev). LGPL-2.1-or-later.
#include <errno.h>
#include <libavcodec/avcodec.h>
#include <libavutil/channel_layout.h>
#include <libavutil/frame.h>
#include <libavutil/mem.h>

// Macros Swift cannot import.
static inline int cavcodec_error_again(void) { return AVERROR(EAGAIN); }
static inline int cavcodec_error_eof(void) { return AVERROR_EOF; }
static inline int cavcodec_padding(void) { return AV_INPUT_BUFFER_PADDING_SIZE; }
static inline int cavcodec_flag_global_header(void) { return AV_CODEC_FLAG_GLOBAL_HEADER; }
static inline int cavcodec_flag2_skip_manual(void) { return AV_CODEC_FLAG2_SKIP_MANUAL; }
static inline int cavcodec_profile_he_v2(void) { return FF_PROFILE_AAC_HE_V2; }
