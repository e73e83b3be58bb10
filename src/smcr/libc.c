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
static int (*fd_label_hook)(int fd);
static atomic_bool installed;

void smcr_libc_install(const struct smcr_engine_env *env)
{
	if (atomic_exchange(&installed, true))
		return;
	smcr_libc = env->libc;
	foreign_enter_hook = env->foreign_enter;
	foreign_leave_hook = env->foreign_leave;
	fd_label_hook = env->fd_label;
}

int smcr_fd_label(int fd)
{
	return fd_label_hook ? fd_label_hook(fd) : fd;
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
