/* SPDX-License-Identifier: MIT */
/*
 * Configuration parsing: defaults, every variable, size suffixes, bad and
 * empty values (reported, never fatal, default kept), and the process-wide
 * struct being parsed exactly once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <sys/socket.h>

#include "common/config.h"
#include "common/log.h"
#include "common/real.h"

/* A fake environment: NULL-terminated name, value pairs. */
static const char *fake_getenv(const char *name, void *ctx)
{
	const char *const *env = ctx;

	for (; env[0]; env += 2) {
		if (strcmp(env[0], name) == 0)
			return env[1];
	}
	return NULL;
}

static struct smcr_config parse(const char *const *env)
{
	struct smcr_config cfg;

	smcr_config_parse(&cfg, fake_getenv, (void *)env);
	return cfg;
}

static void assert_defaults(const struct smcr_config *cfg)
{
	assert_int_equal(cfg->log_level, SMCR_LOG_WARN);
	assert_int_equal(cfg->sndbuf, 0);
	assert_int_equal(cfg->rcvbuf, 0);
	assert_string_equal(cfg->log_file, "");
	assert_int_equal(cfg->max_fds, 0);
	assert_false(cfg->disabled);
	assert_true(cfg->samehost);
	assert_int_equal(cfg->speak_first_wait_ms, SMCR_CONFIG_SPEAK_FIRST_WAIT_MS);
	assert_int_equal(cfg->spin_us, SMCR_CONFIG_SPIN_DEFAULT_US);
	assert_int_equal(cfg->testlink_s, SMCR_CONFIG_TESTLINK_DEFAULT_S);
	assert_int_equal(cfg->transport, SMCR_CONFIG_TRANSPORT_AUTO);
	assert_int_equal(cfg->n_peers, 0);
	assert_int_equal(cfg->n_deny, 0);
}

static void test_defaults(void **state)
{
	const char *env[] = { NULL };
	struct smcr_config cfg = parse(env);

	assert_defaults(&cfg);
	assert_int_equal(cfg.n_problems, 0);
}

static void test_empty_values_mean_default(void **state)
{
	const char *env[] = { "SMC_DEBUG", "", "SMC_SNDBUF", "", "SMC_RCVBUF", "",
			      "SMCR_LOG_FILE", "", "SMCR_MAX_FDS", "", "SMCR_DISABLE", "", NULL };
	struct smcr_config cfg = parse(env);

	assert_defaults(&cfg);
	assert_int_equal(cfg.n_problems, 0);
}

static void test_every_variable(void **state)
{
	const char *env[] = { "SMC_DEBUG", "1", "SMC_SNDBUF", "256k", "SMC_RCVBUF", "1m",
			      "SMCR_LOG_FILE", "/tmp/smcr.log", "SMCR_MAX_FDS", "4096",
			      "SMCR_DISABLE", "yes", "SMCR_SAMEHOST", "0",
			      "SMCR_SPEAK_FIRST_WAIT_MS", "200", "SMCR_SPIN_US", "30",
			      "SMCR_TRANSPORT", "rdma", "SMCR_PEERS", "10.77.0.0/24,[fd77::2]:5201",
			      "SMCR_PEERS_DENY", "10.77.0.9", "SMCR_TESTLINK_TIME", "2", NULL };
	struct smcr_config cfg = parse(env);

	assert_int_equal(cfg.n_problems, 0);
	assert_int_equal(cfg.testlink_s, 2);
	assert_int_equal(cfg.log_level, SMCR_LOG_DEBUG);
	assert_int_equal(cfg.sndbuf, 256 * 1024);
	assert_int_equal(cfg.rcvbuf, 1024 * 1024);
	assert_string_equal(cfg.log_file, "/tmp/smcr.log");
	assert_int_equal(cfg.max_fds, 4096);
	assert_true(cfg.disabled);
	assert_false(cfg.samehost);
	assert_int_equal(cfg.speak_first_wait_ms, 200);
	assert_int_equal(cfg.spin_us, 30);
	assert_int_equal(cfg.transport, SMCR_CONFIG_TRANSPORT_RDMA);
	assert_int_equal(cfg.n_peers, 2);
	assert_int_equal(cfg.peers[0].family, AF_INET);
	assert_int_equal(cfg.peers[0].prefix, 24);
	assert_int_equal(cfg.peers[1].family, AF_INET6);
	assert_int_equal(cfg.peers[1].port, 5201);
	assert_int_equal(cfg.n_deny, 1);
}

/*
 * SMCR_UEID: upper-cased, blank padded, bad entries (the kernel's rule: smc_clc_ueid_valid)
 * reported and skipped, at most 7;
 * SMCR_KERNEL_UEID: on by default.
 */
static void test_ueids(void **state)
{
	const char *env[] = { "SMCR_UEID", "rxe-vm, SMC.EID-2,,bad_eid,-LEAD,.DOT,"
					   "0123456789ABCDEF0123456789ABCDEFX", NULL };
	const char *many[] = { "SMCR_UEID", "A,B,C,D,E,F,G,H,I", NULL };
	struct smcr_config cfg = parse(env);
	char want[SMCR_CONFIG_EID_LEN];

	(void)state;
	assert_int_equal(cfg.n_ueids, 2);
	memset(want, ' ', sizeof(want));
	memcpy(want, "RXE-VM", 6);
	assert_memory_equal(cfg.ueid[0], want, sizeof(want)); /* the VM kernel's UEID */
	memset(want, ' ', sizeof(want));
	memcpy(want, "SMC.EID-2", 9);
	assert_memory_equal(cfg.ueid[1], want, sizeof(want));
	assert_int_equal(cfg.n_problems, 4); /* '_', a leading '-' or '.', 33 characters */
	cfg = parse(many);
	assert_int_equal(cfg.n_ueids, SMCR_CONFIG_MAX_UEIDS);
	assert_int_equal(cfg.n_problems, 1);
	assert_int_equal(cfg.ueid[6][0], 'G');
	cfg = parse((const char *[]){ NULL });
	assert_int_equal(cfg.n_ueids, 0);
	assert_true(cfg.kernel_ueid); /* the kernel's table is read unless told not to */
	cfg = parse((const char *[]){ "SMCR_KERNEL_UEID", "0", NULL });
	assert_false(cfg.kernel_ueid);
	cfg = parse((const char *[]){ "SMCR_KERNEL_UEID", "maybe", NULL });
	assert_true(cfg.kernel_ueid);
	assert_int_equal(cfg.n_problems, 1);
}

static void test_learn(void **state)
{
	struct smcr_config cfg;

	(void)state;
	cfg = parse((const char *[]){ NULL });
	assert_true(cfg.learn); /* on by default */
	cfg = parse((const char *[]){ "SMCR_LEARN", "0", NULL });
	assert_false(cfg.learn);
	assert_int_equal(cfg.n_problems, 0);
	cfg = parse((const char *[]){ "SMCR_LEARN", "sometimes", NULL });
	assert_true(cfg.learn);
	assert_int_equal(cfg.n_problems, 1);
}

static void test_exit_report(void **state)
{
	struct smcr_config cfg;

	(void)state;
	cfg = parse((const char *[]){ NULL });
	assert_false(cfg.exit_report); /* off by default: a line nobody asked for */
	cfg = parse((const char *[]){ "SMCR_EXIT_REPORT", "1", NULL });
	assert_true(cfg.exit_report);
	assert_int_equal(cfg.n_problems, 0);
	cfg = parse((const char *[]){ "SMCR_EXIT_REPORT", "often", NULL });
	assert_int_equal(cfg.n_problems, 1);
}

static void test_af_smc(void **state)
{
	struct smcr_config cfg;

	(void)state;
	cfg = parse((const char *[]){ NULL });
	assert_int_equal(cfg.af_smc, SMCR_CONFIG_AF_SMC_AUTO);
	cfg = parse((const char *[]){ "SMCR_AF_SMC", "smcr", NULL });
	assert_int_equal(cfg.af_smc, SMCR_CONFIG_AF_SMC_SMCR);
	cfg = parse((const char *[]){ "SMCR_AF_SMC", "KERNEL", NULL });
	assert_int_equal(cfg.af_smc, SMCR_CONFIG_AF_SMC_KERNEL);
	assert_int_equal(cfg.n_problems, 0);
	cfg = parse((const char *[]){ "SMCR_AF_SMC", "always", NULL });
	assert_int_equal(cfg.af_smc, SMCR_CONFIG_AF_SMC_AUTO);
	assert_int_equal(cfg.n_problems, 1);
	assert_non_null(strstr(cfg.problems[0], "SMCR_AF_SMC=always"));
}

static void assert_cidr(const char *text, int family, unsigned prefix, unsigned port,
			const char *addr)
{
	struct smcr_config_cidr c, want;

	assert_int_equal(smcr_config_parse_cidr(text, &c), 0);
	assert_int_equal(c.family, family);
	assert_int_equal(c.prefix, prefix);
	assert_int_equal(c.port, port);
	memset(want.addr, 0, sizeof(want.addr));
	assert_int_equal(inet_pton(family, addr, want.addr), 1);
	assert_memory_equal(c.addr, want.addr, sizeof(c.addr));
}

static void test_cidr(void **state)
{
	static const char *const bad[] = {
		"", "10.0.0.0/33", "10.0.0.1:0", "10.0.0.1:65536", "10.0.0.1:", "10.0.0/8",
		"fd77::/129", "[fd77::1", "[fd77::1]x", "[fd77::1]:", "fd77::1:80:x", "host.example",
		"10.0.0.1/-1", "10.0.0.1/8/8", "[10.0.0.1]:80:80", "10.0.0.1 ",
	};
	struct smcr_config_cidr c;

	assert_cidr("10.77.0.2", AF_INET, 32, 0, "10.77.0.2");
	assert_cidr("10.77.0.2:5201", AF_INET, 32, 5201, "10.77.0.2");
	assert_cidr("10.77.1.2/16", AF_INET, 16, 0, "10.77.0.0"); /* host bits cleared */
	assert_cidr("10.77.0.0/24:80", AF_INET, 24, 80, "10.77.0.0");
	assert_cidr("0.0.0.0/0", AF_INET, 0, 0, "0.0.0.0");
	assert_cidr("fd77::2", AF_INET6, 128, 0, "fd77::2");
	assert_cidr("fd77::ff/120", AF_INET6, 120, 0, "fd77::");
	assert_cidr("[fd77::2]:5201", AF_INET6, 128, 5201, "fd77::2");
	assert_cidr("[fd77::/64]:443", AF_INET6, 64, 443, "fd77::");
	assert_cidr("[10.0.0.1]:7", AF_INET, 32, 7, "10.0.0.1");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (smcr_config_parse_cidr(bad[i], &c) == 0)
			fail_msg("'%s' parsed", bad[i]);
	}
	assert_int_equal(smcr_config_parse_cidr(NULL, &c), -1);
}

static void test_transport_and_peer_lists(void **state)
{
	const char *names[] = { "auto", "RDMA", "smc-r", "shm" };
	const int values[] = { SMCR_CONFIG_TRANSPORT_AUTO, SMCR_CONFIG_TRANSPORT_RDMA,
			       SMCR_CONFIG_TRANSPORT_RDMA, SMCR_CONFIG_TRANSPORT_SHM };
	const char *bad_transport[] = { "SMCR_TRANSPORT", "ib", NULL };
	const char *spaces[] = { "SMCR_PEERS", " 10.0.0.1, ,10.0.0.2	10.0.0.3 ", NULL };
	const char *bad_peer[] = { "SMCR_PEERS", "10.0.0.1,bogus,10.0.0.3", NULL };
	const char *bad_deny[] = { "SMCR_PEERS", "10.0.0.0/8", "SMCR_PEERS_DENY", "10.0.0.1,x",
				   NULL };
	char many[40 * 16] = "";
	const char *too_many[] = { "SMCR_PEERS", many, NULL };
	static const struct {
		const char *text, *why;
	} peer_problems[] = {
		{ "10.0.0.0/99", "prefix length out of range: expected /0../32 for IPv4" },
		{ "fd77::/129", "prefix length out of range: expected /0../128 for IPv6" },
		{ "10.0.0.1:0", "port out of range: expected 1..65535" },
		{ "[fd77::1]:70000", "port out of range" },
		{ "[fd77::1", "'[' without ']'" },
		{ "garbage", "not an IPv4 or IPv6 address" },
	};
	struct smcr_config cfg;
	int t;

	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(smcr_config_parse_transport(names[i], &t), 0);
		assert_int_equal(t, values[i]);
	}
	cfg = parse(bad_transport);
	assert_int_equal(cfg.transport, SMCR_CONFIG_TRANSPORT_AUTO);
	assert_int_equal(cfg.n_problems, 1);
	assert_non_null(strstr(cfg.problems[0], "SMCR_TRANSPORT=ib"));

	cfg = parse(spaces);
	assert_int_equal(cfg.n_problems, 0);
	assert_int_equal(cfg.n_peers, 3);

	/* a bad allow entry is dropped, the rest kept */
	cfg = parse(bad_peer);
	assert_int_equal(cfg.n_peers, 2);
	assert_int_equal(cfg.n_problems, 1);
	assert_non_null(strstr(cfg.problems[0], "bogus"));

	/* each bad entry says what was wrong with it */
	for (size_t i = 0; i < sizeof(peer_problems) / sizeof(peer_problems[0]); i++) {
		const char *env[] = { "SMCR_PEERS", peer_problems[i].text, NULL };

		cfg = parse(env);
		assert_int_equal(cfg.n_peers, 0);
		assert_int_equal(cfg.n_problems, 1);
		assert_non_null(strstr(cfg.problems[0], peer_problems[i].text));
		if (!strstr(cfg.problems[0], peer_problems[i].why))
			fail_msg("'%s': '%s' lacks '%s'", peer_problems[i].text, cfg.problems[0],
				 peer_problems[i].why);
	}

	/* a bad deny entry: what it meant is unknown, so no SMC-R proposals at all */
	cfg = parse(bad_deny);
	assert_int_equal(cfg.n_peers, 0);
	assert_int_equal(cfg.n_deny, 1);
	assert_int_equal(cfg.n_problems, 2);
	assert_non_null(strstr(cfg.problems[1], "SMCR_PEERS ignored"));

	/* bounded: the first SMCR_CONFIG_MAX_PEERS entries */
	for (int i = 0; i < 40; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), "10.0.0.%d,", i);
	cfg = parse(too_many);
	assert_int_equal(cfg.n_peers, SMCR_CONFIG_MAX_PEERS);
	assert_true(cfg.n_problems >= 1);
}

static void test_debug_levels(void **state)
{
	static const struct {
		const char *text;
		int level;
	} cases[] = {
		{ "0", SMCR_LOG_WARN },     { "1", SMCR_LOG_DEBUG },    { "2", SMCR_LOG_TRACE },
		{ "error", SMCR_LOG_ERROR }, { "WARN", SMCR_LOG_WARN },  { "warning", SMCR_LOG_WARN },
		{ "Info", SMCR_LOG_INFO },   { "debug", SMCR_LOG_DEBUG }, { "trace", SMCR_LOG_TRACE },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *env[] = { "SMC_DEBUG", cases[i].text, NULL };
		struct smcr_config cfg = parse(env);

		assert_int_equal(cfg.n_problems, 0);
		assert_int_equal(cfg.log_level, cases[i].level);
	}
}

static void test_size_suffixes(void **state)
{
	size_t size;

	assert_int_equal(smcr_config_parse_size("0", &size), 0);
	assert_int_equal(size, 0);
	assert_int_equal(smcr_config_parse_size("65536", &size), 0);
	assert_int_equal(size, 65536);
	assert_int_equal(smcr_config_parse_size("64k", &size), 0);
	assert_int_equal(size, 64 * 1024);
	assert_int_equal(smcr_config_parse_size("64K", &size), 0);
	assert_int_equal(size, 64 * 1024);
	assert_int_equal(smcr_config_parse_size("3m", &size), 0);
	assert_int_equal(size, 3 * 1024 * 1024);
	assert_int_equal(smcr_config_parse_size("2M", &size), 0);
	assert_int_equal(size, 2 * 1024 * 1024);
	assert_int_equal(smcr_config_parse_size("1g", &size), 0);
	assert_int_equal(size, 1024 * 1024 * 1024);
}

static void test_bad_sizes(void **state)
{
	static const char *const bad[] = {
		"", "k", "abc", "-1", "+5", " 1", "1 ", "1x", "1kk", "1.5m", "0x10", "12kb",
		"99999999999999999999", "18446744073709551615k",
	};
	size_t size = 77;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(smcr_config_parse_size(bad[i], &size), -1);
		assert_int_equal(size, 77); /* untouched on error */
	}
	assert_int_equal(smcr_config_parse_size(NULL, &size), -1);
}

static void test_bad_values_keep_defaults_and_are_reported(void **state)
{
	const char *env[] = { "SMC_DEBUG", "loud", "SMC_SNDBUF", "lots", "SMC_RCVBUF", "1x",
			      "SMCR_MAX_FDS", "-3", "SMCR_DISABLE", "maybe",
			      "SMCR_SAMEHOST", "perhaps", "SMCR_SPEAK_FIRST_WAIT_MS", "99999",
			      "SMCR_TESTLINK_TIME", "0", NULL };
	struct smcr_config cfg = parse(env);

	/* a SMCR_DISABLE that is not understood turns smcr off: do no harm */
	assert_true(cfg.disabled);
	cfg.disabled = false;
	assert_defaults(&cfg);
	assert_int_equal(cfg.n_problems, 8);
	assert_non_null(strstr(cfg.problems[0], "SMC_DEBUG=loud"));
	assert_non_null(strstr(cfg.problems[1], "SMC_SNDBUF=lots"));
	assert_non_null(strstr(cfg.problems[2], "SMC_RCVBUF=1x"));
	assert_non_null(strstr(cfg.problems[3], "SMCR_MAX_FDS=-3"));
	assert_non_null(strstr(cfg.problems[4], "SMCR_DISABLE=maybe"));
	assert_non_null(strstr(cfg.problems[4], "out of the way"));
	assert_non_null(strstr(cfg.problems[5], "SMCR_SAMEHOST=perhaps"));
	/* every on/off setting names the same accepted spellings */
	assert_non_null(strstr(cfg.problems[4], "expected 0 or 1 (or yes/no, true/false, on/off)"));
	assert_non_null(strstr(cfg.problems[5], "expected 0 or 1 (or yes/no, true/false, on/off)"));
	assert_non_null(strstr(cfg.problems[6], "SMCR_SPEAK_FIRST_WAIT_MS=99999"));
	assert_non_null(strstr(cfg.problems[7], "SMCR_TESTLINK_TIME=0"));
}

static void test_buffer_size_range(void **state)
{
	const char *small[] = { "SMC_SNDBUF", "15k", "SMC_RCVBUF", "0", NULL };
	const char *edges[] = { "SMC_SNDBUF", "16k", "SMC_RCVBUF", "512m", NULL };
	const char *large[] = { "SMC_SNDBUF", "513m", "SMC_RCVBUF", "1g", NULL };
	struct smcr_config cfg;

	cfg = parse(small);
	assert_int_equal(cfg.n_problems, 2);
	assert_int_equal(cfg.sndbuf, 0);
	assert_int_equal(cfg.rcvbuf, 0);
	cfg = parse(edges);
	assert_int_equal(cfg.n_problems, 0);
	assert_int_equal(cfg.sndbuf, 16 * 1024);
	assert_int_equal(cfg.rcvbuf, 512u * 1024 * 1024);
	cfg = parse(large);
	assert_int_equal(cfg.n_problems, 2);
	assert_int_equal(cfg.sndbuf, 0);
	assert_int_equal(cfg.rcvbuf, 0);
}

static void test_max_fds_range_and_log_file_length(void **state)
{
	char long_path[400];
	const char *env[] = { "SMCR_MAX_FDS", "10", "SMCR_LOG_FILE", long_path, NULL };
	const char *huge[] = { "SMCR_MAX_FDS", "4294967296", NULL };
	struct smcr_config cfg;

	memset(long_path, 'a', sizeof(long_path) - 1);
	long_path[sizeof(long_path) - 1] = '\0';
	cfg = parse(env);
	assert_int_equal(cfg.n_problems, 2);
	assert_int_equal(cfg.max_fds, 0);
	assert_string_equal(cfg.log_file, "");
	cfg = parse(huge);
	assert_int_equal(cfg.n_problems, 1);
	assert_int_equal(cfg.max_fds, 0);
}

static void test_rundir(void **state)
{
	char long_path[200];
	const char *abs[] = { "SMCR_RUNDIR", "/run/smcr", NULL };
	const char *rel[] = { "SMCR_RUNDIR", "run/smcr", NULL };
	const char *huge[] = { "SMCR_RUNDIR", long_path, NULL };
	struct smcr_config cfg;

	(void)state;
	memset(long_path, 'a', sizeof(long_path) - 1);
	long_path[0] = '/';
	long_path[sizeof(long_path) - 1] = '\0';
	cfg = parse(abs);
	assert_int_equal(cfg.n_problems, 0);
	assert_string_equal(cfg.rundir, "/run/smcr");
	cfg = parse(rel);
	assert_int_equal(cfg.n_problems, 1);
	assert_string_equal(cfg.rundir, "");
	cfg = parse(huge);
	assert_int_equal(cfg.n_problems, 1);
	assert_string_equal(cfg.rundir, "");
}

static void test_bools(void **state)
{
	static const char *const yes[] = { "1", "yes", "TRUE", "on" };
	static const char *const no[] = { "0", "no", "false", "OFF" };
	bool value;

	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(smcr_config_parse_bool(yes[i], &value), 0);
		assert_true(value);
		assert_int_equal(smcr_config_parse_bool(no[i], &value), 0);
		assert_false(value);
	}
	assert_int_equal(smcr_config_parse_bool("2", &value), -1);
	assert_int_equal(smcr_config_parse_bool("", &value), -1);
}

static void test_problem_list_is_bounded(void **state)
{
	/* The same bad variable looked up many times must not overflow problems[]. */
	struct smcr_config cfg;
	const char *env[] = { "SMC_SNDBUF", "bad", NULL };

	smcr_config_parse(&cfg, fake_getenv, (void *)env);
	for (int i = 0; i < 3 * SMCR_CONFIG_MAX_PROBLEMS; i++)
		smcr_config_parse(&cfg, fake_getenv, (void *)env);
	assert_int_equal(cfg.n_problems, 1); /* parse starts from defaults each time */
}

static void test_process_config_parsed_once(void **state)
{
	const struct smcr_config *first, *second;

	setenv("SMC_DEBUG", "trace", 1);
	setenv("SMC_SNDBUF", "32k", 1);
	first = smcr_config_get();
	assert_int_equal(first->log_level, SMCR_LOG_TRACE);
	assert_int_equal(first->sndbuf, 32 * 1024);
	setenv("SMC_SNDBUF", "64k", 1);
	second = smcr_config_get();
	assert_ptr_equal(first, second);
	assert_int_equal(second->sndbuf, 32 * 1024);
}

/*
 * Also src/common: real.c's guard against binding our own wrapper. The
 * test program plays the library: its own functions are "own", libc's and
 * the bound table's are not.
 */
static void test_real_table_and_self_check(void **state)
{
	static int own_data;

	assert_true(smcr_real_is_own_symbol((const void *)test_defaults));
	assert_true(smcr_real_is_own_symbol((const void *)smcr_config_parse));
	assert_true(smcr_real_is_own_symbol(&own_data));
	assert_false(smcr_real_is_own_symbol((const void *)strlen));
	assert_false(smcr_real_is_own_symbol(NULL));
	smcr_real_bind();
	assert_true(smcr_real_is_bound());
	assert_non_null(smcr_real.read);
	assert_non_null(smcr_real.socket);
	assert_false(smcr_real_is_own_symbol((const void *)smcr_real.read));
	assert_int_equal(smcr_real.close(-1), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_empty_values_mean_default),
		cmocka_unit_test(test_every_variable),
		cmocka_unit_test(test_debug_levels),
		cmocka_unit_test(test_size_suffixes),
		cmocka_unit_test(test_bad_sizes),
		cmocka_unit_test(test_bad_values_keep_defaults_and_are_reported),
		cmocka_unit_test(test_buffer_size_range),
		cmocka_unit_test(test_max_fds_range_and_log_file_length),
		cmocka_unit_test(test_rundir),
		cmocka_unit_test(test_bools),
		cmocka_unit_test(test_cidr),
		cmocka_unit_test(test_transport_and_peer_lists),
		cmocka_unit_test(test_problem_list_is_bounded),
		cmocka_unit_test(test_ueids),
		cmocka_unit_test(test_learn),
		cmocka_unit_test(test_exit_report),
		cmocka_unit_test(test_af_smc),
		cmocka_unit_test(test_process_config_parsed_once),
		cmocka_unit_test(test_real_table_and_self_check),
	};

	return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
