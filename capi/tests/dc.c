/* DC QPs through the C ABI, on one device: mlx5dv_create_qp of a DCI (with send ops) and of
 * a DCT on an SRQ with an access key, their errno (a DCT without an SRQ or with send ops, a
 * bad dc_type, MASK_DC on an RC QP), the DCT's INIT -> RTR and the DCI's INIT -> RTR -> RTS
 * (a DCT to RTS is EINVAL; ibv_query_qp of a DCT in RTR only, for the attributes it keeps),
 * then RDMA WRITE, SEND and READ from the DCI with
 * mlx5dv_wr_set_dc_addr: data checked at both ends; a wrong access key ends in
 * IBV_WC_RETRY_EXC_ERR with the memory untouched. */
#include "common.h"

#define KEY 0x0123456789abcdefULL

static struct ibv_qp *dc_qp(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_srq *srq,
			    int dct, uint64_t ops, uint32_t type)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = cq, .recv_cq = cq, .srq = srq, .qp_type = IBV_QPT_DRIVER, .sq_sig_all = 1,
		.cap = { .max_send_wr = 16, .max_send_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | (ops ? IBV_QP_INIT_ATTR_SEND_OPS_FLAGS : 0),
		.pd = pd, .send_ops_flags = ops,
	};
	struct mlx5dv_qp_init_attr dv = { .comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC };
	dv.dc_init_attr.dc_type = type ? type : (dct ? MLX5DV_DCTYPE_DCT : MLX5DV_DCTYPE_DCI);
	if (dct)
		dv.dc_init_attr.dct_access_key = KEY;
	return mlx5dv_create_qp(ctx, &a, &dv);
}

static int modify(struct ibv_qp *qp, enum ibv_qp_state to, int mask, union ibv_gid *gid)
{
	struct ibv_qp_attr a = {
		.qp_state = to, .pkey_index = 0, .port_num = 1, .path_mtu = IBV_MTU_1024, .min_rnr_timer = 12,
		.timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = 1, .sq_psn = 0x42,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
		.ah_attr = { .is_global = 1, .port_num = 1, .grh = { .dgid = *gid, .hop_limit = 64 } },
	};
	return ibv_modify_qp(qp, &a, mask) ? errno : 0;
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = ibv_open_device(first_mlx5(&list));
	CHECK(ctx, "ibv_open_device");
	struct ibv_port_attr port;
	CHECK_EQ(ibv_query_port(ctx, 1, &port), 0, "ibv_query_port");
	if (port.link_layer != IBV_LINK_LAYER_ETHERNET)
		SKIP("the address handles here are RoCE ones");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 32, NULL, NULL, 0);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	static uint8_t dst[4096], src[4096];
	struct ibv_mr *dmr = ibv_reg_mr(pd, dst, sizeof(dst),
					IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	struct ibv_mr *smr = ibv_reg_mr(pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	CHECK(pd && cq && srq && dmr && smr, "pd, cq, srq, mrs");
	uint64_t ops = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_READ;

	struct ibv_qp *dci = dc_qp(ctx, pd, cq, NULL, 0, ops, 0);
	if (!dci && errno == EOPNOTSUPP)
		SKIP("the device has no DC");
	CHECK(dci, "mlx5dv_create_qp(DCI): %s", strerror(errno));
	struct ibv_qp *dct = dc_qp(ctx, pd, cq, srq, 1, 0, 0);
	CHECK(dct, "mlx5dv_create_qp(DCT): %s", strerror(errno));
	errno = 0;
	CHECK(!dc_qp(ctx, pd, cq, NULL, 1, 0, 0) && errno == EINVAL, "a DCT without an SRQ: errno %d", errno);
	errno = 0;
	CHECK(!dc_qp(ctx, pd, cq, srq, 1, ops, 0) && errno == EINVAL, "a DCT with send ops: errno %d", errno);
	errno = 0;
	CHECK(!dc_qp(ctx, pd, cq, NULL, 0, ops, 3) && errno == EINVAL, "dc_type 3: errno %d", errno);
	struct ibv_qp_init_attr_ex rc = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .cap = { .max_send_wr = 1, .max_send_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd,
	};
	struct mlx5dv_qp_init_attr dv = { .comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC };
	dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCI;
	errno = 0;
	CHECK(!mlx5dv_create_qp(ctx, &rc, &dv) && errno == EINVAL, "MASK_DC on an RC QP: errno %d", errno);

	union ibv_gid gid;
	CHECK_EQ(ibv_query_gid(ctx, 1, 0, &gid), 0, "ibv_query_gid");
	int s = IBV_QP_STATE;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK_EQ(ibv_query_qp(dct, &qa, s, &qi), EINVAL, "ibv_query_qp of a DCT before RTR");
	CHECK_EQ(modify(dct, IBV_QPS_INIT, s | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PORT, &gid), 0,
		 "DCT to INIT");
	CHECK_EQ(modify(dct, IBV_QPS_RTR, s | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV | IBV_QP_PATH_MTU, &gid), 0,
		 "DCT to RTR");
	int rts = s | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_SQ_PSN;
	CHECK_EQ(modify(dct, IBV_QPS_RTS, rts, &gid), EINVAL, "DCT to RTS");
	CHECK_EQ(ibv_query_qp(dct, &qa, s | IBV_QP_PATH_MTU, &qi), 0, "ibv_query_qp of a DCT in RTR");
	CHECK_EQ(qa.qp_state, IBV_QPS_RTR, "the DCT's state");
	CHECK_EQ(ibv_query_qp(dct, &qa, s | IBV_QP_SQ_PSN, &qi), EINVAL, "ibv_query_qp of a DCT's send PSN");
	CHECK_EQ(modify(dci, IBV_QPS_INIT, s | IBV_QP_PKEY_INDEX | IBV_QP_PORT, &gid), 0, "DCI to INIT");
	CHECK_EQ(modify(dci, IBV_QPS_RTR, s | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN, &gid), EINVAL,
		 "DCI to RTR with a remote QP number");
	CHECK_EQ(modify(dci, IBV_QPS_RTR, s | IBV_QP_PATH_MTU | IBV_QP_AV, &gid), 0, "DCI to RTR");
	CHECK_EQ(modify(dci, IBV_QPS_RTS, rts, &gid), 0, "DCI to RTS");

	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1, .grh = { .dgid = gid, .hop_limit = 64 } };
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);
	CHECK(ah, "ibv_create_ah: %s", strerror(errno));
	for (int i = 0; i < 4096; i++)
		src[i] = (uint8_t)(i * 7 + 1), dst[i] = (uint8_t)(i * 3);
	struct ibv_sge rs = { .addr = (uintptr_t)dst + 2048, .length = 1024, .lkey = dmr->lkey };
	struct ibv_recv_wr rw = { .wr_id = 50, .sg_list = &rs, .num_sge = 1 }, *bad;
	CHECK_EQ(ibv_post_srq_recv(srq, &rw, &bad), 0, "ibv_post_srq_recv");

	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(dci);
	struct mlx5dv_qp_ex *mx = mlx5dv_qp_ex_from_ibv_qp_ex(x);
	CHECK(x && mx, "ibv_qp_to_qp_ex, mlx5dv_qp_ex_from_ibv_qp_ex");
	ibv_wr_start(x);
	x->wr_id = 1;
	ibv_wr_rdma_write(x, dmr->rkey, (uintptr_t)dst);
	mlx5dv_wr_set_dc_addr(mx, ah, dct->qp_num, KEY);
	ibv_wr_set_sge(x, smr->lkey, (uintptr_t)src, 1000);
	x->wr_id = 2;
	ibv_wr_send(x);
	mlx5dv_wr_set_dc_addr(mx, ah, dct->qp_num, KEY);
	ibv_wr_set_sge(x, smr->lkey, (uintptr_t)src + 1000, 300);
	x->wr_id = 3;
	ibv_wr_rdma_read(x, dmr->rkey, (uintptr_t)dst + 3500);
	mlx5dv_wr_set_dc_addr(mx, ah, dct->qp_num, KEY);
	ibv_wr_set_sge(x, smr->lkey, (uintptr_t)src + 3000, 100);
	CHECK_EQ(ibv_wr_complete(x), 0, "ibv_wr_complete");
	int seen = 0;
	for (int i = 0; i < 4; i++) {
		struct ibv_wc w = poll_one(cq);
		CHECK(w.status == IBV_WC_SUCCESS, "wr_id %llu: status %d", (unsigned long long)w.wr_id, w.status);
		if (w.wr_id == 50) {
			CHECK_EQ(w.qp_num, dct->qp_num, "the receive's qp_num: the DCT's");
			CHECK_EQ(w.byte_len, 300, "the SEND's byte_len");
		} else {
			CHECK_EQ(w.qp_num, dci->qp_num, "a send completion's qp_num: the DCI's");
		}
		seen |= 1 << (w.wr_id == 50 ? 0 : w.wr_id);
	}
	CHECK_EQ(seen, 0xf, "the completions of wr_id 1, 2, 3 and the receive");
	for (int i = 0; i < 1000; i++)
		CHECK_EQ(dst[i], (uint8_t)(i * 7 + 1), "the WRITE's bytes");
	for (int i = 0; i < 300; i++)
		CHECK_EQ(dst[2048 + i], (uint8_t)((1000 + i) * 7 + 1), "the SEND's bytes");
	for (int i = 0; i < 100; i++)
		CHECK_EQ(src[3000 + i], (uint8_t)((3500 + i) * 3), "the READ's bytes");

	/* Another access key: dropped at the DCT; the DCI's WQE ends in a transport retry error. */
	memset(dst, 0xee, 64);
	ibv_wr_start(x);
	x->wr_id = 9;
	ibv_wr_rdma_write(x, dmr->rkey, (uintptr_t)dst);
	mlx5dv_wr_set_dc_addr(mx, ah, dct->qp_num, KEY ^ 1);
	ibv_wr_set_sge(x, smr->lkey, (uintptr_t)src, 64);
	CHECK_EQ(ibv_wr_complete(x), 0, "ibv_wr_complete with another key");
	struct ibv_wc w = poll_one(cq);
	CHECK(w.wr_id == 9 && w.status == IBV_WC_RETRY_EXC_ERR, "another key: wr_id %llu status %d",
	      (unsigned long long)w.wr_id, w.status);
	for (int i = 0; i < 64; i++)
		CHECK_EQ(dst[i], 0xee, "the memory another key's WRITE aimed at");

	CHECK_EQ(ibv_destroy_ah(ah), 0, "ibv_destroy_ah");
	CHECK_EQ(ibv_destroy_qp(dci), 0, "ibv_destroy_qp(DCI)");
	CHECK_EQ(ibv_destroy_qp(dct), 0, "ibv_destroy_qp(DCT)");
	ibv_destroy_srq(srq);
	ibv_dereg_mr(dmr);
	ibv_dereg_mr(smr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("DC: a DCI's WRITE, SEND and READ to a DCT by mlx5dv_wr_set_dc_addr, the create and modify "
	       "errno, another access key dropped\n");
	return 0;
}
