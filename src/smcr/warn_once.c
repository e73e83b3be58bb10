// SPDX-License-Identifier: MIT
/*
 * Configuration warnings once per user session (include/smcr/engine.h).
 *
 * A bad setting in a shell profile reaches every process a wrapper script
 * spawns: said by each, the one warning drowns the output.  The first
 * process to say it leaves a marker named by a hash of the message in the
 * user's private stats directory (include/smcr/stats_dir.h: owned by the
 * user, 0700, never a symlink), under warned/; later processes find the
 * marker and stay quiet.  O_CREAT|O_EXCL makes exactly one of many
 * concurrent processes the one that speaks.  $XDG_RUNTIME_DIR is removed
 * when the user's last session ends, so the warning comes back in the next
 * session; where there is none (the /dev/shm or /tmp places), until reboot.
 * Where no marker can be made, or in a setuid process (whose environment
 * is its caller's), every process says it: better twice than never.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"
#include "smcr/engine.h"
#include "smcr/stats_dir.h"

#define WARNED_SUBDIR "warned"

static uint64_t message_hash(const char *message)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

	for (const unsigned char *p = (const unsigned char *)message; *p; p++)
		h = (h ^ *p) * 0x100000001b3ull;
	return h;
}

static void fd_close(int fd)
{
	syscall(SYS_close, fd);
}

/* The warned/ directory inside the user's stats directory: its fd, or -1. */
static int warned_dir_open(void)
{
	char path[PATH_MAX];
	struct stat st;
	int top, dir;

	top = smcr_stats_dir_create(path, sizeof(path));
	if (top < 0)
		return -1;
	if (syscall(SYS_mkdirat, top, WARNED_SUBDIR, 0700) < 0 && errno != EEXIST) {
		fd_close(top);
		return -1;
	}
	dir = (int)syscall(SYS_openat, top, WARNED_SUBDIR,
			   O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	fd_close(top);
	if (dir >= 0 && (fstat(dir, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 077))) {
		fd_close(dir);
		return -1;
	}
	return dir;
}

/* Is this the first time this session: true when the marker was made now, or cannot be. */
static bool first_in_session(const char *message)
{
	char name[32];
	int dir, fd;

	if (getauxval(AT_SECURE))
		return true;
	dir = warned_dir_open();
	if (dir < 0)
		return true;
	snprintf(name, sizeof(name), "%016llx", (unsigned long long)message_hash(message));
	fd = (int)syscall(SYS_openat, dir, name,
			  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	fd_close(dir);
	if (fd >= 0) {
		fd_close(fd);
		return true;
	}
	return errno != EEXIST;
}

void smcr_warn_once_per_session(const char *message)
{
	int saved = errno;

	if (first_in_session(message))
		smcr_warn("%s (said once per session)", message);
	else
		smcr_dbg("%s (said already in this session)", message);
	errno = saved;
}
