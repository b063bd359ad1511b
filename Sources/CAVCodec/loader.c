// libavcodec and libavutil, opened on first use. See include/CAVCodec.h.
#include "CAVCodec.h"
#include <libavutil/log.h>
#include <pthread.h>

#define AQ_AVCODEC_ALL(X) AQ_AVCODEC_FUNCTIONS(X) X(av_log_set_level)
// The soname of the version the headers describe.
AQ_DYNAMIC_LIBRARY(avcodec, AQ_AVCODEC_ALL, "libavcodec59",
                   "libavcodec.so." AQ_STRINGIFY_VALUE(LIBAVCODEC_VERSION_MAJOR), "libavcodec.so")

static pthread_once_t quieted = PTHREAD_ONCE_INIT;

// libavcodec prints to stderr by default; its errors reach callers as return codes instead.
static void quiet(void) { p_av_log_set_level(AV_LOG_QUIET); }

int aq_libavcodec_load(void) {
    if (!aq_avcodec_load()) return 0;
    pthread_once(&quieted, quiet);
    return 1;
}

const char *aq_libavcodec_error(void) { return aq_avcodec_error(); }

AQ_FORWARD(const AVCodec *, avcodec_find_decoder, (enum AVCodecID id), (id))
AQ_FORWARD(const AVCodec *, avcodec_find_encoder, (enum AVCodecID id), (id))
AQ_FORWARD(AVCodecContext *, avcodec_alloc_context3, (const AVCodec *codec), (codec))
AQ_FORWARD_VOID(avcodec_free_context, (AVCodecContext **context), (context))
AQ_FORWARD(int, avcodec_open2, (AVCodecContext *context, const AVCodec *codec, AVDictionary **options), (context, codec, options))
AQ_FORWARD(int, avcodec_send_packet, (AVCodecContext *context, const AVPacket *packet), (context, packet))
AQ_FORWARD(int, avcodec_receive_frame, (AVCodecContext *context, AVFrame *frame), (context, frame))
AQ_FORWARD(int, avcodec_send_frame, (AVCodecContext *context, const AVFrame *frame), (context, frame))
AQ_FORWARD(int, avcodec_receive_packet, (AVCodecContext *context, AVPacket *packet), (context, packet))
AQ_FORWARD_VOID(avcodec_flush_buffers, (AVCodecContext *context), (context))
AQ_FORWARD(AVPacket *, av_packet_alloc, (void), ())
AQ_FORWARD_VOID(av_packet_free, (AVPacket **packet), (packet))
AQ_FORWARD_VOID(av_packet_unref, (AVPacket *packet), (packet))
AQ_FORWARD(AVFrame *, av_frame_alloc, (void), ())
AQ_FORWARD_VOID(av_frame_free, (AVFrame **frame), (frame))
AQ_FORWARD_VOID(av_frame_unref, (AVFrame *frame), (frame))
AQ_FORWARD(int, av_frame_get_buffer, (AVFrame *frame, int align), (frame, align))
AQ_FORWARD(void *, av_mallocz, (size_t size), (size))
AQ_FORWARD(int, av_strerror, (int code, char *buffer, size_t size), (code, buffer, size))
AQ_FORWARD_VOID(av_channel_layout_default, (AVChannelLayout *layout, int channels), (layout, channels))
AQ_FORWARD(int, av_channel_layout_copy, (AVChannelLayout *destination, const AVChannelLayout *source), (destination, source))
AQ_FORWARD(enum AVChannel, av_channel_layout_channel_from_index, (const AVChannelLayout *layout, unsigned int index),
           (layout, index))
