/* SPDX-License-Identifier: MIT */
/*
 * The shared runtime directory (SMCR_RUNDIR, design §4 and §7): same-host
 * shared memory between network namespaces (containers) that an operator
 * gave one directory.  Listeners register there by address and port, and
 * the shm rendezvous of a connection between two namespaces lives there.
 */
#ifndef SMCR_RUNDIR_H
#define SMCR_RUNDIR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

/* SMCR_RUNDIR is set (whether the directory is fit to use is asked when used). */
bool smcr_rundir_enabled(void);

/*
 * Should the rendezvous of the connection `tcp_fd` live in the directory?
 * Yes when SMCR_RUNDIR is set and the peer is not local by address (not
 * loopback, not our own address): then it may be in another network
 * namespace, where no abstract name of ours is visible.  Both ends of one
 * connection answer alike: each sees the other's address as the peer.
 */
bool smcr_rundir_for_peer(int tcp_fd);

/* A listener's entries in the directory (one per address it can be reached at). */
struct smcr_rundir_reg;

/*
 * Register the TCP listener `listen_fd` (bound to `port`): a listening
 * pathname socket "l-<address>-<port>" for its address, or for every
 * non-loopback address of its network namespace when it is bound to a
 * wildcard.  NULL when nothing was registered (no directory, unfit, taken).
 */
struct smcr_rundir_reg *smcr_rundir_register(int listen_fd, uint16_t port);
/* No client may believe the entries any more (see smcr_registry_revoke). */
void smcr_rundir_revoke(const struct smcr_rundir_reg *r);
/* Close the entries; a file nobody else holds any more is removed. */
void smcr_rundir_remove(struct smcr_rundir_reg *r);

/*
 * May a client propose shm on `tcp_fd`, connected to `peer`, which is not a
 * local address?  True only when the directory is fit (owned by root or us,
 * not writable by others unless sticky), the entry for peer's address and
 * port is a socket file (never a symlink) owned by us, root or the
 * directory's owner, and a live listener of that same uid holds it.
 */
bool smcr_rundir_vouches(int tcp_fd, const struct sockaddr_storage *peer);

/*
 * Rendezvous sockets in the directory, named "rv-<token>": a listener
 * (-errno on failure), a connect on `sock` (0 or -1 with errno, as
 * connect()), and the removal of a listener's name once it is closed.
 */
int smcr_rundir_rv_bind(int sock, uint64_t token);
int smcr_rundir_rv_connect(int sock, uint64_t token);
void smcr_rundir_rv_unlink(uint64_t token);

#endif /* SMCR_RUNDIR_H */
