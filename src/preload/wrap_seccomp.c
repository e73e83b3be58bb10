/* SPDX-License-Identifier: MIT */
/*
 * prctl(PR_SET_SECCOMP): the process confines its own system calls.
 *
 * A seccomp filter may kill the process at the first call it does not allow
 * (OpenSSH's privilege-separated child does, after its key exchange began
 * over a connection that may already be SMC).  So before the kernel applies
 * a filter, while every call is still allowed, the engine learns it
 * (engine.h smcr_engine_confine: it runs the filter over the calls it may
 * still make) and the sockets of this process are put where the filter
 * cannot hurt them (smc.c smcr_smc_before_confine): accepted connections
 * not classified yet are settled (a Proposal declined, reason CONFINED),
 * listeners leave the registry, and every connection made from then on
 * stays TCP with reason CONFINED.  SMC connections keep running on the calls
 * the filter allows.  If the kernel refuses the filter, the engine forgets
 * it again (what was settled stays TCP).
 *
 * Filters installed with the seccomp system call itself (libseccomp calls
 * it through syscall(2)) are not seen here (design §8).
 */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdarg.h>
#include <sys/prctl.h>

#include "common/log.h"
#include "preload/preload.h"
#include "preload/smc.h"
#include "smcr/engine.h"

static void before_confine(unsigned long mode, const struct sock_fprog *prog)
{
	smcr_guard_enter();
	smcr_smc_before_confine();
	if (mode == SECCOMP_MODE_STRICT)
		smcr_engine_confine(SMCR_CONFINE_STRICT, NULL, 0);
	else if (prog)
		smcr_engine_confine(SMCR_CONFINE_FILTER, prog->filter, prog->len);
	else
		smcr_engine_confine(SMCR_CONFINE_UNKNOWN, NULL, 0);
	smcr_guard_leave();
}

SMCR_EXPORT int prctl(int option, ...)
{
	unsigned long a[4];
	bool confining;
	va_list ap;
	int ret, err;

	va_start(ap, option);
	for (int i = 0; i < 4; i++)
		a[i] = va_arg(ap, unsigned long);
	va_end(ap);
	smcr_preload_enter();
	confining = option == PR_SET_SECCOMP && smcr_preload_active &&
		    (a[0] == SECCOMP_MODE_STRICT || a[0] == SECCOMP_MODE_FILTER);
	if (confining)
		before_confine(a[0], (const struct sock_fprog *)a[1]);
	ret = smcr_real.prctl(option, a[0], a[1], a[2], a[3]);
	if (confining && ret != 0) {
		err = errno;
		smcr_engine_confine_undo();
		errno = err;
	}
	return ret;
}
