// SPDX-License-Identifier: MIT
/*
 * The engine in a plain program (tests, tools): libc's own functions, bound
 * before main().  Never linked into the interposer, where the public names
 * are its wrappers.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "smcr/engine.h"

#define SMCR_LIBC_LIBC(ret, name, params) .name = name,

__attribute__((constructor)) static void smcr_standalone_env(void)
{
	static const struct smcr_engine_env env = {
		.libc = { SMCR_LIBC_FUNCS(SMCR_LIBC_LIBC) },
	};

	smcr_engine_init(&env);
	pthread_atfork(smcr_engine_fork_prepare, smcr_engine_fork_parent, smcr_engine_fork_child);
	atexit(smcr_engine_exit);
}
