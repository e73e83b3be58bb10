// SPDX-License-Identifier: MIT
/*
 * smcr-stat: list the SMC connections and counters of every running smcr
 * process of the user (root: of every user), in the spirit of smc-tools'
 * smcss and `smcr stats show|reset|json`.  See docs/smcr-stat.8.
 *
 * It reads only the published stats files (include/smcr/stats_abi.h); it
 * links nothing of the engine, so it also reads files of processes built from
 * another smcr version as long as the layout version matches.
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
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pwd.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
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
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "smcr/decline.h"
#include "smcr/stats_abi.h"
#include "smcr/stats_dir.h"

#ifndef SMCR_VERSION_STRING
#define SMCR_VERSION_STRING "unknown"
#endif

/* Attempts to copy one record while its writer reuses the slot. */
#define RECORD_READ_TRIES 16

/* A stats file claiming more slots than this is not one of ours. */
#define MAX_SANE_CONNS (1u << 16)

#define STATS_PREFIX "stats."

/* Version 1: the same layout without the per-record seqlock. */

/* A table after the connection records: listeners, link groups. */
struct table {
	size_t offset;
	uint32_t size, count;
};

struct tables {
	struct table listeners, lgrs;
};

#define SMCR_STATS_OLDEST_VERSION 1u

#include "smcr_stat.h"

static const char *progname = "smcr-stat";

static void warnx_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void warnx_(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", progname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	if (!p) {
		warnx_("out of memory");
		exit(1);
	}
	return p;
}

/* ---- fallback reason names (Linux's SMC_CLC_DECL_* identifiers) ------------------- */

const char *reason_name(uint32_t code)
{
	const char *name = smcr_clc_decl_name(code);

	if (code == 0)
		return "NONE";
	return name ? name : "UNKNOWN";
}

const char *mode_name(uint32_t mode)
{
	switch (mode) {
	case SMCR_STATS_MODE_TCP:
		return "tcp-fallback";
	case SMCR_STATS_MODE_SMC_SHM:
		return "smc-shm";
	case SMCR_STATS_MODE_SMC_R:
		return "smc-r";
	}
	return "unknown";
}

/* An SMC connection's phase as in the kernel's smc states; NULL: none or unknown. */
static const char *phase_name(uint32_t phase)
{
	static const char *const names[] = {
		[SMCR_STATS_PHASE_ACTIVE] = "active",
		[SMCR_STATS_PHASE_PEER_CLOSE_WAIT1] = "peer-close-wait1",
		[SMCR_STATS_PHASE_PEER_CLOSE_WAIT2] = "peer-close-wait2",
		[SMCR_STATS_PHASE_APP_CLOSE_WAIT1] = "app-close-wait1",
		[SMCR_STATS_PHASE_APP_CLOSE_WAIT2] = "app-close-wait2",
		[SMCR_STATS_PHASE_CLOSED] = "closed",
		[SMCR_STATS_PHASE_ABORTED] = "aborted",
	};

	return phase < sizeof(names) / sizeof(names[0]) ? names[phase] : NULL;
}

bool mode_is_smc(uint32_t mode)
{
	return mode == SMCR_STATS_MODE_SMC_SHM || mode == SMCR_STATS_MODE_SMC_R;
}

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
static void read_all(const struct options *o, struct process_list *pl)
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

static int by_pid(const void *a, const void *b)
{
	const struct process_view *x = a, *y = b;

	return (x->pid > y->pid) - (x->pid < y->pid);
}

/* ---- formatting helpers ----------------------------------------------------------- */

static bool addr_is_v4(const uint8_t a[16])
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	return memcmp(a, mapped, sizeof(mapped)) == 0;
}

void addr_text(const uint8_t a[16], char *out, size_t len)
{
	if (addr_is_v4(a))
		inet_ntop(AF_INET, a + 12, out, (socklen_t)len);
	else
		inet_ntop(AF_INET6, a, out, (socklen_t)len);
}

void endpoint_text(const uint8_t a[16], uint16_t port, char *out, size_t len)
{
	char ip[INET6_ADDRSTRLEN];

	addr_text(a, ip, sizeof(ip));
	snprintf(out, len, addr_is_v4(a) ? "%s:%u" : "[%s]:%u", ip, port);
}

static const char *user_name(uid_t uid, char *buf, size_t len)
{
	struct passwd *pw = getpwuid(uid);

	if (pw)
		snprintf(buf, len, "%s", pw->pw_name);
	else
		snprintf(buf, len, "%u", (unsigned)uid);
	return buf;
}

unsigned smcr_stat_report;

void json_head(void)
{
	printf("{\"format\": \"smcr-stat\", \"version\": %d, ", JSON_FORMAT_VERSION);
	if (smcr_stat_report)
		printf("\"report\": %u, ", smcr_stat_report);
}

/* JSON string: quotes, backslash and control characters escaped; input is ASCII. */
void json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

/* ---- show: the connection list ---------------------------------------------------- */

/*
 * The record's RDMA device name into out (at least 17 bytes): false if there
 * is none.  Characters other than [A-Za-z0-9_.-] (the file is another
 * process's) become '?'.
 */
bool device_name(const struct smcr_stats_conn *r, char *out)
{
	size_t n = 0;

	for (; n < sizeof(r->device) && r->device[n]; n++) {
		char ch = r->device[n];

		out[n] = isalnum((unsigned char)ch) || ch == '_' || ch == '.' || ch == '-' ? ch : '?';
	}
	out[n] = '\0';
	return n > 0;
}

static void print_conn_json(const struct process_view *pv, const struct conn_view *cv)
{
	const struct smcr_stats_conn *r = &cv->rec;
	char ip[INET6_ADDRSTRLEN], dev[sizeof(r->device) + 1];

	printf("    {\"pid\": %d, \"program\": ", (int)pv->pid);
	json_string(pv->program);
	printf(", \"uid\": %u, \"slot\": %u, \"generation\": %" PRIu32 ", ",
	       (unsigned)pv->uid, cv->slot, r->generation);
	printf("\"state\": \"%s\", \"mode\": \"%s\", \"role\": \"%s\", \"fd\": %" PRId32
	       ",\n",
	       r->state == SMCR_STATS_CONN_LIVE ? "live" : "closed", mode_name(r->mode),
	       r->role ? "server" : "client", r->tcp_fd);
	printf("     \"family\": \"%s\", ", addr_is_v4(r->local_addr) ? "ipv4" : "ipv6");
	addr_text(r->local_addr, ip, sizeof(ip));
	printf("\"local_address\": \"%s\", \"local_port\": %u, ", ip, r->local_port);
	addr_text(r->peer_addr, ip, sizeof(ip));
	printf("\"peer_address\": \"%s\", \"peer_port\": %u,\n", ip, r->peer_port);
	if (mode_is_smc(r->mode))
		printf("     \"fallback_code\": null, \"fallback_name\": null, ");
	else
		printf("     \"fallback_code\": \"0x%08" PRIx32
		       "\", \"fallback_name\": \"%s\", ",
		       r->fallback_reason, reason_name(r->fallback_reason));
	if (mode_is_smc(r->mode)) {
		printf("\"bytes_sent\": %" PRIu64 ", \"bytes_received\": %" PRIu64 ", ",
		       r->bytes_sent, r->bytes_received);
		printf("\"cdc_sent\": %" PRIu64 ", \"cdc_received\": %" PRIu64 ",\n",
		       r->cdc_sent, r->cdc_received);
		printf("     \"rmb_size\": %" PRIu32 ", \"peer_rmb_size\": %" PRIu32 ", ",
		       r->rmb_size, r->peer_rmb_size);
	} else {
		/* The library does not count plain TCP's bytes; there are no rings. */
		printf("\"bytes_sent\": null, \"bytes_received\": null, "
		       "\"cdc_sent\": null, \"cdc_received\": null,\n"
		       "     \"rmb_size\": null, \"peer_rmb_size\": null, ");
	}
	/* 0: none (same-host shm, TCP, or a version-1 file) */
	if (r->link_group)
		printf("\"link_group\": %" PRIu32 ", ", r->link_group);
	else
		printf("\"link_group\": null, ");
	if (device_name(r, dev))
		printf("\"device\": \"%s\", ", dev);
	else
		printf("\"device\": null, ");
	if (phase_name(r->conn_phase))
		printf("\"conn_state\": \"%s\"}", phase_name(r->conn_phase));
	else
		printf("\"conn_state\": null}");
}

static void show_json(const struct process_list *pl)
{
	bool first = true;

	json_head();
	printf("\"process_count\": %zu, \"connections\": [", pl->n);
	for (size_t p = 0; p < pl->n; p++)
		for (size_t c = 0; c < pl->v[p].nconns; c++) {
			fputs(first ? "\n" : ",\n", stdout);
			print_conn_json(&pl->v[p], &pl->v[p].conns[c]);
			first = false;
		}
	printf("%s]}\n", first ? "" : "\n");
}

enum {
	COL_PID,
	COL_PROG,
	COL_STATE,
	COL_MODE,
	COL_ROLE,
	COL_LOCAL,
	COL_PEER,
	COL_FALLBACK,
	COL_SENT,
	COL_RECV,
	COL_RMB,
	COL_LGR,
	COL_DEV,
	NCOLS
};

static const char *const col_titles[NCOLS] = {
    "PID",  "PROGRAM",	"STATE", "MODE",     "ROLE",	 "LOCAL",
    "PEER", "FALLBACK", "SENT",	 "RECEIVED", "RMB/PEER", "LGR",
    "DEVICE",
};

/* Numbers right-aligned, text left-aligned. */
static bool col_numeric(int col)
{
	return col == COL_PID || col == COL_SENT || col == COL_RECV;
}

/* Wide enough for any cell: an escaped program name is at most 64 characters. */
#define CELL_LEN 80
typedef char row_t[NCOLS][CELL_LEN];

static void conn_row(const struct process_view *pv, const struct smcr_stats_conn *r,
		     row_t row)
{
	snprintf(row[COL_PID], CELL_LEN, "%d", (int)pv->pid);
	snprintf(row[COL_PROG], CELL_LEN, "%s", pv->program);
	snprintf(row[COL_STATE], CELL_LEN, "%s",
		 r->state == SMCR_STATS_CONN_LIVE ? "live" : "closed");
	snprintf(row[COL_MODE], CELL_LEN, "%s", mode_name(r->mode));
	snprintf(row[COL_ROLE], CELL_LEN, "%s", r->role ? "server" : "client");
	endpoint_text(r->local_addr, r->local_port, row[COL_LOCAL], CELL_LEN);
	endpoint_text(r->peer_addr, r->peer_port, row[COL_PEER], CELL_LEN);
	if (mode_is_smc(r->mode))
		snprintf(row[COL_FALLBACK], CELL_LEN, "-");
	else
		snprintf(row[COL_FALLBACK], CELL_LEN, "%s(0x%08" PRIx32 ")",
			 reason_name(r->fallback_reason), r->fallback_reason);
	if (mode_is_smc(r->mode)) {
		snprintf(row[COL_SENT], CELL_LEN, "%" PRIu64, r->bytes_sent);
		snprintf(row[COL_RECV], CELL_LEN, "%" PRIu64, r->bytes_received);
		snprintf(row[COL_RMB], CELL_LEN, "%" PRIu32 "/%" PRIu32, r->rmb_size,
			 r->peer_rmb_size);
	} else { /* plain TCP: not counted by the library, no rings */
		snprintf(row[COL_SENT], CELL_LEN, "-");
		snprintf(row[COL_RECV], CELL_LEN, "-");
		snprintf(row[COL_RMB], CELL_LEN, "-");
	}
	if (r->link_group)
		snprintf(row[COL_LGR], CELL_LEN, "%08" PRIx32, r->link_group);
	else
		snprintf(row[COL_LGR], CELL_LEN, "-");
	if (!device_name(r, row[COL_DEV]))
		snprintf(row[COL_DEV], CELL_LEN, "-");
}

static void print_row(const char *const cells[NCOLS], const int width[NCOLS])
{
	for (int c = 0; c < NCOLS; c++) {
		bool last = c == NCOLS - 1;

		if (last)
			printf("%s\n", cells[c]);
		else if (col_numeric(c))
			printf("%*s  ", width[c], cells[c]);
		else
			printf("%-*s  ", width[c], cells[c]);
	}
}

static void show_table(const struct process_list *pl)
{
	size_t nrows = 0, r = 0;
	int width[NCOLS];
	const char *cells[NCOLS];
	row_t *rows;

	if (pl->n == 0) {
		puts("no smcr processes");
		return;
	}
	for (size_t p = 0; p < pl->n; p++)
		nrows += pl->v[p].nconns;
	rows = xcalloc(nrows, sizeof(*rows));
	for (size_t p = 0; p < pl->n; p++)
		for (size_t c = 0; c < pl->v[p].nconns; c++)
			conn_row(&pl->v[p], &pl->v[p].conns[c].rec, rows[r++]);
	for (int c = 0; c < NCOLS; c++) {
		width[c] = (int)strlen(col_titles[c]);
		for (r = 0; r < nrows; r++)
			if ((int)strlen(rows[r][c]) > width[c])
				width[c] = (int)strlen(rows[r][c]);
	}
	print_row(col_titles, width);
	for (r = 0; r < nrows; r++) {
		for (int c = 0; c < NCOLS; c++)
			cells[c] = rows[r][c];
		print_row(cells, width);
	}
	if (nrows == 0)
		printf("(no connections in %zu smcr process%s)\n", pl->n,
		       pl->n == 1 ? "" : "es");
	free(rows);
}

/* ---- stats: per-process counters -------------------------------------------------- */

/* Counters of one process, or of all of them added up (pid 0). */
struct counters {
	uint64_t handshakes_smc, fallbacks, handshake_errors, aborts, conns_open;
	uint64_t closed_bytes_sent, closed_bytes_received;
	uint64_t live_bytes_sent, live_bytes_received;
	uint64_t spins_won, spins_lost, waits_slept, wakeups_empty;
	uint64_t link_switches, bytes_resent;
	struct smcr_stats_reason reasons[SMCR_STATS_MAX_REASONS];
	unsigned nreasons;
};

static void add_reason(struct counters *c, uint32_t code, uint64_t count)
{
	if (!code || !count)
		return;
	for (unsigned i = 0; i < c->nreasons; i++)
		if (c->reasons[i].reason == code) {
			c->reasons[i].count += count;
			return;
		}
	if (c->nreasons < SMCR_STATS_MAX_REASONS)
		c->reasons[c->nreasons++] =
		    (struct smcr_stats_reason){.reason = code, .count = count};
}

static void add_counters(struct counters *c, const struct process_view *pv)
{
	const struct file_counters *f = &pv->counters;

	c->handshakes_smc += f->handshakes_smc;
	c->fallbacks += f->fallbacks;
	c->handshake_errors += f->handshake_errors;
	c->aborts += f->aborts;
	c->conns_open += f->conns_open;
	c->closed_bytes_sent += f->bytes_sent;
	c->closed_bytes_received += f->bytes_received;
	c->spins_won += f->spins_won;
	c->spins_lost += f->spins_lost;
	c->waits_slept += f->waits_slept;
	c->wakeups_empty += f->wakeups_empty;
	c->link_switches += f->link_switches;
	c->bytes_resent += f->bytes_resent;
	for (size_t i = 0; i < pv->nconns; i++)
		if (pv->conns[i].rec.state == SMCR_STATS_CONN_LIVE &&
		    mode_is_smc(pv->conns[i].rec.mode)) {
			c->live_bytes_sent += pv->conns[i].rec.bytes_sent;
			c->live_bytes_received += pv->conns[i].rec.bytes_received;
		}
	for (unsigned i = 0; i < SMCR_STATS_MAX_REASONS; i++)
		add_reason(c, f->reasons[i].reason, f->reasons[i].count);
}

static uint64_t handshakes(const struct counters *c)
{
	return c->handshakes_smc + c->fallbacks + c->handshake_errors;
}

static void counters_json(const struct counters *c)
{
	printf("\"handshakes\": %" PRIu64 ", \"handshakes_smc\": %" PRIu64
	       ", \"fallbacks\": %" PRIu64 ", \"handshake_errors\": %" PRIu64
	       ", \"aborts\": %" PRIu64 ", \"connections_open\": %" PRIu64 ",\n",
	       handshakes(c), c->handshakes_smc, c->fallbacks, c->handshake_errors,
	       c->aborts, c->conns_open);
	printf("     \"closed_bytes_sent\": %" PRIu64
	       ", \"closed_bytes_received\": %" PRIu64 ", \"live_bytes_sent\": %" PRIu64
	       ", \"live_bytes_received\": %" PRIu64 ",\n",
	       c->closed_bytes_sent, c->closed_bytes_received, c->live_bytes_sent,
	       c->live_bytes_received);
	printf("     \"spins_won\": %" PRIu64 ", \"spins_lost\": %" PRIu64
	       ", \"waits_slept\": %" PRIu64 ", \"wakeups_empty\": %" PRIu64 ",\n",
	       c->spins_won, c->spins_lost, c->waits_slept, c->wakeups_empty);
	printf("     \"link_switches\": %" PRIu64 ", \"bytes_resent\": %" PRIu64 ",\n",
	       c->link_switches, c->bytes_resent);
	printf("     \"fallback_reasons\": [");
	for (unsigned i = 0; i < c->nreasons; i++)
		printf("%s{\"code\": \"0x%08" PRIx32
		       "\", \"name\": \"%s\", \"count\": %" PRIu64 "}",
		       i ? ", " : "", c->reasons[i].reason,
		       reason_name(c->reasons[i].reason), c->reasons[i].count);
	printf("]");
}

/* ---- watch mode: what changed since the previous report --------------------------- */

struct previous {
	pid_t pid; /* 0: the total */
	struct counters c;
};

static struct {
	struct previous *was, *now;
	size_t nwas, nnow, cap;
	double seconds; /* since the previous report; 0: this is the first */
} watch;

/* Keep `c` of `pid` for the next report's differences. */
static void watch_note(pid_t pid, const struct counters *c)
{
	if (!smcr_stat_report)
		return;
	if (watch.nnow == watch.cap) {
		size_t cap = watch.cap ? watch.cap * 2 : 16;
		struct previous *now = realloc(watch.now, cap * sizeof(*now));
		struct previous *was = realloc(watch.was, cap * sizeof(*was));

		if (!now || !was) {
			warnx_("out of memory");
			exit(1);
		}
		watch.now = now;
		watch.was = was;
		watch.cap = cap;
	}
	watch.now[watch.nnow++] = (struct previous){.pid = pid, .c = *c};
}

/* This report's counters become the previous ones. */
static void watch_commit(void)
{
	struct previous *t = watch.was;

	watch.was = watch.now;
	watch.nwas = watch.nnow;
	watch.now = t;
	watch.nnow = 0;
	watch.seconds = 0; /* until the next report is read */
}

static const struct counters *watch_previous(pid_t pid)
{
	if (watch.seconds <= 0)
		return NULL;
	for (size_t i = 0; i < watch.nwas; i++)
		if (watch.was[i].pid == pid)
			return &watch.was[i].c;
	return NULL;
}

/* A counter's growth; a reset (or a reused pid) restarts it from zero. */
static uint64_t grew(uint64_t now, uint64_t was)
{
	return now >= was ? now - was : now;
}

struct growth {
	uint64_t handshakes, smc, fallbacks, errors, aborts, sent, received;
};

static struct growth growth_of(const struct counters *c, const struct counters *w)
{
	return (struct growth){
	    .handshakes = grew(handshakes(c), handshakes(w)),
	    .smc = grew(c->handshakes_smc, w->handshakes_smc),
	    .fallbacks = grew(c->fallbacks, w->fallbacks),
	    .errors = grew(c->handshake_errors, w->handshake_errors),
	    .aborts = grew(c->aborts, w->aborts),
	    .sent = grew(c->closed_bytes_sent + c->live_bytes_sent,
			 w->closed_bytes_sent + w->live_bytes_sent),
	    .received = grew(c->closed_bytes_received + c->live_bytes_received,
			     w->closed_bytes_received + w->live_bytes_received),
	};
}

/* ',\n     "interval": {...}': null on the first report and for a new process. */
static void growth_json(pid_t pid, const struct counters *c)
{
	const struct counters *w = watch_previous(pid);
	struct growth g;

	if (!smcr_stat_report)
		return;
	if (!w) {
		printf(",\n     \"interval\": null");
		return;
	}
	g = growth_of(c, w);
	printf(",\n     \"interval\": {\"seconds\": %.3f, \"handshakes\": %" PRIu64
	       ", \"handshakes_smc\": %" PRIu64 ", \"fallbacks\": %" PRIu64
	       ", \"handshake_errors\": %" PRIu64 ", \"aborts\": %" PRIu64 ",\n",
	       watch.seconds, g.handshakes, g.smc, g.fallbacks, g.errors, g.aborts);
	printf("      \"bytes_sent\": %" PRIu64 ", \"bytes_received\": %" PRIu64
	       ", \"bytes_sent_per_second\": %.0f, \"bytes_received_per_second\": %.0f}",
	       g.sent, g.received, (double)g.sent / watch.seconds,
	       (double)g.received / watch.seconds);
}

static void growth_text(pid_t pid, const struct counters *c)
{
	const struct counters *w = watch_previous(pid);
	struct growth g;

	if (!w)
		return;
	g = growth_of(c, w);
	printf("  Last %.1f s: %" PRIu64 " handshakes (%" PRIu64 " SMC, %" PRIu64
	       " fallback, %" PRIu64 " errors), %" PRIu64 " aborts\n",
	       watch.seconds, g.handshakes, g.smc, g.fallbacks, g.errors, g.aborts);
	printf("               sent %" PRIu64 " bytes (%.0f/s), received %" PRIu64
	       " bytes (%.0f/s)\n",
	       g.sent, (double)g.sent / watch.seconds, g.received,
	       (double)g.received / watch.seconds);
}

static void stats_json(const struct process_list *pl, bool reset)
{
	struct counters total = {0};

	json_head();
	printf("\"reset\": %s, \"processes\": [", reset ? "true" : "false");
	for (size_t p = 0; p < pl->n; p++) {
		struct counters c = {0};

		add_counters(&c, &pl->v[p]);
		add_counters(&total, &pl->v[p]);
		printf("%s    {\"pid\": %d, \"program\": ", p ? ",\n" : "\n",
		       (int)pl->v[p].pid);
		json_string(pl->v[p].program);
		printf(", \"uid\": %u,\n     ", (unsigned)pl->v[p].uid);
		counters_json(&c);
		growth_json(pl->v[p].pid, &c);
		watch_note(pl->v[p].pid, &c);
		printf("}");
	}
	printf("%s],\n  \"total\": {", pl->n ? "\n" : "");
	counters_json(&total);
	growth_json(0, &total);
	watch_note(0, &total);
	printf("}}\n");
}

static void counters_text(const struct counters *c)
{
	printf("  Handshakes          %12" PRIu64 "\n", handshakes(c));
	printf("    SMC               %12" PRIu64 "\n", c->handshakes_smc);
	printf("    fallback to TCP   %12" PRIu64 "\n", c->fallbacks);
	printf("    errors            %12" PRIu64 "\n", c->handshake_errors);
	printf("  Open SMC conns      %12" PRIu64 "\n", c->conns_open);
	printf("  Aborted SMC conns   %12" PRIu64 "\n", c->aborts);
	printf("  Bytes sent          %12" PRIu64 "  (closed %" PRIu64 ", live %" PRIu64
	       ")\n",
	       c->closed_bytes_sent + c->live_bytes_sent, c->closed_bytes_sent,
	       c->live_bytes_sent);
	printf("  Bytes received      %12" PRIu64 "  (closed %" PRIu64 ", live %" PRIu64
	       ")\n",
	       c->closed_bytes_received + c->live_bytes_received,
	       c->closed_bytes_received, c->live_bytes_received);
	printf("  Waits: spins won    %12" PRIu64 "\n", c->spins_won);
	printf("         spins lost   %12" PRIu64 "\n", c->spins_lost);
	printf("         slept        %12" PRIu64 "  (blocking send/recv)\n", c->waits_slept);
	printf("         woken empty  %12" PRIu64 "  (poll/select/epoll, nothing to report)\n",
	       c->wakeups_empty);
	printf("  Link switches       %12" PRIu64 "  (SMC-R failover; %" PRIu64 " bytes resent)\n",
	       c->link_switches, c->bytes_resent);
	if (c->nreasons)
		printf("  Fallback reasons\n");
	for (unsigned i = 0; i < c->nreasons; i++)
		printf("    0x%08" PRIx32 " %-12s %8" PRIu64 "\n", c->reasons[i].reason,
		       reason_name(c->reasons[i].reason), c->reasons[i].count);
}

static void stats_text(const struct process_list *pl, bool reset)
{
	struct counters total = {0};
	char user[64];

	if (pl->n == 0) {
		puts("no smcr processes");
		return;
	}
	for (size_t p = 0; p < pl->n; p++) {
		struct counters c = {0};

		add_counters(&c, &pl->v[p]);
		add_counters(&total, &pl->v[p]);
		printf("PID %d (%s), user %s%s\n", (int)pl->v[p].pid, pl->v[p].program,
		       user_name(pl->v[p].uid, user, sizeof(user)),
		       reset ? ": counters reset, values before" : "");
		counters_text(&c);
		growth_text(pl->v[p].pid, &c);
		watch_note(pl->v[p].pid, &c);
	}
	if (pl->n > 1) {
		printf("Total of %zu processes\n", pl->n);
		counters_text(&total);
		growth_text(0, &total);
	}
	watch_note(0, &total);
}

/* ---- command line ------------------------------------------------------------------ */

static void usage(FILE *to)
{
	fprintf(
	    to,
	    "Usage: %s [show|json|stats|reset|listeners|linkgroup|fallbacks] [OPTIONS]\n"
	    "List the SMC connections of running smcr processes (like smcss) or their\n"
	    "counters (like smcr stats).\n"
	    "\n"
	    "Commands:\n"
	    "  show         connections (default)\n"
	    "  json         connections as JSON (same as show --json)\n"
	    "  stats        per-process counters: handshakes, SMC vs fallback, reasons\n"
	    "  reset        print the counters, then set them to zero\n"
	    "  listeners    listening sockets and whether local clients propose SMC to them\n"
	    "  linkgroup    SMC-R link groups and their connections (like smcr linkgroup)\n"
	    "  fallbacks    fallbacks to TCP by reason, added up over the processes\n"
	    "\n"
	    "Options:\n"
	    "  -a, --all           also list closed connections still in the records\n"
	    "  -j, --json          JSON output\n"
	    "  -p, --pid PID       only process PID\n"
	    "  -c, --command NAME  only processes named NAME (their comm)\n"
	    "  -s, --stats         same as the stats command\n"
	    "  -l, --listeners     same as the listeners command\n"
	    "  -g, --linkgroup     same as the linkgroup command\n"
	    "  -i, --interval SEC  print again every SEC seconds (stats: with what changed)\n"
	    "  -n, --count N       stop after N reports (default with -i: until interrupted)\n"
	    "      --dir DIR       read only stats files in DIR (default: the runtime dir)\n"
	    "  -h, --help          this help\n"
	    "  -v, --version       print the version\n",
	    progname);
}

static bool parse_pid(const char *s, pid_t *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v <= 0 || v > INT_MAX)
		return false;
	*out = (pid_t)v;
	return true;
}

static bool parse_count(const char *s, unsigned *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v <= 0 || v > 86400 * 366)
		return false;
	*out = (unsigned)v;
	return true;
}

/* 0 = go on, else the exit status (+1). */
static int parse_args(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
	    {"all", no_argument, NULL, 'a'},	   {"json", no_argument, NULL, 'j'},
	    {"pid", required_argument, NULL, 'p'}, {"stats", no_argument, NULL, 's'},
	    {"dir", required_argument, NULL, 'D'}, {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'v'},   {"command", required_argument, NULL, 'c'},
	    {"listeners", no_argument, NULL, 'l'}, {"linkgroup", no_argument, NULL, 'g'},
	    {"interval", required_argument, NULL, 'i'}, {"count", required_argument, NULL, 'n'},
	    {NULL, 0, NULL, 0},
	};
	int c;

	while ((c = getopt_long(argc, argv, "ajp:shvc:lgi:n:", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			if (!*optarg) {
				warnx_("empty program name");
				return 3;
			}
			o->program = optarg;
			break;
		case 'l':
			o->cmd = CMD_LISTENERS;
			break;
		case 'g':
			o->cmd = CMD_LINKGROUPS;
			break;
		case 'i':
			if (!parse_count(optarg, &o->interval)) {
				warnx_("invalid interval '%s' (whole seconds, at least 1)", optarg);
				return 3;
			}
			break;
		case 'n':
			if (!parse_count(optarg, &o->count)) {
				warnx_("invalid count '%s'", optarg);
				return 3;
			}
			break;
		case 'a':
			o->all = true;
			break;
		case 'j':
			o->json = true;
			break;
		case 'p':
			if (!parse_pid(optarg, &o->pid)) {
				warnx_("invalid pid '%s'", optarg);
				return 3;
			}
			break;
		case 's':
			o->cmd = CMD_STATS;
			break;
		case 'D':
			o->dir = optarg;
			break;
		case 'h':
			usage(stdout);
			return 1;
		case 'v':
			printf("smcr-stat (smcr) %s\n", SMCR_VERSION_STRING);
			return 1;
		default:
			usage(stderr);
			return 3;
		}
	}
	if (optind < argc) {
		const char *cmd = argv[optind++];

		if (strcmp(cmd, "show") == 0) {
			o->cmd = CMD_SHOW;
		} else if (strcmp(cmd, "json") == 0) {
			o->cmd = CMD_SHOW;
			o->json = true;
		} else if (strcmp(cmd, "stats") == 0) {
			o->cmd = CMD_STATS;
		} else if (strcmp(cmd, "reset") == 0) {
			o->cmd = CMD_RESET;
		} else if (strcmp(cmd, "listeners") == 0) {
			o->cmd = CMD_LISTENERS;
		} else if (strcmp(cmd, "linkgroup") == 0 || strcmp(cmd, "linkgroups") == 0) {
			o->cmd = CMD_LINKGROUPS;
		} else if (strcmp(cmd, "fallbacks") == 0) {
			o->cmd = CMD_FALLBACKS;
		} else {
			warnx_("unknown command '%s'", cmd);
			usage(stderr);
			return 3;
		}
	}
	/* smc-tools style: `smcr-stat stats json` */
	if (optind < argc && o->cmd != CMD_SHOW && strcmp(argv[optind], "json") == 0) {
		o->json = true;
		optind++;
	}
	if (optind < argc) {
		warnx_("unexpected argument '%s'", argv[optind]);
		usage(stderr);
		return 3;
	}
	return 0;
}

/*
 * -c NAME: the kernel keeps 15 bytes of a program's name, so a longer NAME
 * matches a comm that is its first 15 bytes.
 */
static bool program_matches(const char *program, const char *want)
{
	size_t n = strlen(want);

	if (n >= 15)
		return strncmp(program, want, 15) == 0 && strlen(program) == 15;
	return strcmp(program, want) == 0;
}

static void free_view(struct process_view *pv)
{
	free(pv->conns);
	free(pv->listeners);
	free(pv->lgrs);
}

static void keep_program(struct process_list *pl, const char *want)
{
	size_t kept = 0;

	for (size_t i = 0; i < pl->n; i++) {
		if (program_matches(pl->v[i].program, want))
			pl->v[kept++] = pl->v[i];
		else
			free_view(&pl->v[i]);
	}
	pl->n = kept;
}

static void print_report(const struct options *o, const struct process_list *pl)
{
	switch (o->cmd) {
	case CMD_SHOW:
		o->json ? show_json(pl) : show_table(pl);
		break;
	case CMD_STATS:
	case CMD_RESET:
		o->json ? stats_json(pl, o->cmd == CMD_RESET) : stats_text(pl, o->cmd == CMD_RESET);
		break;
	case CMD_LISTENERS:
		o->json ? listeners_json(pl) : listeners_text(pl);
		break;
	case CMD_LINKGROUPS:
		o->json ? linkgroups_json(pl) : linkgroups_text(pl);
		break;
	case CMD_FALLBACKS:
		o->json ? fallbacks_json(pl) : fallbacks_text(pl);
		break;
	}
}

static double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Until `deadline` (CLOCK_MONOTONIC seconds): reports keep their pace whatever printing costs. */
static void sleep_until(double deadline)
{
	struct timespec ts = {.tv_sec = (time_t)deadline};

	ts.tv_nsec = (long)((deadline - (double)ts.tv_sec) * 1e9);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* One report: read every file, print the view. */
static bool report(const struct options *o)
{
	struct process_list pl = {0};

	read_all(o, &pl);
	if (o->program)
		keep_program(&pl, o->program);
	if (pl.n)
		qsort(pl.v, pl.n, sizeof(*pl.v), by_pid);
	if (smcr_stat_report && !o->json) {
		time_t t = time(NULL);
		char when[32];

		strftime(when, sizeof(when), "%H:%M:%S", localtime(&t));
		printf("%s-- report %u at %s\n", smcr_stat_report > 1 ? "\n" : "",
		       smcr_stat_report, when);
	}
	print_report(o, &pl);
	for (size_t i = 0; i < pl.n; i++)
		free_view(&pl.v[i]);
	free(pl.v);
	return fflush(stdout) == 0;
}

int main(int argc, char **argv)
{
	struct options o = {.cmd = CMD_SHOW};
	int rc = parse_args(argc, argv, &o);
	double next;

	if (rc)
		return rc - 1;
	/* Closed records are needed for nothing but --all; the counters views never list
	 * them. */
	if (o.cmd != CMD_SHOW)
		o.all = false;
	if (o.count && !o.interval)
		o.interval = 1;
	if (!o.interval)
		return report(&o) ? 0 : 1;
	next = now_seconds();
	for (smcr_stat_report = 1;; smcr_stat_report++) {
		double read_at = now_seconds();

		if (!report(&o))
			return 1;
		watch_commit();
		if (o.count && smcr_stat_report >= o.count)
			return 0;
		next += o.interval;
		sleep_until(next);
		watch.seconds = now_seconds() - read_at;
	}
}
