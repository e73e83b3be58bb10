/* SPDX-License-Identifier: MIT */
/*
 * The seam between the wrappers and the engine (include/smcr/engine.h):
 * deciding whether a tracked TCP connection runs SMC, the SMC data path,
 * readiness translation for poll/select/epoll, and teardown.
 *
 * Modes (fdtab.h): a tracked TCP socket starts CANDIDATE. A client decides
 * right after connect() succeeds (inside a blocking connect, or at the first
 * I/O or poll/epoll report of writability after a non-blocking one); a
 * server decides lazily at the first I/O on an accepted connection, in
 * whichever process does it (design §4). The result is SMC (data diverted to
 * the engine) or FALLBACK (the kernel socket, untouched, with a reason).
 *
 * SMC is on unless nothing could use it (SMCR_SAMEHOST=0 with no SMC-R
 * configured: smcr_smc_init); then every tracked socket stays CANDIDATE and
 * every call goes to the kernel unchanged, so the program behaves as on
 * plain TCP.
 */
#ifndef SMCR_PRELOAD_SMC_H
#define SMCR_PRELOAD_SMC_H

#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#include "preload/fdtab.h"

/* Written once during initialisation (init.c), read everywhere. */
extern bool smcr_smc_enabled;
/* SMCR_SPIN_US: poll/select/epoll spin this long before sleeping; 0 = never. */
extern int smcr_smc_spin_us;

/* Reads SMCR_SAMEHOST and friends, installs the fd table's release hook. */
void smcr_smc_init(void);
/* Fork handlers: the child's pid; the epoll lock re-initialised. */
void smcr_smc_lock(void);
void smcr_smc_unlock(void);
void smcr_smc_reinit_child(void);
/* exec is about to replace this process: reset the SMC connections it owns. */
void smcr_smc_before_exec(void);
/*
 * An unclassified accepted connection leaves this image for one without smcr,
 * or this process (SCM_RIGHTS): a Proposal is declined first (reason HANDOFF).
 */
void smcr_smc_settle_for_handoff(int fd, struct smcr_fd_entry *e, const char *why);
/* A registered listener goes to a program without smcr (`why`): nobody may propose to it. */
void smcr_smc_revoke_listener(int fd, struct smcr_fd_entry *e, const char *why);
/* A registered listener took SO_REUSEPORT or a bound device: it may share its port now. */
void smcr_smc_listener_shared(int fd);
/* Is the entry an SMC connection this process runs? */
bool smcr_smc_entry_is_conn(struct smcr_fd_entry *e);

/*
 * The socket of an SMC connection leaves for a program or process outside
 * the connection (`why`): it goes on over TCP, or, where it cannot, ends as a
 * reset both ends see.
 */
void smcr_smc_continue_on_tcp(int fd, struct smcr_fd_entry *e, uint32_t reason, const char *why);
/* exit(): the SMC connections this process owns close as the kernel would close TCP. */
void smcr_smc_exit(void);
/* Before a seccomp filter applies (wrap_seccomp.c): nothing left undecided that needs it. */
void smcr_smc_before_confine(void);
/* The kernel refused the filter: new decisions may use SMC again (what was settled stays TCP). */
void smcr_smc_confine_refused(void);
/* The program set up io_uring (wrap_seccomp.c's syscall()): smcr steps aside for good. */
void smcr_smc_after_io_uring(void);
/*
 * The process closes fds first..last (close_range, closefrom): SMC connections
 * it keeps through an fd outside the range whose library fds are inside go on
 * over TCP first.
 */
void smcr_smc_before_close_range(unsigned first, unsigned last);

/* ---- life cycle (wrap_socket.c) -------------------------------------------- */

/* Before the real listen() / connect(): RFC 7609 option mode marks (engine.h smcr_tcpopt_*). */
void smcr_smc_before_listen(int fd);
/* connect() also asks the learned policy, which may decide TCP there and then. */
void smcr_smc_before_connect(int fd, const struct sockaddr *addr, socklen_t len);
void smcr_smc_after_listen(int fd);
/* After a successful blocking connect, or EINPROGRESS. 0, or -1 with errno. */
int smcr_smc_after_connect(int fd, int ret);
/* fd came out of accept on listen_fd (and is tracked already). */
void smcr_smc_after_accept(int listen_fd, int fd);
/* An accepted socket's local address, where its listener is bound to one (else NULL). */
const struct sockaddr_storage *smcr_smc_accepted_local(const struct smcr_fd_entry *e);
void smcr_smc_set_nonblock(int fd, bool on);

/* Calls on an SMC socket: *handled says whether the engine answered. */
int smcr_smc_shutdown(int fd, int how, bool *handled);
int smcr_smc_getsockopt(int fd, int level, int name, void *value, socklen_t *len,
			bool *handled);
/* After the kernel took the option (value/len as the program gave them). */
void smcr_smc_after_setsockopt(int fd, int level, int name, const void *value, socklen_t len);
/* After a successful setsockopt on any tracked socket: options whose setting must be known. */
void smcr_smc_note_setsockopt(int fd, int level, int name);
/*
 * An upper-layer protocol (TCP_ULP: kernel TLS, as OpenSSL enables it with
 * SSL_OP_ENABLE_KTLS, nginx's "Options KTLS") is refused on an SMC socket:
 * it would act on the kernel's TCP socket, which carries none of the
 * stream, so the program would send plaintext where it meant records and
 * read records where it meant plaintext. The program gets EOPNOTSUPP, as
 * where the kernel has no such protocol, and does TLS itself.
 */
void smcr_smc_refuse_ulp(int fd, const void *value, socklen_t len);
int smcr_smc_ioctl(int fd, unsigned long request, void *arg, bool *handled);

/* ---- data (wrap_io.c) ------------------------------------------------------ */

/* The taken branch of every data wrapper: SMC socket, or a candidate to decide. */
ssize_t smcr_smc_recvmsg(int fd, struct msghdr *msg, int flags);
ssize_t smcr_smc_sendmsg(int fd, const struct msghdr *msg, int flags);
/* sendfile into an SMC socket: a copy loop. *handled = false: the kernel's. */
ssize_t smcr_smc_sendfile(int out_fd, int in_fd, off_t *offset, size_t count, bool *handled);
/*
 * Room for a send that must not block on an SMC socket (settled first, as a
 * write would be): 1 with *room and the socket's O_NONBLOCK in *nonblock; 0 if
 * the socket is not SMC (the kernel's); < 0 the error a write would give.
 */
int smcr_smc_send_room(int fd, size_t *room, bool *nonblock);
/* splice() with an SMC socket on one side (smc_splice.c). *handled = false: the kernel's. */
ssize_t smcr_smc_splice(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len,
			unsigned int flags, bool *handled);

/* ---- readiness (wrap_poll.c) ----------------------------------------------- */

/* Does this poll set contain an fd the glue must translate? */
bool smcr_smc_poll_needed(const struct pollfd *fds, nfds_t nfds);
int smcr_smc_ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
		   const sigset_t *mask);
bool smcr_smc_select_needed(int nfds, const fd_set *r, const fd_set *w, const fd_set *x);
int smcr_smc_pselect(int nfds, fd_set *r, fd_set *w, fd_set *x, const struct timespec *timeout,
		     const sigset_t *mask);

int smcr_smc_epoll_ctl(int epfd, int op, int fd, struct epoll_event *event);
/*
 * An SMC socket this thread sent or received on: its doorbell may still be
 * readable for what the call consumed.  smcr_smc_settle_io() settles every
 * such socket of this thread; an epoll wait calls it before it may sleep.
 */
void smcr_smc_note_io(int fd);
void smcr_smc_settle_io(void);
/* Translates what the kernel reported; returns the new count (may be 0). */
int smcr_smc_epoll_filter(int epfd, struct epoll_event *events, int n);
/*
 * Bounded spin (SMCR_SPIN_US) before a blocking epoll wait: while the peer of
 * an SMC socket that this thread's last wait on epfd reported runs, poll epfd
 * without blocking.  Returns
 * translated reports (> 0), 0 when the blocking wait should follow (then
 * smcr_smc_epoll_spin_end() after it), or -1 with errno.
 */
#define SMCR_SMC_SPIN_SET_MAX 16
struct smcr_smc_spin_set {
	int n;
	struct smcr_fd_entry *e[SMCR_SMC_SPIN_SET_MAX]; /* references held */
};
int smcr_smc_epoll_spin(int epfd, struct epoll_event *events, int maxevents,
			const sigset_t *mask, bool pwait, struct smcr_smc_spin_set *set);
void smcr_smc_epoll_spin_end(struct smcr_smc_spin_set *set);
/* Any registration whose reports need translating? (one load) */
bool smcr_smc_epoll_active(void);

#endif /* SMCR_PRELOAD_SMC_H */
