/* SPDX-License-Identifier: MIT */
/*
 * Where stats files live (include/smcr/stats_abi.h): the library creates its
 * directory, smcr-stat finds every one, with the same rules (src/smcr/stats_dir.c).
 *
 * A user's stats directory is the first of these that is, or can be made,
 * a real directory (not a symlink) owned by the user with no access for
 * group or others (0700):
 *   1. $XDG_RUNTIME_DIR/smcr, when $XDG_RUNTIME_DIR is a directory of the user
 *   2. /run/user/UID/smcr, when /run/user/UID is a directory of the user
 *   3. /dev/shm/smcr-UID, then /tmp/smcr-UID
 *   4. /dev/shm/smcr-UID.XXXXXX, then /tmp/smcr-UID.XXXXXX: an existing one of
 *      the user's, else a new one (another user squats the names of 3)
 * A parent directory other users may write without the sticky bit is passed
 * over (they could swap the subdirectory under a reader's path).  Nothing is
 * ever chmod'ed: a directory that is not right is left alone and the next
 * place is tried.  Whatever the process's environment (runuser, cron, a
 * container without a login session), its connections land somewhere
 * smcr-stat looks without being told.
 */
#ifndef SMCR_STATS_DIR_H
#define SMCR_STATS_DIR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define SMCR_STATS_SUBDIR "smcr"	  /* under $XDG_RUNTIME_DIR and /run/user/UID */
#define SMCR_STATS_SHARED_PREFIX "smcr-" /* under /dev/shm and /tmp: smcr-UID[.XXXXXX] */

/*
 * The calling user's stats directory (geteuid()), created if need be: an fd
 * of it (O_DIRECTORY, close-on-exec) and its path in `path`, or -errno (no
 * place was right; `path` then names the last one refused).
 */
int smcr_stats_dir_create(char *path, size_t size);

/*
 * Every existing stats directory of `uid` (its own environment's
 * $XDG_RUNTIME_DIR counts for the caller's own uid only), or of every user
 * when `all_users`: fn(dirfd, path, owner, arg) for each one that passes the
 * checks above (dirfd is open for the call only; every check was made on it).  A directory under a name of `uid` that fails them (another user's
 * squat, a symlink, group or world access) is reported through
 * refused(path, why, arg) when refused is not NULL.
 */
void smcr_stats_dir_each(uid_t uid, bool all_users,
			 void (*fn)(int dirfd, const char *path, uid_t owner, void *arg),
			 void (*refused)(const char *path, const char *why, void *arg), void *arg);

#endif /* SMCR_STATS_DIR_H */
