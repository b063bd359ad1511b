// opencore-amr's AMR-NB and AMR-WB decoders (Debian: libopencore-amrnb-dev, libopencore-amrwb-dev; Apache-2.0).
#include <opencore-amrnb/interf_dec.h>
#include <opencore-amrwb/dec_if.h>
