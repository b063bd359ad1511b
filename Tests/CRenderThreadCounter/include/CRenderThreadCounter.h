// The instrument of the render path's real-time tests (RealtimeTests). It counts what a thread does
// while it is inside a render: heap allocations and frees (it interposes malloc, calloc, realloc,
// free and the aligned allocators in the test executable and forwards each to glibc's own,
// __libc_malloc …), system calls made through syscall(2), wakes of other threads (sem_post, as
// libdispatch wakes its workers), read- and
// write-like system calls (the thread's syscr/syscw in /proc/thread-self/io) and voluntary context
// switches (the thread blocked: a wait, a contended lock, blocking I/O).
//
// A render is bracketed by aq_render_observed(source, 1) and aq_render_observed(source, 0): the
// library calls it on the sink's thread when the hook is installed (RenderThreadObserver), and a
// test calls it around an offline render. Only renders that begin while the counter is armed count. Under
// ThreadSanitizer or AddressSanitizer, which interpose the allocator themselves, it counts nothing
// and aq_counting_available returns 0.
#ifndef AQ_RENDER_THREAD_COUNTER_H
#define AQ_RENDER_THREAD_COUNTER_H

#include <stdint.h>

typedef struct aq_counts {
    uint64_t renders;
    uint64_t allocations;
    uint64_t frees;
    /// syscall(2) calls (futex).
    uint64_t syscalls;
    /// Read- and write-like system calls (read, write, pread, eventfd writes …).
    uint64_t readWrites;
    /// Voluntary context switches.
    uint64_t waits;
    /// Allocations and frees made directly by the exempt library (aq_counting_exempt), apart.
    uint64_t exempt;
    /// sem_post calls: wakes of another thread (libdispatch's, when a render signals the worker).
    uint64_t wakes;
} aq_counts;

/// 1 when the allocator is interposed (not under a sanitizer).
int aq_counting_available(void);
/// Counts the allocations and frees that code of the library whose file name contains `library`
/// makes itself apart from the others (a documented exception); NULL or "" for none.
void aq_counting_exempt(const char *library);
/// Starts counting, from zero, the renders of `source` (NULL: of any source) that begin from now on.
void aq_counting_arm(const void *source);
/// Stops counting and returns the totals since aq_counting_arm.
aq_counts aq_counting_disarm(void);
/// The hook: 1 as a render of `source` begins on the calling thread, 0 as it ends.
void aq_render_observed(const void *source, int32_t entering);
/// Makes one syscall(2) call (getpid): for the instrument's own test.
long aq_counting_probe_syscall(void);
/// Posts a semaphore once: for the instrument's own test.
void aq_counting_probe_wake(void);
/// Writes the call stacks of the counted allocations (up to 12 distinct ones) to standard error.
void aq_counting_print_sites(void);

/// Drops CAP_SYS_NICE from the calling thread's effective capabilities (the thread only: Linux
/// keeps capabilities per thread), so that a root process's thread is refused SCHED_FIFO as a
/// desktop user's is. Returns 0, or -1 with errno.
int aq_thread_drop_nice_capability(void);
/// The calling thread's kernel id.
long aq_thread_id(void);

/// A resource limit (RLIM_INFINITY: none).
typedef struct aq_limit { unsigned long long current, maximum; } aq_limit;
/// RLIMIT_RTPRIO (real_time 0) or RLIMIT_RTTIME (1) of the process.
aq_limit aq_realtime_limit(int which);
/// Sets it; 0, or -1 with errno.
int aq_set_realtime_limit(int which, aq_limit limit);

#endif
