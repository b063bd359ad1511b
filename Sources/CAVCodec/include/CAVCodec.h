// libavcodec and libavutil (Debian: libavcodec-dev). LGPL-2.1-or-later.
//
// The libraries are not linked: they are opened on first use (dlopen), so a program that links
// AVCodecAAC but decodes no AAC never loads libavcodec and the hundred libraries it brings. Swift
// calls the aq_ functions below; each calls the library's function of the same name.
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

// Loading. Returns 1 when libavcodec and libavutil are loaded (the first call opens them and sets
// their log level to quiet), 0 when they cannot be (then aq_libavcodec_error says why, and no other
// aq_ function may be called).
int aq_libavcodec_load(void);
const char *aq_libavcodec_error(void);

const AVCodec *aq_avcodec_find_decoder(enum AVCodecID id);
const AVCodec *aq_avcodec_find_encoder(enum AVCodecID id);
AVCodecContext *aq_avcodec_alloc_context3(const AVCodec *codec);
void aq_avcodec_free_context(AVCodecContext **context);
int aq_avcodec_open2(AVCodecContext *context, const AVCodec *codec, AVDictionary **options);
int aq_avcodec_send_packet(AVCodecContext *context, const AVPacket *packet);
int aq_avcodec_receive_frame(AVCodecContext *context, AVFrame *frame);
int aq_avcodec_send_frame(AVCodecContext *context, const AVFrame *frame);
int aq_avcodec_receive_packet(AVCodecContext *context, AVPacket *packet);
void aq_avcodec_flush_buffers(AVCodecContext *context);
AVPacket *aq_av_packet_alloc(void);
void aq_av_packet_free(AVPacket **packet);
void aq_av_packet_unref(AVPacket *packet);
AVFrame *aq_av_frame_alloc(void);
void aq_av_frame_free(AVFrame **frame);
void aq_av_frame_unref(AVFrame *frame);
int aq_av_frame_get_buffer(AVFrame *frame, int align);
void *aq_av_mallocz(size_t size);
int aq_av_strerror(int code, char *buffer, size_t size);
void aq_av_channel_layout_default(AVChannelLayout *layout, int channels);
int aq_av_channel_layout_copy(AVChannelLayout *destination, const AVChannelLayout *source);
enum AVChannel aq_av_channel_layout_channel_from_index(const AVChannelLayout *layout, unsigned int index);
