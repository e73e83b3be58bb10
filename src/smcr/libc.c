// SPDX-License-Identifier: MIT
/*
 * The embedder's libc table and hooks (libc.h).  A file of its own so that
 * the wire decoders' fuzzers can link the generic netlink code with it and
 * nothing else of the engine.
 */
#include "smcr/libc.h"

#include <stdatomic.h>

struct smcr_libc smcr_libc;
static void (*foreign_enter_hook)(void);
static void (*foreign_leave_hook)(void);
static atomic_bool installed;

void smcr_libc_install(const struct smcr_engine_env *env)
{
	if (atomic_exchange(&installed, true))
		return;
	smcr_libc = env->libc;
	foreign_enter_hook = env->foreign_enter;
	foreign_leave_hook = env->foreign_leave;
}

void smcr_foreign_enter(void)
{
	if (foreign_enter_hook)
		foreign_enter_hook();
}

void smcr_foreign_leave(void)
{
	if (foreign_leave_hook)
		foreign_leave_hook();
}
