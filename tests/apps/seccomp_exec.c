// SPDX-License-Identifier: MIT
/*
 * seccomp_exec kill|errno|trap CALL[,CALL...] PROGRAM [ARG...]: runs PROGRAM
 * under a seccomp filter that answers each named system call with SIGSYS
 * (kill: the process dies, as systemd's SystemCallFilter= does by default),
 * EPERM (errno), or a SIGSYS the program may handle (trap), and lets every
 * other call through.  The filter is installed before the exec, so PROGRAM
 * (and smcr in it) inherits it without seeing it installed.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_CALLS 16

static const struct {
	const char *name;
	int nr;
} calls[] = {
	{ "bpf", SYS_bpf },
	{ "memfd_create", SYS_memfd_create },
	{ "eventfd2", SYS_eventfd2 },
	{ "flock", SYS_flock },
	{ "acct", SYS_acct },
	{ "pidfd_open", SYS_pidfd_open },
	{ "recvmmsg", SYS_recvmmsg },
};

static int call_nr(const char *name)
{
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		if (strcmp(calls[i].name, name) == 0)
			return calls[i].nr;
	fprintf(stderr, "seccomp_exec: unknown call %s\n", name);
	exit(2);
}

int main(int argc, char **argv)
{
	struct sock_filter f[4 + 2 * MAX_CALLS];
	unsigned n = 0, action;
	char *tok, *save = NULL;

	if (argc < 4) {
		fprintf(stderr, "usage: seccomp_exec kill|errno|trap CALL[,CALL...] PROGRAM [ARG...]\n");
		return 2;
	}
	if (strcmp(argv[1], "kill") == 0)
		action = SECCOMP_RET_KILL_PROCESS;
	else if (strcmp(argv[1], "errno") == 0)
		action = SECCOMP_RET_ERRNO | EPERM;
	else
		action = SECCOMP_RET_TRAP;
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, arch));
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, nr));
	for (tok = strtok_r(argv[2], ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n + 2 > sizeof(f) / sizeof(f[0]) - 1)
			return 2;
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
						      (unsigned)call_nr(tok), 0, 1);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, action);
	}
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);

	struct sock_fprog prog = { .len = (unsigned short)n, .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0) {
		perror("seccomp_exec: seccomp");
		return 2;
	}
	execvp(argv[3], argv + 3);
	perror("seccomp_exec: exec");
	return 127;
}
