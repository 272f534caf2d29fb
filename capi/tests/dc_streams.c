/* DCI streams and mlx5dv_map_ah_to_qp through the C ABI, on one device:
 * mlx5dv_query_device's dci_streams_caps, a DCI with 4 streams of which 2 may err, SENDs to a
 * DCT by mlx5dv_wr_set_dc_addr_stream with an lkey of another PD (IBV_WC_LOC_PROT_ERR), the
 * errored stream's next WQE flushed while another stream runs and the DCI stays in RTS,
 * mlx5dv_dci_stream_id_reset (EINVAL for a stream not in error), the DCI in ERR once two
 * streams erred; mlx5dv_map_ah_to_qp for an AH with a GRH. Skips where the device has no DCI
 * streams. */
#include "common.h"

#define KEY 0x0123456789abcdefULL

static struct ibv_qp *dc_qp(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_srq *srq,
			    int dct, uint8_t streams, uint8_t errored)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = cq, .recv_cq = cq, .srq = srq, .qp_type = IBV_QPT_DRIVER, .sq_sig_all = 1,
		.cap = { .max_send_wr = 16, .max_send_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | (dct ? 0 : IBV_QP_INIT_ATTR_SEND_OPS_FLAGS),
		.pd = pd, .send_ops_flags = dct ? 0 : IBV_QP_EX_WITH_SEND,
	};
	struct mlx5dv_qp_init_attr dv = { .comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC };
	dv.dc_init_attr.dc_type = dct ? MLX5DV_DCTYPE_DCT : MLX5DV_DCTYPE_DCI;
	if (dct) {
		dv.dc_init_attr.dct_access_key = KEY;
	} else {
		dv.comp_mask |= MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS;
		dv.dc_init_attr.dci_streams.log_num_concurent = streams;
		dv.dc_init_attr.dci_streams.log_num_errored = errored;
	}
	return mlx5dv_create_qp(ctx, &a, &dv);
}

static int modify(struct ibv_qp *qp, enum ibv_qp_state to, int mask, union ibv_gid *gid)
{
	struct ibv_qp_attr a = {
		.qp_state = to, .port_num = 1, .path_mtu = IBV_MTU_1024, .min_rnr_timer = 12, .timeout = 14,
		.retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = 1, .qp_access_flags = IBV_ACCESS_LOCAL_WRITE,
		.ah_attr = { .is_global = 1, .port_num = 1, .grh = { .dgid = *gid, .hop_limit = 64 } },
	};
	return ibv_modify_qp(qp, &a, mask) ? errno : 0;
}

static void send_on(struct ibv_qp *dci, struct ibv_ah *ah, uint32_t dctn, uint64_t wr_id, uint16_t stream,
		    struct ibv_mr *mr)
{
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(dci);
	struct mlx5dv_qp_ex *mx = mlx5dv_qp_ex_from_ibv_qp_ex(x);
	ibv_wr_start(x);
	x->wr_id = wr_id;
	ibv_wr_send(x);
	mlx5dv_wr_set_dc_addr_stream(mx, ah, dctn, KEY, stream);
	ibv_wr_set_sge(x, mr->lkey, (uintptr_t)mr->addr, 16);
	CHECK_EQ(ibv_wr_complete(x), 0, "ibv_wr_complete");
}

static enum ibv_qp_state state_of(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr i;
	CHECK_EQ(ibv_query_qp(qp, &a, IBV_QP_STATE, &i), 0, "ibv_query_qp");
	return a.qp_state;
}

/* The completion of wr_id, with this status; a receive at the DCT may come between. */
static void expect(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status status)
{
	for (int i = 0; i < 2; i++) {
		struct ibv_wc w = poll_one(cq);
		if (w.wr_id >= 100)
			continue;
		CHECK(w.wr_id == wr_id && w.status == status, "wr_id %llu status %d, expected %llu status %d",
		      (unsigned long long)w.wr_id, w.status, (unsigned long long)wr_id, status);
		return;
	}
	FAIL("no completion of wr_id %llu", (unsigned long long)wr_id);
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
	struct mlx5dv_context dvc = { .comp_mask = MLX5DV_CONTEXT_MASK_DCI_STREAMS };
	CHECK_EQ(mlx5dv_query_device(ctx, &dvc), 0, "mlx5dv_query_device");
	CHECK(dvc.comp_mask & MLX5DV_CONTEXT_MASK_DCI_STREAMS, "MLX5DV_CONTEXT_MASK_DCI_STREAMS not answered");
	uint8_t max_c = dvc.dci_streams_caps.max_log_num_concurent, max_e = dvc.dci_streams_caps.max_log_num_errored;
	if (max_c < 2 || max_e < 1)
		SKIP("dci_streams_caps (%u, %u): fewer than 4 streams or 2 errored", max_c, max_e);
	struct ibv_pd *pd = ibv_alloc_pd(ctx), *other = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	static uint8_t good_buf[64], bad_buf[64], rbuf[1024];
	struct ibv_mr *good = ibv_reg_mr(pd, good_buf, sizeof(good_buf), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *bad = ibv_reg_mr(other, bad_buf, sizeof(bad_buf), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *rmr = ibv_reg_mr(pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(pd && other && cq && srq && good && bad && rmr, "pds, cq, srq, mrs");

	errno = 0;
	CHECK(!dc_qp(ctx, pd, cq, NULL, 0, max_c + 1, 0) && errno == EINVAL, "streams past the caps: errno %d", errno);
	struct ibv_qp *dci = dc_qp(ctx, pd, cq, NULL, 0, 2, 1);
	CHECK(dci, "mlx5dv_create_qp(DCI with streams): %s", strerror(errno));
	struct ibv_qp *dct = dc_qp(ctx, pd, cq, srq, 1, 0, 0);
	CHECK(dct, "mlx5dv_create_qp(DCT): %s", strerror(errno));
	union ibv_gid gid;
	CHECK_EQ(ibv_query_gid(ctx, 1, 0, &gid), 0, "ibv_query_gid");
	int s = IBV_QP_STATE;
	CHECK_EQ(modify(dct, IBV_QPS_INIT, s | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PORT, &gid), 0,
		 "DCT to INIT");
	CHECK_EQ(modify(dct, IBV_QPS_RTR, s | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV | IBV_QP_PATH_MTU, &gid), 0,
		 "DCT to RTR");
	CHECK_EQ(mlx5dv_dci_stream_id_reset(dci, 1), EOPNOTSUPP, "mlx5dv_dci_stream_id_reset before RTS");
	CHECK_EQ(modify(dci, IBV_QPS_INIT, s | IBV_QP_PKEY_INDEX | IBV_QP_PORT, &gid), 0, "DCI to INIT");
	CHECK_EQ(modify(dci, IBV_QPS_RTR, s | IBV_QP_PATH_MTU | IBV_QP_AV, &gid), 0, "DCI to RTR");
	int rts = s | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_SQ_PSN;
	CHECK_EQ(modify(dci, IBV_QPS_RTS, rts, &gid), 0, "DCI to RTS");
	for (int i = 0; i < 8; i++) {
		struct ibv_sge rs = { .addr = (uintptr_t)rbuf + 64 * i, .length = 64, .lkey = rmr->lkey };
		struct ibv_recv_wr rw = { .wr_id = 100 + i, .sg_list = &rs, .num_sge = 1 }, *bw;
		CHECK_EQ(ibv_post_srq_recv(srq, &rw, &bw), 0, "ibv_post_srq_recv");
	}
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1, .grh = { .dgid = gid, .hop_limit = 64 } };
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);
	CHECK(ah, "ibv_create_ah: %s", strerror(errno));

	send_on(dci, ah, dct->qp_num, 1, 1, bad);
	expect(cq, 1, IBV_WC_LOC_PROT_ERR);
	CHECK_EQ(state_of(dci), IBV_QPS_RTS, "the DCI after an error on stream 1");
	send_on(dci, ah, dct->qp_num, 2, 1, good);
	expect(cq, 2, IBV_WC_WR_FLUSH_ERR);
	send_on(dci, ah, dct->qp_num, 3, 2, good);
	expect(cq, 3, IBV_WC_SUCCESS);
	CHECK_EQ(mlx5dv_dci_stream_id_reset(dci, 3), EINVAL, "mlx5dv_dci_stream_id_reset of a stream not in error");
	CHECK_EQ(mlx5dv_dci_stream_id_reset(dci, 1), 0, "mlx5dv_dci_stream_id_reset of stream 1");
	send_on(dci, ah, dct->qp_num, 4, 1, good);
	expect(cq, 4, IBV_WC_SUCCESS);
	send_on(dci, ah, dct->qp_num, 5, 1, bad);
	expect(cq, 5, IBV_WC_LOC_PROT_ERR);
	CHECK_EQ(state_of(dci), IBV_QPS_RTS, "the DCI with one stream in error");
	send_on(dci, ah, dct->qp_num, 6, 2, bad);
	expect(cq, 6, IBV_WC_LOC_PROT_ERR);
	CHECK_EQ(state_of(dci), IBV_QPS_ERR, "the DCI once 2 streams erred");
	CHECK_EQ(mlx5dv_dci_stream_id_reset(dci, 1), EOPNOTSUPP, "mlx5dv_dci_stream_id_reset in ERR");

	int r = mlx5dv_map_ah_to_qp(ah, dct->qp_num);
	CHECK(r == 0 || r == EOPNOTSUPP, "mlx5dv_map_ah_to_qp: %d", r);
	if (r == 0)
		CHECK_EQ(mlx5dv_map_ah_to_qp(ah, dct->qp_num), 0, "mlx5dv_map_ah_to_qp again");

	ibv_destroy_ah(ah);
	CHECK_EQ(ibv_destroy_qp(dci), 0, "ibv_destroy_qp(DCI)");
	CHECK_EQ(ibv_destroy_qp(dct), 0, "ibv_destroy_qp(DCT)");
	ibv_destroy_srq(srq);
	ibv_dereg_mr(good);
	ibv_dereg_mr(bad);
	ibv_dereg_mr(rmr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(other);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("DCI streams: caps (%u, %u), per-stream errors, flushes, mlx5dv_dci_stream_id_reset, ERR at 2 "
	       "streams; mlx5dv_map_ah_to_qp: %d\n", max_c, max_e, r);
	return 0;
}
