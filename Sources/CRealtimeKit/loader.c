// See include/CRealtimeKit.h.
#include "CRealtimeKit.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <CDynamicLibrary.h>

// sd-bus's declarations (libsystemd's sd-bus.h, stable ABI since systemd 221; the call timeout
// since 243), written here so that building needs no libsystemd-dev.
typedef struct sd_bus sd_bus;
typedef struct sd_bus_message sd_bus_message;
typedef struct {
    const char *name;
    const char *message;
    int _need_free;
} sd_bus_error;

int sd_bus_open_system(sd_bus **bus);
int sd_bus_set_method_call_timeout(sd_bus *bus, uint64_t usec);
int sd_bus_get_property_trivial(sd_bus *bus, const char *destination, const char *path, const char *interface,
                                const char *member, sd_bus_error *error, char type, void *value);
int sd_bus_call_method(sd_bus *bus, const char *destination, const char *path, const char *interface,
                       const char *member, sd_bus_error *error, sd_bus_message **reply, const char *types, ...);
sd_bus_message *sd_bus_message_unref(sd_bus_message *message);
void sd_bus_error_free(sd_bus_error *error);
sd_bus *sd_bus_flush_close_unref(sd_bus *bus);

#define AQ_SDBUS_FUNCTIONS(X) \
    X(sd_bus_open_system) X(sd_bus_set_method_call_timeout) X(sd_bus_get_property_trivial) \
    X(sd_bus_call_method) X(sd_bus_message_unref) X(sd_bus_error_free) X(sd_bus_flush_close_unref)

AQ_DYNAMIC_LIBRARY(sdbus, AQ_SDBUS_FUNCTIONS, "libsystemd0", "libsystemd.so.0")

#define SD(name) p_##name

static const char *const service = "org.freedesktop.RealtimeKit1";
static const char *const object = "/org/freedesktop/RealtimeKit1";

/// Says why a call failed: the bus's error when it gave one, else the errno.
static void describe(char *message, size_t size, const char *what, int result, const sd_bus_error *error) {
    if (error && error->message) {
        snprintf(message, size, "%s: %s", what, error->message);
    } else {
        snprintf(message, size, "%s: %s", what, strerror(-result));
    }
}

int aq_rtkit_make_thread_realtime(int priority, int timeout_ms, char *message, size_t size) {
    if (!aq_sdbus_load()) {
        snprintf(message, size, "%s", aq_sdbus_error());
        return 0;
    }
    sd_bus *bus = NULL;
    int result = SD(sd_bus_open_system)(&bus);
    if (result < 0) {
        describe(message, size, "no system bus", result, NULL);
        return 0;
    }
    SD(sd_bus_set_method_call_timeout)(bus, (uint64_t)(timeout_ms > 0 ? timeout_ms : 1) * 1000);
    int granted = 0;
    sd_bus_error error = { NULL, NULL, 0 };
    int32_t maximum = 0;
    int64_t rttime = 0;
    result = SD(sd_bus_get_property_trivial)(bus, service, object, service, "MaxRealtimePriority", &error, 'i', &maximum);
    if (result < 0) {
        describe(message, size, "rtkit did not answer", result, &error);
        goto done;
    }
    SD(sd_bus_error_free)(&error);
    result = SD(sd_bus_get_property_trivial)(bus, service, object, service, "RTTimeUSecMax", &error, 'x', &rttime);
    if (result < 0) {
        describe(message, size, "rtkit did not say its RTTimeUSecMax", result, &error);
        goto done;
    }
    SD(sd_bus_error_free)(&error);
    if (maximum < 1) {
        snprintf(message, size, "rtkit grants no real-time priority (MaxRealtimePriority %d)", (int)maximum);
        goto done;
    }
    int asked = priority < maximum ? priority : maximum;
    // rtkit grants only a process whose real-time threads cannot run unbounded.
    struct rlimit limit;
    if (rttime > 0 && getrlimit(RLIMIT_RTTIME, &limit) == 0
        && (limit.rlim_max == RLIM_INFINITY || limit.rlim_max > (rlim_t)rttime)) {
        limit.rlim_cur = limit.rlim_max = (rlim_t)rttime;
        if (setrlimit(RLIMIT_RTTIME, &limit) != 0) {
            snprintf(message, size, "RLIMIT_RTTIME could not be lowered to rtkit's %lld µs: %s", (long long)rttime, strerror(errno));
            goto done;
        }
    }
    uint64_t thread = (uint64_t)syscall(SYS_gettid);
    sd_bus_message *reply = NULL;
    result = SD(sd_bus_call_method)(bus, service, object, service, "MakeThreadRealtime", &error, &reply, "tu",
                                    thread, (uint32_t)asked);
    if (reply) SD(sd_bus_message_unref)(reply);
    if (result < 0) {
        describe(message, size, "rtkit refused", result, &error);
        goto done;
    }
    granted = asked;
done:
    SD(sd_bus_error_free)(&error);
    SD(sd_bus_flush_close_unref)(bus);
    return granted;
}
