// SPDX-License-Identifier: MIT
/*
 * The shared runtime directory (rundir.h; design §4 and §7).
 *
 * Abstract UNIX names, which the registry and the rendezvous use within one
 * network namespace, are invisible from any other.  Containers of one host
 * that should share memory get one directory mounted into each of them
 * (SMCR_RUNDIR); pathname sockets there are reachable from all of them.
 *
 * A pathname has an owner, which an abstract name has not, but a directory
 * others may write is a place to squat in.  So nothing in it is believed
 * unless:
 *   - the directory is owned by root or by us and not writable by group or
 *     others unless sticky (then nobody removes or renames another's file);
 *   - an entry is opened with O_PATH | O_NOFOLLOW relative to the directory
 *     and must be a socket (a symlink opens as itself and is refused), owned
 *     by us, root or the directory's owner (whoever may replace any entry
 *     anyway);
 *   - the connect goes through /proc/self/fd/<that O_PATH fd>, to the very
 *     inode that was checked (no window to swap the file in), and is
 *     refused by a file whose listener is gone or revoked: a stale entry
 *     of a dead server makes the client stay TCP at once, never wait;
 *   - a listener that took the connection (SO_PEERCRED) is of the file's
 *     owner.  A full backlog (EAGAIN) is a live listener too: a registry
 *     socket never accepts, and its file's owner made it (bind creates the
 *     file; nobody can bind an existing one).
 * The entry says only that the address and port are served by smcr; that
 * the process at the other end of the rendezvous is the TCP peer is proven
 * by the secrets of the CLC exchange, as within one namespace (shm_clc.c).
 * Entries are keyed by address: addresses must be unique among the
 * namespaces sharing one directory (they are, on one container network).
 */
#include "smcr/rundir.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "common/sockaddr.h"
#include "smcr/engine.h"
#include "smcr/libc.h"
#include "smcr/registry.h"
#include "smcr/sys.h"

/* Addresses one wildcard listener registers at most. */
#define RUNDIR_MAX_ADDRS 16
#define ENTRY_NAME_LEN 64 /* "l-" + an IPv6 address + "-" + a port */

struct smcr_rundir_reg {
	unsigned n;
	int fds[RUNDIR_MAX_ADDRS];
	char names[RUNDIR_MAX_ADDRS][ENTRY_NAME_LEN];
};

bool smcr_rundir_enabled(void)
{
	return smcr_config_get()->rundir[0] != '\0';
}

bool smcr_rundir_for_peer(int tcp_fd)
{
	return smcr_rundir_enabled() && !smcr_peer_is_local(tcp_fd);
}

/* Warn about an unfit directory once per process, not per connection. */
static void warn_unfit(const char *dir, const char *why)
{
	static int warned;

	if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		smcr_warn("SMCR_RUNDIR=%s %s: not used, same-host SMC stays within this "
			  "network namespace", dir, why);
}

/* The directory, checked (O_PATH fd, its stat in *st), or -1. */
static int rundir_open(struct stat *st)
{
	const char *dir = smcr_config_get()->rundir;
	int fd;

	if (!dir[0])
		return -1;
	fd = smcr_libc.open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		warn_unfit(dir, "cannot be opened as a directory (missing, or a symlink)");
		return -1;
	}
	if (fstat(fd, st) < 0 || !S_ISDIR(st->st_mode)) {
		smcr_sys_close(fd);
		return -1;
	}
	if (st->st_uid != 0 && st->st_uid != geteuid()) {
		warn_unfit(dir, "is owned by another user");
		smcr_sys_close(fd);
		return -1;
	}
	if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(st->st_mode & S_ISVTX)) {
		warn_unfit(dir, "is writable by others and not sticky");
		smcr_sys_close(fd);
		return -1;
	}
	return fd;
}

/* "/proc/self/fd/<fd>[/<name>]": the inode `fd` holds, or a name in that directory. */
static socklen_t fd_sockaddr(int fd, const char *name, struct sockaddr_un *sa)
{
	int n;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	n = name ? snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%s", fd, name)
		 : snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d", fd);
	if (n <= 0 || (size_t)n >= sizeof(sa->sun_path))
		return 0;
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)n + 1);
}

/*
 * Bind `sock` to `name` in the directory `dirfd` and let everyone connect to
 * it (what a connecting peer may do is decided by what it proves, not by
 * the file's mode): 0 or -errno.
 */
static int bind_in_dir(int sock, int dirfd, const char *name)
{
	struct sockaddr_un sa;
	socklen_t len = fd_sockaddr(dirfd, name, &sa);

	if (!len)
		return -ENAMETOOLONG;
	if (smcr_libc.bind(sock, (struct sockaddr *)&sa, len) < 0)
		return -errno;
	if (fchmodat(dirfd, name, 0666, 0) < 0) {
		int err = -errno;

		unlinkat(dirfd, name, 0);
		return err;
	}
	return 0;
}

/* An entry of the directory, opened as itself (never through a symlink): O_PATH fd or -errno. */
static int open_entry(int dirfd, const char *name, struct stat *st)
{
	int fd = smcr_libc.openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fstat(fd, st) < 0 || !S_ISSOCK(st->st_mode)) {
		smcr_sys_close(fd);
		return -ELOOP; /* a symlink, or anything but a socket */
	}
	return fd;
}

/*
 * Connect `sock` to the inode `entry_fd` holds: 0 or -1 with errno.  A
 * non-blocking socket's connect completes or fails at once.
 */
static int connect_entry(int sock, int entry_fd)
{
	struct sockaddr_un sa;
	socklen_t len = fd_sockaddr(entry_fd, NULL, &sa);

	if (!len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return smcr_libc.connect(sock, (struct sockaddr *)&sa, len);
}

enum probe { PROBE_LIVE, PROBE_STALE, PROBE_ERROR };

/*
 * Is a live listener behind the entry `entry_fd`?  *peer_uid: the uid of
 * the listener when the connection was taken, else (uid_t)-1.
 */
static enum probe probe_entry(int entry_fd, uid_t *peer_uid)
{
	int sock = smcr_libc.socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	enum probe rc = PROBE_ERROR;

	*peer_uid = (uid_t)-1;
	if (sock < 0)
		return PROBE_ERROR;
	if (connect_entry(sock, entry_fd) == 0) {
		struct ucred cred;
		socklen_t clen = sizeof(cred);

		if (smcr_libc.getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0) {
			*peer_uid = cred.uid;
			rc = PROBE_LIVE;
		}
	} else if (errno == EAGAIN) {
		rc = PROBE_LIVE; /* its backlog is full: a registry socket never accepts */
	} else if (errno == ECONNREFUSED) {
		rc = PROBE_STALE; /* closed, or shut down (revoked) */
	}
	smcr_sys_close(sock);
	return rc;
}

/* The entry name of an address (16 bytes v4-mapped, or v6) and port. */
static bool entry_name(int family, const void *addr, uint16_t port, char *out, size_t len)
{
	char text[INET6_ADDRSTRLEN];
	int n;

	if (!inet_ntop(family, addr, text, sizeof(text)))
		return false;
	n = snprintf(out, len, "l-%s-%u", text, (unsigned)port);
	return n > 0 && (size_t)n < len;
}

static bool peer_entry_name(const struct sockaddr_storage *peer, char *out, size_t len)
{
	uint16_t port = smcr_sockaddr_port(peer);

	if (peer->ss_family == AF_INET)
		return entry_name(AF_INET, &((const struct sockaddr_in *)(const void *)peer)->sin_addr,
				  port, out, len);
	if (peer->ss_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)peer)->sin6_addr;

		if (IN6_IS_ADDR_V4MAPPED(a))
			return entry_name(AF_INET, &a->s6_addr[12], port, out, len);
		return entry_name(AF_INET6, a, port, out, len);
	}
	return false;
}

static bool uid_trusted(uid_t uid, const struct stat *dir)
{
	return uid == geteuid() || uid == 0 || uid == dir->st_uid;
}

bool smcr_rundir_vouches(int tcp_fd, const struct sockaddr_storage *peer)
{
	char name[ENTRY_NAME_LEN];
	struct stat dst, est;
	int dirfd, fd;
	uid_t peer_uid;
	enum probe p;

	(void)tcp_fd;
	if (!peer_entry_name(peer, name, sizeof(name)))
		return false;
	dirfd = rundir_open(&dst);
	if (dirfd < 0)
		return false;
	fd = open_entry(dirfd, name, &est);
	smcr_sys_close(dirfd);
	if (fd == -ENOENT)
		return false; /* not registered: the common case for plain servers */
	if (fd < 0) {
		smcr_info("%s/%s is not a socket (or a symlink): not proposing SMC",
			  smcr_config_get()->rundir, name);
		return false;
	}
	if (!uid_trusted(est.st_uid, &dst) || !smcr_registry_uid_is_distinct(est.st_uid)) {
		smcr_info("%s/%s belongs to uid %u, neither ours, root's nor the directory's "
			  "owner's: not proposing SMC", smcr_config_get()->rundir, name,
			  (unsigned)est.st_uid);
		smcr_sys_close(fd);
		return false;
	}
	p = probe_entry(fd, &peer_uid);
	smcr_sys_close(fd);
	if (p != PROBE_LIVE) {
		smcr_dbg("%s/%s: no live listener behind it: not proposing SMC",
			 smcr_config_get()->rundir, name);
		return false;
	}
	if (peer_uid != (uid_t)-1 && peer_uid != est.st_uid) {
		smcr_info("%s/%s: held by uid %u, the file is uid %u's: not proposing SMC",
			  smcr_config_get()->rundir, name, (unsigned)peer_uid,
			  (unsigned)est.st_uid);
		return false;
	}
	return true;
}

/* ---- listeners ------------------------------------------------------------------------- */

/*
 * Take `name` for a listening registry socket.  A file there whose listener
 * is gone (a server that died) is ours to replace if it is ours; one of
 * another uid, or held by a live listener, stays (warned).
 */
static int register_one(int dirfd, const char *name)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		int sock = smcr_sys_fd_high(
			smcr_libc.socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
		struct stat est, now;
		uid_t peer_uid;
		enum probe p;
		int rc, fd;

		if (sock < 0)
			return -errno;
		rc = bind_in_dir(sock, dirfd, name);
		if (rc == 0 && smcr_libc.listen(sock, 0) == 0)
			return sock;
		if (rc == 0)
			rc = -errno;
		smcr_sys_close(sock);
		if (rc != -EADDRINUSE)
			return rc;
		fd = open_entry(dirfd, name, &est);
		if (fd < 0)
			return rc;
		p = probe_entry(fd, &peer_uid);
		smcr_sys_close(fd);
		if (p == PROBE_LIVE || est.st_uid != geteuid()) {
			if (est.st_uid != geteuid())
				smcr_warn("%s/%s is held by uid %u: clients in other network "
					  "namespaces will use TCP with this listener",
					  smcr_config_get()->rundir, name, (unsigned)est.st_uid);
			return rc;
		}
		/* Stale and ours: remove it, unless it was replaced meanwhile. */
		if (p != PROBE_STALE ||
		    fstatat(dirfd, name, &now, AT_SYMLINK_NOFOLLOW) < 0 ||
		    now.st_ino != est.st_ino || now.st_dev != est.st_dev ||
		    unlinkat(dirfd, name, 0) < 0)
			return rc;
	}
	return -EADDRINUSE;
}

static bool is_loopback(int family, const void *addr)
{
	if (family == AF_INET)
		return (ntohl(((const struct in_addr *)addr)->s_addr) >> 24) == 127;
	return IN6_IS_ADDR_LOOPBACK((const struct in6_addr *)addr) ||
	       IN6_IS_ADDR_LINKLOCAL((const struct in6_addr *)addr);
}

static void add_entry(struct smcr_rundir_reg *r, int dirfd, int family, const void *addr,
		      uint16_t port)
{
	char name[ENTRY_NAME_LEN];
	int fd;

	if (r->n >= RUNDIR_MAX_ADDRS || is_loopback(family, addr) ||
	    !entry_name(family, addr, port, name, sizeof(name)))
		return;
	for (unsigned i = 0; i < r->n; i++)
		if (strcmp(r->names[i], name) == 0)
			return;
	fd = register_one(dirfd, name);
	if (fd < 0) {
		smcr_dbg("%s/%s: not registered: %s", smcr_config_get()->rundir, name,
			 strerror(-fd));
		return;
	}
	r->fds[r->n] = fd;
	memcpy(r->names[r->n], name, sizeof(name));
	r->n++;
}

/* Every address of this network namespace a wildcard listener of `family` is reached at. */
static void add_all_addresses(struct smcr_rundir_reg *r, int dirfd, int family, bool v6only,
			      uint16_t port)
{
	struct ifaddrs *list, *ifa;

	if (getifaddrs(&list) < 0)
		return;
	for (ifa = list; ifa; ifa = ifa->ifa_next) {
		const struct sockaddr *sa = ifa->ifa_addr;

		if (!sa || !(ifa->ifa_flags & IFF_UP))
			continue;
		if (sa->sa_family == AF_INET && (family == AF_INET || !v6only))
			add_entry(r, dirfd, AF_INET,
				  &((const struct sockaddr_in *)(const void *)sa)->sin_addr, port);
		else if (sa->sa_family == AF_INET6 && family == AF_INET6)
			add_entry(r, dirfd, AF_INET6,
				  &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, port);
	}
	freeifaddrs(list);
}

struct smcr_rundir_reg *smcr_rundir_register(int listen_fd, uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct smcr_rundir_reg *r;
	struct stat dst;
	int dirfd, saved = errno;

	if (!smcr_rundir_enabled() ||
	    smcr_libc.getsockname(listen_fd, (struct sockaddr *)&ss, &len) < 0)
		return NULL;
	dirfd = rundir_open(&dst);
	if (dirfd < 0)
		return NULL;
	r = calloc(1, sizeof(*r));
	if (r && ss.ss_family == AF_INET) {
		const struct in_addr *a = &((const struct sockaddr_in *)(const void *)&ss)->sin_addr;

		if (a->s_addr == htonl(INADDR_ANY))
			add_all_addresses(r, dirfd, AF_INET, true, port);
		else
			add_entry(r, dirfd, AF_INET, a, port);
	} else if (r && ss.ss_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)&ss)->sin6_addr;
		int v6only = 0;
		socklen_t olen = sizeof(v6only);

		if (IN6_IS_ADDR_UNSPECIFIED(a)) {
			if (smcr_libc.getsockopt(listen_fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only,
						 &olen) < 0)
				v6only = 0;
			add_all_addresses(r, dirfd, AF_INET6, v6only != 0, port);
		} else if (IN6_IS_ADDR_V4MAPPED(a)) {
			add_entry(r, dirfd, AF_INET, &a->s6_addr[12], port);
		} else {
			add_entry(r, dirfd, AF_INET6, a, port);
		}
	}
	smcr_sys_close(dirfd);
	if (r && r->n == 0) {
		free(r);
		r = NULL;
	}
	errno = saved;
	return r;
}

void smcr_rundir_revoke(const struct smcr_rundir_reg *r)
{
	int saved = errno;

	for (unsigned i = 0; r && i < r->n; i++)
		smcr_libc.shutdown(r->fds[i], SHUT_RDWR);
	errno = saved;
}

void smcr_rundir_remove(struct smcr_rundir_reg *r)
{
	struct stat dst;
	int dirfd, saved = errno;

	if (!r)
		return;
	for (unsigned i = 0; i < r->n; i++)
		smcr_sys_close(r->fds[i]);
	/*
	 * The socket may live on in processes it followed by fork: a name is
	 * removed only when nobody holds it any more (a connect is refused).
	 */
	dirfd = rundir_open(&dst);
	for (unsigned i = 0; dirfd >= 0 && i < r->n; i++) {
		struct stat est, now;
		uid_t peer_uid;
		int fd = open_entry(dirfd, r->names[i], &est);

		if (fd < 0)
			continue;
		if (est.st_uid == geteuid() && probe_entry(fd, &peer_uid) == PROBE_STALE &&
		    fstatat(dirfd, r->names[i], &now, AT_SYMLINK_NOFOLLOW) == 0 &&
		    now.st_ino == est.st_ino && now.st_dev == est.st_dev)
			unlinkat(dirfd, r->names[i], 0);
		smcr_sys_close(fd);
	}
	if (dirfd >= 0)
		smcr_sys_close(dirfd);
	free(r);
	errno = saved;
}

/* ---- rendezvous -------------------------------------------------------------------------- */

static void rv_name(uint64_t token, char out[32])
{
	snprintf(out, 32, "rv-%016llx", (unsigned long long)token);
}

int smcr_rundir_rv_bind(int sock, uint64_t token)
{
	char name[32];
	struct stat dst;
	int dirfd = rundir_open(&dst), rc;

	if (dirfd < 0)
		return -ENOENT;
	rv_name(token, name);
	rc = bind_in_dir(sock, dirfd, name);
	smcr_sys_close(dirfd);
	return rc;
}

int smcr_rundir_rv_connect(int sock, uint64_t token)
{
	char name[32];
	struct stat dst, est;
	int dirfd = rundir_open(&dst), fd, rc, err;

	if (dirfd < 0) {
		errno = ENOENT;
		return -1;
	}
	rv_name(token, name);
	fd = open_entry(dirfd, name, &est);
	smcr_sys_close(dirfd);
	if (fd < 0) {
		errno = -fd;
		return -1;
	}
	rc = connect_entry(sock, fd);
	err = errno;
	smcr_sys_close(fd);
	errno = err;
	return rc;
}

void smcr_rundir_rv_unlink(uint64_t token)
{
	char name[32];
	struct stat dst;
	int dirfd = rundir_open(&dst), saved = errno;

	if (dirfd < 0)
		return;
	rv_name(token, name);
	unlinkat(dirfd, name, 0);
	smcr_sys_close(dirfd);
	errno = saved;
}
