/* SPDX-License-Identifier: MIT */
/*
 * Wrappers called before libsmcr.so's constructor (from early_ctor.c's
 * constructor) initialise the library on first use and track the TCP
 * socket created there.
 */
#include "smc_preload.h"
#include "preload_test.h"

extern int early_ctor_tcp_fd, early_ctor_udp_fd, early_ctor_ran;

int main(void)
{
	t_watchdog(30);
	if (!smc_preload_fd_mode) {
		fprintf(stderr, "libsmcr.so is not loaded\n");
		return T_EXIT_FAIL;
	}
	CHECK(early_ctor_ran == 1);
	CHECK(early_ctor_tcp_fd >= 0 && early_ctor_udp_fd >= 0);
	CHECK(smc_preload_fd_mode(early_ctor_tcp_fd) == SMC_PRELOAD_FD_CANDIDATE);
	CHECK(smc_preload_fd_mode(early_ctor_udp_fd) == SMC_PRELOAD_FD_UNTRACKED);
	return t_result();
}
