/* SPDX-License-Identifier: MIT */
/*
 * One table of the real libc entry points, bound once.
 *
 * Everything inside the library (interposer, engine, common helpers) calls
 * libc's fd and socket functions through smcr_real.<name>(), never through
 * the public names: a public name would resolve to our own wrapper.
 * tests/check-exports.sh enforces that rule on the built objects.
 *
 * The table is filled with dlsym(RTLD_NEXT) under pthread_once, on the
 * first call of any wrapper (possibly from another library's constructor,
 * before ours has run). Binding aborts with a clear message if a mandatory
 * symbol is missing or if dlsym hands back a function of this library
 * (a circular lookup that would recurse forever). Optional symbols (glibc
 * extensions not every libc has) may stay NULL; their wrappers fail with
 * ENOSYS.
 *
 * To add a function: add one line to SMCR_REAL_SYMBOLS, a wrapper in
 * src/preload/, and its name to src/preload/preload.map.
 */
#ifndef SMCR_COMMON_REAL_H
#define SMCR_COMMON_REAL_H

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>

/* X(return type, name, (parameter types), mandatory) */
#define SMCR_REAL_SYMBOLS(X)                                                              \
	/* socket life cycle */                                                            \
	X(int, socket, (int, int, int), true)                                              \
	X(int, socketpair, (int, int, int, int[2]), true)                                  \
	X(int, bind, (int, const struct sockaddr *, socklen_t), true)                      \
	X(int, listen, (int, int), true)                                                   \
	X(int, connect, (int, const struct sockaddr *, socklen_t), true)                   \
	X(int, accept, (int, struct sockaddr *, socklen_t *), true)                        \
	X(int, accept4, (int, struct sockaddr *, socklen_t *, int), true)                  \
	X(int, shutdown, (int, int), true)                                                 \
	X(int, getsockopt, (int, int, int, void *, socklen_t *), true)                     \
	X(int, setsockopt, (int, int, int, const void *, socklen_t), true)                 \
	X(int, getsockname, (int, struct sockaddr *, socklen_t *), true)                   \
	X(int, getpeername, (int, struct sockaddr *, socklen_t *), true)                   \
	/* fd table maintenance */                                                         \
	X(int, close, (int), true)                                                         \
	X(int, close_range, (unsigned int, unsigned int, int), false)                      \
	X(void, closefrom, (int), false)                                                   \
	X(int, dup, (int), true)                                                           \
	X(int, dup2, (int, int), true)                                                     \
	X(int, dup3, (int, int, int), true)                                                \
	X(int, fcntl, (int, int, ...), true)                                               \
	X(int, fcntl64, (int, int, ...), false)                                            \
	X(int, ioctl, (int, unsigned long, ...), true)                                     \
	X(pid_t, fork, (void), true)                                                       \
	X(pid_t, vfork, (void), false)                                                     \
	X(int, execve, (const char *, char *const[], char *const[]), true)                 \
	X(int, execv, (const char *, char *const[]), true)                                 \
	X(int, execvp, (const char *, char *const[]), true)                                \
	X(int, execvpe, (const char *, char *const[], char *const[]), false)               \
	X(int, fexecve, (int, char *const[], char *const[]), false)                        \
	X(int, posix_spawn, (pid_t *, const char *, const posix_spawn_file_actions_t *,    \
			     const posix_spawnattr_t *, char *const[], char *const[]), true)   \
	X(int, posix_spawnp, (pid_t *, const char *, const posix_spawn_file_actions_t *,   \
			      const posix_spawnattr_t *, char *const[], char *const[]), true)  \
	X(int, posix_spawn_file_actions_adddup2, (posix_spawn_file_actions_t *, int, int), \
	  true)                                                                            \
	X(int, posix_spawn_file_actions_init, (posix_spawn_file_actions_t *), true)        \
	X(int, posix_spawn_file_actions_destroy, (posix_spawn_file_actions_t *), true)     \
	X(int, prctl, (int, ...), true)                                                    \
	X(long, syscall, (long, ...), true)                                                \
	/* fd-creating calls: the kernel may reuse a number we still remember */          \
	X(int, open, (const char *, int, ...), true)                                       \
	X(int, open64, (const char *, int, ...), false)                                    \
	X(int, openat, (int, const char *, int, ...), true)                                \
	X(int, openat64, (int, const char *, int, ...), false)                             \
	X(int, __open_2, (const char *, int), false)                                       \
	X(int, __open64_2, (const char *, int), false)                                     \
	X(int, __openat_2, (int, const char *, int), false)                                \
	X(int, __openat64_2, (int, const char *, int), false)                              \
	X(int, creat, (const char *, mode_t), true)                                        \
	X(int, creat64, (const char *, mode_t), false)                                     \
	X(int, pipe, (int[2]), true)                                                       \
	X(int, pipe2, (int[2], int), false)                                                \
	X(int, eventfd, (unsigned int, int), false)                                        \
	X(int, signalfd, (int, const sigset_t *, int), false)                              \
	X(int, timerfd_create, (int, int), false)                                          \
	X(int, memfd_create, (const char *, unsigned int), false)                          \
	X(int, inotify_init, (void), false)                                                \
	X(int, inotify_init1, (int), false)                                                \
	X(int, openpty, (int *, int *, char *, const struct termios *,                     \
			 const struct winsize *), false)                                   \
	X(pid_t, forkpty, (int *, char *, const struct termios *, const struct winsize *), \
	  false)                                                                           \
	/* data path */                                                                    \
	X(ssize_t, read, (int, void *, size_t), true)                                      \
	X(ssize_t, readv, (int, const struct iovec *, int), true)                          \
	X(ssize_t, write, (int, const void *, size_t), true)                               \
	X(ssize_t, writev, (int, const struct iovec *, int), true)                         \
	X(ssize_t, send, (int, const void *, size_t, int), true)                           \
	X(ssize_t, sendto, (int, const void *, size_t, int, const struct sockaddr *,       \
			    socklen_t), true)                                              \
	X(ssize_t, sendmsg, (int, const struct msghdr *, int), true)                       \
	X(int, sendmmsg, (int, struct mmsghdr *, unsigned int, int), false)                \
	X(ssize_t, recv, (int, void *, size_t, int), true)                                 \
	X(ssize_t, recvfrom, (int, void *, size_t, int, struct sockaddr *, socklen_t *),   \
	  true)                                                                            \
	X(ssize_t, recvmsg, (int, struct msghdr *, int), true)                             \
	X(int, recvmmsg, (int, struct mmsghdr *, unsigned int, int, struct timespec *),    \
	  false)                                                                           \
	X(ssize_t, sendfile, (int, int, off_t *, size_t), true)                            \
	X(ssize_t, sendfile64, (int, int, off64_t *, size_t), false)                       \
	X(ssize_t, splice, (int, loff_t *, int, loff_t *, size_t, unsigned int), false)    \
	/* glibc _FORTIFY_SOURCE variants */                                               \
	X(ssize_t, __read_chk, (int, void *, size_t, size_t), false)                       \
	X(ssize_t, __recv_chk, (int, void *, size_t, size_t, int), false)                  \
	X(ssize_t, __recvfrom_chk, (int, void *, size_t, size_t, int, struct sockaddr *,   \
				    socklen_t *), false)                                   \
	X(int, __poll_chk, (struct pollfd *, nfds_t, int, size_t), false)                  \
	X(int, __ppoll_chk, (struct pollfd *, nfds_t, const struct timespec *,             \
			     const sigset_t *, size_t), false)                             \
	/* readiness */                                                                    \
	X(int, poll, (struct pollfd *, nfds_t, int), true)                                 \
	X(int, ppoll, (struct pollfd *, nfds_t, const struct timespec *, const sigset_t *),\
	  true)                                                                            \
	X(int, select, (int, fd_set *, fd_set *, fd_set *, struct timeval *), true)        \
	X(int, pselect, (int, fd_set *, fd_set *, fd_set *, const struct timespec *,       \
			 const sigset_t *), true)                                          \
	X(int, epoll_create, (int), true)                                                  \
	X(int, epoll_create1, (int), true)                                                 \
	X(int, epoll_ctl, (int, int, int, struct epoll_event *), true)                     \
	X(int, epoll_wait, (int, struct epoll_event *, int, int), true)                    \
	X(int, epoll_pwait, (int, struct epoll_event *, int, int, const sigset_t *), true) \
	X(int, epoll_pwait2, (int, struct epoll_event *, int, const struct timespec *,     \
			      const sigset_t *), false)

#define SMCR_REAL_MEMBER(ret, name, params, mandatory) ret(*name) params;
struct smcr_real_table {
	SMCR_REAL_SYMBOLS(SMCR_REAL_MEMBER)
};
#undef SMCR_REAL_MEMBER

/* Filled once by smcr_real_bind(); read-only afterwards. */
extern struct smcr_real_table smcr_real;

/*
 * Bind every symbol (idempotent, thread-safe, cheap after the first call).
 * Must have run before any smcr_real.<name> call.
 */
void smcr_real_bind(void);

/* True once smcr_real_bind() has completed (acquire). */
bool smcr_real_is_bound(void);

/* True if addr lies inside the object this code is linked into. */
bool smcr_real_is_own_symbol(const void *addr);

#endif /* SMCR_COMMON_REAL_H */
