/* Helpers of the C tests: they run unchanged on the shim and on a host with an mlx5 card.
 * Exit status: 0 pass, 1 fail (the failed check is printed), 77 skip (the reason printed). */
#ifndef MLX5SIM_TEST_COMMON_H
#define MLX5SIM_TEST_COMMON_H

#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>

#define SKIP(...) do { printf("SKIP: " __VA_ARGS__); printf("\n"); exit(77); } while (0)
#define FAIL(...) do { printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); exit(1); } while (0)
#define CHECK(cond, ...) do { if (!(cond)) FAIL(__VA_ARGS__); } while (0)
#define CHECK_EQ(a, b, what) do { long long _a = (long long)(a), _b = (long long)(b); \
	if (_a != _b) FAIL("%s: got %lld, expected %lld", what, _a, _b); } while (0)

/* The first mlx5 device, or skip. */
static inline struct ibv_device *first_mlx5(struct ibv_device ***list_out)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n == 0)
		SKIP("no RDMA device");
	for (int i = 0; i < n; i++)
		if (mlx5dv_is_supported(list[i])) {
			*list_out = list;
			return list[i];
		}
	SKIP("no mlx5 device");
}

/* One end of an RC connection: its own CQ and QP on a shared context and PD. */
struct end {
	struct ibv_cq *cq;
	struct ibv_qp *qp;
};

/* An RC QP with the ibv_wr_* API (and, if dv_ops, mlx5dv send ops). */
static inline struct ibv_qp *rc_qp(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq,
				   uint64_t dv_ops)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 4, .max_recv_sge = 4 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_SEND |
				  IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
	};
	if (!dv_ops)
		return ibv_create_qp_ex(ctx, &a);
	struct mlx5dv_qp_init_attr dv = { .comp_mask = MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS,
					  .send_ops_flags = dv_ops };
	return mlx5dv_create_qp(ctx, &a, &dv);
}

/* Move qp through INIT and RTR (towards peer on port 1 of ctx) to RTS. */
static inline void connect_qp(struct ibv_context *ctx, struct ibv_qp *qp, struct ibv_qp *peer)
{
	struct ibv_port_attr port;
	CHECK(ibv_query_port(ctx, 1, &port) == 0, "ibv_query_port");
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
						    IBV_ACCESS_REMOTE_READ };
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0,
		 "modify to INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = port.active_mtu;
	a.dest_qp_num = peer->qp_num;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.port_num = 1;
	a.ah_attr.dlid = port.lid;
	if (port.link_layer == IBV_LINK_LAYER_ETHERNET) {
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.hop_limit = 1;
		a.ah_attr.grh.sgid_index = 1;
		CHECK(ibv_query_gid(ctx, 1, 1, &a.ah_attr.grh.dgid) == 0, "ibv_query_gid");
	}
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER), 0,
		 "modify to RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				 IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC), 0,
		 "modify to RTS");
}

/* Poll until one completion arrives (a bounded number of tries). */
static inline struct ibv_wc poll_one(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	for (long i = 0; i < 100000000L; i++) {
		int n = ibv_poll_cq(cq, 1, &wc);
		CHECK(n >= 0, "ibv_poll_cq failed");
		if (n == 1)
			return wc;
	}
	FAIL("no completion");
}

#ifdef RDMA_CMA_H
/* The first device's IPv4 address, as librdmacm sees it: its GID 3 (IPv4-mapped, RoCE v2);
 * skips the test when the port has none. */
static inline struct sockaddr_in first_ipv4(void)
{
	int n = 0;
	struct ibv_context **devs = rdma_get_devices(&n);
	CHECK(devs && n > 0, "rdma_get_devices");
	union ibv_gid gid;
	if (ibv_query_gid(devs[0], 1, 3, &gid) || gid.raw[10] != 0xff)
		SKIP("the first device's port has no IPv4 address");
	struct sockaddr_in addr = { .sin_family = AF_INET };
	memcpy(&addr.sin_addr, &gid.raw[12], 4);
	rdma_free_devices(devs);
	return addr;
}
#endif

#endif
