// opencore-amr's AMR-NB and AMR-WB decoders (Debian: libopencore-amrnb-dev,
// libopencore-amrwb-dev, and libopencore-amrnb0, libopencore-amrwb0 to run). Apache-2.0.
//
// The libraries are not linked: each is opened when its first decoder is made (see
// CDynamicLibrary.h). Swift calls the aq_ functions, each of the library function's own type,
// after aq_amrnb_load() or aq_amrwb_load() has returned 1.
#include <opencore-amrnb/interf_dec.h>
#include <opencore-amrwb/dec_if.h>
#include <CDynamicLibrary.h>

#define AQ_AMRNB_FUNCTIONS(X) X(Decoder_Interface_init) X(Decoder_Interface_Decode) X(Decoder_Interface_exit)
#define AQ_AMRWB_FUNCTIONS(X) X(D_IF_init) X(D_IF_decode) X(D_IF_exit)

AQ_AMRNB_FUNCTIONS(AQ_DYNAMIC_DECLARE)
AQ_AMRWB_FUNCTIONS(AQ_DYNAMIC_DECLARE)

/// 1 when the AMR-NB library is open (the first call opens it), 0 when it cannot be (aq_amrnb_error says why).
int aq_amrnb_load(void);
const char *aq_amrnb_error(void);
/// 1 when the AMR-WB library is open (the first call opens it), 0 when it cannot be (aq_amrwb_error says why).
int aq_amrwb_load(void);
const char *aq_amrwb_error(void);
