// SPDX-License-Identifier: MIT
/*
 * Fault injection for the stress suite: preloaded after libsmcr.so
 * (LD_PRELOAD="libsmcr.so fault_shim.so"), it sits between the library and
 * libc and fails every Nth call of the kinds named in SMCR_FAULT:
 *
 *   SMCR_FAULT=memfd:3,eventfd:4,mmap:5,unix:3,timerfd:2
 *
 * or, with "=N", only the Nth call of that kind (unix:=1: the first only).
 *
 * memfd    memfd_create                 ENFILE
 * eventfd  eventfd                      EMFILE
 * mmap     mmap/mmap64(MAP_SHARED) of an fd  ENOMEM
 * unix     socket(AF_UNIX, ...)         EMFILE
 * timerfd  timerfd_create               EMFILE
 *
 * Only kinds the library uses and the test's programs (python TCP echo over
 * epoll) do not, so every injected failure is one the library must absorb.
 * Each injected failure appends a line with its kind to the file
 * SMCR_FAULT_LOG names, at once (servers end by a signal), so the test
 * knows they happened.
 */
/* both mmap and mmap64 are defined here: neither may be the other's alias */
#undef _FILE_OFFSET_BITS
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

enum kind { K_MEMFD, K_EVENTFD, K_MMAP, K_UNIX, K_TIMERFD, K_COUNT };

static const char *const kind_name[K_COUNT] = { "memfd", "eventfd", "mmap", "unix", "timerfd" };
static unsigned every[K_COUNT];
static bool only_once[K_COUNT];
static atomic_uint calls[K_COUNT];

static int log_fd = -1;

static void note(enum kind k)
{
	char line[32];
	int n = snprintf(line, sizeof(line), "%s\n", kind_name[k]);

	if (log_fd >= 0 && n > 0)
		(void)!write(log_fd, line, (size_t)n);
}

__attribute__((constructor)) static void parse(void)
{
	const char *spec = getenv("SMCR_FAULT");
	char buf[256], *save = NULL;

	if (!spec || strlen(spec) >= sizeof(buf))
		return;
	strcpy(buf, spec);
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(tok, ':');

		if (!colon)
			continue;
		*colon = '\0';
		for (int k = 0; k < K_COUNT; k++) {
			if (strcmp(tok, kind_name[k]))
				continue;
			only_once[k] = colon[1] == '=';
			every[k] = (unsigned)strtoul(colon + 1 + only_once[k], NULL, 10);
		}
	}
	if (getenv("SMCR_FAULT_LOG"))
		log_fd = open(getenv("SMCR_FAULT_LOG"), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
}

static int inject(enum kind k)
{
	unsigned n = atomic_fetch_add(&calls[k], 1) + 1;

	if (!every[k] || (only_once[k] ? n != every[k] : n % every[k] != 0))
		return 0;
	note(k);
	return 1;
}

#define REAL(ret, name, params) \
	static ret(*real_##name) params; \
	if (!real_##name) \
		real_##name = (ret(*) params)dlsym(RTLD_NEXT, #name)

int memfd_create(const char *name, unsigned int flags)
{
	REAL(int, memfd_create, (const char *, unsigned int));
	if (inject(K_MEMFD))
		return errno = ENFILE, -1;
	return real_memfd_create(name, flags);
}

int eventfd(unsigned int initval, int flags)
{
	REAL(int, eventfd, (unsigned int, int));
	if (inject(K_EVENTFD))
		return errno = EMFILE, -1;
	return real_eventfd(initval, flags);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	REAL(void *, mmap, (void *, size_t, int, int, int, off_t));
	if ((flags & MAP_SHARED) && fd >= 0 && inject(K_MMAP))
		return errno = ENOMEM, MAP_FAILED;
	return real_mmap(addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	REAL(void *, mmap64, (void *, size_t, int, int, int, off_t));
	if ((flags & MAP_SHARED) && fd >= 0 && inject(K_MMAP))
		return errno = ENOMEM, MAP_FAILED;
	return real_mmap64(addr, len, prot, flags, fd, off);
}

int socket(int domain, int type, int protocol)
{
	REAL(int, socket, (int, int, int));
	if (domain == AF_UNIX && inject(K_UNIX))
		return errno = EMFILE, -1;
	return real_socket(domain, type, protocol);
}

int timerfd_create(int clockid, int flags)
{
	REAL(int, timerfd_create, (int, int));
	if (inject(K_TIMERFD))
		return errno = EMFILE, -1;
	return real_timerfd_create(clockid, flags);
}
