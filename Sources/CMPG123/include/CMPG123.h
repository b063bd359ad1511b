// libmpg123 (Debian: libmpg123-dev, and libmpg123-0 to run). LGPL-2.1-or-later.
//
// libmpg123 is not linked: it is opened when the first MP3 decoder is made (see
// CDynamicLibrary.h). Swift calls the aq_ functions, each of the library function's own type,
// after aq_mpg123_load() has returned 1. The header lives under the multiarch include directory.
#include <sys/types.h>
#if __has_include(<mpg123.h>)
#include <mpg123.h>
#else
#include <x86_64-linux-gnu/mpg123.h>
#endif
#include <CDynamicLibrary.h>

#define AQ_MPG123_FUNCTIONS(X) \
    X(mpg123_new) X(mpg123_delete) X(mpg123_param2) X(mpg123_format_none) X(mpg123_format2) X(mpg123_open_feed) \
    X(mpg123_decode) X(mpg123_getformat) X(mpg123_strerror) X(mpg123_close)

AQ_MPG123_FUNCTIONS(AQ_DYNAMIC_DECLARE)

/// 1 when libmpg123 is open (the first call opens it), 0 when it cannot be (aq_mpg123_error says why).
int aq_mpg123_load(void);
const char *aq_mpg123_error(void);
