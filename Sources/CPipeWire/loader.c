// libpipewire-0.3, opened on first use, and the connection and stream objects Swift uses. See
// include/CPipeWire.h.
#include "CPipeWire.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pipewire/pipewire.h>
#include <pipewire/extensions/metadata.h>
#include <spa/param/audio/format-utils.h>
#include <spa/utils/result.h>

#include <CDynamicLibrary.h>

#define AQ_PW_FUNCTIONS(X) \
    X(pw_init) X(pw_get_library_version) \
    X(pw_thread_loop_new) X(pw_thread_loop_start) X(pw_thread_loop_stop) X(pw_thread_loop_destroy) \
    X(pw_thread_loop_lock) X(pw_thread_loop_unlock) X(pw_thread_loop_signal) X(pw_thread_loop_get_loop) \
    X(pw_thread_loop_get_time) X(pw_thread_loop_timed_wait_full) \
    X(pw_context_new) X(pw_context_destroy) X(pw_context_connect) X(pw_core_disconnect) \
    X(pw_properties_new) X(pw_properties_set) \
    X(pw_stream_new) X(pw_stream_add_listener) X(pw_stream_connect) X(pw_stream_disconnect) X(pw_stream_destroy) \
    X(pw_stream_dequeue_buffer) X(pw_stream_queue_buffer) X(pw_stream_set_active) X(pw_stream_flush) \
    X(pw_stream_get_time_n) X(pw_stream_get_node_id) X(pw_stream_state_as_string) X(pw_proxy_destroy)

AQ_DYNAMIC_LIBRARY(pw, AQ_PW_FUNCTIONS, "libpipewire-0.3-0", "libpipewire-0.3.so.0", "libpipewire-0.3.so")

#define PW(name) p_##name

static pthread_once_t initialised = PTHREAD_ONCE_INIT;
static void initialise(void) { PW(pw_init)(NULL, NULL); }

const char *aq_pw_library_version(void) {
    return aq_pw_load() ? PW(pw_get_library_version)() : "";
}

struct aq_pw_connection {
    struct pw_thread_loop *loop;
    struct pw_context *context;
    struct pw_core *core;
    struct spa_hook core_listener;
    int sync_seq;
    int synced;
    atomic_int failed;
    char failure[256];
    /// The streams open on the connection (loop lock held to change it).
    struct aq_pw_stream *streams;
    /// The default-sink watch (loop lock held): the registry and the `default` metadata, the
    /// name last seen, and whom to tell.
    struct pw_registry *watch_registry;
    struct spa_hook watch_registry_listener;
    struct pw_metadata *watch_metadata;
    struct spa_hook watch_metadata_listener;
    char default_sink[256];
    void (*default_changed)(void *context, const char *sink);
    void *default_context;
};

struct aq_pw_stream {
    aq_pw_connection *connection;
    struct aq_pw_stream *next;
    struct pw_stream *stream;
    struct spa_hook listener;
    aq_pw_stream_callbacks callbacks;
    uint32_t rate, channels;
    int capture;
    /// The gate the data thread passes to render: open between start and pause.
    atomic_int open;
    /// Render calls in progress, and whether pause waits for them to end (then `idle` is posted).
    atomic_int rendering;
    atomic_int pause_waiting;
    sem_t idle;
    /// Loop thread (lock held): what the state callback acts on.
    int start_pending;
    int connected;
    int closing;
    enum pw_stream_state state;
    char error[256];
};

static void copy_error(char *error, size_t size, const char *message) {
    if (error && size > 0) snprintf(error, size, "%s", message);
}

/// Waits (loop lock held) until `done` is nonzero or `timeout_ms` passed; 0 on timeout.
static int wait_until(struct pw_thread_loop *loop, const int *done, const atomic_int *failed, int timeout_ms) {
    struct timespec deadline;
    PW(pw_thread_loop_get_time)(loop, &deadline, (int64_t)timeout_ms * 1000000);
    while (!*done && !atomic_load(failed)) {
        if (PW(pw_thread_loop_timed_wait_full)(loop, &deadline) == -ETIMEDOUT) return *done;
    }
    return *done;
}

// MARK: connection

static void on_core_done(void *data, uint32_t id, int seq) {
    aq_pw_connection *c = data;
    if (id == PW_ID_CORE && seq == c->sync_seq) {
        c->synced = 1;
        PW(pw_thread_loop_signal)(c->loop, false);
    }
}

static void on_core_error(void *data, uint32_t id, int seq, int res, const char *message) {
    (void)seq;
    aq_pw_connection *c = data;
    // Only a broken connection is fatal; the server also reports errors about single objects
    // on the core (an operation on a node that was just removed), which the streams see themselves.
    if (id != PW_ID_CORE || res != -EPIPE) return;
    snprintf(c->failure, sizeof c->failure, "%s (%s)", message ? message : "error", spa_strerror(res));
    atomic_store(&c->failed, 1);
    for (struct aq_pw_stream *s = c->streams; s; s = s->next) {
        if (!s->closing && s->callbacks.failed) s->callbacks.failed(s->callbacks.context, c->failure);
    }
    PW(pw_thread_loop_signal)(c->loop, false);
}

static const struct pw_core_events core_events = {
    .version = PW_VERSION_CORE_EVENTS,
    .done = on_core_done,
    .error = on_core_error,
};

aq_pw_connection *aq_pw_connect(const char *remote, const char *application, int timeout_ms, char *error, size_t error_size) {
    if (!aq_pw_load()) { copy_error(error, error_size, aq_pw_error()); return NULL; }
    pthread_once(&initialised, initialise);
    aq_pw_connection *c = calloc(1, sizeof *c);
    if (!c) { copy_error(error, error_size, "out of memory"); return NULL; }
    c->loop = PW(pw_thread_loop_new)("aq-pipewire", NULL);
    if (!c->loop) { copy_error(error, error_size, "pw_thread_loop_new failed"); free(c); return NULL; }
    c->context = PW(pw_context_new)(PW(pw_thread_loop_get_loop)(c->loop), NULL, 0);
    if (!c->context) {
        copy_error(error, error_size, "pw_context_new failed");
        PW(pw_thread_loop_destroy)(c->loop);
        free(c);
        return NULL;
    }
    if (PW(pw_thread_loop_start)(c->loop) < 0) {
        copy_error(error, error_size, "pw_thread_loop_start failed");
        PW(pw_context_destroy)(c->context);
        PW(pw_thread_loop_destroy)(c->loop);
        free(c);
        return NULL;
    }
    PW(pw_thread_loop_lock)(c->loop);
    struct pw_properties *properties = PW(pw_properties_new)(NULL, NULL);
    if (remote) PW(pw_properties_set)(properties, PW_KEY_REMOTE_NAME, remote);
    if (application) PW(pw_properties_set)(properties, PW_KEY_APP_NAME, application);
    c->core = PW(pw_context_connect)(c->context, properties, 0);
    int answered = 0;
    if (!c->core) {
        const char *name = remote ? remote : (getenv("PIPEWIRE_REMOTE") ? getenv("PIPEWIRE_REMOTE") : "pipewire-0");
        const char *directory = getenv("PIPEWIRE_RUNTIME_DIR") ? getenv("PIPEWIRE_RUNTIME_DIR") : getenv("XDG_RUNTIME_DIR");
        int absolute = name[0] == '/';
        snprintf(error, error_size, "no PipeWire server at %s%s%s (%s)", absolute || !directory ? "" : directory,
                 absolute || !directory ? "" : "/", name, errno == EHOSTDOWN || errno == ENOENT ? "no socket there" : strerror(errno));
    } else {
        pw_core_add_listener(c->core, &c->core_listener, &core_events, c);
        c->sync_seq = pw_core_sync(c->core, PW_ID_CORE, 0);
        answered = wait_until(c->loop, &c->synced, &c->failed, timeout_ms);
        if (!answered) {
            if (atomic_load(&c->failed)) snprintf(error, error_size, "the PipeWire server refused the connection: %s", c->failure);
            else snprintf(error, error_size, "the PipeWire server did not answer within %d ms", timeout_ms);
        }
    }
    PW(pw_thread_loop_unlock)(c->loop);
    if (!answered) { aq_pw_disconnect(c); return NULL; }
    return c;
}

void aq_pw_disconnect(aq_pw_connection *c) {
    if (!c) return;
    PW(pw_thread_loop_stop)(c->loop);
    if (c->watch_metadata) {
        spa_hook_remove(&c->watch_metadata_listener);
        PW(pw_proxy_destroy)((struct pw_proxy *)c->watch_metadata);
    }
    if (c->watch_registry) {
        spa_hook_remove(&c->watch_registry_listener);
        PW(pw_proxy_destroy)((struct pw_proxy *)c->watch_registry);
    }
    if (c->core) {
        spa_hook_remove(&c->core_listener);
        PW(pw_core_disconnect)(c->core);
    }
    PW(pw_context_destroy)(c->context);
    PW(pw_thread_loop_destroy)(c->loop);
    free(c);
}

int aq_pw_connection_failed(aq_pw_connection *c) { return c ? atomic_load(&c->failed) : 1; }

// MARK: nodes

struct listed_node {
    uint32_t id, channels, rate;
    char *name, *description, *media_class;
};

struct node_listing {
    aq_pw_connection *connection;
    struct pw_registry *registry;
    struct spa_hook registry_listener;
    struct pw_metadata *metadata;
    struct spa_hook metadata_listener;
    struct listed_node *nodes;
    size_t count, capacity;
    char default_sink[256], default_source[256];
    int sync_seq, synced;
};

static char *copy_string(const char *text) { return strdup(text ? text : ""); }

/// The node name in a `default` metadata value: JSON { "name": "alsa_output.pci-0000_00_1f.3.analog-stereo" }.
static void name_in_default_value(const char *value, char *name, size_t size) {
    name[0] = 0;
    const char *key = value ? strstr(value, "\"name\"") : NULL;
    const char *open = key ? strchr(key + 6, '"') : NULL;
    const char *close = open ? strchr(open + 1, '"') : NULL;
    if (open && close) snprintf(name, size, "%.*s", (int)(close - open - 1), open + 1);
}

static int on_metadata_property(void *data, uint32_t subject, const char *key, const char *type, const char *value) {
    (void)subject; (void)type;
    struct node_listing *l = data;
    if (!key || !value) return 0;
    char *target = strcmp(key, "default.audio.sink") == 0 ? l->default_sink
                 : strcmp(key, "default.audio.source") == 0 ? l->default_source : NULL;
    if (!target) return 0;
    name_in_default_value(value, target, 256);
    return 0;
}

static const struct pw_metadata_events metadata_events = {
    .version = PW_VERSION_METADATA_EVENTS,
    .property = on_metadata_property,
};

static void on_registry_global(void *data, uint32_t id, uint32_t permissions, const char *type, uint32_t version,
                               const struct spa_dict *props) {
    (void)permissions; (void)version;
    struct node_listing *l = data;
    if (!props) return;
    if (strcmp(type, PW_TYPE_INTERFACE_Metadata) == 0) {
        const char *name = spa_dict_lookup(props, PW_KEY_METADATA_NAME);
        if (name && strcmp(name, "default") == 0 && !l->metadata) {
            l->metadata = pw_registry_bind(l->registry, id, PW_TYPE_INTERFACE_Metadata, PW_VERSION_METADATA, 0);
            if (l->metadata) pw_metadata_add_listener(l->metadata, &l->metadata_listener, &metadata_events, l);
        }
        return;
    }
    if (strcmp(type, PW_TYPE_INTERFACE_Node) != 0) return;
    const char *media_class = spa_dict_lookup(props, PW_KEY_MEDIA_CLASS);
    if (!media_class || strncmp(media_class, "Audio/", 6) != 0) return;
    if (l->count == l->capacity) {
        size_t capacity = l->capacity ? l->capacity * 2 : 16;
        struct listed_node *grown = realloc(l->nodes, capacity * sizeof *grown);
        if (!grown) return;
        l->nodes = grown;
        l->capacity = capacity;
    }
    const char *channels = spa_dict_lookup(props, PW_KEY_AUDIO_CHANNELS);
    const char *rate = spa_dict_lookup(props, PW_KEY_AUDIO_RATE);
    const char *description = spa_dict_lookup(props, PW_KEY_NODE_DESCRIPTION);
    if (!description) description = spa_dict_lookup(props, PW_KEY_MEDIA_NAME);
    l->nodes[l->count++] = (struct listed_node){
        .id = id, .channels = channels ? (uint32_t)atoi(channels) : 0, .rate = rate ? (uint32_t)atoi(rate) : 0,
        .name = copy_string(spa_dict_lookup(props, PW_KEY_NODE_NAME)), .description = copy_string(description),
        .media_class = copy_string(media_class),
    };
}

static const struct pw_registry_events registry_events = {
    .version = PW_VERSION_REGISTRY_EVENTS,
    .global = on_registry_global,
};

static void on_listing_done(void *data, uint32_t id, int seq) {
    struct node_listing *l = data;
    if (id == PW_ID_CORE && seq == l->sync_seq) {
        l->synced = 1;
        PW(pw_thread_loop_signal)(l->connection->loop, false);
    }
}

static const struct pw_core_events listing_core_events = {
    .version = PW_VERSION_CORE_EVENTS,
    .done = on_listing_done,
};

int aq_pw_list_nodes(aq_pw_connection *c, aq_pw_node_callback callback, void *context, int timeout_ms) {
    if (!c) return -1;
    struct node_listing l;
    memset(&l, 0, sizeof l);
    l.connection = c;
    struct spa_hook core_listener;
    memset(&core_listener, 0, sizeof core_listener);
    PW(pw_thread_loop_lock)(c->loop);
    pw_core_add_listener(c->core, &core_listener, &listing_core_events, &l);
    l.registry = pw_core_get_registry(c->core, PW_VERSION_REGISTRY, 0);
    int answered = 0;
    if (l.registry) {
        pw_registry_add_listener(l.registry, &l.registry_listener, &registry_events, &l);
        l.sync_seq = pw_core_sync(c->core, PW_ID_CORE, 0);
        answered = wait_until(c->loop, &l.synced, &c->failed, timeout_ms);
        // The metadata bound during the first round trip sends its properties before the second ends.
        if (answered && l.metadata) {
            l.synced = 0;
            l.sync_seq = pw_core_sync(c->core, PW_ID_CORE, 0);
            answered = wait_until(c->loop, &l.synced, &c->failed, timeout_ms);
        }
    }
    spa_hook_remove(&core_listener);
    if (l.metadata) {
        spa_hook_remove(&l.metadata_listener);
        PW(pw_proxy_destroy)((struct pw_proxy *)l.metadata);
    }
    if (l.registry) {
        spa_hook_remove(&l.registry_listener);
        PW(pw_proxy_destroy)((struct pw_proxy *)l.registry);
    }
    PW(pw_thread_loop_unlock)(c->loop);
    for (size_t i = 0; i < l.count; i++) {
        struct listed_node *n = &l.nodes[i];
        int is_default = (strcmp(n->media_class, "Audio/Sink") == 0 && strcmp(n->name, l.default_sink) == 0)
                      || (strcmp(n->media_class, "Audio/Source") == 0 && strcmp(n->name, l.default_source) == 0);
        if (answered && callback) callback(context, n->id, n->name, n->description, n->media_class, n->channels, n->rate, is_default);
        free(n->name);
        free(n->description);
        free(n->media_class);
    }
    free(l.nodes);
    return answered ? (int)l.count : -1;
}

// MARK: the default sink, watched

static int on_watch_property(void *data, uint32_t subject, const char *key, const char *type, const char *value) {
    (void)subject; (void)type;
    aq_pw_connection *c = data;
    // A NULL key clears every property: there is no default any more.
    if (key && strcmp(key, "default.audio.sink") != 0) return 0;
    char name[256];
    name_in_default_value(value, name, sizeof name);
    if (strcmp(name, c->default_sink) == 0) return 0;
    snprintf(c->default_sink, sizeof c->default_sink, "%s", name);
    if (c->default_changed) c->default_changed(c->default_context, c->default_sink);
    return 0;
}

static const struct pw_metadata_events watch_metadata_events = {
    .version = PW_VERSION_METADATA_EVENTS,
    .property = on_watch_property,
};

static void on_watch_global(void *data, uint32_t id, uint32_t permissions, const char *type, uint32_t version,
                            const struct spa_dict *props) {
    (void)permissions; (void)version;
    aq_pw_connection *c = data;
    if (!props || strcmp(type, PW_TYPE_INTERFACE_Metadata) != 0 || c->watch_metadata) return;
    const char *name = spa_dict_lookup(props, PW_KEY_METADATA_NAME);
    if (!name || strcmp(name, "default") != 0) return;
    c->watch_metadata = pw_registry_bind(c->watch_registry, id, PW_TYPE_INTERFACE_Metadata, PW_VERSION_METADATA, 0);
    if (c->watch_metadata) pw_metadata_add_listener(c->watch_metadata, &c->watch_metadata_listener, &watch_metadata_events, c);
}

static const struct pw_registry_events watch_registry_events = {
    .version = PW_VERSION_REGISTRY_EVENTS,
    .global = on_watch_global,
};

/// A round trip on the connection (loop lock held); 0 when the server did not answer in time.
static int round_trip(aq_pw_connection *c, int timeout_ms) {
    c->synced = 0;
    c->sync_seq = pw_core_sync(c->core, PW_ID_CORE, 0);
    return wait_until(c->loop, &c->synced, &c->failed, timeout_ms);
}

int aq_pw_watch_default_sink(aq_pw_connection *c, void (*changed)(void *context, const char *sink), void *context, int timeout_ms) {
    if (!c) return -1;
    PW(pw_thread_loop_lock)(c->loop);
    int result = 0;
    if (!c->watch_registry) {
        c->watch_registry = pw_core_get_registry(c->core, PW_VERSION_REGISTRY, 0);
        if (c->watch_registry) pw_registry_add_listener(c->watch_registry, &c->watch_registry_listener, &watch_registry_events, c);
    }
    // The first round trip brings the metadata's global (bound then), the second its properties.
    if (!c->watch_registry || !round_trip(c, timeout_ms) || (c->watch_metadata && !round_trip(c, timeout_ms))) result = -1;
    else result = c->watch_metadata ? 1 : 0;
    c->default_changed = changed;
    c->default_context = context;
    PW(pw_thread_loop_unlock)(c->loop);
    return result;
}

void aq_pw_default_sink(aq_pw_connection *c, char *name, size_t size) {
    if (!c || size == 0) return;
    PW(pw_thread_loop_lock)(c->loop);
    snprintf(name, size, "%s", c->default_sink);
    PW(pw_thread_loop_unlock)(c->loop);
}

// MARK: stream

static void on_state_changed(void *data, enum pw_stream_state old, enum pw_stream_state state, const char *message) {
    (void)old;
    struct aq_pw_stream *s = data;
    s->state = state;
    if (state == PW_STREAM_STATE_PAUSED || state == PW_STREAM_STATE_STREAMING) s->connected = 1;
    if (state == PW_STREAM_STATE_ERROR) {
        snprintf(s->error, sizeof s->error, "%s", message ? message : "stream error");
        if (!s->closing && s->callbacks.failed) s->callbacks.failed(s->callbacks.context, s->error);
    } else if (state == PW_STREAM_STATE_UNCONNECTED && s->connected && !s->closing) {
        snprintf(s->error, sizeof s->error, "the stream was disconnected%s%s", message ? ": " : "", message ? message : "");
        if (s->callbacks.failed) s->callbacks.failed(s->callbacks.context, s->error);
    } else if (state == PW_STREAM_STATE_STREAMING && s->start_pending) {
        s->start_pending = 0;
        if (s->callbacks.started) s->callbacks.started(s->callbacks.context);
    }
    PW(pw_thread_loop_signal)(s->connection->loop, false);
}

/// The data thread: one buffer of the quantum's size (or what the buffer holds), rendered
/// while the gate is open, silence otherwise. Nothing here allocates, locks or waits; the
/// semaphore is posted only while a pause waits.
static void on_process(void *data) {
    struct aq_pw_stream *s = data;
    struct pw_buffer *b = PW(pw_stream_dequeue_buffer)(s->stream);
    if (!b) return;
    struct spa_buffer *buffer = b->buffer;
    struct spa_data *d = &buffer->datas[0];
    uint32_t stride = 4 * s->channels;
    if (!d->data || stride == 0) { PW(pw_stream_queue_buffer)(s->stream, b); return; }
    uint32_t frames = d->maxsize / stride;
    if (b->requested > 0 && b->requested < frames) frames = (uint32_t)b->requested;
    atomic_fetch_add(&s->rendering, 1);
    if (atomic_load(&s->open)) s->callbacks.render(s->callbacks.context, d->data, frames);
    else memset(d->data, 0, (size_t)frames * stride);
    if (atomic_fetch_sub(&s->rendering, 1) == 1 && atomic_load(&s->pause_waiting)) sem_post(&s->idle);
    d->chunk->offset = 0;
    d->chunk->stride = (int32_t)stride;
    d->chunk->size = frames * stride;
    b->size = frames;
    PW(pw_stream_queue_buffer)(s->stream, b);
}

/// The data thread, for a capture stream: what the buffer holds goes to the callback while the
/// gate is open.
static void on_capture(void *data) {
    struct aq_pw_stream *s = data;
    struct pw_buffer *b = PW(pw_stream_dequeue_buffer)(s->stream);
    if (!b) return;
    struct spa_data *d = &b->buffer->datas[0];
    uint32_t stride = 4 * s->channels;
    if (d->data && d->chunk && stride > 0) {
        uint32_t offset = d->chunk->offset % (d->maxsize ? d->maxsize : 1);
        uint32_t size = d->chunk->size;
        if (offset + size > d->maxsize) size = d->maxsize - offset;
        atomic_fetch_add(&s->rendering, 1);
        if (atomic_load(&s->open) && size >= stride) {
            s->callbacks.capture(s->callbacks.context, (const float *)((const uint8_t *)d->data + offset), size / stride);
        }
        if (atomic_fetch_sub(&s->rendering, 1) == 1 && atomic_load(&s->pause_waiting)) sem_post(&s->idle);
    }
    PW(pw_stream_queue_buffer)(s->stream, b);
}

static void on_drained(void *data) {
    struct aq_pw_stream *s = data;
    if (s->callbacks.drained) s->callbacks.drained(s->callbacks.context);
}

static const struct pw_stream_events stream_events = {
    .version = PW_VERSION_STREAM_EVENTS,
    .state_changed = on_state_changed,
    .process = on_process,
    .drained = on_drained,
};

static const struct pw_stream_events capture_events = {
    .version = PW_VERSION_STREAM_EVENTS,
    .state_changed = on_state_changed,
    .process = on_capture,
};

static enum spa_audio_channel position_named(const char *name, size_t length) {
    static const struct { const char *name; enum spa_audio_channel position; } table[] = {
        {"MONO", SPA_AUDIO_CHANNEL_MONO}, {"FL", SPA_AUDIO_CHANNEL_FL}, {"FR", SPA_AUDIO_CHANNEL_FR},
        {"FC", SPA_AUDIO_CHANNEL_FC}, {"LFE", SPA_AUDIO_CHANNEL_LFE}, {"SL", SPA_AUDIO_CHANNEL_SL},
        {"SR", SPA_AUDIO_CHANNEL_SR}, {"FLC", SPA_AUDIO_CHANNEL_FLC}, {"FRC", SPA_AUDIO_CHANNEL_FRC},
        {"RC", SPA_AUDIO_CHANNEL_RC}, {"RL", SPA_AUDIO_CHANNEL_RL}, {"RR", SPA_AUDIO_CHANNEL_RR},
        {"TC", SPA_AUDIO_CHANNEL_TC}, {"TFL", SPA_AUDIO_CHANNEL_TFL}, {"TFC", SPA_AUDIO_CHANNEL_TFC},
        {"TFR", SPA_AUDIO_CHANNEL_TFR}, {"TRL", SPA_AUDIO_CHANNEL_TRL}, {"TRC", SPA_AUDIO_CHANNEL_TRC},
        {"TRR", SPA_AUDIO_CHANNEL_TRR},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strlen(table[i].name) == length && strncmp(table[i].name, name, length) == 0) return table[i].position;
    }
    if (length > 3 && strncmp(name, "AUX", 3) == 0) return (enum spa_audio_channel)(SPA_AUDIO_CHANNEL_AUX0 + atoi(name + 3));
    return SPA_AUDIO_CHANNEL_UNKNOWN;
}

static aq_pw_stream *open_stream(aq_pw_connection *c, int capture, int monitor, const char *name, const char *role,
                                 const char *target, uint32_t rate, uint32_t channels, const char *positions,
                                 uint32_t latency_frames, aq_pw_stream_callbacks callbacks, int timeout_ms,
                                 char *error, size_t error_size) {
    if (!c || channels == 0 || channels > SPA_AUDIO_MAX_CHANNELS || rate == 0) {
        copy_error(error, error_size, "no connection, or a rate or channel count PipeWire cannot take");
        return NULL;
    }
    struct aq_pw_stream *s = calloc(1, sizeof *s);
    if (!s) { copy_error(error, error_size, "out of memory"); return NULL; }
    s->connection = c;
    s->callbacks = callbacks;
    s->rate = rate;
    s->channels = channels;
    s->capture = capture;
    sem_init(&s->idle, 0, 0);

    struct spa_audio_info_raw info = { .format = SPA_AUDIO_FORMAT_F32, .rate = rate, .channels = channels };
    int positioned = positions != NULL;
    const char *cursor = positions;
    for (uint32_t i = 0; positioned && i < channels; i++) {
        const char *end = strchr(cursor, ',');
        size_t length = end ? (size_t)(end - cursor) : strlen(cursor);
        info.position[i] = position_named(cursor, length);
        if (info.position[i] == SPA_AUDIO_CHANNEL_UNKNOWN || (!end && i + 1 < channels)) positioned = 0;
        cursor = end ? end + 1 : cursor + length;
    }
    if (!positioned) info.flags |= SPA_AUDIO_FLAG_UNPOSITIONED;

    uint8_t pod_memory[1024];
    struct spa_pod_builder builder = SPA_POD_BUILDER_INIT(pod_memory, sizeof pod_memory);
    const struct spa_pod *params[1] = { spa_format_audio_raw_build(&builder, SPA_PARAM_EnumFormat, &info) };

    PW(pw_thread_loop_lock)(c->loop);
    struct pw_properties *properties = PW(pw_properties_new)(NULL, NULL);
    PW(pw_properties_set)(properties, PW_KEY_MEDIA_TYPE, "Audio");
    PW(pw_properties_set)(properties, PW_KEY_MEDIA_CATEGORY, capture ? "Capture" : "Playback");
    PW(pw_properties_set)(properties, PW_KEY_MEDIA_ROLE, role ? role : (capture ? "Production" : "Music"));
    if (monitor) PW(pw_properties_set)(properties, PW_KEY_STREAM_CAPTURE_SINK, "true");
    PW(pw_properties_set)(properties, PW_KEY_MEDIA_NAME, name ? name : "playback");
    char latency[64];
    snprintf(latency, sizeof latency, "%u/%u", latency_frames > 0 ? latency_frames : rate / 50, rate);
    PW(pw_properties_set)(properties, PW_KEY_NODE_LATENCY, latency);
    if (target) {
        PW(pw_properties_set)(properties, "target.object", target);
        PW(pw_properties_set)(properties, PW_KEY_NODE_DONT_RECONNECT, "true");
    }
    s->stream = PW(pw_stream_new)(c->core, name ? name : "playback", properties);
    if (!s->stream) {
        PW(pw_thread_loop_unlock)(c->loop);
        copy_error(error, error_size, "pw_stream_new failed");
        sem_destroy(&s->idle);
        free(s);
        return NULL;
    }
    PW(pw_stream_add_listener)(s->stream, &s->listener, capture ? &capture_events : &stream_events, s);
    s->next = c->streams;
    c->streams = s;
    enum pw_stream_flags flags = PW_STREAM_FLAG_AUTOCONNECT | PW_STREAM_FLAG_INACTIVE | PW_STREAM_FLAG_MAP_BUFFERS
        | PW_STREAM_FLAG_RT_PROCESS | (target ? PW_STREAM_FLAG_DONT_RECONNECT : 0);
    int result = PW(pw_stream_connect)(s->stream, capture ? PW_DIRECTION_INPUT : PW_DIRECTION_OUTPUT, PW_ID_ANY, flags, params, 1);
    int ready = 0;
    if (result < 0) {
        snprintf(error, error_size, "pw_stream_connect failed: %s", spa_strerror(result));
    } else {
        ready = wait_until(c->loop, &s->connected, &c->failed, timeout_ms);
        if (s->state == PW_STREAM_STATE_ERROR) {
            ready = 0;
            snprintf(error, error_size, "the PipeWire stream failed: %s", s->error);
        } else if (!ready) {
            if (atomic_load(&c->failed)) snprintf(error, error_size, "the PipeWire connection failed: %s", c->failure);
            else snprintf(error, error_size, "the PipeWire stream was not connected within %d ms (state %s)", timeout_ms,
                          PW(pw_stream_state_as_string)(s->state));
        }
    }
    PW(pw_thread_loop_unlock)(c->loop);
    if (!ready) { aq_pw_stream_close(s); return NULL; }
    return s;
}

aq_pw_stream *aq_pw_stream_open_playback(aq_pw_connection *c, const char *name, const char *role, const char *target,
                                         uint32_t rate, uint32_t channels, const char *positions, uint32_t latency_frames,
                                         aq_pw_stream_callbacks callbacks, int timeout_ms, char *error, size_t error_size) {
    if (!callbacks.render) { copy_error(error, error_size, "a playback stream needs a render callback"); return NULL; }
    return open_stream(c, 0, 0, name, role, target, rate, channels, positions, latency_frames, callbacks, timeout_ms, error, error_size);
}

aq_pw_stream *aq_pw_stream_open_capture(aq_pw_connection *c, const char *name, const char *target, int monitor,
                                        uint32_t rate, uint32_t channels, const char *positions, uint32_t latency_frames,
                                        aq_pw_stream_callbacks callbacks, int timeout_ms, char *error, size_t error_size) {
    if (!callbacks.capture) { copy_error(error, error_size, "a capture stream needs a capture callback"); return NULL; }
    return open_stream(c, 1, monitor, name, NULL, target, rate, channels, positions, latency_frames, callbacks, timeout_ms, error, error_size);
}

void aq_pw_stream_start(aq_pw_stream *s) {
    if (!s) return;
    PW(pw_thread_loop_lock)(s->connection->loop);
    s->start_pending = 1;
    atomic_store(&s->open, 1);
    PW(pw_stream_set_active)(s->stream, true);
    if (s->state == PW_STREAM_STATE_STREAMING) {
        s->start_pending = 0;
        if (s->callbacks.started) s->callbacks.started(s->callbacks.context);
    }
    PW(pw_thread_loop_unlock)(s->connection->loop);
}

/// Closes the gate and waits for a render in progress to end (at most 2 s: a render is one
/// quantum's work).
static void close_gate(aq_pw_stream *s) {
    atomic_store(&s->pause_waiting, 1);
    atomic_store(&s->open, 0);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 2;
    while (atomic_load(&s->rendering) > 0) {
        if (sem_timedwait(&s->idle, &deadline) != 0 && errno == ETIMEDOUT) break;
    }
    atomic_store(&s->pause_waiting, 0);
    while (sem_trywait(&s->idle) == 0) {}
}

void aq_pw_stream_pause(aq_pw_stream *s) {
    if (!s) return;
    close_gate(s);
    PW(pw_thread_loop_lock)(s->connection->loop);
    s->start_pending = 0;
    PW(pw_stream_set_active)(s->stream, false);
    PW(pw_thread_loop_unlock)(s->connection->loop);
}

void aq_pw_stream_flush(aq_pw_stream *s) {
    if (!s) return;
    PW(pw_thread_loop_lock)(s->connection->loop);
    PW(pw_stream_flush)(s->stream, false);
    PW(pw_thread_loop_unlock)(s->connection->loop);
}

void aq_pw_stream_drain(aq_pw_stream *s) {
    if (!s) return;
    close_gate(s);
    PW(pw_thread_loop_lock)(s->connection->loop);
    PW(pw_stream_flush)(s->stream, true);
    PW(pw_thread_loop_unlock)(s->connection->loop);
}

int64_t aq_pw_stream_latency_frames(aq_pw_stream *s) {
    if (!s) return 0;
    struct pw_time time;
    memset(&time, 0, sizeof time);
    if (PW(pw_stream_get_time_n)(s->stream, &time, sizeof time) < 0 || time.rate.denom == 0) return 0;
    int64_t delay = time.delay * (int64_t)time.rate.num * (int64_t)s->rate / (int64_t)time.rate.denom;
    return delay + (int64_t)time.buffered + (int64_t)time.queued;
}

uint32_t aq_pw_stream_node_id(aq_pw_stream *s) {
    return s ? PW(pw_stream_get_node_id)(s->stream) : UINT32_MAX;
}

void aq_pw_stream_close(aq_pw_stream *s) {
    if (!s) return;
    close_gate(s);
    aq_pw_connection *c = s->connection;
    PW(pw_thread_loop_lock)(c->loop);
    s->closing = 1;
    for (struct aq_pw_stream **link = &c->streams; *link; link = &(*link)->next) {
        if (*link == s) { *link = s->next; break; }
    }
    spa_hook_remove(&s->listener);
    PW(pw_stream_disconnect)(s->stream);
    PW(pw_stream_destroy)(s->stream);
    PW(pw_thread_loop_unlock)(c->loop);
    sem_destroy(&s->idle);
    free(s);
}
