// libfaad2 (Debian: libfaad-dev, and libfaad2 to run). GPL-2.0-or-later.
//
// libfaad is not linked: it is opened when the first decoder is made (see CDynamicLibrary.h).
// Swift calls the aq_ functions, each of the library function's own type, after aq_faad_load()
// has returned 1.
#include <neaacdec.h>
#include <CDynamicLibrary.h>

#define AQ_FAAD_FUNCTIONS(X) \
    X(NeAACDecOpen) X(NeAACDecGetCurrentConfiguration) X(NeAACDecSetConfiguration) X(NeAACDecInit2) \
    X(NeAACDecDecode) X(NeAACDecPostSeekReset) X(NeAACDecGetErrorMessage) X(NeAACDecClose)

AQ_FAAD_FUNCTIONS(AQ_DYNAMIC_DECLARE)

/// 1 when libfaad is open (the first call opens it), 0 when it cannot be (aq_faad_error says why).
int aq_faad_load(void);
const char *aq_faad_error(void);
