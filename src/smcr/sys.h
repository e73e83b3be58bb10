/* SPDX-License-Identifier: MIT */
/*
 * Small system helpers for the engine.  Every fd call goes through the
 * embedder's libc table (libc.h): inside the preload library the public
 * names are the interposer's own wrappers.
 */
#ifndef SMCR_SYS_H
#define SMCR_SYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/clock.h" /* smcr_now_ms(), smcr_now_ns(): deadlines below are on it */

struct pollfd;

/*
 * Fill buf with kernel randomness (getrandom), drawn a pool at a time for
 * small requests; 0 or -errno.  smcr_sys_random_fork_child() (engine.c's
 * fork child handler) empties every pool the child inherited.
 */
int smcr_sys_random(void *buf, size_t len);
void smcr_sys_random_fork_child(void);

/* eventfd / memfd through the real table, or the raw system call. */
int smcr_sys_eventfd(unsigned int initval, int flags);
int smcr_sys_memfd(const char *name, unsigned int flags);

/*
 * Moves `fd` (close-on-exec) above the program's soft RLIMIT_NOFILE, or to
 * SMCR_ENGINE_FD_FLOOR or above where the hard limit leaves no room; returns
 * the fd to use, or -1 with EMFILE (fd closed) when it would take one of the
 * last quarter of the program's numbers.  -1 in, -1 out.
 */
int smcr_sys_fd_high(int fd);
/* The same for a close-on-exec copy of `fd` (fd stays open); -1 with errno. */
int smcr_sys_fd_copy(int fd);
/*
 * Brackets one connection's set-up on this thread (they nest): within it, the
 * fd moves after the first reuse the limits it found when they left no room
 * above the program's numbers (see sys.c).
 */
void smcr_sys_fd_scope_begin(void);
void smcr_sys_fd_scope_end(void);
/* Called under the window lock before the program changes RLIMIT_NOFILE. */
void smcr_sys_fd_limits_changing(void);
/* Held across every change of RLIMIT_NOFILE (see sys.c), fork and exec. */
void smcr_sys_fd_window_lock(void);
void smcr_sys_fd_window_unlock(void);

/* Close an fd we own, keeping errno. */
void smcr_sys_close(int fd);
/* `fd` in epoll set `ep_fd` with `ev`, whether it was in it or not: 0 or -errno. */
struct epoll_event;
int smcr_sys_epoll_set(int ep_fd, int fd, struct epoll_event *ev);

/*
 * A small text file (/proc's) read whole into buf, NUL-terminated: its
 * length, or -1 if it cannot be opened or is empty.  One open, one read, one
 * close; errno as it was.
 */
ssize_t smcr_sys_read_text(const char *path, char *buf, size_t size);

/*
 * poll() one fd for `events` until `deadline_ms` (CLOCK_MONOTONIC; < 0 =
 * forever), restarting on EINTR.  1 ready, 0 timed out, -errno.
 */
int smcr_sys_wait_fd(int fd, short events, int64_t deadline_ms);
/* The same for `n` fds at once: 1 one of them ready, 0 timed out, -errno. */
int smcr_sys_wait_fds(struct pollfd *fds, unsigned n, int64_t deadline_ms);

/*
 * The same for a wait on behalf of the application's blocking recv/send:
 * a signal ends it with -EINTR as it would end TCP's recv/send, unless the
 * kernel would have restarted that call (see smcr_sys_signal_restarts()).
 */
int smcr_sys_wait_fd_app(int fd, short events, int64_t deadline_ms);

/*
 * Would the kernel restart a socket call that a signal interrupted?  Only if
 * the handler had SA_RESTART.  Which signal interrupted the wait is not known
 * here, so: yes only when every caught signal has SA_RESTART (fault signals
 * such as SIGSEGV, whose handlers are crash handlers, do not count).
 */
bool smcr_sys_signal_restarts(void);

/* Deadline `ms` from now. */
int64_t smcr_sys_deadline(int ms);

#endif /* SMCR_SYS_H */
