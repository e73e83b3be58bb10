/* SPDX-License-Identifier: MIT */
/*
 * Same-host shared-memory transport (smcr_shm_ops in transport.h).
 */
#ifndef SMCR_SHM_H
#define SMCR_SHM_H

#include <stdbool.h>
#include <stdint.h>

#include "smcr/transport.h"

/*
 * Is this Proposal an smcr same-host client's (SMC-Dv2 with our EID and
 * CHID)?  The policy routes an SMC-Dv2 + SMC-Rv2 offer that is not to SMC-R.
 */
bool smcr_shm_offer_is_ours(const struct smcr_clc_msg *prop);

/* Tests only: regions waiting in this process's pool. */
unsigned smcr_shm_test_pool_size(void);

/* fork, called only by engine.c: the ring pool's lock; the child forgets the pool. */
void smcr_shm_fork_prepare(void);
void smcr_shm_fork_parent(void);
void smcr_shm_fork_child(void);

#endif /* SMCR_SHM_H */
