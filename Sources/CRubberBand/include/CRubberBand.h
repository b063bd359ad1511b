// Rubber Band Library 3.x, C API (Debian: librubberband-dev, and librubberband2 to run). GPL-2.0-or-later.
//
// The library is not linked: it is opened when the first Rubber Band stage is made (see
// CDynamicLibrary.h). Swift calls the aq_ functions, each of the library function's own type,
// after aq_rubberband_load() has returned 1.
#include <rubberband/rubberband-c.h>
#include <CDynamicLibrary.h>

#define AQ_RUBBERBAND_FUNCTIONS(X) \
    X(rubberband_new) X(rubberband_delete) X(rubberband_reset) X(rubberband_set_time_ratio) \
    X(rubberband_set_pitch_scale) X(rubberband_get_preferred_start_pad) X(rubberband_get_start_delay) \
    X(rubberband_set_max_process_size) X(rubberband_process) X(rubberband_available) X(rubberband_retrieve)

AQ_RUBBERBAND_FUNCTIONS(AQ_DYNAMIC_DECLARE)

/// 1 when Rubber Band is open (the first call opens it), 0 when it cannot be (aq_rubberband_error says why).
int aq_rubberband_load(void);
const char *aq_rubberband_error(void);
