/* SPDX-License-Identifier: MIT */
/*
 * The epoll records, shared by registration (smc_epoll.c) and reporting
 * (smc_epoll_wait.c): every registration of a tracked candidate or SMC
 * socket gets one, holding the application's events and data.  Apart from
 * smc_internal.h because nothing else in the glue may touch a record.
 */
#ifndef SMCR_PRELOAD_SMC_EPOLL_H
#define SMCR_PRELOAD_SMC_EPOLL_H

#include <stdbool.h>
#include <stdint.h>

struct smcr_fd_entry;
struct smcr_sock;

struct ep_rec {
	uint64_t data;               /* the application's */
	struct smcr_fd_entry *entry;
	int epfd;
	int fd;                      /* the application's fd number */
	uint32_t events;             /* the application's */
	uint32_t next;               /* index + 1 of the entry's next record */
	bool in_use;
	bool on_doorbell;            /* registered as the engine's ready fd */
	bool disarmed;               /* EPOLLONESHOT that fired */
	int hs_fd;                   /* >= 0: registered as this server handshake fd */
};

/*
 * The record behind a reported data value, or NULL (the application's own).
 * *stale: the value is a record that was freed (a report that raced with the
 * socket's release): it must not reach the application.  Called with the
 * epoll lock held (smcr_smc_epoll_lock), as every use of a record is.
 */
struct ep_rec *smcr_smc_epoll_rec_of(uint64_t data, bool *stale);
/* Register the record again as it is (a one-shot that must stay armed). */
int smcr_smc_epoll_rearm(struct ep_rec *r, struct smcr_sock *s);

#endif /* SMCR_PRELOAD_SMC_EPOLL_H */
