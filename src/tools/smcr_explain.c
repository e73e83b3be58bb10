// SPDX-License-Identifier: MIT
/*
 * smcr-explain (run by `smc_run --explain`): which rule or environment
 * setting decides a connection, and what it becomes.  It asks the engine's
 * own policy (src/smcr/policy.h smcr_policy_rule) over the configuration and
 * rules files this process would read, so the answer is the library's.
 *
 *   smcr-explain HOST:PORT [--role client|server] [--program NAME] [--connect]
 *
 * HOST is an address or a name; an IPv6 address with a port is [ADDR]:PORT.
 * --connect then asks the peer itself, as IBM's smc_chk -C does: it
 * connects to HOST:PORT as a client under smcr would, runs the handshake the
 * policy allows, says what came of it (SMC and its transport, or TCP and the
 * reason), and closes without sending application data (the service sees a
 * connection that ends at once).
 * Exit 0 with the answer (for --connect: the connection was made, whatever its
 * mode), 1 when --connect could not connect, 2 on bad usage.
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/config.h"
#include "common/rules.h"
#include "smcr/decline.h"
#include "smcr/engine.h"
#include "smcr/policy.h"

static int usage(const char *why)
{
	if (why)
		fprintf(stderr, "smc_run --explain: %s\n", why);
	fprintf(stderr, "usage: smc_run --explain HOST:PORT [--role client|server] [--program NAME]"
			" [--connect]\n"
			"       (IPv6: [ADDR]:PORT)\n");
	return 2;
}

/* HOST:PORT or [HOST]:PORT into *out; 0, or -1 with *why. */
static int parse_target(const char *text, struct sockaddr_storage *out, const char **why)
{
	char host[256];
	const char *colon, *port;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res;
	size_t len;

	if (text[0] == '[') {
		const char *close = strchr(text, ']');

		if (!close || close[1] != ':')
			return *why = "expected [ADDR]:PORT for IPv6", -1;
		len = (size_t)(close - text - 1);
		port = close + 2;
		text++;
	} else {
		colon = strrchr(text, ':');
		if (!colon || strchr(text, ':') != colon)
			return *why = "expected HOST:PORT (IPv6: [ADDR]:PORT)", -1;
		len = (size_t)(colon - text);
		port = colon + 1;
	}
	if (len == 0 || len >= sizeof(host))
		return *why = "expected a host before ':'", -1;
	memcpy(host, text, len);
	host[len] = '\0';
	if (atoi(port) <= 0 || atoi(port) > 65535 || strspn(port, "0123456789") != strlen(port))
		return *why = "expected a port 1..65535", -1;
	if (getaddrinfo(host, port, &hints, &res) != 0 || !res)
		return *why = "host not found", -1;
	memcpy(out, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	return 0;
}

static void print_rule(const struct smcr_rules *rules, const struct smcr_rule *r)
{
	char text[SMCR_RULES_LINE_MAX];

	smcr_rule_text(r, text, sizeof(text));
	printf("decided by: %s:%u (%s)\n", rules->files[r->file], r->line, text);
}

/* What an environment setting that decides makes of the connection. */
static const char *env_outcome(const struct smcr_config *cfg, const char *env)
{
	if (strcmp(env, "SMCR_TRANSPORT") == 0)
		return cfg->transport == SMCR_CONFIG_TRANSPORT_RDMA  ? "rdma"
		       : cfg->transport == SMCR_CONFIG_TRANSPORT_SHM ? "shm"
								     : "smc";
	if (strcmp(env, "SMCR_SAMEHOST") == 0)
		return cfg->samehost ? "smc" : "rdma";
	if (strcmp(env, "SMCR_PEERS_DENY") == 0)
		return "shm";
	return "smc";
}

static const char *outcome_meaning(const char *outcome)
{
	if (strcmp(outcome, "tcp") == 0)
		return "plain TCP, no SMC tried; fallback reason RULE";
	if (strcmp(outcome, "shm") == 0)
		return "same-host shared memory to an smcr peer on this host, never SMC-R";
	if (strcmp(outcome, "rdma") == 0)
		return "SMC-R only, never same-host shared memory";
	return "SMC as the defaults choose: shared memory on this host, SMC-R to an allowed peer";
}

/* What a reason means to someone checking a peer; NULL where the name says it. */
static const char *reason_hint(uint32_t reason)
{
	switch (reason) {
	case SMCR_CLC_DECL_PEERNOSMC:
		return "nothing says the peer runs SMC: no smcr listener registered on this host for"
		       " the port, the peer not in SMCR_PEERS, no SMC option in its SYN-ACK";
	case SMCR_CLC_DECL_NOSMCRDEV:
		return "no RDMA device for the local address (SMC-R needs one, or a peer on this host)";
	case SMCR_CLC_DECL_RULE:
		return "a rule of the rules file says tcp";
	case SMCR_CLC_DECL_SHORTFLOWS:
		return "recent connections to it were too short for SMC to repay its set-up";
	default:
		return NULL;
	}
}

/*
 * --connect: a client's connection to `target`, its handshake as the library
 * would run it.  0 connected (any mode), 1 not.
 */
static int connect_and_report(const struct sockaddr_storage *target)
{
	socklen_t len = target->ss_family == AF_INET ? sizeof(struct sockaddr_in)
						     : sizeof(struct sockaddr_in6);
	struct smcr_sock_opts opts = { 0 };
	struct smcr_sock *s = NULL;
	int fd, rc, learned;

	fd = socket(target->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		printf("connect: cannot make a socket: %s\n", strerror(errno));
		return 1;
	}
	learned = smcr_sock_connect_learned((const struct sockaddr *)target, len);
	if (!learned) {
		smcr_tcpopt_mark_connect(fd, (const struct sockaddr *)target);
		smcr_sock_connect_prepare((const struct sockaddr *)target);
	}
	if (connect(fd, (const struct sockaddr *)target, len) < 0) {
		printf("connect: failed: %s (plain TCP would fail the same way)\n", strerror(errno));
		close(fd);
		return 1;
	}
	rc = learned ? learned : smcr_sock_connect(fd, &opts, &s);
	if (rc == 0) {
		printf("connect: %s: the peer runs SMC and the handshake completed\n",
		       smcr_sock_mode_name(s));
		smcr_sock_close(s);
	} else if (rc > 0) {
		const char *name = smcr_clc_decl_name((uint32_t)rc), *hint = reason_hint((uint32_t)rc);

		printf("connect: tcp, reason %s (0x%08x)%s%s\n", name ? name : "unknown", (unsigned)rc,
		       hint ? ": " : "", hint ? hint : "");
	} else {
		printf("connect: the SMC handshake failed: %s; the library resets such a connection"
		       " (a program's data never went over it)\n", strerror(-rc));
	}
	close(fd);
	return 0;
}

/* What the command line asks about. */
struct question {
	struct sockaddr_storage target;
	const char *program; /* NULL: any */
	bool server, connect_too;
};

/* The command line into q: 0, else the usage error's exit code. */
static int parse_args(int argc, char **argv, struct question *q)
{
	const char *target_text = NULL, *why;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--role") == 0 && i + 1 < argc) {
			const char *role = argv[++i];

			if (strcmp(role, "client") != 0 && strcmp(role, "server") != 0)
				return usage("--role takes client or server");
			q->server = strcmp(role, "server") == 0;
		} else if (strcmp(argv[i], "--program") == 0 && i + 1 < argc) {
			q->program = argv[++i];
		} else if (strcmp(argv[i], "--connect") == 0) {
			q->connect_too = true;
		} else if (argv[i][0] == '-' || target_text) {
			return usage(argv[i][0] == '-' ? "unknown option" : "one HOST:PORT only");
		} else {
			target_text = argv[i];
		}
	}
	if (!target_text)
		return usage("missing HOST:PORT");
	if (parse_target(target_text, &q->target, &why) < 0)
		return usage(why);
	if (q->connect_too && q->server)
		return usage("--connect checks a client's connection (no --role server)");
	return 0;
}

/* The connection asked about, and the rules files that speak of it. */
static void print_question(const struct smcr_config *cfg, const struct question *q)
{
	char shown[INET6_ADDRSTRLEN];
	unsigned port;

	if (q->target.ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)&q->target;

		inet_ntop(AF_INET, &in->sin_addr, shown, sizeof(shown));
		port = ntohs(in->sin_port);
	} else {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&q->target;

		inet_ntop(AF_INET6, &in6->sin6_addr, shown, sizeof(shown));
		port = ntohs(in6->sin6_port);
	}
	printf("connection: %s %s port %u, program %s\n", q->server ? "server at" : "client to",
	       shown, port, q->program ? q->program : "(any: rules with program= do not match)");
	if (!cfg->rules)
		printf("rules files: none (no rules in the user's file or the system's)\n");
	for (unsigned i = 0; cfg->rules && i < cfg->rules->n_files; i++)
		printf("rules file: %s\n", cfg->rules->files[i]);
}

/* What decides the connection, printed; returns the outcome's name. */
static const char *print_decision(const struct smcr_config *cfg, const struct question *q)
{
	const char *program = q->program ? q->program : "/";
	struct smcr_policy_verdict v;

	/* No program named: one no rule names, so that only the other matchers count. */
	smcr_policy_rule(cfg, q->server, (const struct sockaddr *)&q->target, program, program,
			 &v);
	if (v.broken) {
		printf("decided by: %s\n", cfg->rules->problem);
		return "tcp";
	}
	if (v.env) {
		printf("decided by: environment %s=%s\n", v.env, getenv(v.env) ? getenv(v.env) : "");
		return env_outcome(cfg, v.env);
	}
	if (v.rule) {
		print_rule(cfg->rules, v.rule);
		return smcr_rule_action_name(v.action);
	}
	printf("decided by: %s\n", cfg->rules ? "no rule matches: the defaults"
					     : "no rules file: the defaults");
	return "smc";
}

int main(int argc, char **argv)
{
	const struct smcr_config *cfg = smcr_config_get();
	struct question q = { .program = NULL };
	const char *outcome;
	int rc = parse_args(argc, argv, &q);

	if (rc)
		return rc;
	print_question(cfg, &q);
	if (cfg->disabled) {
		printf("decided by: environment SMCR_DISABLE\noutcome: tcp (%s)\n",
		       "smcr stays out of the way: every call passes through");
		if (q.connect_too)
			printf("connect: not tried (SMCR_DISABLE)\n");
		return 0;
	}
	outcome = print_decision(cfg, &q);
	printf("outcome: %s (%s)\n", outcome, outcome_meaning(outcome));
	return q.connect_too ? connect_and_report(&q.target) : 0;
}
