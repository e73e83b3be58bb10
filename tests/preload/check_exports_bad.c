/* SPDX-License-Identifier: MIT */
/*
 * Deliberately wrong: calls a wrapped libc name directly. check-exports.sh
 * must reject the static library built from this file (a should_fail test
 * proving the check can fail).
 */
#include <unistd.h>

int smcr_check_exports_bad(int fd);

int smcr_check_exports_bad(int fd)
{
	return close(fd);
}
