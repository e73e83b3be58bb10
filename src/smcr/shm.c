// SPDX-License-Identifier: MIT
/*
 * Same-host transport: the user-space counterpart of SMC-D loopback-ism.
 *
 * Each side owns one region, a sealed memfd holding a control page and the
 * RMB (ring data) behind it (shm_region.c).  The peer maps it read-write and
 * writes ring data and CDC messages into it (shm_data.c), after both ends
 * proved themselves to each other (shm_clc.c, shm_rv.c); regions are
 * pooled per proven peer process (shm_pool.c, shm_peer.c).  Here: the ops
 * the engine calls, a connection's state and its end.  shm_int.h maps the
 * files.
 */
#include "smcr/shm_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>

#include "smcr/rundir.h"
#include "smcr/share.h"
#include "smcr/stats_abi.h"
#include "smcr/sys.h"

/*
 * Connection state lives in fork-shared memory (share.h), so that a forked
 * child's copy of the connection is the same connection (design §8): the
 * cursors' companions here (mailbox sequence numbers, doorbell state) must
 * be one for every process that holds it.  Private memory if none is left.
 */
static struct smcr_xconn *xconn_alloc(void)
{
	struct smcr_xconn *xc = smcr_share_alloc(sizeof(*xc));

	if (xc) {
		xc->in_share = true;
		return xc;
	}
	return calloc(1, sizeof(*xc));
}

static void xconn_free(struct smcr_xconn *xc)
{
	if (xc->in_share)
		smcr_share_free(xc);
	else
		free(xc);
}

static bool shm_shared(const struct smcr_xconn *xc)
{
	return xc->in_share;
}

static int shm_create(int tcp_fd, uint32_t size, int timeout_ms, struct smcr_xconn **out)
{
	struct smcr_xconn *xc = xconn_alloc();

	if (!xc)
		return -ENOMEM;
	xc->rv_in_dir = smcr_rundir_for_peer(tcp_fd);
	xc->timeout_ms = timeout_ms;
	xc->want_size = size;
	xc->own_efd = xc->ep_fd = xc->unix_fd = xc->rv_fd = xc->knock_fd = xc->spare_fd = -1;
	xc->bell_wr = xc->bell_keep = xc->bell_rd = -1;
	xc->bell_gen = smcr_shm_fork_gen;
	xc->own_efd = smcr_sys_eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (xc->own_efd < 0 || smcr_sys_random(xc->own_secret, sizeof(xc->own_secret)) < 0) {
		int err = -errno;

		smcr_shm_ops.destroy(xc, false);
		return err ? err : -EIO;
	}
	/*
	 * The secret's first 8 bytes travel as the Proposal's ISM GID.  Linux's
	 * server (smc_clc_msg_prop_valid) reads the IPv6 prefix count at
	 * iparea_offset, which is 0 when SMC-Dv1/SMC-Rv1 are not offered: the
	 * GID's last byte.  Above 8 it resets the connection instead of
	 * declining, so a kernel SMC server that announced SMC in its SYN-ACK
	 * (RFC 7609 option mode) would reset ours.  That byte stays 0: 120
	 * random bits remain.
	 */
	xc->own_secret[7] = 0;
	*out = xc;
	return 0;
}

static void shm_destroy(struct smcr_xconn *xc, bool clean)
{
	if (!xc)
		return;
	if (xc->peer_base)
		smcr_shm_peer_map_put(xc);
	if (xc->own)
		xc->own->dirty = xc->rx_dirty;
	smcr_sys_close(xc->ep_fd);
	smcr_sys_close(xc->unix_fd);
	smcr_shm_bell_close(xc);
	smcr_shm_rv_close(xc);
	smcr_sys_close(xc->knock_fd);
	smcr_sys_close(xc->spare_fd);
	smcr_sys_close(xc->own_efd);
	smcr_shm_region_put(xc->own, clean, xc->peer);
	smcr_shm_peer_unref(xc->peer);
	xconn_free(xc);
}

/*
 * This process's copies only: its mappings, its fd numbers (the other
 * holders' fd tables have their own), its copy of the region record.
 * Nothing in `xc` changes when it is shared: the holders still use it.
 */
static void shm_forget(struct smcr_xconn *xc)
{
	if (!xc)
		return;
	if (xc->peer_base)
		munmap(xc->peer_base, xc->peer_map_len);
	smcr_sys_close(xc->ep_fd);
	smcr_sys_close(xc->unix_fd);
	smcr_shm_bell_close(xc);
	smcr_sys_close(xc->rv_fd);
	smcr_sys_close(xc->knock_fd);
	smcr_sys_close(xc->spare_fd);
	smcr_sys_close(xc->own_efd);
	smcr_shm_region_free(xc->own); /* unmap and close our copy only */
	smcr_shm_peer_unref(xc->peer);
	if (!xc->in_share)
		free(xc);
}

static void shm_info(const struct smcr_xconn *xc, struct smcr_xconn_info *out)
{
	(void)xc;
	memset(out, 0, sizeof(*out));
	out->mode = SMCR_STATS_MODE_SMC_SHM;
}

const struct smcr_transport_ops smcr_shm_ops = {
	.name = "shm",
	.same_host = true,
	.create = shm_create,
	.info = shm_info,
	.client_propose = smcr_shm_client_propose,
	.server_accept = smcr_shm_server_accept,
	.client_attach = smcr_shm_client_attach,
	.server_attach = smcr_shm_server_attach,
	.server_wait_fd = smcr_shm_server_wait_fd,
	.server_confirm = smcr_shm_server_confirm,
	.tokens = smcr_shm_tokens,
	.ring = smcr_shm_ring,
	.write_peer = smcr_shm_write_peer,
	.read_peer = smcr_shm_read_peer,
	.continue_on_tcp = smcr_shm_continue_on_tcp,
	.peer_on_tcp = smcr_shm_peer_on_tcp,
	.watch_tcp = smcr_shm_watch_tcp,
	.send_ctrl = smcr_shm_send_ctrl,
	.recv_ctrl = smcr_shm_recv_ctrl,
	.peer_gone = smcr_shm_peer_gone,
	.ready_fd = smcr_shm_ready_fd,
	.settle = smcr_shm_settle,
	.settle_lazy = smcr_shm_settle_lazy,
	.ctrl_pending = smcr_shm_ctrl_pending,
	.peer_running = smcr_shm_peer_running,
	.set_sleeping = smcr_shm_set_sleeping,
	.destroy = shm_destroy,
	.shared = shm_shared,
	.forget = shm_forget,
};
