/* SPDX-License-Identifier: MIT */
/*
 * Small conveniences over the engine's entry points that the engine tests
 * share; the library itself offers only what its embedders call.
 */
#ifndef SMCR_TESTS_UNIT_ENGINE_TEST_H
#define SMCR_TESTS_UNIT_ENGINE_TEST_H

#include <poll.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "smcr/engine.h"

/* smcr_sock_recvv() into one buffer, as recv() is to recvmsg(). */
static inline ssize_t sock_recv(struct smcr_sock *s, void *buf, size_t len, int flags)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };

	return smcr_sock_recvv(s, &iov, 1, flags);
}

/* Wait (bounded, ~5 s) until the accepted connection classifies as something final. */
static inline int classify_wait(int fd)
{
	for (int i = 0; i < 5000; i++) {
		int c = smcr_sock_classify(fd);

		if (c != SMCR_CLASSIFY_NEED_MORE && c != SMCR_CLASSIFY_NOTHING)
			return c;
		poll(NULL, 0, 1);
	}
	return SMCR_CLASSIFY_NEED_MORE;
}

#endif
