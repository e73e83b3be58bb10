/* SPDX-License-Identifier: MIT */
/*
 * src/smcr/tcpopt.c (RFC 7609 option mode, the library's side) against a fake
 * bpf(2): detection happens once and costs nothing afterwards when the program
 * is not pinned; marks write the right flag for the right fd; the verdict is
 * YES only for a connection the program saw open with the peer's option, and
 * UNKNOWN when the program did not see it (never guessed as NO or YES);
 * withdrawing a listener deletes its record, and costs nothing in a process
 * that never marked anything.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/bpf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "smcr/bpf_abi.h"
#include "smcr/tcpopt.h"

#define FAKE_MAP_FD 77

static const struct sockaddr *dst(void)
{
	static struct sockaddr_in sin;

	sin.sin_family = AF_INET;
	sin.sin_port = htons(7601);
	sin.sin_addr.s_addr = htonl(0x0a4d0002); /* 10.77.0.2 */
	return (const struct sockaddr *)&sin;
}
#define MAX_FDS 64

static struct {
	int obj_get_errno; /* 0: BPF_OBJ_GET succeeds */
	int calls[64];     /* per command */
	char path[128];
	bool present[MAX_FDS];
	struct smcr_bpf_sk val[MAX_FDS];
} fake;

static long fake_bpf(int cmd, void *attr_v, unsigned int size)
{
	union bpf_attr *attr = attr_v;
	int key;

	assert_true(size >= sizeof(*attr) - 8); /* the library passes the whole union */
	if (cmd >= 0 && cmd < 64)
		fake.calls[cmd]++;
	switch (cmd) {
	case BPF_OBJ_GET:
		snprintf(fake.path, sizeof(fake.path), "%s",
			 (const char *)(uintptr_t)attr->pathname);
		if (fake.obj_get_errno) {
			errno = fake.obj_get_errno;
			return -1;
		}
		return FAKE_MAP_FD; /* not open: smcr_sys_fd_high() leaves it */
	case BPF_MAP_UPDATE_ELEM:
	case BPF_MAP_LOOKUP_ELEM:
	case BPF_MAP_DELETE_ELEM:
		key = *(const int *)(uintptr_t)attr->key;
		if (attr->map_fd != FAKE_MAP_FD || key < 0 || key >= MAX_FDS) {
			errno = EBADF;
			return -1;
		}
		if (cmd == BPF_MAP_UPDATE_ELEM) {
			memcpy(&fake.val[key], (const void *)(uintptr_t)attr->value,
			       sizeof(fake.val[key]));
			fake.present[key] = true;
			return 0;
		}
		if (!fake.present[key]) {
			errno = ENOENT;
			return -1;
		}
		if (cmd == BPF_MAP_DELETE_ELEM) {
			fake.present[key] = false;
			return 0;
		}
		memcpy((void *)(uintptr_t)attr->value, &fake.val[key], sizeof(fake.val[key]));
		return 0;
	default:
		errno = EINVAL;
		return -1;
	}
}

static int setup(void **state)
{
	(void)state;
	memset(&fake, 0, sizeof(fake));
	smcr_tcpopt_reset_for_test();
	smcr_tcpopt_set_bpf_for_test(fake_bpf);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	smcr_tcpopt_set_bpf_for_test(NULL);
	return 0;
}

static void test_off_when_not_pinned(void **state)
{
	(void)state;
	fake.obj_get_errno = ENOENT;
	errno = 1234;
	assert_false(smcr_tcpopt_enabled());
	assert_int_equal(errno, 1234); /* the application's errno is kept */
	assert_string_equal(fake.path, SMCR_BPF_SK_MAP_PATH);
	smcr_tcpopt_mark_connect(5, dst());
	smcr_tcpopt_mark_listen(6);
	assert_int_equal(smcr_tcpopt_peer(5), SMCR_TCPOPT_UNKNOWN);
	assert_false(smcr_tcpopt_enabled());
	/* detected once: no further system call of any kind */
	assert_int_equal(fake.calls[BPF_OBJ_GET], 1);
	assert_int_equal(fake.calls[BPF_MAP_UPDATE_ELEM], 0);
	assert_int_equal(fake.calls[BPF_MAP_LOOKUP_ELEM], 0);
}

static void test_no_permission_is_off_too(void **state)
{
	(void)state;
	fake.obj_get_errno = EACCES;
	assert_false(smcr_tcpopt_enabled());
	smcr_tcpopt_mark_connect(5, dst());
	assert_int_equal(fake.calls[BPF_MAP_UPDATE_ELEM], 0);
}

static void test_marks(void **state)
{
	(void)state;
	assert_true(smcr_tcpopt_enabled());
	smcr_tcpopt_mark_connect(5, dst());
	smcr_tcpopt_mark_listen(9);
	assert_true(fake.present[5]);
	assert_int_equal(fake.val[5].flags, SMCR_BPF_F_PROPOSE);
	/* no destination (or one the policy would not propose to): no mark */
	smcr_tcpopt_mark_connect(6, NULL);
	assert_int_equal(fake.val[5].reserved, 0);
	assert_true(fake.present[9]);
	assert_int_equal(fake.val[9].flags, SMCR_BPF_F_SERVE);
	assert_false(fake.present[6]);
	assert_int_equal(fake.calls[BPF_OBJ_GET], 1);
}

static void test_unserve(void **state)
{
	(void)state;
	/* nothing marked yet: no detection, no system call */
	smcr_tcpopt_unserve(9);
	assert_int_equal(fake.calls[BPF_OBJ_GET], 0);
	assert_int_equal(fake.calls[BPF_MAP_DELETE_ELEM], 0);
	smcr_tcpopt_mark_listen(9);
	assert_true(fake.present[9]);
	errno = 4321;
	smcr_tcpopt_unserve(9);
	assert_int_equal(errno, 4321);
	assert_false(fake.present[9]);
	/* twice, or a listener never marked: not an error */
	smcr_tcpopt_unserve(9);
	smcr_tcpopt_unserve(10);
	assert_int_equal(fake.calls[BPF_MAP_DELETE_ELEM], 3);
}

static void test_peer_verdicts(void **state)
{
	(void)state;
	assert_true(smcr_tcpopt_enabled());
	/* no record: the program never saw the socket (not marked, not served) */
	assert_int_equal(smcr_tcpopt_peer(3), SMCR_TCPOPT_UNKNOWN);
	/* marked, but the program did not see it open (attached elsewhere) */
	smcr_tcpopt_mark_connect(4, dst());
	assert_int_equal(smcr_tcpopt_peer(4), SMCR_TCPOPT_UNKNOWN);
	/* seen open, SYN-ACK without the option */
	fake.val[4].flags |= SMCR_BPF_F_SEEN | SMCR_BPF_F_SENT;
	assert_int_equal(smcr_tcpopt_peer(4), SMCR_TCPOPT_NO);
	/* seen open, the peer announced SMC */
	fake.val[4].flags |= SMCR_BPF_F_PEER;
	assert_int_equal(smcr_tcpopt_peer(4), SMCR_TCPOPT_YES);
	/* a bad fd is no answer, not an error */
	assert_int_equal(smcr_tcpopt_peer(1000), SMCR_TCPOPT_UNKNOWN);
}

static void test_verdict_table(void **state)
{
	(void)state;
	assert_int_equal(smcr_tcpopt_verdict(0), SMCR_TCPOPT_UNKNOWN);
	assert_int_equal(smcr_tcpopt_verdict(SMCR_BPF_F_PEER), SMCR_TCPOPT_UNKNOWN);
	assert_int_equal(smcr_tcpopt_verdict(SMCR_BPF_F_SEEN), SMCR_TCPOPT_NO);
	assert_int_equal(smcr_tcpopt_verdict(SMCR_BPF_F_SEEN | SMCR_BPF_F_PROPOSE),
			 SMCR_TCPOPT_NO);
	assert_int_equal(smcr_tcpopt_verdict(SMCR_BPF_F_SEEN | SMCR_BPF_F_PEER),
			 SMCR_TCPOPT_YES);
	assert_string_equal(smcr_tcpopt_peer_str(SMCR_TCPOPT_YES), "announced SMC");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_off_when_not_pinned, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_permission_is_off_too, setup, teardown),
		cmocka_unit_test_setup_teardown(test_marks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unserve, setup, teardown),
		cmocka_unit_test_setup_teardown(test_peer_verdicts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_verdict_table, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
