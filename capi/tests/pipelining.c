/* SIG_PIPELINING and mlx5dv_qp_cancel_posted_send_wrs (docs/behaviour.md item 50): a
 * requester-side signature error (bad CRC32 PI in memory) moves a SIG_PIPELINING QP to SQD
 * and holds the WRs behind it; the held response is cancelled (it completes as a NOP),
 * reposted, and the QP moved back to RTS, after which everything completes in order.
 * Build: cc -Wall -Werror pipelining.c -libverbs -lmlx5; run with LD_LIBRARY_PATH=target/shim. */
#include "dv_common.h"

#define BLOCK 512

static const int ALL_ACCESS = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

static struct ibv_qp *qp_with(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq, uint32_t flags)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 4, .max_recv_sge = 4,
			 .max_inline_data = 512 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND,
	};
	struct mlx5dv_qp_init_attr dv = {
		.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS | MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS,
		.create_flags = MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE | flags,
		.send_ops_flags = MLX5DV_QP_EX_WITH_MKEY_CONFIGURE,
	};
	return mlx5dv_create_qp(ctx, &a, &dv);
}

static enum ibv_qp_state state_of(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr i;
	int rc = ibv_query_qp(qp, &a, IBV_QP_STATE, &i);

	CHECK(rc == 0, "ibv_query_qp: %s", strerror(rc));
	return a.qp_state;
}

int main(void)
{
	struct ibv_context *ctx = dv_open_devx("mlx5_0");
	struct mlx5dv_context dv = dv_caps(ctx);

	if (!(dv.sig_caps.block_prot & MLX5DV_SIG_PROT_CAP_CRC) || !(dv.sig_caps.crc_type & MLX5DV_SIG_CRC_TYPE_CAP_CRC32) ||
	    !(dv.sig_caps.block_size & MLX5DV_BLOCK_SIZE_CAP_512))
		SKIP("the device has no CRC32 signature offload");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cqa = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_cq *cqs = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK(pd && cqa && cqs, "PD and CQs: %s", strerror(errno));
	struct ibv_qp *qpa = qp_with(ctx, pd, cqa, MLX5DV_QP_CREATE_SIG_PIPELINING);
	if (!qpa && errno == EOPNOTSUPP)
		SKIP("SIG_PIPELINING needs the kernel's SQD->RTS support");
	CHECK(qpa, "mlx5dv_create_qp(SIG_PIPELINING): %s", strerror(errno));
	struct ibv_qp *qps = qp_with(ctx, pd, cqs, 0);
	CHECK(qps, "mlx5dv_create_qp: %s", strerror(errno));
	dv_connect(ctx, qpa, qps);
	dv_connect(ctx, qps, qpa);

	/* One block with a CRC32 PI in memory that is wrong: the requester finds it. */
	uint8_t *mem, *dst, *rbuf, *sbuf;
	struct ibv_mr *mem_mr = dv_region(pd, BLOCK + 4, IBV_ACCESS_LOCAL_WRITE, &mem);
	for (size_t i = 0; i < BLOCK; i++)
		mem[i] = dv_pattern(i, 14);
	mem[BLOCK] = 0x5a;
	struct mlx5dv_mkey_init_attr ma = {
		.pd = pd,
		.create_flags = MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT | MLX5DV_MKEY_INIT_ATTR_FLAGS_BLOCK_SIGNATURE,
		.max_entries = 4,
	};
	struct mlx5dv_mkey *mkey = mlx5dv_create_mkey(&ma);
	CHECK(mkey, "mlx5dv_create_mkey: %s", strerror(errno));
	struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(qpa);
	struct mlx5dv_qp_ex *dqp = mlx5dv_qp_ex_from_ibv_qp_ex(qpx);
	struct mlx5dv_sig_crc crc = { .type = MLX5DV_SIG_CRC_TYPE_CRC32, .seed = 0xffffffff };
	struct mlx5dv_sig_block_domain memd = { .sig_type = MLX5DV_SIG_TYPE_CRC, .sig.crc = &crc,
						.block_size = MLX5DV_BLOCK_SIZE_512 };
	struct mlx5dv_sig_block_attr sig = { .mem = &memd, .wire = NULL, .check_mask = 0xff };
	struct mlx5dv_mkey_conf_attr conf = { 0 };
	struct ibv_sge sge = { .addr = (uintptr_t)mem, .length = BLOCK + 4, .lkey = mem_mr->lkey };
	ibv_wr_start(qpx);
	qpx->wr_id = 0x51;
	qpx->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	mlx5dv_wr_mkey_configure(dqp, mkey, 3, &conf);
	mlx5dv_wr_set_mkey_access_flags(dqp, ALL_ACCESS);
	mlx5dv_wr_set_mkey_layout_list(dqp, 1, &sge);
	mlx5dv_wr_set_mkey_sig_block(dqp, &sig);
	int rc = ibv_wr_complete(qpx);
	CHECK(rc == 0, "configure: %s", strerror(rc));
	dv_ok_cqe(cqa, 0x51, MLX5DV_WC_UMR, "configure completion");

	struct ibv_mr *dst_mr = dv_region(pd, BLOCK, ALL_ACCESS, &dst);
	struct ibv_mr *rmr = dv_region(pd, 16, IBV_ACCESS_LOCAL_WRITE, &rbuf);
	struct ibv_mr *smr = dv_region(pd, 16, IBV_ACCESS_LOCAL_WRITE, &sbuf);
	for (size_t i = 0; i < 16; i++)
		sbuf[i] = dv_pattern(i, 1);
	struct ibv_sge rsge = { .addr = (uintptr_t)rbuf, .length = 16, .lkey = rmr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 0x90, .sg_list = &rsge, .num_sge = 1 }, *bad;
	CHECK(ibv_post_recv(qps, &rwr, &bad) == 0, "ibv_post_recv");

	/* The data WR through the mkey, then a response behind it. */
	rc = dv_write(qpa, 0x91, mkey->lkey, 0, BLOCK, dst_mr->rkey, (uintptr_t)dst);
	CHECK(rc == 0, "post the data WR: %s", strerror(rc));
	ibv_wr_start(qpx);
	qpx->wr_id = 0x92;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qpx);
	ibv_wr_set_sge(qpx, smr->lkey, (uintptr_t)sbuf, 16);
	CHECK(ibv_wr_complete(qpx) == 0, "post the response WR");

	double end = dv_now() + 2.0;
	while (state_of(qpa) != IBV_QPS_SQD)
		CHECK(dv_now() < end, "the QP did not reach SQD (state %d)", (int)state_of(qpa));
	/* The QP stops after the failing transfer: that went out and completed (signalled). */
	dv_ok_cqe(cqa, 0x91, IBV_WC_RDMA_WRITE, "the failing transfer completes before the QP stops");
	dv_no_cqe(cqa, "requester CQ while in SQD, after the transfer");
	dv_no_cqe(cqs, "responder CQ while in SQD");
	for (size_t i = 0; i < BLOCK; i++)
		CHECK(dst[i] == dv_pattern(i, 14), "the failing transfer's data went out (byte %zu)", i);
	struct mlx5dv_mkey_err e;
	CHECK(mlx5dv_mkey_check(mkey, &e) == 0, "mlx5dv_mkey_check");
	CHECK_EQ(e.err_type, MLX5DV_MKEY_SIG_BLOCK_BAD_GUARD, "mkey_check err_type");
	PASS("signature error: QP in SQD after the transfer, the response held, BAD_GUARD");

	rc = mlx5dv_qp_cancel_posted_send_wrs(dqp, 0x92);
	CHECK_EQ(rc, 1, "mlx5dv_qp_cancel_posted_send_wrs(0x92): WRs cancelled");
	ibv_wr_start(qpx);
	qpx->wr_id = 0x92;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qpx);
	ibv_wr_set_sge(qpx, smr->lkey, (uintptr_t)sbuf, 16);
	CHECK(ibv_wr_complete(qpx) == 0, "repost the response WR");
	struct ibv_qp_attr rts = { .qp_state = IBV_QPS_RTS };
	rc = ibv_modify_qp(qpa, &rts, IBV_QP_STATE);
	CHECK(rc == 0, "SQD -> RTS: %s", strerror(rc));
	for (int i = 0; i < 2; i++) {
		struct ibv_wc wc = dv_poll_one(cqa, "client completions after RTS");
		CHECK(wc.wr_id == 0x92 && wc.status == IBV_WC_SUCCESS,
		      "client completion %d: wr_id 0x%llx status %s; expected 0x92 success", i,
		      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
	}
	dv_ok_cqe(cqs, 0x90, IBV_WC_RECV, "the responder's receive");
	PASS("cancelled WR completes as a NOP, the reposted WR after RTS");

	CHECK(mlx5dv_destroy_mkey(mkey) == 0, "mlx5dv_destroy_mkey");
	CHECK(ibv_destroy_qp(qpa) == 0 && ibv_destroy_qp(qps) == 0, "ibv_destroy_qp");
	CHECK(ibv_dereg_mr(mem_mr) == 0 && ibv_dereg_mr(dst_mr) == 0 && ibv_dereg_mr(rmr) == 0 &&
		      ibv_dereg_mr(smr) == 0,
	      "ibv_dereg_mr");
	CHECK(ibv_destroy_cq(cqa) == 0 && ibv_destroy_cq(cqs) == 0, "ibv_destroy_cq");
	CHECK(ibv_dealloc_pd(pd) == 0, "ibv_dealloc_pd");
	CHECK(ibv_close_device(ctx) == 0, "ibv_close_device");
	free(mem);
	free(dst);
	free(rbuf);
	free(sbuf);
	printf("PASS pipelining\n");
	return 0;
}
