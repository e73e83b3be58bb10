// SPDX-License-Identifier: MIT
/*
 * smcr-stat: list the SMC connections and counters of every running smcr
 * process of the user (root: of every user), in the spirit of smc-tools'
 * smcss and `smcr stats show|reset|json`.  See docs/smcr-stat.8.
 *
 * This file: the connection list and the command line; the files are read
 * by smcr_stat_read.c, the counters and watch mode are smcr_stat_counters.c's,
 * the other views are in smcr_stat_views.c.
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

const char *user_name(uid_t uid, char *buf, size_t len)
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
		stats_report(pl, o->cmd == CMD_RESET, o->json);
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
		watch_interval(now_seconds() - read_at);
	}
}
