// SPDX-License-Identifier: MIT
/*
 * Sockets that leave this program image: exec and SCM_RIGHTS (handoff.h).
 *
 * What this process knows about a socket lives in its fd table; the kernel
 * keeps none of it. Two kinds of knowledge matter to the socket's next
 * owner:
 *  - an accepted connection whose first bytes are not read yet: the client
 *    may have sent (or be about to send) a CLC Proposal, which only smcr may
 *    read;
 *  - a listener registered for SMC: local clients propose SMC to it.
 * Across exec into a program that loads smcr again, both are handed over in
 * the environment (SMCR_INHERIT=FD:INODE:KIND,...; KIND a = accepted,
 * ap = accepted whose client's SYN announced SMC, l = listener), and the new
 * image takes them up before main() (smcr_handoff_adopt), checking that each
 * fd is still the same TCP socket (its inode). The variable is the process's
 * own environment: whoever can set it can as well run the program without
 * smcr, and a wrong entry only makes smcr classify a TCP socket as it would
 * classify any accepted one.
 * Into a program that will not load smcr (a static binary, an environment
 * without our LD_PRELOAD, a setuid program), and over SCM_RIGHTS, an accepted
 * connection is settled first (smc_server.c smcr_smc_settle_for_handoff: a Proposal
 * is declined, reason HANDOFF), so its new owner reads a clean TCP stream.
 *
 * vfork: python's subprocess dup2s the connection onto 0 and 1 and closes
 * the original between vfork and exec, in a child that must not write our
 * fd table (it is the parent's). So the parent notes, at vfork, the inodes
 * of its unsettled accepted connections, and the child's exec finds them
 * again among its own fds by inode.
 */
#include "preload/handoff.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <netinet/in.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "preload/preload.h"
#include "preload/smc.h"
#include "smcr/engine.h"

#define INHERIT_VAR "SMCR_INHERIT"
/* A vfork child looks for the parent's connections among this many fds. */
#define VFORK_SCAN_FDS 1024u
#define VFORK_NOTED 32

struct noted {
	ino_t ino;
	struct smcr_fd_entry *entry;
	int fd;      /* the parent's */
	bool leaves; /* an SMC connection the child's exec takes along: on TCP from now */
};

/* Per thread: the vfork child runs on its parent thread's TLS. */
static __thread struct noted vfork_noted[VFORK_NOTED];
static __thread unsigned vfork_n_noted;

/* This library's file name ("libsmcr.so"), and how this process loaded it. */
static char self_name[64];
static bool from_ld_so_preload;

/* An accepted connection whose mode is not decided yet. */
static bool unsettled_accepted(const struct smcr_fd_entry *e)
{
	unsigned f = smcr_fd_entry_flags(e);

	return smcr_fd_entry_mode(e) == SMCR_FD_CANDIDATE && (f & SMCR_FD_F_ACCEPTED) &&
	       !(f & SMCR_FD_F_LISTENING);
}

/* A listener this process registered for SMC. */
static bool registered_listener(const struct smcr_fd_entry *e)
{
	return smcr_fd_entry_mode(e) == SMCR_FD_CANDIDATE &&
	       (smcr_fd_entry_flags(e) & SMCR_FD_F_LISTENING) && e->listener;
}

/* fd survives exec: open and not close-on-exec. */
static bool survives_exec(int fd)
{
	int fl = smcr_real.fcntl(fd, F_GETFD);

	return fl >= 0 && !(fl & FD_CLOEXEC);
}

static bool socket_inode(int fd, ino_t *ino)
{
	struct stat st;

	if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode))
		return false;
	*ino = st.st_ino;
	return true;
}

void smcr_handoff_note_vfork(void)
{
	unsigned high;

	vfork_n_noted = 0;
	if (!smcr_preload_tracking() || !smcr_smc_enabled)
		return;
	high = smcr_fdtab_high();
	for (unsigned fd = 0; fd < high && vfork_n_noted < VFORK_NOTED; fd++) {
		struct smcr_fd_entry *e = smcr_fdtab_peek((int)fd);
		ino_t ino;

		if (e && (unsettled_accepted(e) || registered_listener(e) || smcr_smc_entry_is_conn(e)) &&
		    socket_inode((int)fd, &ino))
			vfork_noted[vfork_n_noted++] = (struct noted){ ino, e, (int)fd, false };
	}
	if (vfork_n_noted) {
		smcr_guard_enter();
		smcr_engine_vfork_prepare();
		smcr_guard_leave();
	}
}

/* Appends "FD:INODE:KIND" to the variable; false if it does not fit. */
static bool append(struct smcr_handoff *h, int fd, ino_t ino, const char *kind)
{
	size_t len = strlen(h->var);
	int n = snprintf(h->var + len, sizeof(h->var) - len, "%s%d:%llu:%s",
			 len > sizeof(INHERIT_VAR) ? "," : "", fd, (unsigned long long)ino, kind);

	if (n < 0 || (size_t)n >= sizeof(h->var) - len) {
		h->var[len] = '\0';
		return false;
	}
	return true;
}

/* One surviving socket of the image: hand it over, or settle it. */
static void hand_over(struct smcr_handoff *h, int fd, struct smcr_fd_entry *e, bool keeps_smcr)
{
	ino_t ino;

	if (unsettled_accepted(e)) {
		const char *kind = (smcr_fd_entry_flags(e) & SMCR_FD_F_PEER_SMC) ? "ap" : "a";

		if (keeps_smcr && socket_inode(fd, &ino) && append(h, fd, ino, kind)) {
			smcr_dbg("fd %d: handed over to the new program image before its handshake", fd);
			return;
		}
		smcr_smc_settle_for_handoff(fd, e, keeps_smcr ? "too many sockets to hand over"
							      : "exec of a program without smcr");
	} else if (registered_listener(e)) {
		if (keeps_smcr && socket_inode(fd, &ino) && append(h, fd, ino, "l"))
			smcr_dbg("fd %d: listener handed over to the new program image", fd);
		else
			smcr_smc_revoke_listener(fd, e, keeps_smcr ? "too many sockets to hand over"
								   : "exec of a program without smcr");
	}
}

/* One fd of the vfork child: is it one of the parent's noted sockets? */
static void hand_over_vfork_fd(struct smcr_handoff *h, int fd, bool keeps_smcr)
{
	ino_t ino;

	if (!survives_exec(fd) || !socket_inode(fd, &ino))
		return;
	for (unsigned i = 0; i < vfork_n_noted; i++) {
		struct smcr_fd_entry *e = vfork_noted[i].entry;

		if (vfork_noted[i].ino != ino)
			continue;
		if (smcr_smc_entry_is_conn(e) || (registered_listener(e) && !keeps_smcr))
			vfork_noted[i].leaves = true;
		else
			hand_over(h, fd, e, keeps_smcr);
	}
}

/*
 * The child's open fds, from /proc/self/fd: a handful after python's
 * close_fds, where probing every number would cost a system call each.
 * No opendir: it mallocs, and a vfork child shares its parent's heap.
 * False if /proc cannot tell.
 */
static bool hand_over_vfork_listed(struct smcr_handoff *h, bool keeps_smcr)
{
	char buf[4096];
	int dir = smcr_real.open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	long n;

	if (dir < 0)
		return false;
	while ((n = syscall(SYS_getdents64, dir, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n;) {
			const struct linux_dirent64 {
				uint64_t ino;
				int64_t off;
				unsigned short reclen;
				unsigned char type;
				char name[];
			} *d = (const void *)(buf + off);
			char *end;
			long fd = strtol(d->name, &end, 10);

			off += d->reclen;
			if (*end == '\0' && end != d->name && fd != dir && fd >= 0 && fd <= INT_MAX)
				hand_over_vfork_fd(h, (int)fd, keeps_smcr);
		}
	}
	smcr_real.close(dir);
	return n == 0;
}

/*
 * A vfork child's own fds that are the parent's unsettled connections, or
 * its SMC connections.  These go on over TCP, but not from here: the child
 * may have closed the engine's fds already (python's close_fds does, between
 * vfork and exec), so the parent does it (smcr_handoff_after_vfork) before
 * it returns from vfork, once the exec has succeeded.
 */
static void hand_over_vfork(struct smcr_handoff *h, bool keeps_smcr)
{
	if (!vfork_n_noted || hand_over_vfork_listed(h, keeps_smcr))
		return;
	for (unsigned fd = 0; fd < VFORK_SCAN_FDS; fd++)
		hand_over_vfork_fd(h, (int)fd, keeps_smcr);
}

void smcr_handoff_exec_failed(void)
{
	if (smcr_preload_table_writable())
		return;
	for (unsigned i = 0; i < vfork_n_noted; i++)
		vfork_noted[i].leaves = false;
}

void smcr_handoff_after_vfork(void)
{
	unsigned n = vfork_n_noted;

	vfork_n_noted = 0;
	for (unsigned i = 0; i < n; i++) {
		struct smcr_fd_entry *e;

		if (!vfork_noted[i].leaves)
			continue;
		/* still the socket noted (another thread may have closed the fd since) */
		e = smcr_fdtab_get(vfork_noted[i].fd);
		if (e == vfork_noted[i].entry && registered_listener(e))
			smcr_smc_revoke_listener(vfork_noted[i].fd, e,
						 "exec of a program without smcr");
		else if (e == vfork_noted[i].entry)
			smcr_smc_continue_on_tcp(vfork_noted[i].fd, e, SMCR_CLC_DECL_HANDOFF,
						 "exec of a program that inherits it");
		if (e)
			smcr_fdtab_put(e);
	}
}

const char *smcr_handoff_before_exec(struct smcr_handoff *h, bool keeps_smcr)
{
	unsigned high;

	snprintf(h->var, sizeof(h->var), "%s=", INHERIT_VAR);
	if (!smcr_preload_active || !smcr_smc_enabled)
		return NULL;
	if (!smcr_preload_table_writable()) {
		hand_over_vfork(h, keeps_smcr);
	} else {
		high = smcr_fdtab_high();
		for (unsigned fd = 0; fd < high; fd++) {
			struct smcr_fd_entry *e = smcr_fdtab_peek((int)fd);

			if (e && (unsettled_accepted(e) || registered_listener(e)) &&
			    survives_exec((int)fd))
				hand_over(h, (int)fd, e, keeps_smcr);
		}
	}
	return strlen(h->var) > sizeof(INHERIT_VAR) ? h->var : NULL;
}

/*
 * One socket a spawned child may inherit: at its own number unless
 * close-on-exec, and at every number a dup2 of the file actions gives it.
 * The parent keeps it, so an accepted connection handed over stays
 * unsettled here too (the parent of an inetd-style server closes its copy).
 */
static void spawn_hand_over(struct smcr_handoff *h, int fd, struct smcr_fd_entry *e,
			    bool keeps_smcr, const struct smcr_spawn_dup2 *dups, unsigned n_dups)
{
	bool accepted = unsettled_accepted(e), crosses = false, handed = true;
	const char *kind = !accepted				     ? "l"
			   : (smcr_fd_entry_flags(e) & SMCR_FD_F_PEER_SMC) ? "ap"
									   : "a";
	ino_t ino;

	if (!socket_inode(fd, &ino))
		return;
	if (smcr_smc_entry_is_conn(e)) {
		bool reaches = survives_exec(fd);

		for (unsigned i = 0; i < n_dups; i++)
			reaches = reaches || dups[i].fd == fd;
		if (reaches)
			smcr_smc_continue_on_tcp(fd, e, SMCR_CLC_DECL_HANDOFF, "spawn of a program that inherits it");
		return;
	}
	if (survives_exec(fd)) {
		crosses = true;
		handed = keeps_smcr && append(h, fd, ino, kind);
	}
	for (unsigned i = 0; i < n_dups; i++) {
		if (dups[i].fd != fd)
			continue;
		crosses = true;
		handed = handed && keeps_smcr && append(h, dups[i].newfd, ino, kind);
	}
	if (crosses && handed)
		smcr_dbg("fd %d: handed over to a spawned program image", fd);
	else if (crosses && accepted)
		smcr_smc_settle_for_handoff(fd, e, keeps_smcr ? "too many sockets to hand over"
							      : "spawn of a program without smcr");
	else if (crosses)
		smcr_smc_revoke_listener(fd, e, keeps_smcr ? "too many sockets to hand over"
							   : "spawn of a program without smcr");
}

const char *smcr_handoff_before_spawn(struct smcr_handoff *h, bool keeps_smcr,
				      const struct smcr_spawn_dup2 *dups, unsigned n_dups,
				      bool dups_known)
{
	snprintf(h->var, sizeof(h->var), "%s=", INHERIT_VAR);
	if (!smcr_preload_active || !smcr_smc_enabled)
		return NULL;
	for (unsigned fd = 0, high = smcr_fdtab_high(); fd < high; fd++) {
		struct smcr_fd_entry *e = smcr_fdtab_peek((int)fd);

		if (!e || !(unsettled_accepted(e) || registered_listener(e) || smcr_smc_entry_is_conn(e)))
			continue;
		if (dups_known)
			spawn_hand_over(h, (int)fd, e, keeps_smcr, dups, n_dups);
		else if (unsettled_accepted(e))
			smcr_smc_settle_for_handoff((int)fd, e, "spawn with file actions not followed");
		else if (smcr_smc_entry_is_conn(e))
			smcr_smc_continue_on_tcp((int)fd, e, SMCR_CLC_DECL_HANDOFF,
						 "spawn with file actions not followed");
	}
	return strlen(h->var) > sizeof(INHERIT_VAR) ? h->var : NULL;
}

void smcr_handoff_before_send_fds(const struct msghdr *msg)
{
	if (!smcr_smc_enabled || !msg || msg->msg_controllen == 0)
		return;
	for (struct cmsghdr *c = CMSG_FIRSTHDR((struct msghdr *)msg); c;
	     c = CMSG_NXTHDR((struct msghdr *)msg, c)) {
		size_t n;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;
			struct smcr_fd_entry *e;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			e = smcr_fdtab_get(fd);
			if (!e)
				continue;
			/* the receiver may set options on the socket we keep */
			atomic_fetch_and_explicit(&e->flags, ~SMCR_FD_F_NO_TIMEO, memory_order_relaxed);
			if (unsettled_accepted(e))
				smcr_smc_settle_for_handoff(fd, e, "passed over SCM_RIGHTS");
			else if (registered_listener(e))
				/* the receiver may not run smcr; one that does does not know it */
				smcr_smc_revoke_listener(fd, e, "passed to another process over SCM_RIGHTS");
			else
				smcr_smc_continue_on_tcp(fd, e, SMCR_CLC_DECL_HANDOFF, "passed over SCM_RIGHTS");
			smcr_fdtab_put(e);
		}
	}
}

/* ---- which images load smcr ----------------------------------------------------- */

/* The value of NAME in `envp`, or NULL. */
static const char *env_value(char *const envp[], const char *name)
{
	size_t len = strlen(name);

	for (; envp && *envp; envp++)
		if (!strncmp(*envp, name, len) && (*envp)[len] == '=')
			return *envp + len + 1;
	return NULL;
}

/* Does this LD_PRELOAD value (':' or ' ' separated) name a file called `base`? */
static bool preload_names(const char *list, const char *base)
{
	size_t blen = strlen(base);

	for (const char *p = list; p && *p;) {
		size_t n = strcspn(p, ": ");
		const char *slash = memrchr(p, '/', n);
		const char *name = slash ? slash + 1 : p;

		if ((size_t)(p + n - name) == blen && !memcmp(name, base, blen))
			return true;
		p += n;
		p += strspn(p, ": ");
	}
	return false;
}

bool smcr_handoff_env_keeps(char *const envp[])
{
	const char *disable = env_value(envp, "SMCR_DISABLE");
	bool disabled = false;

	if (disable && (smcr_config_parse_bool(disable, &disabled) < 0 || disabled))
		return false; /* set, even to something unparsable: assume the user meant it */
	if (!self_name[0])
		return false;
	return from_ld_so_preload ||
	       preload_names(env_value(envp, "LD_PRELOAD"), self_name);
}

/*
 * This library's file name, to find it in an LD_PRELOAD; and whether this
 * process got it otherwise (/etc/ld.so.preload), which then holds for every
 * dynamically linked program.
 */
static void learn_self(void)
{
	Dl_info info;
	const char *base;

	if (!dladdr((void *)smcr_handoff_adopt, &info) || !info.dli_fname)
		return;
	base = strrchr(info.dli_fname, '/');
	base = base ? base + 1 : info.dli_fname;
	if (strlen(base) >= sizeof(self_name))
		return;
	strcpy(self_name, base);
	from_ld_so_preload = !preload_names(getenv("LD_PRELOAD"), self_name);
}

/* ---- the new image ------------------------------------------------------------- */

/* A TCP socket of AF_INET or AF_INET6 whose inode is `ino` (0: any): its domain, or 0. */
static int tcp_socket_domain(int fd, unsigned long long ino)
{
	struct stat st;
	int domain = 0, type = 0, proto = 0;
	socklen_t len = sizeof(int);

	if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode) || (ino && st.st_ino != ino))
		return 0;
	if (smcr_real.getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0 ||
	    (len = sizeof(int), smcr_real.getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len)) < 0 ||
	    (len = sizeof(int),
	     smcr_real.getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len)) < 0)
		return 0;
	if ((domain != AF_INET && domain != AF_INET6) || type != SOCK_STREAM ||
	    proto != IPPROTO_TCP)
		return 0;
	return domain;
}

static unsigned nonblock_flag(int fd)
{
	int fl = smcr_real.fcntl(fd, F_GETFL);

	return fl >= 0 && (fl & O_NONBLOCK) ? SMCR_FD_F_NONBLOCK : 0;
}

static void adopt_listener(int fd, int domain, const char *from)
{
	if (smcr_fdtab_peek(fd))
		return;
	if (!smcr_preload_track(fd, domain, SMCR_FD_F_LISTENING | nonblock_flag(fd)))
		return;
	smcr_dbg("fd %d: inherited listener (%s)", fd, from);
	smcr_smc_after_listen(fd);
}

/* Sockets taken up so far: a second fd of one socket (dup2 onto 0 and 1) shares its entry. */
struct adopted {
	unsigned long long ino;
	int fd;
};

static void adopt_one(int fd, unsigned long long ino, const char *kind, struct adopted *seen,
		      unsigned *n_seen, unsigned max_seen)
{
	int domain;

	for (unsigned i = 0; i < *n_seen; i++) {
		if (seen[i].ino == ino) {
			if (tcp_socket_domain(fd, ino))
				smcr_preload_dup(seen[i].fd, fd);
			return;
		}
	}
	domain = tcp_socket_domain(fd, ino);

	if (!domain) {
		smcr_dbg("fd %d: %s entry %s skipped: not that TCP socket", fd, INHERIT_VAR, kind);
		return;
	}
	if (!strcmp(kind, "l")) {
		adopt_listener(fd, domain, "handed over by the program image before");
	} else if (!strcmp(kind, "a") || !strcmp(kind, "ap")) {
		unsigned flags = SMCR_FD_F_ACCEPTED | nonblock_flag(fd) |
				 (kind[1] == 'p' ? SMCR_FD_F_PEER_SMC : 0);

		if (!smcr_preload_track(fd, domain, flags))
			return;
		smcr_dbg("fd %d: inherited accepted connection, not classified yet", fd);
	}
	if (*n_seen < max_seen)
		seen[(*n_seen)++] = (struct adopted){ ino, fd };
}

static void adopt_inherit_var(void)
{
	const char *val = getenv(INHERIT_VAR);
	char *copy, *save = NULL;
	struct adopted seen[64];
	unsigned n_seen = 0;

	if (!val)
		return;
	copy = strdup(val);
	unsetenv(INHERIT_VAR); /* for this image only: its own children start afresh */
	if (!copy)
		return;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int fd, used = 0;
		unsigned long long ino;
		char kind[3];

		if (sscanf(tok, "%d:%llu:%2[alp]%n", &fd, &ino, kind, &used) == 3 &&
		    tok[used] == '\0' && fd >= 0 && ino)
			adopt_one(fd, ino, kind, seen, &n_seen, 64);
		else
			smcr_dbg("%s: entry '%s' ignored", INHERIT_VAR, tok);
	}
	free(copy);
}

/*
 * sd_listen_fds(3): a service manager (systemd, systemd-socket-activate)
 * passes listeners as fds 3..3+LISTEN_FDS-1; the variables stay for the
 * program, which reads them itself.
 */
static void adopt_listen_fds(void)
{
	const char *n = getenv("LISTEN_FDS"), *pid = getenv("LISTEN_PID");
	char *end;
	long count;

	if (!n || (pid && strtol(pid, NULL, 10) != (long)getpid()))
		return;
	count = strtol(n, &end, 10);
	if (*end || count <= 0 || count > 1024)
		return;
	for (int fd = 3; fd < 3 + count; fd++) {
		int accepting = 0, domain = tcp_socket_domain(fd, 0);
		socklen_t len = sizeof(accepting);

		if (domain &&
		    smcr_real.getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) == 0 &&
		    accepting)
			adopt_listener(fd, domain, "LISTEN_FDS");
	}
}

void smcr_handoff_adopt(void)
{
	learn_self();
	if (!smcr_smc_enabled) {
		unsetenv(INHERIT_VAR);
		return;
	}
	adopt_inherit_var();
	adopt_listen_fds();
}
