/* SPDX-License-Identifier: MIT */
/*
 * Shared by the wrappers: lazy initialisation and the one-branch test
 * "does this fd go to the engine?".
 */
#ifndef SMCR_PRELOAD_PRELOAD_H
#define SMCR_PRELOAD_PRELOAD_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "common/compiler.h"
#include "common/guard.h"
#include "common/real.h"
#include "preload/fdtab.h"

/* Set (release) once init.c has bound libc, read the config, mapped the table. */
extern atomic_bool smcr_preload_ready;
/* Written before ready: false in secure-execution processes or with SMCR_DISABLE. */
extern bool smcr_preload_active;

/* Slow path of smcr_preload_enter(): initialises the library (once). */
void smcr_preload_init(void);

/*
 * First statement of every wrapper. Wrappers can run before our
 * constructor (other libraries' constructors call socket or read), so the
 * library initialises on first use.
 */
static inline void smcr_preload_enter(void)
{
	if (unlikely(!atomic_load_explicit(&smcr_preload_ready, memory_order_acquire)))
		smcr_preload_init();
}

/* Should a new socket be tracked? Not when inactive or called from inside. */
static inline bool smcr_preload_tracking(void)
{
	return smcr_preload_active && !smcr_guard_inside();
}

/*
 * The hot-path test: one slot load, almost always NULL or not SMC. Calls
 * from inside the library (depth > 0) always reach the kernel socket.
 */
static inline bool smcr_preload_divert(int fd)
{
	return smcr_fdtab_is_smc(fd) && !smcr_guard_inside();
}

/* For optional libc functions (glibc extensions). */
#define SMCR_REAL_OR_ENOSYS(name)        \
	do {                             \
		if (!smcr_real.name) {   \
			errno = ENOSYS;  \
			return -1;       \
		}                        \
	} while (0)

#endif /* SMCR_PRELOAD_PRELOAD_H */
