/* SPDX-License-Identifier: MIT */
/* Configuration parsing (see config.h). */
#include "common/config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/compiler.h"
#include "common/log.h"
#include "common/rules.h"

void smcr_config_defaults(struct smcr_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->log_level = SMCR_LOG_WARN;
	cfg->samehost = true;
	cfg->kernel_ueid = true;
	cfg->learn = true;
	cfg->speak_first_wait_ms = SMCR_CONFIG_SPEAK_FIRST_WAIT_MS;
	cfg->testlink_s = SMCR_CONFIG_TESTLINK_DEFAULT_S;
	cfg->spin_us = SMCR_CONFIG_SPIN_DEFAULT_US;
}

/* Digits only, no sign, no spaces; 0 on success. */
static int parse_u64(const char *text, const char **end, uint64_t *out)
{
	uint64_t value = 0;
	const char *p = text;

	if (!isdigit((unsigned char)*p))
		return -1;
	for (; isdigit((unsigned char)*p); p++) {
		unsigned digit = (unsigned)(*p - '0');

		if (value > (UINT64_MAX - digit) / 10)
			return -1;
		value = value * 10 + digit;
	}
	*end = p;
	*out = value;
	return 0;
}

int smcr_config_parse_size(const char *text, size_t *out)
{
	uint64_t value, unit = 1;
	const char *end;

	if (!text || parse_u64(text, &end, &value) < 0)
		return -1;
	switch (*end) {
	case '\0':
		break;
	case 'k': case 'K':
		unit = 1024;
		end++;
		break;
	case 'm': case 'M':
		unit = 1024 * 1024;
		end++;
		break;
	case 'g': case 'G':
		unit = 1024 * 1024 * 1024;
		end++;
		break;
	default:
		return -1;
	}
	if (*end != '\0' || value > SIZE_MAX / unit)
		return -1;
	*out = (size_t)(value * unit);
	return 0;
}

int smcr_config_parse_uint(const char *text, unsigned *out)
{
	uint64_t value;
	const char *end;

	if (!text || parse_u64(text, &end, &value) < 0 || *end != '\0' || value > UINT_MAX)
		return -1;
	*out = (unsigned)value;
	return 0;
}

/* A word of a small vocabulary (case-insensitive) to its value. */
struct config_word {
	const char *name;
	int value;
};

static int parse_word(const char *text, const struct config_word *words, size_t n, int *out)
{
	if (!text)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (strcasecmp(text, words[i].name) == 0) {
			*out = words[i].value;
			return 0;
		}
	}
	return -1;
}

int smcr_config_parse_level(const char *text, int *out)
{
	static const struct config_word names[] = {
		{ "0", SMCR_LOG_WARN },    { "1", SMCR_LOG_DEBUG },  { "2", SMCR_LOG_TRACE },
		{ "error", SMCR_LOG_ERROR }, { "warn", SMCR_LOG_WARN }, { "warning", SMCR_LOG_WARN },
		{ "info", SMCR_LOG_INFO },   { "debug", SMCR_LOG_DEBUG }, { "trace", SMCR_LOG_TRACE },
	};

	return parse_word(text, names, ARRAY_SIZE(names), out);
}

int smcr_config_parse_bool(const char *text, bool *out)
{
	static const char *const yes[] = { "1", "yes", "true", "on" };
	static const char *const no[] = { "0", "no", "false", "off" };

	if (!text)
		return -1;
	for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
		if (strcasecmp(text, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcasecmp(text, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return -1;
}

int smcr_config_parse_transport(const char *text, int *out)
{
	static const struct config_word names[] = {
		{ "auto", SMCR_CONFIG_TRANSPORT_AUTO },
		{ "rdma", SMCR_CONFIG_TRANSPORT_RDMA },
		{ "smc-r", SMCR_CONFIG_TRANSPORT_RDMA },
		{ "shm", SMCR_CONFIG_TRANSPORT_SHM },
	};

	return parse_word(text, names, ARRAY_SIZE(names), out);
}

int smcr_config_parse_af_smc(const char *text, int *out)
{
	static const struct config_word names[] = {
		{ "auto", SMCR_CONFIG_AF_SMC_AUTO },
		{ "smcr", SMCR_CONFIG_AF_SMC_SMCR },
		{ "kernel", SMCR_CONFIG_AF_SMC_KERNEL },
	};

	return parse_word(text, names, ARRAY_SIZE(names), out);
}

/* Sets *why (when asked for) and fails: the parsers below say what was wrong. */
static int cidr_fail(const char **why, const char *what)
{
	if (why)
		*why = what;
	return -1;
}

int smcr_config_parse_cidr_why(const char *text, struct smcr_config_cidr *out, const char **why)
{
	char buf[INET6_ADDRSTRLEN + 16], *addr = buf, *slash, *colon = NULL;
	unsigned prefix, port = 0, max;
	size_t len;

	if (!text || (len = strlen(text)) == 0)
		return cidr_fail(why, "empty");
	if (len >= sizeof(buf))
		return cidr_fail(why, "too long for an address");
	memcpy(buf, text, len + 1);
	memset(out, 0, sizeof(*out));
	if (buf[0] == '[') {
		/* [IPv6[/len]][:port] */
		char *close = strchr(buf, ']');

		if (!close)
			return cidr_fail(why, "'[' without ']'");
		*close = '\0';
		addr = buf + 1;
		if (close[1] == ':')
			colon = close + 1;
		else if (close[1] != '\0')
			return cidr_fail(why, "expected ':PORT' or nothing after ']'");
	} else if (strchr(buf, ':') == strrchr(buf, ':')) {
		/* at most one colon: IPv4[/len][:port] (an IPv6 address has two or more) */
		colon = strchr(buf, ':');
	}
	if (colon) {
		*colon = '\0';
		if (smcr_config_parse_uint(colon + 1, &port) < 0 || port == 0 || port > 65535)
			return cidr_fail(why, "port out of range: expected 1..65535");
	}
	slash = strchr(addr, '/');
	if (slash)
		*slash = '\0';
	if (inet_pton(AF_INET, addr, out->addr) == 1) {
		out->family = AF_INET;
		max = 32;
	} else if (inet_pton(AF_INET6, addr, out->addr) == 1) {
		out->family = AF_INET6;
		max = 128;
	} else {
		return cidr_fail(why, "not an IPv4 or IPv6 address");
	}
	prefix = max;
	if (slash && (smcr_config_parse_uint(slash + 1, &prefix) < 0 || prefix > max))
		return cidr_fail(why, max == 32 ? "prefix length out of range: expected /0../32 for IPv4"
						: "prefix length out of range: expected /0../128 for IPv6");
	/* Zero the host bits, so that matching is a plain compare. */
	for (unsigned bit = prefix; bit < max; bit++)
		out->addr[bit / 8] &= (unsigned char)~(0x80u >> (bit % 8));
	out->prefix = (unsigned char)prefix;
	out->port = (unsigned short)port;
	return 0;
}

int smcr_config_parse_cidr(const char *text, struct smcr_config_cidr *out)
{
	return smcr_config_parse_cidr_why(text, out, NULL);
}

static void SMCR_PRINTF(2, 3) add_problem(struct smcr_config *cfg, const char *fmt, ...);

int smcr_config_parse_eid(const char *text, size_t len, char out[SMCR_CONFIG_EID_LEN])
{
	if (len == 0 || len > SMCR_CONFIG_EID_LEN)
		return -1;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)toupper((unsigned char)text[i]);

		/*
		 * The kernel's UEID rule (smc_clc_ueid_valid): letters, digits, '.',
		 * '-', the first a letter or digit.
		 */
		if (!(isupper(c) || isdigit(c) || (i > 0 && (c == '.' || c == '-'))))
			return -1;
		out[i] = (char)c;
	}
	memset(out + len, ' ', SMCR_CONFIG_EID_LEN - len);
	return 0;
}

static void parse_ueids(struct smcr_config *cfg, const char *text)
{
	const char *p = text;

	while (*p) {
		size_t len = strcspn(p, ", ");

		if (len > 0 && cfg->n_ueids >= SMCR_CONFIG_MAX_UEIDS) {
			add_problem(cfg, "SMCR_UEID: more than %u EIDs; the rest ignored",
				    SMCR_CONFIG_MAX_UEIDS);
			break;
		}
		if (len > 0 && smcr_config_parse_eid(p, len, cfg->ueid[cfg->n_ueids]) < 0)
			add_problem(cfg, "SMCR_UEID: '%.*s' is not an EID (1..32 of A-Z 0-9 . -, first A-Z 0-9);"
				    " ignored", (int)(len > 40 ? 40 : len), p);
		else if (len > 0)
			cfg->n_ueids++;
		p += len;
		p += strspn(p, ", ");
	}
}

static void SMCR_PRINTF(2, 3) add_problem(struct smcr_config *cfg, const char *fmt, ...)
{
	va_list ap;

	if (cfg->n_problems >= SMCR_CONFIG_MAX_PROBLEMS)
		return;
	va_start(ap, fmt);
	vsnprintf(cfg->problems[cfg->n_problems++], SMCR_CONFIG_PROBLEM_LEN, fmt, ap);
	va_end(ap);
}

/* The value of name, or NULL when unset or empty (empty means "default"). */
static const char *lookup(smcr_config_getenv_fn *get, void *ctx, const char *name)
{
	const char *value = get(name, ctx);

	return value && *value ? value : NULL;
}

static void parse_buffer_size(struct smcr_config *cfg, smcr_config_getenv_fn *get, void *ctx,
			      const char *name, size_t *out)
{
	const char *text = lookup(get, ctx, name);
	size_t size;

	if (!text)
		return;
	if (smcr_config_parse_size(text, &size) < 0)
		add_problem(cfg, "%s=%.40s: not a size (bytes, or a number with k/m/g); ignored",
			    name, text);
	else if (size < SMCR_CONFIG_BUF_MIN || size > SMCR_CONFIG_BUF_MAX)
		add_problem(cfg, "%s=%.40s: outside %uk..%um; ignored", name, text,
			    SMCR_CONFIG_BUF_MIN / 1024, SMCR_CONFIG_BUF_MAX / (1024 * 1024));
	else
		*out = size;
}

/*
 * An on/off setting: 0/1, and the words other tools accept for them (yes/no,
 * true/false, on/off); anything else keeps the default, and the message
 * lists every accepted spelling.
 */
static void parse_switch(struct smcr_config *cfg, smcr_config_getenv_fn *get, void *ctx,
			 const char *name, bool *out)
{
	const char *text = lookup(get, ctx, name);

	if (text && smcr_config_parse_bool(text, out) < 0)
		add_problem(cfg, "%s=%.40s: expected 0 or 1 (or yes/no, true/false, on/off);"
			    " the default (%s) is used", name, text, *out ? "1" : "0");
}

/* A comma- or space-separated CIDR list.  0, or -1 if an entry was bad or one too many. */
static int parse_cidr_list(struct smcr_config *cfg, const char *name, const char *text,
			   struct smcr_config_cidr *list, unsigned *n)
{
	const char *p = text;
	int bad = 0;

	*n = 0;
	while (*p) {
		size_t len = strcspn(p, ", \t");
		char entry[64];

		if (len == 0) {
			p++;
			continue;
		}
		if (len >= sizeof(entry) || *n >= SMCR_CONFIG_MAX_PEERS) {
			add_problem(cfg, "%s: entry '%.*s' %s; ignored", name, (int)(len > 40 ? 40 : len),
				    p, len >= sizeof(entry) ? "too long" : "beyond the first 32");
			bad = -1;
		} else {
			const char *why;

			memcpy(entry, p, len);
			entry[len] = '\0';
			if (smcr_config_parse_cidr_why(entry, &list[*n], &why) == 0) {
				(*n)++;
			} else {
				add_problem(cfg, "%s: '%.48s': %s; expected ADDR[/LEN][:PORT] (IPv6 with"
					    " a port: [ADDR/LEN]:PORT); entry ignored", name, entry, why);
				bad = -1;
			}
		}
		p += len;
	}
	return bad;
}

/* A number in lo..hi (`unit` names it in the message, or ""); else the default stays. */
static void parse_range(struct smcr_config *cfg, smcr_config_getenv_fn *get, void *ctx,
			const char *name, unsigned lo, unsigned hi, const char *unit, unsigned *out)
{
	const char *text = lookup(get, ctx, name);
	unsigned value;

	if (!text)
		return;
	if (smcr_config_parse_uint(text, &value) < 0 || value < lo || value > hi)
		add_problem(cfg, "%s=%.40s: expected %u..%u%s; ignored", name, text, lo, hi, unit);
	else
		*out = value;
}

/* Where the log goes (SMCR_LOG_FILE) and where the run-time files live (SMCR_RUNDIR). */
static void parse_paths(struct smcr_config *cfg, smcr_config_getenv_fn *get, void *ctx)
{
	const char *text = lookup(get, ctx, "SMCR_LOG_FILE");

	if (text && strlen(text) >= sizeof(cfg->log_file))
		add_problem(cfg, "SMCR_LOG_FILE: path longer than %zu bytes; logging to stderr",
			    sizeof(cfg->log_file) - 1);
	else if (text)
		memcpy(cfg->log_file, text, strlen(text) + 1);

	text = lookup(get, ctx, "SMCR_RUNDIR");
	if (text && *text && (text[0] != '/' || strlen(text) >= sizeof(cfg->rundir)))
		add_problem(cfg, "SMCR_RUNDIR=%.40s: expected an absolute path shorter than %zu "
			    "bytes; ignored", text, sizeof(cfg->rundir));
	else if (text)
		memcpy(cfg->rundir, text, strlen(text) + 1);
}

/* The settings that choose a connection's way: transport, peers, UEIDs, AF_SMC. */
static void parse_policy(struct smcr_config *cfg, smcr_config_getenv_fn *get, void *ctx)
{
	const char *text = lookup(get, ctx, "SMCR_TRANSPORT");

	if (text && smcr_config_parse_transport(text, &cfg->transport) < 0)
		add_problem(cfg, "SMCR_TRANSPORT=%.40s: expected auto, rdma or shm; ignored", text);
	cfg->transport_set = text != NULL;

	text = lookup(get, ctx, "SMCR_PEERS");
	if (text)
		(void)parse_cidr_list(cfg, "SMCR_PEERS", text, cfg->peers, &cfg->n_peers);
	text = lookup(get, ctx, "SMCR_UEID");
	if (text)
		parse_ueids(cfg, text);
	parse_switch(cfg, get, ctx, "SMCR_KERNEL_UEID", &cfg->kernel_ueid);
	parse_switch(cfg, get, ctx, "SMCR_LEARN", &cfg->learn);
	text = lookup(get, ctx, "SMCR_AF_SMC");
	if (text && smcr_config_parse_af_smc(text, &cfg->af_smc) < 0)
		add_problem(cfg, "SMCR_AF_SMC=%.40s: expected auto, smcr or kernel; ignored", text);

	text = lookup(get, ctx, "SMCR_PEERS_DENY");
	/* What a bad deny entry meant to exclude is unknown: propose SMC-R nowhere. */
	if (text && parse_cidr_list(cfg, "SMCR_PEERS_DENY", text, cfg->deny, &cfg->n_deny) < 0 &&
	    cfg->n_peers > 0) {
		add_problem(cfg, "SMCR_PEERS_DENY is not fully understood: SMCR_PEERS ignored");
		cfg->n_peers = 0;
	}
}

void smcr_config_parse(struct smcr_config *cfg, smcr_config_getenv_fn *get, void *ctx)
{
	const char *text;

	smcr_config_defaults(cfg);

	text = lookup(get, ctx, "SMC_DEBUG");
	if (text && smcr_config_parse_level(text, &cfg->log_level) < 0)
		add_problem(cfg, "SMC_DEBUG=%.40s: expected 0, 1, 2 or error|warn|info|debug|trace;"
			    " ignored", text);

	parse_buffer_size(cfg, get, ctx, "SMC_SNDBUF", &cfg->sndbuf);
	parse_buffer_size(cfg, get, ctx, "SMC_RCVBUF", &cfg->rcvbuf);
	parse_paths(cfg, get, ctx);
	parse_range(cfg, get, ctx, "SMCR_MAX_FDS", SMCR_CONFIG_MAX_FDS_MIN,
		    SMCR_CONFIG_MAX_FDS_LIMIT, "", &cfg->max_fds);

	text = lookup(get, ctx, "SMCR_DISABLE");
	/* Whoever wrote it meant to say something about turning smcr off: do no harm. */
	if (text && smcr_config_parse_bool(text, &cfg->disabled) < 0) {
		add_problem(cfg, "SMCR_DISABLE=%.40s: expected 0 or 1 (or yes/no, true/false, on/off);"
			    " smcr stays out of the way, as with SMCR_DISABLE=1", text);
		cfg->disabled = true;
	}
	parse_switch(cfg, get, ctx, "SMCR_SAMEHOST", &cfg->samehost);
	cfg->samehost_set = lookup(get, ctx, "SMCR_SAMEHOST") != NULL;

	parse_range(cfg, get, ctx, "SMCR_SPEAK_FIRST_WAIT_MS", 0,
		    SMCR_CONFIG_SPEAK_FIRST_WAIT_MAX_MS, "", &cfg->speak_first_wait_ms);
	parse_range(cfg, get, ctx, "SMCR_SPIN_US", 0, SMCR_CONFIG_SPIN_MAX_US, "", &cfg->spin_us);
	parse_range(cfg, get, ctx, "SMCR_TESTLINK_TIME", 1, SMCR_CONFIG_TESTLINK_MAX_S, " seconds",
		    &cfg->testlink_s);
	parse_switch(cfg, get, ctx, "SMCR_EXIT_REPORT", &cfg->exit_report);
	parse_policy(cfg, get, ctx);
}

static const char *environ_getenv(const char *name, void *ctx)
{
	return getenv(name);
}

static struct smcr_config process_config;
static struct smcr_rules process_rules;
static pthread_once_t process_config_once = PTHREAD_ONCE_INIT;

/* Who this process is for program= (rules.h); no wrapper sees the prctl. */
static void rules_identify(struct smcr_rules *rules)
{
	const char *name = program_invocation_short_name;

	snprintf(rules->program, sizeof(rules->program), "%s", name ? name : "");
	if (syscall(SYS_prctl, PR_GET_NAME, rules->comm) < 0)
		rules->comm[0] = '\0';
	rules->comm[sizeof(rules->comm) - 1] = '\0';
}

void smcr_config_add_rules(struct smcr_config *cfg, struct smcr_rules *rules,
			   smcr_config_getenv_fn *get, void *ctx, bool trusted)
{
	smcr_rules_load(rules, get, ctx, trusted);
	rules_identify(rules);
	if (rules->broken)
		add_problem(cfg, "%s", rules->problem);
	if (rules->broken || rules->n > 0)
		cfg->rules = rules;
}

static void parse_process_config(void)
{
	smcr_config_parse(&process_config, environ_getenv, NULL);
	smcr_config_add_rules(&process_config, &process_rules, environ_getenv, NULL,
			      !getauxval(AT_SECURE));
}

const struct smcr_config *smcr_config_get(void)
{
	pthread_once(&process_config_once, parse_process_config);
	return &process_config;
}
