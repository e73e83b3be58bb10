/* SPDX-License-Identifier: MIT */
/*
 * Host-local registry of smcr listeners (design §4: propose only to a peer
 * known to speak SMC; design §7: and never because another user said so).
 */
#ifndef SMCR_REGISTRY_H
#define SMCR_REGISTRY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

struct smcr_rundir_reg;

/* The sockets holding one registration (close both to unregister). */
struct smcr_registration {
	int owner_fd; /* listening seqpacket socket: the name whose owner diag reports */
	int probe_fd; /* datagram socket, same name: a cheap "anybody there?" */
	/*
	 * listening seqpacket socket "smcr/i/<netns inode>/<socket inode>": this
	 * very TCP listener is served, not merely its port (another process of
	 * the user may listen on the same port: SO_REUSEPORT, another address)
	 */
	int socket_fd;
	unsigned long long socket_ino; /* the TCP listener's inode, 0 if unknown */
	bool sibling_holds_port; /* the port's name is another listener's of our user */
	/*
	 * No other TCP listener can take this one's connections: no
	 * SO_REUSEPORT, no bound device (registry.c, "known listeners")
	 */
	bool exclusive;
	struct smcr_rundir_reg *dir; /* entries in SMCR_RUNDIR (rundir.h), or NULL */
};

/*
 * Register the listening TCP socket `listen_fd` (bound to `port`) under the
 * abstract UNIX name "smcr/l/<netns inode>/<port>", and in SMCR_RUNDIR by its
 * addresses if that is set (rundir.h).  0 or -errno (the abstract name's).
 * -EADDRINUSE when the name is taken: by a process of the listener's own user
 * (prefork, SO_REUSEPORT: fine), or by another user (squatting), which is
 * logged as a warning; local clients then stay on TCP for that port.
 */
int smcr_registry_add(int listen_fd, uint16_t port, struct smcr_registration *out);
void smcr_registry_remove(struct smcr_registration *r);
/*
 * smcr_registry_add() for the abstract name only, without a word about a
 * name that is taken (a retry); out->dir is left as it is.
 */
int smcr_registry_claim(uint16_t port, struct smcr_registration *out);
/*
 * No client may believe the registration any more, whoever holds it: the
 * name's socket is one socket for every process it followed by fork, and a
 * shut-down one is not a registration (smcr_registry_vouches()).
 */
void smcr_registry_revoke(const struct smcr_registration *r);

/*
 * The listener may now share its port (SO_REUSEPORT or a bound device set
 * after listen()): clients must look at every listener again.
 */
void smcr_registry_share(struct smcr_registration *r);

/*
 * May a client propose SMC on `tcp_fd`, connected to the local address
 * `peer`?  True only when the registry name for peer's port exists in the
 * socket's network namespace, the kernel reports that its owner (uid) is
 * the owner of every TCP listener that can have accepted the connection, and
 * every one of those listeners has its own name (socket_fd): a listener of
 * the same user without smcr on that port (an SO_REUSEPORT sibling, a
 * server on another address) would read the Proposal as data.
 */
bool smcr_registry_vouches(int tcp_fd, const struct sockaddr_storage *peer);

/*
 * Does `uid`, as diag or stat reports it, name one user?  Not the overflow
 * uid that every user unmapped in our user namespace reads as.
 */
bool smcr_registry_uid_is_distinct(uint32_t uid);

#endif /* SMCR_REGISTRY_H */
