/* SPDX-License-Identifier: MIT */
/*
 * Transport policy (src/smcr/policy.c): allow and deny lists over IPv4, IPv6
 * and IPv4-mapped addresses with and without ports, the deny list winning,
 * the negative cache (reason kept, time-limited, bounded, cleared by a
 * success), the client's choice on real loopback sockets, the server's
 * choice by the Proposal's form, and the learned policy's rules (learn.h:
 * short flows turn a destination TCP, long ones turn it back, with
 * hysteresis, probes and forgetting).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/config.h"
#include "common/real.h"
#include "smcr/learn.h"
#include "smcr/policy.h"
#include "smcr/shm.h"
#include "smcr/sys.h"
#include "smcr/engine.h"
#include "sockaddr_test.h"

static struct smcr_config config(const char *peers, const char *deny)
{
	struct smcr_config cfg;

	smcr_config_defaults(&cfg);
	for (const char *p = peers; p && *p;) {
		char entry[64];
		size_t len = strcspn(p, ",");

		memcpy(entry, p, len);
		entry[len] = '\0';
		assert_int_equal(smcr_config_parse_cidr(entry, &cfg.peers[cfg.n_peers++]), 0);
		p += len + (p[len] == ',');
	}
	for (const char *p = deny; p && *p;) {
		char entry[64];
		size_t len = strcspn(p, ",");

		memcpy(entry, p, len);
		entry[len] = '\0';
		assert_int_equal(smcr_config_parse_cidr(entry, &cfg.deny[cfg.n_deny++]), 0);
		p += len + (p[len] == ',');
	}
	return cfg;
}

static int rdma_peer(const struct smcr_config *cfg, const char *addr, unsigned port, int64_t now)
{
	struct sockaddr_storage ss = sockaddr_of(addr, port);

	return smcr_policy_rdma_peer(cfg, (struct sockaddr *)&ss, false, now);
}

static void test_allow_and_deny(void **state)
{
	struct smcr_config cfg = config("10.77.0.0/24,10.1.2.3:5201,fd77::/64,[fd78::1]:80,10.9.0.0/15",
					"10.77.0.9,[fd77::9]:22");

	assert_int_equal(rdma_peer(&cfg, "10.77.0.2", 5201, 0), 0);
	assert_int_equal(rdma_peer(&cfg, "10.77.0.255", 1, 0), 0);
	assert_int_equal(rdma_peer(&cfg, "10.77.1.2", 5201, 0), SMCR_CLC_DECL_PEERNOSMC);
	assert_int_equal(rdma_peer(&cfg, "10.1.2.3", 5201, 0), 0);
	assert_int_equal(rdma_peer(&cfg, "10.1.2.3", 5202, 0), SMCR_CLC_DECL_PEERNOSMC);
	/* /15: 10.9.x and 10.8.x share the first 15 bits, 10.10.x does not */
	assert_int_equal(rdma_peer(&cfg, "10.8.200.1", 1, 0), 0);
	assert_int_equal(rdma_peer(&cfg, "10.10.0.1", 1, 0), SMCR_CLC_DECL_PEERNOSMC);
	/* the deny list wins */
	assert_int_equal(rdma_peer(&cfg, "10.77.0.9", 5201, 0), SMCR_CLC_DECL_PEERNOSMC);
	/* IPv6, and IPv4-mapped IPv6 (a dual-stack socket) counts as IPv4 */
	assert_int_equal(rdma_peer(&cfg, "fd77::2", 5201, 0), 0);
	assert_int_equal(rdma_peer(&cfg, "fd77::9", 5201, 0), 0);
	assert_int_equal(rdma_peer(&cfg, "fd77::9", 22, 0), SMCR_CLC_DECL_PEERNOSMC);
	assert_int_equal(rdma_peer(&cfg, "fd77:0:0:1::2", 5201, 0), SMCR_CLC_DECL_PEERNOSMC);
	assert_int_equal(rdma_peer(&cfg, "fd78::1", 80, 0), 0);
	assert_int_equal(rdma_peer(&cfg, "fd78::1", 81, 0), SMCR_CLC_DECL_PEERNOSMC);
	assert_int_equal(rdma_peer(&cfg, "::ffff:10.77.0.2", 5201, 0), 0);
	assert_int_equal(rdma_peer(&cfg, "::ffff:10.77.0.9", 5201, 0), SMCR_CLC_DECL_PEERNOSMC);
	/* nothing configured: nothing allowed, unless vouched for (the registry) */
	cfg = config(NULL, NULL);
	assert_int_equal(rdma_peer(&cfg, "10.77.0.2", 5201, 0), SMCR_CLC_DECL_PEERNOSMC);
	{
		struct sockaddr_storage ss = sockaddr_of("10.77.0.2", 5201);

		assert_int_equal(smcr_policy_rdma_peer(&cfg, (struct sockaddr *)&ss, true, 0), 0);
		cfg = config(NULL, "10.77.0.2");
		assert_int_equal(smcr_policy_rdma_peer(&cfg, (struct sockaddr *)&ss, true, 0),
				 SMCR_CLC_DECL_PEERNOSMC);
	}
}

static void test_negative_cache(void **state)
{
	struct smcr_config cfg = config("10.0.0.0/8,fd77::/16", NULL);
	struct sockaddr_storage a = sockaddr_of("10.0.0.1", 80), b = sockaddr_of("fd77::2", 80);
	int64_t t0 = 1000000;

	smcr_policy_reset();
	smcr_policy_rdma_result((struct sockaddr *)&a, SMCR_CLC_DECL_NOSMCRDEV, t0);
	smcr_policy_rdma_result((struct sockaddr *)&b, -ETIMEDOUT, t0);
	/* the reason the attempt ended with; a hard error reads as "no SMC there" */
	assert_int_equal(rdma_peer(&cfg, "10.0.0.1", 80, t0 + 1), SMCR_CLC_DECL_NOSMCRDEV);
	assert_int_equal(rdma_peer(&cfg, "fd77::2", 80, t0 + 1), SMCR_CLC_DECL_PEERNOSMC);
	/* per destination: another port or address is not affected */
	assert_int_equal(rdma_peer(&cfg, "10.0.0.1", 81, t0 + 1), 0);
	assert_int_equal(rdma_peer(&cfg, "10.0.0.2", 80, t0 + 1), 0);
	/* time-limited */
	assert_int_equal(rdma_peer(&cfg, "10.0.0.1", 80, t0 + SMCR_POLICY_NEG_TTL_MS - 1),
			 SMCR_CLC_DECL_NOSMCRDEV);
	assert_int_equal(rdma_peer(&cfg, "10.0.0.1", 80, t0 + SMCR_POLICY_NEG_TTL_MS), 0);
	/* a success clears the entry */
	smcr_policy_rdma_result((struct sockaddr *)&b, 0, t0 + 2);
	assert_int_equal(rdma_peer(&cfg, "fd77::2", 80, t0 + 3), 0);
	/* bounded: the oldest entry makes room */
	smcr_policy_reset();
	for (unsigned i = 0; i <= SMCR_POLICY_NEG_SLOTS; i++) {
		struct sockaddr_storage d = sockaddr_of("10.0.0.1", 1000 + i);

		smcr_policy_rdma_result((struct sockaddr *)&d, SMCR_CLC_DECL_PEERDECL, t0 + i);
	}
	assert_int_equal(rdma_peer(&cfg, "10.0.0.1", 1000, t0 + 100), 0);
	assert_int_equal(rdma_peer(&cfg, "10.0.0.1", 1001, t0 + 100), SMCR_CLC_DECL_PEERDECL);
	assert_int_equal(rdma_peer(&cfg, "10.0.0.1", 1000 + SMCR_POLICY_NEG_SLOTS, t0 + 100),
			 SMCR_CLC_DECL_PEERDECL);
	smcr_policy_reset();
}

/* A connected loopback pair against a plain (unregistered) listener. */
static void test_client_choice(void **state)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	const struct smcr_transport_ops *ops;
	struct sockaddr_storage peer;
	struct smcr_config cfg;
	int l = socket(AF_INET, SOCK_STREAM, 0), c = socket(AF_INET, SOCK_STREAM, 0);

	smcr_real_bind();
	assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&a, &len), 0);
	assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof(a)), 0);

	len = sizeof(peer);
	assert_int_equal(getpeername(c, (struct sockaddr *)&peer, &len), 0);

	/* each answer is the same with the peer's address given (smcr_policy_client_to) */
	cfg = config(NULL, NULL); /* auto, nothing allowed, listener not registered */
	assert_int_equal(smcr_policy_client(&cfg, c, &ops), SMCR_CLC_DECL_PEERNOSMC);
	assert_null(ops);
	assert_int_equal(smcr_policy_client_to(&cfg, c, &peer, &ops), SMCR_CLC_DECL_PEERNOSMC);
	assert_null(ops);
	cfg = config("127.0.0.0/8", NULL);
	if (smcr_policy_verbs_ops()) {
		assert_int_equal(smcr_policy_client(&cfg, c, &ops), 0);
		assert_ptr_equal(ops, smcr_policy_verbs_ops());
		assert_int_equal(smcr_policy_client_to(&cfg, c, &peer, &ops), 0);
		assert_ptr_equal(ops, smcr_policy_verbs_ops());
	} else {
		assert_int_equal(smcr_policy_client(&cfg, c, &ops), SMCR_CLC_DECL_NOSMCRDEV);
		assert_int_equal(smcr_policy_client_to(&cfg, c, &peer, &ops),
				 SMCR_CLC_DECL_NOSMCRDEV);
	}
	cfg.transport = SMCR_CONFIG_TRANSPORT_SHM;
	assert_int_equal(smcr_policy_client(&cfg, c, &ops), SMCR_CLC_DECL_PEERNOSMC);
	assert_int_equal(smcr_policy_client_to(&cfg, c, &peer, &ops), SMCR_CLC_DECL_PEERNOSMC);
	cfg = config("127.0.0.0/8", "127.0.0.1");
	cfg.transport = SMCR_CONFIG_TRANSPORT_RDMA;
	assert_int_equal(smcr_policy_client(&cfg, c, &ops), SMCR_CLC_DECL_PEERNOSMC);
	assert_int_equal(smcr_policy_client_to(&cfg, c, &peer, &ops), SMCR_CLC_DECL_PEERNOSMC);
	close(c);
	close(l);
}

static void test_server_choice(void **state)
{
	struct smcr_config cfg = config(NULL, NULL);
	const struct smcr_transport_ops *ops;
	struct smcr_clc_msg prop;

	memset(&prop, 0, sizeof(prop));
	prop.hdr.type = SMCR_CLC_PROPOSAL;
	prop.hdr.version = SMCR_CLC_V2;
	prop.hdr.typev1 = SMCR_CLC_PATH_NONE;
	prop.hdr.typev2 = SMCR_CLC_PATH_D; /* shm's form */
	assert_int_equal(smcr_policy_server(&cfg, &prop, &ops), 0);
	assert_ptr_equal(ops, &smcr_shm_ops);
	/*
	 * SMC-Rv2 alone, or beside an SMC-Dv2 offer that is no same-host smcr
	 * client's (a Linux host with ISM offers both): SMC-R's.
	 */
	for (int both = 0; both < 2; both++) {
		prop.hdr.typev2 = both ? SMCR_CLC_PATH_BOTH : SMCR_CLC_PATH_R;
		if (smcr_policy_verbs_ops()) {
			assert_int_equal(smcr_policy_server(&cfg, &prop, &ops), 0);
			assert_ptr_equal(ops, smcr_policy_verbs_ops());
		} else {
			assert_int_equal(smcr_policy_server(&cfg, &prop, &ops),
					 SMCR_CLC_DECL_NOSMCRDEV);
		}
	}
	/* both, from a same-host smcr client: shm's */
	{
		struct smcr_xconn *xc;
		struct smcr_clc_msg own;

		assert_int_equal(smcr_shm_ops.create(-1, 16384, 1000, &xc), 0);
		memset(&own, 0, sizeof(own));
		assert_int_equal(smcr_shm_ops.client_propose(xc, &own), 0);
		own.hdr.typev2 = SMCR_CLC_PATH_BOTH;
		assert_int_equal(smcr_policy_server(&cfg, &own, &ops), 0);
		assert_ptr_equal(ops, &smcr_shm_ops);
		smcr_shm_ops.destroy(xc, false);
	}
	prop.hdr.typev2 = SMCR_CLC_PATH_R;
	cfg.transport = SMCR_CONFIG_TRANSPORT_SHM;
	assert_int_equal(smcr_policy_server(&cfg, &prop, &ops), SMCR_CLC_DECL_NOSMCRDEV);
	/* SMCv1 only: declined as a Linux server with no v1 device declines it */
	cfg.transport = SMCR_CONFIG_TRANSPORT_AUTO;
	prop.hdr.version = 1;
	prop.hdr.typev1 = SMCR_CLC_PATH_R;
	assert_int_equal(smcr_policy_server(&cfg, &prop, &ops), SMCR_CLC_DECL_NOSMCRDEV);
	prop.hdr.typev1 = SMCR_CLC_PATH_D;
	assert_int_equal(smcr_policy_server(&cfg, &prop, &ops), SMCR_CLC_DECL_NOSMCDDEV);
	prop.hdr.typev1 = SMCR_CLC_PATH_BOTH; /* ISM's failure is the one named */
	assert_int_equal(smcr_policy_server(&cfg, &prop, &ops), SMCR_CLC_DECL_NOSMCDDEV);
	/* an SMC-Dv2 offer with same-host SMC off */
	prop.hdr.version = SMCR_CLC_V2;
	prop.hdr.typev2 = SMCR_CLC_PATH_D;
	cfg.samehost = false;
	assert_int_equal(smcr_policy_server(&cfg, &prop, &ops), SMCR_CLC_DECL_NOSMCD2DEV);
}

/* ---- learned policy ---------------------------------------------------------------- */

#define SHORT_BYTES 300 /* an HTTP request and a small answer */
#define SHORT_MSGS 6   /* request, answer, cursor updates, close */
#define LONG_BYTES (1024u * 1024)

static uint64_t loopback_key(uint16_t port)
{
	const unsigned char addr[16] = { 127, 0, 0, 1 };

	return smcr_learn_key(AF_INET, addr, port);
}

static int learn_setup(void **state)
{
	(void)state;
	smcr_learn_use_private();
	return 0;
}

static void shorts(uint64_t key, int n, int64_t now)
{
	for (int i = 0; i < n; i++)
		smcr_learn_result(key, SHORT_BYTES, SHORT_MSGS, 1, now);
}

static void test_learn_key(void **state)
{
	const unsigned char a[16] = { 127, 0, 0, 1 }, b[16] = { 127, 0, 0, 2 };

	(void)state;
	assert_int_not_equal(smcr_learn_key(AF_INET, a, 80), 0);
	assert_int_equal(smcr_learn_key(AF_INET, a, 80), smcr_learn_key(AF_INET, a, 80));
	assert_int_not_equal(smcr_learn_key(AF_INET, a, 80), smcr_learn_key(AF_INET, a, 81));
	assert_int_not_equal(smcr_learn_key(AF_INET, a, 80), smcr_learn_key(AF_INET, b, 80));
	assert_int_not_equal(smcr_learn_key(AF_INET, a, 80), smcr_learn_key(AF_INET6, a, 80));
}

/* A destination is TCP only after SMCR_LEARN_TCP_ON short connections in a row. */
static void test_learn_short_flows_turn_tcp(void **state)
{
	uint64_t key = loopback_key(8080), other = loopback_key(8081);
	int64_t now = 1000000;

	(void)state;
	assert_false(smcr_learn_keep_tcp(key, now)); /* nothing known: SMC */
	shorts(key, SMCR_LEARN_TCP_ON - 1, now);
	assert_false(smcr_learn_keep_tcp(key, now));
	shorts(key, 1, now);
	assert_true(smcr_learn_keep_tcp(key, now));
	assert_false(smcr_learn_keep_tcp(other, now)); /* per destination */
	/* Short means all three: few bytes, few messages, closed soon. */
	for (int i = 0; i < 20; i++)
		smcr_learn_result(other, LONG_BYTES, SHORT_MSGS, 1, now);
	for (int i = 0; i < 20; i++)
		smcr_learn_result(other, SHORT_BYTES, SMCR_LEARN_SHORT_MSGS, 1, now);
	for (int i = 0; i < 20; i++)
		smcr_learn_result(other, SHORT_BYTES, SHORT_MSGS, SMCR_LEARN_SHORT_MS, now);
	assert_false(smcr_learn_keep_tcp(other, now));
	/* Just under every bound is short. */
	for (int i = 0; i < SMCR_LEARN_TCP_ON; i++)
		smcr_learn_result(other, SMCR_LEARN_SHORT_BYTES - 1, SMCR_LEARN_SHORT_MSGS - 1,
				  SMCR_LEARN_SHORT_MS - 1, now);
	assert_true(smcr_learn_keep_tcp(other, now));
}

/* A long connection weighs SMCR_LEARN_LONG_WEIGHT short ones: a mix stays SMC. */
static void test_learn_mixed_stays_smc(void **state)
{
	uint64_t key = loopback_key(6379);
	int64_t now = 1000000;

	(void)state;
	for (int i = 0; i < 50; i++) {
		shorts(key, SMCR_LEARN_LONG_WEIGHT - 1, now);
		smcr_learn_result(key, LONG_BYTES, 1000, 5000, now);
		assert_false(smcr_learn_keep_tcp(key, now));
	}
}

/* Hysteresis: back to SMC at SMCR_LEARN_TCP_OFF, TCP again only at SMCR_LEARN_TCP_ON. */
static void test_learn_hysteresis(void **state)
{
	uint64_t key = loopback_key(8443);
	int64_t now = 1000000;

	(void)state;
	shorts(key, SMCR_LEARN_TCP_ON + 2, now); /* score TCP_ON + 2 */
	assert_true(smcr_learn_keep_tcp(key, now));
	smcr_learn_result(key, LONG_BYTES, 1000, 5000, now); /* TCP_ON - 2: inside the band */
	assert_true(smcr_learn_keep_tcp(key, now));
	smcr_learn_result(key, LONG_BYTES, 1000, 5000, now); /* TCP_ON - 6 <= TCP_OFF */
	assert_false(smcr_learn_keep_tcp(key, now));
	shorts(key, SMCR_LEARN_TCP_ON - (SMCR_LEARN_TCP_ON - 6) - 1, now); /* just below TCP_ON */
	assert_false(smcr_learn_keep_tcp(key, now));
	shorts(key, 1, now);
	assert_true(smcr_learn_keep_tcp(key, now));
}

/* While TCP, one connection in PROBE_EVERY << n is still proposed; n grows. */
static void test_learn_probes(void **state)
{
	uint64_t key = loopback_key(9000);
	int64_t now = 1000000;
	unsigned gap = SMCR_LEARN_PROBE_EVERY;

	(void)state;
	shorts(key, SMCR_LEARN_TCP_ON, now);
	for (int round = 0; round < 3; round++, gap *= 2) {
		for (unsigned i = 1; i < gap; i++)
			assert_true(smcr_learn_keep_tcp(key, now));
		assert_false(smcr_learn_keep_tcp(key, now)); /* the probe */
		shorts(key, 1, now); /* it was short again: probe half as often */
	}
	/* A long probe brings SMC back once the score falls to TCP_OFF. */
	while (smcr_learn_keep_tcp(key, now))
		;
	for (int i = 0; i < 3; i++)
		smcr_learn_result(key, LONG_BYTES, 1000, 5000, now);
	assert_false(smcr_learn_keep_tcp(key, now));
}

/* Time: a probe every SMCR_LEARN_PROBE_S even with few connections; old entries go. */
static void test_learn_time(void **state)
{
	uint64_t key = loopback_key(9100);
	int64_t now = 1000000;

	(void)state;
	shorts(key, SMCR_LEARN_TCP_ON, now);
	assert_true(smcr_learn_keep_tcp(key, now + 1000));
	assert_false(smcr_learn_keep_tcp(key, now + SMCR_LEARN_PROBE_S * 1000)); /* the probe */
	assert_true(smcr_learn_keep_tcp(key, now + SMCR_LEARN_PROBE_S * 1000 + 1000));
	assert_false(smcr_learn_keep_tcp(key, now + (SMCR_LEARN_PROBE_S + SMCR_LEARN_FORGET_S) * 1000));
	/* Forgotten: it takes TCP_ON short connections again. */
	now += (SMCR_LEARN_PROBE_S + SMCR_LEARN_FORGET_S) * 1000;
	shorts(key, SMCR_LEARN_TCP_ON - 1, now);
	assert_false(smcr_learn_keep_tcp(key, now));
}

/* More destinations than slots: the table stays bounded and keeps the recent ones. */
static void test_learn_bounded(void **state)
{
	int64_t now = 1000000;

	(void)state;
	for (uint16_t port = 1; port <= 4 * SMCR_LEARN_SLOTS; port++)
		shorts(loopback_key(port), SMCR_LEARN_TCP_ON, now + port * 1000);
	assert_true(smcr_learn_keep_tcp(loopback_key(4 * SMCR_LEARN_SLOTS), now + 4 * SMCR_LEARN_SLOTS * 1000));
}

/* The interposer's entry point: only loopback or SMCR_PEERS, and the reason. */
static void test_learn_connect_verdict(void **state)
{
	struct sockaddr_storage lo = sockaddr_of("127.0.0.1", 7000), mapped = sockaddr_of("::ffff:127.0.0.1", 7000),
				remote = sockaddr_of("192.0.2.1", 7000);

	(void)state;
	assert_int_equal(smcr_sock_connect_learned((struct sockaddr *)&lo, sizeof(struct sockaddr_in)), 0);
	shorts(loopback_key(7000), SMCR_LEARN_TCP_ON, smcr_now_ms());
	assert_int_equal(smcr_sock_connect_learned((struct sockaddr *)&lo, sizeof(struct sockaddr_in)),
			 SMCR_CLC_DECL_SHORTFLOWS);
	assert_int_equal(smcr_sock_connect_learned((struct sockaddr *)&mapped,
						   sizeof(struct sockaddr_in6)),
			 SMCR_CLC_DECL_SHORTFLOWS);
	/* A truncated address is not read. */
	assert_int_equal(smcr_sock_connect_learned((struct sockaddr *)&mapped, 8), 0);
	/* Where SMC is never proposed there is nothing to learn: not even a look. */
	assert_int_equal(smcr_sock_connect_learned((struct sockaddr *)&remote,
						   sizeof(struct sockaddr_in)),
			 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_allow_and_deny),
		cmocka_unit_test(test_negative_cache),
		cmocka_unit_test(test_client_choice),
		cmocka_unit_test(test_server_choice),
		cmocka_unit_test_setup(test_learn_key, learn_setup),
		cmocka_unit_test_setup(test_learn_short_flows_turn_tcp, learn_setup),
		cmocka_unit_test_setup(test_learn_mixed_stays_smc, learn_setup),
		cmocka_unit_test_setup(test_learn_hysteresis, learn_setup),
		cmocka_unit_test_setup(test_learn_probes, learn_setup),
		cmocka_unit_test_setup(test_learn_time, learn_setup),
		cmocka_unit_test_setup(test_learn_bounded, learn_setup),
		cmocka_unit_test_setup(test_learn_connect_verdict, learn_setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
