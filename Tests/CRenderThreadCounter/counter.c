#define _GNU_SOURCE
#include "CRenderThreadCounter.h"
#include <dlfcn.h>
#include <execinfo.h>
#include <semaphore.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/capability.h>

#if defined(__has_feature)
#  if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#    define AQ_NO_INTERPOSE 1
#  endif
#endif

static atomic_int armed;
// Only renders of this source count (NULL: any).
static _Atomic(const void *) armedFor;
static _Atomic uint64_t totalRenders, totalAllocations, totalFrees, totalSyscalls, totalReadWrites, totalWaits, totalExempt, totalWakes;
// Allocations made directly by a library whose file name contains this text count apart (the documented exceptions).
static char exemptLibrary[64];

// The calling thread's state while it is inside a counted render.
static __thread int counting;
/* The render being counted: a render of another source nested in it (a queue inside a graph) ends nothing. */
static __thread const void *countingSource;
static __thread uint64_t allocations, frees, syscalls, exempt, wakes;
static __thread long waitsAtStart;
static __thread long readWritesAtStart;
static __thread int ioFile = -1;

// The first call stacks of counted allocations, distinct ones only (told apart by their first frames).
enum { siteCapacity = 12, siteDepth = 24, siteKey = 10 };
static void *sites[siteCapacity][siteDepth];
static int siteDepths[siteCapacity];
static int siteCount;
static atomic_flag siteLock = ATOMIC_FLAG_INIT;

static long voluntarySwitches(void) {
    struct rusage usage;
    return getrusage(RUSAGE_THREAD, &usage) == 0 ? usage.ru_nvcsw : 0;
}

/// syscr + syscw of the calling thread, or -1.
static long readWriteCalls(void) {
    if (ioFile < 0) {
        // Opened once per thread that renders while armed (a handful in a test run) and kept.
        ioFile = open("/proc/thread-self/io", O_RDONLY | O_CLOEXEC);
        if (ioFile < 0) return -1;
    }
    char text[512];
    ssize_t length = pread(ioFile, text, sizeof text - 1, 0);
    if (length <= 0) return -1;
    text[length] = 0;
    long sum = 0;
    const char *keys[2] = { "syscr: ", "syscw: " };
    for (int i = 0; i < 2; i++) {
        const char *at = strstr(text, keys[i]);
        if (!at) return -1;
        sum += strtol(at + strlen(keys[i]), NULL, 10);
    }
    return sum;
}

static void recordSite(void) {
    counting = 0;  // backtrace must not count itself
    void *frames[siteDepth];
    int depth = backtrace(frames, siteDepth);
    while (atomic_flag_test_and_set_explicit(&siteLock, memory_order_acquire)) {}
    int known = 0;
    for (int i = 0; i < siteCount && !known; i++) {
        int n = depth < siteKey ? depth : siteKey;
        known = siteDepths[i] >= n && memcmp(sites[i], frames, (size_t)n * sizeof(void *)) == 0;
    }
    if (!known && siteCount < siteCapacity) {
        memcpy(sites[siteCount], frames, (size_t)depth * sizeof(void *));
        siteDepths[siteCount] = depth;
        siteCount++;
    }
    atomic_flag_clear_explicit(&siteLock, memory_order_release);
    counting = 1;
}

#ifndef AQ_NO_INTERPOSE
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

/// Whether the code at `caller` belongs to the exempt library.
static int isExempt(void *caller) {
    if (!exemptLibrary[0]) return 0;
    Dl_info info;
    return dladdr(caller, &info) && info.dli_fname && strstr(info.dli_fname, exemptLibrary);
}

static inline void countAllocation(void *caller) {
    if (!counting) return;
    if (isExempt(caller)) { exempt++; return; }
    allocations++;
    recordSite();
}

#define CALLER __builtin_return_address(0)
void *malloc(size_t size) { countAllocation(CALLER); return __libc_malloc(size); }
void *calloc(size_t count, size_t size) { countAllocation(CALLER); return __libc_calloc(count, size); }
void *realloc(void *pointer, size_t size) { countAllocation(CALLER); return __libc_realloc(pointer, size); }
void free(void *pointer) {
    if (counting && pointer) {
        if (isExempt(CALLER)) exempt++; else frees++;
    }
    __libc_free(pointer);
}
int posix_memalign(void **result, size_t alignment, size_t size) {
    countAllocation(CALLER);
    void *memory = __libc_memalign(alignment, size);
    if (!memory) return 12;  // ENOMEM
    *result = memory;
    return 0;
}
void *aligned_alloc(size_t alignment, size_t size) { countAllocation(CALLER); return __libc_memalign(alignment, size); }
void *memalign(size_t alignment, size_t size) { countAllocation(CALLER); return __libc_memalign(alignment, size); }

typedef long (*SyscallFunction)(long, ...);
static _Atomic(SyscallFunction) realSyscall;

long syscall(long number, ...) {
    SyscallFunction real = atomic_load_explicit(&realSyscall, memory_order_acquire);
    if (!real) {
        real = (SyscallFunction)dlsym(RTLD_NEXT, "syscall");
        atomic_store_explicit(&realSyscall, real, memory_order_release);
    }
    if (counting) syscalls++;
    va_list arguments;
    va_start(arguments, number);
    long a = va_arg(arguments, long), b = va_arg(arguments, long), c = va_arg(arguments, long);
    long d = va_arg(arguments, long), e = va_arg(arguments, long), f = va_arg(arguments, long);
    va_end(arguments);
    return real(number, a, b, c, d, e, f);
}

typedef int (*SemPostFunction)(sem_t *);
static _Atomic(SemPostFunction) realSemPost;

// libdispatch wakes a sleeping worker thread with sem_post (a futex wake when one waits).
int sem_post(sem_t *semaphore) {
    SemPostFunction real = atomic_load_explicit(&realSemPost, memory_order_acquire);
    if (!real) {
        real = (SemPostFunction)dlsym(RTLD_NEXT, "sem_post");
        atomic_store_explicit(&realSemPost, real, memory_order_release);
    }
    if (counting) wakes++;
    return real(semaphore);
}

int aq_counting_available(void) { return 1; }
#else
int aq_counting_available(void) { return 0; }
#endif

void aq_counting_exempt(const char *library) {
    snprintf(exemptLibrary, sizeof exemptLibrary, "%s", library ? library : "");
}

void aq_counting_arm(const void *source) {
    atomic_store(&armedFor, source);
#ifndef AQ_NO_INTERPOSE
    // What the counted path may call first loads lazily, and loading allocates: do it now.
    if (!atomic_load(&realSyscall)) atomic_store(&realSyscall, (SyscallFunction)dlsym(RTLD_NEXT, "syscall"));
    if (!atomic_load(&realSemPost)) atomic_store(&realSemPost, (SemPostFunction)dlsym(RTLD_NEXT, "sem_post"));
#endif
    void *warm[2];
    backtrace(warm, 2);
    atomic_store(&totalRenders, 0);
    atomic_store(&totalAllocations, 0);
    atomic_store(&totalFrees, 0);
    atomic_store(&totalSyscalls, 0);
    atomic_store(&totalReadWrites, 0);
    atomic_store(&totalWaits, 0);
    atomic_store(&totalExempt, 0);
    atomic_store(&totalWakes, 0);
    while (atomic_flag_test_and_set(&siteLock)) {}
    siteCount = 0;
    atomic_flag_clear(&siteLock);
    atomic_store(&armed, 1);
}

aq_counts aq_counting_disarm(void) {
    atomic_store(&armed, 0);
    aq_counts counts = {
        atomic_load(&totalRenders), atomic_load(&totalAllocations), atomic_load(&totalFrees),
        atomic_load(&totalSyscalls), atomic_load(&totalReadWrites), atomic_load(&totalWaits), atomic_load(&totalExempt),
        atomic_load(&totalWakes)
    };
    return counts;
}

void aq_render_observed(const void *source, int32_t entering) {
    if (entering) {
        if (!atomic_load_explicit(&armed, memory_order_acquire) || counting) return;
        const void *wanted = atomic_load_explicit(&armedFor, memory_order_acquire);
        if (wanted && wanted != source) return;
        allocations = 0;
        frees = 0;
        syscalls = 0;
        exempt = 0;
        wakes = 0;
        // The instrument's own reading of /proc may block: it comes before the switches are read.
        readWritesAtStart = readWriteCalls();
        waitsAtStart = voluntarySwitches();
        counting = 1;
        countingSource = source;
    } else {
        if (!counting || source != countingSource) return;
        counting = 0;
        long waits = voluntarySwitches() - waitsAtStart;
        long readWrites = readWriteCalls();
        // The pread that took the first reading counts in the second: it is the instrument's.
        long made = (readWrites >= 0 && readWritesAtStart >= 0) ? readWrites - readWritesAtStart - 1 : 0;
        atomic_fetch_add(&totalRenders, 1);
        atomic_fetch_add(&totalAllocations, allocations);
        atomic_fetch_add(&totalFrees, frees);
        atomic_fetch_add(&totalSyscalls, syscalls);
        atomic_fetch_add(&totalExempt, exempt);
        atomic_fetch_add(&totalWakes, wakes);
        atomic_fetch_add(&totalReadWrites, (uint64_t)(made > 0 ? made : 0));
        atomic_fetch_add(&totalWaits, (uint64_t)(waits > 0 ? waits : 0));
    }
}

void aq_counting_print_sites(void) {
    int count = siteCount;
    for (int i = 0; i < count; i++) {
        fprintf(stderr, "counted allocation %d:\n", i + 1);
        backtrace_symbols_fd(sites[i], siteDepths[i], 2);
    }
}

long aq_counting_probe_syscall(void) { return syscall(SYS_getpid); }

void aq_counting_probe_wake(void) {
    sem_t semaphore;
    sem_init(&semaphore, 0, 0);
    sem_post(&semaphore);
    sem_destroy(&semaphore);
}

int aq_thread_drop_nice_capability(void) {
    struct __user_cap_header_struct header = { _LINUX_CAPABILITY_VERSION_3, 0 };
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
    if (syscall(SYS_capget, &header, data) != 0) return -1;
    data[CAP_TO_INDEX(CAP_SYS_NICE)].effective &= ~CAP_TO_MASK(CAP_SYS_NICE);
    return (int)syscall(SYS_capset, &header, data);
}

long aq_thread_id(void) { return (long)syscall(SYS_gettid); }

aq_limit aq_realtime_limit(int which) {
    struct rlimit limit = { 0, 0 };
    getrlimit(which ? RLIMIT_RTTIME : RLIMIT_RTPRIO, &limit);
    aq_limit result = { (unsigned long long)limit.rlim_cur, (unsigned long long)limit.rlim_max };
    return result;
}

int aq_set_realtime_limit(int which, aq_limit limit) {
    struct rlimit value = { (rlim_t)limit.current, (rlim_t)limit.maximum };
    return setrlimit(which ? RLIMIT_RTTIME : RLIMIT_RTPRIO, &value);
}
