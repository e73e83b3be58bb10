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
	case SMCR_STATS_LISTENER_NOT_SERVED:
		return "not-served";
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
	case SMCR_STATS_LISTENER_NOT_SERVED:
		snprintf(out, len, "%s", l->why[0] ? l->why : "not served");
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
	printf("%7s  %-16s  %4s  %-24s  %-10s  %s\n", "PID", "PROGRAM", "FD", "LISTEN",
	       "STATUS", "WHY NOT SERVED");
	for (size_t p = 0; p < pl->n; p++)
		for (size_t i = 0; i < pl->v[p].nlisteners; i++, n++) {
			const struct smcr_stats_listener *l = &pl->v[p].listeners[i];
			char where[INET6_ADDRSTRLEN + 10], why[128];

			endpoint_text(l->addr, l->port, where, sizeof(where));
			listener_reason(l, why, sizeof(why));
			printf("%7d  %-16s  %4" PRId32 "  %-24s  %-10s  %s\n", (int)pl->v[p].pid,
			       pl->v[p].program, l->fd, where, listener_status_name(l->status),
			       why[0] ? why : "-");
		}
	if (n == 0)
		printf("(no listeners in %zu smcr process%s)\n", pl->n, pl->n == 1 ? "" : "es");
}

/* ---- link groups (SMC-R) -------------------------------------------------------------- */

#define GROUP_MAX_PEERS 4
#define GROUP_MAX_DEVICES 2 /* a group has at most two links */

/*
 * A group as its own record says (files with the link group table) and as
 * its live connection records add up; either may be missing.
 */
struct group {
	const struct process_view *pv;
	const struct smcr_stats_lgr *rec;
	uint32_t id;
	uint32_t role; /* of its record, else of its first connection */
	bool mixed_roles;
	unsigned conns; /* live connection records */
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

static void group_peer(struct group *g, const uint8_t addr[16])
{
	unsigned i;

	for (i = 0; i < g->npeers && memcmp(g->peers[i].addr, addr, 16); i++)
		;
	if (i == g->npeers && g->npeers < GROUP_MAX_PEERS)
		memcpy(g->peers[g->npeers++].addr, addr, 16);
}

static void group_device(struct group *g, const char *dev)
{
	unsigned i;

	for (i = 0; i < g->ndevices && strcmp(g->devices[i], dev); i++)
		;
	if (i == g->ndevices && g->ndevices < GROUP_MAX_DEVICES)
		snprintf(g->devices[g->ndevices++], sizeof(g->devices[0]), "%s", dev);
}

static void group_add(struct group *g, const struct smcr_stats_conn *r)
{
	char dev[sizeof(r->device) + 1];

	g->conns++;
	g->mixed_roles |= r->role != g->role;
	g->bytes_sent += r->bytes_sent;
	g->bytes_received += r->bytes_received;
	group_peer(g, r->peer_addr);
	if (device_name(r, dev))
		group_device(g, dev);
}

/* A link's device name, sanitized as a connection's (the file is another process's). */
static bool link_device(const struct smcr_stats_link *l, char *out)
{
	struct smcr_stats_conn r;

	memcpy(r.device, l->device, sizeof(r.device));
	return device_name(&r, out);
}

static void group_record(struct group *g, const struct smcr_stats_lgr *rec)
{
	char dev[sizeof(rec->links[0].device) + 1];

	g->rec = rec;
	group_peer(g, rec->peer_addr);
	for (unsigned k = 0; k < 2; k++)
		if (rec->links[k].state != SMCR_STATS_LINK_NONE && link_device(&rec->links[k], dev))
			group_device(g, dev);
}

/* Every group of every process, in process order: the count in *n. */
static struct group *gather_groups(const struct process_list *pl, size_t *n)
{
	size_t cap = 0;
	struct group *g;

	for (size_t p = 0; p < pl->n; p++)
		cap += pl->v[p].nconns + pl->v[p].nlgrs;
	g = xcalloc(cap, sizeof(*g));
	*n = 0;
	for (size_t p = 0; p < pl->n; p++) {
		for (size_t k = 0; k < pl->v[p].nlgrs; k++) {
			const struct smcr_stats_lgr *rec = &pl->v[p].lgrs[k];

			group_record(group_of(g, n, &pl->v[p], rec->id, rec->role), rec);
		}
		for (size_t c = 0; c < pl->v[p].nconns; c++) {
			const struct smcr_stats_conn *r = &pl->v[p].conns[c].rec;

			if (r->state != SMCR_STATS_CONN_LIVE || r->mode != SMCR_STATS_MODE_SMC_R ||
			    !r->link_group)
				continue;
			group_add(group_of(g, n, &pl->v[p], r->link_group, r->role), r);
		}
	}
	return g;
}

static const char *group_role(const struct group *g)
{
	if (g->mixed_roles)
		return "mixed";
	return g->role ? "server" : "client";
}

static const char *lgr_state_name(uint8_t state)
{
	switch (state) {
	case SMCR_STATS_LGR_PENDING:
		return "pending";
	case SMCR_STATS_LGR_ACTIVE:
		return "active";
	case SMCR_STATS_LGR_DEAD:
		return "dead";
	}
	return "unknown";
}

static const char *link_state_name(uint8_t state)
{
	switch (state) {
	case SMCR_STATS_LINK_NONE:
		return "none";
	case SMCR_STATS_LINK_ADDING:
		return "adding";
	case SMCR_STATS_LINK_PENDING:
		return "pending";
	case SMCR_STATS_LINK_UP:
		return "up";
	case SMCR_STATS_LINK_DOWN:
		return "down";
	}
	return "unknown";
}

/* Connections: as the group's record counts them, else its live connection records. */
static unsigned group_conns(const struct group *g)
{
	return g->rec ? g->rec->conns : g->conns;
}

static void link_json(const struct smcr_stats_link *l)
{
	char dev[sizeof(l->device) + 1], gid[INET6_ADDRSTRLEN], peer[INET6_ADDRSTRLEN];

	if (!link_device(l, dev))
		dev[0] = '\0';
	addr_text(l->gid, gid, sizeof(gid));
	addr_text(l->peer_gid, peer, sizeof(peer));
	printf("{\"link_id\": %u, \"state\": \"%s\", \"device\": \"%s\", \"port\": %u, "
	       "\"qp\": %" PRIu32 ", \"peer_qp\": %" PRIu32 ", \"connections\": %" PRIu32
	       ", \"gid\": \"%s\", \"peer_gid\": \"%s\"}",
	       l->link_id, link_state_name(l->state), dev, l->port, l->qpn, l->peer_qpn, l->conns,
	       gid, peer);
}

static void group_json(const struct group *g)
{
	char ip[INET6_ADDRSTRLEN];

	printf("    {\"pid\": %d, \"program\": ", (int)g->pv->pid);
	json_string(g->pv->program);
	printf(", \"id\": %" PRIu32 ", \"id_hex\": \"%08" PRIx32 "\", \"role\": \"%s\", "
	       "\"connections\": %u,\n     \"peers\": [",
	       g->id, g->id, group_role(g), group_conns(g));
	for (unsigned k = 0; k < g->npeers; k++) {
		addr_text(g->peers[k].addr, ip, sizeof(ip));
		printf("%s\"%s\"", k ? ", " : "", ip);
	}
	printf("], \"devices\": [");
	for (unsigned k = 0; k < g->ndevices; k++)
		printf("%s\"%s\"", k ? ", " : "", g->devices[k]);
	printf("], \"bytes_sent\": %" PRIu64 ", \"bytes_received\": %" PRIu64 ",\n     ",
	       g->bytes_sent, g->bytes_received);
	if (!g->rec) { /* a file without the table: what its connections tell */
		printf("\"state\": null, \"max_links\": null, \"rmb_rescues\": null, "
		       "\"peer_id\": null, \"links\": null}");
		return;
	}
	printf("\"state\": \"%s\", \"max_links\": %u, \"rmb_rescues\": %" PRIu64
	       ", \"peer_id\": \"",
	       lgr_state_name(g->rec->lgr_state), g->rec->max_links, g->rec->rmb_rescues);
	for (unsigned k = 0; k < sizeof(g->rec->peer_id); k++)
		printf("%02x", g->rec->peer_id[k]);
	printf("\", \"links\": [");
	for (unsigned k = 0, first = 1; k < 2; k++) {
		if (g->rec->links[k].state == SMCR_STATS_LINK_NONE)
			continue;
		printf("%s\n      ", first ? "" : ",");
		link_json(&g->rec->links[k]);
		first = 0;
	}
	printf("]}");
}

void linkgroups_json(const struct process_list *pl)
{
	size_t n;
	struct group *g = gather_groups(pl, &n);

	json_head();
	printf("\"process_count\": %zu, \"link_groups\": [", pl->n);
	for (size_t i = 0; i < n; i++) {
		fputs(i ? ",\n" : "\n", stdout);
		group_json(&g[i]);
	}
	printf("%s]}\n", n ? "\n" : "");
	free(g);
}

static void link_text(const struct smcr_stats_link *l)
{
	char dev[sizeof(l->device) + 1], gid[INET6_ADDRSTRLEN], peer[INET6_ADDRSTRLEN];

	if (!link_device(l, dev))
		snprintf(dev, sizeof(dev), "-");
	addr_text(l->gid, gid, sizeof(gid));
	addr_text(l->peer_gid, peer, sizeof(peer));
	printf("         link %-3u %-8s %s/%u  QP %" PRIu32 " -> %" PRIu32 "  conns %" PRIu32
	       "  %s -> %s\n",
	       l->link_id, link_state_name(l->state), dev, l->port, l->qpn, l->peer_qpn, l->conns,
	       gid, peer);
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
	printf("%7s  %-16s  %-8s  %-6s  %-7s  %5s  %-20s  %s\n", "PID", "PROGRAM", "LGR-ID", "ROLE",
	       "STATE", "CONNS", "DEVICES", "PEERS");
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
		printf("%7d  %-16s  %08" PRIx32 "  %-6s  %-7s  %5u  %-20s  %s\n", (int)g[i].pv->pid,
		       g[i].pv->program, g[i].id, group_role(&g[i]),
		       g[i].rec ? lgr_state_name(g[i].rec->lgr_state) : "-", group_conns(&g[i]),
		       devices[0] ? devices : "-", peers);
		for (unsigned k = 0; g[i].rec && k < 2; k++)
			if (g[i].rec->links[k].state != SMCR_STATS_LINK_NONE)
				link_text(&g[i].rec->links[k]);
		if (g[i].rec && g[i].rec->rmb_rescues)
			printf("         rmb rescues %" PRIu64 "  (unread bytes held aside for a peer"
			       " silent after a failover)\n",
			       g[i].rec->rmb_rescues);
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
