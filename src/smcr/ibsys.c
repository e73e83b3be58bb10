// SPDX-License-Identifier: MIT
/*
 * RDMA devices from sysfs, without libibverbs (see ibsys.h).
 *
 * Cost: one small file per GID table entry (openat, read, close), up to 256
 * per ACTIVE Ethernet port (an entry above index 255 is never ours: CLC has
 * no room for it, ib.c skips it too); the type and netdev files only for the
 * entry that matches.  The files are read through smcr_libc (the engine
 * never calls a wrapped name), relative to a directory fd per port.
 */
#include "smcr/ibsys.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "smcr/libc.h"
#include "smcr/sys.h"

#define IBSYS_MAX_DEVS	64
#define IBSYS_MAX_PORTS 255
#define IBSYS_MAX_INDEX 255

/*
 * A small text file `name` under directory fd `dir` into buf, NUL-terminated,
 * trailing newline removed.  Its length, or -1 (missing, unreadable: the
 * kernel fails the read of an unused entry's type with EINVAL).
 */
static ssize_t read_small(int dir, const char *name, char *buf, size_t cap)
{
	int fd = smcr_libc.openat(dir, name, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = smcr_libc.read(fd, buf, cap - 1);
	smcr_sys_close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return n;
}

static int open_dir(int dir, const char *path)
{
	return smcr_libc.openat(dir, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* The names in `path` that do not start with '.', sorted (strcmp); count or -1. */
static int list_sorted(const char *path, char names[][SMCR_IBSYS_NAME_MAX], int max)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while (n < max && (e = readdir(d))) {
		if (e->d_name[0] == '.' || strlen(e->d_name) >= SMCR_IBSYS_NAME_MAX)
			continue;
		snprintf(names[n++], SMCR_IBSYS_NAME_MAX, "%s", e->d_name);
	}
	closedir(d);
	qsort(names, (size_t)n, SMCR_IBSYS_NAME_MAX, name_cmp);
	return n;
}

/* "4: ACTIVE" and "Ethernet": a port verbs would take (ib.c: IBV_PORT_ACTIVE, Ethernet). */
static bool port_usable(int port_dir)
{
	char buf[64];

	if (read_small(port_dir, "state", buf, sizeof(buf)) < 0 || atoi(buf) != 4)
		return false;
	return read_small(port_dir, "link_layer", buf, sizeof(buf)) >= 0 &&
	       !strcmp(buf, "Ethernet");
}

/* The netdev's MAC from class/net/NDEV/address ("aa:bb:cc:dd:ee:ff"); zeros if unknown. */
static void read_mac(int net_dir, const char *ndev, uint8_t mac[6])
{
	char path[IF_NAMESIZE + 16], buf[64];
	unsigned int b[6];

	memset(mac, 0, 6);
	snprintf(path, sizeof(path), "%s/address", ndev);
	if (net_dir < 0 || !ndev[0] || read_small(net_dir, path, buf, sizeof(buf)) < 0 ||
	    sscanf(buf, "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) != 6)
		return;
	for (int i = 0; i < 6; i++)
		mac[i] = (uint8_t)b[i];
}

/*
 * The index of the first RoCE v2 entry equal to `gid` in the port's table
 * (gids/I, gid_attrs/types/I), filling out->ndev; -1 if none.
 */
static int port_find(int port_dir, const uint8_t gid[16], struct smcr_ibsys_gid *out)
{
	int gids = open_dir(port_dir, "gids");
	int found = -1;

	if (gids < 0)
		return -1;
	for (int i = 0; i <= IBSYS_MAX_INDEX && found < 0; i++) {
		char name[16], path[48], buf[64];
		struct in6_addr a;

		snprintf(name, sizeof(name), "%d", i);
		if (read_small(gids, name, buf, sizeof(buf)) < 0) {
			if (errno == ENOENT)
				break; /* past the table's end */
			continue;
		}
		/* "0000:0000:0000:0000:0000:ffff:0a4d:0001": an IPv6 literal */
		if (inet_pton(AF_INET6, buf, &a) != 1 || memcmp(a.s6_addr, gid, 16))
			continue;
		snprintf(path, sizeof(path), "gid_attrs/types/%d", i);
		if (read_small(port_dir, path, buf, sizeof(buf)) < 0 || strcmp(buf, "RoCE v2"))
			continue;
		snprintf(path, sizeof(path), "gid_attrs/ndevs/%d", i);
		if (read_small(port_dir, path, out->ndev, sizeof(out->ndev)) < 0)
			out->ndev[0] = '\0';
		found = i;
	}
	smcr_sys_close(gids);
	return found;
}

/* The port numbers under `path` (1..255), ascending; count or -1. */
static int list_ports(const char *path, int nums[IBSYS_MAX_PORTS])
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while (n < IBSYS_MAX_PORTS && (e = readdir(d))) {
		int p = atoi(e->d_name);

		if (p >= 1 && p <= IBSYS_MAX_PORTS)
			nums[n++] = p;
	}
	closedir(d);
	for (int i = 1; i < n; i++) /* insertion sort: a handful of ports */
		for (int j = i; j > 0 && nums[j - 1] > nums[j]; j--) {
			int t = nums[j];

			nums[j] = nums[j - 1];
			nums[j - 1] = t;
		}
	return n;
}

/* The first usable port of the device at `dev_path` holding the GID. */
static bool dev_find(const char *dev_path, const uint8_t gid[16], struct smcr_ibsys_gid *out)
{
	char path[PATH_MAX + 32];
	int nums[IBSYS_MAX_PORTS], n;
	bool found = false;

	snprintf(path, sizeof(path), "%s/ports", dev_path);
	n = list_ports(path, nums);
	for (int i = 0; i < n && !found; i++) {
		int port_dir, idx;

		snprintf(path, sizeof(path), "%s/ports/%d", dev_path, nums[i]);
		port_dir = open_dir(AT_FDCWD, path);
		if (port_dir < 0)
			continue;
		if (port_usable(port_dir) && (idx = port_find(port_dir, gid, out)) >= 0) {
			out->port_num = (uint8_t)nums[i];
			out->gid_index = (uint8_t)idx;
			found = true;
		}
		smcr_sys_close(port_dir);
	}
	return found;
}

int smcr_ibsys_find_gid(const char *sysfs, const uint8_t gid[16], struct smcr_ibsys_gid *out)
{
	char path[PATH_MAX - 2 * SMCR_IBSYS_NAME_MAX], dev_path[PATH_MAX];
	char (*devs)[SMCR_IBSYS_NAME_MAX];
	int n, rc = -ENODEV;

	memset(out, 0, sizeof(*out));
	snprintf(path, sizeof(path), "%s/class/infiniband", sysfs);
	devs = calloc(IBSYS_MAX_DEVS, SMCR_IBSYS_NAME_MAX);
	if (!devs)
		return -ENOMEM;
	n = list_sorted(path, devs, IBSYS_MAX_DEVS);
	for (int i = 0; i < n && rc; i++) {
		snprintf(dev_path, sizeof(dev_path), "%s/%s", path, devs[i]);
		if (dev_find(dev_path, gid, out)) {
			snprintf(out->dev, sizeof(out->dev), "%s", devs[i]);
			rc = 0;
		}
	}
	free(devs);
	if (rc == 0) {
		int net_dir;

		snprintf(path, sizeof(path), "%s/class/net", sysfs);
		net_dir = open_dir(AT_FDCWD, path);
		read_mac(net_dir, out->ndev, out->mac);
		smcr_sys_close(net_dir);
	}
	return rc;
}

/* Kernel drivers whose libibverbs provider has another name. */
static const struct {
	const char *kernel, *provider;
} provider_names[] = {
	/* the parent is the PCI function, or an auxiliary device of it (newer kernels) */
	{ "mlx5_core", "mlx5" }, { "mlx5_ib", "mlx5" },	   { "mlx4_core", "mlx4" },
	{ "ib_mthca", "mthca" }, { "bnxt_en", "bnxt_re" }, { "qede", "qedr" },
	{ "hns3", "hns" },	 { "hns_roce_hw_v2", "hns" }, { "mana_ib", "mana" },
	{ "hfi1", "hfi1verbs" }, { "ib_qib", "ipathverbs" }, { "be2net", "ocrdma" },
};

/* Device `dev`'s provider name into out (cap bytes); false if no guess. */
static bool provider_of(const char *ib_path, const char *dev, char *out, size_t cap)
{
	char path[PATH_MAX], link[PATH_MAX];
	const char *base;
	ssize_t n;
	size_t k;

	snprintf(path, sizeof(path), "%s/%s/device/driver", ib_path, dev);
	n = readlink(path, link, sizeof(link) - 1);
	if (n > 0) {
		link[n] = '\0';
		base = strrchr(link, '/') ? strrchr(link, '/') + 1 : link;
		for (size_t i = 0; i < sizeof(provider_names) / sizeof(provider_names[0]); i++)
			if (!strcmp(base, provider_names[i].kernel)) {
				if (strlen(provider_names[i].provider) >= cap)
					return false;
				memcpy(out, provider_names[i].provider,
				       strlen(provider_names[i].provider) + 1);
				return true;
			}
		if (!base[0] || strlen(base) >= cap)
			return false;
		memcpy(out, base, strlen(base) + 1);
		return true;
	}
	/* a software device (rxe0, siw0): no parent device; libibverbs matches its name */
	for (k = 0; k + 1 < cap && dev[k] >= 'a' && dev[k] <= 'z'; k++)
		out[k] = dev[k];
	out[k] = '\0';
	return k > 0;
}

int smcr_ibsys_providers(const char *sysfs, char names[][SMCR_IBSYS_PROVIDER_MAX], int max)
{
	char path[PATH_MAX - 2 * SMCR_IBSYS_NAME_MAX];
	char (*devs)[SMCR_IBSYS_NAME_MAX];
	int n, count = 0;

	snprintf(path, sizeof(path), "%s/class/infiniband", sysfs);
	devs = calloc(IBSYS_MAX_DEVS, SMCR_IBSYS_NAME_MAX);
	if (!devs)
		return 0;
	n = list_sorted(path, devs, IBSYS_MAX_DEVS);
	for (int i = 0; i < n && count < max; i++) {
		char name[SMCR_IBSYS_PROVIDER_MAX];
		bool dup = false;

		if (!provider_of(path, devs[i], name, sizeof(name)))
			continue;
		for (int j = 0; j < count && !dup; j++)
			dup = !strcmp(names[j], name);
		if (!dup)
			snprintf(names[count++], SMCR_IBSYS_PROVIDER_MAX, "%s", name);
	}
	free(devs);
	return count;
}

bool smcr_ibsys_have_devices(const char *sysfs)
{
	char path[4096];
	struct dirent *e;
	bool any = false;
	DIR *d;

	snprintf(path, sizeof(path), "%s/class/infiniband", sysfs);
	d = opendir(path);
	if (!d)
		return false;
	while (!any && (e = readdir(d)))
		any = e->d_name[0] != '.';
	closedir(d);
	return any;
}
