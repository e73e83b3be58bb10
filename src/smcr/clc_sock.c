// SPDX-License-Identifier: MIT
/*
 * CLC messages over the TCP socket (clc.c encodes and decodes them): a
 * message is sent whole, received exactly (never a byte of what follows,
 * which belongs to the application), or peeked at without consuming it; a
 * Decline also as bytes, for the interposer to send itself.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "smcr/handshake_int.h"
#include "smcr/libc.h"
#include "smcr/sys.h"

int smcr_clc_sock_send(int fd, const struct smcr_clc_msg *msg, int64_t deadline)
{
	uint8_t buf[SMCR_CLC_MAX_LEN];
	enum smcr_clc_err err;
	size_t len = smcr_clc_encode(msg, buf, sizeof(buf), &err), off = 0;

	if (len == 0) {
		smcr_err("cannot encode CLC %s: %s", smcr_clc_type_str(msg->hdr.type),
			 smcr_clc_err_str(err));
		return -EINVAL;
	}
	while (off < len) {
		ssize_t n = smcr_libc.send(fd, buf + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n > 0) {
			off += (size_t)n;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			int w = smcr_sys_wait_fd(fd, POLLOUT, deadline);

			if (w <= 0)
				return w == 0 ? -ETIMEDOUT : w;
		} else if (n < 0 && errno != EINTR) {
			return -errno;
		}
	}
	return 0;
}

/* Read exactly `len` bytes (never more: what follows belongs to someone else). */
static int read_exact(int fd, uint8_t *buf, size_t len, int64_t deadline)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = smcr_libc.recv(fd, buf + got, len - got, MSG_DONTWAIT);

		if (n > 0) {
			got += (size_t)n;
		} else if (n == 0) {
			return -ECONNRESET;
		} else if (errno == EAGAIN || errno == EWOULDBLOCK) {
			int w = smcr_sys_wait_fd(fd, POLLIN, deadline);

			if (w <= 0)
				return w == 0 ? -ETIMEDOUT : w;
		} else if (errno != EINTR) {
			return -errno;
		}
	}
	return 0;
}

/* Receive one complete CLC message; anything malformed is a hard error. */
int smcr_clc_sock_recv(int fd, struct smcr_clc_msg *msg, int64_t deadline)
{
	uint8_t buf[SMCR_CLC_MAX_LEN];
	enum smcr_clc_err err;
	size_t len = 0;
	int rc;

	rc = read_exact(fd, buf, SMCR_CLC_HDR_LEN, deadline);
	if (rc)
		return rc;
	if (smcr_clc_frame(buf, SMCR_CLC_HDR_LEN, &len, &err) == SMCR_WIRE_INVALID ||
	    len > sizeof(buf) || len < SMCR_CLC_HDR_LEN) {
		smcr_warn("peer sent no valid CLC header: %s", smcr_clc_err_str(err));
		return -EPROTO;
	}
	rc = read_exact(fd, buf + SMCR_CLC_HDR_LEN, len - SMCR_CLC_HDR_LEN, deadline);
	if (rc)
		return rc;
	if (smcr_clc_decode(buf, len, msg, &len, &err) != SMCR_WIRE_OK) {
		smcr_warn("invalid CLC message: %s", smcr_clc_err_str(err));
		return -EPROTO;
	}
	return 0;
}

/* Our Decline, v2, for `reason`. */
static void decline_msg(struct smcr_clc_msg *m, uint32_t reason)
{
	memset(m, 0, sizeof(*m));
	m->hdr.type = SMCR_CLC_DECLINE;
	m->hdr.version = SMCR_CLC_V2;
	m->decline.diag = reason;
	m->decline.os_type = SMCR_CLC_OS_LINUX;
}

int smcr_clc_sock_decline(int fd, uint32_t reason, int64_t deadline)
{
	struct smcr_clc_msg m;

	decline_msg(&m, reason);
	/* "out of sync": the Accept named a link group we do not have (the kernel ends it) */
	m.hdr.flag = reason == SMCR_CLC_DECL_SYNCERR;
	return smcr_clc_sock_send(fd, &m, deadline);
}

size_t smcr_clc_decline_encode(uint32_t reason, void *buf, size_t cap)
{
	struct smcr_clc_msg m;
	enum smcr_clc_err err;

	decline_msg(&m, reason);
	return smcr_clc_encode(&m, buf, cap, &err);
}

/* A Decline from the peer: its reason, or "peer declined" if it gave none usable. */
int smcr_clc_decline_reason(const struct smcr_clc_msg *m)
{
	uint32_t d = m->decline.diag;

	return d > 0 && d <= INT32_MAX ? (int)d : SMCR_CLC_DECL_PEERDECL;
}

/*
 * The next CLC message on the stream if it is all there (peeked, not
 * consumed): 1 and *msg, 0 not complete yet (*need: bytes it takes; 0 none in), or
 * -errno (-ESHUTDOWN: the client closed; -EPROTO: not CLC).
 */
int smcr_clc_sock_peek(int fd, struct smcr_clc_msg *msg, int *need)
{
	uint8_t buf[SMCR_CLC_MAX_LEN];
	enum smcr_clc_err err;
	size_t len = 0;
	ssize_t n = smcr_libc.recv(fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);

	*need = 0; /* nothing in: any byte is news */
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -errno;
	*need = SMCR_CLC_HDR_LEN;
	if (n == 0)
		return -ESHUTDOWN;
	if (smcr_clc_frame(buf, (size_t)n, &len, &err) == SMCR_WIRE_INVALID ||
	    (len && (len > sizeof(buf) || len < SMCR_CLC_HDR_LEN))) {
		char name[SMCR_CONN_NAME_MAX];

		smcr_warn("fd %d: the peer sent no valid CLC message where one was due; %s",
			  smcr_fd_label(fd), smcr_conn_name(fd, name, sizeof(name)));
		return -EPROTO;
	}
	if (len)
		*need = (int)len;
	if (len == 0 || (size_t)n < len)
		return 0;
	if (smcr_clc_decode(buf, len, msg, &len, &err) != SMCR_WIRE_OK) {
		char name[SMCR_CONN_NAME_MAX];

		smcr_warn("fd %d: invalid CLC message: %s; %s", smcr_fd_label(fd),
			  smcr_clc_err_str(err), smcr_conn_name(fd, name, sizeof(name)));
		return -EPROTO;
	}
	return 1;
}
