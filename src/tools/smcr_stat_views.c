// SPDX-License-Identifier: MIT
/*
 * smcr-stat's views beside the connection list and the counters: listening
 * sockets, SMC-R link groups, fallback reasons added up over the processes.
 * Each reads only the process list smcr_stat.c copied out of the files.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "smcr_stat.h"

/* ---- listeners --------------------------------------------------------------------- */

static const char *listener_status_name(uint32_t status)
{
	switch (status) {
	case SMCR_STATS_LISTENER_SERVED:
		return "served";
	case SMCR_STATS_LISTENER_NAME_HELD:
		return "name-held";
	case SMCR_STATS_LISTENER_REVOKED:
		return "revoked";
	case SMCR_STATS_LISTENER_NO_NAME:
		return "no-name";
	}
	return "unknown";
}

/* Why local clients do not propose SMC to it (or decline it), "" when they do. */
static void listener_reason(const struct smcr_stats_listener *l, char *out, size_t len)
{
	const char *samehost = (l->flags & SMCR_STATS_LISTENER_F_SAMEHOST_OFF)
				       ? "same-host proposals declined (SMCR_SAMEHOST=0)"
				       : "";

	switch (l->status) {
	case SMCR_STATS_LISTENER_SERVED:
		snprintf(out, len, "%s", samehost);
		break;
	case SMCR_STATS_LISTENER_NAME_HELD:
		snprintf(out, len, "registry name held by another process%s%s",
			 *samehost ? "; " : "", samehost);
		break;
	case SMCR_STATS_LISTENER_REVOKED:
		snprintf(out, len, "%s", l->why[0] ? l->why : "revoked");
		break;
	case SMCR_STATS_LISTENER_NO_NAME:
		snprintf(out, len, "no registry name: out of fds or memory (retried when it accepts)%s%s",
			 *samehost ? "; " : "", samehost);
		break;
	default:
		snprintf(out, len, "status %u", (unsigned)l->status);
	}
	/* The text is another process's: nothing but printable ASCII. */
	for (char *p = out; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
			*p = '?';
}

void listeners_json(const struct process_list *pl)
{
	bool first = true;

	json_head();
	printf("\"process_count\": %zu, \"listeners\": [", pl->n);
	for (size_t p = 0; p < pl->n; p++)
		for (size_t i = 0; i < pl->v[p].nlisteners; i++) {
			const struct smcr_stats_listener *l = &pl->v[p].listeners[i];
			char ip[INET6_ADDRSTRLEN], why[128];

			addr_text(l->addr, ip, sizeof(ip));
			listener_reason(l, why, sizeof(why));
			printf("%s    {\"pid\": %d, \"program\": ", first ? "\n" : ",\n",
			       (int)pl->v[p].pid);
			json_string(pl->v[p].program);
			printf(", \"uid\": %u, \"fd\": %" PRId32 ", \"address\": \"%s\", "
			       "\"port\": %u,\n     \"status\": \"%s\", \"registered\": %s, "
			       "\"samehost\": %s, \"reason\": ",
			       (unsigned)pl->v[p].uid, l->fd, ip, l->port,
			       listener_status_name(l->status),
			       l->status == SMCR_STATS_LISTENER_SERVED ? "true" : "false",
			       (l->flags & SMCR_STATS_LISTENER_F_SAMEHOST_OFF) ? "false" : "true");
			if (why[0])
				json_string(why);
			else
				printf("null");
			printf("}");
			first = false;
		}
	printf("%s]}\n", first ? "" : "\n");
}

void listeners_text(const struct process_list *pl)
{
	size_t n = 0;

	if (pl->n == 0) {
		puts("no smcr processes");
		return;
	}
	printf("%7s  %-16s  %4s  %-24s  %-9s  %s\n", "PID", "PROGRAM", "FD", "LISTEN",
	       "STATUS", "WHY NOT SERVED");
	for (size_t p = 0; p < pl->n; p++)
		for (size_t i = 0; i < pl->v[p].nlisteners; i++, n++) {
			const struct smcr_stats_listener *l = &pl->v[p].listeners[i];
			char where[INET6_ADDRSTRLEN + 10], why[128];

			endpoint_text(l->addr, l->port, where, sizeof(where));
			listener_reason(l, why, sizeof(why));
			printf("%7d  %-16s  %4" PRId32 "  %-24s  %-9s  %s\n", (int)pl->v[p].pid,
			       pl->v[p].program, l->fd, where, listener_status_name(l->status),
			       why[0] ? why : "-");
		}
	if (n == 0)
		printf("(no listeners in %zu smcr process%s)\n", pl->n, pl->n == 1 ? "" : "es");
}

/* ---- link groups (SMC-R): gathered from the connection records ------------------- */

#define GROUP_MAX_PEERS 4
#define GROUP_MAX_DEVICES 2 /* a group has at most two links */

struct group {
	const struct process_view *pv;
	uint32_t id;
	uint32_t role; /* of its first connection; every one of a group has the same */
	bool mixed_roles;
	unsigned conns;
	uint64_t bytes_sent, bytes_received;
	struct {
		uint8_t addr[16];
	} peers[GROUP_MAX_PEERS];
	unsigned npeers;
	char devices[GROUP_MAX_DEVICES][17];
	unsigned ndevices;
};

static struct group *group_of(struct group *g, size_t *n, const struct process_view *pv,
			      uint32_t id, uint32_t role)
{
	for (size_t i = 0; i < *n; i++)
		if (g[i].pv == pv && g[i].id == id)
			return &g[i];
	g[*n] = (struct group){.pv = pv, .id = id, .role = role};
	return &g[(*n)++];
}

static void group_add(struct group *g, const struct smcr_stats_conn *r)
{
	char dev[sizeof(r->device) + 1];
	unsigned i;

	g->conns++;
	g->mixed_roles |= r->role != g->role;
	g->bytes_sent += r->bytes_sent;
	g->bytes_received += r->bytes_received;
	for (i = 0; i < g->npeers && memcmp(g->peers[i].addr, r->peer_addr, 16); i++)
		;
	if (i == g->npeers && g->npeers < GROUP_MAX_PEERS)
		memcpy(g->peers[g->npeers++].addr, r->peer_addr, 16);
	if (!device_name(r, dev))
		return;
	for (i = 0; i < g->ndevices && strcmp(g->devices[i], dev); i++)
		;
	if (i == g->ndevices && g->ndevices < GROUP_MAX_DEVICES)
		strcpy(g->devices[g->ndevices++], dev);
}

/* Every live SMC-R connection's group, in process order: the count in *n. */
static struct group *gather_groups(const struct process_list *pl, size_t *n)
{
	size_t cap = 0;
	struct group *g;

	for (size_t p = 0; p < pl->n; p++)
		cap += pl->v[p].nconns;
	g = xcalloc(cap, sizeof(*g));
	*n = 0;
	for (size_t p = 0; p < pl->n; p++)
		for (size_t c = 0; c < pl->v[p].nconns; c++) {
			const struct smcr_stats_conn *r = &pl->v[p].conns[c].rec;

			if (r->state != SMCR_STATS_CONN_LIVE || r->mode != SMCR_STATS_MODE_SMC_R ||
			    !r->link_group)
				continue;
			group_add(group_of(g, n, &pl->v[p], r->link_group, r->role), r);
		}
	return g;
}

static const char *group_role(const struct group *g)
{
	if (g->mixed_roles)
		return "mixed";
	return g->role ? "server" : "client";
}

void linkgroups_json(const struct process_list *pl)
{
	size_t n;
	struct group *g = gather_groups(pl, &n);

	json_head();
	printf("\"process_count\": %zu, \"link_groups\": [", pl->n);
	for (size_t i = 0; i < n; i++) {
		char ip[INET6_ADDRSTRLEN];

		printf("%s    {\"pid\": %d, \"program\": ", i ? ",\n" : "\n", (int)g[i].pv->pid);
		json_string(g[i].pv->program);
		printf(", \"id\": %" PRIu32 ", \"id_hex\": \"%08" PRIx32 "\", \"role\": \"%s\", "
		       "\"connections\": %u,\n     \"peers\": [",
		       g[i].id, g[i].id, group_role(&g[i]), g[i].conns);
		for (unsigned k = 0; k < g[i].npeers; k++) {
			addr_text(g[i].peers[k].addr, ip, sizeof(ip));
			printf("%s\"%s\"", k ? ", " : "", ip);
		}
		printf("], \"devices\": [");
		for (unsigned k = 0; k < g[i].ndevices; k++)
			printf("%s\"%s\"", k ? ", " : "", g[i].devices[k]);
		printf("], \"bytes_sent\": %" PRIu64 ", \"bytes_received\": %" PRIu64 "}",
		       g[i].bytes_sent, g[i].bytes_received);
	}
	printf("%s]}\n", n ? "\n" : "");
	free(g);
}

void linkgroups_text(const struct process_list *pl)
{
	size_t n;
	struct group *g;

	if (pl->n == 0) {
		puts("no smcr processes");
		return;
	}
	g = gather_groups(pl, &n);
	printf("%7s  %-16s  %-8s  %-6s  %5s  %-20s  %s\n", "PID", "PROGRAM", "LGR-ID", "ROLE",
	       "CONNS", "DEVICES", "PEERS");
	for (size_t i = 0; i < n; i++) {
		char devices[40] = "", peers[4 * (INET6_ADDRSTRLEN + 1)] = "";

		for (unsigned k = 0; k < g[i].ndevices; k++)
			snprintf(devices + strlen(devices), sizeof(devices) - strlen(devices),
				 "%s%s", k ? "," : "", g[i].devices[k]);
		for (unsigned k = 0; k < g[i].npeers; k++) {
			char ip[INET6_ADDRSTRLEN];

			addr_text(g[i].peers[k].addr, ip, sizeof(ip));
			snprintf(peers + strlen(peers), sizeof(peers) - strlen(peers), "%s%s",
				 k ? "," : "", ip);
		}
		printf("%7d  %-16s  %08" PRIx32 "  %-6s  %5u  %-20s  %s\n", (int)g[i].pv->pid,
		       g[i].pv->program, g[i].id, group_role(&g[i]), g[i].conns,
		       devices[0] ? devices : "-", peers);
	}
	if (n == 0)
		printf("(no SMC-R link groups in %zu smcr process%s)\n", pl->n,
		       pl->n == 1 ? "" : "es");
	free(g);
}

/* ---- fallback reasons over every process ------------------------------------------- */

struct reason_total {
	uint32_t code;
	uint64_t count;
	unsigned processes;
};

/* The reasons of every process added up, most frequent first: the count in *n. */
static struct reason_total *gather_reasons(const struct process_list *pl, size_t *n,
					   uint64_t *fallbacks, uint64_t *errors)
{
	struct reason_total *t = xcalloc(pl->n * SMCR_STATS_MAX_REASONS, sizeof(*t));

	*n = 0;
	*fallbacks = *errors = 0;
	for (size_t p = 0; p < pl->n; p++) {
		const struct file_counters *f = &pl->v[p].counters;

		*fallbacks += f->fallbacks;
		*errors += f->handshake_errors;
		for (unsigned i = 0; i < SMCR_STATS_MAX_REASONS; i++) {
			size_t k;

			if (!f->reasons[i].reason || !f->reasons[i].count)
				continue;
			for (k = 0; k < *n && t[k].code != f->reasons[i].reason; k++)
				;
			if (k == *n)
				t[(*n)++].code = f->reasons[i].reason;
			t[k].count += f->reasons[i].count;
			t[k].processes++;
		}
	}
	for (size_t i = 1; i < *n; i++) /* few entries: insertion sort */
		for (size_t k = i; k > 0 && t[k].count > t[k - 1].count; k--) {
			struct reason_total x = t[k];

			t[k] = t[k - 1];
			t[k - 1] = x;
		}
	return t;
}

void fallbacks_json(const struct process_list *pl)
{
	uint64_t fallbacks, errors;
	size_t n;
	struct reason_total *t = gather_reasons(pl, &n, &fallbacks, &errors);

	json_head();
	printf("\"process_count\": %zu, \"fallbacks\": %" PRIu64 ", \"handshake_errors\": %" PRIu64
	       ", \"reasons\": [",
	       pl->n, fallbacks, errors);
	for (size_t i = 0; i < n; i++)
		printf("%s\n    {\"code\": \"0x%08" PRIx32 "\", \"name\": \"%s\", \"count\": %" PRIu64
		       ", \"processes\": %u}",
		       i ? "," : "", t[i].code, reason_name(t[i].code), t[i].count,
		       t[i].processes);
	printf("%s]}\n", n ? "\n" : "");
	free(t);
}

void fallbacks_text(const struct process_list *pl)
{
	uint64_t fallbacks, errors;
	size_t n;
	struct reason_total *t;

	if (pl->n == 0) {
		puts("no smcr processes");
		return;
	}
	t = gather_reasons(pl, &n, &fallbacks, &errors);
	printf("Fallbacks to TCP %12" PRIu64 "  (%zu process%s)\n", fallbacks, pl->n,
	       pl->n == 1 ? "" : "es");
	printf("Handshake errors %12" PRIu64 "\n", errors);
	if (n)
		printf("%-10s  %-16s  %10s  %9s\n", "CODE", "REASON", "COUNT", "PROCESSES");
	for (size_t i = 0; i < n; i++)
		printf("0x%08" PRIx32 "  %-16s  %10" PRIu64 "  %9u\n", t[i].code,
		       reason_name(t[i].code), t[i].count, t[i].processes);
	free(t);
}
