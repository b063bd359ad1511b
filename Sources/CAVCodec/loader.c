// Opens libavcodec and libavutil on first use and calls their functions through pointers found
// with dlsym. See include/CAVCodec.h.
#include "CAVCodec.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <libavutil/log.h>

#define AQ_STRINGIFY2(x) #x
#define AQ_STRINGIFY(x) AQ_STRINGIFY2(x)
// The sonames of the versions the headers describe.
#define AQ_AVCODEC_SONAME "libavcodec.so." AQ_STRINGIFY(LIBAVCODEC_VERSION_MAJOR)
#define AQ_AVUTIL_SONAME "libavutil.so." AQ_STRINGIFY(LIBAVUTIL_VERSION_MAJOR)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int loaded = 0;
static char error[512] = "not loaded yet";

#define AQ_FUNCTIONS(X) \
    X(avcodec, const AVCodec *, avcodec_find_decoder, (enum AVCodecID)) \
    X(avcodec, const AVCodec *, avcodec_find_encoder, (enum AVCodecID)) \
    X(avcodec, AVCodecContext *, avcodec_alloc_context3, (const AVCodec *)) \
    X(avcodec, void, avcodec_free_context, (AVCodecContext **)) \
    X(avcodec, int, avcodec_open2, (AVCodecContext *, const AVCodec *, AVDictionary **)) \
    X(avcodec, int, avcodec_send_packet, (AVCodecContext *, const AVPacket *)) \
    X(avcodec, int, avcodec_receive_frame, (AVCodecContext *, AVFrame *)) \
    X(avcodec, int, avcodec_send_frame, (AVCodecContext *, const AVFrame *)) \
    X(avcodec, int, avcodec_receive_packet, (AVCodecContext *, AVPacket *)) \
    X(avcodec, void, avcodec_flush_buffers, (AVCodecContext *)) \
    X(avcodec, AVPacket *, av_packet_alloc, (void)) \
    X(avcodec, void, av_packet_free, (AVPacket **)) \
    X(avcodec, void, av_packet_unref, (AVPacket *)) \
    X(avutil, AVFrame *, av_frame_alloc, (void)) \
    X(avutil, void, av_frame_free, (AVFrame **)) \
    X(avutil, void, av_frame_unref, (AVFrame *)) \
    X(avutil, int, av_frame_get_buffer, (AVFrame *, int)) \
    X(avutil, void *, av_mallocz, (size_t)) \
    X(avutil, int, av_strerror, (int, char *, size_t)) \
    X(avutil, void, av_log_set_level, (int)) \
    X(avutil, void, av_channel_layout_default, (AVChannelLayout *, int)) \
    X(avutil, int, av_channel_layout_copy, (AVChannelLayout *, const AVChannelLayout *)) \
    X(avutil, enum AVChannel, av_channel_layout_channel_from_index, (const AVChannelLayout *, unsigned int))

#define AQ_POINTER(library, result, name, parameters) static result (*p_##name) parameters;
AQ_FUNCTIONS(AQ_POINTER)

static void load(void) {
    void *avcodec = dlopen(AQ_AVCODEC_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!avcodec) {
        snprintf(error, sizeof error, "cannot open %s: %s (install libavcodec59)", AQ_AVCODEC_SONAME, dlerror());
        return;
    }
    void *avutil = dlopen(AQ_AVUTIL_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!avutil) {
        snprintf(error, sizeof error, "cannot open %s: %s", AQ_AVUTIL_SONAME, dlerror());
        return;
    }
#define AQ_RESOLVE(library, result, name, parameters) \
    *(void **)(&p_##name) = dlsym(library, #name); \
    if (!p_##name) { snprintf(error, sizeof error, "%s has no %s", #library, #name); return; }
    AQ_FUNCTIONS(AQ_RESOLVE)
    // libavcodec prints to stderr by default; its errors reach callers as return codes instead.
    p_av_log_set_level(AV_LOG_QUIET);
    error[0] = 0;
    loaded = 1;
}

int aq_libavcodec_load(void) {
    pthread_once(&once, load);
    return loaded;
}

const char *aq_libavcodec_error(void) {
    pthread_once(&once, load);
    return error;
}

const AVCodec *aq_avcodec_find_decoder(enum AVCodecID id) { return p_avcodec_find_decoder(id); }
const AVCodec *aq_avcodec_find_encoder(enum AVCodecID id) { return p_avcodec_find_encoder(id); }
AVCodecContext *aq_avcodec_alloc_context3(const AVCodec *codec) { return p_avcodec_alloc_context3(codec); }
void aq_avcodec_free_context(AVCodecContext **context) { p_avcodec_free_context(context); }
int aq_avcodec_open2(AVCodecContext *context, const AVCodec *codec, AVDictionary **options) { return p_avcodec_open2(context, codec, options); }
int aq_avcodec_send_packet(AVCodecContext *context, const AVPacket *packet) { return p_avcodec_send_packet(context, packet); }
int aq_avcodec_receive_frame(AVCodecContext *context, AVFrame *frame) { return p_avcodec_receive_frame(context, frame); }
int aq_avcodec_send_frame(AVCodecContext *context, const AVFrame *frame) { return p_avcodec_send_frame(context, frame); }
int aq_avcodec_receive_packet(AVCodecContext *context, AVPacket *packet) { return p_avcodec_receive_packet(context, packet); }
void aq_avcodec_flush_buffers(AVCodecContext *context) { p_avcodec_flush_buffers(context); }
AVPacket *aq_av_packet_alloc(void) { return p_av_packet_alloc(); }
void aq_av_packet_free(AVPacket **packet) { p_av_packet_free(packet); }
void aq_av_packet_unref(AVPacket *packet) { p_av_packet_unref(packet); }
AVFrame *aq_av_frame_alloc(void) { return p_av_frame_alloc(); }
void aq_av_frame_free(AVFrame **frame) { p_av_frame_free(frame); }
void aq_av_frame_unref(AVFrame *frame) { p_av_frame_unref(frame); }
int aq_av_frame_get_buffer(AVFrame *frame, int align) { return p_av_frame_get_buffer(frame, align); }
void *aq_av_mallocz(size_t size) { return p_av_mallocz(size); }
int aq_av_strerror(int code, char *buffer, size_t size) { return p_av_strerror(code, buffer, size); }
void aq_av_channel_layout_default(AVChannelLayout *layout, int channels) { p_av_channel_layout_default(layout, channels); }
int aq_av_channel_layout_copy(AVChannelLayout *destination, const AVChannelLayout *source) { return p_av_channel_layout_copy(destination, source); }
enum AVChannel aq_av_channel_layout_channel_from_index(const AVChannelLayout *layout, unsigned int index) {
    return p_av_channel_layout_channel_from_index(layout, index);
}
