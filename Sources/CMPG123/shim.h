// libmpg123 (Debian: libmpg123-dev). The header lives under the multiarch include directory.
#include <sys/types.h>
#if __has_include(<mpg123.h>)
#include <mpg123.h>
#else
#include <x86_64-linux-gnu/mpg123.h>
#endif
