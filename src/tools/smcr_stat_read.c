// SPDX-License-Identifier: MIT
/*
 * smcr-stat: finding and reading the stats files (include/smcr/stats_abi.h).
 *
 * It reads only the published stats files; it links nothing of the engine,
 * so it also reads files of processes built from another smcr version as long
 * as the layout version matches.
 *
 * Reading a file that its process keeps writing:
 *  - every field is read with one atomic load, as the writer stores them;
 *  - a record of a version-2 file is copied under its seqlock
 *    (smcr_stats_conn_read() in stats_abi.h): a consistent snapshot, never a
 *    mixture of two updates or of two occupants of one slot;
 *  - a version-1 file (no seqlock) is still read: each record is copied
 *    between two reads of its (state, generation) pair, retried when either
 *    changed (fields of one update may still mix);
 *  - the whole file is first copied into private memory under a SIGBUS guard,
 *    so a file truncated under us is skipped instead of killing the tool.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <unistd.h>

#include "smcr/stats_abi.h"
#include "smcr/stats_dir.h"
#include "smcr_stat.h"

/* Attempts to copy one record while its writer reuses the slot. */
#define RECORD_READ_TRIES 16

/* A stats file claiming more slots than this is not one of ours. */
#define MAX_SANE_CONNS (1u << 16)

#define STATS_PREFIX "stats."

/* Version 1: the same layout without the per-record seqlock. */
#define SMCR_STATS_OLDEST_VERSION 1u

/* A table after the connection records: listeners, link groups. */
struct table {
	size_t offset;
	uint32_t size, count;
};

struct tables {
	struct table listeners, lgrs;
};

/* ---- where the files are ----------------------------------------------------------- */

/* "stats.<pid>" with a positive decimal pid and nothing else. */
static pid_t pid_of_name(const char *name)
{
	const char *p = name + strlen(STATS_PREFIX);
	long v = 0;

	if (strncmp(name, STATS_PREFIX, strlen(STATS_PREFIX)) != 0 || !*p || *p == '0')
		return 0;
	for (; *p; p++) {
		if (!isdigit((unsigned char)*p))
			return 0;
		v = v * 10 + (*p - '0');
		if (v > INT_MAX)
			return 0;
	}
	return (pid_t)v;
}

/* ---- liveness: is the file's process still the one writing it? --------------------- */

enum liveness {
	PROCESS_ALIVE,
	PROCESS_GONE,	     /* no such pid: the file is stale */
	PROCESS_NOT_MAPPING, /* the pid lives, the file is not mapped (exec, pid reuse) */
};

/*
 * A pid can be reused and a process can exec away from smcr, so "the pid
 * exists" is not enough: the process must map this very file.  When its maps
 * cannot be read (another user's process, without root) the pid alone decides.
 */
static enum liveness process_liveness(pid_t pid, const char *path, const struct stat *st)
{
	char maps_path[64], line[PATH_MAX + 128];
	enum liveness verdict = PROCESS_NOT_MAPPING;
	FILE *maps;

	if (kill(pid, 0) < 0 && errno == ESRCH)
		return PROCESS_GONE;
	snprintf(maps_path, sizeof(maps_path), "/proc/%d/maps", (int)pid);
	maps = fopen(maps_path, "re");
	if (!maps)
		return errno == ENOENT ? PROCESS_GONE : PROCESS_ALIVE;
	while (verdict != PROCESS_ALIVE && fgets(line, sizeof(line), maps)) {
		unsigned maj, min;
		unsigned long long ino;
		int path_at = 0;

		/* address perms offset dev inode path */
		if (sscanf(line, "%*s %*s %*s %x:%x %llu %n", &maj, &min, &ino,
			   &path_at) < 3)
			continue;
		if (ino == (unsigned long long)st->st_ino &&
		    makedev(maj, min) == st->st_dev)
			verdict = PROCESS_ALIVE;
		/* Stacked file systems (overlayfs) may show another inode: the path too.
		 */
		else if (path_at > 0 &&
			 strncmp(line + path_at, path, strlen(path)) == 0 &&
			 (line[path_at + strlen(path)] == '\n' ||
			  line[path_at + strlen(path)] == '\0'))
			verdict = PROCESS_ALIVE;
	}
	fclose(maps);
	return verdict;
}

/*
 * Version 2 and later: the writer holds a shared flock on its file for as
 * long as it maps it (include/smcr/stats_abi.h).  A file we can lock
 * exclusively has no writer left: stale, whatever its pid says (pid
 * namespaces, pid reuse, exec).  The probe lock goes with our fd.
 */
static enum liveness writer_liveness(int fd)
{
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return PROCESS_GONE;
	return errno == EWOULDBLOCK ? PROCESS_ALIVE : PROCESS_NOT_MAPPING;
}

/* The layout version in the header, 0 if unreadable. */
static uint32_t file_version(int fd)
{
	uint32_t v[2];

	if (pread(fd, v, sizeof(v), 0) != (ssize_t)sizeof(v) || v[0] != SMCR_STATS_MAGIC)
		return 0;
	return v[1];
}

/* Remove a stale file if it is ours and still the same file we judged. */
static void remove_stale(int dirfd, const char *name, const struct stat *judged)
{
	struct stat now;

	if (judged->st_uid != geteuid())
		return;
	if (fstatat(dirfd, name, &now, AT_SYMLINK_NOFOLLOW) < 0 ||
	    now.st_ino != judged->st_ino || now.st_dev != judged->st_dev)
		return; /* replaced meanwhile: a new process with a reused pid */
	if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
		warnx_("cannot remove stale stats file %s: %s", name, strerror(errno));
}

/* ---- copying a live file consistently --------------------------------------------- */

static sigjmp_buf sigbus_jump;
static volatile sig_atomic_t sigbus_armed;

static void on_sigbus(int sig)
{
	if (!sigbus_armed) {
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	siglongjmp(sigbus_jump, 1);
}

#define LOAD(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

static void copy_bytes(uint8_t *dst, const uint8_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = LOAD(src[i]);
}

/* One record of a version-1 file, or false when its slot kept changing under us. */
static bool copy_record_v1(const struct smcr_stats_conn *src, struct smcr_stats_conn *dst)
{
	for (int tries = 0; tries < RECORD_READ_TRIES; tries++) {
		uint32_t gen = __atomic_load_n(&src->generation, __ATOMIC_ACQUIRE);
		uint32_t state = __atomic_load_n(&src->state, __ATOMIC_ACQUIRE);

		memset(dst, 0, sizeof(*dst));
		dst->state = state;
		dst->generation = gen;
		dst->mode = LOAD(src->mode);
		dst->role = LOAD(src->role);
		dst->tcp_fd = LOAD(src->tcp_fd);
		dst->fallback_reason = LOAD(src->fallback_reason);
		dst->rmb_size = LOAD(src->rmb_size);
		dst->peer_rmb_size = LOAD(src->peer_rmb_size);
		dst->bytes_sent = LOAD(src->bytes_sent);
		dst->bytes_received = LOAD(src->bytes_received);
		dst->cdc_sent = LOAD(src->cdc_sent);
		dst->cdc_received = LOAD(src->cdc_received);
		copy_bytes(dst->local_addr, src->local_addr, sizeof(dst->local_addr));
		copy_bytes(dst->peer_addr, src->peer_addr, sizeof(dst->peer_addr));
		dst->local_port = LOAD(src->local_port);
		dst->peer_port = LOAD(src->peer_port);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&src->state, __ATOMIC_RELAXED) == state &&
		    __atomic_load_n(&src->generation, __ATOMIC_RELAXED) == gen)
			return true;
	}
	return false;
}

static void copy_counters(const struct smcr_stats_file *src, struct file_counters *dst)
{
	dst->handshakes_smc = LOAD(src->handshakes_smc);
	dst->conns_open = LOAD(src->conns_open);
	dst->fallbacks = LOAD(src->fallbacks);
	dst->handshake_errors = LOAD(src->handshake_errors);
	dst->aborts = LOAD(src->aborts);
	dst->bytes_sent = LOAD(src->bytes_sent);
	dst->bytes_received = LOAD(src->bytes_received);
	dst->spins_won = LOAD(src->spins_won);
	dst->spins_lost = LOAD(src->spins_lost);
	dst->waits_slept = LOAD(src->waits_slept);
	dst->wakeups_empty = LOAD(src->wakeups_empty);
	dst->link_switches = LOAD(src->link_switches);
	dst->bytes_resent = LOAD(src->bytes_resent);
	for (unsigned i = 0; i < SMCR_STATS_MAX_REASONS; i++) {
		dst->reasons[i].reason = LOAD(src->fallback_reasons[i].reason);
		dst->reasons[i].count = LOAD(src->fallback_reasons[i].count);
	}
}

/* A record worth listing: live, or (with --all) the last connection of its slot. */
static bool record_wanted(const struct smcr_stats_conn *rec, const struct options *o)
{
	if (rec->state == SMCR_STATS_CONN_LIVE)
		return true;
	return o->all && rec->state == SMCR_STATS_CONN_FREE && rec->generation != 0;
}

/* Records at stride conn_size after header_size: later layouts may grow both. */
static bool copy_record(uint32_t version, const struct smcr_stats_conn *src,
			struct smcr_stats_conn *dst)
{
	if (version == 1)
		return copy_record_v1(src, dst);
	return smcr_stats_conn_read(src, dst);
}

/* The tables, where the header puts them (none in files older than they). */
static void copy_tables(const uint8_t *base, const struct tables *t, struct process_view *pv)
{
	for (uint32_t i = 0; i < t->listeners.count; i++) {
		const void *at = base + t->listeners.offset + (size_t)i * t->listeners.size;
		struct smcr_stats_listener *l = &pv->listeners[pv->nlisteners];

		if (smcr_stats_listener_read(at, l) && l->state == SMCR_STATS_CONN_LIVE)
			pv->nlisteners++;
	}
	for (uint32_t i = 0; i < t->lgrs.count; i++) {
		const void *at = base + t->lgrs.offset + (size_t)i * t->lgrs.size;
		struct smcr_stats_lgr *g = &pv->lgrs[pv->nlgrs];

		if (smcr_stats_lgr_read(at, g) && g->state == SMCR_STATS_CONN_LIVE)
			pv->nlgrs++;
	}
}

static bool copy_file(const uint8_t *base, uint32_t version, uint32_t header_size,
		      uint32_t conn_size, uint32_t max_conns, const struct tables *t,
		      const struct options *o, struct process_view *pv)
{
	struct sigaction sa = {.sa_handler = on_sigbus}, old;
	bool ok = false;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, &old);
	pv->conns = xcalloc(max_conns, sizeof(*pv->conns));
	pv->listeners = xcalloc(t->listeners.count, sizeof(*pv->listeners));
	pv->lgrs = xcalloc(t->lgrs.count, sizeof(*pv->lgrs));
	if (sigsetjmp(sigbus_jump, 1) == 0) {
		sigbus_armed = 1;
		copy_counters((const struct smcr_stats_file *)(const void *)base,
			      &pv->counters);
		for (uint32_t i = 0; i < max_conns; i++) {
			const void *at = base + header_size + (size_t)i * conn_size;
			struct conn_view *cv = &pv->conns[pv->nconns];

			if (!copy_record(version, at, &cv->rec) || !record_wanted(&cv->rec, o))
				continue;
			cv->slot = i;
			pv->nconns++;
		}
		copy_tables(base, t, pv);
		ok = true;
	}
	sigbus_armed = 0;
	sigaction(SIGBUS, &old, NULL);
	if (!ok) {
		free(pv->conns);
		free(pv->listeners);
		free(pv->lgrs);
		pv->conns = NULL;
		pv->listeners = NULL;
		pv->lgrs = NULL;
		pv->nconns = pv->nlisteners = pv->nlgrs = 0;
	}
	return ok;
}

/* comm as text: printable ASCII kept, anything else as \ooo. */
static void program_name(const char comm[16], char *out, size_t len)
{
	size_t o = 0;

	for (size_t i = 0; i < 16 && comm[i] && o + 5 < len; i++) {
		unsigned char c = (unsigned char)comm[i];

		if (c >= 0x20 && c < 0x7f && c != '\\')
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, len - o, "\\%03o", c);
	}
	out[o] = '\0';
}

/*
 * A table the header describes (offset, record size, count), if the file
 * holds it whole after the connection records: else none (count 0).
 */
static struct table table_of(const struct smcr_stats_file *hdr, uint32_t offset, uint16_t size,
			     uint16_t count, size_t min_size, size_t records_end, off_t file_size)
{
	struct table t = {0};
	uint64_t end = (uint64_t)offset + (uint64_t)size * count;

	if (!offset || hdr->version < 2 || size < min_size || offset < records_end ||
	    offset % 8 || size % 8 || end > (uint64_t)file_size)
		return t;
	t.offset = offset;
	t.size = size;
	t.count = count;
	return t;
}

static size_t table_end(const struct table *t)
{
	return t->offset + (size_t)t->size * t->count;
}

/*
 * Validate the header of an open stats file and map it.  Returns the mapping
 * (length in *len) or NULL after a warning.  `writable` for reset.
 */
static void *map_stats_file(int fd, const char *path, const struct stat *st,
			    pid_t name_pid, bool writable, size_t *len,
			    struct smcr_stats_file *hdr, struct tables *t)
{
	const size_t fixed = offsetof(struct smcr_stats_file, conns);
	size_t need;
	void *base;

	if (st->st_size < (off_t)fixed || pread(fd, hdr, fixed, 0) != (ssize_t)fixed) {
		warnx_("skipping %s: too short for a stats header", path);
		return NULL;
	}
	if (hdr->magic == 0)
		return NULL; /* its process is between creating and filling it */
	if (hdr->magic != SMCR_STATS_MAGIC) {
		warnx_("skipping %s: not an smcr stats file (magic 0x%08" PRIx32 ")",
		       path, hdr->magic);
		return NULL;
	}
	if (hdr->version < SMCR_STATS_OLDEST_VERSION || hdr->version > SMCR_STATS_VERSION) {
		warnx_("skipping %s: stats layout version %" PRIu32
		       ", this smcr-stat reads versions %u to %u",
		       path, hdr->version, SMCR_STATS_OLDEST_VERSION, SMCR_STATS_VERSION);
		return NULL;
	}
	if (hdr->header_size < fixed || hdr->conn_size < sizeof(struct smcr_stats_conn) ||
	    hdr->max_conns > MAX_SANE_CONNS || hdr->header_size % 8 ||
	    hdr->conn_size % 8) {
		warnx_("skipping %s: implausible layout (header %" PRIu32
		       ", record %" PRIu32 ", %" PRIu32 " records)",
		       path, hdr->header_size, hdr->conn_size, hdr->max_conns);
		return NULL;
	}
	if (hdr->pid != name_pid) {
		warnx_("skipping %s: written by pid %" PRId32
		       ", not by the pid in its name",
		       path, hdr->pid);
		return NULL;
	}
	need = hdr->header_size + (size_t)hdr->conn_size * hdr->max_conns;
	if ((uint64_t)st->st_size < need) {
		warnx_("skipping %s: %lld bytes, its header promises %zu", path,
		       (long long)st->st_size, need);
		return NULL;
	}
	t->listeners = table_of(hdr, hdr->listener_offset, hdr->listener_size, hdr->max_listeners,
				sizeof(struct smcr_stats_listener), need, st->st_size);
	t->lgrs = table_of(hdr, hdr->lgr_offset, hdr->lgr_size, hdr->max_lgrs,
			   sizeof(struct smcr_stats_lgr), need, st->st_size);
	if (t->listeners.count && table_end(&t->listeners) > need)
		need = table_end(&t->listeners);
	if (t->lgrs.count && table_end(&t->lgrs) > need)
		need = table_end(&t->lgrs);
	base =
	    mmap(NULL, need, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		warnx_("skipping %s: mmap: %s", path, strerror(errno));
		return NULL;
	}
	*len = need;
	return base;
}

/* ---- reset ------------------------------------------------------------------------- */

#define TAKE(field) __atomic_exchange_n(&(field), 0, __ATOMIC_RELAXED)

/*
 * Zero the counters of a live process, returning what they held (exchanged,
 * so an increment racing with us is either shown here or kept, never lost).
 * conns_open is a gauge of live connections, not a counter: it stays.
 * Reason codes stay too: the writer finds its slot by code.
 */
static void reset_counters(struct smcr_stats_file *f, struct file_counters *was)
{
	was->conns_open = LOAD(f->conns_open);
	was->handshakes_smc = TAKE(f->handshakes_smc);
	was->fallbacks = TAKE(f->fallbacks);
	was->handshake_errors = TAKE(f->handshake_errors);
	was->aborts = TAKE(f->aborts);
	was->bytes_sent = TAKE(f->bytes_sent);
	was->bytes_received = TAKE(f->bytes_received);
	was->spins_won = TAKE(f->spins_won);
	was->spins_lost = TAKE(f->spins_lost);
	was->waits_slept = TAKE(f->waits_slept);
	was->wakeups_empty = TAKE(f->wakeups_empty);
	was->link_switches = TAKE(f->link_switches);
	was->bytes_resent = TAKE(f->bytes_resent);
	for (unsigned i = 0; i < SMCR_STATS_MAX_REASONS; i++) {
		was->reasons[i].reason = LOAD(f->fallback_reasons[i].reason);
		was->reasons[i].count = TAKE(f->fallback_reasons[i].count);
	}
}

static bool reset_file(void *base, struct process_view *pv)
{
	struct sigaction sa = {.sa_handler = on_sigbus}, old;
	bool ok = false;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, &old);
	if (sigsetjmp(sigbus_jump, 1) == 0) {
		sigbus_armed = 1;
		reset_counters(base, &pv->counters);
		ok = true;
	}
	sigbus_armed = 0;
	sigaction(SIGBUS, &old, NULL);
	return ok;
}

/* ---- reading one directory -------------------------------------------------------- */

static void add_process(struct process_list *pl, const struct process_view *pv)
{
	if (pl->n == pl->cap) {
		size_t cap = pl->cap ? pl->cap * 2 : 16;
		struct process_view *v = realloc(pl->v, cap * sizeof(*v));

		if (!v) {
			warnx_("out of memory");
			exit(1);
		}
		pl->v = v;
		pl->cap = cap;
	}
	pl->v[pl->n++] = *pv;
}

/* One stats.<pid> file: appended to `pl` when valid and alive. */
static void read_one(int dirfd, const char *dir, const char *name, pid_t pid,
		     const struct options *o, struct process_list *pl)
{
	bool writable = o->cmd == CMD_RESET;
	struct process_view pv = {.pid = pid};
	struct smcr_stats_file *hdr;	    /* only its part before conns[] is read */
	char path[PATH_MAX + NAME_MAX + 2]; /* dir/name */
	struct tables tables;
	struct stat st;
	uint32_t version;
	size_t len = 0;
	void *base;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = openat(dirfd, name,
		    (writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		if (errno != ENOENT) /* ENOENT: its process just exited */
			warnx_("skipping %s: %s", path, strerror(errno));
		return;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		warnx_("skipping %s: not a regular file", path);
		close(fd);
		return;
	}
	/*
	 * Version 1 writers hold no lock: only their pid and mappings tell; nor
	 * do we know the rules of a future version, whose file we only warn about.
	 */
	version = file_version(fd);
	switch (version >= 2 && version <= SMCR_STATS_VERSION ? writer_liveness(fd)
							      : process_liveness(pid, path, &st)) {
	case PROCESS_GONE:
		remove_stale(dirfd, name, &st);
		close(fd);
		return;
	case PROCESS_NOT_MAPPING:
		close(fd);
		return;
	case PROCESS_ALIVE:
		break;
	}
	hdr = xcalloc(1, sizeof(*hdr));
	base = map_stats_file(fd, path, &st, pid, writable, &len, hdr, &tables);
	close(fd);
	if (!base) {
		free(hdr);
		return;
	}
	pv.uid = st.st_uid;
	program_name(hdr->comm, pv.program, sizeof(pv.program));
	if (!copy_file(base, hdr->version, hdr->header_size, hdr->conn_size, hdr->max_conns,
		       &tables, o, &pv)) {
		warnx_("skipping %s: the file shrank while being read", path);
	} else if (writable && !reset_file(base, &pv)) {
		warnx_("cannot reset %s: the file shrank", path);
		free(pv.conns);
		free(pv.listeners);
		free(pv.lgrs);
	} else {
		add_process(pl, &pv);
	}
	munmap(base, len);
	free(hdr);
}

/* The stats files in the directory open as `dirfd` (kept open by the caller). */
static void read_dir_fd(int dirfd, const char *dir, const struct options *o,
			struct process_list *pl)
{
	char absolute[PATH_MAX];
	struct dirent *de;
	int scan = dup(dirfd);
	DIR *d;

	/* As /proc/PID/maps names the files (process_liveness compares paths). */
	if (realpath(dir, absolute))
		dir = absolute;
	d = scan >= 0 ? fdopendir(scan) : NULL;
	if (!d) {
		if (scan >= 0)
			close(scan);
		return;
	}
	rewinddir(d);
	while ((de = readdir(d))) {
		pid_t pid = pid_of_name(de->d_name);

		if (!pid || (o->pid && pid != o->pid))
			continue;
		read_one(dirfd, dir, de->d_name, pid, o, pl);
	}
	closedir(d);
}

/* --dir DIR: only that directory, whoever owns it. */
static void read_dir(const char *dir, const struct options *o, struct process_list *pl)
{
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (dirfd < 0) {
		if (errno != ENOENT) /* no directory: no process ever published here */
			warnx_("cannot read %s: %s", dir, strerror(errno));
		return;
	}
	read_dir_fd(dirfd, dir, o, pl);
	close(dirfd);
}

struct dir_id {
	dev_t dev;
	ino_t ino;
};

struct discovery {
	const struct options *o;
	struct process_list *pl;
	struct dir_id seen[256];
	size_t nseen;
};

/* Each directory once, however it was reached. */
static bool first_visit(struct discovery *dv, int dirfd)
{
	struct stat st;

	if (fstat(dirfd, &st) < 0)
		return false;
	for (size_t i = 0; i < dv->nseen; i++)
		if (dv->seen[i].dev == st.st_dev && dv->seen[i].ino == st.st_ino)
			return false;
	if (dv->nseen < sizeof(dv->seen) / sizeof(dv->seen[0]))
		dv->seen[dv->nseen++] = (struct dir_id){st.st_dev, st.st_ino};
	return true;
}

static void found_dir(int dirfd, const char *path, uid_t owner, void *arg)
{
	struct discovery *dv = arg;

	(void)owner;
	if (first_visit(dv, dirfd))
		read_dir_fd(dirfd, path, dv->o, dv->pl);
}

/* A directory under one of the names but not right: nothing of it is read. */
static void refused_dir(const char *path, const char *why, void *arg)
{
	(void)arg;
	warnx_("ignoring %s: %s", path, why);
}

/*
 * Every stats directory of ours, as the library chooses them
 * (include/smcr/stats_dir.h); as root every user's.
 */
void read_all(const struct options *o, struct process_list *pl)
{
	struct discovery *dv;

	if (o->dir) {
		read_dir(o->dir, o, pl);
		return;
	}
	dv = xcalloc(1, sizeof(*dv));
	dv->o = o;
	dv->pl = pl;
	smcr_stats_dir_each(geteuid(), geteuid() == 0, found_dir, refused_dir, dv);
	free(dv);
}
