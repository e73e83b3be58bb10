/* SPDX-License-Identifier: MIT */
/*
 * RFC 7609 option mode: the library marks its sockets for the sock_ops
 * program and asks it what the peer's SYN / SYN-ACK said (tcpopt.h).
 *
 *   client: smcr_tcpopt_mark_connect() before connect() puts SMCR_BPF_F_PROPOSE
 *           into the socket's storage: the SYN carries SMC's option.  After the
 *           handshake smcr_tcpopt_peer() says whether the SYN-ACK carried it.
 *   server: smcr_tcpopt_mark_listen() before listen(): the listener's
 *           SYN-ACKs carry the option when the SYN did, for as long as it
 *           carries the mark; smcr_tcpopt_unserve() takes the mark away (a
 *           listener about to be handed to a program that may not run smcr).
 *           smcr_tcpopt_peer() on the accepted socket says whether the SYN
 *           carried it.
 *
 * A mark is a promise, as for the kernel's AF_SMC: a Linux SMC server whose
 * SYN-ACK answered our option waits for a CLC Proposal and fails the
 * connection if the first bytes are anything else.  So callers mark only
 * sockets on which they will propose when the peer announces SMC.
 */
#include "smcr/tcpopt.h"

#include <errno.h>
#include <linux/bpf.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"
#include "smcr/libc.h"
#include "smcr/bpf_abi.h"
#include "smcr/policy.h"
#include "smcr/sys.h"

enum { STATE_UNKNOWN = 0, STATE_ON = 1, STATE_OFF = 2 };

static _Atomic int state = STATE_UNKNOWN;
static int map_fd = -1;
static pthread_mutex_t detect_lock = PTHREAD_MUTEX_INITIALIZER;

static long bpf_syscall(int cmd, void *attr, unsigned int size)
{
	return syscall(SYS_bpf, cmd, attr, size);
}

static smcr_tcpopt_bpf_fn bpf_fn = bpf_syscall;

void smcr_tcpopt_set_bpf_for_test(smcr_tcpopt_bpf_fn fn)
{
	bpf_fn = fn ? fn : bpf_syscall;
}

void smcr_tcpopt_reset_for_test(void)
{
	pthread_mutex_lock(&detect_lock);
	if (map_fd >= 0)
		smcr_sys_close(map_fd);
	map_fd = -1;
	atomic_store(&state, STATE_UNKNOWN);
	pthread_mutex_unlock(&detect_lock);
}

static const char *why_off(int err)
{
	switch (err) {
	case ENOENT:
		return "no sock_ops program pinned (run smc_run as root, or smcr-bpf attach)";
	case EPERM:
	case EACCES:
		return "no permission for the pinned map (see smcr-bpf(8))";
	case ENOSYS:
		return "no bpf(2) in this kernel";
	default:
		return strerror(err);
	}
}

static void detect(void)
{
	union bpf_attr attr;
	int fd, saved = errno;

	pthread_mutex_lock(&detect_lock);
	if (atomic_load(&state) != STATE_UNKNOWN)
		goto out;
	memset(&attr, 0, sizeof(attr));
	attr.pathname = (uint64_t)(uintptr_t)SMCR_BPF_SK_MAP_PATH;
	fd = (int)bpf_fn(BPF_OBJ_GET, &attr, sizeof(attr));
	if (fd < 0) {
		smcr_info("RFC 7609 option mode off: %s", why_off(errno));
		atomic_store(&state, STATE_OFF);
		goto out;
	}
	map_fd = smcr_sys_fd_high(fd);
	smcr_info("RFC 7609 option mode on (%s)", SMCR_BPF_SK_MAP_PATH);
	atomic_store_explicit(&state, STATE_ON, memory_order_release);
out:
	pthread_mutex_unlock(&detect_lock);
	errno = saved;
}

bool smcr_tcpopt_enabled(void)
{
	int s = atomic_load_explicit(&state, memory_order_acquire);

	if (s == STATE_UNKNOWN) {
		detect();
		s = atomic_load_explicit(&state, memory_order_acquire);
	}
	return s == STATE_ON;
}

static int map_op(int cmd, int fd, struct smcr_bpf_sk *val, uint64_t flags)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.map_fd = (uint32_t)map_fd;
	attr.key = (uint64_t)(uintptr_t)&fd;
	attr.value = (uint64_t)(uintptr_t)val;
	attr.flags = flags;
	return bpf_fn(cmd, &attr, sizeof(attr)) < 0 ? -errno : 0;
}

static void mark(int fd, uint32_t flag, const char *what)
{
	struct smcr_bpf_sk val = { .flags = flag };
	int saved = errno, rc;

	if (!smcr_tcpopt_enabled())
		return;
	rc = map_op(BPF_MAP_UPDATE_ELEM, fd, &val, BPF_ANY);
	if (rc)
		smcr_dbg("fd %d: cannot mark for the SMC TCP option (%s): %s",
			 smcr_fd_label(fd), what,
			 strerror(-rc));
	else
		smcr_dbg("fd %d: marked for the SMC TCP option (%s)", smcr_fd_label(fd), what);
	errno = saved;
}

void smcr_tcpopt_mark_connect(int tcp_fd, const struct sockaddr *dst)
{
	/* Only where we would propose to an answering server (policy.c). */
	if (dst && smcr_tcpopt_enabled() && smcr_policy_announce(smcr_config_get(), dst))
		mark(tcp_fd, SMCR_BPF_F_PROPOSE, "SYN");
}

void smcr_tcpopt_mark_listen(int listen_fd)
{
	if (!smcr_tcpopt_enabled() || smcr_policy_listener_excluded(listen_fd, NULL, 0))
		return;
	mark(listen_fd, SMCR_BPF_F_SERVE, "SYN-ACK");
}

void smcr_tcpopt_unserve(int listen_fd)
{
	int saved = errno, rc;

	/* Only a process that marked something has the map open. */
	if (atomic_load_explicit(&state, memory_order_acquire) != STATE_ON)
		return;
	rc = map_op(BPF_MAP_DELETE_ELEM, listen_fd, NULL, 0);
	if (rc && rc != -ENOENT)
		smcr_warn("fd %d: cannot withdraw the listener's SMC TCP option: %s",
			  smcr_fd_label(listen_fd), strerror(-rc));
	else if (rc == 0)
		smcr_dbg("fd %d: the listener no longer announces SMC", smcr_fd_label(listen_fd));
	errno = saved;
}

enum smcr_tcpopt_peer smcr_tcpopt_verdict(uint32_t flags)
{
	if (!(flags & SMCR_BPF_F_SEEN))
		return SMCR_TCPOPT_UNKNOWN; /* the program did not see this connection open */
	return (flags & SMCR_BPF_F_PEER) ? SMCR_TCPOPT_YES : SMCR_TCPOPT_NO;
}

enum smcr_tcpopt_peer smcr_tcpopt_peer(int tcp_fd)
{
	struct smcr_bpf_sk val = { 0 };
	int saved = errno, rc;

	if (atomic_load_explicit(&state, memory_order_acquire) != STATE_ON)
		return SMCR_TCPOPT_UNKNOWN; /* never marked anything: nothing to ask */
	rc = map_op(BPF_MAP_LOOKUP_ELEM, tcp_fd, &val, 0);
	errno = saved;
	if (rc)
		return SMCR_TCPOPT_UNKNOWN;
	return smcr_tcpopt_verdict(val.flags);
}

const char *smcr_tcpopt_peer_str(enum smcr_tcpopt_peer p)
{
	switch (p) {
	case SMCR_TCPOPT_YES:
		return "announced SMC";
	case SMCR_TCPOPT_NO:
		return "did not announce SMC";
	default:
		return "unknown";
	}
}
