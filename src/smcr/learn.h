/* SPDX-License-Identifier: MIT */
/*
 * The learned policy: which destinations SMC cannot help.
 *
 * SMC costs a handshake (CLC over TCP, rings, doorbells) that only a
 * connection which lives or carries enough repays. A destination whose
 * recent SMC connections were all short (less than SMCR_LEARN_SHORT_BYTES
 * both ways together, in fewer than SMCR_LEARN_SHORT_MSGS control messages
 * (CDCs: each write, cursor update and close sends one), and closed within
 * SMCR_LEARN_SHORT_MS of the handshake: an HTTP request with `Connection:
 * close`, a one-shot RPC) is not proposed SMC any more: its connections stay
 * TCP, decided before connect(), with no system call and no CLC byte, and
 * fall back with their own reason (SMCR_CLC_DECL_SHORTFLOWS, "SHORTFLOWS" in
 * smcr-stat). Bytes and messages decide, which a loaded machine does not
 * change; the time bound only keeps a long-lived, quiet connection (a
 * pooled one) from counting as short.
 *
 * Rules, per destination (address and port), with hysteresis:
 *   - every SMC connection that ends adds 1 to its score when short, and
 *     takes SMCR_LEARN_LONG_WEIGHT off when not (a long connection SMC
 *     helped weighs more than a short one it cost: missing SMC where it
 *     helps is the bigger loss); a same-host Proposal that ends on TCP (the
 *     server declined it, or did not answer in time) counts as short: it
 *     cost the handshake and bought nothing (policy.h);
 *   - at SMCR_LEARN_TCP_ON the destination turns TCP; it turns back at
 *     SMCR_LEARN_TCP_OFF or below (the band keeps a mixed workload from
 *     flapping);
 *   - while TCP, one connection in SMCR_LEARN_PROBE_EVERY << n is still
 *     proposed SMC, and one at least every SMCR_LEARN_PROBE_S seconds, to see
 *     whether the workload changed; n grows (up to SMCR_LEARN_PROBE_SHIFT_MAX)
 *     with every probe that came back short again, and a long probe lowers
 *     the score as any long connection does;
 *   - an entry nobody touched for SMCR_LEARN_FORGET_S seconds is forgotten.
 *
 * Where the knowledge lives: in one table per user, a file in the user's
 * private runtime directory (<runtime dir>/smcr/learn, mode 0600, mapped
 * shared), so a short-lived client (curl, a script's loop, a CGI worker)
 * profits from what the earlier ones learnt: a per-process table would
 * start empty in every such process and never learn anything. Per user and
 * not per host: another uid's processes must not steer ours (their table is
 * not readable to us, nor ours to them); a process of our own uid can only
 * make us choose TCP or SMC, both of which work (or, by truncating the file,
 * make us fault on the mapping: no more than it could do by killing us).
 * Every value read from the table is only a hint (no pointer, no length);
 * entries are lost or overwritten under races between processes, which at
 * worst costs one wrong choice. Without a runtime directory the table is
 * private to the process.
 */
#ifndef SMCR_LEARN_H
#define SMCR_LEARN_H

#include <stdbool.h>
#include <stdint.h>

#define SMCR_LEARN_SHORT_BYTES (64u * 1024)
#define SMCR_LEARN_SHORT_MSGS 16u
#define SMCR_LEARN_SHORT_MS 1000
#define SMCR_LEARN_SCORE_MAX 12
#define SMCR_LEARN_LONG_WEIGHT 4
#define SMCR_LEARN_TCP_ON 8
#define SMCR_LEARN_TCP_OFF 4
#define SMCR_LEARN_PROBE_EVERY 16u
#define SMCR_LEARN_PROBE_SHIFT_MAX 6u
#define SMCR_LEARN_PROBE_S 60
#define SMCR_LEARN_FORGET_S 600
#define SMCR_LEARN_SLOTS 256u
#define SMCR_LEARN_WAYS 8u

/* A destination's key (never 0): family, 16 address bytes, port. */
uint64_t smcr_learn_key(unsigned family, const unsigned char addr[16], uint16_t port);

/*
 * Before connecting to `key`: true when the connection should stay TCP (a
 * learned short-flow destination, no probe due). Looks only; never adds an
 * entry. `now_ms` is CLOCK_MONOTONIC.
 */
bool smcr_learn_keep_tcp(uint64_t key, int64_t now_ms);

/*
 * An SMC connection to `key` ended after `lifetime_ms`, having moved `bytes`
 * in `messages` control messages (both ways).
 */
void smcr_learn_result(uint64_t key, uint64_t bytes, uint64_t messages, int64_t lifetime_ms,
		       int64_t now_ms);

/*
 * Tests: use a table private to this process (instead of the shared file),
 * emptied.
 */
void smcr_learn_use_private(void);

#endif /* SMCR_LEARN_H */
