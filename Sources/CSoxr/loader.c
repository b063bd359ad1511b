// libsoxr, opened on first use. See include/CSoxr.h.
#include "CSoxr.h"

AQ_DYNAMIC_LIBRARY(soxr, AQ_SOXR_FUNCTIONS, "libsoxr0", "libsoxr.so.0", "libsoxr.so")

AQ_FORWARD(soxr_io_spec_t, soxr_io_spec, (soxr_datatype_t input, soxr_datatype_t output), (input, output))
AQ_FORWARD(soxr_quality_spec_t, soxr_quality_spec, (unsigned long recipe, unsigned long flags), (recipe, flags))
AQ_FORWARD(soxr_t, soxr_create,
           (double input_rate, double output_rate, unsigned channels, soxr_error_t *error, soxr_io_spec_t const *io,
            soxr_quality_spec_t const *quality, soxr_runtime_spec_t const *runtime),
           (input_rate, output_rate, channels, error, io, quality, runtime))
AQ_FORWARD(soxr_error_t, soxr_process,
           (soxr_t resampler, soxr_in_t input, size_t input_length, size_t *input_done, soxr_out_t output,
            size_t output_length, size_t *output_done),
           (resampler, input, input_length, input_done, output, output_length, output_done))
AQ_FORWARD(soxr_error_t, soxr_clear, (soxr_t resampler), (resampler))
AQ_FORWARD_VOID(soxr_delete, (soxr_t resampler), (resampler))
