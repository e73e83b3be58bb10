/* SPDX-License-Identifier: MIT */
/*
 * A connection's holding buffer: unread bytes moved out of its own RMB so
 * that the peer gets room to write (protocol.md §6.6; rx.c decides when).
 * They are the oldest unread bytes of the stream, so every read takes them
 * before the RMB's.
 *
 * One linear buffer of at most `bound` bytes (the RMB's size: the peer can
 * never have more unread in flight than that), allocated on the first put
 * and freed as soon as the reads drained it.  Plain process memory: only a
 * private connection (the verbs transport's) may use one.  No locking: the
 * connection lock covers it.  Pure bookkeeping, no I/O (tests/unit/test_rxhold.c).
 */
#ifndef SMCR_RXHOLD_H
#define SMCR_RXHOLD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct smcr_rxhold {
	uint8_t *buf;  /* NULL while empty */
	uint32_t cap;  /* its size: the bound of the first put */
	uint32_t off;  /* first unread byte */
	uint32_t len;  /* unread bytes */
};

/* Unread bytes held. */
static inline uint32_t smcr_rxhold_len(const struct smcr_rxhold *h)
{
	return h->len;
}

/* How many more bytes a put may add under `bound`. */
uint32_t smcr_rxhold_room(const struct smcr_rxhold *h, uint32_t bound);

/*
 * Append the bytes a[0..alen) then b[0..blen) (a ring's two pieces across
 * its wrap; b may be NULL with blen 0).  All or nothing: 0, -ENOSPC (more
 * than the room under `bound`), -ENOMEM.
 */
int smcr_rxhold_put(struct smcr_rxhold *h, uint32_t bound, const uint8_t *a, uint32_t alen,
		    const uint8_t *b, uint32_t blen);

/*
 * Copy up to `max` held bytes, oldest first, into the iovec starting `done`
 * bytes into it; nothing is consumed (MSG_PEEK, or before a drop).  Returns
 * the bytes copied.
 */
size_t smcr_rxhold_peek(const struct smcr_rxhold *h, const struct iovec *iov, int iovcnt,
			size_t done, size_t max);
/* The same from `skip` bytes past the oldest (SO_PEEK_OFF). */
size_t smcr_rxhold_peek_from(const struct smcr_rxhold *h, size_t skip, const struct iovec *iov,
			     int iovcnt, size_t done, size_t max);

/* The oldest n (<= len) bytes are consumed; the buffer goes once it is empty. */
void smcr_rxhold_drop(struct smcr_rxhold *h, uint32_t n);

/* Release everything (the connection ends). */
void smcr_rxhold_free(struct smcr_rxhold *h);

/* Copy len bytes into the iovec starting `done` bytes into it (what fits). */
void smcr_iov_put(const struct iovec *iov, int iovcnt, size_t done, const uint8_t *src,
		  size_t len);

#endif /* SMCR_RXHOLD_H */
