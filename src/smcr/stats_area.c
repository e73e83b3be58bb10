// SPDX-License-Identifier: MIT
/*
 * Stats publishing (see stats.h and include/smcr/stats_abi.h): the file and
 * its life (this file), what goes in it (stats.c).
 *
 * The area is created on first use: stats.<pid> in the user's stats
 * directory (include/smcr/stats_dir.h: made 0700 and checked, never a
 * directory of someone else's nor one we chmod), mapped shared so the stats
 * tool can read it while we run.
 *
 * fork: the child must not write into the parent's file, and its
 * connections must be visible (prefork and accept-then-fork servers do all
 * their work in children).  At fork the child swaps the shared mapping for a
 * zeroed private one at the same address, so that pointers to records of
 * inherited connections stay valid; those slots are marked INHERITED (hidden
 * from readers, never claimed until freed).  Its own counters start at zero.
 * It publishes stats.<its pid> lazily, at its first stats event: a child that
 * never connects (a worker that only execs, a daemonising fork) costs no file,
 * and the fork itself costs one mmap() and a scan of the slot states, with no
 * allocation or file system work in the atfork handler.
 */
#include "smcr/stats.h"
#include "stats_int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/compiler.h"
#include "common/log.h"
#include "smcr/libc.h"
#include "smcr/confine.h"
#include "smcr/stats_dir.h"
#include "smcr/sys.h"

pthread_mutex_t smcr_stats_lock = PTHREAD_MUTEX_INITIALIZER;
static struct smcr_stats_file *area;
static char area_path[256];
static char area_new_name[32];
/* The stats directory, open from area_create_file() to area_file_show(). */
static int area_dir_fd = -1;
/* Open for the life of the mapping: it holds the shared flock. */
static int area_fd = -1;
/* A forked child whose area is private until its first stats event. */
static bool publish_pending;
bool smcr_stats_off;
/* No file may be made (smcr_stats_keep_private): the private mapping only. */
static bool stats_private_only;


/* The stats directory (stats_dir.h), for the stats file and the learned policy's table. */
bool smcr_stats_runtime_dir(char *out, size_t len)
{
	int fd = smcr_stats_dir_create(out, len);

	if (fd < 0)
		return false;
	smcr_sys_close(fd);
	return true;
}

static void area_header(struct smcr_stats_file *f)
{
	f->magic = SMCR_STATS_MAGIC;
	f->version = SMCR_STATS_VERSION;
	f->header_size = (uint32_t)offsetof(struct smcr_stats_file, conns);
	f->conn_size = (uint32_t)sizeof(struct smcr_stats_conn);
	f->max_conns = SMCR_STATS_MAX_CONNS;
	f->listener_offset = (uint32_t)offsetof(struct smcr_stats_file, listeners);
	f->listener_size = (uint16_t)sizeof(struct smcr_stats_listener);
	f->max_listeners = SMCR_STATS_MAX_LISTENERS;
	f->lgr_offset = (uint32_t)offsetof(struct smcr_stats_file, lgrs);
	f->lgr_size = (uint16_t)sizeof(struct smcr_stats_lgr);
	f->max_lgrs = SMCR_STATS_MAX_LGRS;
	f->pid = (int32_t)getpid();
	smcr_libc.prctl(PR_GET_NAME, f->comm, 0, 0, 0);
}

static void close_dir(void)
{
	if (area_dir_fd >= 0)
		smcr_sys_close(area_dir_fd);
	area_dir_fd = -1;
}

/* The half-made file goes, and with it our hold on the directory (errno kept). */
static void area_file_drop(void)
{
	int saved = errno;

	if (area_dir_fd >= 0)
		unlinkat(area_dir_fd, area_new_name, 0);
	close_dir();
	errno = saved;
}

/*
 * A new stats file of our pid, sized for the area and share-locked, still
 * under a name readers ignore (stats.<pid>.new): its fd, or -1 (errno set).
 * area_file_show() gives it its real name once it is filled.
 *
 * The shared flock is how readers tell a live file from a stale one (any pid
 * namespace, pid reuse, exec): we hold it for the life of the mapping, on an
 * fd kept open close-on-exec; the kernel drops it when we exit or exec, and
 * a reader that can take an exclusive lock knows nobody writes the file.
 */
static int area_create_file(void)
{
	char dir[224];
	int fd;

	area_dir_fd = smcr_stats_dir_create(dir, sizeof(dir));
	if (area_dir_fd < 0) {
		snprintf(area_path, sizeof(area_path), "%s", dir);
		errno = -area_dir_fd;
		return -1;
	}
	snprintf(area_path, sizeof(area_path), "%s/stats.%d", dir, (int)getpid());
	snprintf(area_new_name, sizeof(area_new_name), "stats.%d.new", (int)getpid());
	unlinkat(area_dir_fd, area_new_name, 0); /* left by an earlier process with our pid */
	fd = smcr_sys_fd_high(smcr_libc.openat(area_dir_fd, area_new_name,
					       O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
					       0600));
	if (fd < 0)
		goto fail;
	if (flock(fd, LOCK_SH | LOCK_NB) < 0 ||
	    ftruncate(fd, (off_t)sizeof(struct smcr_stats_file)) < 0) {
		smcr_sys_close(fd);
		goto fail;
	}
	return fd;
fail:
	area_file_drop();
	return -1;
}

/* Filled and mapped: give the file its real name (replacing any stale one). */
static bool area_file_show(int fd)
{
	bool ok = renameat(area_dir_fd, area_new_name, area_dir_fd,
			   strrchr(area_path, '/') + 1) == 0;

	if (!ok) {
		area_file_drop();
		return false;
	}
	close_dir();
	area_fd = fd;
	return true;
}

static void publish_failed(void)
{
	smcr_info("stats stay private: cannot publish %s: %s", area_path, strerror(errno));
	area_path[0] = '\0';
}

/* The shared file, filled with its header, or NULL (stats then stay private). */
static struct smcr_stats_file *area_publish(void)
{
	struct smcr_stats_file *f;
	int fd = area_create_file();

	if (fd < 0)
		goto fail;
	f = mmap(NULL, sizeof(*f), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (f == MAP_FAILED) {
		smcr_sys_close(fd);
		area_file_drop();
		goto fail;
	}
	area_header(f);
	if (!area_file_show(fd)) {
		munmap(f, sizeof(*f));
		smcr_sys_close(fd);
		goto fail;
	}
	return f;
fail:
	publish_failed();
	return NULL;
}

/*
 * A forked child's first stats event: its private area (header, inherited
 * slot marks, whatever it counted so far) becomes stats.<pid>, mapped shared
 * over the same address so every record pointer stays valid.  Under
 * smcr_stats_lock; a counter bumped by another thread between the copy and the
 * remap may be lost, nothing worse.
 */
static void area_republish(struct smcr_stats_file *f)
{
	int fd;

	area_header(f);
	fd = area_create_file();
	if (fd < 0) {
		publish_failed();
		return;
	}
	if (pwrite(fd, f, sizeof(*f), 0) != (ssize_t)sizeof(*f) ||
	    mmap(f, sizeof(*f), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) ==
		    MAP_FAILED) {
		smcr_sys_close(fd);
		area_file_drop();
		publish_failed();
		return;
	}
	if (!area_file_show(fd)) {
		/* Mapped shared but unnamed: still ours alone, just invisible. */
		smcr_sys_close(fd);
		publish_failed();
	}
}

/*
 * A confined process leaves its file (unlink may be denied): smcr-stat
 * removes a file nobody holds the lock of any more.
 */
void smcr_stats_exit(void)
{
	if (area_path[0] && area && area->pid == (int32_t)getpid() && !smcr_confined())
		unlink(area_path);
}


/*
 * atfork child handler: only system calls and plain stores here (the child of
 * a multi-threaded parent may run it with another thread's locks held).
 */
void smcr_stats_fork_child(void)
{
	uint32_t inherited[SMCR_STATS_MAX_CONNS / 32] = { 0 };
	/* The child holds its parent's listening sockets too: their records stay. */
	struct smcr_stats_listener listeners[SMCR_STATS_MAX_LISTENERS];
	uint32_t lgr_inherited[(SMCR_STATS_MAX_LGRS + 31) / 32] = { 0 };
	struct smcr_stats_file *f = area;

	pthread_mutex_unlock(&smcr_stats_lock);
	if (area_fd >= 0) {
		/* The parent's flock stays the parent's: it lives on its open file. */
		smcr_sys_close(area_fd);
		area_fd = -1;
	}
	if (!f)
		return;
	for (unsigned i = 0; i < SMCR_STATS_MAX_CONNS; i++)
		if (__atomic_load_n(&f->conns[i].state, __ATOMIC_RELAXED) != SMCR_STATS_CONN_FREE)
			inherited[i / 32] |= 1u << (i % 32);
	memcpy(listeners, f->listeners, sizeof(listeners));
	for (unsigned i = 0; i < SMCR_STATS_MAX_LGRS; i++)
		if (__atomic_load_n(&f->lgrs[i].state, __ATOMIC_RELAXED) != SMCR_STATS_CONN_FREE)
			lgr_inherited[i / 32] |= 1u << (i % 32);
	/*
	 * Fresh zeroed private pages at the same address: the parent's file is
	 * no longer ours, and the parent's counters and records are not ours
	 * to publish.  If this fails (ENOMEM), the child keeps no stats at all
	 * rather than write into its parent's file.
	 */
	if (mmap(f, sizeof(*f), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
		 -1, 0) == MAP_FAILED) {
		smcr_stats_off = true;
		area_path[0] = '\0';
		return;
	}
	for (unsigned i = 0; i < SMCR_STATS_MAX_CONNS; i++)
		if (inherited[i / 32] & (1u << (i % 32)))
			f->conns[i].state = SMCR_STATS_CONN_INHERITED;
	memcpy(f->listeners, listeners, sizeof(listeners));
	for (unsigned i = 0; i < SMCR_STATS_MAX_LISTENERS; i++)
		f->listeners[i].seq &= ~1u; /* a parent thread's write, cut short by fork */
	/* The parent's link groups are not the child's (lgr.c), but it may still
	 * touch their records: those slots stay reserved, hidden. */
	for (unsigned i = 0; i < SMCR_STATS_MAX_LGRS; i++)
		if (lgr_inherited[i / 32] & (1u << (i % 32)))
			f->lgrs[i].state = SMCR_STATS_CONN_INHERITED;
	f->pid = (int32_t)getpid(); /* its exit handler must not unlink the parent's file */
	area_path[0] = '\0';
	publish_pending = true;
}

/*
 * fork child, after smcr_stats_fork_child(): the record of a connection the
 * child holds (it followed fork) stays reserved in the child's area, even if
 * the parent, running on meanwhile, closed its share before the child's
 * handler looked at the parent's slots.  A plain store.
 */
void smcr_stats_fork_keep(struct smcr_stats_conn *c)
{
	if (c && !smcr_stats_off && area)
		c->state = SMCR_STATS_CONN_INHERITED;
}

void smcr_stats_fork_prepare(void)
{
	pthread_mutex_lock(&smcr_stats_lock);
}

void smcr_stats_fork_parent(void)
{
	pthread_mutex_unlock(&smcr_stats_lock);
}

struct smcr_stats_file *smcr_stats_area_get(void)
{
	struct smcr_stats_file *f = __atomic_load_n(&area, __ATOMIC_ACQUIRE);

	if (smcr_stats_off)
		return NULL;
	if (f && !__atomic_load_n(&publish_pending, __ATOMIC_ACQUIRE))
		return f;
	pthread_mutex_lock(&smcr_stats_lock);
	if (area && publish_pending) {
		if (!stats_private_only)
			area_republish(area);
		__atomic_store_n(&publish_pending, false, __ATOMIC_RELEASE);
	}
	if (!area) {
		f = stats_private_only ? NULL : area_publish();
		if (!f) {
			f = mmap(NULL, sizeof(*f), PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (f == MAP_FAILED)
				f = NULL;
		}
		if (f) {
			if (f->magic == 0) /* the private fallback */
				area_header(f);
			__atomic_store_n(&area, f, __ATOMIC_RELEASE);
		}
	}
	f = area;
	pthread_mutex_unlock(&smcr_stats_lock);
	return f;
}

struct smcr_stats_file *smcr_stats_area_settled(void)
{
	if (__atomic_load_n(&publish_pending, __ATOMIC_ACQUIRE))
		return smcr_stats_area_get();
	return __atomic_load_n(&area, __ATOMIC_ACQUIRE);
}


const struct smcr_stats_file *smcr_stats_area_peek(void)
{
	return __atomic_load_n(&area, __ATOMIC_ACQUIRE);
}

const struct smcr_stats_file *smcr_stats_area(void)
{
	return smcr_stats_area_get();
}

const char *smcr_stats_path(void)
{
	smcr_stats_area_get();
	return area_path;
}

void smcr_stats_confine_prepare(void)
{
	(void)smcr_stats_area_get();
}

void smcr_stats_keep_private(void)
{
	pthread_mutex_lock(&smcr_stats_lock);
	stats_private_only = true;
	pthread_mutex_unlock(&smcr_stats_lock);
}
