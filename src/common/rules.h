/* SPDX-License-Identifier: MIT */
/*
 * The rules file: which connections may use which SMC, per program, role,
 * address and port (smcr(7), RULES).  One rule a line, the first match wins:
 *
 *   # comment
 *   ACTION MATCH...        ACTION: smc | shm | rdma | tcp
 *                          MATCH:  *  alone, or KEY=VALUE, each key once:
 *                                  program=NAME  role=client|server
 *                                  addr=CIDR (peer= is the same key)  port=N
 *
 * Files, read once per process: the user's ($XDG_CONFIG_HOME/smcr.conf, or
 * ~/.config/smcr.conf), then the system's (/etc/smcr.conf, or $SMCR_CONF);
 * the user's rules come first.  A missing file is no rules (but a missing
 * $SMCR_CONF is an error), and /dev/null is an empty file.  A file that
 * cannot be read or understood breaks the whole set: the one problem, with
 * file:line, the text and what was expected, is kept for the library to
 * report, and every connection stays TCP (design §1: do no harm).
 *
 * This module only parses; what a rule does to a connection is the engine's
 * policy (src/smcr/policy.h).
 */
#ifndef SMCR_COMMON_RULES_H
#define SMCR_COMMON_RULES_H

#include <stdbool.h>
#include <stddef.h>

#include "common/config.h"

#define SMCR_RULES_MAX 64u
#define SMCR_RULES_LINE_MAX 512u
#define SMCR_RULES_PROGRAM_LEN 64u
#define SMCR_RULES_PATH_LEN 200u
#define SMCR_RULES_SYSTEM_FILE "/etc/smcr.conf"
#define SMCR_RULES_USER_FILE "smcr.conf" /* in $XDG_CONFIG_HOME or ~/.config */

enum smcr_rule_action {
	SMCR_RULE_SMC = 1, /* whatever SMC the defaults and environment choose */
	SMCR_RULE_SHM,     /* same-host shared memory only */
	SMCR_RULE_RDMA,    /* SMC-R only; the peer counts as running SMC */
	SMCR_RULE_TCP,     /* no SMC at all */
};

enum smcr_rule_role {
	SMCR_RULE_ANY_ROLE = 0,
	SMCR_RULE_CLIENT,
	SMCR_RULE_SERVER,
};

struct smcr_rule {
	unsigned char action;           /* enum smcr_rule_action */
	unsigned char role;             /* enum smcr_rule_role */
	unsigned char file;             /* index into smcr_rules.files */
	bool has_addr;
	unsigned short port;            /* 0 = any */
	unsigned line;
	char program[SMCR_RULES_PROGRAM_LEN]; /* "" = any */
	struct smcr_config_cidr addr;   /* when has_addr; its port is 0 */
};

struct smcr_rules {
	unsigned n;
	struct smcr_rule rule[SMCR_RULES_MAX];
	unsigned n_files;
	char files[2][SMCR_RULES_PATH_LEN];
	/* This process, as program= matches it: argv[0]'s base name, and its comm. */
	char program[SMCR_RULES_PROGRAM_LEN];
	char comm[16];
	/* A file not understood: every connection stays TCP; problem says why. */
	bool broken;
	char problem[SMCR_CONFIG_PROBLEM_LEN];
};

/* "smc", "shm", "rdma", "tcp". */
const char *smcr_rule_action_name(int action);

/*
 * The rule `r` in the file's own words, "tcp program=psql port=5432" ("tcp
 * *" for a rule that matches everything), NUL-terminated and cut to `len`:
 * how smcr-explain and smcr-stat -l name the rule that decided.
 */
void smcr_rule_text(const struct smcr_rule *r, char *out, size_t len);

/*
 * Parses `text` (a whole file, `len` bytes) as `path`, appending its rules.
 * 0, or -1 with rules->broken set and rules->problem naming path:line.
 */
int smcr_rules_parse(struct smcr_rules *rules, const char *path, const char *text, size_t len);

/* Reads and parses one file: 0 (a missing file too), or -1 as above. */
int smcr_rules_load_file(struct smcr_rules *rules, const char *path);

/*
 * The process's files, in order: the user's, then the system's.  get looks
 * variables up (SMCR_CONF, XDG_CONFIG_HOME, HOME); `trusted` false (a setuid
 * process) reads the system file alone.
 */
void smcr_rules_load(struct smcr_rules *rules, smcr_config_getenv_fn *get, void *ctx,
		     bool trusted);

#endif /* SMCR_COMMON_RULES_H */
