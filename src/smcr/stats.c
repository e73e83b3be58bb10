// SPDX-License-Identifier: MIT
/*
 * Stats publishing (see stats.h and include/smcr/stats_abi.h).
 *
 * The area is created on first use: stats.<pid> in the user's stats
 * directory (include/smcr/stats_dir.h: made 0700 and checked, never a
 * directory of someone else's nor one we chmod), mapped shared so the stats
 * tool can read it while we run.  Counters are relaxed
 * atomics; records are written under their seqlock (stats_abi.h): a slot is
 * claimed by taking its seq and finding it FREE inside the write section.
 *
 * fork: the child must not write into the parent's file, and its
 * connections must be visible (prefork and accept-then-fork servers do all
 * their work in children).  At fork the child swaps the shared mapping for a
 * zeroed private one at the same address, so that pointers to records of
 * inherited connections stay valid; those slots are marked INHERITED (hidden
 * from readers, never claimed until freed).  Its own counters start at zero.
 * It publishes stats.<its pid> lazily, at its first stats event: a child that
 * never connects (a worker that only execs, a daemonising fork) costs no file,
 * and the fork itself costs one mmap() and a scan of the slot states, with no
 * allocation or file system work in the atfork handler.
 */
#include "smcr/stats.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/compiler.h"
#include "common/log.h"
#include "smcr/libc.h"
#include "smcr/clc.h"
#include "smcr/confine.h"
#include "smcr/conn.h"
#include "smcr/engine.h"
#include "smcr/stats_dir.h"
#include "smcr/sys.h"

static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;
static struct smcr_stats_file *area;
static char area_path[256];
static char area_new_name[32];
/* The stats directory, open from area_create_file() to area_file_show(). */
static int area_dir_fd = -1;
/* Open for the life of the mapping: it holds the shared flock. */
static int area_fd = -1;
/* A forked child whose area is private until its first stats event. */
static bool publish_pending;
/* A forked child that could not get its own area: every stats call is a no-op. */
static bool stats_off;
/* No file may be made (smcr_stats_keep_private): the private mapping only. */
static bool stats_private_only;

#define ADD(field, v) __atomic_fetch_add(&(field), (v), __ATOMIC_RELAXED)
#define LOAD(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)
#define SUB(field, v) __atomic_fetch_sub(&(field), (v), __ATOMIC_RELAXED)
#define SET(field, v) __atomic_store_n(&(field), (v), __ATOMIC_RELAXED)

/* The stats directory (stats_dir.h), for the stats file and the learned policy's table. */
bool smcr_stats_runtime_dir(char *out, size_t len)
{
	int fd = smcr_stats_dir_create(out, len);

	if (fd < 0)
		return false;
	smcr_sys_close(fd);
	return true;
}

static void area_header(struct smcr_stats_file *f)
{
	f->magic = SMCR_STATS_MAGIC;
	f->version = SMCR_STATS_VERSION;
	f->header_size = (uint32_t)offsetof(struct smcr_stats_file, conns);
	f->conn_size = (uint32_t)sizeof(struct smcr_stats_conn);
	f->max_conns = SMCR_STATS_MAX_CONNS;
	f->listener_offset = (uint32_t)offsetof(struct smcr_stats_file, listeners);
	f->listener_size = (uint16_t)sizeof(struct smcr_stats_listener);
	f->max_listeners = SMCR_STATS_MAX_LISTENERS;
	f->lgr_offset = (uint32_t)offsetof(struct smcr_stats_file, lgrs);
	f->lgr_size = (uint16_t)sizeof(struct smcr_stats_lgr);
	f->max_lgrs = SMCR_STATS_MAX_LGRS;
	f->pid = (int32_t)getpid();
	smcr_libc.prctl(PR_GET_NAME, f->comm, 0, 0, 0);
}

static void close_dir(void)
{
	if (area_dir_fd >= 0)
		smcr_sys_close(area_dir_fd);
	area_dir_fd = -1;
}

/* The half-made file goes, and with it our hold on the directory (errno kept). */
static void area_file_drop(void)
{
	int saved = errno;

	if (area_dir_fd >= 0)
		unlinkat(area_dir_fd, area_new_name, 0);
	close_dir();
	errno = saved;
}

/*
 * A new stats file of our pid, sized for the area and share-locked, still
 * under a name readers ignore (stats.<pid>.new): its fd, or -1 (errno set).
 * area_file_show() gives it its real name once it is filled.
 *
 * The shared flock is how readers tell a live file from a stale one (any pid
 * namespace, pid reuse, exec): we hold it for the life of the mapping, on an
 * fd kept open close-on-exec; the kernel drops it when we exit or exec, and
 * a reader that can take an exclusive lock knows nobody writes the file.
 */
static int area_create_file(void)
{
	char dir[224];
	int fd;

	area_dir_fd = smcr_stats_dir_create(dir, sizeof(dir));
	if (area_dir_fd < 0) {
		snprintf(area_path, sizeof(area_path), "%s", dir);
		errno = -area_dir_fd;
		return -1;
	}
	snprintf(area_path, sizeof(area_path), "%s/stats.%d", dir, (int)getpid());
	snprintf(area_new_name, sizeof(area_new_name), "stats.%d.new", (int)getpid());
	unlinkat(area_dir_fd, area_new_name, 0); /* left by an earlier process with our pid */
	fd = smcr_sys_fd_high(smcr_libc.openat(area_dir_fd, area_new_name,
					       O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
					       0600));
	if (fd < 0)
		goto fail;
	if (flock(fd, LOCK_SH | LOCK_NB) < 0 ||
	    ftruncate(fd, (off_t)sizeof(struct smcr_stats_file)) < 0) {
		smcr_sys_close(fd);
		goto fail;
	}
	return fd;
fail:
	area_file_drop();
	return -1;
}

/* Filled and mapped: give the file its real name (replacing any stale one). */
static bool area_file_show(int fd)
{
	bool ok = renameat(area_dir_fd, area_new_name, area_dir_fd,
			   strrchr(area_path, '/') + 1) == 0;

	if (!ok) {
		area_file_drop();
		return false;
	}
	close_dir();
	area_fd = fd;
	return true;
}

static void publish_failed(void)
{
	smcr_info("stats stay private: cannot publish %s: %s", area_path, strerror(errno));
	area_path[0] = '\0';
}

/* The shared file, filled with its header, or NULL (stats then stay private). */
static struct smcr_stats_file *area_publish(void)
{
	struct smcr_stats_file *f;
	int fd = area_create_file();

	if (fd < 0)
		goto fail;
	f = mmap(NULL, sizeof(*f), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (f == MAP_FAILED) {
		smcr_sys_close(fd);
		area_file_drop();
		goto fail;
	}
	area_header(f);
	if (!area_file_show(fd)) {
		munmap(f, sizeof(*f));
		smcr_sys_close(fd);
		goto fail;
	}
	return f;
fail:
	publish_failed();
	return NULL;
}

/*
 * A forked child's first stats event: its private area (header, inherited
 * slot marks, whatever it counted so far) becomes stats.<pid>, mapped shared
 * over the same address so every record pointer stays valid.  Under
 * stats_lock; a counter bumped by another thread between the copy and the
 * remap may be lost, nothing worse.
 */
static void area_republish(struct smcr_stats_file *f)
{
	int fd;

	area_header(f);
	fd = area_create_file();
	if (fd < 0) {
		publish_failed();
		return;
	}
	if (pwrite(fd, f, sizeof(*f), 0) != (ssize_t)sizeof(*f) ||
	    mmap(f, sizeof(*f), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) ==
		    MAP_FAILED) {
		smcr_sys_close(fd);
		area_file_drop();
		publish_failed();
		return;
	}
	if (!area_file_show(fd)) {
		/* Mapped shared but unnamed: still ours alone, just invisible. */
		smcr_sys_close(fd);
		publish_failed();
	}
}

/*
 * A confined process leaves its file (unlink may be denied): smcr-stat
 * removes a file nobody holds the lock of any more.
 */
void smcr_stats_exit(void)
{
	if (area_path[0] && area && area->pid == (int32_t)getpid() && !smcr_confined())
		unlink(area_path);
}


/*
 * atfork child handler: only system calls and plain stores here (the child of
 * a multi-threaded parent may run it with another thread's locks held).
 */
void smcr_stats_fork_child(void)
{
	uint32_t inherited[SMCR_STATS_MAX_CONNS / 32] = { 0 };
	/* The child holds its parent's listening sockets too: their records stay. */
	struct smcr_stats_listener listeners[SMCR_STATS_MAX_LISTENERS];
	uint32_t lgr_inherited[(SMCR_STATS_MAX_LGRS + 31) / 32] = { 0 };
	struct smcr_stats_file *f = area;

	pthread_mutex_unlock(&stats_lock);
	if (area_fd >= 0) {
		/* The parent's flock stays the parent's: it lives on its open file. */
		smcr_sys_close(area_fd);
		area_fd = -1;
	}
	if (!f)
		return;
	for (unsigned i = 0; i < SMCR_STATS_MAX_CONNS; i++)
		if (__atomic_load_n(&f->conns[i].state, __ATOMIC_RELAXED) != SMCR_STATS_CONN_FREE)
			inherited[i / 32] |= 1u << (i % 32);
	memcpy(listeners, f->listeners, sizeof(listeners));
	for (unsigned i = 0; i < SMCR_STATS_MAX_LGRS; i++)
		if (__atomic_load_n(&f->lgrs[i].state, __ATOMIC_RELAXED) != SMCR_STATS_CONN_FREE)
			lgr_inherited[i / 32] |= 1u << (i % 32);
	/*
	 * Fresh zeroed private pages at the same address: the parent's file is
	 * no longer ours, and the parent's counters and records are not ours
	 * to publish.  If this fails (ENOMEM), the child keeps no stats at all
	 * rather than write into its parent's file.
	 */
	if (mmap(f, sizeof(*f), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
		 -1, 0) == MAP_FAILED) {
		stats_off = true;
		area_path[0] = '\0';
		return;
	}
	for (unsigned i = 0; i < SMCR_STATS_MAX_CONNS; i++)
		if (inherited[i / 32] & (1u << (i % 32)))
			f->conns[i].state = SMCR_STATS_CONN_INHERITED;
	memcpy(f->listeners, listeners, sizeof(listeners));
	for (unsigned i = 0; i < SMCR_STATS_MAX_LISTENERS; i++)
		f->listeners[i].seq &= ~1u; /* a parent thread's write, cut short by fork */
	/* The parent's link groups are not the child's (lgr.c), but it may still
	 * touch their records: those slots stay reserved, hidden. */
	for (unsigned i = 0; i < SMCR_STATS_MAX_LGRS; i++)
		if (lgr_inherited[i / 32] & (1u << (i % 32)))
			f->lgrs[i].state = SMCR_STATS_CONN_INHERITED;
	f->pid = (int32_t)getpid(); /* its exit handler must not unlink the parent's file */
	area_path[0] = '\0';
	publish_pending = true;
}

/*
 * fork child, after smcr_stats_fork_child(): the record of a connection the
 * child holds (it followed fork) stays reserved in the child's area, even if
 * the parent, running on meanwhile, closed its share before the child's
 * handler looked at the parent's slots.  A plain store.
 */
void smcr_stats_fork_keep(struct smcr_stats_conn *c)
{
	if (c && !stats_off && area)
		c->state = SMCR_STATS_CONN_INHERITED;
}

void smcr_stats_fork_prepare(void)
{
	pthread_mutex_lock(&stats_lock);
}

void smcr_stats_fork_parent(void)
{
	pthread_mutex_unlock(&stats_lock);
}

static struct smcr_stats_file *stats_get(void)
{
	struct smcr_stats_file *f = __atomic_load_n(&area, __ATOMIC_ACQUIRE);

	if (stats_off)
		return NULL;
	if (f && !__atomic_load_n(&publish_pending, __ATOMIC_ACQUIRE))
		return f;
	pthread_mutex_lock(&stats_lock);
	if (area && publish_pending) {
		if (!stats_private_only)
			area_republish(area);
		__atomic_store_n(&publish_pending, false, __ATOMIC_RELEASE);
	}
	if (!area) {
		f = stats_private_only ? NULL : area_publish();
		if (!f) {
			f = mmap(NULL, sizeof(*f), PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (f == MAP_FAILED)
				f = NULL;
		}
		if (f) {
			if (f->magic == 0) /* the private fallback */
				area_header(f);
			__atomic_store_n(&area, f, __ATOMIC_RELEASE);
		}
	}
	f = area;
	pthread_mutex_unlock(&stats_lock);
	return f;
}

static void addr_of(const struct sockaddr_storage *ss, uint8_t out[16], uint16_t *port)
{
	memset(out, 0, 16);
	*port = 0;
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)ss;

		out[10] = out[11] = 0xff;
		memcpy(out + 12, &in->sin_addr, 4);
		*port = ntohs(in->sin_port);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)ss;

		memcpy(out, &in6->sin6_addr, 16);
		*port = ntohs(in6->sin6_port);
	}
}

/*
 * The area, for a writer that does not go through stats_get(): in a forked
 * child, no thread may write into the area while another remaps it (its
 * stores would land in the private pages being replaced).
 */
static struct smcr_stats_file *area_settled(void)
{
	if (__atomic_load_n(&publish_pending, __ATOMIC_ACQUIRE))
		return stats_get();
	return __atomic_load_n(&area, __ATOMIC_ACQUIRE);
}

/* ---- the writer side of the per-record seqlock (include/smcr/stats_abi.h) ---------- */

/* Make seq odd if it is even now; false if another writer holds the record. */
static bool seq_try_begin(uint32_t *seqp)
{
	uint32_t seq = __atomic_load_n(seqp, __ATOMIC_RELAXED);

	if ((seq & 1u) || !__atomic_compare_exchange_n(seqp, &seq, seq + 1, false,
						       __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return false;
	/* The odd seq is visible before any field store that follows. */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	return true;
}

/*
 * Wait for the record: its writers are a few stores long, but one may be
 * preempted, hence the yield rather than a pure spin.
 */
static void seq_begin(uint32_t *seqp)
{
	for (unsigned spins = 0; !seq_try_begin(seqp); spins++)
		if (spins >= 64)
			sched_yield();
}

static void seq_end(uint32_t *seqp)
{
	__atomic_store_n(seqp, __atomic_load_n(seqp, __ATOMIC_RELAXED) + 1, __ATOMIC_RELEASE);
}

static bool record_try_begin(struct smcr_stats_conn *c)
{
	return seq_try_begin(&c->seq);
}

static void record_begin(struct smcr_stats_conn *c)
{
	seq_begin(&c->seq);
}

static void record_end(struct smcr_stats_conn *c)
{
	seq_end(&c->seq);
}

static uint32_t phase_of(enum smcr_conn_state st)
{
	switch (st) {
	case SMCR_CONN_ACTIVE:
		return SMCR_STATS_PHASE_ACTIVE;
	case SMCR_CONN_PEERCLOSEWAIT1:
		return SMCR_STATS_PHASE_PEER_CLOSE_WAIT1;
	case SMCR_CONN_PEERCLOSEWAIT2:
		return SMCR_STATS_PHASE_PEER_CLOSE_WAIT2;
	case SMCR_CONN_APPCLOSEWAIT1:
		return SMCR_STATS_PHASE_APP_CLOSE_WAIT1;
	case SMCR_CONN_APPCLOSEWAIT2:
		return SMCR_STATS_PHASE_APP_CLOSE_WAIT2;
	case SMCR_CONN_CLOSED:
		return SMCR_STATS_PHASE_CLOSED;
	case SMCR_CONN_ABORTED:
		return SMCR_STATS_PHASE_ABORTED;
	}
	return SMCR_STATS_PHASE_NONE;
}

/* What a record says about its TCP connection, gathered before claiming a slot. */
struct record_init {
	uint32_t mode, role, reason, rmb_size, peer_rmb_size, phase, link_group;
	int tcp_fd;
	uint8_t local_addr[16], peer_addr[16];
	uint16_t local_port, peer_port;
	char device[16];
};

static void record_init_at(struct record_init *ri, int tcp_fd, uint32_t mode, uint32_t role,
			   uint32_t reason, const struct sockaddr_storage *local,
			   const struct sockaddr_storage *peer)
{
	struct sockaddr_storage ss;
	socklen_t len;

	memset(ri, 0, sizeof(*ri));
	ri->mode = mode;
	ri->role = role;
	ri->reason = reason;
	ri->tcp_fd = tcp_fd;
	/* Confined (confine.h): a record without addresses rather than a killed process. */
	len = sizeof(ss);
	if (local)
		addr_of(local, ri->local_addr, &ri->local_port);
	else if (smcr_call_allowed(SMCR_CALL_GETSOCKNAME) &&
		 smcr_libc.getsockname(tcp_fd, (struct sockaddr *)&ss, &len) == 0)
		addr_of(&ss, ri->local_addr, &ri->local_port);
	len = sizeof(ss);
	if (peer)
		addr_of(peer, ri->peer_addr, &ri->peer_port);
	else if (smcr_call_allowed(SMCR_CALL_GETPEERNAME) &&
		 smcr_libc.getpeername(tcp_fd, (struct sockaddr *)&ss, &len) == 0)
		addr_of(&ss, ri->peer_addr, &ri->peer_port);
}

static void record_init_of(struct record_init *ri, int tcp_fd, uint32_t mode, uint32_t role,
			   uint32_t reason)
{
	record_init_at(ri, tcp_fd, mode, role, reason, NULL, NULL);
}

/*
 * Claim a free record and fill it, all inside one write section: a reader
 * never sees a LIVE record with its previous occupant's fields.
 */
static struct smcr_stats_conn *claim_record(struct smcr_stats_file *f, const struct record_init *ri)
{
	for (unsigned i = 0; i < SMCR_STATS_MAX_CONNS; i++) {
		struct smcr_stats_conn *c = &f->conns[i];

		if (__atomic_load_n(&c->state, __ATOMIC_RELAXED) != SMCR_STATS_CONN_FREE ||
		    !record_try_begin(c))
			continue;
		if (__atomic_load_n(&c->state, __ATOMIC_RELAXED) != SMCR_STATS_CONN_FREE) {
			record_end(c); /* taken meanwhile */
			continue;
		}
		SET(c->state, (uint32_t)SMCR_STATS_CONN_LIVE);
		SET(c->generation, c->generation + 1);
		SET(c->mode, ri->mode);
		SET(c->role, ri->role);
		SET(c->tcp_fd, (int32_t)ri->tcp_fd);
		SET(c->fallback_reason, ri->reason);
		SET(c->rmb_size, ri->rmb_size);
		SET(c->peer_rmb_size, ri->peer_rmb_size);
		SET(c->bytes_sent, (uint64_t)0);
		SET(c->bytes_received, (uint64_t)0);
		SET(c->cdc_sent, (uint64_t)0);
		SET(c->cdc_received, (uint64_t)0);
		for (unsigned b = 0; b < 16; b++) {
			SET(c->local_addr[b], ri->local_addr[b]);
			SET(c->peer_addr[b], ri->peer_addr[b]);
		}
		SET(c->local_port, ri->local_port);
		SET(c->peer_port, ri->peer_port);
		SET(c->conn_phase, ri->phase);
		SET(c->link_group, ri->link_group);
		for (unsigned b = 0; b < sizeof(c->device); b++)
			SET(c->device[b], ri->device[b]);
		record_end(c);
		return c;
	}
	return NULL;
}

static void record_free(struct smcr_stats_conn *c)
{
	record_begin(c);
	SET(c->state, (uint32_t)SMCR_STATS_CONN_FREE);
	record_end(c);
}

struct smcr_stats_conn *smcr_stats_conn_open(const struct smcr_sock *s)
{
	struct smcr_stats_file *f = stats_get();
	struct smcr_xconn_info xi;
	struct record_init ri;

	if (!f)
		return NULL;
	ADD(f->handshakes_smc, 1);
	ADD(f->conns_open, 1);
	s->ops->info(s->xc, &xi);
	record_init_of(&ri, s->tcp_fd, xi.mode, s->server ? 1u : 0u, 0);
	ri.link_group = xi.link_group;
	memcpy(ri.device, xi.device, sizeof(ri.device));
	ri.rmb_size = s->rmb_size;
	ri.peer_rmb_size = s->peer_size;
	ri.phase = phase_of(s->state);
	return claim_record(f, &ri);
}

struct smcr_tcp_record *smcr_stats_tcp_open(int tcp_fd, bool server, int reason)
{
	return smcr_stats_tcp_open_peer(tcp_fd, server, reason, NULL, NULL);
}

struct smcr_tcp_record *smcr_stats_tcp_open_peer(int tcp_fd, bool server, int reason,
						 const struct sockaddr_storage *local,
						 const struct sockaddr_storage *peer)
{
	struct smcr_stats_file *f = stats_get();
	struct record_init ri;

	if (!f)
		return NULL;
	record_init_at(&ri, tcp_fd, SMCR_STATS_MODE_TCP, server ? 1u : 0u,
		       reason > 0 ? (uint32_t)reason : 0u, local, peer);
	return (struct smcr_tcp_record *)claim_record(f, &ri);
}

struct smcr_tcp_record *smcr_stats_tcp_open_dest(int tcp_fd, const struct sockaddr *dst,
						 int reason)
{
	struct smcr_stats_file *f = stats_get();
	struct sockaddr_storage ss;
	struct record_init ri;

	if (!f)
		return NULL;
	memset(&ri, 0, sizeof(ri));
	ri.mode = SMCR_STATS_MODE_TCP;
	ri.reason = reason > 0 ? (uint32_t)reason : 0u;
	ri.tcp_fd = tcp_fd;
	memset(&ss, 0, sizeof(ss));
	memcpy(&ss, dst, dst->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
						    : sizeof(struct sockaddr_in));
	addr_of(&ss, ri.peer_addr, &ri.peer_port);
	return (struct smcr_tcp_record *)claim_record(f, &ri);
}

void smcr_stats_tcp_close(struct smcr_tcp_record *rec)
{
	struct smcr_stats_conn *c = (struct smcr_stats_conn *)rec;

	if (c && !stats_off && area_settled())
		record_free(c);
}

/*
 * Counters and phase: the state is read unlocked, as of this update.  Bytes
 * are this process's (its holder slot): a connection that followed fork
 * shows in each holder's file with what that process moved, so the sum over
 * the files counts every byte once.  CDC counts are the connection's.
 */
static void own_bytes(const struct smcr_sock *s, uint64_t *sent, uint64_t *received)
{
	const struct smcr_holder *h;

	if (s->fork_refused) { /* a forked copy that reads as reset moved nothing */
		*sent = *received = 0;
		return;
	}
	if (!s->shared) {
		*sent = s->bytes_sent;
		*received = s->bytes_received;
		return;
	}
	h = smcr_hold_self((struct smcr_sock *)(uintptr_t)s);
	*sent = h->bytes_sent;
	*received = h->bytes_received;
}

static void record_counters(struct smcr_stats_conn *c, const struct smcr_sock *s)
{
	uint64_t sent, received;

	own_bytes(s, &sent, &received);
	if (s->fork_refused) {
		SET(c->conn_phase, (uint32_t)SMCR_STATS_PHASE_ABORTED);
		SET(c->fallback_reason, (uint32_t)SMCR_CLC_DECL_FORKRESET);
	} else {
		SET(c->conn_phase, s->tail_reason && s->state != SMCR_CONN_CLOSED &&
					   s->state != SMCR_CONN_ABORTED
				   ? (uint32_t)SMCR_STATS_PHASE_ON_TCP
				   : phase_of(s->state));
		SET(c->fallback_reason, s->tail_reason);
	}
	SET(c->bytes_sent, sent);
	SET(c->bytes_received, received);
	SET(c->cdc_sent, s->cdc_sent);
	SET(c->cdc_received, s->cdc_received);
}

/*
 * A forked child's first stats event on a connection it holds: the slot its
 * parent's record had (INHERITED in the child's area since the fork) becomes
 * the child's own record of the connection.  Under stats_lock, so that it
 * happens once; stats_get() published the child's file first.
 */
static void record_adopt(struct smcr_stats_conn *c, const struct smcr_sock *s,
			 const struct smcr_xconn_info *xi)
{
	struct record_init ri;

	if (!stats_get() || stats_off)
		return;
	record_init_of(&ri, s->tcp_fd, xi->mode, s->server ? 1u : 0u, 0);
	pthread_mutex_lock(&stats_lock);
	if (__atomic_load_n(&c->state, __ATOMIC_RELAXED) == SMCR_STATS_CONN_INHERITED) {
		record_begin(c);
		SET(c->state, (uint32_t)SMCR_STATS_CONN_LIVE);
		SET(c->generation, c->generation + 1);
		SET(c->mode, ri.mode);
		SET(c->role, ri.role);
		SET(c->tcp_fd, (int32_t)ri.tcp_fd);
		SET(c->fallback_reason, 0u);
		SET(c->rmb_size, s->rmb_size);
		SET(c->peer_rmb_size, s->peer_size);
		for (unsigned b = 0; b < 16; b++) {
			SET(c->local_addr[b], ri.local_addr[b]);
			SET(c->peer_addr[b], ri.peer_addr[b]);
		}
		SET(c->local_port, ri.local_port);
		SET(c->peer_port, ri.peer_port);
		SET(c->link_group, xi->link_group);
		for (unsigned b = 0; b < sizeof(c->device); b++)
			SET(c->device[b], xi->device[b]);
		record_counters(c, s);
		record_end(c);
		ADD(area->conns_open, 1);
	}
	pthread_mutex_unlock(&stats_lock);
}

void smcr_stats_conn_update(const struct smcr_sock *s)
{
	struct smcr_stats_conn *c = s->stats;

	if (!c || stats_off || !area_settled())
		return;
	if (unlikely(__atomic_load_n(&c->state, __ATOMIC_RELAXED) != SMCR_STATS_CONN_LIVE)) {
		if (s->shared && smcr_hold_is_holder((struct smcr_sock *)(uintptr_t)s)) {
			struct smcr_xconn_info xi;

			s->ops->info(s->xc, &xi);
			record_adopt(c, s, &xi);
		}
		return;
	}
	record_begin(c);
	record_counters(c, s);
	record_end(c);
}

/* One more of `reason` in the reasons table (full: not counted by reason). */
static void count_reason(struct smcr_stats_file *f, int reason)
{
	for (unsigned i = 0; i < SMCR_STATS_MAX_REASONS; i++) {
		struct smcr_stats_reason *r = &f->fallback_reasons[i];
		uint32_t expected = 0;

		if (__atomic_load_n(&r->reason, __ATOMIC_ACQUIRE) == (uint32_t)reason ||
		    __atomic_compare_exchange_n(&r->reason, &expected, (uint32_t)reason, false,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) ||
		    expected == (uint32_t)reason) {
			ADD(r->count, 1);
			return;
		}
	}
}

/*
 * A forked process's copy of an SMC-R connection that reads as reset here
 * (fork_tail.c): the slot its parent's record had (INHERITED since the fork)
 * becomes this process's record of it, aborted with why (record_counters),
 * and the reset is counted once.  The transport is not asked for its link
 * group or device: the group's locks belong to the process that runs it.
 */
void smcr_stats_conn_refused(const struct smcr_sock *s)
{
	struct smcr_stats_file *f = stats_get();
	struct smcr_xconn_info xi;

	if (!f || stats_off)
		return;
	ADD(f->aborts, 1);
	count_reason(f, SMCR_CLC_DECL_FORKRESET);
	if (!s->stats)
		return;
	memset(&xi, 0, sizeof(xi));
	xi.mode = s->ops->same_host ? SMCR_STATS_MODE_SMC_SHM : SMCR_STATS_MODE_SMC_R;
	record_adopt(s->stats, s, &xi);
}

void smcr_stats_conn_close(const struct smcr_sock *s, int aborted)
{
	struct smcr_stats_file *f = area_settled();
	struct smcr_stats_conn *c = s->stats;
	uint64_t sent, received;

	if (!f || stats_off)
		return;
	if (c && __atomic_load_n(&c->state, __ATOMIC_RELAXED) != SMCR_STATS_CONN_LIVE) {
		/* A forked child's that it never used: the slot is free for its own. */
		if (__atomic_load_n(&c->state, __ATOMIC_RELAXED) == SMCR_STATS_CONN_INHERITED)
			record_free(c);
		return;
	}
	own_bytes(s, &sent, &received);
	SUB(f->conns_open, 1);
	ADD(f->bytes_sent, sent);
	ADD(f->bytes_received, received);
	if (aborted && !s->fork_refused) /* counted when it was refused */
		ADD(f->aborts, 1);
	if (c) {
		record_begin(c);
		record_counters(c, s);
		if (aborted)
			SET(c->conn_phase, (uint32_t)SMCR_STATS_PHASE_ABORTED);
		SET(c->state, (uint32_t)SMCR_STATS_CONN_FREE);
		record_end(c);
	}
}

void smcr_stats_fallback(int reason)
{
	struct smcr_stats_file *f = stats_get();

	if (!f)
		return;
	ADD(f->fallbacks, 1);
	count_reason(f, reason);
}

static size_t report_put(char *out, size_t size, size_t at, const char *fmt, ...)
	SMCR_PRINTF(4, 5);

/* snprintf at `at`, clamped: the report never runs past `size`. */
static size_t report_put(char *out, size_t size, size_t at, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (at >= size)
		return at;
	va_start(ap, fmt);
	n = vsnprintf(out + at, size - at, fmt, ap);
	va_end(ap);
	if (n < 0)
		return at;
	return at + (size_t)n < size ? at + (size_t)n : size - 1;
}

/*
 * Read without creating the area: a process that never had a connection
 * reports zeros and makes no file on its way out.
 */
void smcr_stats_report(char *out, size_t size)
{
	const struct smcr_stats_file *f = __atomic_load_n(&area, __ATOMIC_ACQUIRE);
	bool first = true;
	size_t at;

	if (!size)
		return;
	out[0] = '\0';
	if (!f) {
		(void)report_put(out, size, 0, "0 SMC, 0 TCP");
		return;
	}
	at = report_put(out, size, 0, "%llu SMC, %llu TCP",
			(unsigned long long)LOAD(f->handshakes_smc),
			(unsigned long long)LOAD(f->fallbacks));
	for (unsigned i = 0; i < SMCR_STATS_MAX_REASONS; i++) {
		const struct smcr_stats_reason *r = &f->fallback_reasons[i];
		uint32_t reason = __atomic_load_n(&r->reason, __ATOMIC_ACQUIRE);

		if (!reason)
			continue;
		at = report_put(out, size, at, "%s%s %llu", first ? " (" : ", ",
				smcr_clc_decl_name(reason), (unsigned long long)LOAD(r->count));
		first = false;
	}
	at = report_put(out, size, at, "%s, %llu handshake errors, %llu resets, "
			"%llu bytes sent and %llu received over SMC", first ? "" : ")",
			(unsigned long long)LOAD(f->handshake_errors),
			(unsigned long long)LOAD(f->aborts),
			(unsigned long long)LOAD(f->bytes_sent),
			(unsigned long long)LOAD(f->bytes_received));
}

void smcr_stats_handshake_error(void)
{
	struct smcr_stats_file *f = stats_get();

	if (f)
		ADD(f->handshake_errors, 1);
}

void smcr_stats_handshake_failed(int reason)
{
	struct smcr_stats_file *f = stats_get();

	if (!f)
		return;
	ADD(f->handshake_errors, 1);
	count_reason(f, reason);
}

void smcr_stats_spin(bool won)
{
	struct smcr_stats_file *f = stats_get();

	if (!f)
		return;
	if (won)
		ADD(f->spins_won, 1);
	else
		ADD(f->spins_lost, 1);
}

void smcr_stats_wakeup_empty(void)
{
	struct smcr_stats_file *f = stats_get();

	if (f)
		ADD(f->wakeups_empty, 1);
}

void smcr_stats_slept(void)
{
	struct smcr_stats_file *f = stats_get();

	if (f)
		ADD(f->waits_slept, 1);
}

void smcr_stats_conn_relink(const struct smcr_sock *s, uint32_t bytes_resent)
{
	struct smcr_stats_file *f = stats_get();
	struct smcr_stats_conn *c = s->stats;
	struct smcr_xconn_info xi;

	if (!f)
		return;
	ADD(f->link_switches, 1);
	ADD(f->bytes_resent, bytes_resent);
	if (!c || stats_off)
		return;
	s->ops->info(s->xc, &xi); /* the device of the link it uses now */
	record_begin(c);
	for (unsigned b = 0; b < sizeof(c->device); b++)
		SET(c->device[b], xi.device[b]);
	record_end(c);
}

/* ---- listeners ---------------------------------------------------------------------- */

static void listener_fields(struct smcr_stats_listener *l, uint32_t status, const char *why)
{
	size_t n = why ? strlen(why) : 0;

	if (n >= sizeof(l->why))
		n = sizeof(l->why) - 1;
	SET(l->status, (uint16_t)status);
	for (size_t b = 0; b < sizeof(l->why); b++)
		SET(l->why[b], b < n ? why[b] : '\0');
}

struct smcr_stats_listener *smcr_stats_listener_open(int listen_fd, uint32_t status,
						     uint32_t flags, const char *why)
{
	struct smcr_stats_file *f = stats_get();
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	uint8_t addr[16] = {0};
	uint16_t port = 0;

	if (!f)
		return NULL;
	/* Confined (confine.h): a record without its address rather than a killed process. */
	if (smcr_call_allowed(SMCR_CALL_GETSOCKNAME) &&
	    smcr_libc.getsockname(listen_fd, (struct sockaddr *)&ss, &len) == 0)
		addr_of(&ss, addr, &port);
	for (unsigned i = 0; i < SMCR_STATS_MAX_LISTENERS; i++) {
		struct smcr_stats_listener *l = &f->listeners[i];

		if (__atomic_load_n(&l->state, __ATOMIC_RELAXED) != SMCR_STATS_CONN_FREE ||
		    !seq_try_begin(&l->seq))
			continue;
		if (__atomic_load_n(&l->state, __ATOMIC_RELAXED) != SMCR_STATS_CONN_FREE) {
			seq_end(&l->seq); /* taken meanwhile */
			continue;
		}
		SET(l->state, (uint32_t)SMCR_STATS_CONN_LIVE);
		SET(l->generation, l->generation + 1);
		SET(l->fd, (int32_t)listen_fd);
		for (unsigned b = 0; b < 16; b++)
			SET(l->addr[b], addr[b]);
		SET(l->port, port);
		SET(l->flags, flags);
		listener_fields(l, status, why);
		seq_end(&l->seq);
		return l;
	}
	return NULL;
}

void smcr_stats_listener_status(struct smcr_stats_listener *l, uint32_t status, const char *why)
{
	if (!l || stats_off || !area_settled())
		return;
	seq_begin(&l->seq);
	listener_fields(l, status, why);
	seq_end(&l->seq);
}

void smcr_stats_listener_close(struct smcr_stats_listener *l)
{
	if (!l || stats_off || !area_settled())
		return;
	seq_begin(&l->seq);
	SET(l->state, (uint32_t)SMCR_STATS_CONN_FREE);
	seq_end(&l->seq);
}

/* ---- link groups ----------------------------------------------------------------- */

struct smcr_stats_lgr *smcr_stats_lgr_open(void)
{
	struct smcr_stats_file *f = stats_get();

	if (!f)
		return NULL;
	for (unsigned i = 0; i < SMCR_STATS_MAX_LGRS; i++) {
		struct smcr_stats_lgr *g = &f->lgrs[i];

		if (__atomic_load_n(&g->state, __ATOMIC_RELAXED) != SMCR_STATS_CONN_FREE ||
		    !seq_try_begin(&g->seq))
			continue;
		if (__atomic_load_n(&g->state, __ATOMIC_RELAXED) != SMCR_STATS_CONN_FREE) {
			seq_end(&g->seq);
			continue;
		}
		SET(g->state, (uint32_t)SMCR_STATS_CONN_LIVE);
		SET(g->generation, g->generation + 1);
		seq_end(&g->seq);
		return g;
	}
	return NULL;
}

/* Everything after the seqlock words, byte by byte as readers copy it. */
#define LGR_BODY_AT offsetof(struct smcr_stats_lgr, id)

void smcr_stats_lgr_update(struct smcr_stats_lgr *g, const struct smcr_stats_lgr *now)
{
	const uint8_t *from = (const uint8_t *)now + LGR_BODY_AT;
	uint8_t *to = (uint8_t *)g + LGR_BODY_AT;

	/* (a forked child's copy of its parent's group is INHERITED: nothing to publish) */
	if (!g || stats_off || __atomic_load_n(&g->state, __ATOMIC_RELAXED) != SMCR_STATS_CONN_LIVE ||
	    !area_settled())
		return;
	seq_begin(&g->seq);
	for (size_t i = 0; i < sizeof(*g) - LGR_BODY_AT; i++)
		SET(to[i], from[i]);
	seq_end(&g->seq);
}

void smcr_stats_lgr_close(struct smcr_stats_lgr *g)
{
	if (!g || stats_off || __atomic_load_n(&g->state, __ATOMIC_RELAXED) != SMCR_STATS_CONN_LIVE ||
	    !area_settled())
		return;
	seq_begin(&g->seq);
	SET(g->state, (uint32_t)SMCR_STATS_CONN_FREE);
	seq_end(&g->seq);
}

const struct smcr_stats_file *smcr_stats_area(void)
{
	return stats_get();
}

const char *smcr_stats_path(void)
{
	stats_get();
	return area_path;
}

void smcr_stats_confine_prepare(void)
{
	(void)stats_get();
}

void smcr_stats_keep_private(void)
{
	pthread_mutex_lock(&stats_lock);
	stats_private_only = true;
	pthread_mutex_unlock(&stats_lock);
}
