/* SPDX-License-Identifier: MIT */
/*
 * Run-time configuration, parsed once from the environment into an
 * immutable struct. smc-tools' names where they overlap (SMC_DEBUG,
 * SMC_SNDBUF, SMC_RCVBUF), SMCR_* for ours:
 *
 *   SMC_DEBUG      0/1/2, or error|warn|info|debug|trace   (default: warn)
 *   SMC_SNDBUF     send buffer size, bytes, k/m/g suffix   (default: 0 = kernel's)
 *   SMC_RCVBUF     receive buffer size, same syntax        (default: 0)
 *   SMCR_LOG_FILE  append log lines to this file           (default: stderr)
 *   SMCR_MAX_FDS   fds tracked: 0..N-1; larger fds pass through (default: hard
 *                  RLIMIT_NOFILE, at most SMCR_CONFIG_MAX_FDS_LIMIT)
 *   SMCR_DISABLE   1 = load but stay pure pass-through     (default: 0; a
 *                  value not understood counts as 1: out of the way)
 *   SMCR_SAMEHOST  0 = no same-host SMC: every connection stays TCP (default: 1)
 *   SMCR_SPEAK_FIRST_WAIT_MS  how long a server that writes first waits for a
 *                  local client's (or an SMCR_PEERS host's) CLC Proposal,
 *                  0..10000 ms                                  (default: 50)
 *   SMCR_SPIN_US   before sleeping for data, poll up to this many microseconds
 *                  while the peer runs on another CPU, 0..1000  (default: 20;
 *                  0 = never spin; common/spin.h skips spins that do not pay)
 *   SMCR_TRANSPORT auto|rdma|shm: which SMC a client proposes (default: auto:
 *                  shm to a registered same-host listener, SMC-R to a
 *                  destination in SMCR_PEERS; rdma: SMC-R only, even between
 *                  two local addresses; shm: same-host only, never SMC-R)
 *   SMCR_PEERS     destinations that run smcr, where a client may propose
 *                  SMC-R: CIDR[:PORT],... (IPv6 with a port in brackets:
 *                  [fd77::/64]:5201; an address alone is one host)
 *   SMCR_PEERS_DENY  the same syntax; never propose to these (wins over
 *                  SMCR_PEERS).  A bad entry here turns SMCR_PEERS off.
 *   SMCR_UEID      user EIDs for SMC-Rv2, EID[,EID...] (up to 7), offered
 *                  first, before the kernel's own UEID table (smcr ueid
 *                  add), which is read by itself (smcr/eid.h): needed only
 *                  for a peer whose EID that table lacks.  Upper-cased as
 *                  smc-tools does; A-Z 0-9 . - only, 1..32 characters, blank
 *                  padded on the wire.  Our own EID for smcr peers
 *                  (SMCR-USERSPACE-VERBS) is always offered last.
 *   SMCR_KERNEL_UEID  0 = do not read the kernel's UEID table (default: 1)
 *   SMCR_LEARN     0 = no learned policy: every connection to an SMC-capable
 *                  destination is proposed SMC (default: 1: a destination
 *                  whose recent connections were all too short for SMC to
 *                  repay its set-up stays TCP, smcr/policy.h)
 *   SMCR_EXIT_REPORT  1 = at a normal exit, one line with the process's
 *                  counters (SMC, TCP by reason, errors, bytes) in the log,
 *                  whatever its level: a program that has exited has no
 *                  stats file left for smcr-stat (default: 0)
 *   SMCR_AF_SMC    auto|smcr|kernel: who serves the sockets of programs that ask
 *                  for SMC themselves, socket(AF_SMC, SOCK_STREAM, 0 or 1) and
 *                  socket(AF_INET or AF_INET6, SOCK_STREAM, IPPROTO_SMC) (default:
 *                  auto: the kernel when it can, smcr when the kernel refuses
 *                  them; smcr: always smcr; kernel: never smcr)
 *   SMCR_CONF      the system rules file (default: /etc/smcr.conf; rules.h);
 *                  the user's, $XDG_CONFIG_HOME/smcr.conf or ~/.config/smcr.conf,
 *                  comes first.  SMCR_TRANSPORT, SMCR_SAMEHOST, SMCR_PEERS and
 *                  SMCR_PEERS_DENY win over the rules (src/smcr/policy.h)
 *   SMCR_RUNDIR    a directory shared by the containers (network namespaces)
 *                  of one host, where listeners also register and same-host
 *                  rendezvous sockets live, so that shared memory crosses
 *                  network namespaces; an absolute path, owned by root or by
 *                  this user, not writable by others unless sticky
 *                  (default: unset: same-host SMC stays within a network
 *                  namespace; smcr/rundir.h)
 *   SMCR_TESTLINK_TIME  seconds an SMC-R link may be idle before we send it
 *                  LLC TEST LINK, and wait for the answer before the link
 *                  group is given up (1..86400, default 30, as the kernel's
 *                  net.smc.smcr_testlink_time; tests set it low)
 *
 * On/off settings take 0/1, yes/no, true/false or on/off.  A bad value is
 * never fatal: the variable keeps its default (SMCR_DISABLE: smcr stays out
 * of the way) and the problem, naming the variable, the value and what was
 * expected, is recorded (problems[]) so the library can report it once.
 */
#ifndef SMCR_COMMON_CONFIG_H
#define SMCR_COMMON_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#define SMCR_CONFIG_MAX_PROBLEMS 8
#define SMCR_CONFIG_PROBLEM_LEN 256
/* SMC buffer sizes are 16 KiB << n with a 4-bit n (RFC 7609). */
#define SMCR_CONFIG_BUF_MIN (16u * 1024)
#define SMCR_CONFIG_BUF_MAX (512u * 1024 * 1024)
#define SMCR_CONFIG_MAX_FDS_MIN 64u
#define SMCR_CONFIG_MAX_FDS_LIMIT (1u << 24)
#define SMCR_CONFIG_SPEAK_FIRST_WAIT_MS 50u
#define SMCR_CONFIG_SPEAK_FIRST_WAIT_MAX_MS 10000u
#define SMCR_CONFIG_SPIN_DEFAULT_US 20u
#define SMCR_CONFIG_SPIN_MAX_US 1000u
#define SMCR_CONFIG_TESTLINK_DEFAULT_S 30u /* the kernel's net.smc.smcr_testlink_time */
#define SMCR_CONFIG_TESTLINK_MAX_S 86400u
#define SMCR_CONFIG_MAX_PEERS 32u
#define SMCR_CONFIG_MAX_UEIDS 7u   /* a Proposal carries 8 EIDs: ours is the 8th */
#define SMCR_CONFIG_EID_LEN 32u

enum smcr_config_af_smc {
	SMCR_CONFIG_AF_SMC_AUTO = 0,
	SMCR_CONFIG_AF_SMC_SMCR,
	SMCR_CONFIG_AF_SMC_KERNEL,
};

enum smcr_config_transport {
	SMCR_CONFIG_TRANSPORT_AUTO = 0,
	SMCR_CONFIG_TRANSPORT_RDMA,
	SMCR_CONFIG_TRANSPORT_SHM,
};

/* One SMCR_PEERS / SMCR_PEERS_DENY entry: addr/prefix, optionally one port. */
struct smcr_config_cidr {
	unsigned char family;   /* AF_INET or AF_INET6 */
	unsigned char prefix;   /* 0..32 or 0..128 */
	unsigned short port;    /* host order; 0 = any port */
	unsigned char addr[16]; /* network order, bits past the prefix zeroed */
};

struct smcr_config {
	int log_level;     /* enum smcr_log_level */
	size_t sndbuf;     /* 0 = not set */
	size_t rcvbuf;     /* 0 = not set */
	char log_file[256]; /* "" = stderr */
	char rundir[96];    /* SMCR_RUNDIR; "" = none */
	unsigned max_fds;  /* 0 = decide from RLIMIT_NOFILE */
	bool disabled;
	bool samehost;                /* same-host SMC over shared memory */
	unsigned speak_first_wait_ms; /* see SMCR_SPEAK_FIRST_WAIT_MS above */
	unsigned spin_us;             /* see SMCR_SPIN_US above; 0 = never spin */
	unsigned testlink_s;          /* see SMCR_TESTLINK_TIME above */
	int transport;                /* enum smcr_config_transport */
	bool transport_set;           /* SMCR_TRANSPORT given: the rules do not choose */
	bool samehost_set;            /* SMCR_SAMEHOST given: the same */
	unsigned n_peers;             /* SMCR_PEERS */
	struct smcr_config_cidr peers[SMCR_CONFIG_MAX_PEERS];
	unsigned n_deny;              /* SMCR_PEERS_DENY */
	struct smcr_config_cidr deny[SMCR_CONFIG_MAX_PEERS];
	unsigned n_ueids;             /* SMCR_UEID */
	char ueid[SMCR_CONFIG_MAX_UEIDS][SMCR_CONFIG_EID_LEN]; /* blank padded, no NUL */
	bool kernel_ueid;             /* SMCR_KERNEL_UEID */
	bool learn;                   /* SMCR_LEARN */
	bool exit_report;             /* SMCR_EXIT_REPORT */
	int af_smc;                   /* enum smcr_config_af_smc, SMCR_AF_SMC */
	const struct smcr_rules *rules; /* NULL: no rules (common/rules.h) */
	unsigned n_problems;
	char problems[SMCR_CONFIG_MAX_PROBLEMS][SMCR_CONFIG_PROBLEM_LEN];
};

struct smcr_rules;

/* Looks up one variable; NULL when unset. */
typedef const char *smcr_config_getenv_fn(const char *name, void *ctx);

/* Fills cfg with the defaults. */
void smcr_config_defaults(struct smcr_config *cfg);

/* Defaults, then every variable found through get (testable without environ). */
void smcr_config_parse(struct smcr_config *cfg, smcr_config_getenv_fn *get, void *ctx);

/* Parse helpers, exposed for tests. Return 0, or -1 on a bad value. */
int smcr_config_parse_size(const char *text, size_t *out);
int smcr_config_parse_level(const char *text, int *out);
int smcr_config_parse_bool(const char *text, bool *out);
int smcr_config_parse_uint(const char *text, unsigned *out);
int smcr_config_parse_transport(const char *text, int *out);
int smcr_config_parse_af_smc(const char *text, int *out);
/* One entry: "10.0.0.0/8", "10.1.2.3:80", "fd77::/64", "[fd77::2]:5201". */
int smcr_config_parse_cidr(const char *text, struct smcr_config_cidr *out);
/* The same; on failure *why says what was wrong ("prefix length out of range: ..."). */
int smcr_config_parse_cidr_why(const char *text, struct smcr_config_cidr *out, const char **why);
/* One EID of `len` characters: upper-cased, blank padded into out[32]. */
int smcr_config_parse_eid(const char *text, size_t len, char out[SMCR_CONFIG_EID_LEN]);

/*
 * The rules files (common/rules.h) into `rules`, named by cfg when there are
 * any or they are broken (then also a problem).  `trusted` false: the
 * environment names no file (a setuid process).
 */
void smcr_config_add_rules(struct smcr_config *cfg, struct smcr_rules *rules,
			   smcr_config_getenv_fn *get, void *ctx, bool trusted);

/*
 * The process-wide configuration: parsed from the environment on the
 * first call (thread-safe), the same pointer and contents afterwards.
 */
const struct smcr_config *smcr_config_get(void);

#endif /* SMCR_COMMON_CONFIG_H */
