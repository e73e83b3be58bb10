// SPDX-License-Identifier: MIT
/*
 * mr_access_probe: shows that the RDMA device, not our code, enforces what a peer may
 * do to a registered buffer. The server registers one page with IBV_ACCESS_LOCAL_WRITE
 * | IBV_ACCESS_REMOTE_WRITE only (as smcr registers its RMBs), between two canary pages
 * that are not registered, plus a control buffer that does allow remote reads. The
 * client knows both rkeys and, over one fresh RC connection per case (a remote access
 * error moves the QP to the error state), tries:
 *   RDMA WRITE inside the page           -> success, and the bytes land
 *   RDMA READ of the control buffer      -> success (READ works on these QPs at all)
 *   RDMA READ of the page                -> remote access error
 *   RDMA WRITE across the page's end     -> remote access error
 *   RDMA WRITE just before the page      -> remote access error
 * At the end the server checks that only the first write changed its memory.
 *
 *   mr_access_probe server LOCAL_ADDR PORT
 *   mr_access_probe client SERVER_ADDR PORT LOCAL_ADDR
 *
 * Connections are set up with rdma_cm; every wait is bounded. Exit 0 when every case
 * went as expected, 1 otherwise.
 */
#include <endian.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define PAGE 4096u

/*
 * rdma_resolve_addr() to a peer without a valid neighbour entry may complete only when
 * its timeout expires: on a veth pair the ARP reply can arrive before the kernel queues
 * the request, so the neighbour-update wakeup is lost and the retry waits for the
 * deadline. Keep that timeout short (rping uses 2 s) and wait longer than it for the
 * event.
 */
#define RESOLVE_TIMEOUT_MS	 2000
#define CM_TIMEOUT_MS		 5000
#define FIRST_CONNECT_TIMEOUT_MS 20000
#define COMPLETION_TIMEOUT_MS	 5000

enum fill {
	CANARY = 0x5a,	     /* unregistered pages around the guarded one */
	CONTROL_FILL = 0xc3, /* the control buffer the client may read */
	PAYLOAD = 0xa5,	     /* what the client's legal write stores */
};

/* What the server tells the client in its rdma_accept private data (big endian). */
struct regions_wire {
	uint64_t guarded_addr;
	uint32_t guarded_rkey;
	uint32_t guarded_len;
	uint64_t control_addr;
	uint32_t control_rkey;
	uint32_t control_len;
} __attribute__((packed));

struct probe_case {
	const char *name;
	enum ibv_wr_opcode opcode;
	bool on_control; /* target the control buffer instead of the guarded page */
	int64_t offset;	 /* relative to the target's start; may point outside it */
	uint32_t len;
	enum ibv_wc_status expect;
};

static const struct probe_case cases[] = {
    {"RDMA WRITE inside the remote-write-only page", IBV_WR_RDMA_WRITE, false, 128, 256,
     IBV_WC_SUCCESS},
    {"RDMA READ of the control buffer (REMOTE_READ granted)", IBV_WR_RDMA_READ, true, 0,
     256, IBV_WC_SUCCESS},
    {"RDMA READ of the remote-write-only page", IBV_WR_RDMA_READ, false, 128, 256,
     IBV_WC_REM_ACCESS_ERR},
    {"RDMA WRITE across the end of the page", IBV_WR_RDMA_WRITE, false, PAGE - 128, 256,
     IBV_WC_REM_ACCESS_ERR},
    {"RDMA WRITE just before the page", IBV_WR_RDMA_WRITE, false, -64, 64,
     IBV_WC_REM_ACCESS_ERR},
};
#define N_CASES (sizeof(cases) / sizeof(cases[0]))

/* the one legal write, as the server expects to find it */
#define LEGAL_WRITE_OFFSET 128u
#define LEGAL_WRITE_LEN	   256u

static int fail(const char *what)
{
	fprintf(stderr, "mr_access_probe: %s: %s\n", what, strerror(errno));
	return -1;
}

static int resolve(const char *addr, const char *port, struct sockaddr_storage *out)
{
	struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
	struct addrinfo *res;
	int rc = getaddrinfo(addr, port, &hints, &res);

	if (rc) {
		fprintf(stderr, "mr_access_probe: bad address %s port %s: %s\n", addr,
			port ? port : "-", gai_strerror(rc));
		return -1;
	}
	memcpy(out, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	return 0;
}

/*
 * Waits up to timeout_ms for the next rdma_cm event and returns it (the caller acks it)
 * if it has the expected type; anything else is an error.
 */
static struct rdma_cm_event *wait_event(struct rdma_event_channel *ch,
					enum rdma_cm_event_type expected, int timeout_ms)
{
	struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev;
	int n = poll(&pfd, 1, timeout_ms);

	if (n == 0) {
		fprintf(stderr, "mr_access_probe: no %s within %d ms\n",
			rdma_event_str(expected), timeout_ms);
		return NULL;
	}
	if (n < 0 || rdma_get_cm_event(ch, &ev)) {
		fail("waiting for an rdma_cm event");
		return NULL;
	}
	if (ev->event != expected) {
		fprintf(stderr, "mr_access_probe: got %s (status %d), wanted %s\n",
			rdma_event_str(ev->event), ev->status, rdma_event_str(expected));
		rdma_ack_cm_event(ev);
		return NULL;
	}
	return ev;
}

static int expect_event(struct rdma_event_channel *ch, enum rdma_cm_event_type expected,
			int timeout_ms)
{
	struct rdma_cm_event *ev = wait_event(ch, expected, timeout_ms);

	if (!ev)
		return -1;
	rdma_ack_cm_event(ev);
	return 0;
}

/* Per-connection verbs objects: a CQ with a completion channel and an RC QP. */
struct conn {
	struct rdma_cm_id *id;
	struct ibv_comp_channel *comp;
	struct ibv_cq *cq;
};

static int conn_create_qp(struct conn *c, struct ibv_pd *pd)
{
	struct ibv_qp_init_attr attr = {
	    .qp_type = IBV_QPT_RC,
	    .sq_sig_all = 1,
	    .cap = {.max_send_wr = 2,
		    .max_recv_wr = 1,
		    .max_send_sge = 1,
		    .max_recv_sge = 1},
	};

	c->comp = ibv_create_comp_channel(c->id->verbs);
	if (!c->comp)
		return fail("ibv_create_comp_channel");
	c->cq = ibv_create_cq(c->id->verbs, 4, NULL, c->comp, 0);
	if (!c->cq)
		return fail("ibv_create_cq");
	attr.send_cq = attr.recv_cq = c->cq;
	if (rdma_create_qp(c->id, pd, &attr))
		return fail("rdma_create_qp");
	return 0;
}

static void conn_destroy(struct conn *c)
{
	if (c->id && c->id->qp)
		rdma_destroy_qp(c->id);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->comp)
		ibv_destroy_comp_channel(c->comp);
	if (c->id)
		rdma_destroy_id(c->id);
	memset(c, 0, sizeof(*c));
}

/* Waits for the one completion of the work request posted on c; returns its status. */
static int wait_completion(struct conn *c, enum ibv_wc_status *status)
{
	struct pollfd pfd = {.fd = c->comp->fd, .events = POLLIN};
	struct ibv_wc wc;

	for (;;) {
		int n = ibv_poll_cq(c->cq, 1, &wc);

		if (n < 0)
			return fail("ibv_poll_cq");
		if (n == 1) {
			*status = wc.status;
			return 0;
		}
		n = poll(&pfd, 1, COMPLETION_TIMEOUT_MS);
		if (n <= 0) {
			fprintf(stderr, "mr_access_probe: no completion within %d ms\n",
				COMPLETION_TIMEOUT_MS);
			return -1;
		}
		struct ibv_cq *cq;
		void *ctx;
		if (ibv_get_cq_event(c->comp, &cq, &ctx))
			return fail("ibv_get_cq_event");
		ibv_ack_cq_events(cq, 1);
		if (ibv_req_notify_cq(c->cq, 0))
			return fail("ibv_req_notify_cq");
	}
}

/* ------------------------------------------------------------------------- client ----
 */

/* Counts bytes in [from, to) of p that differ from value. */
static size_t count_not(const unsigned char *p, size_t from, size_t to,
			unsigned char value)
{
	size_t bad = 0;

	for (size_t i = from; i < to; i++)
		bad += p[i] != value;
	return bad;
}

/* The client's side of one connection: its own PD, a local buffer, the server's regions.
 */
struct client_conn {
	struct rdma_event_channel *ch;
	struct conn c;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	unsigned char buf[PAGE];
	struct regions_wire regions;
};

static int client_connect(struct client_conn *cc, const struct sockaddr_storage *server,
			  const struct sockaddr_storage *local)
{
	struct rdma_conn_param param = {.responder_resources = 1,
					.initiator_depth = 1,
					.retry_count = 3,
					.rnr_retry_count = 3};
	struct rdma_cm_event *ev;

	cc->ch = rdma_create_event_channel();
	if (!cc->ch)
		return fail("rdma_create_event_channel");
	if (rdma_create_id(cc->ch, &cc->c.id, NULL, RDMA_PS_TCP))
		return fail("rdma_create_id");
	if (rdma_resolve_addr(cc->c.id, (struct sockaddr *)local,
			      (struct sockaddr *)server, RESOLVE_TIMEOUT_MS) ||
	    expect_event(cc->ch, RDMA_CM_EVENT_ADDR_RESOLVED,
			 RESOLVE_TIMEOUT_MS + CM_TIMEOUT_MS) ||
	    rdma_resolve_route(cc->c.id, RESOLVE_TIMEOUT_MS) ||
	    expect_event(cc->ch, RDMA_CM_EVENT_ROUTE_RESOLVED,
			 RESOLVE_TIMEOUT_MS + CM_TIMEOUT_MS))
		return -1;
	cc->pd = ibv_alloc_pd(cc->c.id->verbs);
	if (!cc->pd)
		return fail("ibv_alloc_pd");
	cc->mr = ibv_reg_mr(cc->pd, cc->buf, sizeof(cc->buf), IBV_ACCESS_LOCAL_WRITE);
	if (!cc->mr)
		return fail("ibv_reg_mr");
	if (conn_create_qp(&cc->c, cc->pd) || ibv_req_notify_cq(cc->c.cq, 0))
		return -1;
	if (rdma_connect(cc->c.id, &param))
		return fail("rdma_connect");
	ev = wait_event(cc->ch, RDMA_CM_EVENT_ESTABLISHED, CM_TIMEOUT_MS);
	if (!ev)
		return -1;
	bool have_regions = ev->param.conn.private_data_len >= sizeof(cc->regions);
	if (have_regions)
		memcpy(&cc->regions, ev->param.conn.private_data, sizeof(cc->regions));
	rdma_ack_cm_event(ev);
	if (!have_regions) {
		fprintf(stderr,
			"mr_access_probe: the server sent no region descriptor\n");
		return -1;
	}
	return 0;
}

static int post_and_wait(struct client_conn *cc, const struct probe_case *pc,
			 enum ibv_wc_status *status)
{
	const struct regions_wire *r = &cc->regions;
	uint64_t base = be64toh(pc->on_control ? r->control_addr : r->guarded_addr);
	struct ibv_sge sge = {
	    .addr = (uintptr_t)cc->buf, .length = pc->len, .lkey = cc->mr->lkey};
	struct ibv_send_wr wr = {
	    .opcode = pc->opcode,
	    .sg_list = &sge,
	    .num_sge = 1,
	    .wr.rdma =
		{
		    .remote_addr = base + (uint64_t)pc->offset,
		    .rkey = be32toh(pc->on_control ? r->control_rkey : r->guarded_rkey),
		},
	};
	struct ibv_send_wr *bad;

	memset(cc->buf, pc->opcode == IBV_WR_RDMA_READ ? 0 : PAYLOAD, sizeof(cc->buf));
	if (ibv_post_send(cc->c.id->qp, &wr, &bad))
		return fail("ibv_post_send");
	return wait_completion(&cc->c, status);
}

static void client_close(struct client_conn *cc)
{
	conn_destroy(&cc->c);
	if (cc->mr)
		ibv_dereg_mr(cc->mr);
	if (cc->pd)
		ibv_dealloc_pd(cc->pd);
	if (cc->ch)
		rdma_destroy_event_channel(cc->ch);
}

/* One case over its own connection; returns 1 as expected, 0 not as expected, -1 error.
 */
static int run_case(const struct probe_case *pc, const struct sockaddr_storage *server,
		    const struct sockaddr_storage *local)
{
	static struct client_conn cc;
	enum ibv_wc_status status = IBV_WC_GENERAL_ERR;
	int result = -1;

	memset(&cc, 0, sizeof(cc));
	if (client_connect(&cc, server, local) == 0 &&
	    post_and_wait(&cc, pc, &status) == 0) {
		result = status == pc->expect;
		/* a READ that succeeds must also have fetched the server's bytes */
		if (status == IBV_WC_SUCCESS && pc->opcode == IBV_WR_RDMA_READ &&
		    count_not(cc.buf, 0, pc->len, CONTROL_FILL))
			result = 0;
		printf("%s: %s: %s (expected %s)\n", result ? "ok" : "FAIL", pc->name,
		       ibv_wc_status_str(status), ibv_wc_status_str(pc->expect));
		/* the server counts connections by their end */
		if (rdma_disconnect(cc.c.id) ||
		    expect_event(cc.ch, RDMA_CM_EVENT_DISCONNECTED, CM_TIMEOUT_MS))
			result = -1;
	}
	client_close(&cc);
	return result;
}

static int client(const char *server_addr, const char *port, const char *local_addr)
{
	struct sockaddr_storage server, local;
	int failures = 0;

	if (resolve(server_addr, port, &server) || resolve(local_addr, NULL, &local))
		return 1;
	for (size_t i = 0; i < N_CASES; i++) {
		if (run_case(&cases[i], &server, &local) != 1) {
			printf("FAIL: %s\n", cases[i].name);
			failures++;
		}
	}
	return failures ? 1 : 0;
}

/* ------------------------------------------------------------------------- server ----
 */

struct target {
	unsigned char *arena; /* canary page, guarded page, canary page */
	unsigned char *guarded;
	unsigned char control[PAGE];
	struct ibv_mr *guarded_mr;
	struct ibv_mr *control_mr;
};

static int serve_one(struct rdma_event_channel *ch, struct ibv_pd *pd, struct target *t,
		     int timeout_ms)
{
	struct rdma_cm_event *ev =
	    wait_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST, timeout_ms);
	struct regions_wire regions = {
	    .guarded_addr = htobe64((uintptr_t)t->guarded),
	    .guarded_rkey = htobe32(t->guarded_mr->rkey),
	    .guarded_len = htobe32(PAGE),
	    .control_addr = htobe64((uintptr_t)t->control),
	    .control_rkey = htobe32(t->control_mr->rkey),
	    .control_len = htobe32(PAGE),
	};
	struct rdma_conn_param param = {.responder_resources = 1,
					.initiator_depth = 1,
					.private_data = &regions,
					.private_data_len = sizeof(regions)};
	struct conn c = {0};
	int rc = -1;

	if (!ev)
		return -1;
	c.id = ev->id;
	rdma_ack_cm_event(ev);
	if (c.id->verbs != pd->context) {
		fprintf(stderr,
			"mr_access_probe: request arrived on another RDMA device\n");
		goto out;
	}
	if (conn_create_qp(&c, pd))
		goto out;
	if (rdma_accept(c.id, &param)) {
		fail("rdma_accept");
		goto out;
	}
	if (expect_event(ch, RDMA_CM_EVENT_ESTABLISHED, CM_TIMEOUT_MS) ||
	    expect_event(ch, RDMA_CM_EVENT_DISCONNECTED, CM_TIMEOUT_MS))
		goto out;
	rc = 0;
out:
	conn_destroy(&c);
	return rc;
}

static int check_memory(const struct target *t)
{
	const unsigned char *g = t->guarded;
	size_t canary = count_not(t->arena, 0, PAGE, CANARY) +
			count_not(t->arena, 2 * PAGE, 3 * PAGE, CANARY);
	size_t written = count_not(g, LEGAL_WRITE_OFFSET,
				   LEGAL_WRITE_OFFSET + LEGAL_WRITE_LEN, PAYLOAD);
	size_t rest = count_not(g, 0, LEGAL_WRITE_OFFSET, 0) +
		      count_not(g, LEGAL_WRITE_OFFSET + LEGAL_WRITE_LEN, PAGE, 0);

	printf("%s: the legal write landed (%zu of %u bytes differ)\n",
	       written ? "FAIL" : "ok", written, LEGAL_WRITE_LEN);
	printf("%s: nothing else in the page changed (%zu bytes differ)\n",
	       rest ? "FAIL" : "ok", rest);
	printf("%s: the unregistered pages around it are intact (%zu bytes differ)\n",
	       canary ? "FAIL" : "ok", canary);
	return written || rest || canary ? 1 : 0;
}

static int server(const char *local_addr, const char *port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *listen_id = NULL;
	struct sockaddr_storage local;
	struct target t = {0};
	struct ibv_pd *pd = NULL;
	int rc = 1;

	if (!ch) {
		fail("rdma_create_event_channel");
		return 1;
	}
	if (resolve(local_addr, port, &local))
		goto out;
	if (rdma_create_id(ch, &listen_id, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(listen_id, (struct sockaddr *)&local) ||
	    rdma_listen(listen_id, 4)) {
		fail("rdma_cm listen");
		goto out;
	}
	if (!listen_id->verbs) {
		fprintf(stderr, "mr_access_probe: %s is not on an RDMA device\n",
			local_addr);
		goto out;
	}
	pd = ibv_alloc_pd(listen_id->verbs);
	t.arena = aligned_alloc(PAGE, 3 * PAGE);
	if (!pd || !t.arena) {
		fail("ibv_alloc_pd/aligned_alloc");
		goto out;
	}
	memset(t.arena, CANARY, 3 * PAGE);
	t.guarded = t.arena + PAGE;
	memset(t.guarded, 0, PAGE);
	memset(t.control, CONTROL_FILL, sizeof(t.control));
	/* the access rights under test: what smcr gives its RMBs */
	t.guarded_mr = ibv_reg_mr(pd, t.guarded, PAGE,
				  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	t.control_mr = ibv_reg_mr(pd, t.control, sizeof(t.control),
				  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!t.guarded_mr || !t.control_mr) {
		fail("ibv_reg_mr");
		goto out;
	}
	printf("listening on %s port %s (%s)\n", local_addr, port,
	       ibv_get_device_name(listen_id->verbs->device));
	fflush(stdout);

	rc = 0;
	for (size_t i = 0; i < N_CASES; i++) {
		if (serve_one(ch, pd, &t,
			      i == 0 ? FIRST_CONNECT_TIMEOUT_MS : CM_TIMEOUT_MS)) {
			printf("FAIL: connection %zu (%s)\n", i + 1, cases[i].name);
			rc = 1;
			break;
		}
	}
	rc |= check_memory(&t);
out:
	if (t.guarded_mr)
		ibv_dereg_mr(t.guarded_mr);
	if (t.control_mr)
		ibv_dereg_mr(t.control_mr);
	free(t.arena);
	if (pd)
		ibv_dealloc_pd(pd);
	if (listen_id)
		rdma_destroy_id(listen_id);
	rdma_destroy_event_channel(ch);
	return rc;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && !strcmp(argv[1], "server"))
		return server(argv[2], argv[3]);
	if (argc == 5 && !strcmp(argv[1], "client"))
		return client(argv[2], argv[3], argv[4]);
	fprintf(stderr, "usage: mr_access_probe server LOCAL_ADDR PORT\n"
			"       mr_access_probe client SERVER_ADDR PORT LOCAL_ADDR\n");
	return 2;
}
