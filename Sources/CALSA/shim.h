#include <alsa/asoundlib.h>
#include <sys/eventfd.h>
#include <poll.h>
