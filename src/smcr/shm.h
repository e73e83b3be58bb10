/* SPDX-License-Identifier: MIT */
/*
 * Same-host shared-memory transport (smcr_shm_ops in transport.h).
 */
#ifndef SMCR_SHM_H
#define SMCR_SHM_H

#include <stdbool.h>
#include <stdint.h>

#include "smcr/transport.h"

/* Tests only: regions waiting in this process's pool. */
unsigned smcr_shm_test_pool_size(void);

/* The listener registry moved to smcr/registry.h. */

#endif /* SMCR_SHM_H */
