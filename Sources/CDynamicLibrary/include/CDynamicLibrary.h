// Opening a C library on first use (dlopen) instead of linking it, for the codec modules: a
// program that links FLACDecoder but plays no FLAC never maps libFLAC. Each library's C target
// (CFLAC, COpus …) describes its functions with an X-macro, keeps a pointer per function, and
// calls aq_dynamic_library_load before the first call through them.
#ifndef AQ_DYNAMIC_LIBRARY_H
#define AQ_DYNAMIC_LIBRARY_H

#include <stddef.h>

/// A library opened on first use. The C target that owns it fills the description; the state
/// and the message belong to aq_dynamic_library_load.
typedef struct aq_dynamic_library {
    /// The shared object's names to try, in order, NULL-terminated: the soname of the version
    /// the headers describe first. The first that opens is used.
    const char *const *sonames;
    /// What to install when it is missing, for the message (a Debian package name).
    const char *install;
    /// The functions' names, NULL-terminated, and where each one's address goes.
    const char *const *names;
    void **const *slots;
    /// 0 not tried, 1 loaded, -1 failed (then `error` says why). Written once, under a lock.
    int state;
    char error[384];
} aq_dynamic_library;

/// Opens the library and resolves every function the first time; later calls return at once.
/// Thread-safe. Returns 1 when every function is resolved, 0 otherwise (library->error says
/// which file or function was missing).
int aq_dynamic_library_load(aq_dynamic_library *library);

// Helpers for the X-macros of the library targets: X(name) for each function.
#define AQ_DYNAMIC_POINTER(name) static __typeof__(name) *p_##name;
#define AQ_DYNAMIC_NAME(name) #name,
#define AQ_DYNAMIC_SLOT(name) (void **)&p_##name,
// A public declaration with the library function's own type, under the aq_ name.
#define AQ_DYNAMIC_DECLARE(name) __typeof__(name) aq_##name;

// The description of a library and its aq_PREFIX_load() and aq_PREFIX_error(), in the loader
// of the library's C target. FUNCTIONS is its X-macro; the sonames follow, the preferred first.
#define AQ_DYNAMIC_LIBRARY(prefix, FUNCTIONS, install_, ...) \
    FUNCTIONS(AQ_DYNAMIC_POINTER) \
    static const char *const prefix##_names[] = { FUNCTIONS(AQ_DYNAMIC_NAME) NULL }; \
    static void **const prefix##_slots[] = { FUNCTIONS(AQ_DYNAMIC_SLOT) NULL }; \
    static const char *const prefix##_sonames[] = { __VA_ARGS__, NULL }; \
    static aq_dynamic_library prefix##_library = { prefix##_sonames, install_, prefix##_names, prefix##_slots, 0, "" }; \
    int aq_##prefix##_load(void) { return aq_dynamic_library_load(&prefix##_library); } \
    const char *aq_##prefix##_error(void) { \
        aq_dynamic_library_load(&prefix##_library); \
        return prefix##_library.error; \
    }

// A function under the aq_ name that calls the library's through its pointer.
#define AQ_FORWARD(result, name, parameters, arguments) result aq_##name parameters { return p_##name arguments; }
#define AQ_FORWARD_VOID(name, parameters, arguments) void aq_##name parameters { p_##name arguments; }

#define AQ_STRINGIFY_VALUE(x) AQ_STRINGIFY_TOKEN(x)
#define AQ_STRINGIFY_TOKEN(x) #x

#endif
