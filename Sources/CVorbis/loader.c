// libvorbis, opened on first use. See include/CVorbis.h.
#include "CVorbis.h"

AQ_DYNAMIC_LIBRARY(vorbis, AQ_VORBIS_FUNCTIONS, "libvorbis0a", "libvorbis.so.0", "libvorbis.so")

AQ_FORWARD_VOID(vorbis_info_init, (vorbis_info *info), (info))
AQ_FORWARD_VOID(vorbis_info_clear, (vorbis_info *info), (info))
AQ_FORWARD_VOID(vorbis_comment_init, (vorbis_comment *comment), (comment))
AQ_FORWARD_VOID(vorbis_comment_clear, (vorbis_comment *comment), (comment))
AQ_FORWARD(int, vorbis_synthesis_headerin, (vorbis_info *info, vorbis_comment *comment, ogg_packet *packet),
           (info, comment, packet))
AQ_FORWARD(int, vorbis_synthesis_init, (vorbis_dsp_state *state, vorbis_info *info), (state, info))
AQ_FORWARD(int, vorbis_synthesis_restart, (vorbis_dsp_state *state), (state))
AQ_FORWARD(int, vorbis_block_init, (vorbis_dsp_state *state, vorbis_block *block), (state, block))
AQ_FORWARD(int, vorbis_block_clear, (vorbis_block *block), (block))
AQ_FORWARD_VOID(vorbis_dsp_clear, (vorbis_dsp_state *state), (state))
AQ_FORWARD(int, vorbis_synthesis, (vorbis_block *block, ogg_packet *packet), (block, packet))
AQ_FORWARD(int, vorbis_synthesis_blockin, (vorbis_dsp_state *state, vorbis_block *block), (state, block))
AQ_FORWARD(int, vorbis_synthesis_pcmout, (vorbis_dsp_state *state, float ***pcm), (state, pcm))
AQ_FORWARD(int, vorbis_synthesis_read, (vorbis_dsp_state *state, int samples), (state, samples))
