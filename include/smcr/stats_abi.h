/* SPDX-License-Identifier: MIT */
/*
 * The stats file each smcr process publishes, shared by the library (writer)
 * and the stats tool (reader).  Versioned: a reader checks magic, version and
 * the two size fields, and must ignore trailing bytes it does not know.
 *
 * Where: stats.<pid> in the user's stats directory (include/smcr/stats_dir.h:
 * $XDG_RUNTIME_DIR/smcr, /run/user/<uid>/smcr, /dev/shm/smcr-<uid>, ...); the
 * directory is 0700 and the file 0600, so only the same user (and root) can
 * read it.
 * The file is removed when the process exits normally.  Liveness (version
 * 2): the writer creates the file as stats.<pid>.new, takes flock(LOCK_SH) on
 * it, fills it and renames it into place, and keeps that lock (an fd open
 * close-on-exec) as long as it maps the file.  A reader that can take
 * flock(LOCK_EX | LOCK_NB) on stats.<pid> knows no process writes it: stale,
 * whatever the pid says (pid namespaces, pid reuse, exec).  Version 1 files
 * had no lock: their pid had to be alive and map the file.  A forked child publishes its own file
 * (its own pid, counters from zero) at its first stats event.
 *
 * Concurrency (version 2): every record carries a sequence counter.  A writer
 * makes `seq` odd (claiming it with a compare-and-swap, so two writer threads
 * never interleave), fences, stores the fields with relaxed atomics, then
 * makes `seq` even again with a release store.  A reader copies the record
 * between an acquire load of an even `seq` and a re-read after an acquire
 * fence, and retries while it was odd or changed: smcr_stats_seq_read()
 * below is that protocol.  A record is live while `state` is
 * SMCR_STATS_CONN_LIVE; `generation` changes whenever a slot is reused.
 * The per-process counters are independent relaxed 64-bit atomics.
 *
 * Version 1 (no seqlock: `seq` was reserved and zero; liveness by pid) had the
 * same layout; readers may still accept it, copying records between two reads
 * of (state, generation).
 */
#ifndef SMCR_STATS_ABI_H
#define SMCR_STATS_ABI_H

#include <stdint.h>

#define SMCR_STATS_MAGIC 0x534d4353u /* "SMCS" */
#define SMCR_STATS_VERSION 2u
#define SMCR_STATS_MAX_CONNS 1024u
#define SMCR_STATS_MAX_REASONS 32u
#define SMCR_STATS_MAX_LISTENERS 64u
#define SMCR_STATS_MAX_LGRS 32u

enum smcr_stats_conn_state {
	SMCR_STATS_CONN_FREE = 0,
	SMCR_STATS_CONN_LIVE = 1,
	/* A forked child's slot still referenced by a connection it inherited:
	 * the parent's to show, not the child's (readers skip it). */
	SMCR_STATS_CONN_INHERITED = 2,
};

/*
 * Where an SMC connection is in its life, as of its last counter update or
 * its close (the kernel's SMC states; RFC 7609 closing).  Version 2.
 */
enum smcr_stats_conn_phase {
	SMCR_STATS_PHASE_NONE = 0,            /* not an SMC connection, or unknown */
	SMCR_STATS_PHASE_ACTIVE = 1,
	SMCR_STATS_PHASE_PEER_CLOSE_WAIT1 = 2, /* we shut down writing, the peer has not */
	SMCR_STATS_PHASE_PEER_CLOSE_WAIT2 = 3, /* both shut down writing, peer not closed */
	SMCR_STATS_PHASE_APP_CLOSE_WAIT1 = 4,  /* the peer shut down writing or closed */
	SMCR_STATS_PHASE_APP_CLOSE_WAIT2 = 5,  /* ... and we shut down writing too */
	SMCR_STATS_PHASE_CLOSED = 6,
	SMCR_STATS_PHASE_ABORTED = 7,
	/*
	 * The rest of the stream goes over TCP (this end let go of the rings,
	 * or followed its peer): `mode` says what it was, `fallback_reason`
	 * why, the byte counts what went over SMC.  A closed record keeps the
	 * reason.  Added within version 2: older readers show no phase.
	 */
	SMCR_STATS_PHASE_ON_TCP = 8,
};

enum smcr_stats_mode {
	SMCR_STATS_MODE_TCP = 0,
	SMCR_STATS_MODE_SMC_SHM = 1, /* same-host shared memory */
	SMCR_STATS_MODE_SMC_R = 2,   /* RDMA (verbs) */
};

struct smcr_stats_conn {
	uint32_t state;           /* enum smcr_stats_conn_state */
	uint32_t generation;
	uint32_t mode;            /* enum smcr_stats_mode */
	uint32_t role;            /* 0 client, 1 server */
	int32_t tcp_fd;
	uint32_t fallback_reason; /* 0 in SMC mode, unless it went on over TCP (PHASE_ON_TCP) */
	uint32_t rmb_size;        /* our receive ring */
	uint32_t peer_rmb_size;   /* the ring we write into */
	uint64_t bytes_sent;
	uint64_t bytes_received;
	uint64_t cdc_sent;
	uint64_t cdc_received;
	uint8_t local_addr[16];   /* IPv4 as ::ffff:a.b.c.d */
	uint8_t peer_addr[16];
	uint16_t local_port;
	uint16_t peer_port;
	uint32_t seq;             /* odd while a writer updates the record (version 2) */
	uint32_t conn_phase;      /* enum smcr_stats_conn_phase (version 2; 0 before) */
	uint32_t link_group;      /* SMC-R link group id; 0 = none (same-host shm, TCP) */
	/*
	 * SMC-R: the RDMA device ("rxe0"), NUL-padded; "" otherwise.  These 16
	 * bytes were reserved (always zero) before: the record keeps its 128
	 * bytes and the file its version 2, so older readers ignore the name and
	 * files from older writers read as "".
	 */
	char device[16];
};

/*
 * Whether local clients are told to propose SMC to a listening socket
 * (the same-host registry, src/smcr/registry.h).  New values may be added
 * within version 2: a reader shows a value it does not know as unknown.
 */
enum smcr_stats_listener_status {
	SMCR_STATS_LISTENER_SERVED = 1,    /* this process holds the registry name */
	SMCR_STATS_LISTENER_NAME_HELD = 2, /* another process holds the port's name */
	SMCR_STATS_LISTENER_REVOKED = 3,   /* withdrawn; `why` says why */
	SMCR_STATS_LISTENER_NO_NAME = 4,   /* out of fds or memory for the name: retried */
	/*
	 * Never registered nor announced, for as long as it listens: `why` says
	 * why (a rule, a rules file not understood, a confined process).
	 */
	SMCR_STATS_LISTENER_NOT_SERVED = 5,
};

/* The process runs with SMCR_SAMEHOST=0: its own clients never look the name up. */
#define SMCR_STATS_LISTENER_F_SAMEHOST_OFF 1u

/*
 * One listening socket of the process, under the same seqlock as a
 * connection record (smcr_stats_listener_read()).  State FREE or LIVE.
 */
struct smcr_stats_listener {
	uint32_t state;           /* enum smcr_stats_conn_state */
	uint32_t generation;
	uint32_t seq;
	int32_t fd;
	uint8_t addr[16];         /* IPv4 as ::ffff:a.b.c.d */
	uint16_t port;
	uint16_t status;          /* enum smcr_stats_listener_status */
	uint32_t flags;           /* SMCR_STATS_LISTENER_F_* */
	uint64_t reserved;
	char why[80];             /* REVOKED, NOT_SERVED: why, NUL-terminated */
};

/* An SMC-R link group and its links (src/smcr/lgr.h), as of its last change. */
enum smcr_stats_lgr_state {
	SMCR_STATS_LGR_PENDING = 1, /* first contact: the first link is not confirmed yet */
	SMCR_STATS_LGR_ACTIVE = 2,
	SMCR_STATS_LGR_DEAD = 3,    /* failed or deleted; its connections are reset */
};

enum smcr_stats_link_state {
	SMCR_STATS_LINK_NONE = 0,
	SMCR_STATS_LINK_ADDING = 1,  /* ADD LINK sent, not answered */
	SMCR_STATS_LINK_PENDING = 2, /* QP set up, CONFIRM LINK not done */
	SMCR_STATS_LINK_UP = 3,
	SMCR_STATS_LINK_DOWN = 4,    /* its group is dead */
};

struct smcr_stats_link {
	char device[16];          /* RDMA device, NUL-padded */
	uint8_t port;             /* its port number */
	uint8_t state;            /* enum smcr_stats_link_state */
	uint8_t link_id;          /* the link number of the LLC messages */
	uint8_t reserved;
	uint32_t qpn;             /* our QP */
	uint32_t peer_qpn;        /* the peer's QP; 0 = not known yet */
	uint32_t conns;           /* connections whose traffic goes on this link */
	uint8_t gid[16];          /* our GID (RoCE v2: an IP address) */
	uint8_t peer_gid[16];
};

/*
 * One link group of the process under the same seqlock protocol as a
 * connection record; smcr_stats_lgr_read() copies it byte by byte.
 */
struct smcr_stats_lgr {
	uint32_t state;           /* enum smcr_stats_conn_state */
	uint32_t generation;
	uint32_t seq;
	uint32_t id;              /* as in smcr_stats_conn.link_group */
	uint8_t role;             /* 0 client, 1 server */
	uint8_t lgr_state;        /* enum smcr_stats_lgr_state */
	uint8_t max_links;        /* negotiated in CLC */
	uint8_t reserved8;
	uint32_t conns;           /* connections it carries */
	uint8_t peer_addr[16];    /* the TCP peer address that proved the peer */
	uint8_t peer_id[8];       /* the peer's SMC system id (instance + MAC) */
	/*
	 * Times its connections moved unread bytes out of their RMB for a peer
	 * silent after a failover (protocol.md §6.6).  Taken from the reserved
	 * words, which writers without it leave zero: their files read as 0.
	 */
	uint64_t rmb_rescues;
	uint64_t reserved;
	struct smcr_stats_link links[2];
};

struct smcr_stats_reason {
	uint32_t reason;          /* SMC decline code; 0 = unused slot */
	uint32_t reserved;
	uint64_t count;
};

struct smcr_stats_file {
	uint32_t magic;
	uint32_t version;
	uint32_t header_size;     /* offsetof(struct smcr_stats_file, conns) */
	uint32_t conn_size;       /* sizeof(struct smcr_stats_conn) */
	uint32_t max_conns;
	int32_t pid;
	char comm[16];
	/* per-process counters */
	uint64_t handshakes_smc;  /* connections that reached SMC mode */
	uint64_t conns_open;      /* SMC connections alive now */
	uint64_t fallbacks;       /* handshakes that ended on TCP */
	uint64_t handshake_errors;/* hard errors during CLC */
	uint64_t aborts;          /* SMC connections ended by a reset */
	uint64_t bytes_sent;      /* of closed SMC connections */
	uint64_t bytes_received;
	/*
	 * Where waits for a peer went (zero in files written before these
	 * existed: the words were reserved): bounded spins that saw the awaited
	 * event, spins that ran out or saw the peer go to sleep, and blocking
	 * waits inside the engine (send/recv) that slept.
	 */
	uint64_t spins_won;
	uint64_t spins_lost;
	uint64_t waits_slept;
	/*
	 * SMC-R failover: connections moved to another link of their group
	 * because theirs went down, and the bytes written again over it (zero
	 * in files written before: the words were reserved).
	 */
	uint64_t link_switches;
	uint64_t bytes_resent;
	/*
	 * Wake-ups of poll, select and epoll that an SMC socket's ready fd
	 * caused but that had nothing for the application (zero in files
	 * written before: the word was reserved).  A few per request at most;
	 * a count that keeps growing while nothing happens is a busy loop.
	 */
	uint64_t wakeups_empty;
	/*
	 * Where the listener table is: its byte offset from the start of the
	 * file, its record size and count (zero in files written before it
	 * existed: the words were reserved; such files list no listeners).
	 */
	uint32_t listener_offset;
	uint16_t listener_size;
	uint16_t max_listeners;
	/* The link group table, likewise (zero: none). */
	uint32_t lgr_offset;
	uint16_t lgr_size;
	uint16_t max_lgrs;
	struct smcr_stats_reason fallback_reasons[SMCR_STATS_MAX_REASONS];
	struct smcr_stats_conn conns[SMCR_STATS_MAX_CONNS];
	/* After the records, where older readers look no more: the file only grew. */
	struct smcr_stats_listener listeners[SMCR_STATS_MAX_LISTENERS];
	struct smcr_stats_lgr lgrs[SMCR_STATS_MAX_LGRS];
};

_Static_assert(sizeof(struct smcr_stats_conn) == 128, "stats record layout is ABI");
_Static_assert(sizeof(struct smcr_stats_listener) == 128, "listener record layout is ABI");
_Static_assert(sizeof(struct smcr_stats_lgr) == 192, "link group record layout is ABI");

/* Attempts a record reader makes before giving up on a busy record. */
#define SMCR_STATS_READ_TRIES 64

/*
 * The reader side of the seqlock, shared by the record readers below: calls
 * copy(src, dst) between an acquire load of an even *seq and a re-read of it
 * after an acquire fence, and retries while it was odd or changed.  copy()
 * loads src with relaxed atomics (never plain loads: a writer may be storing).
 * Returns 1 with *dst_seq the even value the copy was consistent with, 0 if
 * the record stayed busy for SMCR_STATS_READ_TRIES attempts.
 */
static inline int smcr_stats_seq_read(const uint32_t *seq, uint32_t *dst_seq,
				      void (*copy)(const void *src, void *dst),
				      const void *src, void *dst)
{
	for (int tries = 0; tries < SMCR_STATS_READ_TRIES; tries++) {
		uint32_t before = __atomic_load_n(seq, __ATOMIC_ACQUIRE);

		if (before & 1u)
			continue;
		copy(src, dst);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(seq, __ATOMIC_RELAXED) == before) {
			*dst_seq = before;
			return 1;
		}
	}
	return 0;
}

#define SMCR_STATS_LOAD_(field) (dst->field = __atomic_load_n(&src->field, __ATOMIC_RELAXED))

/* The fields of a connection record, one relaxed load each. */
static inline void smcr_stats_conn_copy_(const void *from, void *to)
{
	const struct smcr_stats_conn *src = (const struct smcr_stats_conn *)from;
	struct smcr_stats_conn *dst = (struct smcr_stats_conn *)to;

	SMCR_STATS_LOAD_(state);
	SMCR_STATS_LOAD_(generation);
	SMCR_STATS_LOAD_(mode);
	SMCR_STATS_LOAD_(role);
	SMCR_STATS_LOAD_(tcp_fd);
	SMCR_STATS_LOAD_(fallback_reason);
	SMCR_STATS_LOAD_(rmb_size);
	SMCR_STATS_LOAD_(peer_rmb_size);
	SMCR_STATS_LOAD_(bytes_sent);
	SMCR_STATS_LOAD_(bytes_received);
	SMCR_STATS_LOAD_(cdc_sent);
	SMCR_STATS_LOAD_(cdc_received);
	for (unsigned i = 0; i < 16; i++) {
		SMCR_STATS_LOAD_(local_addr[i]);
		SMCR_STATS_LOAD_(peer_addr[i]);
	}
	SMCR_STATS_LOAD_(local_port);
	SMCR_STATS_LOAD_(peer_port);
	SMCR_STATS_LOAD_(conn_phase);
	SMCR_STATS_LOAD_(link_group);
	for (unsigned i = 0; i < sizeof(dst->device); i++)
		SMCR_STATS_LOAD_(device[i]);
}

/* The fields of a listener record, one relaxed load each. */
static inline void smcr_stats_listener_copy_(const void *from, void *to)
{
	const struct smcr_stats_listener *src = (const struct smcr_stats_listener *)from;
	struct smcr_stats_listener *dst = (struct smcr_stats_listener *)to;

	SMCR_STATS_LOAD_(state);
	SMCR_STATS_LOAD_(generation);
	SMCR_STATS_LOAD_(fd);
	for (unsigned i = 0; i < 16; i++)
		SMCR_STATS_LOAD_(addr[i]);
	SMCR_STATS_LOAD_(port);
	SMCR_STATS_LOAD_(status);
	SMCR_STATS_LOAD_(flags);
	for (unsigned i = 0; i < sizeof(dst->why); i++)
		SMCR_STATS_LOAD_(why[i]);
}

#undef SMCR_STATS_LOAD_

/* A link group record byte by byte: its fields are many and small. */
static inline void smcr_stats_lgr_copy_(const void *from, void *to)
{
	const uint8_t *src = (const uint8_t *)from;
	uint8_t *dst = (uint8_t *)to;

	for (unsigned i = 0; i < sizeof(struct smcr_stats_lgr); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

/*
 * Copy one record of a live version-2 file consistently.  Returns 1 with
 * *dst a snapshot of one moment, 0 if the record stayed busy for
 * SMCR_STATS_READ_TRIES attempts.
 */
static inline int smcr_stats_conn_read(const struct smcr_stats_conn *src,
				       struct smcr_stats_conn *dst)
{
	return smcr_stats_seq_read(&src->seq, &dst->seq, smcr_stats_conn_copy_, src, dst);
}

/* smcr_stats_conn_read() for a listener record; `why` comes NUL-terminated. */
static inline int smcr_stats_listener_read(const struct smcr_stats_listener *src,
					   struct smcr_stats_listener *dst)
{
	if (!smcr_stats_seq_read(&src->seq, &dst->seq, smcr_stats_listener_copy_, src, dst))
		return 0;
	dst->why[sizeof(dst->why) - 1] = '\0';
	return 1;
}

/* smcr_stats_conn_read() for a link group record. */
static inline int smcr_stats_lgr_read(const struct smcr_stats_lgr *src,
				      struct smcr_stats_lgr *dst)
{
	return smcr_stats_seq_read(&src->seq, &dst->seq, smcr_stats_lgr_copy_, src, dst);
}

#endif /* SMCR_STATS_ABI_H */
