/* SPDX-License-Identifier: MIT */
/*
 * The RoCE v2 GID lookup from sysfs (src/smcr/ibsys.c) against a fake sysfs
 * tree in a temporary directory, as the kernel lays it out: the entry chosen
 * for an IPv4 address (IPv4-mapped) and an IPv6 one, skipping RoCE v1
 * entries of the same GID (a device with no RoCE v2 GID at all, and a v1
 * entry before the v2 one on the right device), a port that is down, an
 * InfiniBand port, ports in numeric order, devices in name order, unused entries (no type file), and
 * the MAC of the entry's netdev.  Each case names the device, port, index
 * and MAC it must get, so a wrong choice fails.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <sys/stat.h>
#include <unistd.h>

#include "smcr/ibsys.h"

static char root[64];

static void put(const char *rel, const char *text)
{
	char path[512], dir[512], *slash;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	/* mkdir -p of the file's directory */
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	*slash = '\0';
	for (char *p = dir + strlen(root) + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		mkdir(dir, 0700);
		*p = '/';
	}
	mkdir(dir, 0700);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "%s\n", text);
	fclose(f);
}

/* The kernel's spelling of a GID: eight groups of four hex digits. */
static void gid_text(const char *addr, char out[40])
{
	uint8_t g[16];

	memset(g, 0, sizeof(g));
	if (strchr(addr, ':')) {
		assert_int_equal(inet_pton(AF_INET6, addr, g), 1);
	} else {
		g[10] = g[11] = 0xff;
		assert_int_equal(inet_pton(AF_INET, addr, g + 12), 1);
	}
	snprintf(out, 40, "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x",
		 g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11], g[12],
		 g[13], g[14], g[15]);
}

static void gid_bin(const char *addr, uint8_t g[16])
{
	memset(g, 0, 16);
	if (strchr(addr, ':')) {
		assert_int_equal(inet_pton(AF_INET6, addr, g), 1);
	} else {
		g[10] = g[11] = 0xff;
		assert_int_equal(inet_pton(AF_INET, addr, g + 12), 1);
	}
}

/* One GID table entry; type NULL: an unused entry (zeros, no type or netdev file). */
static void entry(const char *dev, int port, int idx, const char *addr, const char *type,
		  const char *ndev)
{
	char rel[256], gid[40];

	if (addr)
		gid_text(addr, gid);
	else
		snprintf(gid, sizeof(gid), "0000:0000:0000:0000:0000:0000:0000:0000");
	snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/%d/gids/%d", dev, port, idx);
	put(rel, gid);
	if (!type)
		return;
	snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/%d/gid_attrs/types/%d", dev, port,
		 idx);
	put(rel, type);
	snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/%d/gid_attrs/ndevs/%d", dev, port,
		 idx);
	put(rel, ndev);
}

static void port(const char *dev, int p, const char *state, const char *link_layer)
{
	char rel[256];

	snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/%d/state", dev, p);
	put(rel, state);
	snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/%d/link_layer", dev, p);
	put(rel, link_layer);
}

#define V1 "IB/RoCE v1"
#define V2 "RoCE v2"

static int setup(void **state)
{
	(void)state;
	snprintf(root, sizeof(root), "/tmp/smcr-ibsys-XXXXXX");
	assert_non_null(mkdtemp(root));

	/* a device with 10.77.0.1 as RoCE v1 only; it sorts first */
	port("mlx4_0", 1, "4: ACTIVE", "Ethernet");
	entry("mlx4_0", 1, 0, "fe80::1", V1, "eth9");
	entry("mlx4_0", 1, 1, "10.77.0.1", V1, "eth9");
	entry("mlx4_0", 1, 2, NULL, NULL, NULL);
	put("class/net/eth9/address", "02:00:00:00:00:09");

	/* an IPv6 GID ending like ::ffff:10.77.0.1: only all 16 bytes tell them apart */
	port("aab0", 1, "4: ACTIVE", "Ethernet");
	entry("aab0", 1, 0, "fd77::a4d:1", V2, "eth9");

	/* rxe0 on veth0: the usual default GIDs, then v1 before v2 for each address */
	port("rxe0", 1, "4: ACTIVE", "Ethernet");
	entry("rxe0", 1, 0, "fe80::5054:ff:fe12:3456", V1, "veth0");
	entry("rxe0", 1, 1, "fe80::5054:ff:fe12:3456", V2, "veth0");
	entry("rxe0", 1, 2, "10.77.0.1", V1, "veth0");
	entry("rxe0", 1, 3, "10.77.0.1", V2, "veth0");
	entry("rxe0", 1, 4, NULL, NULL, NULL); /* a hole left by a removed address */
	entry("rxe0", 1, 5, "fd77::1", V1, "veth0");
	entry("rxe0", 1, 6, "fd77::1", V2, "veth0");
	entry("rxe0", 1, 7, NULL, NULL, NULL);
	put("class/net/veth0/address", "52:54:00:12:34:56");

	/* 10.77.0.9: on a DOWN port of aaa0, an InfiniBand port of bbb0, port 10 of rxe9 */
	port("aaa0", 1, "1: DOWN", "Ethernet");
	entry("aaa0", 1, 0, "10.77.0.9", V2, "veth9");
	port("bbb0", 1, "4: ACTIVE", "InfiniBand");
	entry("bbb0", 1, 0, "10.77.0.9", V2, "veth9");
	port("rxe9", 2, "4: ACTIVE", "Ethernet");
	entry("rxe9", 2, 0, "10.77.0.8", V2, "veth8");
	port("rxe9", 10, "4: ACTIVE", "Ethernet");
	entry("rxe9", 10, 0, "10.77.0.9", V2, "veth9");
	port("rxe9", 3, "4: ACTIVE", "Ethernet");
	entry("rxe9", 3, 0, NULL, NULL, NULL);
	entry("rxe9", 3, 1, "10.77.0.9", V2, "veth8");
	put("class/net/veth9/address", "aa:bb:cc:dd:ee:09");
	/* 10.77.0.4 as RoCE v2 on two devices (one netdev bonded under both?): name order */
	port("rxe5", 1, "4: ACTIVE", "Ethernet");
	entry("rxe5", 1, 0, "10.77.0.4", V2, "veth9");
	port("rxe4", 1, "4: ACTIVE", "Ethernet");
	entry("rxe4", 1, 0, NULL, NULL, NULL);
	entry("rxe4", 1, 1, "10.77.0.4", V2, "veth8");
	port("rxe40", 1, "4: ACTIVE", "Ethernet");
	entry("rxe40", 1, 0, "10.77.0.4", V2, "veth9");
	put("class/net/veth8/address", "aa:bb:cc:dd:ee:08");
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd) == 0 ? 0 : -1;
}

static void expect(const char *addr, const char *dev, int port_num, int idx, const char *ndev,
		   const char *mac)
{
	struct smcr_ibsys_gid g;
	uint8_t gid[16], want_mac[6];
	unsigned int b[6];

	gid_bin(addr, gid);
	assert_int_equal(smcr_ibsys_find_gid(root, gid, &g), 0);
	assert_string_equal(g.dev, dev);
	assert_int_equal(g.port_num, port_num);
	assert_int_equal(g.gid_index, idx);
	assert_string_equal(g.ndev, ndev);
	assert_int_equal(sscanf(mac, "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]),
			 6);
	for (int i = 0; i < 6; i++)
		want_mac[i] = (uint8_t)b[i];
	assert_memory_equal(g.mac, want_mac, 6);
}

/* IPv4-mapped: rxe0's RoCE v2 entry, past mlx4_0's v1-only one and its own v1 entry. */
static void test_ipv4(void **state)
{
	(void)state;
	expect("10.77.0.1", "rxe0", 1, 3, "veth0", "52:54:00:12:34:56");
}

/* IPv6 as is, after an unused entry in the table. */
static void test_ipv6(void **state)
{
	(void)state;
	expect("fd77::1", "rxe0", 1, 6, "veth0", "52:54:00:12:34:56");
}

/*
 * Not a DOWN port, not InfiniBand; ports in numeric order (3 before 10);
 * devices in name order (verbs' list is sorted the same way: ib.c).
 */
static void test_port_rules(void **state)
{
	(void)state;
	expect("10.77.0.4", "rxe4", 1, 1, "veth8", "aa:bb:cc:dd:ee:08");
	expect("10.77.0.9", "rxe9", 3, 1, "veth8", "aa:bb:cc:dd:ee:08");
	expect("10.77.0.8", "rxe9", 2, 0, "veth8", "aa:bb:cc:dd:ee:08");
}

/* A GID held only as RoCE v1, or by nobody, or no devices at all: -ENODEV. */
static void test_none(void **state)
{
	struct smcr_ibsys_gid g;
	uint8_t gid[16];

	(void)state;
	put("class/infiniband/mlx4_0/ports/1/gids/3", "0000:0000:0000:0000:0000:ffff:0a4d:0063");
	put("class/infiniband/mlx4_0/ports/1/gid_attrs/types/3", V1);
	gid_bin("10.77.0.99", gid);
	assert_int_equal(smcr_ibsys_find_gid(root, gid, &g), -ENODEV);
	gid_bin("10.77.0.5", gid);
	assert_int_equal(smcr_ibsys_find_gid(root, gid, &g), -ENODEV);
	assert_int_equal(smcr_ibsys_find_gid("/nonexistent-sysfs", gid, &g), -ENODEV);
	assert_false(smcr_ibsys_have_devices("/nonexistent-sysfs"));
	assert_true(smcr_ibsys_have_devices(root));
}

static void driver_link(const char *dev, const char *driver)
{
	char dir[256], target[256], link[512];

	snprintf(dir, sizeof(dir), "%s/devices/pci/%s", root, dev);
	mkdir(dir, 0700);
	snprintf(target, sizeof(target), "../../../bus/pci/drivers/%s", driver);
	snprintf(link, sizeof(link), "%s/driver", dir);
	assert_int_equal(symlink(target, link), 0);
	snprintf(link, sizeof(link), "%s/class/infiniband/%s", root, dev);
	mkdir(link, 0700);
	snprintf(link, sizeof(link), "%s/class/infiniband/%s/device", root, dev);
	assert_int_equal(symlink(dir, link), 0);
}

/*
 * The providers libibverbs needs: a PCI device's kernel driver mapped to its
 * provider (mlx5_core -> mlx5), an auxiliary device's (mlx5_ib), one whose
 * name is the provider's (irdma); a software device (rxe, no parent device)
 * by its name's letters; each name once, in device name order.
 */
static void test_providers(void **state)
{
	char names[8][SMCR_IBSYS_PROVIDER_MAX];
	char dir[512];
	int n;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/devices", root);
	mkdir(dir, 0700);
	snprintf(dir, sizeof(dir), "%s/devices/pci", root);
	mkdir(dir, 0700);
	driver_link("mlx4_0", "mlx4_core");
	driver_link("aab0", "mlx5_ib");
	driver_link("rocep5s0", "irdma");
	driver_link("bbb0", "mlx5_core");
	n = smcr_ibsys_providers(root, names, 8);
	/* aaa0 (rxe-like: "aaa"), aab0 mlx5, bbb0 mlx5 again, mlx4_0, rocep5s0, rxe0/4/40/5/9 rxe */
	assert_int_equal(n, 5);
	assert_string_equal(names[0], "aaa");
	assert_string_equal(names[1], "mlx5");
	assert_string_equal(names[2], "mlx4");
	assert_string_equal(names[3], "irdma");
	assert_string_equal(names[4], "rxe");
	assert_int_equal(smcr_ibsys_providers(root, names, 2), 2);
	assert_int_equal(smcr_ibsys_providers("/nonexistent-sysfs", names, 8), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ipv4),
		cmocka_unit_test(test_ipv6),
		cmocka_unit_test(test_port_rules),
		cmocka_unit_test(test_none),
		cmocka_unit_test(test_providers),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
