// libvorbis (Debian: libvorbis-dev, which brings libogg-dev). BSD-3-Clause.
#include <vorbis/codec.h>
