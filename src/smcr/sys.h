/* SPDX-License-Identifier: MIT */
/*
 * Small system helpers for the engine.  Every fd call goes through the real
 * libc table (common/real.h): the engine runs inside the preload library,
 * where the public names are our own wrappers.
 */
#ifndef SMCR_SYS_H
#define SMCR_SYS_H

#include <stddef.h>
#include <stdint.h>

/* Fill buf with kernel randomness; 0 or -errno. */
int smcr_sys_random(void *buf, size_t len);

/* eventfd / memfd through the real table, or the raw system call. */
int smcr_sys_eventfd(unsigned int initval, int flags);
int smcr_sys_memfd(const char *name, unsigned int flags);

/* Close an fd we own, keeping errno. */
void smcr_sys_close(int fd);

/* Milliseconds / nanoseconds on CLOCK_MONOTONIC. */
int64_t smcr_sys_now_ms(void);
int64_t smcr_sys_now_ns(void);

/*
 * poll() one fd for `events` until `deadline_ms` (CLOCK_MONOTONIC; < 0 =
 * forever), restarting on EINTR.  1 ready, 0 timed out, -errno.
 */
int smcr_sys_wait_fd(int fd, short events, int64_t deadline_ms);

/* Deadline `ms` from now. */
int64_t smcr_sys_deadline(int ms);

#endif /* SMCR_SYS_H */
