// SPDX-License-Identifier: MIT
/*
 * Device side of the verbs transport (see ib.h).
 *
 * Finding the device: the GID tables of all RDMA ports are searched for a
 * RoCE v2 entry equal to the local address (IPv4-mapped for IPv4).  That is
 * the port the kernel itself associates with the address's netdev; rxe, mlx5
 * and the rest fill these tables from the netdev's addresses.  RoCE v1 GIDs
 * are ignored: SMC-Rv1 needs them, but user space speaks SMC-Rv2 only for now
 * (soft-RoCE has no RoCE v1 GIDs at all).  One search (find_gid) serves
 * every choice, devices in name order, ports and indices ascending: the
 * order in which ibsys.c reads the same tables from sysfs for a client's
 * Proposal, so that both pick the same entry.
 */
#include "smcr/ib.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <link.h>
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/smc.h>
#include <net/if.h>
#include <pthread.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "common/log.h"
#include "smcr/libc.h"
#include "smcr/eid.h"
#include "smcr/genl.h"
#include "smcr/sys.h"

/* QP attributes as the kernel's SMC-R uses them (protocol.md §4.2). */
#define IB_ACK_TIMEOUT	 15 /* 4.096 us << 15 = 134 ms */
#define IB_RETRY_CNT	 7
#define IB_RNR_RETRY	 7 /* infinite */
#define IB_MIN_RNR_TIMER 5
#define IB_HOP_LIMIT	 64
#define IB_GID_TABLE_MAX 1024
#define IB_PAGE		 4096u
#define IB_IOVA_MASK	 0x00003ffffffff000ull /* page-aligned, below 2^46 */

int smcr_ib_addr_gid(const struct sockaddr *addr, uint8_t gid[SMCR_IB_GID_LEN])
{
	if (addr->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)addr;

		memset(gid, 0, 10);
		gid[10] = gid[11] = 0xff;
		memcpy(gid + 12, &in->sin_addr, 4);
		return 0;
	}
	if (addr->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)addr;

		memcpy(gid, &in6->sin6_addr, SMCR_IB_GID_LEN);
		return 0;
	}
	return -EAFNOSUPPORT;
}

/* The netdev's MAC from sysfs ("aa:bb:cc:dd:ee:ff\n"); zeros if unknown. */
static void read_mac(unsigned int ifindex, uint8_t mac[SMCR_IB_MAC_LEN])
{
	char ifname[IF_NAMESIZE], path[64 + IF_NAMESIZE];
	unsigned int b[SMCR_IB_MAC_LEN];
	FILE *f;

	memset(mac, 0, SMCR_IB_MAC_LEN);
	if (!if_indextoname(ifindex, ifname))
		return;
	snprintf(path, sizeof(path), "/sys/class/net/%s/address", ifname);
	f = fopen(path, "re");
	if (!f)
		return;
	if (fscanf(f, "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) == 6) {
		for (int i = 0; i < SMCR_IB_MAC_LEN; i++)
			mac[i] = (uint8_t)b[i];
	}
	fclose(f);
}

/* Which RoCE v2 entries of a GID table a search takes. */
typedef bool gid_pred(const struct ibv_gid_entry *e, const void *arg);

/*
 * The one GID table search (every device choice goes through it): the first
 * RoCE v2 entry of the open device `ctx` that `pred` takes, with index and
 * port number below 256 (CLC and the QP's sgid_index have one byte), on an
 * ACTIVE Ethernet port.  Fills the port fields and returns true if found.
 * The kernel lists the table by port, then index: ibsys.c searches sysfs in
 * the same order.
 */
static bool find_gid(struct ibv_context *ctx, gid_pred *pred, const void *arg,
		     struct smcr_ib_port *port)
{
	struct ibv_gid_entry *table = calloc(IB_GID_TABLE_MAX, sizeof(*table));
	ssize_t n;
	bool found = false;

	if (!table)
		return false;
	n = ibv_query_gid_table(ctx, table, IB_GID_TABLE_MAX, 0);
	for (ssize_t i = 0; i < n && !found; i++) {
		struct ibv_port_attr pattr;

		if (table[i].gid_type != IBV_GID_TYPE_ROCE_V2 || table[i].gid_index > UINT8_MAX ||
		    table[i].port_num > UINT8_MAX || !pred(&table[i], arg))
			continue;
		if (ibv_query_port(ctx, (uint8_t)table[i].port_num, &pattr) ||
		    pattr.state != IBV_PORT_ACTIVE ||
		    pattr.link_layer != IBV_LINK_LAYER_ETHERNET)
			continue;
		port->port_num = (uint8_t)table[i].port_num;
		port->gid_index = (uint8_t)table[i].gid_index;
		port->active_mtu = pattr.active_mtu;
		port->ifindex = table[i].ndev_ifindex;
		memcpy(port->gid, table[i].gid.raw, SMCR_IB_GID_LEN);
		found = true;
	}
	free(table);
	return found;
}

static bool gid_equal(const struct ibv_gid_entry *e, const void *gid)
{
	return !memcmp(e->gid.raw, gid, SMCR_IB_GID_LEN);
}

/*
 * Registered memory and fork: without this, a fork (popen, system) in a
 * process with live connections makes the parent's next write to a send
 * buffer or RMB page copy-on-write, and the NIC keeps using the old page:
 * seen in the rxe VM as zeros and stale bytes arriving at the peer.
 * ibv_fork_init() marks every registered range MADV_DONTFORK (the child gets
 * no copy; it never touches them: verbs.c's forget()).  Registered buffers
 * are therefore whole pages of their own (rings, slots).
 */
static void fork_init(void)
{
	int rc = ibv_fork_init();

	if (rc)
		smcr_warn("verbs: ibv_fork_init: %s; a fork may corrupt live connections",
			  strerror(rc));
}

/*
 * The providers our devices need, loaded before libibverbs' first device
 * list: rdma-core's ibverbs_get_device_list() first matches the devices
 * against the providers already registered, and loads every provider its
 * configuration lists (17 on Debian 12) only for a device none claimed.  In
 * the rxe VM that took the list from 86-233 ms to 8-28 ms.  A provider is
 * libNAME-rdmavN.so in the libibverbs/ directory beside libibverbs.so.1;
 * ibsys.c guesses NAME from sysfs.  A wrong guess costs one load; libibverbs
 * then loads every provider its configuration lists.
 */
static void load_providers(void)
{
	char names[8][SMCR_IBSYS_PROVIDER_MAX], dir[PATH_MAX];
	int n = smcr_ibsys_providers(SMCR_IBSYS_ROOT, names, 8);
	void *lib = n > 0 ? dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD) : NULL;
	struct link_map *lm = NULL;
	char *slash;

	if (!lib)
		return;
	if (dlinfo(lib, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name)
		snprintf(dir, sizeof(dir), "%s", lm->l_name);
	else
		dir[0] = '\0';
	dlclose(lib); /* (our reference: ibv.c's stays) */
	slash = strrchr(dir, '/');
	if (!slash)
		return;
	*slash = '\0';
	for (int i = 0; i < n; i++) {
		char pattern[PATH_MAX + 64];
		glob_t g;

		snprintf(pattern, sizeof(pattern), "%s/libibverbs/lib%s-rdmav*.so", dir, names[i]);
		if (glob(pattern, 0, NULL, &g) != 0)
			continue;
		/* never closed, as libibverbs never closes its providers */
		if (dlopen(g.gl_pathv[0], RTLD_NOW))
			smcr_dbg("verbs: provider %s loaded for our devices", g.gl_pathv[0]);
		else
			smcr_dbg("verbs: provider %s: %s", g.gl_pathv[0], dlerror());
		globfree(&g);
	}
}

/* libibverbs loaded (with our devices' providers) and fork-safe: 0, or -ENODEV without it. */
static int load_verbs(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT, providers_once = PTHREAD_ONCE_INIT;

	if (smcr_ibv_load())
		return -ENODEV;
	pthread_once(&providers_once, load_providers);
	pthread_once(&once, fork_init);
	return 0;
}

#define IB_DEV_DIR "/dev/infiniband"

/*
 * Watch the device's uverbs node: an inotify fd on its directory that
 * becomes readable when the node is deleted.  Best effort (no inotify, no
 * such directory: removal is then noticed only through the QPs).
 */
static void watch_removal(struct smcr_ib_port *port, const char *dev_name)
{
	int fd = smcr_libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC);

	port->removal_fd = -1;
	snprintf(port->dev_name, sizeof(port->dev_name), "%s", dev_name);
	if (fd < 0)
		return;
	fd = smcr_sys_fd_high(fd);
	if (inotify_add_watch(fd, IB_DEV_DIR, IN_DELETE | IN_DELETE_SELF | IN_MOVED_FROM) < 0) {
		smcr_sys_close(fd);
		return;
	}
	port->removal_fd = fd;
}

bool smcr_ib_port_removed(struct smcr_ib_port *port)
{
	union {
		struct inotify_event ev;
		char buf[4096];
	} u;
	ssize_t n;

	while (!port->removed && port->removal_fd >= 0 &&
	       (n = smcr_libc.read(port->removal_fd, u.buf, sizeof(u.buf))) > 0) {
		for (ssize_t off = 0; off + (ssize_t)sizeof(struct inotify_event) <= n;) {
			const struct inotify_event *ev = (const void *)(u.buf + off);

			if ((ev->mask & (IN_DELETE_SELF | IN_IGNORED)) ||
			    (ev->len && !strcmp(ev->name, port->dev_name)))
				port->removed = true;
			off += (ssize_t)sizeof(*ev) + ev->len;
		}
	}
	return port->removed;
}

int smcr_ib_watch_additions(void)
{
	int fd = smcr_libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC);

	if (fd < 0)
		return -1;
	fd = smcr_sys_fd_high(fd);
	if (inotify_add_watch(fd, IB_DEV_DIR, IN_CREATE | IN_MOVED_TO) < 0) {
		smcr_sys_close(fd);
		return -1;
	}
	return fd;
}

bool smcr_ib_additions_read(int fd)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool added = false;
	ssize_t n;

	while (fd >= 0 && (n = smcr_libc.read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t off = 0; off + (ssize_t)sizeof(struct inotify_event) <= n;) {
			const struct inotify_event *ev = (const void *)(buf + off);

			added |= (ev->mask & (IN_CREATE | IN_MOVED_TO)) != 0;
			off += (ssize_t)sizeof(*ev) + ev->len;
		}
	return added;
}

static int dev_name_cmp(const void *a, const void *b)
{
	return strcmp(ibv_get_device_name(*(struct ibv_device *const *)a),
		      ibv_get_device_name(*(struct ibv_device *const *)b));
}

/*
 * Open the first device, in name order (as ibsys.c walks sysfs), whose name
 * `want` takes (NULL: any) and whose GID table has an entry `pred` takes;
 * then its protection domain and MAC.  0 and *out, -ENODEV, other -errno.
 */
static int open_first(bool (*want)(const char *name, const void *arg), const void *want_arg,
		      gid_pred *pred, const void *pred_arg, struct smcr_ib_port **out)
{
	struct ibv_device **list;
	struct smcr_ib_port *port;
	int n = 0, rc;

	if (load_verbs())
		return -ENODEV; /* no libibverbs on this machine: no device either */
	port = calloc(1, sizeof(*port));
	if (!port)
		return -ENOMEM;
	port->removal_fd = -1;
	list = ibv_get_device_list(&n);
	if (!list) {
		free(port);
		return -ENODEV;
	}
	qsort(list, (size_t)n, sizeof(*list), dev_name_cmp);
	for (int i = 0; i < n && !port->ctx; i++) {
		struct ibv_context *ctx;

		if (want && !want(ibv_get_device_name(list[i]), want_arg))
			continue;
		ctx = ibv_open_device(list[i]);
		if (!ctx)
			continue;
		if (find_gid(ctx, pred, pred_arg, port)) {
			port->ctx = ctx;
			snprintf(port->name, sizeof(port->name), "%s",
				 ibv_get_device_name(list[i]));
			watch_removal(port, list[i]->dev_name);
		} else {
			ibv_close_device(ctx);
		}
	}
	ibv_free_device_list(list);
	rc = -ENODEV;
	if (!port->ctx)
		goto fail;
	/*
	 * Its async events are read under a group's mutex by whoever services
	 * the group (smcr_lgr_device_events_locked): a blocking read there held the
	 * mutex until the device's next event, so the link-group worker, finding nothing
	 * on a server's second device reserved at the Accept, stalled that
	 * connection's handshake (rxe-link2 (e), TEST LINK unanswered).
	 */
	if (smcr_libc.fcntl(port->ctx->async_fd, F_SETFL,
			    smcr_libc.fcntl(port->ctx->async_fd, F_GETFL) | O_NONBLOCK) < 0) {
		rc = -errno;
		goto fail;
	}
	port->pd = ibv_alloc_pd(port->ctx);
	if (!port->pd) {
		rc = -errno;
		goto fail;
	}
	read_mac(port->ifindex, port->mac);
	*out = port;
	return 0;
fail:
	smcr_ib_port_close(port);
	return rc;
}

int smcr_ib_port_open(const struct sockaddr *local, struct smcr_ib_port **out)
{
	uint8_t gid[SMCR_IB_GID_LEN];
	int rc = smcr_ib_addr_gid(local, gid);

	return rc ? rc : open_first(NULL, NULL, gid_equal, gid, out);
}

/* ibsys.c's choice, as verbs sees it: that device, port and index, the same GID. */
struct at_arg {
	const struct smcr_ibsys_gid *at;
	const uint8_t *gid;
};

static bool is_at_dev(const char *name, const void *arg)
{
	return !strcmp(name, ((const struct at_arg *)arg)->at->dev);
}

static bool is_at_entry(const struct ibv_gid_entry *e, const void *arg)
{
	const struct at_arg *a = arg;

	return e->port_num == a->at->port_num && e->gid_index == a->at->gid_index &&
	       gid_equal(e, a->gid);
}

int smcr_ib_port_open_at(const struct smcr_ibsys_gid *at, const uint8_t gid[SMCR_IB_GID_LEN],
			 struct smcr_ib_port **out)
{
	struct at_arg a = { .at = at, .gid = gid };
	struct smcr_ib_port *port;
	int rc = open_first(is_at_dev, &a, is_at_entry, &a, &port);

	if (rc == -ENODEV && !load_verbs()) {
		smcr_warn("verbs: %s port %u has no RoCE v2 GID at index %u any more: the "
			  "Proposal named it", at->dev, at->port_num, at->gid_index);
		return -ESTALE;
	}
	if (rc)
		return rc;
	if (memcmp(port->mac, at->mac, SMCR_IB_MAC_LEN)) {
		smcr_warn("verbs: %s's GID %u is on another netdev (MAC) than the Proposal said",
			  at->dev, at->gid_index);
		smcr_ib_port_close(port);
		return -ESTALE;
	}
	*out = port;
	return 0;
}

/* The address for a GID: IPv4-mapped GIDs as IPv4. */
static void gid_addr(const uint8_t gid[SMCR_IB_GID_LEN], struct sockaddr_storage *ss,
		     socklen_t *len)
{
	memset(ss, 0, sizeof(*ss));
	if (!memcmp(gid, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12)) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;

		in->sin_family = AF_INET;
		in->sin_port = htons(4791);
		memcpy(&in->sin_addr, gid + 12, 4);
		*len = sizeof(*in);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(4791);
		memcpy(&in6->sin6_addr, gid, SMCR_IB_GID_LEN);
		*len = sizeof(*in6);
	}
}

int smcr_ib_port_open_alt(const struct smcr_ib_port *primary,
			  const uint8_t peer_gid[SMCR_IB_GID_LEN], struct smcr_ib_port **out)
{
	struct sockaddr_storage peer, own;
	socklen_t len, own_len = sizeof(own);
	struct smcr_ib_port *p;
	int fd, rc;

	/* the local address routing picks for the peer's new GID (a UDP connect sends nothing) */
	gid_addr(peer_gid, &peer, &len);
	fd = smcr_libc.socket(peer.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	rc = smcr_libc.connect(fd, (struct sockaddr *)&peer, len) ||
			     smcr_libc.getsockname(fd, (struct sockaddr *)&own, &own_len)
		     ? -errno
		     : 0;
	smcr_sys_close(fd);
	if (rc)
		return rc;
	rc = smcr_ib_port_open((struct sockaddr *)&own, &p);
	if (rc)
		return rc;
	if (!strcmp(p->name, primary->name)) { /* the same device: no alternate path */
		smcr_ib_port_close(p);
		return -ENODEV;
	}
	*out = p;
	return 0;
}

/* The address a GID stands for, as bytes (4 for IPv4-mapped, else 16); its family. */
static int gid_bytes(const uint8_t gid[SMCR_IB_GID_LEN], const uint8_t **a, size_t *len)
{
	if (!memcmp(gid, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12)) {
		*a = gid + 12, *len = 4;
		return AF_INET;
	}
	*a = gid, *len = SMCR_IB_GID_LEN;
	return AF_INET6;
}

/*
 * Is `gid` an address of ours whose interface also puts `own_gid` in its
 * subnet (same family; the address with its own prefix)?
 */
static bool gid_in_subnet(const struct ifaddrs *ifs, const uint8_t gid[SMCR_IB_GID_LEN],
			  const uint8_t own_gid[SMCR_IB_GID_LEN])
{
	const uint8_t *a, *o;
	size_t alen, olen;
	int fam = gid_bytes(gid, &a, &alen);

	if (gid_bytes(own_gid, &o, &olen) != fam || !memcmp(gid, own_gid, SMCR_IB_GID_LEN))
		return false;
	for (const struct ifaddrs *i = ifs; i; i = i->ifa_next) {
		const uint8_t *ia, *im;
		bool match = true;

		if (!i->ifa_addr || !i->ifa_netmask || i->ifa_addr->sa_family != fam)
			continue;
		if (fam == AF_INET) {
			ia = (const uint8_t *)&((const struct sockaddr_in *)(const void *)i->ifa_addr)->sin_addr;
			im = (const uint8_t *)&((const struct sockaddr_in *)(const void *)i->ifa_netmask)->sin_addr;
		} else {
			ia = ((const struct sockaddr_in6 *)(const void *)i->ifa_addr)->sin6_addr.s6_addr;
			im = ((const struct sockaddr_in6 *)(const void *)i->ifa_netmask)->sin6_addr.s6_addr;
		}
		if (memcmp(ia, a, alen))
			continue;
		for (size_t k = 0; k < alen; k++)
			match &= ((a[k] ^ o[k]) & im[k]) == 0;
		if (match)
			return true;
	}
	return false;
}

/* ---- the kernel's PNET table (which devices belong together) ---------------------- */

#define PNET_MAX 32

struct pnet_entry {
	char ibname[IBV_SYSFS_NAME_MAX];
	char pnetid[17]; /* the kernel's SMC_MAX_PNETID_LEN 16 */
};

struct pnet_table {
	struct pnet_entry e[PNET_MAX];
	unsigned n;
};

static void pnet_msg(const uint8_t *attrs, size_t len, void *arg)
{
	struct pnet_table *t = arg;
	struct pnet_entry e;
	const uint8_t *data;
	uint16_t type;
	size_t dlen;

	memset(&e, 0, sizeof(e));
	while (smcr_genl_attr(&attrs, &len, &type, &data, &dlen)) {
		if (type == SMC_PNETID_NAME)
			smcr_genl_str(data, dlen, e.pnetid, sizeof(e.pnetid));
		else if (type == SMC_PNETID_IBNAME)
			smcr_genl_str(data, dlen, e.ibname, sizeof(e.ibname));
	}
	if (e.ibname[0] && e.pnetid[0] && t->n < PNET_MAX)
		t->e[t->n++] = e;
}

/*
 * The kernel's PNET table (smc_nl pnet): which RDMA devices share a physical
 * network.  Empty without the smc module, without privilege (its dump is
 * for CAP_NET_ADMIN) or without entries.
 */
static void pnet_read(struct pnet_table *t)
{
	int fd = smcr_genl_open(1000);
	uint16_t id;

	t->n = 0;
	if (fd < 0)
		return;
	id = smcr_genl_family(fd, SMCR_GENL_FAMILY_NAME);
	if (id)
		(void)smcr_genl_talk(fd, id, SMC_PNETID_GET, NLM_F_DUMP, pnet_msg, t);
	smcr_genl_close(fd);
}

static const char *pnet_of(const struct pnet_table *t, const char *ibname)
{
	for (unsigned i = 0; i < t->n; i++)
		if (!strcmp(t->e[i].ibname, ibname))
			return t->e[i].pnetid;
	return NULL;
}

/* An alternate device: not the first one's, and of its PNET id if it has one. */
struct subnet_arg {
	const struct smcr_ib_port *primary;
	const uint8_t *peer_gid;
	const struct pnet_table *pn; /* NULL: no table */
	const char *pnetid;          /* the first device's; NULL: none */
	const struct ifaddrs *ifs;
};

static bool is_alt_dev(const char *name, const void *arg)
{
	const struct subnet_arg *a = arg;
	const char *dp;

	if (!strcmp(name, a->primary->name))
		return false;
	dp = a->pn ? pnet_of(a->pn, name) : NULL;
	return !a->pnetid || (dp && !strcmp(dp, a->pnetid));
}

/* Not the peer's GID, and an address of ours in the subnet of the first link's. */
static bool is_alt_entry(const struct ibv_gid_entry *e, const void *arg)
{
	const struct subnet_arg *a = arg;

	return !gid_equal(e, a->peer_gid) && gid_in_subnet(a->ifs, e->gid.raw, a->primary->gid);
}

int smcr_ib_port_open_subnet(const struct smcr_ib_port *primary,
			     const uint8_t peer_gid[SMCR_IB_GID_LEN], struct smcr_ib_port **out)
{
	struct subnet_arg a = { .primary = primary, .peer_gid = peer_gid };
	struct ifaddrs *ifs = NULL;
	struct pnet_table *pn;
	int rc;

	if (load_verbs() || getifaddrs(&ifs) < 0)
		return -ENODEV;
	a.ifs = ifs;
	/* as the kernel: an alternate device shares the first one's PNET id, if it has one */
	pn = calloc(1, sizeof(*pn));
	if (pn) {
		pnet_read(pn);
		a.pn = pn;
		a.pnetid = pnet_of(pn, primary->name);
	}
	rc = open_first(is_alt_dev, &a, is_alt_entry, &a, out);
	free(pn);
	freeifaddrs(ifs);
	return rc;
}

void smcr_ib_port_close(struct smcr_ib_port *port)
{
	if (!port)
		return;
	smcr_sys_close(port->removal_fd);
	if (port->pd)
		ibv_dealloc_pd(port->pd);
	if (port->ctx)
		ibv_close_device(port->ctx);
	free(port);
}

struct ibv_mr *smcr_ib_reg_rmb(struct smcr_ib_port *port, void *buf, size_t len,
			       uint64_t *iova)
{
	uint64_t r = 0;

	if (((uintptr_t)buf & (IB_PAGE - 1)) != 0) {
		errno = EINVAL;
		return NULL;
	}
	if (smcr_sys_random(&r, sizeof(r)) < 0)
		return NULL;
	/* same page offset as buf (0), room below 2^47 for any ring */
	*iova = (r & IB_IOVA_MASK) | IB_PAGE;
	/* Never REMOTE_READ or atomics: a peer may only fill our ring (design §7). */
	return ibv_reg_mr_iova2(port->pd, buf, len, *iova,
				IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
}

struct ibv_mr *smcr_ib_reg_source(struct smcr_ib_port *port, void *buf, size_t len)
{
	return ibv_reg_mr(port->pd, buf, len, 0);
}

struct ibv_mr *smcr_ib_reg_sink(struct smcr_ib_port *port, void *buf, size_t len)
{
	return ibv_reg_mr(port->pd, buf, len, IBV_ACCESS_LOCAL_WRITE);
}

struct ibv_qp *smcr_ib_qp_create(struct smcr_ib_port *port, struct ibv_cq *send_cq,
				 struct ibv_cq *recv_cq, uint32_t max_send_wr,
				 uint32_t max_recv_wr)
{
	struct ibv_qp_init_attr init = {
		.send_cq = send_cq,
		.recv_cq = recv_cq,
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 0, /* only CDC/LLC SENDs are signaled; they retire the WRITEs */
		.cap = { .max_send_wr = max_send_wr,
			 .max_recv_wr = max_recv_wr,
			 .max_send_sge = 2,
			 .max_recv_sge = 2 }, /* slot + the v2 overflow (wr.c) */
	};
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = port->port_num,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
	};
	struct ibv_qp *qp = ibv_create_qp(port->pd, &init);

	if (!qp)
		return NULL;
	if (ibv_modify_qp(qp, &attr,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
		int err = errno;

		ibv_destroy_qp(qp);
		errno = err;
		return NULL;
	}
	return qp;
}

int smcr_ib_qp_connect(struct smcr_ib_port *port, struct ibv_qp *qp,
		       const struct smcr_ib_qp_info *peer, uint32_t own_psn)
{
	struct ibv_qp_attr rtr = {
		.qp_state = IBV_QPS_RTR,
		.dest_qp_num = peer->qpn & 0xffffffu,
		.rq_psn = peer->psn & 0xffffffu,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = IB_MIN_RNR_TIMER,
		.ah_attr = {
			.is_global = 1,
			.port_num = port->port_num,
			.grh = { .sgid_index = port->gid_index, .hop_limit = IB_HOP_LIMIT },
		},
	};
	struct ibv_qp_attr rts = {
		.qp_state = IBV_QPS_RTS,
		.timeout = IB_ACK_TIMEOUT,
		.retry_cnt = IB_RETRY_CNT,
		.rnr_retry = IB_RNR_RETRY,
		.sq_psn = own_psn & 0xffffffu,
		.max_rd_atomic = 1,
	};

	if (peer->mtu < IBV_MTU_256 || peer->mtu > IBV_MTU_4096)
		return -EINVAL;
	/* the smaller of the two ends' MTUs: both sides compute the same */
	rtr.path_mtu = peer->mtu < port->active_mtu ? (enum ibv_mtu)peer->mtu : port->active_mtu;
	memcpy(rtr.ah_attr.grh.dgid.raw, peer->gid, SMCR_IB_GID_LEN);
	if (ibv_modify_qp(qp, &rtr,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER))
		return -errno;
	if (ibv_modify_qp(qp, &rts,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		return -errno;
	return 0;
}

int smcr_ib_qp_error(struct ibv_qp *qp)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };

	return ibv_modify_qp(qp, &attr, IBV_QP_STATE) ? -errno : 0;
}

uint32_t smcr_ib_random_psn(void)
{
	uint32_t psn = 0;

	if (smcr_sys_random(&psn, sizeof(psn)) < 0)
		psn = (uint32_t)smcr_now_ms();
	return psn & 0xffffffu;
}

/* ---- loading ahead --------------------------------------------------------------- */

/*
 * Held while the loader thread works, and by fork (atfork): a child never
 * inherits libibverbs or the dynamic linker half-way through loading.
 */
static pthread_mutex_t prep_mu = PTHREAD_MUTEX_INITIALIZER;

void smcr_ib_fork_prepare(void)
{
	pthread_mutex_lock(&prep_mu);
}

void smcr_ib_fork_done(void)
{
	pthread_mutex_unlock(&prep_mu);
}

static void *prep_thread(void *arg)
{
	int64_t t0 = smcr_now_ns();
	int n = -1;

	(void)arg;
	smcr_foreign_enter(); /* libibverbs' own calls pass the embedder's wrappers untouched */
	/*
	 * First the kernel's UEID table, which every SMC-Rv2 handshake needs (a
	 * client's Proposal leaves before libibverbs is loaded).  Not under
	 * prep_mu: a fork takes both locks (atfork), so nobody may hold one
	 * while waiting for the other.
	 */
	smcr_eid_prefetch();
	pthread_mutex_lock(&prep_mu);
	if (load_verbs() == 0) {
		/* the first device list loads every provider library: the slow part */
		struct ibv_device **list = ibv_get_device_list(&n);

		if (list)
			ibv_free_device_list(list);
	}
	pthread_mutex_unlock(&prep_mu);
	smcr_dbg("verbs: libibverbs and its providers loaded ahead (%d devices) in %lld us", n,
		 (long long)((smcr_now_ns() - t0) / 1000));
	return NULL;
}

static void prep_start(void)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t t;

	if (!smcr_ibsys_have_devices(SMCR_IBSYS_ROOT))
		return;
	sigfillset(&all);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (pthread_create(&t, &attr, prep_thread, NULL) != 0)
		smcr_dbg("verbs: no thread to load libibverbs ahead; the first SMC-R connection will");
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
}

void smcr_ib_prepare(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, prep_start);
}
