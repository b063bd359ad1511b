// libsoxr (Debian: libsoxr-dev, and libsoxr0 to run). LGPL-2.1-or-later.
//
// libsoxr is not linked: it is opened when the first converter is made (see CDynamicLibrary.h).
// Swift calls the aq_ functions, each of the library function's own type, after aq_soxr_load()
// has returned 1.
#include <soxr.h>
#include <CDynamicLibrary.h>

#define AQ_SOXR_FUNCTIONS(X) \
    X(soxr_io_spec) X(soxr_quality_spec) X(soxr_create) X(soxr_process) X(soxr_clear) X(soxr_delete)

AQ_SOXR_FUNCTIONS(AQ_DYNAMIC_DECLARE)

/// 1 when libsoxr is open (the first call opens it), 0 when it cannot be (aq_soxr_error says why).
int aq_soxr_load(void);
const char *aq_soxr_error(void);
