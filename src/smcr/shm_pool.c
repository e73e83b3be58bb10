// SPDX-License-Identifier: MIT
/*
 * The per-process pool of regions by size class.  A new region has its
 * first 64 KiB pre-faulted (a fresh memfd costs ~3 us per 4 KiB page in
 * first-touch faults, benchmarks.md §2), the rest faults in once, as a
 * stream first reaches it; so regions are reused.  A mapping cannot be
 * revoked, so a region once handed to a peer stays that peer's until it is
 * destroyed: it goes back to the pool owned by the peer's proven process
 * identity (struct shm_peer: a pidfd, and a start time that shows the
 * process sent the peer's proof) and is handed to nobody but that same live
 * process again; a region whose peer could not be proven, or that reached
 * two identities, is destroyed.  It is zeroed before reuse, and only once
 * the peer is done with it: at close if the peer closed first, else when
 * its last CDC in our mailbox says closed/abort ("draining" until then).
 *
 * The peers' regions are cached here too: their mappings outlive a
 * connection (smcr_shm_peer_map_get).
 */
#include "smcr/shm_int.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>

#include "smcr/clc.h"

#define SHM_POOL_MIN_PER_CLASS 8u            /* idle regions kept per size class, at least */
#define SHM_POOL_BYTES_PER_CLASS (32u << 20) /* and up to this many bytes of them */

/*
 * Protects pool[] and the pooled regions, the peer records' list and
 * references (shm_peer.c), and peer_maps[] with peer_map_clock.
 */
pthread_mutex_t smcr_shm_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shm_region *pool[SHM_MAX_CLASS + 1]; /* idle regions by size class */

unsigned smcr_shm_size_class(uint32_t size)
{
	return smcr_clc_rmbe_compress(size, SHM_MAX_CLASS);
}

/*
 * A pooled region that was never shared or is owned by `peer` (a live,
 * proven process; NULL: none) and that the peer is done with, else a new
 * one.  Regions of processes found dead on the way are destroyed: their old
 * mappings may live on in any process those handed them to.
 */
struct shm_region *smcr_shm_region_get(uint32_t ring_size, struct shm_peer *peer)
{
	unsigned c = smcr_shm_size_class(ring_size);
	struct shm_region **pp, *r = NULL, *dead = NULL;

	pthread_mutex_lock(&smcr_shm_pool_lock);
	for (pp = &pool[c]; *pp;) {
		struct shm_region *cand = *pp;

		if (cand->owner && cand->owner->dead) {
			*pp = cand->next;
			cand->next = dead;
			dead = cand;
			continue;
		}
		if ((cand->owner && cand->owner != peer) ||
		    (cand->draining && !smcr_shm_region_peer_finished(cand))) {
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
		smcr_shm_region_free_locked(d);
	}
	pthread_mutex_unlock(&smcr_shm_pool_lock);
	if (r && r->draining) {
		/* Zero before reuse: nothing of the old connection may reach the new one. */
		smcr_shm_region_zero(r);
		r->draining = false;
	}
	if (!r)
		r = smcr_shm_region_create(smcr_clc_rmbe_size((uint8_t)c));
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
void smcr_shm_region_put(struct shm_region *r, bool peer_done, struct shm_peer *peer)
{
	struct shm_region **pp, *evict = NULL;
	unsigned c, n = 0;

	if (!r)
		return;
	c = smcr_shm_size_class(r->ring_size);
	if (smcr_clc_rmbe_size((uint8_t)c) != r->ring_size || !peer ||
	    (r->owner && r->owner != peer)) {
		smcr_shm_region_free(r);
		return;
	}
	if (peer_done)
		smcr_shm_region_zero(r);
	r->draining = !peer_done;
	pthread_mutex_lock(&smcr_shm_pool_lock);
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
	smcr_shm_region_free_locked(evict);
	pthread_mutex_unlock(&smcr_shm_pool_lock);
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

/* Both under smcr_shm_pool_lock. */
static struct peer_map peer_maps[PEER_MAP_SLOTS];
static uint64_t peer_map_clock; /* stamps the newest */

uint8_t *smcr_shm_peer_map_get(dev_t dev, ino_t ino, uint32_t ring_size, size_t *len)
{
	uint8_t *base = NULL;

	pthread_mutex_lock(&smcr_shm_pool_lock);
	for (unsigned i = 0; i < PEER_MAP_SLOTS; i++) {
		struct peer_map *m = &peer_maps[i];

		if (m->base && m->dev == dev && m->ino == ino && m->ring_size == ring_size) {
			base = m->base;
			*len = m->len;
			m->base = NULL;
			break;
		}
	}
	pthread_mutex_unlock(&smcr_shm_pool_lock);
	return base;
}

void smcr_shm_peer_map_put(struct smcr_xconn *xc)
{
	struct peer_map *slot = NULL;
	uint8_t *evict = NULL;
	size_t evict_len = 0;

	if (xc->peer_ring_size > PEER_MAP_MAX_RING || xc->peer_ino == 0) {
		munmap(xc->peer_base, xc->peer_map_len);
		return;
	}
	pthread_mutex_lock(&smcr_shm_pool_lock);
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
	pthread_mutex_unlock(&smcr_shm_pool_lock);
	if (evict)
		munmap(evict, evict_len);
}

/* fork child: its connections are its own; smcr_shm_pool_lock is held (prepare). */
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
	pthread_mutex_lock(&smcr_shm_pool_lock);
}

void smcr_shm_fork_parent(void)
{
	smcr_shm_fork_gen++;
	pthread_mutex_unlock(&smcr_shm_pool_lock);
}

void smcr_shm_fork_child(void)
{
	smcr_shm_fork_gen++;
	peer_map_forget_all();
	for (unsigned c = 0; c <= SHM_MAX_CLASS; c++) {
		while (pool[c]) {
			struct shm_region *r = pool[c];

			pool[c] = r->next;
			smcr_shm_region_free_locked(r);
		}
	}
	pthread_mutex_unlock(&smcr_shm_pool_lock);
}

unsigned smcr_shm_test_pool_size(void)
{
	unsigned n = 0;

	pthread_mutex_lock(&smcr_shm_pool_lock);
	for (unsigned c = 0; c <= SHM_MAX_CLASS; c++)
		for (struct shm_region *r = pool[c]; r; r = r->next)
			n++;
	pthread_mutex_unlock(&smcr_shm_pool_lock);
	return n;
}
