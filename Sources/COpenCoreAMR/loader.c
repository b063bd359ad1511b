// opencore-amr, opened on first use. See include/COpenCoreAMR.h.
#include "COpenCoreAMR.h"

AQ_DYNAMIC_LIBRARY(amrnb, AQ_AMRNB_FUNCTIONS, "libopencore-amrnb0", "libopencore-amrnb.so.0", "libopencore-amrnb.so")
AQ_DYNAMIC_LIBRARY(amrwb, AQ_AMRWB_FUNCTIONS, "libopencore-amrwb0", "libopencore-amrwb.so.0", "libopencore-amrwb.so")

AQ_FORWARD(void *, Decoder_Interface_init, (void), ())
AQ_FORWARD_VOID(Decoder_Interface_Decode, (void *state, const unsigned char *input, short *output, int bad_frame),
                (state, input, output, bad_frame))
AQ_FORWARD_VOID(Decoder_Interface_exit, (void *state), (state))
AQ_FORWARD(void *, D_IF_init, (void), ())
AQ_FORWARD_VOID(D_IF_decode, (void *state, const unsigned char *bits, short *synthesis, int bad_frame),
                (state, bits, synthesis, bad_frame))
AQ_FORWARD_VOID(D_IF_exit, (void *state), (state))
