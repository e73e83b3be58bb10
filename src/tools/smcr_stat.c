// SPDX-License-Identifier: MIT
/*
 * smcr-stat: list the SMC connections and counters of every running smcr
 * process of the user (root: of every user), in the spirit of smc-tools'
 * smcss and `smcr stats show|reset|json`.  See docs/smcr-stat.8.
 *
 * This file: the connection list, the counters, watch mode and the command
 * line; the files are read by smcr_stat_read.c, the other views are in
 * smcr_stat_views.c.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "smcr/decline.h"
#include "smcr/stats_abi.h"

#ifndef SMCR_VERSION_STRING
#define SMCR_VERSION_STRING "unknown"
#endif

#include "smcr_stat.h"

static const char *progname = "smcr-stat";

void warnx_(const char *fmt, ...)
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
		[SMCR_STATS_PHASE_ON_TCP] = "on-tcp",
	};

	return phase < sizeof(names) / sizeof(names[0]) ? names[phase] : NULL;
}

bool mode_is_smc(uint32_t mode)
{
	return mode == SMCR_STATS_MODE_SMC_SHM || mode == SMCR_STATS_MODE_SMC_R;
}

/*
 * An SMC connection whose stream went on over TCP keeps its mode and gains a
 * reason; one that reads as reset in a forked process keeps its mode and says
 * why (FORKRESET) without having gone anywhere.
 */
static bool went_tcp(const struct smcr_stats_conn *r)
{
	return mode_is_smc(r->mode) && r->fallback_reason != 0 &&
	       r->fallback_reason != SMCR_CLC_DECL_FORKRESET;
}

/* Whether its FALLBACK column names a reason. */
static bool has_reason(const struct smcr_stats_conn *r)
{
	return !mode_is_smc(r->mode) || r->fallback_reason != 0;
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
	if (r->local_port)
		printf("\"local_address\": \"%s\", \"local_port\": %u, ", ip, r->local_port);
	else
		printf("\"local_address\": null, \"local_port\": null, ");
	addr_text(r->peer_addr, ip, sizeof(ip));
	printf("\"peer_address\": \"%s\", \"peer_port\": %u,\n", ip, r->peer_port);
	if (!has_reason(r))
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
	snprintf(row[COL_MODE], CELL_LEN, "%s%s", mode_name(r->mode), went_tcp(r) ? ">tcp" : "");
	snprintf(row[COL_ROLE], CELL_LEN, "%s", r->role ? "server" : "client");
	if (r->local_port) /* 0: not known (a client kept on TCP before its connect) */
		endpoint_text(r->local_addr, r->local_port, row[COL_LOCAL], CELL_LEN);
	else
		snprintf(row[COL_LOCAL], CELL_LEN, "-");
	endpoint_text(r->peer_addr, r->peer_port, row[COL_PEER], CELL_LEN);
	if (!has_reason(r))
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

static bool stats_json_head(const struct process_list *pl, bool reset)
{
	(void)pl;
	json_head();
	printf("\"reset\": %s, \"processes\": [", reset ? "true" : "false");
	return true;
}

static void stats_json_process(const struct process_view *pv, size_t index, bool reset,
			       const struct counters *c)
{
	(void)reset;
	printf("%s    {\"pid\": %d, \"program\": ", index ? ",\n" : "\n", (int)pv->pid);
	json_string(pv->program);
	printf(", \"uid\": %u,\n     ", (unsigned)pv->uid);
	counters_json(c);
	growth_json(pv->pid, c);
	printf("}");
}

static void stats_json_total(const struct process_list *pl, const struct counters *total)
{
	printf("%s],\n  \"total\": {", pl->n ? "\n" : "");
	counters_json(total);
	growth_json(0, total);
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

static bool stats_text_head(const struct process_list *pl, bool reset)
{
	(void)reset;
	if (pl->n == 0) {
		puts("no smcr processes");
		return false;
	}
	return true;
}

static void stats_text_process(const struct process_view *pv, size_t index, bool reset,
			       const struct counters *c)
{
	char user[64];

	(void)index;
	printf("PID %d (%s), user %s%s\n", (int)pv->pid, pv->program,
	       user_name(pv->uid, user, sizeof(user)),
	       reset ? ": counters reset, values before" : "");
	counters_text(c);
	growth_text(pv->pid, c);
}

static void stats_text_total(const struct process_list *pl, const struct counters *total)
{
	if (pl->n > 1) {
		printf("Total of %zu processes\n", pl->n);
		counters_text(total);
		growth_text(0, total);
	}
}

/*
 * The counters report in one output form: what comes before the processes
 * (false: nothing to report, not even a total to keep for the next report),
 * each process with its counters, then the total.
 */
struct stats_format {
	bool (*head)(const struct process_list *pl, bool reset);
	void (*process)(const struct process_view *pv, size_t index, bool reset,
			const struct counters *c);
	void (*total)(const struct process_list *pl, const struct counters *total);
};

static const struct stats_format stats_json = {
    .head = stats_json_head, .process = stats_json_process, .total = stats_json_total};
static const struct stats_format stats_text = {
    .head = stats_text_head, .process = stats_text_process, .total = stats_text_total};

/* Every process's counters and their total, kept for the next report's growth. */
static void stats_report(const struct process_list *pl, bool reset, const struct stats_format *f)
{
	struct counters total = {0};

	if (!f->head(pl, reset))
		return;
	for (size_t p = 0; p < pl->n; p++) {
		struct counters c = {0};

		add_counters(&c, &pl->v[p]);
		add_counters(&total, &pl->v[p]);
		f->process(&pl->v[p], p, reset, &c);
		watch_note(pl->v[p].pid, &c);
	}
	f->total(pl, &total);
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
/* One option getopt found: 0 to go on, else what parse_args returns. */
static int parse_option(int c, struct options *o)
{
	switch (c) {
	case 'c':
		if (!*optarg) {
			warnx_("empty program name");
			return 3;
		}
		o->program = optarg;
		return 0;
	case 'l':
		o->cmd = CMD_LISTENERS;
		return 0;
	case 'g':
		o->cmd = CMD_LINKGROUPS;
		return 0;
	case 'i':
		if (!parse_count(optarg, &o->interval)) {
			warnx_("invalid interval '%s' (whole seconds, at least 1)", optarg);
			return 3;
		}
		return 0;
	case 'n':
		if (!parse_count(optarg, &o->count)) {
			warnx_("invalid count '%s'", optarg);
			return 3;
		}
		return 0;
	case 'a':
		o->all = true;
		return 0;
	case 'j':
		o->json = true;
		return 0;
	case 'p':
		if (!parse_pid(optarg, &o->pid)) {
			warnx_("invalid pid '%s'", optarg);
			return 3;
		}
		return 0;
	case 's':
		o->cmd = CMD_STATS;
		return 0;
	case 'D':
		o->dir = optarg;
		return 0;
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

/* The command words (smc-tools' spellings too). */
static const struct {
	const char *word;
	enum command cmd;
	bool json;
} command_words[] = {
	{ "show", CMD_SHOW, false },          { "json", CMD_SHOW, true },
	{ "stats", CMD_STATS, false },        { "reset", CMD_RESET, false },
	{ "listeners", CMD_LISTENERS, false }, { "linkgroup", CMD_LINKGROUPS, false },
	{ "linkgroups", CMD_LINKGROUPS, false }, { "fallbacks", CMD_FALLBACKS, false },
};

/* A command word: false if there is none such. */
static bool parse_command(const char *word, struct options *o)
{
	for (size_t i = 0; i < sizeof(command_words) / sizeof(command_words[0]); i++) {
		if (strcmp(word, command_words[i].word) == 0) {
			o->cmd = command_words[i].cmd;
			o->json |= command_words[i].json;
			return true;
		}
	}
	return false;
}

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
	int c, rc;

	while ((c = getopt_long(argc, argv, "ajp:shvc:lgi:n:", longopts, NULL)) != -1) {
		rc = parse_option(c, o);
		if (rc)
			return rc;
	}
	if (optind < argc) {
		if (!parse_command(argv[optind], o)) {
			warnx_("unknown command '%s'", argv[optind]);
			usage(stderr);
			return 3;
		}
		optind++;
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
		stats_report(pl, o->cmd == CMD_RESET, o->json ? &stats_json : &stats_text);
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
