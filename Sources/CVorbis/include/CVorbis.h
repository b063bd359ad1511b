// libvorbis (Debian: libvorbis-dev, which brings libogg-dev; libvorbis0a to run). BSD-3-Clause.
//
// libvorbis is not linked: it is opened when the first Vorbis decoder is made (see
// CDynamicLibrary.h). Swift calls the aq_ functions, each of the library function's own type,
// after aq_vorbis_load() has returned 1. Only libogg's types are used, none of its functions.
#include <vorbis/codec.h>
#include <CDynamicLibrary.h>

#define AQ_VORBIS_FUNCTIONS(X) \
    X(vorbis_info_init) X(vorbis_info_clear) X(vorbis_comment_init) X(vorbis_comment_clear) \
    X(vorbis_synthesis_headerin) X(vorbis_synthesis_init) X(vorbis_synthesis_restart) X(vorbis_block_init) \
    X(vorbis_block_clear) X(vorbis_dsp_clear) X(vorbis_synthesis) X(vorbis_synthesis_blockin) \
    X(vorbis_synthesis_pcmout) X(vorbis_synthesis_read)

AQ_VORBIS_FUNCTIONS(AQ_DYNAMIC_DECLARE)

/// 1 when libvorbis is open (the first call opens it), 0 when it cannot be (aq_vorbis_error says why).
int aq_vorbis_load(void);
const char *aq_vorbis_error(void);
