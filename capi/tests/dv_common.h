/* Helpers of the mlx5dv C tests (mkey_sig.c, crypto.c). They run unchanged on the shim
 * (LD_LIBRARY_PATH=target/shim) and on a host with an mlx5 card.
 * Exit status: 0 pass, 1 fail (the failed check is named), 77 skip (the reason printed). */
#ifndef MLX5SIM_DV_COMMON_H
#define MLX5SIM_DV_COMMON_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>

#define SKIP(...) do { printf("SKIP: " __VA_ARGS__); printf("\n"); exit(77); } while (0)
#define FAIL(...) do { printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); exit(1); } while (0)
#define CHECK(cond, ...) do { if (!(cond)) FAIL(__VA_ARGS__); } while (0)
#define CHECK_EQ(a, b, what) do { unsigned long long _a = (unsigned long long)(a), _b = (unsigned long long)(b); \
	if (_a != _b) FAIL("%s: got 0x%llx, expected 0x%llx", what, _a, _b); } while (0)
#define PASS(what) printf("ok: %s\n", what)

/* The device named `name` opened with mlx5dv_open_device(DEVX), or skip. */
static inline struct ibv_context *dv_open_devx(const char *name)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx = NULL;

	if (!list || n == 0)
		SKIP("no RDMA device");
	for (int i = 0; i < n; i++) {
		if (strcmp(ibv_get_device_name(list[i]), name) != 0)
			continue;
		if (!mlx5dv_is_supported(list[i]))
			SKIP("%s is not an mlx5 device", name);
		struct mlx5dv_context_attr attr = { .flags = MLX5DV_CONTEXT_FLAGS_DEVX };
		ctx = mlx5dv_open_device(list[i], &attr);
		if (!ctx)
			SKIP("mlx5dv_open_device(%s, DEVX): %s", name, strerror(errno));
	}
	ibv_free_device_list(list);
	if (!ctx)
		SKIP("no device %s", name);
	return ctx;
}

/* mlx5dv_query_device with the signature and crypto caps. */
static inline struct mlx5dv_context dv_caps(struct ibv_context *ctx)
{
	struct mlx5dv_context dv = { .comp_mask = MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD |
						  MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD };
	int rc = mlx5dv_query_device(ctx, &dv);

	CHECK(rc == 0, "mlx5dv_query_device: %s", strerror(rc));
	return dv;
}

/* An RC QP made by mlx5dv_create_qp with the ibv_wr_* send ops and the mlx5dv mkey ops,
 * 512 bytes of inline room (a BSF needs it), scatter to CQE disabled. */
static inline struct ibv_qp *dv_qp(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 4, .max_recv_sge = 4,
			 .max_inline_data = 512 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_READ,
	};
	struct mlx5dv_qp_init_attr dv = {
		.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS | MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS,
		.create_flags = MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE,
		.send_ops_flags = MLX5DV_QP_EX_WITH_MKEY_CONFIGURE | MLX5DV_QP_EX_WITH_MR_LIST,
	};
	struct ibv_qp *qp = mlx5dv_create_qp(ctx, &a, &dv);

	CHECK(qp, "mlx5dv_create_qp(MKEY_CONFIGURE): %s", strerror(errno));
	return qp;
}

/* Move `qp` through INIT and RTR (towards `peer` on port 1 of the same context) to RTS. */
static inline void dv_connect(struct ibv_context *ctx, struct ibv_qp *qp, struct ibv_qp *peer)
{
	struct ibv_port_attr port;
	union ibv_gid gid;
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

	CHECK(ibv_query_port(ctx, 1, &port) == 0, "ibv_query_port: %s", strerror(errno));
	CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0, "ibv_query_gid: %s", strerror(errno));
	struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
				    .qp_access_flags = access };
	int rc = ibv_modify_qp(qp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	CHECK(rc == 0, "modify to INIT: %s", strerror(rc));
	struct ibv_qp_attr rtr = {
		.qp_state = IBV_QPS_RTR, .path_mtu = port.active_mtu, .dest_qp_num = peer->qp_num,
		.rq_psn = 0, .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
		.ah_attr = { .dlid = port.lid, .port_num = 1 },
	};
	if (port.link_layer == IBV_LINK_LAYER_ETHERNET) {
		rtr.ah_attr.is_global = 1;
		rtr.ah_attr.grh.dgid = gid;
		rtr.ah_attr.grh.sgid_index = 0;
		rtr.ah_attr.grh.hop_limit = 1;
	}
	rc = ibv_modify_qp(qp, &rtr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	CHECK(rc == 0, "modify to RTR: %s", strerror(rc));
	struct ibv_qp_attr rts = { .qp_state = IBV_QPS_RTS, .sq_psn = 0, .timeout = 14, .retry_cnt = 7,
				   .rnr_retry = 7, .max_rd_atomic = 1 };
	rc = ibv_modify_qp(qp, &rts, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
	CHECK(rc == 0, "modify to RTS: %s", strerror(rc));
}

static inline double dv_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* The next completion of `cq` within two seconds; fails naming `what` otherwise. */
static inline struct ibv_wc dv_poll_one(struct ibv_cq *cq, const char *what)
{
	struct ibv_wc wc;
	double end = dv_now() + 2.0;

	for (;;) {
		int n = ibv_poll_cq(cq, 1, &wc);
		CHECK(n >= 0, "%s: ibv_poll_cq failed", what);
		if (n == 1)
			return wc;
		if (dv_now() > end)
			FAIL("%s: no completion within 2 s", what);
	}
}

/* Poll `cq` for 50 ms and expect nothing (this also lets the provider consume CQEs it keeps
 * to itself, such as signature errors). */
static inline void dv_no_cqe(struct ibv_cq *cq, const char *what)
{
	struct ibv_wc wc;
	double end = dv_now() + 0.05;

	while (dv_now() < end) {
		int n = ibv_poll_cq(cq, 1, &wc);
		CHECK(n >= 0, "%s: ibv_poll_cq failed", what);
		CHECK(n == 0, "%s: unexpected completion (wr_id 0x%llx, status %s)", what,
		      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
	}
}

/* A successful completion of `wr_id` with `opcode`. */
static inline void dv_ok_cqe(struct ibv_cq *cq, uint64_t wr_id, int opcode, const char *what)
{
	struct ibv_wc wc = dv_poll_one(cq, what);

	CHECK(wc.status == IBV_WC_SUCCESS, "%s: status %s (vendor_err 0x%x)", what, ibv_wc_status_str(wc.status),
	      wc.vendor_err);
	CHECK_EQ(wc.wr_id, wr_id, what);
	CHECK_EQ(wc.opcode, opcode, what);
}

/* A page-aligned, zeroed buffer registered with `access`. */
static inline struct ibv_mr *dv_region(struct ibv_pd *pd, size_t len, int access, uint8_t **buf)
{
	void *p = NULL;

	CHECK(posix_memalign(&p, 4096, len) == 0, "posix_memalign");
	memset(p, 0, len);
	struct ibv_mr *mr = ibv_reg_mr(pd, p, len, access);
	CHECK(mr, "ibv_reg_mr(%zu bytes): %s", len, strerror(errno));
	*buf = p;
	return mr;
}

/* A signalled RDMA WRITE of one SGE through the ibv_wr_* API. */
static inline int dv_write(struct ibv_qp *qp, uint64_t wr_id, uint32_t lkey, uint64_t addr, uint32_t len,
			   uint32_t rkey, uint64_t remote_addr)
{
	struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(qp);

	ibv_wr_start(qpx);
	qpx->wr_id = wr_id;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qpx, rkey, remote_addr);
	ibv_wr_set_sge(qpx, lkey, addr, len);
	return ibv_wr_complete(qpx);
}

/* A pattern byte that differs per seed and is never 0. */
static inline uint8_t dv_pattern(size_t i, uint8_t seed)
{
	return (uint8_t)((uint8_t)(i * 31) + seed) | 1;
}

#endif
