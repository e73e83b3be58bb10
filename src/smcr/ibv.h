/* SPDX-License-Identifier: MIT */
/*
 * libibverbs, loaded at run time: the one header of the verbs transport that
 * includes <infiniband/verbs.h> (ib.h includes this one instead).
 *
 * libsmcr.so must start, and work as pass-through and same-host SMC, on
 * machines without rdma-core, so it has no DT_NEEDED on libibverbs.so.1:
 * smcr_ibv_load() dlopens it at the first SMC-R attempt and binds every
 * entry point we use into one table; after this header, the ibv_* names the
 * transport calls are macros that go through that table.  Code keeps
 * writing ibv_open_device(...), ibv_reg_mr(...) as rdma-core documents.
 *
 * Not every ibv_* "function" is a symbol: ibv_post_send, ibv_post_recv,
 * ibv_poll_cq and ibv_req_notify_cq are inline calls through the provider's
 * ops table (no symbol, nothing to bind), while ibv_reg_mr, ibv_reg_mr_iova,
 * ibv_query_port and ibv_query_gid_table are macros or inlines over other
 * symbols (ibv_reg_mr, ibv_reg_mr_iova2, ibv_query_port's compat form,
 * _ibv_query_gid_table): those are redefined here over the table.
 *
 * To use another ibv_* symbol: add one line to SMCR_IBV_SYMBOLS.  A symbol
 * missing from the list is an undefined reference in libsmcr.so, which
 * tests/check-exports.sh rejects (and the dynamic loader would refuse).
 *
 * libibverbs' own open/ioctl/socket/read/write calls reach the interposer's
 * wrappers (libsmcr.so comes first in the lookup scope); the engine calls
 * into libibverbs between smcr_foreign_enter() and smcr_foreign_leave()
 * (libc.h), and the interposer's hooks let such calls pass straight through.
 */
#ifndef SMCR_IBV_H
#define SMCR_IBV_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include <infiniband/verbs.h>

/* X(return type, name, (parameter types)) */
#define SMCR_IBV_SYMBOLS(X)                                                                 \
	X(struct ibv_device **, ibv_get_device_list, (int *))                               \
	X(void, ibv_free_device_list, (struct ibv_device **))                               \
	X(const char *, ibv_get_device_name, (struct ibv_device *))                         \
	X(struct ibv_context *, ibv_open_device, (struct ibv_device *))                     \
	X(int, ibv_close_device, (struct ibv_context *))                                    \
	X(int, ibv_query_port, (struct ibv_context *, uint8_t, struct _compat_ibv_port_attr *)) \
	X(ssize_t, _ibv_query_gid_table,                                                    \
	  (struct ibv_context *, struct ibv_gid_entry *, size_t, uint32_t, size_t))          \
	X(int, ibv_fork_init, (void))                                                       \
	X(int, ibv_get_async_event, (struct ibv_context *, struct ibv_async_event *))       \
	X(void, ibv_ack_async_event, (struct ibv_async_event *))                            \
	X(const char *, ibv_event_type_str, (enum ibv_event_type))                          \
	X(struct ibv_pd *, ibv_alloc_pd, (struct ibv_context *))                            \
	X(int, ibv_dealloc_pd, (struct ibv_pd *))                                           \
	X(struct ibv_mr *, ibv_reg_mr, (struct ibv_pd *, void *, size_t, int))              \
	X(struct ibv_mr *, ibv_reg_mr_iova2,                                                \
	  (struct ibv_pd *, void *, size_t, uint64_t, unsigned int))                        \
	X(int, ibv_dereg_mr, (struct ibv_mr *))                                             \
	X(struct ibv_comp_channel *, ibv_create_comp_channel, (struct ibv_context *))       \
	X(int, ibv_destroy_comp_channel, (struct ibv_comp_channel *))                       \
	X(struct ibv_cq *, ibv_create_cq,                                                   \
	  (struct ibv_context *, int, void *, struct ibv_comp_channel *, int))              \
	X(int, ibv_destroy_cq, (struct ibv_cq *))                                           \
	X(int, ibv_get_cq_event, (struct ibv_comp_channel *, struct ibv_cq **, void **))    \
	X(void, ibv_ack_cq_events, (struct ibv_cq *, unsigned int))                         \
	X(struct ibv_qp *, ibv_create_qp, (struct ibv_pd *, struct ibv_qp_init_attr *))     \
	X(int, ibv_modify_qp, (struct ibv_qp *, struct ibv_qp_attr *, int))                 \
	X(int, ibv_destroy_qp, (struct ibv_qp *))                                           \
	X(const char *, ibv_wc_status_str, (enum ibv_wc_status))

#define SMCR_IBV_FIELD(ret, name, params) ret(*name) params;
struct smcr_ibv_table {
	SMCR_IBV_SYMBOLS(SMCR_IBV_FIELD)
};
#undef SMCR_IBV_FIELD

/* Filled by smcr_ibv_load(); read-only afterwards. */
extern struct smcr_ibv_table smcr_ibv;

/*
 * Load libibverbs.so.1 and bind the table, once per process (thread-safe).
 * 0, or -ENODEV when the library or one of its symbols is missing (logged
 * once; every later call answers the same at no cost).
 */
int smcr_ibv_load(void);

/* ---- the names the transport calls, over the table ---------------------------- */

#undef ibv_reg_mr
#undef ibv_reg_mr_iova
#undef ibv_query_port

#define ibv_get_device_list (*smcr_ibv.ibv_get_device_list)
#define ibv_free_device_list (*smcr_ibv.ibv_free_device_list)
#define ibv_get_device_name (*smcr_ibv.ibv_get_device_name)
#define ibv_open_device (*smcr_ibv.ibv_open_device)
#define ibv_close_device (*smcr_ibv.ibv_close_device)
#define ibv_fork_init (*smcr_ibv.ibv_fork_init)
#define ibv_get_async_event (*smcr_ibv.ibv_get_async_event)
#define ibv_ack_async_event (*smcr_ibv.ibv_ack_async_event)
#define ibv_event_type_str (*smcr_ibv.ibv_event_type_str)
#define ibv_alloc_pd (*smcr_ibv.ibv_alloc_pd)
#define ibv_dealloc_pd (*smcr_ibv.ibv_dealloc_pd)
#define ibv_reg_mr_iova2 (*smcr_ibv.ibv_reg_mr_iova2)
#define ibv_dereg_mr (*smcr_ibv.ibv_dereg_mr)
#define ibv_create_comp_channel (*smcr_ibv.ibv_create_comp_channel)
#define ibv_destroy_comp_channel (*smcr_ibv.ibv_destroy_comp_channel)
#define ibv_create_cq (*smcr_ibv.ibv_create_cq)
#define ibv_destroy_cq (*smcr_ibv.ibv_destroy_cq)
#define ibv_get_cq_event (*smcr_ibv.ibv_get_cq_event)
#define ibv_ack_cq_events (*smcr_ibv.ibv_ack_cq_events)
#define ibv_create_qp (*smcr_ibv.ibv_create_qp)
#define ibv_modify_qp (*smcr_ibv.ibv_modify_qp)
#define ibv_destroy_qp (*smcr_ibv.ibv_destroy_qp)
#define ibv_wc_status_str (*smcr_ibv.ibv_wc_status_str)

/* The header's macro: ibv_reg_mr, or ibv_reg_mr_iova2 for the optional access range. */
#define ibv_reg_mr(pd, addr, length, access)                                             \
	(((access) & IBV_ACCESS_OPTIONAL_RANGE) == 0                                      \
		 ? smcr_ibv.ibv_reg_mr(pd, addr, length, (int)(access))                   \
		 : ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)(addr), (unsigned int)(access)))
#define ibv_reg_mr_iova(pd, addr, length, iova, access)                                  \
	ibv_reg_mr_iova2(pd, addr, length, iova, (unsigned int)(access))
#define ibv_query_gid_table(ctx, entries, max_entries, flags)                            \
	smcr_ibv._ibv_query_gid_table(ctx, entries, max_entries, flags, sizeof(*(entries)))

/* The header's ___ibv_query_port over the table. */
static inline int smcr_ibv_query_port(struct ibv_context *ctx, uint8_t port_num,
				      struct ibv_port_attr *attr)
{
	struct verbs_context *vctx = verbs_get_ctx_op(ctx, query_port);

	if (!vctx) {
		memset(attr, 0, sizeof(*attr));
		return smcr_ibv.ibv_query_port(ctx, port_num,
					       (struct _compat_ibv_port_attr *)attr);
	}
	return vctx->query_port(ctx, port_num, attr, sizeof(*attr));
}
#define ibv_query_port(ctx, port_num, attr) smcr_ibv_query_port(ctx, port_num, attr)

#endif /* SMCR_IBV_H */
