// Rubber Band, opened on first use. See include/CRubberBand.h.
#include "CRubberBand.h"

AQ_DYNAMIC_LIBRARY(rubberband, AQ_RUBBERBAND_FUNCTIONS, "librubberband2", "librubberband.so.2", "librubberband.so")

AQ_FORWARD(RubberBandState, rubberband_new,
           (unsigned int rate, unsigned int channels, RubberBandOptions options, double time_ratio, double pitch_scale),
           (rate, channels, options, time_ratio, pitch_scale))
AQ_FORWARD_VOID(rubberband_delete, (RubberBandState state), (state))
AQ_FORWARD_VOID(rubberband_reset, (RubberBandState state), (state))
AQ_FORWARD_VOID(rubberband_set_time_ratio, (RubberBandState state, double ratio), (state, ratio))
AQ_FORWARD_VOID(rubberband_set_pitch_scale, (RubberBandState state, double scale), (state, scale))
AQ_FORWARD(unsigned int, rubberband_get_preferred_start_pad, (const RubberBandState state), (state))
AQ_FORWARD(unsigned int, rubberband_get_start_delay, (const RubberBandState state), (state))
AQ_FORWARD_VOID(rubberband_set_max_process_size, (RubberBandState state, unsigned int samples), (state, samples))
AQ_FORWARD_VOID(rubberband_process, (RubberBandState state, const float *const *input, unsigned int samples, int final),
                (state, input, samples, final))
AQ_FORWARD(int, rubberband_available, (const RubberBandState state), (state))
AQ_FORWARD(unsigned int, rubberband_retrieve, (const RubberBandState state, float *const *output, unsigned int samples),
           (state, output, samples))
