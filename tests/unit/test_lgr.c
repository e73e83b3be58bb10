// SPDX-License-Identifier: MIT
/*
 * A link group's second link without RDMA (src/smcr/lgr.c, lgr_llc.c): the
 * LLC messages a peer sends are fed to smcr_lgr_llc_handle() on a group
 * built by hand, with wr.c's and ib.c's calls replaced at link time
 * (-Wl,--wrap, tests/unit/meson.build): what we send goes into a list, the
 * links and devices are opaque pointers nobody dereferences.  The peer's
 * messages are the kernel's own (tests/data/kernel-smcr) or built from them
 * as the kernel builds its answer (smc_llc_send_add_link() fills request and
 * response alike).  Checked: the peer's rkeys per link (the rtoken table),
 * from the client's ADD LINK answer (server role) and the server's ADD LINK
 * request (client role), CONFIRM RKEY and DELETE RKEY; failover as a server
 * (the client's DELETE LINK, and our own finding): the connection on the
 * second link moves to the first with its twin rkey and its last completed
 * CDC, the peer is told as the kernel's server tells it, and the group goes
 * on with one link.  And whom a group takes (smcr_lgr_match): the claimed
 * fields of a Proposal or Accept, over a TCP connection from an address the
 * group's peer proved, IPv4-mapped or not.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/real.h"
#include "smcr/lgr.h"
#include "smcr/lgr_int.h"
#include "smcr/llc.h"
#include "smcr/stats.h"
#include "smcr/wire.h"
#include "testdata.h"

/* ---- wr.c and ib.c, replaced ------------------------------------------------------ */

static uint8_t link0_obj, alt_obj;
#define LINK0 ((struct smcr_wr_link *)&link0_obj)
#define ALT   ((struct smcr_wr_link *)&alt_obj)

struct sent {
	struct smcr_wr_link *link;
	uint8_t msg[SMCR_LLC_V2_MAX_LEN];
	uint32_t len;
};
static struct sent sent[16];
static unsigned nsent, stopped, destroyed, ports_closed;
static struct smcr_ib_qp_info connected_to; /* the new link's peer, as connected */
static uint8_t own_mtu = 3; /* our QPs' MTU (enum ibv_mtu) */
static uint64_t retired; /* smcr_wr_last_retired() of the second link */
static int alt_fd = -1;  /* the second link's "completion channel" (client role) */
static struct smcr_ib_port alt_port = { .name = "rxe3", .removal_fd = -1 };

static int record(struct smcr_wr_link *link, const uint8_t *msg, uint32_t len)
{
	assert_true(nsent < sizeof(sent) / sizeof(sent[0]));
	sent[nsent].link = link;
	memcpy(sent[nsent].msg, msg, len);
	sent[nsent].len = len;
	nsent++;
	return 0;
}

int __wrap_smcr_wr_send_msg(struct smcr_wr_link *link, const uint8_t msg[SMCR_WR_MSG_LEN],
			    int timeout_ms);
int __wrap_smcr_wr_send_msg(struct smcr_wr_link *link, const uint8_t msg[SMCR_WR_MSG_LEN],
			    int timeout_ms)
{
	(void)timeout_ms;
	return record(link, msg, SMCR_WR_MSG_LEN);
}

int __wrap_smcr_wr_send_long(struct smcr_wr_link *link, const uint8_t *msg, uint32_t len,
			     int timeout_ms);
int __wrap_smcr_wr_send_long(struct smcr_wr_link *link, const uint8_t *msg, uint32_t len,
			     int timeout_ms)
{
	(void)timeout_ms;
	return record(link, msg, len);
}

void __wrap_smcr_wr_link_info(const struct smcr_wr_link *link, struct smcr_ib_qp_info *out);
void __wrap_smcr_wr_link_info(const struct smcr_wr_link *link, struct smcr_ib_qp_info *out)
{
	memset(out, 0, sizeof(*out));
	out->qpn = link == ALT ? 0x22 : 0x11;
	out->psn = 0x4242;
	out->mtu = own_mtu;
}

int __wrap_smcr_wr_link_connect(struct smcr_wr_link *link, const struct smcr_ib_qp_info *peer);
int __wrap_smcr_wr_link_connect(struct smcr_wr_link *link, const struct smcr_ib_qp_info *peer)
{
	assert_ptr_equal(link, ALT);
	connected_to = *peer;
	return 0;
}

const char *__wrap_smcr_wr_link_error(const struct smcr_wr_link *link);
const char *__wrap_smcr_wr_link_error(const struct smcr_wr_link *link)
{
	(void)link;
	return "";
}

void __wrap_smcr_wr_link_stop(struct smcr_wr_link *link);
void __wrap_smcr_wr_link_stop(struct smcr_wr_link *link)
{
	assert_ptr_equal(link, ALT);
	stopped++;
}

uint64_t __wrap_smcr_wr_last_retired(const struct smcr_wr_link *link);
uint64_t __wrap_smcr_wr_last_retired(const struct smcr_wr_link *link)
{
	assert_ptr_equal(link, ALT);
	return retired;
}

void __wrap_smcr_wr_link_destroy(struct smcr_wr_link *link);
void __wrap_smcr_wr_link_destroy(struct smcr_wr_link *link)
{
	assert_ptr_equal(link, ALT);
	destroyed++;
}

int __wrap_smcr_wr_link_create(struct smcr_ib_port *port, struct smcr_wr_link **out);
int __wrap_smcr_wr_link_create(struct smcr_ib_port *port, struct smcr_wr_link **out)
{
	assert_ptr_equal(port, &alt_port);
	*out = ALT;
	return 0;
}

void __wrap_smcr_wr_set_rx_handler(struct smcr_wr_link *link, smcr_wr_rx_fn fn, void *arg);
void __wrap_smcr_wr_set_rx_handler(struct smcr_wr_link *link, smcr_wr_rx_fn fn, void *arg)
{
	(void)link, (void)fn, (void)arg;
}

int __wrap_smcr_wr_fd(const struct smcr_wr_link *link);
int __wrap_smcr_wr_fd(const struct smcr_wr_link *link)
{
	assert_ptr_equal(link, ALT);
	return alt_fd;
}

int __wrap_smcr_wr_arm(struct smcr_wr_link *link);
int __wrap_smcr_wr_arm(struct smcr_wr_link *link)
{
	(void)link;
	return 0;
}

/* The fake links complete nothing and never fail. */
bool __wrap_smcr_wr_poll(struct smcr_wr_link *link);
bool __wrap_smcr_wr_poll(struct smcr_wr_link *link)
{
	(void)link;
	return false;
}

int __wrap_smcr_ib_port_open_alt(const struct smcr_ib_port *primary,
				 const uint8_t peer_gid[SMCR_IB_GID_LEN], struct smcr_ib_port **out);
int __wrap_smcr_ib_port_open_alt(const struct smcr_ib_port *primary,
				 const uint8_t peer_gid[SMCR_IB_GID_LEN], struct smcr_ib_port **out)
{
	(void)primary, (void)peer_gid;
	*out = &alt_port;
	return 0;
}

void __wrap_smcr_ib_port_close(struct smcr_ib_port *port);
void __wrap_smcr_ib_port_close(struct smcr_ib_port *port)
{
	assert_ptr_equal(port, &alt_port);
	ports_closed++;
}

/* ---- a group, and the peer's messages ------------------------------------------- */

static struct smcr_lgr *g;
static struct smcr_lgr_conn c1, c2; /* on the first link, on the second */

/* An ACTIVE v2 group with link 1 up in `role`; the second link as `alt` says. */
static struct smcr_lgr *group(enum smcr_lgr_role role, enum smcr_lgr_link_state alt)
{
	struct smcr_lgr *n = calloc(1, sizeof(*n));

	assert_non_null(n);
	pthread_mutex_init(&n->mu, NULL);
	n->id = 7;
	n->key.role = role;
	n->state = SMCR_LGR_ACTIVE;
	n->connected = true;
	n->link = LINK0;
	n->link_num = 1;
	n->max_links = 2;
	n->max_conns = SMCR_LGR_MAX_CONNS;
	n->epfd = -1;
	if (alt != SMCR_LGR_LINK_NONE) {
		n->alt.state = alt;
		n->alt.port = &alt_port;
		n->alt.link = ALT;
		n->alt.link_num = 2;
		n->alt.since_ms = 1;
	}
	nsent = stopped = destroyed = ports_closed = 0;
	retired = 0;
	memset(&connected_to, 0, sizeof(connected_to));
	own_mtu = 3;
	return n;
}

static void group_free(struct smcr_lgr *n)
{
	pthread_mutex_destroy(&n->mu);
	free(n->rtok);
	free(n);
}

static void conn_on(struct smcr_lgr *n, struct smcr_lgr_conn *c, uint32_t token, uint8_t link)
{
	memset(c, 0, sizeof(*c));
	c->token = token;
	c->link = link;
	c->efd = -1; /* ring() needs none */
	c->next = n->conns;
	n->conns = c;
	n->nconns++;
}

static void handle(unsigned link, const uint8_t *msg, uint32_t len)
{
	uint8_t raw[SMCR_LGR_LLC_MSG_MAX];

	memset(raw, 0, sizeof(raw));
	memcpy(raw, msg, len < sizeof(raw) ? len : sizeof(raw));
	pthread_mutex_lock(&g->mu);
	smcr_lgr_llc_handle(g, link, raw, len);
	pthread_mutex_unlock(&g->mu);
}

/* The peer's rtoken of the RMB with `rkey` on `link`: its rkey and address on `other`. */
static bool twin(unsigned link, uint32_t rkey, unsigned other, uint32_t *rk, uint64_t *va)
{
	for (unsigned i = 0; i < g->nrtok; i++) {
		const struct smcr_lgr_rtoken *t = &g->rtok[i];

		if ((t->has_rkey & (1u << link)) && t->rkey[link] == rkey) {
			if (!(t->has_rkey & t->has_vaddr & (1u << other)))
				return false;
			*rk = t->rkey[other];
			*va = t->vaddr[other];
			return true;
		}
	}
	return false;
}

/*
 * The kernel's ADD LINK v2 (its server's request for link 2: one RMB, rkey
 * 0x34d on link 1, 0x569 at 0xffff888008190000 on link 2), and the same as a
 * client's answer: smc_llc_send_add_link() fills both alike, flags RESP.
 */
static uint32_t kernel_add_link(uint8_t *b, size_t cap, bool answer)
{
	uint32_t n = (uint32_t)load_bin("llc-add-link-v2-req.bin", b, cap);

	assert_int_equal(n, 88);
	if (answer)
		b[3] = SMCR_LLC_FLAG_RESP;
	return n;
}
#define KRKEY1 0x34du
#define KRKEY2 0x569u
#define KVADDR 0xffff888008190000ull

/* The new link was connected to the QP the ADD LINK b[0..n) describes, at MTU `mtu`. */
static void assert_connected_to(const uint8_t *b, uint32_t n, uint8_t mtu)
{
	struct smcr_llc_msg m;
	enum smcr_llc_err err;

	assert_int_equal(smcr_llc_decode(b, n, &m, &err), SMCR_WIRE_OK);
	assert_int_not_equal(m.add_link.qpn, 0);
	assert_int_equal(connected_to.qpn, m.add_link.qpn);
	assert_int_equal(connected_to.psn, m.add_link.psn);
	assert_memory_equal(connected_to.gid, m.add_link.gid, SMCR_IB_GID_LEN);
	assert_memory_equal(connected_to.mac, m.add_link.mac, SMCR_IB_MAC_LEN);
	assert_int_equal(connected_to.mtu, mtu);
}

/* The client's DELETE LINK of link 2 (the kernel's smcr_link_down(): orderly, lost path). */
static void delete_link_2(uint8_t b[SMCR_LLC_MSG_LEN])
{
	assert_int_equal(load_bin("llc-delete-link-v2.bin", b, SMCR_LLC_MSG_LEN), SMCR_LLC_MSG_LEN);
	b[3] = SMCR_LLC_FLAG_DEL_LINK_ORDERLY; /* the capture deletes all (0x40) */
	b[4] = 2;
	smcr_put_be32(b + 5, SMCR_LLC_DEL_LOST_PATH);
}

/* ---- tests ------------------------------------------------------------------------ */

/*
 * Server: the client's positive ADD LINK answer connects the new QP, sends
 * CONFIRM LINK on it, and its rkey list gives every listed RMB its twin.
 */
static void server_keeps_add_link_answer_rkeys(void **state)
{
	uint8_t b[128], conf[SMCR_LLC_MSG_LEN];
	uint32_t n, rk = 0;
	uint64_t va = 0;

	g = group(SMCR_LGR_SERVER, SMCR_LGR_LINK_ADDING);
	conn_on(g, &c1, 0x1001, 0);
	smcr_lgr_peer_rmb(g, &c1, KRKEY1, 0x5000); /* its CLC Confirm, first contact */
	own_mtu = 2; /* below the answer's 3 (1024): the smaller one is used */
	n = kernel_add_link(b, sizeof(b), true);
	handle(0, b, n);
	assert_int_equal(g->alt.state, SMCR_LGR_LINK_PENDING);
	assert_connected_to(b, n, 2);
	assert_int_equal(nsent, 1);
	assert_ptr_equal(sent[0].link, ALT); /* CONFIRM LINK on the new QP */
	assert_int_equal(sent[0].msg[0], 0x20 | SMCR_LLC_CONFIRM_LINK);
	assert_int_equal(sent[0].msg[3] & SMCR_LLC_FLAG_RESP, 0);
	assert_true(twin(0, KRKEY1, 1, &rk, &va));
	assert_int_equal(rk, KRKEY2);
	assert_int_equal(va, KVADDR);
	assert_true(twin(1, KRKEY2, 0, &rk, &va)); /* and back: CLC's address on link 1 */
	assert_int_equal(rk, KRKEY1);
	assert_int_equal(va, 0x5000);
	/* its CONFIRM LINK answer on the new link: up */
	memcpy(conf, sent[0].msg, sizeof(conf));
	conf[3] |= SMCR_LLC_FLAG_RESP;
	handle(1, conf, sizeof(conf));
	assert_int_equal(g->alt.state, SMCR_LGR_LINK_UP);
	group_free(g);
	(void)state;
}

/* Server: the same answer rejected: no second link, nothing kept for it. */
static void server_add_link_rejected(void **state)
{
	uint8_t b[128];
	uint32_t n, rk;
	uint64_t va;

	g = group(SMCR_LGR_SERVER, SMCR_LGR_LINK_ADDING);
	n = kernel_add_link(b, sizeof(b), true);
	b[3] |= SMCR_LLC_FLAG_ADD_LINK_REJ;
	handle(0, b, n);
	assert_int_equal(g->alt.state, SMCR_LGR_LINK_NONE);
	assert_int_equal(destroyed, 1);
	assert_false(twin(0, KRKEY1, 1, &rk, &va));
	group_free(g);
	(void)state;
}

/*
 * A server with the second link up and a connection on it whose RMB the
 * client confirmed on both links (CONFIRM RKEY on link 2, the kernel's
 * client before its CLC Confirm: rtoken 0 on link 2, then {link 1, rkey,
 * address}), and its CDCs 1 and 2 posted as work requests 4 and 6.
 */
static void server_with_conn_on_link2(void)
{
	uint8_t b[SMCR_LLC_MSG_LEN];

	g = group(SMCR_LGR_SERVER, SMCR_LGR_LINK_UP);
	conn_on(g, &c1, 0x1001, 0);
	smcr_lgr_peer_rmb(g, &c1, KRKEY1, 0x5000);
	conn_on(g, &c2, 0x1002, 1);
	assert_int_equal(load_bin("llc-confirm-rkey-v2-req.bin", b, sizeof(b)), sizeof(b));
	b[4] = 1;                          /* one more rtoken */
	smcr_put_be32(b + 5, 0x777);       /* rkey on the link carrying it (2) */
	smcr_put_be64(b + 9, 0x7000);
	b[17] = 1;                         /* link id 1 */
	smcr_put_be32(b + 18, 0x666);
	smcr_put_be64(b + 22, 0x6000);
	handle(1, b, sizeof(b));
	assert_int_equal(nsent, 1); /* answered, on link 2 */
	assert_ptr_equal(sent[0].link, ALT);
	assert_int_equal(sent[0].msg[3], SMCR_LLC_FLAG_RESP);
	smcr_lgr_peer_rmb(g, &c2, 0x777, 0x7000); /* its CLC Confirm names link 2's */
	c2.sent[0] = (struct smcr_lgr_cdc_sent){ .wr = 4, .seqno = 1, .prod_count = 100 };
	c2.sent[1] = (struct smcr_lgr_cdc_sent){ .wr = 6, .seqno = 2, .prod_count = 300 };
	c2.nsent = 2;
	retired = 5; /* the first completed, the second did not */
	nsent = 0;
}

/* c2 moved to link 1: the peer's RMB through its twin, resent from CDC 1; c1 stays. */
static void expect_c2_moved(void)
{
	struct smcr_lgr_cdc_sent fin;
	uint32_t rkey = 0;
	uint64_t addr = 0;

	assert_int_equal(g->state, SMCR_LGR_ACTIVE);
	assert_int_equal(g->alt.state, SMCR_LGR_LINK_NONE);
	assert_null(g->alt.link);
	assert_int_equal(stopped, 1);
	assert_int_equal(destroyed, 1);
	assert_int_equal(ports_closed, 1);
	assert_int_equal(c2.link, 0);
	assert_int_equal(c1.link, 0);
	assert_int_equal(g->stat_link_switches, 1);
	assert_int_equal(smcr_lgr_conn_switched(g, &c1, &fin, &rkey, &addr), 0);
	assert_int_equal(smcr_lgr_conn_switched(g, &c2, &fin, &rkey, &addr), 1);
	assert_int_equal(rkey, 0x666);
	assert_int_equal(addr, 0x6000);
	assert_int_equal(fin.seqno, 1);
	assert_int_equal(fin.prod_count, 100);
	assert_int_equal(smcr_lgr_conn_switched(g, &c2, &fin, &rkey, &addr), 0); /* once */
	/* later connections: the surviving link */
	smcr_lgr_conn_assign(g, &c1);
	assert_int_equal(c1.link, 0);
}

/*
 * The move lands while the application's thread is between its look at the
 * connection and its settle (nothing ready, nothing queued): the settle must
 * keep the worker's ring and say "look again", or the thread sleeps with the
 * resend and the cursors its peer waits for never sent (a peer blocked on
 * them sends nothing that would wake it).
 */
static void failover_survives_idle_settle(void **state)
{
	uint64_t v = 0;

	server_with_conn_on_link2();
	c2.efd = eventfd(0, EFD_NONBLOCK);
	assert_true(c2.efd >= 0);
	pthread_mutex_lock(&g->mu);
	smcr_lgr_alt_down_locked(g, "its RDMA device is being removed", false);
	pthread_mutex_unlock(&g->mu);
	assert_true(smcr_lgr_settle(g, &c2, false));
	assert_int_equal(read(c2.efd, &v, sizeof(v)), sizeof(v)); /* still rung */
	c2.efd_set = false;
	expect_c2_moved(); /* takes the move */
	assert_false(smcr_lgr_settle(g, &c2, false));
	assert_int_equal(read(c2.efd, &v, sizeof(v)), -1); /* and now quiet */
	close(c2.efd);
	c2.efd = -1;
	group_free(g);
	(void)state;
}

/*
 * Server, the client's DELETE LINK of link 2 (the kernel's
 * smc_llc_process_srv_delete_link): the connection moves, then the request
 * goes back to the client as it came, on the link it came on.
 */
static void server_failover_client_deleted(void **state)
{
	uint8_t del[SMCR_LLC_MSG_LEN];

	server_with_conn_on_link2();
	delete_link_2(del);
	handle(0, del, sizeof(del));
	expect_c2_moved();
	assert_int_equal(nsent, 1);
	assert_ptr_equal(sent[0].link, LINK0);
	assert_memory_equal(sent[0].msg, del, sizeof(del)); /* a request, not an answer */
	/* the client's answer to it ("no such link"), and a DELETE LINK of it again: dropped */
	del[3] |= SMCR_LLC_FLAG_RESP;
	smcr_put_be32(del + 5, SMCR_LLC_DEL_NOLNK);
	handle(0, del, sizeof(del));
	delete_link_2(del);
	handle(0, del, sizeof(del));
	assert_int_equal(nsent, 1);
	assert_int_equal(g->state, SMCR_LGR_ACTIVE);
	group_free(g);
	(void)state;
}

/*
 * Server, our own finding (the device removed, a QP error): the connection
 * moves, and the client gets what the kernel's smc_llc_srv_delete_link_local()
 * makes: DELETE LINK of link 2, orderly, "lost path", on link 1.
 */
static void server_failover_own_finding(void **state)
{
	server_with_conn_on_link2();
	pthread_mutex_lock(&g->mu);
	smcr_lgr_alt_down_locked(g, "its RDMA device is being removed", false);
	pthread_mutex_unlock(&g->mu);
	expect_c2_moved();
	assert_int_equal(nsent, 1);
	assert_ptr_equal(sent[0].link, LINK0);
	assert_int_equal(sent[0].msg[0], 0x20 | SMCR_LLC_DELETE_LINK);
	assert_int_equal(sent[0].msg[1], SMCR_LLC_MSG_LEN);
	assert_int_equal(sent[0].msg[3], SMCR_LLC_FLAG_DEL_LINK_ORDERLY);
	assert_int_equal(sent[0].msg[4], 2);
	assert_int_equal(smcr_get_be32(sent[0].msg + 5), SMCR_LLC_DEL_LOST_PATH);
	group_free(g);
	(void)state;
}

/*
 * What smcr-stat linkgroup shows follows the group: both links up with a
 * connection each (the second link's device, QPs as wr.c reports them), then,
 * after failover, one link carrying both; a dead group's links are down.
 */
static void stats_record_follows_failover(void **state)
{
	uint8_t del[SMCR_LLC_MSG_LEN];
	struct smcr_stats_lgr *rec;

	server_with_conn_on_link2();
	rec = g->stats = smcr_stats_lgr_open();
	assert_non_null(rec);
	pthread_mutex_lock(&g->mu);
	smcr_lgr_publish_locked(g);
	pthread_mutex_unlock(&g->mu);
	assert_int_equal(rec->state, SMCR_STATS_CONN_LIVE);
	assert_int_equal(rec->id, 7);
	assert_int_equal(rec->role, 1);
	assert_int_equal(rec->lgr_state, SMCR_STATS_LGR_ACTIVE);
	assert_int_equal(rec->max_links, 2);
	assert_int_equal(rec->conns, 2);
	assert_int_equal(rec->links[0].state, SMCR_STATS_LINK_UP);
	assert_int_equal(rec->links[0].qpn, 0x11);
	assert_int_equal(rec->links[0].conns, 1);
	assert_int_equal(rec->links[0].link_id, 1);
	assert_int_equal(rec->links[1].state, SMCR_STATS_LINK_UP);
	assert_int_equal(rec->links[1].qpn, 0x22);
	assert_int_equal(rec->links[1].conns, 1);
	assert_int_equal(rec->links[1].link_id, 2);
	assert_string_equal(rec->links[1].device, "rxe3");
	/* the client deletes link 2: an LLC message, after which the record is current */
	delete_link_2(del);
	handle(0, del, sizeof(del));
	assert_int_equal(rec->links[1].state, SMCR_STATS_LINK_NONE);
	assert_int_equal(rec->links[0].conns, 2);
	assert_int_equal(rec->conns, 2);
	pthread_mutex_lock(&g->mu);
	smcr_lgr_fail_locked(g, "test");
	pthread_mutex_unlock(&g->mu);
	assert_int_equal(rec->lgr_state, SMCR_STATS_LGR_DEAD);
	assert_int_equal(rec->links[0].state, SMCR_STATS_LINK_DOWN);
	smcr_stats_lgr_close(rec);
	assert_int_equal(rec->state, SMCR_STATS_CONN_FREE);
	group_free(g);
	(void)state;
}

/* The client withdrew the RMB's rkey (DELETE RKEY): a connection with it cannot move. */
static void server_failover_twin_deleted(void **state)
{
	uint8_t b[SMCR_LLC_MSG_LEN];
	struct smcr_lgr_cdc_sent fin;
	uint32_t rkey = 1;
	uint64_t addr = 1;

	server_with_conn_on_link2();
	assert_int_equal(load_bin("llc-delete-rkey-v2-req.bin", b, sizeof(b)), sizeof(b));
	smcr_put_be32(b + 8, 0x666); /* the v2 list's first rkey, on the link carrying it */
	handle(0, b, sizeof(b));
	pthread_mutex_lock(&g->mu);
	smcr_lgr_alt_down_locked(g, "IBV_EVENT_QP_FATAL", false);
	pthread_mutex_unlock(&g->mu);
	assert_int_equal(c2.link, 0);
	assert_int_equal(smcr_lgr_conn_switched(g, &c2, &fin, &rkey, &addr), -ENOENT);
	assert_int_equal(g->state, SMCR_LGR_ACTIVE); /* the others go on */
	group_free(g);
	(void)state;
}

/*
 * Client: the kernel server's ADD LINK request (the bookkeeping the server
 * role now shares): answered with our new QP, the server's RMB twins kept.
 */
static void client_keeps_add_link_request_rkeys(void **state)
{
	uint8_t b[128];
	uint32_t n, rk = 0;
	uint64_t va = 0;

	g = group(SMCR_LGR_CLIENT, SMCR_LGR_LINK_NONE);
	g->epfd = smcr_real.epoll_create1(EPOLL_CLOEXEC);
	alt_fd = eventfd(0, EFD_CLOEXEC);
	assert_true(g->epfd >= 0 && alt_fd >= 0);
	n = kernel_add_link(b, sizeof(b), false);
	handle(0, b, n);
	assert_int_equal(g->alt.state, SMCR_LGR_LINK_PENDING);
	assert_connected_to(b, n, 3); /* the request's MTU */
	assert_int_equal(g->alt.link_num, 2);
	assert_int_equal(nsent, 1);
	assert_ptr_equal(sent[0].link, LINK0);
	assert_int_equal(sent[0].msg[0], 0x20 | SMCR_LLC_ADD_LINK);
	assert_int_equal(sent[0].msg[3], SMCR_LLC_FLAG_RESP); /* accepted */
	assert_true(twin(0, KRKEY1, 1, &rk, &va));
	assert_int_equal(rk, KRKEY2);
	assert_int_equal(va, KVADDR);
	pthread_mutex_lock(&g->mu);
	smcr_lgr_alt_close(g);
	pthread_mutex_unlock(&g->mu);
	assert_false(twin(0, KRKEY1, 1, &rk, &va)); /* a new second link brings its own */
	close(alt_fd);
	close(g->epfd);
	group_free(g);
	(void)state;
}

/* ---- whom a group takes: the claimed fields and the proven TCP peer address --------- */

static void addr4(const char *ip, uint8_t out[SMCR_IB_GID_LEN])
{
	struct sockaddr_in in = { .sin_family = AF_INET };

	assert_int_equal(inet_pton(AF_INET, ip, &in.sin_addr), 1);
	assert_int_equal(smcr_ib_addr_gid((struct sockaddr *)&in, out), 0);
}

static void addr6(const char *ip, uint8_t out[SMCR_IB_GID_LEN])
{
	struct sockaddr_in6 in6 = { .sin6_family = AF_INET6 };

	assert_int_equal(inet_pton(AF_INET6, ip, &in6.sin6_addr), 1);
	assert_int_equal(smcr_ib_addr_gid((struct sockaddr *)&in6, out), 0);
}

/* The victim's claimed fields (peer id, GID 10.77.0.1), our GID 10.77.0.2. */
static void victim_key(struct smcr_lgr_key *k, enum smcr_lgr_role role, const char *peer)
{
	static const uint8_t peer_id[SMCR_CLC_PEER_ID_LEN] = { 0x12, 0x34, 2, 0, 0, 0, 0, 1 };

	memset(k, 0, sizeof(*k));
	memcpy(k->peer_id, peer_id, sizeof(peer_id));
	addr4(role == SMCR_LGR_SERVER ? "10.77.0.1" : "10.77.0.2", k->peer_gid);
	addr4(role == SMCR_LGR_SERVER ? "10.77.0.2" : "10.77.0.1", k->local_gid);
	k->role = role;
	addr4(peer, k->peer_addr);
}

/*
 * Server: a Proposal that copies the victim's peer id and GID joins the
 * victim's group only over a TCP connection from the victim's address, in
 * either socket family's form of it.
 */
static void server_group_bound_to_peer_address(void **state)
{
	struct smcr_lgr_key k;

	g = group(SMCR_LGR_SERVER, SMCR_LGR_LINK_NONE);
	victim_key(&g->key, SMCR_LGR_SERVER, "10.77.0.1");
	victim_key(&k, SMCR_LGR_SERVER, "10.77.0.1");
	assert_true(smcr_lgr_match(g, &k, 0));
	/* an AF_INET6 listener sees an IPv4 client as ::ffff:10.77.0.1: the same peer */
	addr6("::ffff:10.77.0.1", k.peer_addr);
	assert_true(smcr_lgr_match(g, &k, 0));
	/* the attacker: every claimed field the victim's, the connection from elsewhere */
	addr4("10.77.0.5", k.peer_addr);
	assert_false(smcr_lgr_match(g, &k, 0));
	addr6("::ffff:10.77.0.5", k.peer_addr);
	assert_false(smcr_lgr_match(g, &k, 0));
	addr6("fd77::1", k.peer_addr);
	assert_false(smcr_lgr_match(g, &k, 0));
	/* from the victim's address, a claimed field that differs is another group still */
	victim_key(&k, SMCR_LGR_SERVER, "10.77.0.1");
	k.peer_id[0] ^= 1;
	assert_false(smcr_lgr_match(g, &k, 0));
	group_free(g);
	(void)state;
}

/*
 * Client: an Accept that names the victim server's group (its peer id, the
 * QP and GID of either link) is taken only from the address the group was
 * built with, or the second link's, which the server announced over the
 * group's own first link.
 */
static void client_group_bound_to_peer_address(void **state)
{
	struct smcr_lgr_key k;

	g = group(SMCR_LGR_CLIENT, SMCR_LGR_LINK_UP);
	victim_key(&g->key, SMCR_LGR_CLIENT, "10.77.0.2");
	g->peer_qpn = 17;
	g->alt.peer_qpn = 18;
	addr4("10.77.0.4", g->alt.peer_gid);
	victim_key(&k, SMCR_LGR_CLIENT, "10.77.0.2");
	assert_true(smcr_lgr_match(g, &k, 17));
	addr4("10.77.0.4", k.peer_gid); /* the server put us on its second link */
	assert_true(smcr_lgr_match(g, &k, 18));
	addr6("::ffff:10.77.0.2", k.peer_addr);
	assert_true(smcr_lgr_match(g, &k, 18));
	addr4("10.77.0.4", k.peer_addr); /* a connection to the second link's address */
	assert_true(smcr_lgr_match(g, &k, 18));
	/* a server elsewhere that names the victim server's group */
	victim_key(&k, SMCR_LGR_CLIENT, "10.77.0.9");
	assert_false(smcr_lgr_match(g, &k, 17));
	addr4("10.77.0.4", k.peer_gid);
	assert_false(smcr_lgr_match(g, &k, 18));
	/* a second link not up yet proves nothing of its address */
	g->alt.state = SMCR_LGR_LINK_ADDING;
	victim_key(&k, SMCR_LGR_CLIENT, "10.77.0.4");
	assert_false(smcr_lgr_match(g, &k, 17));
	group_free(g);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(server_keeps_add_link_answer_rkeys),
		cmocka_unit_test(server_add_link_rejected),
		cmocka_unit_test(server_failover_client_deleted),
		cmocka_unit_test(server_failover_own_finding),
		cmocka_unit_test(server_failover_twin_deleted),
		cmocka_unit_test(stats_record_follows_failover),
		cmocka_unit_test(failover_survives_idle_settle),
		cmocka_unit_test(client_keeps_add_link_request_rkeys),
		cmocka_unit_test(server_group_bound_to_peer_address),
		cmocka_unit_test(client_group_bound_to_peer_address),
	};

	smcr_real_bind();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
