// See include/CDynamicLibrary.h.
#include "CDynamicLibrary.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int open_and_resolve(aq_dynamic_library *library) {
    void *handle = NULL;
    for (const char *const *soname = library->sonames; *soname && !handle; soname++) {
        // RTLD_LOCAL: the library's symbols serve only the lookups below, never another
        // library's references. RTLD_NOW: a missing dependency is an error here, not later.
        handle = dlopen(*soname, RTLD_NOW | RTLD_LOCAL);
    }
    if (!handle) {
        const char *reason = dlerror();
        snprintf(library->error, sizeof library->error, "cannot open %s (install %s): %s",
                 library->sonames[0], library->install, reason ? reason : "no file name given");
        return 0;
    }
    for (size_t index = 0; library->names[index]; index++) {
        void *address = dlsym(handle, library->names[index]);
        if (!address) {
            snprintf(library->error, sizeof library->error, "%s has no function %s (install %s)",
                     library->sonames[0], library->names[index], library->install);
            return 0;
        }
        *library->slots[index] = address;
    }
    return 1;
}

int aq_dynamic_library_load(aq_dynamic_library *library) {
    int state = __atomic_load_n(&library->state, __ATOMIC_ACQUIRE);
    if (state != 0) return state == 1;
    pthread_mutex_lock(&lock);
    state = __atomic_load_n(&library->state, __ATOMIC_RELAXED);
    if (state == 0) {
        state = open_and_resolve(library) ? 1 : -1;
        // Release: whoever reads 1 also sees every pointer written above.
        __atomic_store_n(&library->state, state, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&lock);
    return state == 1;
}
