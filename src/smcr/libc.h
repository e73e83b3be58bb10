/* SPDX-License-Identifier: MIT */
/*
 * The libc entry points the embedder handed to smcr_engine_init()
 * (include/smcr/engine.h).  Engine code calls smcr_libc.<name>() for every
 * fd and socket call, never the public name: inside an interposer the
 * public name is the interposer's own wrapper.
 */
#ifndef SMCR_LIBC_H
#define SMCR_LIBC_H

#include "smcr/engine.h"

extern struct smcr_libc smcr_libc;

/*
 * Around calls into third-party code (libibverbs) that calls the public libc
 * names itself: the embedder's hooks, or nothing.
 */
void smcr_foreign_enter(void);
void smcr_foreign_leave(void);

/* The fd number logs and stats name for the engine's `fd` (the embedder's fd_label). */
int smcr_fd_label(int fd);

/* engine.c: install the embedder's environment (the first call wins). */
void smcr_libc_install(const struct smcr_engine_env *env);

#endif /* SMCR_LIBC_H */
