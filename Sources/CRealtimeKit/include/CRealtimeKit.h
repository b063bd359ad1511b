// Real-time scheduling through rtkit (org.freedesktop.RealtimeKit1 on the system bus), for a
// thread that may not ask SCHED_FIFO itself: the desktop case, where a user has neither
// CAP_SYS_NICE nor an RLIMIT_RTPRIO, and rtkit grants it. The D-Bus client is libsystemd's
// sd-bus (libsystemd0, LGPL-2.1-or-later), opened on first use: a process that never needs
// rtkit never maps it.
#ifndef AQ_REALTIME_KIT_H
#define AQ_REALTIME_KIT_H

#include <stddef.h>

/// Asks rtkit to make the calling thread SCHED_FIFO at `priority`, lowered to rtkit's
/// MaxRealtimePriority. Before asking, the process's RLIMIT_RTTIME is lowered to rtkit's
/// RTTimeUSecMax where it is higher (rtkit refuses a process that could run unbounded).
/// The bus is `$DBUS_SYSTEM_BUS_ADDRESS`, else the system bus; each call waits at most
/// `timeout_ms` for an answer.
/// Returns the priority granted, or 0 with `message` saying why not.
int aq_rtkit_make_thread_realtime(int priority, int timeout_ms, char *message, size_t size);

#endif
