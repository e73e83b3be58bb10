/* SPDX-License-Identifier: MIT */
/*
 * RDMA devices as sysfs shows them, without libibverbs: which device, port
 * and GID table entry hold the RoCE v2 GID of an IP address, and the MAC of
 * that entry's netdev.  That is everything a CLC Proposal says about our
 * device (GID and MAC; the QP number, rkey and buffer go in the Confirm), so
 * a client can send its Proposal before libibverbs is loaded and the device
 * opened (verbs.c opens it while the Accept is on its way).
 *
 * Layout read, under `sysfs` (normally "/sys"; tests pass a fake tree):
 *   class/infiniband/DEV/ports/N/state             "4: ACTIVE"
 *   class/infiniband/DEV/ports/N/link_layer        "Ethernet"
 *   class/infiniband/DEV/ports/N/gids/I            "0000:...:ffff:0a4d:0001"
 *   class/infiniband/DEV/ports/N/gid_attrs/types/I "RoCE v2"
 *   class/infiniband/DEV/ports/N/gid_attrs/ndevs/I "veth0"
 *   class/net/NDEV/address                         "aa:bb:cc:dd:ee:ff"
 *
 * The rule is ib.c's for an opened device (smcr_ib_port_open): a RoCE v2
 * entry equal to the GID, index and port number below 256, on an ACTIVE
 * Ethernet port; devices in name order, ports and indices ascending, the
 * first match wins.  No libibverbs, no verbs headers: plain files.
 */
#ifndef SMCR_IBSYS_H
#define SMCR_IBSYS_H

#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>

#define SMCR_IBSYS_ROOT	    "/sys"
#define SMCR_IBSYS_NAME_MAX 64 /* IB_DEVICE_NAME_MAX */

/* Where a GID lives: the entry verbs will be asked to confirm (ib.c). */
struct smcr_ibsys_gid {
	char dev[SMCR_IBSYS_NAME_MAX]; /* RDMA device ("rxe0") */
	char ndev[IF_NAMESIZE];        /* the entry's netdev ("veth0"); "" if none */
	uint8_t port_num;
	uint8_t gid_index;
	uint8_t mac[6]; /* the netdev's; zeros if unknown */
};

/*
 * Find the RoCE v2 entry for `gid` (16 bytes: an IPv4 address as
 * ::ffff:a.b.c.d, IPv6 as is).  0 and *out, -ENODEV if no device has one.
 */
int smcr_ibsys_find_gid(const char *sysfs, const uint8_t gid[16], struct smcr_ibsys_gid *out);

/*
 * The libibverbs providers ("driver NAME" in /etc/libibverbs.d, the library
 * libNAME-rdmavN.so) this machine's devices need, guessed from sysfs: the
 * kernel driver bound to a device's parent (mlx5_core -> mlx5, bnxt_en ->
 * bnxt_re, ...), or for a software device without a parent device (rxe, siw)
 * the letters its name starts with.  Distinct names into names[0..max), in
 * device name order; returns how many.  A wrong guess costs one useless
 * library load: libibverbs then loads every provider, as it always did.
 */
#define SMCR_IBSYS_PROVIDER_MAX 32
int smcr_ibsys_providers(const char *sysfs, char names[][SMCR_IBSYS_PROVIDER_MAX], int max);

/* Any RDMA device at all?  (One directory read.) */
bool smcr_ibsys_have_devices(const char *sysfs);

#endif /* SMCR_IBSYS_H */
