// libavcodec and libavutil (Debian: libavcodec-dev). LGPL-2.1-or-later.
//
// The libraries are not linked: they are opened on first use (CDynamicLibrary.h), so a program
// that links AVCodecAAC but decodes no AAC never loads libavcodec and the hundred libraries it
// brings. Swift calls the aq_ functions below; each calls the library's function of the same name.
#include <errno.h>
#include <libavcodec/avcodec.h>
#include <libavutil/channel_layout.h>
#include <libavutil/frame.h>
#include <libavutil/mem.h>
#include <CDynamicLibrary.h>

// Macros Swift cannot import.
static inline int cavcodec_error_again(void) { return AVERROR(EAGAIN); }
static inline int cavcodec_error_eof(void) { return AVERROR_EOF; }
static inline int cavcodec_padding(void) { return AV_INPUT_BUFFER_PADDING_SIZE; }
static inline int cavcodec_flag_global_header(void) { return AV_CODEC_FLAG_GLOBAL_HEADER; }
static inline int cavcodec_flag2_skip_manual(void) { return AV_CODEC_FLAG2_SKIP_MANUAL; }
static inline int cavcodec_profile_he_v2(void) { return FF_PROFILE_AAC_HE_V2; }

// Loading. Returns 1 when libavcodec is loaded (the first call opens it, with libavutil, and sets
// their log level to quiet), 0 when it cannot be (then aq_libavcodec_error says why, and no other
// aq_ function may be called).
int aq_libavcodec_load(void);
const char *aq_libavcodec_error(void);

// The functions used, each declared under the aq_ name with the library function's own type.
// libavutil's are found through libavcodec, which depends on it.
#define AQ_AVCODEC_FUNCTIONS(X) \
    X(avcodec_find_decoder) X(avcodec_find_encoder) X(avcodec_alloc_context3) X(avcodec_free_context) \
    X(avcodec_open2) X(avcodec_send_packet) X(avcodec_receive_frame) X(avcodec_send_frame) \
    X(avcodec_receive_packet) X(avcodec_flush_buffers) X(av_packet_alloc) X(av_packet_free) X(av_packet_unref) \
    X(av_frame_alloc) X(av_frame_free) X(av_frame_unref) X(av_frame_get_buffer) X(av_mallocz) X(av_strerror) \
    X(av_channel_layout_default) X(av_channel_layout_copy) X(av_channel_layout_channel_from_index)

AQ_AVCODEC_FUNCTIONS(AQ_DYNAMIC_DECLARE)
