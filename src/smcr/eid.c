// SPDX-License-Identifier: MIT
/*
 * Our SMC-Rv2 EIDs (see eid.h): the merge rule, and the kernel's UEID table
 * read once per process.
 *
 * The table is read by the first caller, normally the verbs loader thread
 * (ib.c, at listen() or at the first connect() that may become SMC-R), so
 * that handshakes find it read; one that comes while it is being read waits
 * for that read (a fork too, atfork: a child never inherits the lock held).
 * The table is not read again: an entry the administrator adds later is
 * seen by processes started later.
 */
#include "smcr/eid.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <pthread.h>

#include <linux/netlink.h>
#include <linux/smc.h>

#include "common/config.h"
#include "common/log.h"
#include "smcr/genl.h"
#include "smcr/sys.h"

#define EID_NL_TIMEOUT_MS 1000 /* per receive; the kernel answers a dump at once */

static bool listed(uint8_t out[][SMCR_CLC_EID_LEN], unsigned n, const uint8_t *eid)
{
	for (unsigned i = 0; i < n; i++)
		if (!memcmp(out[i], eid, SMCR_CLC_EID_LEN))
			return true;
	return false;
}

unsigned smcr_eid_merge(const uint8_t (*first)[SMCR_CLC_EID_LEN], unsigned n_first,
			const uint8_t (*then)[SMCR_CLC_EID_LEN], unsigned n_then,
			const uint8_t own[SMCR_CLC_EID_LEN],
			uint8_t out[SMCR_CLC_MAX_EIDS][SMCR_CLC_EID_LEN])
{
	unsigned n = 0;

	for (unsigned i = 0; i < n_first + n_then && n < SMCR_CLC_MAX_EIDS - 1; i++) {
		const uint8_t *e = i < n_first ? first[i] : then[i - n_first];

		if (memcmp(e, own, SMCR_CLC_EID_LEN) && !listed(out, n, e))
			memcpy(out[n++], e, SMCR_CLC_EID_LEN);
	}
	memcpy(out[n++], own, SMCR_CLC_EID_LEN);
	return n;
}

int smcr_eid_len(const uint8_t eid[SMCR_CLC_EID_LEN])
{
	int n = SMCR_CLC_EID_LEN;

	while (n > 0 && eid[n - 1] == ' ')
		n--;
	return n;
}

/* ---- the kernel's table --------------------------------------------------------- */

static pthread_mutex_t kernel_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool kernel_done;
static struct smcr_genl_ueids kernel_ueids;

void smcr_eid_fork_prepare(void)
{
	pthread_mutex_lock(&kernel_mu);
}

void smcr_eid_fork_done(void)
{
	pthread_mutex_unlock(&kernel_mu);
}

static void kernel_read(struct smcr_genl_ueids *t)
{
	int64_t t0 = smcr_now_ns();
	const char *what = "no generic netlink socket";
	char names[SMCR_CLC_MAX_EIDS * (SMCR_CLC_EID_LEN + 2)] = "";
	int fd;

	memset(t, 0, sizeof(*t));
	if (!smcr_config_get()->kernel_ueid) {
		smcr_dbg("SMC-Rv2: the kernel's user EID table: not read (SMCR_KERNEL_UEID=0)");
		return;
	}
	fd = smcr_genl_open(EID_NL_TIMEOUT_MS);
	if (fd >= 0) {
		uint16_t id = smcr_genl_family(fd, SMC_GENL_FAMILY_NAME);

		what = "no " SMC_GENL_FAMILY_NAME " family (smc module not loaded)";
		if (id && smcr_genl_talk(fd, id, SMC_NETLINK_DUMP_UEID, NLM_F_DUMP,
					 smcr_genl_ueid_msg, t) == 0)
			what = NULL;
		else if (id)
			what = "the dump failed";
		smcr_genl_close(fd);
	}
	if (what) {
		t->n = 0;
		smcr_dbg("SMC-Rv2: the kernel's user EID table: none (%s)", what);
		return;
	}
	for (unsigned i = 0; i < t->n; i++)
		snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%.*s",
			 i ? ", " : "", smcr_eid_len(t->eid[i]), (const char *)t->eid[i]);
	smcr_dbg("SMC-Rv2: the kernel's user EID table: %s (%u valid, %u not; read in %lld us)",
		 t->n ? names : "empty", t->n, t->bad,
		 (long long)((smcr_now_ns() - t0) / 1000));
}

static const struct smcr_genl_ueids *kernel_table(void)
{
	if (!atomic_load_explicit(&kernel_done, memory_order_acquire)) {
		pthread_mutex_lock(&kernel_mu);
		if (!atomic_load_explicit(&kernel_done, memory_order_relaxed)) {
			kernel_read(&kernel_ueids);
			atomic_store_explicit(&kernel_done, true, memory_order_release);
		}
		pthread_mutex_unlock(&kernel_mu);
	}
	return &kernel_ueids;
}

void smcr_eid_prefetch(void)
{
	(void)kernel_table();
}

unsigned smcr_eid_list(const uint8_t own[SMCR_CLC_EID_LEN],
		       uint8_t out[SMCR_CLC_MAX_EIDS][SMCR_CLC_EID_LEN])
{
	const struct smcr_config *cfg = smcr_config_get();
	const struct smcr_genl_ueids *k = kernel_table();

	_Static_assert(SMCR_CONFIG_EID_LEN == SMCR_CLC_EID_LEN, "EID sizes");
	return smcr_eid_merge((const uint8_t(*)[SMCR_CLC_EID_LEN])cfg->ueid, cfg->n_ueids,
			      (const uint8_t(*)[SMCR_CLC_EID_LEN])k->eid, k->n, own, out);
}
