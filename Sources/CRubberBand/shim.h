// Rubber Band Library 3.x, C API (Debian: librubberband-dev; GPL-2+).
#include <rubberband/rubberband-c.h>
