// SPDX-License-Identifier: MIT
/*
 * smcr-stat's `stats` and `reset` commands: every process's counters and
 * their total, as JSON or text, and in watch mode (-i) what grew since the
 * previous report.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "smcr/stats_abi.h"

#include "smcr_stat.h"

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

void watch_commit(void)
{
	struct previous *t = watch.was;

	watch.was = watch.now;
	watch.nwas = watch.nnow;
	watch.now = t;
	watch.nnow = 0;
	watch.seconds = 0; /* until the next report is read */
}

void watch_interval(double seconds)
{
	watch.seconds = seconds;
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

void stats_report(const struct process_list *pl, bool reset, bool json)
{
	const struct stats_format *f = json ? &stats_json : &stats_text;
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
