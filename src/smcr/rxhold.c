// SPDX-License-Identifier: MIT
/* The holding buffer of unread bytes moved out of an RMB (rxhold.h). */
#include "smcr/rxhold.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void smcr_iov_put(const struct iovec *iov, int iovcnt, size_t done, const uint8_t *src,
		  size_t len)
{
	int i = 0;

	while (i < iovcnt && done >= iov[i].iov_len)
		done -= iov[i++].iov_len;
	while (len > 0 && i < iovcnt) {
		size_t seg = iov[i].iov_len - done;

		if (seg > len)
			seg = len;
		memcpy((uint8_t *)iov[i].iov_base + done, src, seg);
		src += seg;
		len -= seg;
		done = 0;
		i++;
	}
}

uint32_t smcr_rxhold_room(const struct smcr_rxhold *h, uint32_t bound)
{
	/* The first put fixed the size; a smaller bound later still bounds. */
	if (h->buf && h->cap < bound)
		bound = h->cap;
	return h->len < bound ? bound - h->len : 0;
}

int smcr_rxhold_put(struct smcr_rxhold *h, uint32_t bound, const uint8_t *a, uint32_t alen,
		    const uint8_t *b, uint32_t blen)
{
	uint32_t room = smcr_rxhold_room(h, bound);

	if (alen > room || blen > room - alen)
		return -ENOSPC;
	if (alen + blen == 0)
		return 0;
	if (!h->buf) {
		h->buf = malloc(bound);
		if (!h->buf)
			return -ENOMEM;
		h->cap = bound;
		h->off = 0;
		h->len = 0;
	}
	/* Linear, not a ring: what is left unread moves to the front when the end is reached. */
	if (h->off + h->len + alen + blen > h->cap) {
		memmove(h->buf, h->buf + h->off, h->len);
		h->off = 0;
	}
	memcpy(h->buf + h->off + h->len, a, alen);
	if (blen)
		memcpy(h->buf + h->off + h->len + alen, b, blen);
	h->len += alen + blen;
	return 0;
}

size_t smcr_rxhold_peek(const struct smcr_rxhold *h, const struct iovec *iov, int iovcnt,
			size_t done, size_t max)
{
	return smcr_rxhold_peek_from(h, 0, iov, iovcnt, done, max);
}

size_t smcr_rxhold_peek_from(const struct smcr_rxhold *h, size_t skip, const struct iovec *iov,
			     int iovcnt, size_t done, size_t max)
{
	size_t left = skip < h->len ? h->len - skip : 0, n = max < left ? max : left;

	if (n)
		smcr_iov_put(iov, iovcnt, done, h->buf + h->off + skip, n);
	return n;
}

void smcr_rxhold_drop(struct smcr_rxhold *h, uint32_t n)
{
	if (n > h->len)
		n = h->len;
	h->off += n;
	h->len -= n;
	if (h->len == 0)
		smcr_rxhold_free(h);
}

void smcr_rxhold_free(struct smcr_rxhold *h)
{
	free(h->buf);
	h->buf = NULL;
	h->cap = 0;
	h->off = 0;
	h->len = 0;
}
