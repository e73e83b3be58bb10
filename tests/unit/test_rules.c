/* SPDX-License-Identifier: MIT */
/*
 * The rules file (src/common/rules.c): its syntax, every error naming
 * file:line, the value and what was expected; the files' order (the user's
 * before the system's, $SMCR_CONF instead of /etc/smcr.conf); and what the
 * engine's policy makes of the rules (src/smcr/policy.c smcr_policy_rule):
 * the first match wins, IPv4-mapped IPv6 is IPv4, and the environment wins.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/config.h"
#include "common/rules.h"
#include "smcr/policy.h"
#include "sockaddr_test.h"

static struct smcr_rules rules;

static int parse(const char *text)
{
	memset(&rules, 0, sizeof(rules));
	return smcr_rules_parse(&rules, "/etc/smcr.conf", text, strlen(text));
}

/* The text fails to parse with exactly this problem. */
static void assert_problem(const char *text, const char *problem)
{
	assert_int_equal(parse(text), -1);
	assert_true(rules.broken);
	assert_string_equal(rules.problem, problem);
}

static void test_good_file(void **state)
{
	(void)state;
	assert_int_equal(parse("# comment\n"
			       "\n"
			       "tcp   program=sshd\n"
			       "  tcp\tport=5432   # trailing comment\n"
			       "shm   role=server port=6379\r\n"
			       "rdma  peer=10.0.0.0/8\n"
			       "rdma  addr=fd77::/64 role=client\n"
			       "smc   *"),
			 0);
	assert_false(rules.broken);
	assert_int_equal(rules.n, 6);
	assert_int_equal(rules.rule[0].action, SMCR_RULE_TCP);
	assert_string_equal(rules.rule[0].program, "sshd");
	assert_int_equal(rules.rule[0].line, 3);
	assert_int_equal(rules.rule[1].port, 5432);
	assert_int_equal(rules.rule[1].line, 4);
	assert_int_equal(rules.rule[2].action, SMCR_RULE_SHM);
	assert_int_equal(rules.rule[2].role, SMCR_RULE_SERVER);
	assert_int_equal(rules.rule[2].port, 6379);
	assert_int_equal(rules.rule[3].action, SMCR_RULE_RDMA);
	assert_true(rules.rule[3].has_addr);
	assert_int_equal(rules.rule[3].addr.family, AF_INET);
	assert_int_equal(rules.rule[3].addr.prefix, 8);
	assert_int_equal(rules.rule[4].addr.family, AF_INET6);
	assert_int_equal(rules.rule[4].role, SMCR_RULE_CLIENT);
	assert_int_equal(rules.rule[5].action, SMCR_RULE_SMC);
	assert_false(rules.rule[5].has_addr);
	assert_int_equal(rules.rule[5].line, 8);
	assert_string_equal(rules.files[rules.rule[5].file], "/etc/smcr.conf");
	assert_string_equal(smcr_rule_action_name(SMCR_RULE_RDMA), "rdma");
}

static void test_errors_name_line_value_and_expectation(void **state)
{
	(void)state;
	assert_problem("smc *\nfast port=1\n",
		       "/etc/smcr.conf:2: 'fast': expected an action: smc, shm, rdma or tcp;"
		       " every connection stays TCP");
	assert_problem("tcp colour=red\n",
		       "/etc/smcr.conf:1: 'colour=red': unknown key: expected program=, role=,"
		       " addr= (or peer=) or port=; every connection stays TCP");
	assert_problem("rdma peer=10.0.0.0/33\n",
		       "/etc/smcr.conf:1: 'peer=10.0.0.0/33': prefix length out of range:"
		       " expected /0../32 for IPv4; every connection stays TCP");
	assert_problem("rdma addr=10.0.0.300\n",
		       "/etc/smcr.conf:1: 'addr=10.0.0.300': not an IPv4 or IPv6 address;"
		       " every connection stays TCP");
	assert_problem("tcp port=0\n",
		       "/etc/smcr.conf:1: 'port=0': expected a port 1..65535; every connection stays TCP");
	assert_problem("tcp port=65536\n",
		       "/etc/smcr.conf:1: 'port=65536': expected a port 1..65535;"
		       " every connection stays TCP");
	assert_problem("tcp role=peer\n",
		       "/etc/smcr.conf:1: 'role=peer': expected role=client or role=server;"
		       " every connection stays TCP");
	assert_problem("tcp port=1 port=2\n",
		       "/etc/smcr.conf:1: 'port=2': key given twice; every connection stays TCP");
	assert_problem("tcp addr=10.0.0.1 peer=10.0.0.2\n",
		       "/etc/smcr.conf:1: 'peer=10.0.0.2': key given twice; every connection stays TCP");
	assert_problem("tcp addr=10.0.0.1:80\n",
		       "/etc/smcr.conf:1: 'addr=10.0.0.1:80': a port belongs in port=, not in the"
		       " address; every connection stays TCP");
	assert_problem("tcp program=/usr/sbin/sshd\n",
		       "/etc/smcr.conf:1: 'program=/usr/sbin/sshd': expected a program name (no '/',"
		       " at most 63 characters); every connection stays TCP");
	assert_problem("tcp program=\n",
		       "/etc/smcr.conf:1: 'program=': empty value; every connection stays TCP");
	assert_problem("tcp\n", "/etc/smcr.conf:1: 'tcp' matches nothing: expected * or KEY=VALUE;"
				" every connection stays TCP");
	assert_problem("tcp * port=1\n",
		       "/etc/smcr.conf:1: * stands alone: expected * or KEY=VALUE...;"
		       " every connection stays TCP");
	assert_problem("tcp sshd\n",
		       "/etc/smcr.conf:1: 'sshd': expected KEY=VALUE or *; every connection stays TCP");
	assert_problem("TCP *\n", "/etc/smcr.conf:1: 'TCP': expected an action: smc, shm, rdma or tcp;"
				  " every connection stays TCP");
}

static void test_limits(void **state)
{
	char text[SMCR_RULES_MAX * 16 + 64] = "", line[SMCR_RULES_LINE_MAX + 8];

	(void)state;
	for (unsigned i = 0; i < SMCR_RULES_MAX; i++)
		strcat(text, "tcp port=1\n");
	assert_int_equal(parse(text), 0);
	strcat(text, "tcp port=2\n");
	assert_problem(text, "/etc/smcr.conf:65: more than 64 rules; every connection stays TCP");

	memset(line, ' ', sizeof(line));
	memcpy(line, "tcp *", 5);
	line[SMCR_RULES_LINE_MAX] = '\0';
	assert_problem(line, "/etc/smcr.conf:1: line longer than 511 characters;"
			     " every connection stays TCP");
	assert_int_equal(parse("tcp *\0port=1"), 0); /* strlen stops at the NUL */
	memset(&rules, 0, sizeof(rules));
	assert_int_equal(smcr_rules_parse(&rules, "f", "tcp *\n\0x\n", 9), -1);
	assert_string_equal(rules.problem, "f:2: a NUL byte: not a text file; every connection stays TCP");
}

/* ---- files ----------------------------------------------------------------------- */

static char dir[64];

static void write_file(const char *name, const char *text)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

struct env {
	const char *names[4];
	const char *values[4];
};

static const char *env_get(const char *name, void *ctx)
{
	const struct env *env = ctx;

	for (unsigned i = 0; i < 4 && env->names[i]; i++)
		if (strcmp(env->names[i], name) == 0)
			return env->values[i];
	return NULL;
}

static void test_files(void **state)
{
	char system[128], xdg[128], home[128], missing[128];
	struct env env = { { "SMCR_CONF", "XDG_CONFIG_HOME" } };

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/smcr-test-rules.XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(system, sizeof(system), "%s/system.conf", dir);
	snprintf(xdg, sizeof(xdg), "%s", dir);
	snprintf(missing, sizeof(missing), "%s/missing.conf", dir);
	write_file("system.conf", "tcp *\n");
	write_file("smcr.conf", "smc port=22\n");

	/* the user's file first, then $SMCR_CONF's */
	env.values[0] = system;
	env.values[1] = xdg;
	smcr_rules_load(&rules, env_get, &env, true);
	assert_false(rules.broken);
	assert_int_equal(rules.n, 2);
	assert_int_equal(rules.rule[0].action, SMCR_RULE_SMC);
	snprintf(home, sizeof(home), "%s/smcr.conf", dir);
	assert_string_equal(rules.files[rules.rule[0].file], home);
	assert_string_equal(rules.files[rules.rule[1].file], system);

	/* a setuid process reads the system's file alone, whatever its environment says */
	smcr_rules_load(&rules, env_get, &env, false);
	for (unsigned i = 0; i < rules.n_files; i++)
		assert_string_equal(rules.files[i], SMCR_RULES_SYSTEM_FILE);

	/* $HOME/.config when XDG_CONFIG_HOME is unset or relative */
	env.names[1] = "HOME";
	snprintf(home, sizeof(home), "%s/home", dir);
	env.values[1] = home;
	smcr_rules_load(&rules, env_get, &env, true);
	assert_int_equal(rules.n, 1); /* no ~/.config/smcr.conf there */

	/* a missing $SMCR_CONF is an error (a typo must not drop the rules unseen) */
	env.values[0] = missing;
	smcr_rules_load(&rules, env_get, &env, true);
	assert_true(rules.broken);
	assert_non_null(strstr(rules.problem, "missing.conf: cannot be read: No such file or directory"));

	/* /dev/null: no rules; a directory: an error */
	env.values[0] = "/dev/null";
	smcr_rules_load(&rules, env_get, &env, true);
	assert_false(rules.broken);
	assert_int_equal(rules.n, 0);
	env.values[0] = dir;
	smcr_rules_load(&rules, env_get, &env, true);
	assert_true(rules.broken);
	assert_non_null(strstr(rules.problem, ": not a regular file; every connection stays TCP"));

	/* the configuration names the rules, and their problem */
	{
		struct smcr_config cfg;

		env.values[0] = system;
		smcr_config_defaults(&cfg);
		smcr_config_add_rules(&cfg, &rules, env_get, &env, true);
		assert_ptr_equal(cfg.rules, &rules);
		assert_int_equal(cfg.n_problems, 0);
		env.values[0] = missing;
		smcr_config_defaults(&cfg);
		smcr_config_add_rules(&cfg, &rules, env_get, &env, true);
		assert_int_equal(cfg.n_problems, 1);
		assert_string_equal(cfg.problems[0], rules.problem);
		env.values[0] = "/dev/null";
		smcr_config_defaults(&cfg);
		smcr_config_add_rules(&cfg, &rules, env_get, &env, true);
		assert_null(cfg.rules);
	}
	unlink(system);
	snprintf(system, sizeof(system), "%s/smcr.conf", dir);
	unlink(system);
	rmdir(home);
	rmdir(dir);
}

/* ---- the policy's verdict ---------------------------------------------------------- */

/* The verdict's action and the matched rule's line (0: none). */
static int verdict(const struct smcr_config *cfg, bool server, const char *addr, unsigned port,
		   const char *program, unsigned *line)
{
	struct sockaddr_storage ss = sockaddr_of(addr, port);
	struct smcr_policy_verdict v;

	smcr_policy_rule(cfg, server, (struct sockaddr *)&ss, program, program, &v);
	*line = v.rule ? v.rule->line : 0;
	return v.action;
}

static void test_policy_verdict(void **state)
{
	struct smcr_config cfg;
	struct smcr_policy_verdict v;
	struct sockaddr_storage ss;
	unsigned line;

	(void)state;
	smcr_config_defaults(&cfg);
	assert_int_equal(verdict(&cfg, false, "10.0.0.1", 80, "x", &line), SMCR_RULE_SMC);
	assert_int_equal(parse("tcp program=sshd\n"
			       "tcp port=5432\n"
			       "shm role=server port=6379\n"
			       "rdma peer=10.0.0.0/8\n"
			       "tcp role=client addr=fd77::/64\n"), 0);
	cfg.rules = &rules;
	assert_int_equal(verdict(&cfg, false, "10.1.2.3", 5432, "sshd", &line), SMCR_RULE_TCP);
	assert_int_equal(line, 1);
	/* first match wins */
	assert_int_equal(verdict(&cfg, false, "10.1.2.3", 5432, "psql", &line), SMCR_RULE_TCP);
	assert_int_equal(line, 2);
	assert_int_equal(verdict(&cfg, false, "10.1.2.3", 80, "psql", &line), SMCR_RULE_RDMA);
	assert_int_equal(line, 4);
	/* IPv4-mapped IPv6 is IPv4 */
	assert_int_equal(verdict(&cfg, false, "::ffff:10.9.9.9", 80, "psql", &line), SMCR_RULE_RDMA);
	/* role */
	assert_int_equal(verdict(&cfg, true, "127.0.0.1", 6379, "redis", &line), SMCR_RULE_SHM);
	assert_int_equal(verdict(&cfg, false, "127.0.0.1", 6379, "redis", &line), SMCR_RULE_SMC);
	assert_int_equal(line, 0);
	assert_int_equal(verdict(&cfg, false, "fd77::9", 1, "x", &line), SMCR_RULE_TCP);
	assert_int_equal(verdict(&cfg, true, "fd77::9", 1, "x", &line), SMCR_RULE_SMC);
	/* comm is at most 15 characters: a longer program= matches its first 15 */
	assert_int_equal(parse("tcp program=a-very-long-program-name\n"), 0);
	ss = sockaddr_of("10.0.0.1", 1);
	smcr_policy_rule(&cfg, false, (struct sockaddr *)&ss, "other", "a-very-long-pro", &v);
	assert_int_equal(v.action, SMCR_RULE_TCP);
	smcr_policy_rule(&cfg, false, (struct sockaddr *)&ss, "other", "a-very", &v);
	assert_int_equal(v.action, SMCR_RULE_SMC);

	/* the environment wins over every rule */
	assert_int_equal(parse("tcp *\n"), 0);
	assert_int_equal(verdict(&cfg, false, "10.0.0.1", 1, "x", &line), SMCR_RULE_TCP);
	cfg.transport_set = true;
	smcr_policy_rule(&cfg, false, (struct sockaddr *)&ss, "x", "x", &v);
	assert_int_equal(v.action, SMCR_RULE_SMC);
	assert_string_equal(v.env, "SMCR_TRANSPORT");
	cfg.transport_set = false;
	cfg.samehost_set = true;
	smcr_policy_rule(&cfg, true, (struct sockaddr *)&ss, "x", "x", &v);
	assert_string_equal(v.env, "SMCR_SAMEHOST");
	cfg.samehost_set = false;
	assert_int_equal(smcr_config_parse_cidr("10.0.0.0/8", &cfg.peers[0]), 0);
	cfg.n_peers = 1;
	smcr_policy_rule(&cfg, false, (struct sockaddr *)&ss, "x", "x", &v);
	assert_string_equal(v.env, "SMCR_PEERS");
	assert_int_equal(smcr_config_parse_cidr("10.0.0.1", &cfg.deny[0]), 0);
	cfg.n_deny = 1;
	smcr_policy_rule(&cfg, false, (struct sockaddr *)&ss, "x", "x", &v);
	assert_string_equal(v.env, "SMCR_PEERS_DENY");
	/* a server's local address is not a destination: the lists do not decide it */
	smcr_policy_rule(&cfg, true, (struct sockaddr *)&ss, "x", "x", &v);
	assert_null(v.env);
	assert_int_equal(v.action, SMCR_RULE_TCP);

	/* a broken file: TCP, whatever the environment says */
	assert_int_equal(parse("tcp port=x\n"), -1);
	cfg.transport_set = true;
	smcr_policy_rule(&cfg, false, (struct sockaddr *)&ss, "x", "x", &v);
	assert_true(v.broken);
	assert_int_equal(v.action, SMCR_RULE_TCP);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good_file),
		cmocka_unit_test(test_errors_name_line_value_and_expectation),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_files),
		cmocka_unit_test(test_policy_verdict),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
