/* SPDX-License-Identifier: MIT */
/*
 * CLC Decline reason codes ("peer diagnosis", the kernel's SMC_CLC_DECL_*)
 * and their names.  The stats records carry a fallback's reason as one of
 * these codes, so the library and smcr-stat share the one table
 * (src/smcr/decline.c, built into both).
 */
#ifndef SMCR_DECLINE_H
#define SMCR_DECLINE_H

#include <stdint.h>

/* Decline reason codes ("peer diagnosis"), Linux SMC_CLC_DECL_*. */
enum smcr_clc_decl {
	SMCR_CLC_DECL_MEM = 0x01010000,
	SMCR_CLC_DECL_TIMEOUT_CL = 0x02010000,
	SMCR_CLC_DECL_TIMEOUT_AL = 0x02020000,
	SMCR_CLC_DECL_CNFERR = 0x03000000,
	SMCR_CLC_DECL_PEERNOSMC = 0x03010000,
	SMCR_CLC_DECL_IPSEC = 0x03020000,
	SMCR_CLC_DECL_NOSMCDEV = 0x03030000,
	SMCR_CLC_DECL_NOSMCDDEV = 0x03030001,
	SMCR_CLC_DECL_NOSMCRDEV = 0x03030002,
	SMCR_CLC_DECL_NOISM2SUPP = 0x03030003,
	SMCR_CLC_DECL_NOV2EXT = 0x03030004,
	SMCR_CLC_DECL_NOV2DEXT = 0x03030005,
	SMCR_CLC_DECL_NOSEID = 0x03030006,
	SMCR_CLC_DECL_NOSMCD2DEV = 0x03030007,
	SMCR_CLC_DECL_NOUEID = 0x03030008,
	SMCR_CLC_DECL_RELEASEERR = 0x03030009,
	SMCR_CLC_DECL_MAXCONNERR = 0x0303000A,
	SMCR_CLC_DECL_MAXLINKERR = 0x0303000B,
	SMCR_CLC_DECL_MODEUNSUPP = 0x03040000,
	SMCR_CLC_DECL_RMBE_EC = 0x03050000,
	SMCR_CLC_DECL_OPTUNSUPP = 0x03060000,
	SMCR_CLC_DECL_DIFFPREFIX = 0x03070000,
	SMCR_CLC_DECL_GETVLANERR = 0x03080000,
	SMCR_CLC_DECL_ISMVLANERR = 0x03090000,
	SMCR_CLC_DECL_NOACTLINK = 0x030A0000,
	SMCR_CLC_DECL_NOSRVLINK = 0x030B0000,
	SMCR_CLC_DECL_VERSMISMAT = 0x030C0000,
	SMCR_CLC_DECL_MAX_DMB = 0x030D0000,
	SMCR_CLC_DECL_NOROUTE = 0x030E0000,
	SMCR_CLC_DECL_NOINDIRECT = 0x030F0000,
	SMCR_CLC_DECL_SYNCERR = 0x04000000,
	SMCR_CLC_DECL_PEERDECL = 0x05000000,
	SMCR_CLC_DECL_INTERR = 0x09990000,
	SMCR_CLC_DECL_ERR_RTOK = 0x09990001,
	SMCR_CLC_DECL_ERR_RDYLNK = 0x09990002,
	SMCR_CLC_DECL_ERR_REGBUF = 0x09990003,
	/* smcr's own, never on the wire: the learned policy kept it TCP (src/smcr/learn.h) */
	SMCR_CLC_DECL_SHORTFLOWS = 0x0A010000,
	/* smcr's own, sent: a same-host offer whose source is not this host (include/smcr/engine.h) */
	SMCR_CLC_DECL_NOTLOCAL = 0x0A020000,
	/*
	 * smcr's own, sent: an accepted connection left its program image before
	 * its handshake (exec into a program without smcr, or passed to another
	 * process over SCM_RIGHTS)
	 */
	SMCR_CLC_DECL_HANDOFF = 0x0A030000,
	/*
	 * smcr's own, sent: the process confines its system calls (seccomp), so
	 * its connections made from then on stay TCP (include/smcr/engine.h)
	 */
	SMCR_CLC_DECL_CONFINED = 0x0A040000,
	/*
	 * smcr's own, sent: an SMC-R first contact whose peer GID is not the
	 * address its TCP connection comes from (src/smcr/lgr.h, "Identity")
	 */
	SMCR_CLC_DECL_GIDNOTPEER = 0x0A050000,
	/*
	 * smcr's own, never on the wire: a rule of the rules file keeps the
	 * connection TCP (src/common/rules.h; a server declines with NOSMCDEV)
	 */
	SMCR_CLC_DECL_RULE = 0x0A060000,
	/*
	 * smcr's own, sent: the program sends with MSG_ZEROCOPY (SO_ZEROCOPY),
	 * whose completions only the kernel's TCP reports
	 */
	SMCR_CLC_DECL_ZEROCOPY = 0x0A070000,
	/*
	 * smcr's own, sent: the program asked for receive or send timestamps
	 * (SO_TIMESTAMP, SO_TIMESTAMPNS, SO_TIMESTAMPING), which only the
	 * kernel's TCP takes as its segments come and go
	 */
	SMCR_CLC_DECL_TIMESTAMP = 0x0A080000,
	/*
	 * smcr's own, sent: the program set up io_uring through syscall() at
	 * run time, whose reads and writes of its sockets no wrapper sees
	 */
	SMCR_CLC_DECL_IOURING = 0x0A090000,
	/*
	 * smcr's own, never on the wire: the program sent urgent data
	 * (MSG_OOB), which only TCP carries, so its SMC connection went on over TCP
	 */
	SMCR_CLC_DECL_OOB = 0x0A0A0000,
	/*
	 * smcr's own, never on the wire: the peer's end went on over TCP (its
	 * socket left for a program outside the connection), and this end followed
	 */
	SMCR_CLC_DECL_PEERTCP = 0x0A0B0000,
	/*
	 * smcr's own, never on the wire: a forked process used its copy of an
	 * SMC-R connection that could not go on over TCP (the peer is the
	 * kernel's SMC, or the process that runs it is gone or did not
	 * answer), so the copy reads as reset in that process
	 */
	SMCR_CLC_DECL_FORKRESET = 0x0A0C0000,
};

/* "NOSMCRDEV" etc. for a known code, NULL otherwise. */
const char *smcr_clc_decl_name(uint32_t code);

#endif /* SMCR_DECLINE_H */
