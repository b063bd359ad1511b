// libmpg123, opened on first use. See include/CMPG123.h.
#include "CMPG123.h"

AQ_DYNAMIC_LIBRARY(mpg123, AQ_MPG123_FUNCTIONS, "libmpg123-0", "libmpg123.so.0", "libmpg123.so")

AQ_FORWARD(mpg123_handle *, mpg123_new, (const char *decoder, int *error), (decoder, error))
AQ_FORWARD_VOID(mpg123_delete, (mpg123_handle *handle), (handle))
AQ_FORWARD(int, mpg123_param2, (mpg123_handle *handle, int type, long value, double fvalue), (handle, type, value, fvalue))
AQ_FORWARD(int, mpg123_format_none, (mpg123_handle *handle), (handle))
AQ_FORWARD(int, mpg123_format2, (mpg123_handle *handle, long rate, int channels, int encodings),
           (handle, rate, channels, encodings))
AQ_FORWARD(int, mpg123_open_feed, (mpg123_handle *handle), (handle))
AQ_FORWARD(int, mpg123_decode,
           (mpg123_handle *handle, const unsigned char *input, size_t input_size, void *output, size_t output_size,
            size_t *done),
           (handle, input, input_size, output, output_size, done))
AQ_FORWARD(int, mpg123_getformat, (mpg123_handle *handle, long *rate, int *channels, int *encoding),
           (handle, rate, channels, encoding))
AQ_FORWARD(const char *, mpg123_strerror, (mpg123_handle *handle), (handle))
AQ_FORWARD(int, mpg123_close, (mpg123_handle *handle), (handle))
