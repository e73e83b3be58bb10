/* SPDX-License-Identifier: MIT */
/*
 * The RFC 7609 option program (src/bpf) attacked by a local user of another
 * uid, who can open its 0666 socket-storage map and mark sockets of its own:
 *
 *   unserve   the attacker listens on the victim's port (another address)
 *             and closes its listener twice for one marked listen() (it
 *             stops listening, listens again unmarked, is marked again):
 *             the victim's listener must go on announcing SMC;
 *   stale     the attacker's closed listeners leave nothing behind: a victim
 *             that withdraws its listener (smcr_tcpopt_unserve()) is no
 *             longer announced;
 *   fill      the attacker marks and closes listeners on 4200 ports: a new
 *             listener of the victim is still announced;
 *   steal     the attacker cannot take the victim's listener out of its
 *             process (pidfd_getfd), the only way to write its record;
 * and the victim's own life cycle: a withdrawn listener stops announcing at
 * once and is announced again when marked again, an accepted socket's record
 * says what the client's SYN and our SYN-ACK carried, and a closed listener's
 * mark does not outlive it.
 *
 * "Announced" is what the kernel put on the wire as seen by a client the test
 * marks SMCR_BPF_F_PROPOSE: the program records in the client's storage
 * whether the SYN-ACK carried the option (SMCR_BPF_F_PEER, with _SEEN proving
 * the program saw the connection open).
 *
 *   tcpopt_attack ATTACKER_UID ATTACKER_GID
 *
 * Run as root inside a cgroup the program is attached to, with its map pinned
 * at SMCR_BPF_SK_MAP_PATH (tests/security/tcpopt_attack.sh sets that up).
 * Prints one line per check; exit 0 all passed, 1 a check failed, 77 the
 * pinned program announces SMC in SYNs only (this kernel refuses the full
 * one): then only that no listener is ever announced is checked.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <linux/bpf.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "smcr/bpf_abi.h"

#define VICTIM_ADDR "127.0.0.1"
#define ATTACKER_ADDR "127.0.0.2"
#define FILL_PORTS 4200 /* more than the 4096 entries the old port map had */
#define FILL_BASE 20000	/* below the ephemeral ports the other checks use */
#define FILL_VICTIM_PORT (FILL_BASE + FILL_PORTS + 100)

static int map_fd = -1;
static int failed;

static void check(bool ok, const char *what)
{
	printf("%s %s\n", ok ? "ok  " : "FAIL", what);
	fflush(stdout);
	if (!ok)
		failed++;
}

static void die(const char *what)
{
	fprintf(stderr, "tcpopt_attack: %s: %s\n", what, strerror(errno));
	exit(2);
}

static long bpf(int cmd, union bpf_attr *attr)
{
	return syscall(SYS_bpf, cmd, attr, sizeof(*attr));
}

static int open_map(void)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.pathname = (uint64_t)(uintptr_t)SMCR_BPF_SK_MAP_PATH;
	return (int)bpf(BPF_OBJ_GET, &attr);
}

/* bpf(2) on the record of `fd` (a socket of this process). */
static int record_op(int cmd, int fd, struct smcr_bpf_sk *val)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.map_fd = (uint32_t)map_fd;
	attr.key = (uint64_t)(uintptr_t)&fd;
	attr.value = (uint64_t)(uintptr_t)val;
	return bpf(cmd, &attr) < 0 ? -errno : 0;
}

static int mark(int fd, uint32_t flags)
{
	struct smcr_bpf_sk val = { .flags = flags };

	return record_op(BPF_MAP_UPDATE_ELEM, fd, &val);
}

/* What smcr_tcpopt_unserve() does. */
static int unmark(int fd)
{
	return record_op(BPF_MAP_DELETE_ELEM, fd, NULL);
}

static uint32_t flags_of(int fd)
{
	struct smcr_bpf_sk val = { 0 };

	return record_op(BPF_MAP_LOOKUP_ELEM, fd, &val) == 0 ? val.flags : 0;
}

static struct sockaddr_in addr_of(const char *ip, uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };

	inet_pton(AF_INET, ip, &sin.sin_addr);
	return sin;
}

/* A TCP socket bound to ip:port (0: any free port), or -errno. */
static int bound(const char *ip, uint16_t port)
{
	struct sockaddr_in sin = addr_of(ip, port);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc, on = 1;

	if (fd < 0)
		return -errno;
	/* Ports of closed listeners are reused while their connections are in TIME_WAIT. */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

static uint16_t port_of(int fd)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);

	if (getsockname(fd, (struct sockaddr *)&sin, &len) < 0)
		die("getsockname");
	return ntohs(sin.sin_port);
}

/* A listener on ip:port, marked SMCR_BPF_F_SERVE before listen() when `serve`. */
static int listener(const char *ip, uint16_t port, bool serve)
{
	int fd = bound(ip, port);

	if (fd < 0) {
		errno = -fd;
		die("bind");
	}
	if (serve && mark(fd, SMCR_BPF_F_SERVE) < 0)
		die("marking a listener");
	if (listen(fd, 16) < 0)
		die("listen");
	return fd;
}

enum answer { NOT_ANNOUNCED, ANNOUNCED, NOT_SEEN };

/*
 * Connect a client that announces SMC to VICTIM_ADDR:port: did the SYN-ACK
 * carry the option?  `lfd`, the victim's listener, accepts the connection;
 * `accepted_flags` gets the accepted socket's record.
 */
static enum answer probe(int lfd, uint32_t *accepted_flags)
{
	struct sockaddr_in sin = addr_of(VICTIM_ADDR, port_of(lfd));
	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), a;
	uint32_t f;

	if (c < 0 || mark(c, SMCR_BPF_F_PROPOSE) < 0)
		die("marking a client");
	if (connect(c, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		die("connect");
	f = flags_of(c);
	a = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (a < 0)
		die("accept");
	if (accepted_flags)
		*accepted_flags = flags_of(a);
	close(a);
	close(c);
	if (!(f & SMCR_BPF_F_SEEN) || !(f & SMCR_BPF_F_SENT))
		return NOT_SEEN;
	return (f & SMCR_BPF_F_PEER) ? ANNOUNCED : NOT_ANNOUNCED;
}

static bool announced(int lfd)
{
	enum answer a = probe(lfd, NULL);

	if (a == NOT_SEEN) {
		fprintf(stderr, "tcpopt_attack: the program did not see the client's connection "
				"(not attached to this cgroup?)\n");
		exit(2);
	}
	return a == ANNOUNCED;
}

/* ---- the attacker: a child with the attacker's uid and gid only -------------------- */

static uid_t attacker_uid;
static gid_t attacker_gid;

static void become_attacker(void)
{
	if (setgroups(0, NULL) < 0 || setresgid(attacker_gid, attacker_gid, attacker_gid) < 0 ||
	    setresuid(attacker_uid, attacker_uid, attacker_uid) < 0)
		die("dropping to the attacker's uid");
	/* Nothing of the victim's: only what the attacker opens itself. */
	for (int fd = 3; fd < 1024; fd++)
		close(fd);
	map_fd = open_map();
	if (map_fd < 0)
		die("the attacker opening " SMCR_BPF_SK_MAP_PATH);
}

/* Run fn(arg) as the attacker; its exit status (0: it did all it tried). */
static int as_attacker(int (*fn)(long), long arg)
{
	pid_t pid = fork();
	int status;

	if (pid < 0)
		die("fork");
	if (pid == 0) {
		become_attacker();
		_exit(fn(arg));
	}
	if (waitpid(pid, &status, 0) < 0)
		die("waitpid");
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The attacker's listener on ATTACKER_ADDR:port, marked as `how` says, then closed. */
enum attack_how { UNCOUNT, UNMARK_BEFORE_CLOSE, MARK_LISTEN_CLOSE };

/* connect(AF_UNSPEC): a listener goes to CLOSE and may listen() again. */
static int disconnect(int fd)
{
	struct sockaddr sa = { .sa_family = AF_UNSPEC };

	return connect(fd, &sa, sizeof(sa));
}

static int attacker_listener(uint16_t port, enum attack_how how)
{
	int fd = bound(ATTACKER_ADDR, port);

	if (fd < 0)
		return fd == -EADDRINUSE ? 0 : 1;
	if (mark(fd, SMCR_BPF_F_SERVE) < 0 || listen(fd, 1) < 0)
		return 1;
	/*
	 * Two closes for one marked listen(): it stops listening, listens again
	 * unmarked, and is marked once more before it closes.
	 */
	if (how == UNCOUNT && (disconnect(fd) < 0 || unmark(fd) < 0 || listen(fd, 1) < 0 ||
			       mark(fd, SMCR_BPF_F_SERVE) < 0))
		return 1;
	if (how == UNMARK_BEFORE_CLOSE && unmark(fd) < 0)
		return 1;
	close(fd);
	return 0;
}

static int attack_unserve(long port)
{
	return attacker_listener((uint16_t)port, UNCOUNT);
}

/* Listeners of the attacker's that come and go on the victim's port, as any may. */
static int attacker_comes_and_goes(long port)
{
	return attacker_listener((uint16_t)port, MARK_LISTEN_CLOSE);
}

static int attack_stale(long port)
{
	return attacker_listener((uint16_t)port, UNMARK_BEFORE_CLOSE);
}

static int attack_fill(long unused)
{
	(void)unused;
	for (int i = 0; i < FILL_PORTS; i++)
		if (attacker_listener((uint16_t)(FILL_BASE + i), UNMARK_BEFORE_CLOSE))
			return 1;
	return 0;
}

/* pidfd_getfd(2) on the victim's listener: 0 if the kernel refused it. */
static int attack_steal(long target)
{
	pid_t victim = (pid_t)(target >> 16);
	int fd = (int)(target & 0xffff);
	int pidfd = (int)syscall(SYS_pidfd_open, victim, 0), got;

	if (pidfd < 0)
		return 0; /* not even a handle on the victim */
	got = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
	if (got < 0)
		return 0;
	mark(got, 0); /* it would now rewrite the victim's record */
	return 1;
}

/* ---- the checks -------------------------------------------------------------------- */

static void victim_life_cycle(void)
{
	int l = listener(VICTIM_ADDR, 0, true), plain = listener(VICTIM_ADDR, 0, false);
	uint32_t acc = 0;

	check(probe(l, &acc) == ANNOUNCED,
	      "a marked listener's SYN-ACK answers an announcing SYN with SMC's option");
	check((acc & (SMCR_BPF_F_SEEN | SMCR_BPF_F_PEER | SMCR_BPF_F_SENT)) ==
			      (SMCR_BPF_F_SEEN | SMCR_BPF_F_PEER | SMCR_BPF_F_SENT) &&
		      !(acc & SMCR_BPF_F_SERVE),
	      "its accepted socket's record: the SYN announced, the SYN-ACK answered "
	      "(and nothing of the listener's mark)");
	check(!announced(plain), "an unmarked listener's SYN-ACK carries no option");
	unmark(l);
	check(probe(l, &acc) == NOT_ANNOUNCED && !(acc & SMCR_BPF_F_PEER),
	      "withdrawn (smcr_tcpopt_unserve: its record deleted), the listener stops "
	      "announcing at once");
	mark(l, SMCR_BPF_F_SERVE);
	check(announced(l), "marked again (a new image that runs smcr), it announces again");
	close(plain);
	{
		uint16_t port = port_of(l);

		close(l);
		l = listener(VICTIM_ADDR, port, false);
		check(!announced(l), "a new unmarked listener on a closed marked listener's "
				      "port is not announced: the mark died with its socket");
	}
	close(l);
}

static void attacks(void)
{
	int l = listener(VICTIM_ADDR, 0, true);
	uint16_t port = port_of(l);
	int rc;

	check(announced(l), "the victim's listener is announced before the attacks");

	rc = as_attacker(attack_unserve, port);
	check(rc == 0 && announced(l),
	      "unserve: the attacker's listener on the victim's port (another address), "
	      "closed twice for one marked listen(), leaves the victim's listener "
	      "announced");
	rc = as_attacker(attacker_comes_and_goes, port);
	check(rc == 0 && announced(l),
	      "the attacker's own marked listeners coming and going on that port leave it "
	      "announced too");

	rc = as_attacker(attack_steal, ((long)getpid() << 16) | l);
	check(rc == 0, "steal: the attacker cannot take the victim's listener out of its "
		       "process (pidfd_getfd), the only way to write its record");
	close(l);

	l = listener(VICTIM_ADDR, 0, true);
	port = port_of(l);
	/* The attacker's stale state on that port, then the victim's listener withdrawn. */
	rc = as_attacker(attack_stale, port);
	unmark(l);
	check(rc == 0 && !announced(l),
	      "stale: after the attacker's marked-then-unmarked listener on its port, the "
	      "victim's withdrawn listener is not announced");
	close(l);

	rc = as_attacker(attack_fill, 0);
	l = listener(VICTIM_ADDR, FILL_VICTIM_PORT, true);
	check(rc == 0 && announced(l),
	      "fill: after the attacker marked and closed listeners on 4200 ports, a new "
	      "listener of the victim is announced");
	close(l);
}

/* The SYN-only program: whatever is marked, no SYN-ACK carries the option. */
static void syn_only(void)
{
	int l = listener(VICTIM_ADDR, 0, true);

	check(!announced(l), "this kernel's program (SYNs only): a marked listener is never "
			     "announced");
	close(l);
}

/* The pinned program's name (bpf_prog_info.name). */
static void program_name(char *out, size_t size)
{
	struct bpf_prog_info info;
	union bpf_attr attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.pathname = (uint64_t)(uintptr_t)SMCR_BPF_PROG_PATH;
	fd = (int)bpf(BPF_OBJ_GET, &attr);
	if (fd < 0)
		die("opening " SMCR_BPF_PROG_PATH);
	memset(&info, 0, sizeof(info));
	memset(&attr, 0, sizeof(attr));
	attr.info.bpf_fd = (uint32_t)fd;
	attr.info.info_len = sizeof(info);
	attr.info.info = (uint64_t)(uintptr_t)&info;
	if (bpf(BPF_OBJ_GET_INFO_BY_FD, &attr) < 0)
		die("BPF_OBJ_GET_INFO_BY_FD");
	close(fd);
	snprintf(out, size, "%s", info.name);
}

int main(int argc, char **argv)
{
	char name[BPF_OBJ_NAME_LEN];

	if (argc != 3) {
		fprintf(stderr, "usage: tcpopt_attack ATTACKER_UID ATTACKER_GID\n");
		return 2;
	}
	attacker_uid = (uid_t)strtoul(argv[1], NULL, 10);
	attacker_gid = (gid_t)strtoul(argv[2], NULL, 10);
	if (attacker_uid == 0 || attacker_uid == getuid()) {
		fprintf(stderr, "tcpopt_attack: the attacker needs a uid of its own\n");
		return 2;
	}
	map_fd = open_map();
	if (map_fd < 0)
		die("opening " SMCR_BPF_SK_MAP_PATH);
	program_name(name, sizeof(name));
	printf("     program: %s\n", name);
	if (strcmp(name, SMCR_BPF_PROG_NAME_CLIENT) == 0) {
		syn_only();
		printf("%d failed; SKIP: this kernel's program announces SMC in SYNs only, "
		       "the attacks on listeners need the full one\n",
		       failed);
		return failed ? 1 : 77;
	}
	victim_life_cycle();
	attacks();
	printf("%d failed\n", failed);
	return failed ? 1 : 0;
}
