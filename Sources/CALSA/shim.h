#include <alsa/asoundlib.h>
#include <sys/eventfd.h>
#include <poll.h>

// An error handler that prints nothing: ALSA's default prints its configuration's failures to
// stderr (a probe of `default` on a machine without a card would print eight lines).
static inline void aq_alsa_quiet_errors(const char *file, int line, const char *function, int err, const char *fmt, ...) {
    (void)file; (void)line; (void)function; (void)err; (void)fmt;
}
static inline void aq_alsa_set_quiet(int quiet) { snd_lib_error_set_handler(quiet ? aq_alsa_quiet_errors : NULL); }
