// SPDX-License-Identifier: MIT
/*
 * A region: one side's ring, a sealed memfd.  The peer maps it read-write
 * and writes ring data and CDC messages into it; we only ever read it.  So
 * "the peer wrote somewhere" can only mean "somewhere inside our own
 * region", and every value we take from it (cursors) passes the CDC
 * validator first.
 *
 *   +0      struct shm_ctrl: doorbell arm word, CDC mailbox (seqlock)
 *   +4096   ring data, ring_size bytes (16 KiB << n)
 *   ...     PROT_NONE guard page in our address space (not in the file):
 *           a bug that walks off the ring faults instead of reading on.
 *
 * No file is ever created: memfds are anonymous (mode 0600 anyway).  A
 * region is zeroed before reuse, only once the peer is done with it
 * (shm_pool.c says when).
 */
#include "smcr/shm_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "smcr/cdc.h"
#include "smcr/libc.h"
#include "smcr/sys.h"
#include "smcr/wire.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

#define SHM_GUARD_LEN 4096u
#define SHM_PREFAULT_LEN (64u * 1024) /* of a new ring, faulted in at creation */

/* Map ctrl+ring of `fd` shared, followed by a guard page that is never mapped. */
uint8_t *smcr_shm_map_with_guard(int fd, uint32_t ring_size, size_t *map_len)
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

/* smcr_shm_pool_lock held if the region has an owner (or in the fork child). */
void smcr_shm_region_free_locked(struct shm_region *r)
{
	if (!r)
		return;
	if (r->base)
		munmap(r->base, r->map_len);
	smcr_sys_close(r->fd);
	smcr_shm_peer_unref_locked(r->owner);
	free(r);
}

void smcr_shm_region_free(struct shm_region *r)
{
	pthread_mutex_lock(&smcr_shm_pool_lock);
	smcr_shm_region_free_locked(r);
	pthread_mutex_unlock(&smcr_shm_pool_lock);
}

struct shm_region *smcr_shm_region_create(uint32_t ring_size)
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
	r->base = smcr_shm_map_with_guard(r->fd, ring_size, &r->map_len);
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
	smcr_shm_region_free(r);
	return NULL;
}

/*
 * Has the peer that shared this region finished with it?  Its last CDC in our
 * mailbox says closed or abort (a well-behaved peer writes nothing after
 * that), or it never wrote at all.  A peer that lies only delays reuse: the
 * region goes back to that same peer process and nobody else.
 */
bool smcr_shm_region_peer_finished(struct shm_region *r)
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
void smcr_shm_region_zero(struct shm_region *r)
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
