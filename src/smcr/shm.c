// SPDX-License-Identifier: MIT
/*
 * Same-host transport: the user-space counterpart of SMC-D loopback-ism.
 *
 * Each side owns one region: a sealed memfd holding a control page and the
 * RMB (ring data) behind it.  The peer maps the region read-write and writes
 * ring data and CDC messages into it; we only ever read it.  So "the peer
 * wrote somewhere" can only mean "somewhere inside our own region", and every
 * value we take from it (cursors) passes the CDC validator first.
 *
 *   +0      struct shm_ctrl: doorbell arm word, CDC mailbox (seqlock)
 *   +4096   ring data, ring_size bytes (16 KiB << n)
 *   ...     PROT_NONE guard page in our address space (not in the file):
 *           a bug that walks off the ring faults instead of reading on.
 *
 * CDC delivery: a one-slot mailbox in the receiver's control page.  Every CDC
 * field is either cumulative (cursors, sticky close flags) or describes the
 * present moment (write blocked, update requested), so the newest CDC
 * supersedes every older one and a slot that is simply overwritten loses
 * nothing; the sender never waits for the receiver to drain a queue.
 *
 * Doorbell: the UNIX socket the rendezvous left connected between the two
 * ends.  The receiver sets `armed` in its control page when it may go to
 * sleep; the sender rings (a one-byte send) only if it swapped `armed` from
 * 1 to 0, so a busy stream pays no system call per CDC (benchmarks.md §2,
 * "Doorbells").  Every send and receive on it says MSG_DONTWAIT: whether a
 * call of ours may block is decided per call, never by a file's O_NONBLOCK,
 * which a peer holding the same open file description could clear (an
 * eventfd shared through SCM_RIGHTS let a peer fill its counter, clear the
 * flag and block our write forever).  The socket is O_NONBLOCK from birth
 * all the same (it is never handed to anyone), for the plain read and write
 * a seccomp filter may leave us instead (confine.h, ring_peer, drain_rings).
 * Nothing but our memfd is ever handed
 * to the peer.  The engine's readiness fd is an epoll instance holding that
 * socket and a private eventfd (our own "still ready" signal, never shared):
 * it turns readable on a ring and also when the peer process dies (hang-up).
 *
 * Who may attach (design §7): the client sends a 128-bit secret Sc inside its
 * CLC Proposal (SMC-Dv2 ISM GID fields), the server answers with its own Ss
 * in the Accept.  Each side presents its secret plus its memfd and eventfd
 * (SCM_RIGHTS) over an abstract UNIX socket, and hands its fds only to a
 * peer it has checked.  Only the two ends of the TCP connection know Sc/Ss.
 * No file is ever created: memfds are anonymous (mode 0600 anyway).  Two
 * orders, because the one wake-up fewer matters for short connections:
 *
 *   knocked (the client offers it, a server that knows it takes it): the
 *   client binds its own rendezvous before the Proposal and names it in a
 *   second ISM GID entry.  The server connects to it, checks with
 *   SO_PEERCRED that its creator is the pid the Proposal announced, leaves
 *   Ss and its fds there, then sends the Accept with DMBE index 1.  The
 *   client takes the knock that carries the Accept's Ss (strangers may have
 *   knocked too: the name is visible in /proc/net/unix), answers on it with
 *   Sc and its fds, and sends the Confirm; the server checks Sc.  Nobody
 *   waits on the UNIX socket: Proposal, Accept, Confirm is the whole chain.
 *
 *   classic (any client): the server binds a rendezvous named after the
 *   token in the Accept (DMB token field) *before* sending it, so the name
 *   cannot be squatted.  The client connects and presents Sc and its fds;
 *   the server checks Sc and SO_PEERCRED's pid against the Proposal, then
 *   answers with Ss and its fds: two more wake-ups.
 *
 * Buffers come from a per-process pool by size class; a new one has its first
 * 64 KiB pre-faulted (a fresh memfd costs ~3 us per 4 KiB page in first-touch
 * faults, benchmarks.md §2), the rest faults in once, as a stream first
 * reaches it.  A mapping cannot be revoked, so a region once handed to a peer
 * stays that peer's until it is destroyed: it goes back to the pool owned by
 * the peer's proven process identity (struct shm_peer below: a pidfd, and a
 * start time that shows the process sent the peer's proof) and is handed to
 * nobody but that same live process again; a region whose peer could not be
 * proven, or that reached two identities, is destroyed.  It is zeroed before
 * reuse, and only once the peer is done with it: at close if the peer closed
 * first, else when its last CDC in our mailbox says closed/abort ("draining"
 * until then).
 */
#include "smcr/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "smcr/confine.h"
#include "smcr/libc.h"
#include "smcr/rendezvous.h"
#include "smcr/share.h"
#include "smcr/stats_abi.h"
#include "smcr/sys.h"
#include "smcr/transport.h"
#include "smcr/wire.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

#define SHM_CTRL_LEN 4096u
#define SHM_GUARD_LEN 4096u
#define SHM_MAGIC 0x534d4352u /* "SMCR" */
#define SHM_CDC_WORDS (SMCR_CDC_MSG_LEN / 4)
#define SHM_CHID 0xFFFFu       /* emulated-ISM CHID, as loopback-ism uses */
#define SHM_MAX_CLASS 15u      /* 512 MiB */
#define SHM_POOL_MIN_PER_CLASS 8u         /* idle regions kept per size class, at least */
#define SHM_POOL_BYTES_PER_CLASS (32u << 20) /* and up to this many bytes of them */
#define SHM_PREFAULT_LEN (64u * 1024)     /* of a new ring, faulted in at creation */
#define SHM_ACCEPT_ATTEMPTS 4  /* strangers that may knock before we give up */
#define SHM_SECRET_LEN SMCR_RV_SECRET_LEN
#define SHM_MAILBOX_TRIES 64
/*
 * Accept's DMBE index (an ISM DMB element number, 0 in the classic order):
 * "I connected to the rendezvous your Proposal named, and my proof is waiting
 * there" (see shm_client_propose).
 */
#define SHM_DMBE_IDX_SERVER_KNOCKED 1
#define SHM_RV_BIND_TRIES 3
/* The owner reads `tcp_tail` and takes the rest of the stream from TCP. */
#define SHM_FEAT_TCP_TAIL 1u

_Static_assert(SMCR_CDC_MSG_LEN % 4 == 0, "CDC mailbox copies 32-bit words");

/* The page the peer writes into; every field here is untrusted input. */
struct shm_ctrl {
	uint32_t magic;     /* set by the owner, informational */
	uint32_t ring_size; /* set by the owner, informational */
	_Atomic uint32_t sleeping; /* owner: blocked in a wait (peer: do not spin) */
	_Atomic uint32_t cpu;      /* owner: the CPU it last ran on, + 1 (0: unknown) */
	_Atomic uint32_t features; /* owner: SHM_FEAT_* it understands (0 in older versions) */
	_Atomic uint32_t tcp_tail; /* peer: 1 = the rest of its stream is on TCP (tcp_tail.c) */
	uint8_t pad0[40];
	_Atomic uint32_t armed; /* owner: 1 = ring me; peer: swaps to 0, then rings */
	uint8_t pad1[60];
	_Atomic uint32_t seq;   /* mailbox seqlock: odd while the peer writes */
	_Atomic uint32_t cdc[SHM_CDC_WORDS];
};
_Static_assert(sizeof(struct shm_ctrl) <= SHM_CTRL_LEN, "control area fits its page");
_Static_assert(offsetof(struct shm_ctrl, armed) == 64, "armed has its own cache line");

struct shm_region {
	struct shm_region *next;
	int fd;
	uint8_t *base;     /* ctrl page + ring; a guard page follows */
	size_t map_len;    /* including the guard page */
	uint32_t ring_size;
	struct shm_peer *owner; /* NULL: never shared; else the one peer that may have it */
	bool draining;     /* the peer may still write: not zeroed yet */
	uint32_t dirty;    /* ring bytes from offset 0 the peer may have written */
};

struct smcr_xconn {
	int timeout_ms;
	uint32_t want_size;
	struct shm_region *own;
	struct shm_ctrl *own_ctrl;
	/* the peer's region, mapped */
	uint8_t *peer_base;
	size_t peer_map_len;
	uint32_t peer_ring_size;
	struct shm_ctrl *peer_ctrl;
	int own_efd; /* private: "still ready" while nothing new came (never shared) */
	int ep_fd;   /* readiness: own_efd + unix_fd */
	int unix_fd; /* connected to the peer for the connection's life; its doorbell */
	int rv_fd;   /* rendezvous listener during the handshake (client or server) */
	int knock_fd; /* server, classic order: a knock whose proof has not come yet */
	int spare_fd; /* server, knocked order: a free slot kept for the client's memfd */
	unsigned knocks; /* ... and how many there were */
	uint8_t own_secret[SHM_SECRET_LEN];
	uint8_t peer_secret[SHM_SECRET_LEN];
	pid_t peer_pid;      /* announced (server) or from SO_PEERCRED (client) */
	struct shm_peer *peer; /* the process proven to have sent the peer's proof */
	int64_t rv_since_ns; /* CLOCK_BOOTTIME before our rendezvous socket existed */
	uint64_t token;      /* the server's token (its rendezvous name in the classic order) */
	uint64_t rv_token;   /* client: our own rendezvous name, offered in the Proposal */
	uint32_t tx_seq;     /* our mailbox writes into the peer's page */
	uint32_t rx_seq;     /* last mailbox seq we consumed */
	uint32_t rx_dirty;   /* our ring: bytes from 0 the peer's cursors covered */
	dev_t peer_dev;      /* the peer's memfd, for the mapping cache */
	ino_t peer_ino;
	bool peer_gone;
	bool signalled;      /* own_efd has a count (we wrote it) */
	/*
	 * Rings unix_fd holds or is about to get: one per swap of `armed` we
	 * saw since the last drain (take_rings).  -1: the drain may have taken
	 * the ring of a swap we had not seen yet.  While it is above 0 the
	 * socket keeps the ready fd readable; at 0 or below only own_efd can.
	 */
	int rings_due;
	bool in_share;       /* allocated from a share arena (follows fork) */
};
_Static_assert(sizeof(struct smcr_xconn) <= SMCR_SHARE_SLOT_SIZE, "fits a share slot");

/* The UEID both ends put in their CLC messages: identifies this transport. */
static const char shm_ueid[SMCR_CLC_EID_LEN + 1] = "SMCR-USERSPACE-SAMEHOST-SHM     ";

/* ---- region pool ------------------------------------------------------------ */

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shm_region *pool[SHM_MAX_CLASS + 1];

/*
 * A peer process, proven (design §7): the
 * process that sent a peer's proof is the one holding `pidfd`.  A pid alone
 * proves nothing: SO_PEERCRED and SCM_CREDENTIALS report the number a
 * process had when it connected or sent, and that number may belong to
 * another process by the time we look.  So we open a pidfd for the number
 * and read that process's start time: if it started before our end of the
 * rendezvous socket existed (so before the proof could be sent) and is still
 * alive after we read it, it held the number all along and is the sender.
 * While its pidfd says it lives, no other process can have its number: a
 * later proof from that number is then from it too.  Under pool_lock.
 */
struct shm_peer {
	struct shm_peer *next;
	pid_t pid;
	uid_t uid;
	int pidfd;
	int64_t started_by_ns; /* CLOCK_BOOTTIME: it had started by then */
	unsigned refs;         /* regions it owns + connections that proved it */
	bool dead;
};

static struct shm_peer *peers;

static int64_t boottime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * When `pid` had started at the latest (/proc/PID/stat field 22, clock
 * ticks since boot, rounded down by the kernel: one tick added), or -1.
 */
static int64_t proc_started_by_ns(pid_t pid)
{
	char path[48], buf[512];
	const char *p;
	long hz = sysconf(_SC_CLK_TCK);
	unsigned long long ticks;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = smcr_libc.open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = smcr_libc.read(fd, buf, sizeof(buf) - 1);
	smcr_sys_close(fd);
	if (n <= 0 || hz <= 0)
		return -1;
	buf[n] = '\0';
	/* After the command name's last ')': state is field 3, starttime 22. */
	p = strrchr(buf, ')');
	for (int field = 2; p && field < 21; field++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p + 1, "%llu", &ticks) != 1 || ticks > (1ull << 40))
		return -1;
	return (int64_t)((ticks + 1) * (1000000000ull / (unsigned long long)hz));
}

/* Still the process we opened? (A pidfd turns readable when it exits.) */
static bool peer_alive(struct shm_peer *p)
{
	struct pollfd pfd = { .fd = p->pidfd, .events = POLLIN };

	if (!p->dead && smcr_libc.poll(&pfd, 1, 0) != 0)
		p->dead = true;
	return !p->dead;
}

static void peer_unref_locked(struct shm_peer *p)
{
	struct shm_peer **pp;

	if (!p || --p->refs > 0)
		return;
	for (pp = &peers; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	smcr_sys_close(p->pidfd);
	free(p);
}

static void peer_unref(struct shm_peer *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&pool_lock);
	peer_unref_locked(p);
	pthread_mutex_unlock(&pool_lock);
}

static struct shm_peer *peer_find_locked(pid_t pid)
{
	for (struct shm_peer *p = peers; p; p = p->next)
		if (p->pid == pid && !p->dead)
			return p;
	return NULL;
}

/* A new record for whatever process has `pid` now (not yet proven to be anyone). */
static struct shm_peer *peer_open(pid_t pid, uid_t uid)
{
	struct shm_peer *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->pid = pid;
	p->uid = uid;
	p->refs = 1;
	p->pidfd = smcr_sys_fd_high((int)syscall(SYS_pidfd_open, pid, 0));
	p->started_by_ns = p->pidfd >= 0 ? proc_started_by_ns(pid) : -1;
	if (p->started_by_ns < 0) {
		smcr_sys_close(p->pidfd);
		free(p);
		return NULL;
	}
	return p;
}

/*
 * The live record for `pid` if we have one (a reference), for a region we
 * hand over before the peer's proof arrives: only its pooled regions may go
 * to the process that has that number now.
 */
static struct shm_peer *peer_known_alive(pid_t pid, uid_t uid)
{
	struct shm_peer *p;

	pthread_mutex_lock(&pool_lock);
	p = peer_find_locked(pid);
	if (p && p->uid == uid)
		p->refs++;
	else
		p = NULL;
	pthread_mutex_unlock(&pool_lock);
	if (p && !peer_alive(p)) {
		peer_unref(p);
		p = NULL;
	}
	return p;
}

static unsigned size_class(uint32_t size)
{
	return smcr_clc_rmbe_compress(size, SHM_MAX_CLASS);
}

/*
 * The process that sent a proof as (pid, uid) at some moment after
 * `since_ns`, if that can be proven (a reference), else NULL.  Costs one
 * poll() for a process we know, a pidfd_open() and a /proc read the first
 * time.
 */
static struct shm_peer *peer_prove(pid_t pid, uid_t uid, int64_t since_ns)
{
	struct shm_peer *p, *known;

	if (pid <= 0)
		return NULL;
	p = peer_known_alive(pid, uid);
	if (p) {
		/* Started before the proof could be sent, alive after: its sender. */
		if (p->started_by_ns <= since_ns)
			return p;
		peer_unref(p);
		return NULL;
	}
	p = peer_open(pid, uid);
	if (!p)
		return NULL;
	if (p->started_by_ns > since_ns || !peer_alive(p)) {
		peer_unref(p);
		return NULL;
	}
	pthread_mutex_lock(&pool_lock);
	/* One record per process: two threads may have proven it at once. */
	known = peer_find_locked(pid);
	if (known && known->started_by_ns == p->started_by_ns && known->uid == uid) {
		known->refs++;
		pthread_mutex_unlock(&pool_lock);
		peer_unref(p);
		return known;
	}
	p->next = peers;
	peers = p;
	pthread_mutex_unlock(&pool_lock);
	return p;
}

/* Map ctrl+ring of `fd` shared, followed by a guard page that is never mapped. */
static uint8_t *map_with_guard(int fd, uint32_t ring_size, size_t *map_len)
{
	size_t data_len = (size_t)SHM_CTRL_LEN + ring_size;
	size_t len = data_len + SHM_GUARD_LEN;
	void *reserve, *p;

	reserve = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (reserve == MAP_FAILED)
		return NULL;
	p = mmap(reserve, data_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
	if (p == MAP_FAILED) {
		munmap(reserve, len);
		return NULL;
	}
	*map_len = len;
	return p;
}

/* pool_lock held if the region has an owner (or in the fork child). */
static void region_free_locked(struct shm_region *r)
{
	if (!r)
		return;
	if (r->base)
		munmap(r->base, r->map_len);
	smcr_sys_close(r->fd);
	peer_unref_locked(r->owner);
	free(r);
}

static void region_free(struct shm_region *r)
{
	pthread_mutex_lock(&pool_lock);
	region_free_locked(r);
	pthread_mutex_unlock(&pool_lock);
}

static struct shm_region *region_create(uint32_t ring_size)
{
	struct shm_region *r = calloc(1, sizeof(*r));
	off_t len = (off_t)SHM_CTRL_LEN + ring_size;

	if (!r)
		return NULL;
	r->ring_size = ring_size;
	r->fd = smcr_sys_memfd("smcr-rmb", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (r->fd < 0)
		goto fail;
	/* The peer must never be able to shrink it under us (SIGBUS), nor we under it. */
	if (fchmod(r->fd, 0600) < 0 || ftruncate(r->fd, len) < 0 ||
	    smcr_libc.fcntl(r->fd, F_ADD_SEALS,
			    F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		goto fail;
	r->base = map_with_guard(r->fd, ring_size, &r->map_len);
	if (!r->base)
		goto fail;
	/*
	 * Pre-fault the control page and the ring's first SHM_PREFAULT_LEN
	 * (first-touch faults cost ~3 us per 4 KiB page here, benchmarks.md
	 * §2): all a short connection writes.  The rest of a large ring faults
	 * in as a stream first reaches it, once per pooled region.
	 */
	(void)madvise(r->base, (size_t)SHM_CTRL_LEN + (ring_size < SHM_PREFAULT_LEN ? ring_size
										: SHM_PREFAULT_LEN),
		      MADV_POPULATE_WRITE);
	return r;
fail:
	smcr_warn("cannot create a %u-byte ring: %s", ring_size, strerror(errno));
	region_free(r);
	return NULL;
}

/*
 * A peer hands the same pooled region to its next connection with us, as a
 * new fd for the same memfd.  Mapping it again (two mmaps, then page faults
 * on every page we write, then munmap) was ~10% of a client's CPU per
 * connection under wrk with Connection: close.  So a mapping outlives its
 * connection here, keyed by the file's identity (st_dev, st_ino: unique while
 * our mapping holds the file), and is taken again only when the peer passes
 * an fd for that very file: no access beyond what the fd itself grants.
 * Bounded; the oldest mapping goes first.
 */
#define PEER_MAP_SLOTS 32u
#define PEER_MAP_MAX_RING (4u << 20)

struct peer_map {
	uint8_t *base; /* NULL: free slot */
	size_t len;
	uint32_t ring_size;
	dev_t dev;
	ino_t ino;
	uint64_t stamp;
};

static struct peer_map peer_maps[PEER_MAP_SLOTS];
static uint64_t peer_map_clock;

static uint8_t *peer_map_get(dev_t dev, ino_t ino, uint32_t ring_size, size_t *len)
{
	uint8_t *base = NULL;

	pthread_mutex_lock(&pool_lock);
	for (unsigned i = 0; i < PEER_MAP_SLOTS; i++) {
		struct peer_map *m = &peer_maps[i];

		if (m->base && m->dev == dev && m->ino == ino && m->ring_size == ring_size) {
			base = m->base;
			*len = m->len;
			m->base = NULL;
			break;
		}
	}
	pthread_mutex_unlock(&pool_lock);
	return base;
}

static void peer_map_put(struct smcr_xconn *xc)
{
	struct peer_map *slot = NULL;
	uint8_t *evict = NULL;
	size_t evict_len = 0;

	if (xc->peer_ring_size > PEER_MAP_MAX_RING || xc->peer_ino == 0) {
		munmap(xc->peer_base, xc->peer_map_len);
		return;
	}
	pthread_mutex_lock(&pool_lock);
	for (unsigned i = 0; i < PEER_MAP_SLOTS; i++) {
		struct peer_map *m = &peer_maps[i];

		if (!m->base) {
			slot = m;
			break;
		}
		if (!slot || m->stamp < slot->stamp)
			slot = m;
	}
	if (slot->base) {
		evict = slot->base;
		evict_len = slot->len;
	}
	*slot = (struct peer_map){ .base = xc->peer_base, .len = xc->peer_map_len,
				   .ring_size = xc->peer_ring_size, .dev = xc->peer_dev,
				   .ino = xc->peer_ino, .stamp = ++peer_map_clock };
	pthread_mutex_unlock(&pool_lock);
	if (evict)
		munmap(evict, evict_len);
}

/* fork child: its connections are its own; pool_lock is held (prepare). */
static void peer_map_forget_all(void)
{
	for (unsigned i = 0; i < PEER_MAP_SLOTS; i++) {
		if (peer_maps[i].base)
			munmap(peer_maps[i].base, peer_maps[i].len);
		peer_maps[i].base = NULL;
	}
}

/*
 * fork: pooled regions are MAP_SHARED, so parent and child would hand the same
 * memory to two different connections.  The child forgets the pool (its own
 * connections get fresh regions); the parent keeps it.
 */
void smcr_shm_fork_prepare(void)
{
	pthread_mutex_lock(&pool_lock);
}

void smcr_shm_fork_parent(void)
{
	pthread_mutex_unlock(&pool_lock);
}

void smcr_shm_fork_child(void)
{
	peer_map_forget_all();
	for (unsigned c = 0; c <= SHM_MAX_CLASS; c++) {
		while (pool[c]) {
			struct shm_region *r = pool[c];

			pool[c] = r->next;
			region_free_locked(r);
		}
	}
	pthread_mutex_unlock(&pool_lock);
}

/*
 * Has the peer that shared this region finished with it?  Its last CDC in our
 * mailbox says closed or abort (a well-behaved peer writes nothing after
 * that), or it never wrote at all.  A peer that lies only delays reuse: the
 * region goes back to that same peer process and nobody else.
 */
static bool region_peer_finished(struct shm_region *r)
{
	struct shm_ctrl *c = (struct shm_ctrl *)(void *)r->base;
	uint32_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
	uint8_t wire[SMCR_CDC_MSG_LEN];
	uint32_t w[SHM_CDC_WORDS];
	struct smcr_cdc_msg m;
	enum smcr_cdc_err err;

	if (seq == 0)
		return true;
	if (seq & 1)
		return false;
	for (unsigned i = 0; i < SHM_CDC_WORDS; i++)
		w[i] = atomic_load_explicit(&c->cdc[i], memory_order_relaxed);
	memcpy(wire, w, sizeof(wire));
	return smcr_cdc_decode(wire, sizeof(wire), &m, &err) == SMCR_WIRE_OK &&
	       (m.conn_flags & (SMCR_CDC_CONN_CLOSED | SMCR_CDC_CONN_ABORT));
}

/*
 * Zero the control page and the part of the ring the peer may have written
 * (design §7: zero before reuse).  A peer writes the ring from offset 0 on,
 * and only up to the producer cursor of its next CDC; until its cursor first
 * wraps, everything past the highest cursor it sent is still zero.  So a
 * short connection costs a few pages of memset, not the whole ring (a
 * 256 KiB memset was ~7% of a client's CPU per connection under wrk with
 * Connection: close).  The region only ever goes back to the same peer, and
 * only after its last CDC said closed: data it wrote past its own cursor
 * could reach nobody but itself.
 */
static void region_zero(struct shm_region *r)
{
	struct shm_ctrl *c = (struct shm_ctrl *)(void *)r->base;
	uint32_t seq = atomic_load_explicit(&c->seq, memory_order_acquire), n = r->dirty;

	if (seq != 0 && !(seq & 1)) {
		/* The last CDC in the mailbox may be newer than what the connection saw. */
		uint8_t wire[SMCR_CDC_MSG_LEN];
		uint32_t w[SHM_CDC_WORDS];

		for (unsigned i = 0; i < SHM_CDC_WORDS; i++)
			w[i] = atomic_load_explicit(&c->cdc[i], memory_order_relaxed);
		memcpy(wire, w, sizeof(wire));
		if (smcr_get_be16(wire + SMCR_CDC_OFF_PROD + 2) != 0)
			n = r->ring_size;
		else if (smcr_get_be32(wire + SMCR_CDC_OFF_PROD + 4) > n)
			n = smcr_get_be32(wire + SMCR_CDC_OFF_PROD + 4);
	} else if (seq & 1) {
		n = r->ring_size; /* caught mid-write: take no chances */
	}
	if (n > r->ring_size)
		n = r->ring_size;
	memset(r->base, 0, (size_t)SHM_CTRL_LEN + n);
	r->dirty = 0;
}

/*
 * A pooled region that was never shared or is owned by `peer` (a live,
 * proven process; NULL: none) and that the peer is done with, else a new
 * one.  Regions of processes found dead on the way are destroyed: their old
 * mappings may live on in any process those handed them to.
 */
static struct shm_region *region_get(uint32_t ring_size, struct shm_peer *peer)
{
	unsigned c = size_class(ring_size);
	struct shm_region **pp, *r = NULL, *dead = NULL;

	pthread_mutex_lock(&pool_lock);
	for (pp = &pool[c]; *pp;) {
		struct shm_region *cand = *pp;

		if (cand->owner && cand->owner->dead) {
			*pp = cand->next;
			cand->next = dead;
			dead = cand;
			continue;
		}
		if ((cand->owner && cand->owner != peer) ||
		    (cand->draining && !region_peer_finished(cand))) {
			pp = &cand->next;
			continue;
		}
		r = cand;
		*pp = r->next;
		break;
	}
	while (dead) {
		struct shm_region *d = dead;

		dead = d->next;
		region_free_locked(d);
	}
	pthread_mutex_unlock(&pool_lock);
	if (r && r->draining) {
		/* Zero before reuse: nothing of the old connection may reach the new one. */
		region_zero(r);
		r->draining = false;
	}
	if (!r)
		r = region_create(smcr_clc_rmbe_size((uint8_t)c));
	if (!r)
		return NULL;
	r->next = NULL;
	return r;
}

/*
 * Idle regions kept per class: enough for the connections a busy process has
 * open at once with several peers (regions are tagged per peer, so each peer
 * process needs its own), bounded in bytes for the large classes.
 */
static unsigned pool_capacity(uint32_t ring_size)
{
	uint32_t by_bytes = SHM_POOL_BYTES_PER_CLASS / ring_size;

	return by_bytes > SHM_POOL_MIN_PER_CLASS ? by_bytes : SHM_POOL_MIN_PER_CLASS;
}

/*
 * Back to the pool, owned by `peer`, the process proven to have sent this
 * connection's peer proof (NULL: not proven).  A region handed to a process
 * we could not prove, or to a second process after another, is destroyed:
 * whoever had it may keep its mapping forever.  `peer_done`: the peer
 * already closed, so zero it now; otherwise it waits ("draining") until its
 * last CDC says the peer is done.  A full pool drops its oldest region, not
 * this one: the newest is the one most likely to fit the next connection
 * (same peer, done draining soonest).
 */
static void region_put(struct shm_region *r, bool peer_done, struct shm_peer *peer)
{
	struct shm_region **pp, *evict = NULL;
	unsigned c, n = 0;

	if (!r)
		return;
	c = size_class(r->ring_size);
	if (smcr_clc_rmbe_size((uint8_t)c) != r->ring_size || !peer ||
	    (r->owner && r->owner != peer)) {
		region_free(r);
		return;
	}
	if (peer_done)
		region_zero(r);
	r->draining = !peer_done;
	pthread_mutex_lock(&pool_lock);
	if (!r->owner) {
		r->owner = peer;
		peer->refs++;
	}
	r->next = pool[c];
	pool[c] = r;
	for (pp = &pool[c]; *pp; pp = &(*pp)->next) {
		if (++n > pool_capacity(r->ring_size)) {
			evict = *pp;
			*pp = NULL; /* the cap holds at every put: one at most */
			break;
		}
	}
	region_free_locked(evict);
	pthread_mutex_unlock(&pool_lock);
}

/* ---- fd plumbing -------------------------------------------------------------- */

static void rv_name(uint64_t token, struct sockaddr_un *sa, socklen_t *len)
{
	int n;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	/* Abstract namespace (leading NUL): no file, gone with the socket. */
	n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "smcr/rv/%016llx",
		     (unsigned long long)token);
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/*
 * Every rendezvous socket of ours asks for its peer's credentials with each
 * message (SCM_CREDENTIALS): the process that sent the proof, not the one
 * that once created a listener (SO_PEERCRED), identifies the peer
 * (peer_prove).  A listener passes the option on to the sockets it accepts.
 */
static int rv_passcred(int fd)
{
	int one = 1;

	return smcr_libc.setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
}

/*
 * A rendezvous listener under a fresh random name (*token): 0 or -errno.  It
 * lives only for the handshake, inside one call of the application's, so it
 * stays in the low fd range rather than paying two more system calls.
 */
static int rv_listen(uint64_t *token, int *out)
{
	int err = -EADDRINUSE;

	for (int i = 0; i < SHM_RV_BIND_TRIES && err == -EADDRINUSE; i++) {
		struct sockaddr_un sa;
		socklen_t salen;
		int fd;

		if (smcr_sys_random(token, sizeof(*token)) < 0)
			return -EIO;
		fd = smcr_libc.socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			return -errno;
		rv_name(*token, &sa, &salen);
		if (rv_passcred(fd) == 0 && smcr_libc.bind(fd, (struct sockaddr *)&sa, salen) == 0 &&
		    smcr_libc.listen(fd, SHM_ACCEPT_ATTEMPTS) == 0) {
			*out = fd;
			return 0;
		}
		err = -errno; /* squatted: draw another name */
		smcr_sys_close(fd);
	}
	return err;
}

/*
 * The fallback reason for a system call that failed with `err`: a process
 * short of fds or memory is MEM (the operator's limit to raise, and what a
 * peer's stats show), anything else INTERR.
 */
static int shortage_reason(int err)
{
	switch (err) {
	case EMFILE:
	case ENFILE:
	case ENOMEM:
	case ENOBUFS:
		return SMCR_CLC_DECL_MEM;
	default:
		return SMCR_CLC_DECL_INTERR;
	}
}

/*
 * Our proof and our memfd, never anything else: the peer gets no file whose
 * open file description (O_NONBLOCK and all) it could change under us.
 * MSG_DONTWAIT: a peer that does not read cannot hold us here.
 */
static int send_proof(int sock, const uint8_t secret[SHM_SECRET_LEN], uint32_t ring_size,
		      int memfd)
{
	struct smcr_rv_proof proof = { .ring_size = ring_size };
	uint8_t wire[SMCR_RV_PROOF_LEN];
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = wire, .iov_len = sizeof(wire) };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
		.msg_controllen = sizeof(u.buf),
	};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	memcpy(proof.secret, secret, SHM_SECRET_LEN);
	smcr_rv_proof_encode(&proof, wire);
	memset(u.buf, 0, sizeof(u.buf));
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &memfd, sizeof(int));
	ssize_t n = smcr_libc.sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);

	if (n < 0)
		return -errno;
	return n == (ssize_t)sizeof(wire) ? 0 : -EPROTO;
}

/*
 * Receive a proof with exactly one fd (the peer's memfd, *memfd) and its
 * sender's credentials (*cred): 0, -ETIMEDOUT, or -EPROTO (fds closed).
 */
static int recv_proof(int sock, int64_t deadline, struct smcr_rv_proof *proof, int *memfd,
		      struct ucred *cred)
{
	union {
		char buf[SMCR_RV_ANC_SPACE];
		struct cmsghdr align;
	} u;
	uint8_t wire[SMCR_RV_PROOF_LEN + 1];
	struct iovec iov = { .iov_base = wire, .iov_len = sizeof(wire) };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
		.msg_controllen = sizeof(u.buf),
	};
	struct smcr_rv_anc anc;
	int rc;
	ssize_t n;

	*memfd = -1;
	rc = smcr_sys_wait_fd(sock, POLLIN, deadline);
	if (rc <= 0)
		return rc == 0 ? -ETIMEDOUT : rc;
	n = smcr_libc.recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n < 0)
		return -errno;
	smcr_rv_anc_parse(u.buf, mh.msg_controllen, &anc);
	if (smcr_rv_proof_decode(wire, (size_t)n, proof) != SMCR_WIRE_OK ||
	    anc.nfds != 1 || anc.extra || !anc.has_cred || (mh.msg_flags & (MSG_CTRUNC | MSG_TRUNC))) {
		for (unsigned i = 0; i < anc.nfds; i++)
			smcr_sys_close(anc.fds[i]);
		return -EPROTO;
	}
	/* Lives only until attach_peer() maps it: no move above the floor. */
	*memfd = anc.fds[0];
	cred->pid = anc.pid;
	cred->uid = anc.uid;
	return 0;
}

/* Constant time: the comparison must not tell a stranger how close it got. */
static bool secret_equal(const uint8_t *a, const uint8_t *b)
{
	uint8_t d = 0;

	for (int i = 0; i < SHM_SECRET_LEN; i++)
		d |= (uint8_t)(a[i] ^ b[i]);
	return d == 0;
}

/* Map the peer's memfd after checking what it is (closed either way). */
static int attach_peer(struct smcr_xconn *xc, int memfd, uint32_t ring_size)
{
	struct stat st;
	int seals;

	if (ring_size < smcr_clc_rmbe_size(0) || ring_size > smcr_clc_rmbe_size(SHM_MAX_CLASS) ||
	    smcr_clc_rmbe_size(size_class(ring_size)) != ring_size)
		goto bad;
	/* Only shmem files take seals: sealed against shrinking, and large enough: no SIGBUS. */
	seals = smcr_libc.fcntl(memfd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK) || fstat(memfd, &st) < 0 ||
	    st.st_size < (off_t)SHM_CTRL_LEN + ring_size)
		goto bad;
	xc->peer_dev = st.st_dev;
	xc->peer_ino = st.st_ino;
	xc->peer_base = peer_map_get(st.st_dev, st.st_ino, ring_size, &xc->peer_map_len);
	/* Not pre-faulted: a short connection touches few of the peer's pages. */
	if (!xc->peer_base)
		xc->peer_base = map_with_guard(memfd, ring_size, &xc->peer_map_len);
	if (!xc->peer_base) {
		int reason = shortage_reason(errno);

		smcr_sys_close(memfd);
		return reason;
	}
	smcr_sys_close(memfd);
	xc->peer_ctrl = (struct shm_ctrl *)(void *)xc->peer_base;
	xc->peer_ring_size = ring_size;
	return 0;
bad:
	smcr_sys_close(memfd);
	return SMCR_CLC_DECL_INTERR;
}

/* Readiness fd: our doorbell and the peer link, in one pollable epoll fd. */
static int make_ready_fd(struct smcr_xconn *xc)
{
	struct epoll_event ev = { .events = EPOLLIN };

	xc->ep_fd = smcr_sys_fd_high(smcr_libc.epoll_create1(EPOLL_CLOEXEC));
	if (xc->ep_fd < 0)
		return -errno;
	ev.data.fd = xc->own_efd;
	if (smcr_libc.epoll_ctl(xc->ep_fd, EPOLL_CTL_ADD, xc->own_efd, &ev) < 0)
		return -errno;
	ev.events = EPOLLIN | EPOLLRDHUP;
	ev.data.fd = xc->unix_fd;
	if (smcr_libc.epoll_ctl(xc->ep_fd, EPOLL_CTL_ADD, xc->unix_fd, &ev) < 0)
		return -errno;
	return 0;
}

/*
 * Our ring, just before its memfd goes to the peer: `peer` is the process
 * it goes to if we know it for sure, else NULL (then never a region another
 * process had).
 */
static int own_region(struct smcr_xconn *xc, struct shm_peer *peer)
{
	if (xc->own)
		return 0;
	xc->own = region_get(xc->want_size, peer);
	if (!xc->own)
		return SMCR_CLC_DECL_MEM;
	xc->own_ctrl = (struct shm_ctrl *)(void *)xc->own->base;
	xc->own_ctrl->magic = SHM_MAGIC;
	xc->own_ctrl->ring_size = xc->own->ring_size;
	atomic_store_explicit(&xc->own_ctrl->tcp_tail, 0, memory_order_relaxed);
	atomic_store_explicit(&xc->own_ctrl->features, SHM_FEAT_TCP_TAIL, memory_order_relaxed);
	/* Armed from the start: `armed == 0` then always means "the peer rang". */
	atomic_store_explicit(&xc->own_ctrl->armed, 1, memory_order_release);
	return 0;
}

/* ---- CLC hooks ------------------------------------------------------------------ */

static void put_secret(const uint8_t s[SHM_SECRET_LEN], uint64_t *hi, uint64_t *lo)
{
	*hi = smcr_get_be64(s);
	*lo = smcr_get_be64(s + 8);
}

static void get_secret(uint8_t s[SHM_SECRET_LEN], uint64_t hi, uint64_t lo)
{
	smcr_put_be64(s, hi);
	smcr_put_be64(s + 8, lo);
}

/*
 * Connection state lives in fork-shared memory (share.h), so that a forked
 * child's copy of the connection is the same connection (design §8): the
 * cursors' companions here (mailbox sequence numbers, doorbell state) must
 * be one for every process that holds it.  Private memory if none is left.
 */
static struct smcr_xconn *xconn_alloc(void)
{
	struct smcr_xconn *xc = smcr_share_alloc(sizeof(*xc));

	if (xc) {
		xc->in_share = true;
		return xc;
	}
	return calloc(1, sizeof(*xc));
}

static void xconn_free(struct smcr_xconn *xc)
{
	if (xc->in_share)
		smcr_share_free(xc);
	else
		free(xc);
}

static bool shm_shared(const struct smcr_xconn *xc)
{
	return xc->in_share;
}

static int shm_create(int tcp_fd, uint32_t size, int timeout_ms, struct smcr_xconn **out)
{
	struct smcr_xconn *xc = xconn_alloc();

	(void)tcp_fd; /* server_attach gets it when it is needed */
	if (!xc)
		return -ENOMEM;
	xc->timeout_ms = timeout_ms;
	xc->want_size = size;
	xc->own_efd = xc->ep_fd = xc->unix_fd = xc->rv_fd = xc->knock_fd = xc->spare_fd = -1;
	xc->own_efd = smcr_sys_eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (xc->own_efd < 0 || smcr_sys_random(xc->own_secret, sizeof(xc->own_secret)) < 0) {
		int err = -errno;

		smcr_shm_ops.destroy(xc, false);
		return err ? err : -EIO;
	}
	/*
	 * The secret's first 8 bytes travel as the Proposal's ISM GID.  Linux's
	 * server (smc_clc_msg_prop_valid) reads the IPv6 prefix count at
	 * iparea_offset, which is 0 when SMC-Dv1/SMC-Rv1 are not offered: the
	 * GID's last byte.  Above 8 it resets the connection instead of
	 * declining, so a kernel SMC server that announced SMC in its SYN-ACK
	 * (RFC 7609 option mode) would reset ours.  That byte stays 0: 120
	 * random bits remain.
	 */
	xc->own_secret[7] = 0;
	*out = xc;
	return 0;
}

static void fill_common(struct smcr_clc_msg *m, uint8_t type)
{
	m->hdr.type = type;
	m->hdr.version = SMCR_CLC_V2;
}

static int shm_client_propose(struct smcr_xconn *xc, struct smcr_clc_msg *prop)
{
	struct smcr_clc_proposal *p = &prop->proposal;
	uint64_t hi, lo;

	fill_common(prop, SMCR_CLC_PROPOSAL);
	prop->hdr.typev1 = SMCR_CLC_PATH_NONE;
	prop->hdr.typev2 = SMCR_CLC_PATH_D;
	/* Peer ID: our pid (checked against SO_PEERCRED), then random instance bytes. */
	smcr_put_be32(p->peer_id, (uint32_t)getpid());
	memcpy(p->peer_id + 4, xc->own_secret + 12, 4);
	put_secret(xc->own_secret, &hi, &lo);
	p->smcd_area = true;
	p->ism_gid = hi;
	p->ism_chid = SHM_CHID;
	p->release = 1;
	p->eid_cnt = 1;
	memcpy(p->eid[0], shm_ueid, SMCR_CLC_EID_LEN);
	p->ism_gid_cnt = 1;
	p->ism_gids[0].gid = lo;
	p->ism_gids[0].chid = SHM_CHID;
	/*
	 * Our own rendezvous, named in a second GID entry: a server that knows
	 * this order knocks on it and leaves its proof there before it sends the
	 * Accept, and ours follows just before the Confirm.  That saves the two
	 * wake-ups of the classic order (we knock, the server answers), a good
	 * part of a short connection's setup.  Without it (bind failed, older
	 * server) the classic order still works.
	 */
	xc->rv_since_ns = boottime_ns();
	if (rv_listen(&xc->rv_token, &xc->rv_fd) == 0) {
		p->ism_gid_cnt = 2;
		p->ism_gids[1].gid = xc->rv_token;
		p->ism_gids[1].chid = SHM_CHID;
	}
	return 0;
}

static bool offers_rendezvous(const struct smcr_clc_proposal *p)
{
	return p->ism_gid_cnt >= 2 && p->ism_gids[1].chid == SHM_CHID;
}

bool smcr_shm_offer_is_ours(const struct smcr_clc_msg *prop)
{
	const struct smcr_clc_proposal *p = &prop->proposal;

	return prop->hdr.version >= SMCR_CLC_V2 &&
	       (prop->hdr.typev2 == SMCR_CLC_PATH_D || prop->hdr.typev2 == SMCR_CLC_PATH_BOTH) &&
	       p->eid_cnt >= 1 && memcmp(p->eid[0], shm_ueid, SMCR_CLC_EID_LEN) == 0 &&
	       p->ism_chid == SHM_CHID && p->ism_gid_cnt >= 1 &&
	       p->ism_gids[0].chid == SHM_CHID;
}

/*
 * Accept and Confirm carry the same SMC-Dv2 fields about the sender: its
 * secret in the ISM GID fields, the connection's token, its ring's size class.
 */
static void fill_own_dmb(const struct smcr_xconn *xc, struct smcr_clc_msg *m, uint8_t type)
{
	struct smcr_clc_accept *a = &m->accept;
	uint64_t hi, lo;

	fill_common(m, type);
	m->hdr.typev1 = SMCR_CLC_PATH_D;
	put_secret(xc->own_secret, &hi, &lo);
	a->ism_gid = hi;
	a->gid_ext = lo;
	a->ism_chid = SHM_CHID;
	a->dmb_token = xc->token;
	a->dmbe_idx = 0;
	/* Our ring may not exist yet: it is taken only when we know who gets it. */
	a->dmbe_size = (uint8_t)size_class(xc->want_size);
	memcpy(a->eid, shm_ueid, SMCR_CLC_EID_LEN);
}

/*
 * In the knocked order the client commits to SMC as soon as it has our proof:
 * it sends its own and then its Confirm, and waits for nothing more.  So
 * nothing we still need after our proof goes out may fail for want of a
 * resource: the readiness fd is made now, and a free fd slot is kept for
 * the memfd the client's proof carries (with none free, the kernel drops it
 * from the message and the connection would be lost, not fall back).  Near
 * RLIMIT_NOFILE this turns a lost connection into a plain TCP one.
 */
static int knocked_ready(struct smcr_xconn *xc, int sock)
{
	xc->unix_fd = sock;
	if (make_ready_fd(xc) < 0)
		return -1;
	xc->spare_fd = smcr_sys_fd_high(smcr_libc.fcntl(xc->own_efd, F_DUPFD_CLOEXEC, 0));
	return xc->spare_fd < 0 ? -1 : 0;
}

/* Undoes knocked_ready(): the socket stays the caller's. */
static void knocked_unready(struct smcr_xconn *xc)
{
	smcr_sys_close(xc->spare_fd);
	smcr_sys_close(xc->ep_fd);
	xc->spare_fd = xc->ep_fd = xc->unix_fd = -1;
}

/*
 * Knock on the rendezvous the Proposal named and leave our proof and memfd
 * there: 0, or -1 (then the classic order).  They go only to the proposer:
 * the listener's creator must be the pid the Proposal announced (a name
 * squatted by another process fails that), and the client uses them only
 * after it checked our secret against the Accept.  Non-blocking connect: a
 * backlog a stranger filled must not stall us.
 *
 * The client's own proof comes later on this socket; until then we know
 * only a pid that may have changed hands since the listener was made.  So
 * a ring that was shared before goes out here only if the process we
 * proved under that pid still lives (then nobody else can have it), and
 * the ring is kept afterwards only if the client's proof shows that same
 * process (region_put).
 */
static int server_knock(struct smcr_xconn *xc, uint64_t name)
{
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	struct sockaddr_un sa;
	socklen_t salen;
	struct shm_peer *known;
	int sock, rc;

	xc->rv_since_ns = boottime_ns();
	sock = smcr_sys_fd_high(
		smcr_libc.socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
	if (sock < 0)
		return -1;
	rv_name(name, &sa, &salen);
	if (rv_passcred(sock) < 0 || smcr_libc.connect(sock, (struct sockaddr *)&sa, salen) < 0 ||
	    smcr_libc.getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0)
		goto classic;
	if (cred.pid != xc->peer_pid) {
		smcr_warn("rendezvous: offered by pid %d, not the proposer %d", (int)cred.pid,
			  (int)xc->peer_pid);
		goto classic;
	}
	known = peer_known_alive(cred.pid, cred.uid);
	rc = own_region(xc, known);
	peer_unref(known);
	if (rc || knocked_ready(xc, sock) < 0 ||
	    send_proof(sock, xc->own_secret, xc->own->ring_size, xc->own->fd) < 0)
		goto classic;
	return 0;
classic:
	knocked_unready(xc);
	smcr_sys_close(sock);
	return -1;
}

static int shm_server_accept(struct smcr_xconn *xc, const struct smcr_clc_msg *prop,
			     struct smcr_clc_msg *acc)
{
	const struct smcr_clc_proposal *p = &prop->proposal;
	int rc;

	if (!smcr_shm_offer_is_ours(prop))
		return SMCR_CLC_DECL_NOSMCD2DEV;
	get_secret(xc->peer_secret, p->ism_gid, p->ism_gids[0].gid);
	xc->peer_pid = (pid_t)smcr_get_be32(p->peer_id);
	if (xc->peer_pid <= 0)
		return SMCR_CLC_DECL_CNFERR;
	if (offers_rendezvous(p) && smcr_sys_random(&xc->token, sizeof(xc->token)) == 0 &&
	    server_knock(xc, p->ism_gids[1].gid) == 0) {
		fill_own_dmb(xc, acc, SMCR_CLC_ACCEPT);
		acc->accept.dmbe_idx = SHM_DMBE_IDX_SERVER_KNOCKED;
		return 0;
	}
	/* Classic order: our rendezvous, named by the token; the client knocks. */
	xc->rv_since_ns = boottime_ns();
	rc = rv_listen(&xc->token, &xc->rv_fd);
	if (rc < 0)
		return shortage_reason(-rc);
	fill_own_dmb(xc, acc, SMCR_CLC_ACCEPT);
	return 0;
}

static bool accept_is_ours(const struct smcr_clc_msg *m)
{
	return m->hdr.version >= SMCR_CLC_V2 && m->hdr.typev1 == SMCR_CLC_PATH_D &&
	       m->accept.ism_chid == SHM_CHID &&
	       memcmp(m->accept.eid, shm_ueid, SMCR_CLC_EID_LEN) == 0 &&
	       m->accept.dmbe_size <= SHM_MAX_CLASS;
}

/*
 * The peer's proof on `sock`: its secret must be the one the CLC exchange
 * gave us and its ring `size` (0: any size); then its ring is mapped and
 * its sender proven if it can be (xc->peer, for the pool).  0, -ETIMEDOUT or
 * -EPROTO (nothing usable came), or a decline reason.
 */
static int take_proof(struct smcr_xconn *xc, int sock, int64_t deadline, uint32_t size)
{
	struct smcr_rv_proof proof;
	struct ucred cred = { 0 };
	int memfd, rc = recv_proof(sock, deadline, &proof, &memfd, &cred);

	if (rc < 0)
		return rc;
	if (!secret_equal(proof.secret, xc->peer_secret) || (size && proof.ring_size != size)) {
		smcr_sys_close(memfd);
		smcr_warn("rendezvous: wrong secret from pid %d", (int)cred.pid);
		return SMCR_CLC_DECL_CNFERR;
	}
	rc = attach_peer(xc, memfd, proof.ring_size);
	if (rc)
		return rc;
	xc->peer = peer_prove(cred.pid, cred.uid, xc->rv_since_ns);
	return 0;
}

/* Check the server's proof (its secret from the Accept, the ring it named) and map its ring. */
static int client_take_proof(struct smcr_xconn *xc, int sock, int64_t deadline, uint32_t size)
{
	int rc = take_proof(xc, sock, deadline, size);

	if (rc < 0)
		return rc == -ETIMEDOUT ? SMCR_CLC_DECL_TIMEOUT_AL : SMCR_CLC_DECL_PEERDECL;
	return rc;
}

/* Our ring (see own_region for `to`), and our proof with its memfd on unix_fd. */
static int client_give_proof(struct smcr_xconn *xc, struct shm_peer *to)
{
	int rc = own_region(xc, to);

	if (rc)
		return rc;
	rc = send_proof(xc->unix_fd, xc->own_secret, xc->own->ring_size, xc->own->fd);
	return rc < 0 ? shortage_reason(-rc) : 0;
}

/*
 * Classic order: knock on the server's rendezvous, prove ourselves, take its
 * answer.  Never blocks on the server: a rendezvous that does not take our
 * knock at once (its backlog full: it does not accept) is given up, and its
 * answer is awaited only until the CLC wait bound; either way TCP it is
 * (TIMEOUT_AL in the stats).  Our ring goes out before the server's proof
 * comes, as in server_knock: one that was shared before only to the process
 * we proved under the listener's pid, if it still lives.
 */
static int client_knock(struct smcr_xconn *xc, uint64_t name, uint32_t size)
{
	int64_t deadline = smcr_sys_deadline(xc->timeout_ms);
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	struct sockaddr_un sa;
	socklen_t salen;
	struct shm_peer *known;
	int rc;

	xc->rv_since_ns = boottime_ns();
	xc->unix_fd = smcr_sys_fd_high(
		smcr_libc.socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
	if (xc->unix_fd < 0 || rv_passcred(xc->unix_fd) < 0)
		return shortage_reason(errno);
	rv_name(name, &sa, &salen);
	if (smcr_libc.connect(xc->unix_fd, (struct sockaddr *)&sa, salen) < 0) {
		if (errno == EAGAIN) {
			smcr_warn("rendezvous: the server's does not accept: TCP");
			return SMCR_CLC_DECL_TIMEOUT_AL;
		}
		return SMCR_CLC_DECL_NOSMCD2DEV;
	}
	if (smcr_libc.getsockopt(xc->unix_fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0)
		return SMCR_CLC_DECL_INTERR;
	xc->peer_pid = cred.pid;
	known = peer_known_alive(cred.pid, cred.uid);
	rc = client_give_proof(xc, known);
	peer_unref(known);
	if (rc)
		return rc;
	/* The server answers only once it has committed to this connection. */
	return client_take_proof(xc, xc->unix_fd, deadline, size);
}

/*
 * The server knocked on our rendezvous before it sent the Accept, so its
 * proof is queued there already (nothing to wait for).  A stranger may have
 * knocked too (the name is visible in /proc/net/unix): each knock must carry
 * the server's secret; only then do our proof and fds go back on it.
 */
static int client_take_knock(struct smcr_xconn *xc, uint32_t size)
{
	int rc = SMCR_CLC_DECL_CNFERR;

	for (int attempt = 0; xc->rv_fd >= 0 && attempt < SHM_ACCEPT_ATTEMPTS; attempt++) {
		struct ucred cred;
		socklen_t clen = sizeof(cred);
		int sock = smcr_libc.accept4(xc->rv_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (sock < 0)
			break; /* nobody (else) knocked: the Accept was wrong */
		sock = smcr_sys_fd_high(sock);
		if (sock < 0 ||
		    smcr_libc.getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0) {
			smcr_sys_close(sock);
			continue;
		}
		rc = client_take_proof(xc, sock, smcr_now_ms(), size);
		if (rc == 0) {
			xc->unix_fd = sock;
			xc->peer_pid = cred.pid;
			break;
		}
		smcr_sys_close(sock);
		rc = SMCR_CLC_DECL_CNFERR;
	}
	if (rc)
		return rc;
	/* The server's proof came first: our ring goes to the process it proved. */
	return client_give_proof(xc, xc->peer);
}

static int shm_client_attach(struct smcr_xconn *xc, const struct smcr_clc_msg *acc,
			     struct smcr_clc_msg *conf, uint32_t *peer_ring_size)
{
	uint32_t size;
	int rc;

	if (!accept_is_ours(acc))
		return SMCR_CLC_DECL_MODEUNSUPP;
	get_secret(xc->peer_secret, acc->accept.ism_gid, acc->accept.gid_ext);
	xc->token = acc->accept.dmb_token;
	size = smcr_clc_rmbe_size(acc->accept.dmbe_size);
	if (acc->accept.dmbe_idx == SHM_DMBE_IDX_SERVER_KNOCKED)
		rc = client_take_knock(xc, size);
	else
		rc = client_knock(xc, acc->accept.dmb_token, size);
	/* Our rendezvous is needed no longer (or never was): nobody else may knock. */
	smcr_sys_close(xc->rv_fd);
	xc->rv_fd = -1;
	if (rc)
		return rc;
	rc = make_ready_fd(xc);
	if (rc)
		return shortage_reason(-rc);

	fill_own_dmb(xc, conf, SMCR_CLC_CONFIRM);
	*peer_ring_size = size;
	return 0;
}

/* One knock on the rendezvous socket: 0 attached, > 0 stranger or bad proof. */
static int server_try_one(struct smcr_xconn *xc, int sock, int64_t deadline)
{
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	int rc;

	if (smcr_libc.getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0 ||
	    cred.pid != xc->peer_pid) {
		smcr_warn("rendezvous: pid %d is not the proposer %d", (int)cred.pid,
			  (int)xc->peer_pid);
		return SMCR_CLC_DECL_CNFERR;
	}
	rc = take_proof(xc, sock, deadline, 0);
	if (rc)
		return rc < 0 ? SMCR_CLC_DECL_CNFERR : rc;
	/* Everything that can fail comes before the answer: the answer commits us. */
	xc->unix_fd = sock;
	rc = own_region(xc, xc->peer);
	if (!rc)
		rc = make_ready_fd(xc);
	if (!rc)
		rc = send_proof(sock, xc->own_secret, xc->own->ring_size, xc->own->fd);
	if (rc) {
		xc->unix_fd = -1;
		return rc > 0 ? rc : shortage_reason(-rc);
	}
	return 0;
}

/*
 * Nothing here waits: the engine calls again when the socket we wait on
 * (shm_server_wait_fd) or the client's TCP stream turns readable, and
 * gives up at its own deadline.
 */

/* A proof queued on `sock` now?  1 yes, 0 not yet, -1 the other end hung up without one. */
static int proof_queued(int sock)
{
	struct pollfd p = { .fd = sock, .events = POLLIN };

	if (smcr_libc.poll(&p, 1, 0) <= 0)
		return 0;
	return (p.revents & POLLIN) ? 1 : -1;
}

/*
 * We knocked (server_knock): the client's proof comes back on that socket,
 * sent just before its Confirm, so it is there by the time the Confirm is.
 */
static int server_take_proof(struct smcr_xconn *xc)
{
	int rc = proof_queued(xc->unix_fd);

	if (rc == 0)
		return -EAGAIN;
	if (rc < 0) /* it hung up: declined, most likely (its Decline follows) */
		return SMCR_CLC_DECL_PEERDECL;
	/* The slot knocked_ready() kept is for the memfd that comes now. */
	smcr_sys_close(xc->spare_fd);
	xc->spare_fd = -1;
	rc = take_proof(xc, xc->unix_fd, smcr_now_ms(), 0);
	return rc < 0 ? SMCR_CLC_DECL_CNFERR : rc;
}

/*
 * Classic order: the client knocks on our rendezvous and presents its proof
 * there.  A knock is taken as soon as it comes (strangers may knock too: up
 * to SHM_ACCEPT_ATTEMPTS of them), its proof whenever it follows.
 */
static int server_take_knock(struct smcr_xconn *xc)
{
	int rc;

	while (xc->knock_fd < 0) {
		int sock;

		if (xc->knocks >= SHM_ACCEPT_ATTEMPTS)
			return SMCR_CLC_DECL_CNFERR;
		sock = smcr_libc.accept4(xc->rv_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (sock < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR
				       ? -EAGAIN : shortage_reason(errno);
		xc->knocks++;
		xc->knock_fd = smcr_sys_fd_high(sock);
	}
	rc = proof_queued(xc->knock_fd);
	if (rc == 0)
		return -EAGAIN;
	rc = rc < 0 ? SMCR_CLC_DECL_CNFERR : server_try_one(xc, xc->knock_fd, smcr_now_ms());
	if (rc == 0) {
		xc->knock_fd = -1; /* unix_fd now */
		return 0;
	}
	smcr_sys_close(xc->knock_fd);
	xc->knock_fd = -1;
	if (xc->peer_base)
		return rc; /* attached but could not answer: give up */
	return -EAGAIN; /* a stranger's: wait for the next knock */
}

static int shm_server_attach(struct smcr_xconn *xc, int tcp_fd, uint32_t *peer_ring_size)
{
	int rc;

	(void)tcp_fd; /* the engine watches it */
	rc = xc->rv_fd < 0 ? server_take_proof(xc) : server_take_knock(xc);
	if (rc == -EAGAIN)
		return rc;
	/* The name is needed no longer: nobody else may knock. */
	smcr_sys_close(xc->rv_fd);
	xc->rv_fd = -1;
	if (rc)
		return rc;
	*peer_ring_size = xc->peer_ring_size;
	return 0;
}

static int shm_server_wait_fd(const struct smcr_xconn *xc)
{
	if (xc->rv_fd < 0)
		return xc->unix_fd;
	return xc->knock_fd >= 0 ? xc->knock_fd : xc->rv_fd;
}

static int shm_server_confirm(struct smcr_xconn *xc, const struct smcr_clc_msg *conf)
{
	uint8_t s[SHM_SECRET_LEN];

	if (!accept_is_ours(conf))
		return SMCR_CLC_DECL_MODEUNSUPP;
	get_secret(s, conf->accept.ism_gid, conf->accept.gid_ext);
	if (!secret_equal(s, xc->peer_secret) ||
	    smcr_clc_rmbe_size(conf->accept.dmbe_size) != xc->peer_ring_size)
		return SMCR_CLC_DECL_CNFERR;
	return 0;
}

/* ---- data path ------------------------------------------------------------------- */

static void shm_ring(struct smcr_xconn *xc, uint8_t **ring, uint32_t *size)
{
	*ring = xc->own->base + SHM_CTRL_LEN;
	*size = xc->own->ring_size;
}

/* One token for both directions, from the rendezvous token both ends know. */
static void shm_tokens(const struct smcr_xconn *xc, uint32_t *local, uint32_t *peer)
{
	uint32_t t = (uint32_t)(xc->token ^ (xc->token >> 32)) | 1u;

	*local = t;
	*peer = t;
}

static int shm_write_peer(struct smcr_xconn *xc, uint32_t offset, const void *src, uint32_t len)
{
	if (offset > xc->peer_ring_size || len > xc->peer_ring_size - offset)
		return -EINVAL;
	memcpy(xc->peer_base + SHM_CTRL_LEN + offset, src, len);
	return 0;
}

static int shm_read_peer(const struct smcr_xconn *xc, uint32_t offset, void *dst, uint32_t len)
{
	if (offset > xc->peer_ring_size || len > xc->peer_ring_size - offset)
		return -EINVAL;
	memcpy(dst, xc->peer_base + SHM_CTRL_LEN + offset, len);
	return 0;
}

/* Our own "still ready" signal: an eventfd nobody else holds. */
static void signal_self(struct smcr_xconn *xc)
{
	uint64_t one = 1;

	(void)!smcr_libc.write(xc->own_efd, &one, sizeof(one));
}

/*
 * Wake the peer: one byte on the rendezvous socket.  Blocking is decided
 * here, per call: EAGAIN means its queue is full, so it has rings to wake
 * it already.
 */
static void ring_peer(struct smcr_xconn *xc)
{
	static const char bell = 0;
	struct pollfd p = { .fd = xc->unix_fd, .events = POLLOUT };

	if (smcr_call_allowed(SMCR_CALL_SEND)) {
		(void)!smcr_libc.send(xc->unix_fd, &bell, sizeof(bell),
				      MSG_DONTWAIT | MSG_NOSIGNAL);
		return;
	}
	/*
	 * A seccomp filter that denies sendto (confine.h): a plain write, which
	 * cannot block (the socket is O_NONBLOCK from birth) but, without
	 * MSG_NOSIGNAL, would raise SIGPIPE on a peer gone: so only when poll
	 * sees the socket writable and not hung up.  A peer that dies between
	 * the two calls leaves that window open, for a process that does not
	 * ignore SIGPIPE: as the next write to its TCP socket would.
	 */
	if (smcr_libc.poll(&p, 1, 0) == 1 && p.revents == POLLOUT)
		(void)!smcr_libc.write(xc->unix_fd, &bell, sizeof(bell));
}

#define SHM_RINGS_PER_DRAIN 8

/*
 * Take the peer's rings off the socket, several in one call: a ring per
 * re-arm may have piled up while we stayed ready.  What a hostile peer
 * sends beyond that only wakes us again (then shm_peer_gone sees it).
 * Returns how many were taken (0 if none were there), -1 if the peer hung up.
 */
/*
 * drain_rings() under a seccomp filter that denies recvmmsg (confine.h): a
 * read per ring; the socket is O_NONBLOCK from birth, so none blocks.
 */
static int drain_rings_by_read(struct smcr_xconn *xc)
{
	for (int i = 0; i < SHM_RINGS_PER_DRAIN; i++) {
		char buf[8];
		ssize_t n = smcr_libc.read(xc->unix_fd, buf, sizeof(buf));

		if (n == 0)
			return -1;
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? i : -1;
	}
	return SHM_RINGS_PER_DRAIN;
}

static int drain_rings(struct smcr_xconn *xc)
{
	char buf[SHM_RINGS_PER_DRAIN][8];
	struct mmsghdr mm[SHM_RINGS_PER_DRAIN];
	struct iovec iov[SHM_RINGS_PER_DRAIN];
	int n;

	if (!smcr_call_allowed(SMCR_CALL_RECVMMSG))
		return drain_rings_by_read(xc);
	memset(mm, 0, sizeof(mm));
	for (int i = 0; i < SHM_RINGS_PER_DRAIN; i++) {
		iov[i] = (struct iovec){ .iov_base = buf[i], .iov_len = sizeof(buf[i]) };
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
	}
	/* (The engine's own socket: no wrapper to bypass, so the system call itself.) */
	n = (int)syscall(SYS_recvmmsg, xc->unix_fd, mm, SHM_RINGS_PER_DRAIN, MSG_DONTWAIT, NULL);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	/* A ring is one byte: an empty message is the end of the stream. */
	for (int i = 0; i < n; i++)
		if (mm[i].msg_len == 0)
			return -1;
	return n;
}

#define SHM_DRAIN_BATCHES 4

/*
 * Take what the socket holds; then nothing is due but the ring of a swap we
 * have not seen yet (`armed` still 0).  That ring may be among those just
 * taken or still to come, and counting it as due when it was taken would
 * leave the ready fd silent while the connection is ready (a lost wake-up):
 * so it counts as taken (-1: its swap, once seen, brings the count to 0).
 * If it comes after all, it costs a spurious wake-up, never a lost one.
 * Only a peer that rings without swapping can keep the socket from
 * emptying; it keeps our ready fd readable itself, and the count says to
 * drain again.
 */
static void take_rings(struct smcr_xconn *xc)
{
	for (int batch = 0; batch < SHM_DRAIN_BATCHES; batch++) {
		int n = drain_rings(xc);

		if (n < 0) {
			xc->peer_gone = true;
			xc->rings_due = 0;
			return;
		}
		if (n < SHM_RINGS_PER_DRAIN) {
			xc->rings_due =
				atomic_load_explicit(&xc->own_ctrl->armed, memory_order_seq_cst) == 0
					? -1
					: 0;
			return;
		}
	}
	xc->rings_due = 1;
}

/* Our CPU, + 1, for the peer's spin decision (rseq makes sched_getcpu() cheap). */
static void publish_cpu(struct smcr_xconn *xc)
{
	int cpu = sched_getcpu();

	atomic_store_explicit(&xc->own_ctrl->cpu, cpu >= 0 ? (uint32_t)cpu + 1 : 0,
			      memory_order_relaxed);
}

static int shm_send_ctrl(struct smcr_xconn *xc, const uint8_t msg[SMCR_CDC_MSG_LEN])
{
	struct shm_ctrl *pc = xc->peer_ctrl;
	uint32_t w[SHM_CDC_WORDS];

	memcpy(w, msg, sizeof(w));
	/* seqlock writer: odd, words, even (release orders the words before it). */
	xc->tx_seq += 2;
	atomic_store_explicit(&pc->seq, xc->tx_seq - 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	for (unsigned i = 0; i < SHM_CDC_WORDS; i++)
		atomic_store_explicit(&pc->cdc[i], w[i], memory_order_relaxed);
	atomic_store_explicit(&pc->seq, xc->tx_seq, memory_order_release);
	publish_cpu(xc);
	/* Pairs with shm_settle(): ring only if the peer said it may sleep. */
	if (atomic_exchange_explicit(&pc->armed, 0, memory_order_seq_cst))
		ring_peer(xc);
	return 0;
}

/*
 * Has the peer hung up?  A ring not counted in `rings_due` (the peer sent
 * without swapping `armed`, or we have not looked at `armed` yet) makes one
 * due, so the next settle takes it off and it cannot keep our ready fd
 * readable for ever; a waiter that relies on it is not robbed of it here (a
 * drain here would take the ring of a message nobody has looked at).  Seen
 * later, that swap counts its ring a second time: the socket is not empty
 * until the next drain, which counts what is really there.
 */
static bool shm_peer_gone(struct smcr_xconn *xc)
{
	struct pollfd p = { .fd = xc->unix_fd, .events = POLLIN | POLLRDHUP };

	if (xc->peer_gone)
		return true;
	if (smcr_libc.poll(&p, 1, 0) > 0) {
		if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))
			xc->peer_gone = true;
		else if ((p.revents & POLLIN) && xc->rings_due < 1)
			xc->rings_due = 1;
	}
	return xc->peer_gone;
}

/* How far into our ring the peer's producer cursor has ever reached (region_zero). */
static void note_dirty(struct smcr_xconn *xc, const uint8_t msg[SMCR_CDC_MSG_LEN])
{
	uint32_t count = smcr_get_be32(msg + SMCR_CDC_OFF_PROD + 4);

	if (smcr_get_be16(msg + SMCR_CDC_OFF_PROD + 2) != 0 || count > xc->own->ring_size)
		xc->rx_dirty = xc->own->ring_size;
	else if (count > xc->rx_dirty)
		xc->rx_dirty = count;
}

static int shm_recv_ctrl(struct smcr_xconn *xc, uint8_t msg[SMCR_CDC_MSG_LEN])
{
	struct shm_ctrl *oc = xc->own_ctrl;
	uint32_t w[SHM_CDC_WORDS];

	for (int tries = 0; tries < SHM_MAILBOX_TRIES; tries++) {
		uint32_t s1 = atomic_load_explicit(&oc->seq, memory_order_acquire), s2;

		if (s1 == xc->rx_seq)
			return xc->peer_gone ? -ECONNRESET : 0;
		if (s1 & 1)
			continue; /* the peer is writing right now */
		for (unsigned i = 0; i < SHM_CDC_WORDS; i++)
			w[i] = atomic_load_explicit(&oc->cdc[i], memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		s2 = atomic_load_explicit(&oc->seq, memory_order_relaxed);
		if (s1 != s2)
			continue;
		__atomic_store_n(&xc->rx_seq, s1, __ATOMIC_RELAXED);
		memcpy(msg, w, sizeof(w));
		note_dirty(xc, msg);
		return 1;
	}
	/* Mid-write for long: the writer rings after it finishes (we are armed). */
	return 0;
}

static int shm_ready_fd(const struct smcr_xconn *xc)
{
	return xc->ep_fd;
}

/*
 * Doorbell state: `own_efd` has a count if we signalled it (`signalled`),
 * the socket holds `rings_due` rings.  Draining costs a system call per
 * source, signalling one; each happens only when the wanted state changes.
 */
static bool rearm(struct smcr_xconn *xc)
{
	_Atomic uint32_t *armed = &xc->own_ctrl->armed;

	if (atomic_load_explicit(armed, memory_order_acquire) != 0)
		return false;
	/* The peer rang, or is about to (it swaps first, then sends). */
	xc->rings_due++;
	atomic_store_explicit(armed, 1, memory_order_seq_cst);
	return true; /* a message may have beaten the store */
}

static bool shm_settle(struct smcr_xconn *xc, bool ready)
{
	bool look_again = rearm(xc);
	uint64_t v;

	/*
	 * Ready for long (a writer, or settle_lazy() calls) while the peer
	 * keeps ringing: take them now and then, one system call for a batch,
	 * before its socket fills and every ring of its costs a failed send.
	 */
	if (ready && xc->rings_due >= SHM_RINGS_PER_DRAIN) {
		take_rings(xc);
		look_again = true;
	}
	if (ready) {
		if (!xc->signalled && xc->rings_due <= 0) {
			signal_self(xc);
			xc->signalled = true;
		}
		return look_again;
	}
	if (xc->rings_due > 0) {
		take_rings(xc);
		look_again = true; /* the drain may have eaten a ring that just came */
	}
	if (xc->signalled) {
		(void)!smcr_libc.read(xc->own_efd, &v, sizeof(v));
		xc->signalled = false;
		look_again = true;
	}
	return look_again;
}

static bool shm_settle_lazy(struct smcr_xconn *xc)
{
	bool look_again = rearm(xc);

	if (xc->rings_due >= SHM_RINGS_PER_DRAIN) {
		take_rings(xc);
		look_again = true;
	}
	return look_again;
}

/* ---- the rest of the stream on TCP (tcp_tail.c) ---- */

/*
 * The TCP socket joins the readiness fd: its data and hang-up wake our
 * waiters.  The peer link leaves it: once either side is on TCP, the peer's
 * last rings and its hang-up are news for nobody (and a hang-up would keep
 * the fd readable for ever).
 */
static int shm_watch_tcp(struct smcr_xconn *xc, int tcp_fd, bool out)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | (out ? EPOLLOUT : 0) };

	(void)smcr_libc.epoll_ctl(xc->ep_fd, EPOLL_CTL_DEL, xc->unix_fd, &ev);
	ev.data.fd = tcp_fd;
	if (smcr_libc.epoll_ctl(xc->ep_fd, EPOLL_CTL_MOD, tcp_fd, &ev) == 0)
		return 0;
	if (errno != ENOENT)
		return -errno;
	return smcr_libc.epoll_ctl(xc->ep_fd, EPOLL_CTL_ADD, tcp_fd, &ev) < 0 ? -errno : 0;
}

/*
 * We go on over TCP: the peer is told after our last CDC (it takes that
 * first, so it knows our final cursors), and woken whether or not it is
 * armed: the flag is news its next wake-up must see.
 */
static int shm_continue_on_tcp(struct smcr_xconn *xc, int tcp_fd)
{
	int rc;

	if (!(atomic_load_explicit(&xc->peer_ctrl->features, memory_order_relaxed) &
	      SHM_FEAT_TCP_TAIL))
		return -ENOTSUP;
	/*
	 * Our fds first: a forked child may have closed them (a mass close
	 * before exec), and then it cannot wake the peer either: the caller
	 * resets the connection instead of leaving the peer asleep on a flag.
	 */
	rc = shm_watch_tcp(xc, tcp_fd, false);
	if (rc < 0)
		return rc;
	if (smcr_libc.fcntl(xc->unix_fd, F_GETFD) < 0)
		return -errno;
	atomic_store_explicit(&xc->peer_ctrl->tcp_tail, 1, memory_order_seq_cst);
	atomic_store_explicit(&xc->peer_ctrl->armed, 0, memory_order_seq_cst);
	ring_peer(xc);
	return 0;
}

static bool shm_peer_on_tcp(const struct smcr_xconn *xc)
{
	return atomic_load_explicit(&xc->own_ctrl->tcp_tail, memory_order_acquire) != 0;
}

/* ---- optional bounded spin (benchmarks.md §2: only while the peer runs) ---- */

static bool shm_ctrl_pending(const struct smcr_xconn *xc)
{
	/* rx_seq may be updated by another thread under the connection lock. */
	return atomic_load_explicit(&xc->own_ctrl->seq, memory_order_acquire) !=
	       __atomic_load_n(&xc->rx_seq, __ATOMIC_RELAXED);
}

/*
 * Worth spinning for: the peer is not blocked in a wait, and it did not last
 * run on our CPU (where it would be waiting for us to stop spinning: on a
 * 2-vCPU VM the scheduler often packs both ends onto one, benchmarks.md
 * §2).  A peer still marked asleep that we rang (it has not re-armed since:
 * `armed` is 0) is on its way to answer, so it counts as running; otherwise a
 * request/response pair in which each side sends and then waits would always
 * find the other still marked asleep, and neither would ever spin.  Its last
 * CPU is stale then and not compared.  The peer's own words in its page; a
 * liar only wastes our spin budget.
 */
static bool shm_peer_running(const struct smcr_xconn *xc)
{
	uint32_t cpu;

	if (atomic_load_explicit(&xc->peer_ctrl->sleeping, memory_order_relaxed) != 0)
		return atomic_load_explicit(&xc->peer_ctrl->armed, memory_order_relaxed) == 0;
	cpu = atomic_load_explicit(&xc->peer_ctrl->cpu, memory_order_relaxed);
	return cpu == 0 || (int)cpu - 1 != sched_getcpu();
}

static void shm_set_sleeping(struct smcr_xconn *xc, bool sleeping)
{
	if (!sleeping)
		publish_cpu(xc);
	atomic_store_explicit(&xc->own_ctrl->sleeping, sleeping ? 1u : 0u, memory_order_relaxed);
}

static void shm_destroy(struct smcr_xconn *xc, bool clean)
{
	if (!xc)
		return;
	if (xc->peer_base)
		peer_map_put(xc);
	if (xc->own)
		xc->own->dirty = xc->rx_dirty;
	smcr_sys_close(xc->ep_fd);
	smcr_sys_close(xc->unix_fd);
	smcr_sys_close(xc->rv_fd);
	smcr_sys_close(xc->knock_fd);
	smcr_sys_close(xc->spare_fd);
	smcr_sys_close(xc->own_efd);
	region_put(xc->own, clean, xc->peer);
	peer_unref(xc->peer);
	xconn_free(xc);
}

/*
 * This process's copies only: its mappings, its fd numbers (the other
 * holders' fd tables have their own), its copy of the region record.
 * Nothing in `xc` changes when it is shared: the holders still use it.
 */
static void shm_forget(struct smcr_xconn *xc)
{
	if (!xc)
		return;
	if (xc->peer_base)
		munmap(xc->peer_base, xc->peer_map_len);
	smcr_sys_close(xc->ep_fd);
	smcr_sys_close(xc->unix_fd);
	smcr_sys_close(xc->rv_fd);
	smcr_sys_close(xc->spare_fd);
	smcr_sys_close(xc->own_efd);
	region_free(xc->own); /* unmap and close our copy only */
	peer_unref(xc->peer);
	if (!xc->in_share)
		free(xc);
}

static void shm_info(const struct smcr_xconn *xc, struct smcr_xconn_info *out)
{
	(void)xc;
	memset(out, 0, sizeof(*out));
	out->mode = SMCR_STATS_MODE_SMC_SHM;
}

const struct smcr_transport_ops smcr_shm_ops = {
	.name = "shm",
	.same_host = true,
	.create = shm_create,
	.info = shm_info,
	.client_propose = shm_client_propose,
	.server_accept = shm_server_accept,
	.client_attach = shm_client_attach,
	.server_attach = shm_server_attach,
	.server_wait_fd = shm_server_wait_fd,
	.server_confirm = shm_server_confirm,
	.tokens = shm_tokens,
	.ring = shm_ring,
	.write_peer = shm_write_peer,
	.read_peer = shm_read_peer,
	.continue_on_tcp = shm_continue_on_tcp,
	.peer_on_tcp = shm_peer_on_tcp,
	.watch_tcp = shm_watch_tcp,
	.send_ctrl = shm_send_ctrl,
	.recv_ctrl = shm_recv_ctrl,
	.peer_gone = shm_peer_gone,
	.ready_fd = shm_ready_fd,
	.settle = shm_settle,
	.settle_lazy = shm_settle_lazy,
	.ctrl_pending = shm_ctrl_pending,
	.peer_running = shm_peer_running,
	.set_sleeping = shm_set_sleeping,
	.destroy = shm_destroy,
	.shared = shm_shared,
	.forget = shm_forget,
};

/* ---- test hooks -------------------------------------------------------------------- */

unsigned smcr_shm_test_pool_size(void)
{
	unsigned n = 0;

	pthread_mutex_lock(&pool_lock);
	for (unsigned c = 0; c <= SHM_MAX_CLASS; c++)
		for (struct shm_region *r = pool[c]; r; r = r->next)
			n++;
	pthread_mutex_unlock(&pool_lock);
	return n;
}
