// libsoxr (Debian: libsoxr-dev; LGPL-2.1+).
#include <soxr.h>
