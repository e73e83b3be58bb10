/* SPDX-License-Identifier: MIT */
/*
 * Same-host shared-memory transport (smcr_shm_ops in transport.h) and the
 * host-local registry of smcr listeners (design §4).
 */
#ifndef SMCR_SHM_H
#define SMCR_SHM_H

#include <stdbool.h>
#include <stdint.h>

#include "smcr/transport.h"

/* Tests only: regions waiting in this process's pool. */
unsigned smcr_shm_test_pool_size(void);

/*
 * Registry: a listener under smcr binds an abstract UNIX datagram socket named
 * after the network namespace and the TCP port; a client looks it up by port.
 * Returns the registry socket (close it to unregister) or -errno.
 */
int smcr_registry_add(uint16_t port);
bool smcr_registry_has(uint16_t port);

#endif /* SMCR_SHM_H */
