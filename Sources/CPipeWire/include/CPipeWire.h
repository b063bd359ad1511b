// libpipewire-0.3 (Debian: libpipewire-0.3-dev to build, libpipewire-0.3-0 to run). MIT.
//
// libpipewire is not linked: it is opened when the first connection is made (see
// CDynamicLibrary.h). Its headers are read only by loader.c (through the `system` links to
// /usr/include/pipewire-0.3 and /usr/include/spa-0.2): Swift sees the small API below, which
// owns the thread loop, the context, the core and the streams, so that everything PipeWire
// defines as inline functions and macros (SPA pods, interface calls) stays in C.
#ifndef AQ_CPIPEWIRE_H
#define AQ_CPIPEWIRE_H

#include <stddef.h>
#include <stdint.h>

/// A connection: a thread loop, a context and a core on it.
typedef struct aq_pw_connection aq_pw_connection;
/// A playback stream on a connection.
typedef struct aq_pw_stream aq_pw_stream;

/// 1 when libpipewire is open (the first call opens it and calls pw_init), 0 when it cannot be
/// (aq_pw_error says why).
int aq_pw_load(void);
const char *aq_pw_error(void);
/// The version of the library that was opened ("0.3.65").
const char *aq_pw_library_version(void);

/// Connects to the server: `remote` is a socket name in the runtime directory or an absolute
/// path (NULL: $PIPEWIRE_REMOTE, else "pipewire-0"). Returns once the server has answered a
/// round trip, at most `timeout_ms` later; NULL when it does not (`error` says why).
aq_pw_connection *aq_pw_connect(const char *remote, const char *application, int timeout_ms,
                                char *error, size_t error_size);
/// Stops the loop and frees everything (close the connection's streams first).
void aq_pw_disconnect(aq_pw_connection *connection);
/// 1 once the server went away or reported a fatal error on the connection.
int aq_pw_connection_failed(aq_pw_connection *connection);

/// One audio node of the server (a sink, a source, a stream), as aq_pw_list_nodes reports it.
typedef void (*aq_pw_node_callback)(void *context, uint32_t id, const char *name, const char *description,
                                    const char *media_class, uint32_t channels, uint32_t rate, int is_default);

/// Calls `callback` for each node whose media.class begins with "Audio/", after a round trip
/// (and one more for the `default` metadata, which says which sink and source are the
/// defaults). Returns the count, or -1 when the server did not answer within `timeout_ms`.
int aq_pw_list_nodes(aq_pw_connection *connection, aq_pw_node_callback callback, void *context, int timeout_ms);

/// Watches the session manager's `default` metadata on the connection from now until it is
/// disconnected: returns once the current defaults are known (at most `timeout_ms`; 0 when the
/// server has no such metadata by then, -1 when it did not answer). `changed` is called on the
/// loop's thread each time the default sink's node name changes afterwards (the name, "" when
/// there is none).
int aq_pw_watch_default_sink(aq_pw_connection *connection, void (*changed)(void *context, const char *sink),
                             void *context, int timeout_ms);
/// The default sink's node name as last seen by the watch ("" when unknown), copied into `name`.
void aq_pw_default_sink(aq_pw_connection *connection, char *name, size_t size);

typedef struct aq_pw_stream_callbacks {
    void *context;
    /// PipeWire's data thread, under the render thread's contract: fill `frames` interleaved
    /// float32 frames. Called only between aq_pw_stream_start and aq_pw_stream_pause.
    void (*render)(void *context, float *data, uint32_t frames);
    /// For a capture stream, the same thread and contract: `frames` interleaved float32 frames
    /// were captured.
    void (*capture)(void *context, const float *data, uint32_t frames);
    /// The loop's thread: the stream is streaming after aq_pw_stream_start.
    void (*started)(void *context);
    /// The loop's thread: what was queued before aq_pw_stream_drain has been played.
    void (*drained)(void *context);
    /// The loop's thread: the stream or the connection failed (the server went away, the
    /// device the stream was pinned to was removed).
    void (*failed)(void *context, const char *message);
} aq_pw_stream_callbacks;

/// Opens an inactive playback stream of interleaved float32 at `rate` with `channels`
/// channels at `positions` (PipeWire's short names separated by commas: "FL,FR,FC,LFE…";
/// NULL or an unknown name: no positions), `latency_frames` asked through node.latency.
/// `target` pins the stream to a node (its name or serial number); NULL follows the default.
/// Returns once the stream is connected (paused), at most `timeout_ms` later.
aq_pw_stream *aq_pw_stream_open_playback(aq_pw_connection *connection, const char *name, const char *role,
                                         const char *target, uint32_t rate, uint32_t channels,
                                         const char *positions, uint32_t latency_frames,
                                         aq_pw_stream_callbacks callbacks, int timeout_ms,
                                         char *error, size_t error_size);
/// Opens an inactive capture stream of interleaved float32 at `rate` with `channels` channels
/// from `target` (a source's node name; with `monitor` nonzero, a sink whose output is
/// recorded); NULL: the default source (or, with `monitor`, the default sink's output).
aq_pw_stream *aq_pw_stream_open_capture(aq_pw_connection *connection, const char *name, const char *target, int monitor,
                                        uint32_t rate, uint32_t channels, const char *positions, uint32_t latency_frames,
                                        aq_pw_stream_callbacks callbacks, int timeout_ms, char *error, size_t error_size);
/// Activates the stream and lets the data thread render (or deliver what it captured).
void aq_pw_stream_start(aq_pw_stream *stream);
/// Stops rendering: when this returns no render call is in progress and none starts until
/// aq_pw_stream_start. The stream is deactivated; what it holds stays.
void aq_pw_stream_pause(aq_pw_stream *stream);
/// Drops what the stream holds and has not played.
void aq_pw_stream_flush(aq_pw_stream *stream);
/// Stops rendering and plays out what the stream holds; `drained` is called then.
void aq_pw_stream_drain(aq_pw_stream *stream);
/// Frames (at the stream's rate) from the next one rendered to the device: the graph's delay,
/// the resampler's and the queued buffers'.
int64_t aq_pw_stream_latency_frames(aq_pw_stream *stream);
/// The server's id of the stream's node (for tests and messages), or UINT32_MAX.
uint32_t aq_pw_stream_node_id(aq_pw_stream *stream);
/// Disconnects and frees the stream; no callback runs after it returns.
void aq_pw_stream_close(aq_pw_stream *stream);

#endif
