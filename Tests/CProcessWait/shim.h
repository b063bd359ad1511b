// pidfd_open and waitid(P_PIDFD): waiting for one child's exit by a descriptor that names that
// process only (a recycled pid cannot be mistaken for it). Linux 5.3+, glibc 2.36+.
#include <sys/pidfd.h>
#include <sys/wait.h>
#include <poll.h>
