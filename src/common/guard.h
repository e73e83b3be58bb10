/* SPDX-License-Identifier: MIT */
/*
 * Per-thread "inside the library" depth.
 *
 * Any wrapper entered while the depth is non-zero goes straight to libc:
 * that is how calls made by the library itself, or by third-party code it
 * calls (libibverbs, libnl, a malloc that reads /proc), avoid re-entering
 * the interposer. Code that calls out of the library wraps the call in
 * smcr_guard_enter()/smcr_guard_leave().
 *
 * initial-exec TLS: a plain load from %fs, no __tls_get_addr call. The
 * library is meant to be preloaded, which always has static TLS room.
 */
#ifndef SMCR_COMMON_GUARD_H
#define SMCR_COMMON_GUARD_H

#include <errno.h>
#include <stdbool.h>

extern __thread unsigned smcr_guard_depth __attribute__((tls_model("initial-exec")));

static inline bool smcr_guard_inside(void)
{
	return smcr_guard_depth != 0;
}

static inline void smcr_guard_enter(void)
{
	smcr_guard_depth++;
}

static inline void smcr_guard_leave(void)
{
	smcr_guard_depth--;
}

/*
 * errno belongs to the application: library bookkeeping that may touch
 * errno saves it first and restores it before returning to the caller.
 *	int saved = smcr_errno_save(); ... smcr_errno_restore(saved);
 */
static inline int smcr_errno_save(void)
{
	return errno;
}

static inline void smcr_errno_restore(int saved)
{
	errno = saved;
}

#endif /* SMCR_COMMON_GUARD_H */
