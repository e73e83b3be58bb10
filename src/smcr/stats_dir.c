// SPDX-License-Identifier: MIT
/*
 * Where stats files live (include/smcr/stats_dir.h): the library's writer and
 * smcr-stat both build this file, so the place a process publishes in and the
 * places the tool searches cannot drift apart.
 *
 * Directories are opened by system call rather than through libc's open():
 * in an smcr process the interposer wraps openat() and close(), and a
 * directory fd held for a few calls is none of its business.  Every check is
 * made on an open fd (fstat), and every name is opened relative to its
 * parent's fd with O_NOFOLLOW, so a name swapped between a check and its use
 * cannot send us elsewhere.
 */
#include "smcr/stats_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The shared places of rule 3 and 4, in order: tmpfs first (no disk writeback). */
static const char *const shared_parents[] = { "/dev/shm", "/tmp" };
#define N_SHARED (sizeof(shared_parents) / sizeof(shared_parents[0]))

static int dir_open(int parent, const char *name, int extra)
{
	return (int)syscall(SYS_openat, parent, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | extra);
}

static void fd_close(int fd)
{
	syscall(SYS_close, fd);
}

/* NULL when `fd` is a directory of `uid` that nobody else may enter, else why not. */
static const char *private_why(int fd, uid_t uid)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return "cannot stat it";
	if (!S_ISDIR(st.st_mode))
		return "not a directory";
	if (st.st_uid != uid)
		return "owned by another user";
	if (st.st_mode & 077)
		return "open to group or others";
	return NULL;
}

/*
 * A parent directory: followed if a symlink ($XDG_RUNTIME_DIR is the user's
 * to point anywhere), owned by `uid` when `must_own`, and not writable by
 * others unless sticky (they could rename our subdirectory away and put
 * another in its place).  Its fd, or -1.
 */
static int parent_open(const char *path, uid_t uid, bool must_own)
{
	struct stat st;
	int fd = dir_open(AT_FDCWD, path, 0);

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || (must_own && st.st_uid != uid) ||
	    ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))) {
		fd_close(fd);
		return -1;
	}
	return fd;
}

/*
 * parent/name as a private directory of `uid` (made first when `create`):
 * its fd, or -errno with *why set.  An existing one that is not right is
 * refused, never repaired: chmod would act on whatever the name is now.
 */
static int private_open(int parent, const char *name, uid_t uid, bool create, const char **why)
{
	const char *w;
	int fd;

	if (create && mkdirat(parent, name, 0700) < 0 && errno != EEXIST) {
		*why = strerror(errno);
		return -errno;
	}
	fd = dir_open(parent, name, O_NOFOLLOW);
	if (fd < 0) {
		int err = errno;

		*why = err == ELOOP || err == ENOTDIR ? "a symlink or not a directory"
						       : strerror(err);
		return -err;
	}
	w = private_why(fd, uid);
	if (w) {
		fd_close(fd);
		*why = w;
		return -EPERM;
	}
	return fd;
}

/* parent_path/name, private to `uid` and made if missing: fd, path set; or -errno. */
static int try_place(const char *parent_path, const char *name, uid_t uid, bool must_own,
		     char *path, size_t size)
{
	const char *why; /* the writer does not say why a place was passed over */
	int parent, fd;

	snprintf(path, size, "%s/%s", parent_path, name);
	parent = parent_open(parent_path, uid, must_own);
	if (parent < 0)
		return -ENOENT;
	fd = private_open(parent, name, uid, true, &why);
	fd_close(parent);
	return fd;
}

/* "smcr-UID." followed by something: a name of rule 4 of `uid`. */
static bool unique_name_of(const char *name, uid_t uid)
{
	char prefix[32];
	size_t n = (size_t)snprintf(prefix, sizeof(prefix), SMCR_STATS_SHARED_PREFIX "%u.",
				    (unsigned)uid);

	return strncmp(name, prefix, n) == 0 && name[n] != '\0';
}

/* Rule 4 in one shared parent: an existing directory of ours, else a new one. */
static int try_unique(const char *parent_path, uid_t uid, char *path, size_t size)
{
	const char *why;
	struct dirent *de;
	int parent, fd = -ENOENT, scan;
	DIR *d;

	parent = parent_open(parent_path, uid, false);
	if (parent < 0)
		return -ENOENT;
	scan = dir_open(parent, ".", 0);
	d = scan >= 0 ? fdopendir(scan) : NULL;
	if (!d && scan >= 0)
		fd_close(scan);
	while (d && fd < 0 && (de = readdir(d))) {
		if (!unique_name_of(de->d_name, uid))
			continue;
		fd = private_open(parent, de->d_name, uid, false, &why);
		if (fd >= 0)
			snprintf(path, size, "%s/%s", parent_path, de->d_name);
	}
	if (d)
		closedir(d);
	if (fd < 0) {
		char tmpl[PATH_MAX];

		/* mkdtemp: a fresh name, made 0700, failing rather than reusing one */
		snprintf(tmpl, sizeof(tmpl), "%s/" SMCR_STATS_SHARED_PREFIX "%u.XXXXXX",
			 parent_path, (unsigned)uid);
		if (mkdtemp(tmpl)) {
			fd = private_open(parent, strrchr(tmpl, '/') + 1, uid, false, &why);
			if (fd >= 0)
				snprintf(path, size, "%s", tmpl);
		}
	}
	fd_close(parent);
	return fd;
}

int smcr_stats_dir_create(char *path, size_t size)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	uid_t uid = geteuid();
	char place[64], name[32];
	int fd = -ENOENT;

	if (xdg && xdg[0] == '/')
		fd = try_place(xdg, SMCR_STATS_SUBDIR, uid, true, path, size);
	if (fd < 0) {
		snprintf(place, sizeof(place), "/run/user/%u", (unsigned)uid);
		fd = try_place(place, SMCR_STATS_SUBDIR, uid, true, path, size);
	}
	snprintf(name, sizeof(name), SMCR_STATS_SHARED_PREFIX "%u", (unsigned)uid);
	for (size_t i = 0; fd < 0 && i < N_SHARED; i++)
		fd = try_place(shared_parents[i], name, uid, false, path, size);
	for (size_t i = 0; fd < 0 && i < N_SHARED; i++)
		fd = try_unique(shared_parents[i], uid, path, size);
	return fd;
}

/* ---- finding them ------------------------------------------------------------------ */

struct visit {
	void (*fn)(int dirfd, const char *path, uid_t owner, void *arg);
	void (*refused)(const char *path, const char *why, void *arg);
	void *arg;
};

/* parent/name if it is a private directory of `uid`; else report it (when it exists). */
static void visit_one(const struct visit *v, int parent, const char *parent_path,
		      const char *name, uid_t uid)
{
	char path[PATH_MAX];
	const char *why = NULL;
	int fd = private_open(parent, name, uid, false, &why);

	snprintf(path, sizeof(path), "%s/%s", parent_path, name);
	if (fd >= 0) {
		v->fn(fd, path, uid, v->arg);
		fd_close(fd);
	} else if (fd != -ENOENT && v->refused) {
		v->refused(path, why, v->arg);
	}
}

static void visit_place(const struct visit *v, const char *parent_path, const char *name,
			uid_t uid, bool must_own)
{
	int parent = parent_open(parent_path, uid, must_own);

	if (parent < 0)
		return;
	visit_one(v, parent, parent_path, name, uid);
	fd_close(parent);
}

/* A decimal uid and nothing else before `end` (or the string's end). */
static bool parse_uid(const char *s, const char *end, uid_t *uid)
{
	unsigned long v = 0;

	if (s == end || *s == '\0' || (*s == '0' && s + 1 != end && s[1] != '\0'))
		return false; /* empty, or a leading zero: not the name we would give */
	for (; s != end && *s; s++) {
		if (*s < '0' || *s > '9' || v > (unsigned long)INT_MAX)
			return false;
		v = v * 10 + (unsigned long)(*s - '0');
	}
	*uid = (uid_t)v;
	return true;
}

/*
 * The rule 3 and 4 directories in one shared parent: those of `uid`, or of
 * every user (the uid in the name must own it).
 */
static void visit_shared(const struct visit *v, const char *parent_path, uid_t uid,
			 bool all_users)
{
	const size_t plen = strlen(SMCR_STATS_SHARED_PREFIX);
	int parent = dir_open(AT_FDCWD, parent_path, 0), scan;
	struct dirent *de;
	DIR *d;

	if (parent < 0)
		return;
	scan = dir_open(parent, ".", 0);
	d = scan >= 0 ? fdopendir(scan) : NULL;
	if (!d && scan >= 0)
		fd_close(scan);
	while (d && (de = readdir(d))) {
		const char *dot;
		uid_t owner;

		if (strncmp(de->d_name, SMCR_STATS_SHARED_PREFIX, plen) != 0)
			continue;
		dot = strchr(de->d_name + plen, '.');
		if (!parse_uid(de->d_name + plen, dot, &owner) || (dot && dot[1] == '\0') ||
		    (!all_users && owner != uid))
			continue;
		visit_one(v, parent, parent_path, de->d_name, owner);
	}
	if (d)
		closedir(d);
	fd_close(parent);
}

void smcr_stats_dir_each(uid_t uid, bool all_users,
			 void (*fn)(int dirfd, const char *path, uid_t owner, void *arg),
			 void (*refused)(const char *path, const char *why, void *arg), void *arg)
{
	const struct visit v = { fn, refused, arg };
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	char place[64];

	if (uid == geteuid() && xdg && xdg[0] == '/')
		visit_place(&v, xdg, SMCR_STATS_SUBDIR, uid, true);
	snprintf(place, sizeof(place), "/run/user/%u", (unsigned)uid);
	visit_place(&v, place, SMCR_STATS_SUBDIR, uid, true);
	if (all_users) {
		int users = dir_open(AT_FDCWD, "/run/user", 0);
		DIR *d = users >= 0 ? fdopendir(users) : NULL;
		struct dirent *de;
		uid_t owner;

		if (!d && users >= 0)
			fd_close(users);
		while (d && (de = readdir(d))) {
			if (!parse_uid(de->d_name, NULL, &owner) || owner == uid)
				continue;
			snprintf(place, sizeof(place), "/run/user/%u", (unsigned)owner);
			visit_place(&v, place, SMCR_STATS_SUBDIR, owner, true);
		}
		if (d)
			closedir(d);
	}
	for (size_t i = 0; i < N_SHARED; i++)
		visit_shared(&v, shared_parents[i], uid, all_users);
}
