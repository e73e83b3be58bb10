// SPDX-License-Identifier: MIT
/*
 * Generic netlink for the engine (see genl.h).  Headers are read with
 * memcpy: a datagram's bytes may sit anywhere in a caller's buffer.
 */
#include "smcr/genl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/smc.h>

#include "common/config.h"
#include "smcr/libc.h"

#define GENL_RECV_BUF 32768 /* a dump datagram is at most 32 KiB (netlink_dump) */

static size_t align4(size_t n)
{
	return (n + 3) & ~(size_t)3;
}

enum smcr_genl_step smcr_genl_parse(const void *buf, size_t len, smcr_genl_msg_fn *fn,
				    void *arg)
{
	const uint8_t *p = buf;

	if (len == 0)
		return SMCR_GENL_FAIL; /* netlink sends no empty datagram */
	while (len > 0) {
		struct nlmsghdr h;
		size_t mlen;

		if (len < NLMSG_HDRLEN)
			return SMCR_GENL_FAIL;
		memcpy(&h, p, sizeof(h));
		mlen = h.nlmsg_len;
		if (mlen < NLMSG_HDRLEN || mlen > len)
			return SMCR_GENL_FAIL;
		if (h.nlmsg_type == NLMSG_DONE || h.nlmsg_type == NLMSG_ERROR) {
			int32_t err = 0;

			/* DONE may carry a dump's error, ERROR an errno or 0 (an ack) */
			if (mlen >= NLMSG_HDRLEN + sizeof(err))
				memcpy(&err, p + NLMSG_HDRLEN, sizeof(err));
			else if (h.nlmsg_type == NLMSG_ERROR)
				return SMCR_GENL_FAIL;
			return err < 0 ? SMCR_GENL_FAIL : SMCR_GENL_DONE;
		}
		if (h.nlmsg_type == NLMSG_OVERRUN)
			return SMCR_GENL_FAIL;
		if (h.nlmsg_type >= NLMSG_MIN_TYPE && mlen >= NLMSG_HDRLEN + GENL_HDRLEN)
			fn(p + NLMSG_HDRLEN + GENL_HDRLEN,
			   mlen - NLMSG_HDRLEN - GENL_HDRLEN, arg);
		if (h.nlmsg_type >= NLMSG_MIN_TYPE && !(h.nlmsg_flags & NLM_F_MULTI))
			return SMCR_GENL_DONE; /* the one answer to a plain request */
		mlen = align4(mlen);
		if (mlen >= len)
			break;
		p += mlen;
		len -= mlen;
	}
	return SMCR_GENL_MORE;
}

bool smcr_genl_attr(const uint8_t **p, size_t *len, uint16_t *type, const uint8_t **data,
		    size_t *dlen)
{
	struct nlattr a;
	size_t step;

	if (*len < NLA_HDRLEN)
		return false;
	memcpy(&a, *p, sizeof(a));
	if (a.nla_len < NLA_HDRLEN || a.nla_len > *len)
		return false;
	*type = a.nla_type & NLA_TYPE_MASK;
	*data = *p + NLA_HDRLEN;
	*dlen = a.nla_len - NLA_HDRLEN;
	step = align4(a.nla_len);
	if (step > *len)
		step = *len; /* the last attribute, unpadded */
	*p += step;
	*len -= step;
	return true;
}

void smcr_genl_str(const uint8_t *data, size_t dlen, char *out, size_t cap)
{
	size_t n = strnlen((const char *)data, dlen);

	if (n >= cap)
		n = cap - 1;
	memcpy(out, data, n);
	out[n] = '\0';
}

void smcr_genl_family_msg(const uint8_t *attrs, size_t len, void *arg)
{
	struct smcr_genl_family *f = arg;
	size_t want = strlen(f->name), dlen;
	const uint8_t *data;
	bool named = false;
	uint16_t type, id = 0;

	while (smcr_genl_attr(&attrs, &len, &type, &data, &dlen)) {
		if (type == CTRL_ATTR_FAMILY_NAME) {
			/* the whole name, not a prefix of a longer one */
			named = strnlen((const char *)data, dlen) == want &&
				!memcmp(data, f->name, want);
		} else if (type == CTRL_ATTR_FAMILY_ID && dlen >= sizeof(id)) {
			memcpy(&id, data, sizeof(id));
		}
	}
	if (named && id)
		f->id = id;
}

static bool has_eid(const struct smcr_genl_ueids *t, const char eid[SMCR_CLC_EID_LEN])
{
	for (unsigned i = 0; i < t->n; i++)
		if (!memcmp(t->eid[i], eid, SMCR_CLC_EID_LEN))
			return true;
	return false;
}

void smcr_genl_ueid_msg(const uint8_t *attrs, size_t len, void *arg)
{
	struct smcr_genl_ueids *t = arg;
	const uint8_t *data;
	uint16_t type;
	size_t dlen;

	while (smcr_genl_attr(&attrs, &len, &type, &data, &dlen)) {
		char eid[SMCR_CONFIG_EID_LEN];
		size_t n;

		if (type != SMC_NLA_EID_TABLE_ENTRY)
			continue;
		/* the kernel's 32 bytes, blank padded, then its NUL */
		n = strnlen((const char *)data, dlen);
		while (n > 0 && data[n - 1] == ' ')
			n--;
		if (smcr_config_parse_eid((const char *)data, n, eid) < 0)
			t->bad++;
		else if (!has_eid(t, eid) && t->n < SMCR_CLC_MAX_EIDS)
			memcpy(t->eid[t->n++], eid, SMCR_CLC_EID_LEN);
	}
}

/* ---- talking to the kernel -------------------------------------------------------- */

int smcr_genl_open(int timeout_ms)
{
	struct timeval tv = {.tv_sec = timeout_ms / 1000,
			     .tv_usec = (timeout_ms % 1000) * 1000};
	int e = errno, fd;

	fd = smcr_libc.socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	if (fd >= 0)
		(void)smcr_libc.setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	errno = e;
	return fd;
}

void smcr_genl_close(int fd)
{
	int e = errno;

	if (fd >= 0)
		smcr_libc.close(fd);
	errno = e;
}

int smcr_genl_talk(int fd, uint16_t family, uint8_t cmd, uint16_t flags,
		   smcr_genl_msg_fn *fn, void *arg)
{
	struct {
		struct nlmsghdr nlh;
		struct genlmsghdr g;
	} r;
	enum smcr_genl_step step = SMCR_GENL_MORE;
	uint8_t *buf;
	int e = errno;

	memset(&r, 0, sizeof(r));
	r.nlh.nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN);
	r.nlh.nlmsg_type = family;
	r.nlh.nlmsg_flags = (uint16_t)(NLM_F_REQUEST | flags);
	r.g.cmd = cmd;
	r.g.version = 1; /* CTRL_CMD_GETFAMILY's and SMC_GENL_FAMILY_VERSION */
	buf = malloc(GENL_RECV_BUF);
	if (buf &&
	    smcr_libc.send(fd, &r, r.nlh.nlmsg_len, 0) == (ssize_t)r.nlh.nlmsg_len) {
		while (step == SMCR_GENL_MORE) {
			ssize_t n = smcr_libc.recv(fd, buf, GENL_RECV_BUF, 0);

			step = n > 0 ? smcr_genl_parse(buf, (size_t)n, fn, arg)
				     : SMCR_GENL_FAIL;
		}
	}
	free(buf);
	errno = e;
	return step == SMCR_GENL_DONE ? 0 : -1;
}

uint16_t smcr_genl_family(int fd, const char *name)
{
	struct smcr_genl_family f = {.name = name};

	if (smcr_genl_talk(fd, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, NLM_F_DUMP,
			   smcr_genl_family_msg, &f))
		return 0;
	return f.id;
}
