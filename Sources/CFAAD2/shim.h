// libfaad2 (Debian: libfaad-dev).
#include <neaacdec.h>
