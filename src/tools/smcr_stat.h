/* SPDX-License-Identifier: MIT */
/*
 * smcr-stat's pieces: reading the stats files (smcr_stat_read.c), the
 * connection list, counters and command line (smcr_stat.c), and the views
 * beside them (smcr_stat_views.c).
 */
#ifndef SMCR_STAT_H
#define SMCR_STAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "smcr/stats_abi.h"

/* Version of the JSON documents printed here (not of the stats file layout). */
#define JSON_FORMAT_VERSION 1

/* ---- options ----------------------------------------------------------------------- */

enum command { CMD_SHOW, CMD_STATS, CMD_RESET, CMD_LISTENERS, CMD_LINKGROUPS, CMD_FALLBACKS };

struct options {
	enum command cmd;
	bool json;
	bool all;	     /* closed records too */
	pid_t pid;	     /* 0 = every process */
	const char *program; /* NULL = every program */
	const char *dir;     /* only this directory */
	unsigned interval;   /* seconds between reports; 0 = one report */
	unsigned count;	     /* reports to print; 0 = until interrupted */
};

/* ---- one process's published stats, copied out of its file ------------------------- */

struct conn_view {
	unsigned slot;
	struct smcr_stats_conn rec;
};

/* The per-process counters of struct smcr_stats_file, as read at one moment. */
struct file_counters {
	uint64_t handshakes_smc, conns_open, fallbacks, handshake_errors, aborts;
	uint64_t bytes_sent, bytes_received;
	uint64_t spins_won, spins_lost, waits_slept, wakeups_empty;
	uint64_t link_switches, bytes_resent;
	struct smcr_stats_reason reasons[SMCR_STATS_MAX_REASONS];
};

struct process_view {
	pid_t pid;
	uid_t uid;
	char program[4 * 16 + 1]; /* comm, unprintable bytes escaped as \ooo */
	struct file_counters counters;
	struct conn_view *conns;
	size_t nconns;
	struct smcr_stats_listener *listeners;
	size_t nlisteners;
	struct smcr_stats_lgr *lgrs; /* live link groups (files with the table) */
	size_t nlgrs;
};

struct process_list {
	struct process_view *v;
	size_t n, cap;
};

/* Watch mode (-i): the report's number from 1, 0 when not watching. */
extern unsigned smcr_stat_report;

void warnx_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void *xcalloc(size_t n, size_t size);
const char *reason_name(uint32_t code);
const char *mode_name(uint32_t mode);
bool mode_is_smc(uint32_t mode);
void addr_text(const uint8_t a[16], char *out, size_t len);
void endpoint_text(const uint8_t a[16], uint16_t port, char *out, size_t len);
void json_string(const char *s);
/* The device name of a record, sanitized; false if there is none. */
bool device_name(const struct smcr_stats_conn *r, char *out);
/* '{"format": "smcr-stat", "version": N, ' and the report number in watch mode. */
void json_head(void);

/* A user's name, or the uid as a number. */
const char *user_name(uid_t uid, char *buf, size_t len);

/* smcr_stat_counters.c: every process's counters and their total, kept for watch mode's growth. */
void stats_report(const struct process_list *pl, bool reset, bool json);
/* Watch mode: this report's counters become the previous ones... */
void watch_commit(void);
/* ... and the next report's growth is over `seconds` (the time between the two reads). */
void watch_interval(double seconds);

/* smcr_stat_read.c: every stats file found (or those in o->dir), appended to pl. */
void read_all(const struct options *o, struct process_list *pl);

/* smcr_stat_views.c */
void listeners_json(const struct process_list *pl);
void listeners_text(const struct process_list *pl);
void linkgroups_json(const struct process_list *pl);
void linkgroups_text(const struct process_list *pl);
void fallbacks_json(const struct process_list *pl);
void fallbacks_text(const struct process_list *pl);

#endif /* SMCR_STAT_H */
