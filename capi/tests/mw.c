/* Memory windows as libmlx5 gives them: the device caps (IBV_DEVICE_MEM_WINDOW and
 * _TYPE_2B, max_mw), ibv_alloc_mw of types 1 and 2 (EINVAL for 3), ibv_bind_mw of a type-1
 * window (mw->rkey moves on, IBV_WC_BIND_MW), a type-2 bind by ibv_post_send and one by
 * ibv_wr_bind_mw, RDMA WRITE and READ through the windows from a loopback peer, LOCAL_INV
 * of a type-2 window and the peer's REM_ACCESS_ERR after it. */
#include "common.h"

static struct ibv_qp *bind_qp(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 4, .max_recv_sge = 4 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV,
	};
	return ibv_create_qp_ex(ctx, &a);
}

static void expect(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status status, int opcode)
{
	struct ibv_wc wc = poll_one(cq);
	CHECK(wc.wr_id == wr_id && wc.status == status, "completion %llu: wr_id %llu status %d (%s)",
	      (unsigned long long)wr_id, (unsigned long long)wc.wr_id, wc.status, ibv_wc_status_str(wc.status));
	if (opcode >= 0)
		CHECK(wc.opcode == (enum ibv_wc_opcode)opcode, "completion %llu: opcode %d", (unsigned long long)wr_id,
		      wc.opcode);
}

static void write8(struct ibv_qp *qp, struct ibv_mr *mr, void *src, uint64_t wr_id, uint32_t rkey, uint64_t raddr)
{
	struct ibv_sge sge = { .addr = (uintptr_t)src, .length = 8, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED, .wr.rdma = { .remote_addr = raddr, .rkey = rkey } },
			   *bad;
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), 0, "post WRITE");
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = ibv_open_device(first_mlx5(&list));
	CHECK(ctx, "ibv_open_device");
	struct ibv_device_attr attr;
	CHECK_EQ(ibv_query_device(ctx, &attr), 0, "ibv_query_device");
	if (!(attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW))
		SKIP("the device has no memory windows");
	CHECK(attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B, "MEM_WINDOW_TYPE_2B with MEM_WINDOW");
	CHECK(attr.max_mw > 0, "max_mw %d", attr.max_mw);
	printf("max_mw %d\n", attr.max_mw);

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd");
	errno = 0;
	CHECK(!ibv_alloc_mw(pd, 3) && errno == EINVAL, "ibv_alloc_mw(3): errno %d", errno);
	struct ibv_mw *mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1), *mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2),
		      *mw3 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	CHECK(mw1 && mw2 && mw3, "ibv_alloc_mw: errno %d", errno);
	CHECK(mw1->type == IBV_MW_TYPE_1 && mw2->type == IBV_MW_TYPE_2 && mw1->pd == pd, "the windows' fields");

	static uint8_t target[64], src[64];
	for (int i = 0; i < 64; i++)
		src[i] = (uint8_t)(i * 5 + 3);
	struct ibv_mr *tmr = ibv_reg_mr(pd, target, sizeof(target), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	struct ibv_mr *smr = ibv_reg_mr(pd, src, sizeof(src), IBV_ACCESS_LOCAL_WRITE);
	CHECK(tmr && smr, "ibv_reg_mr");
	struct ibv_cq *cq = ibv_create_cq(ctx, 32, NULL, NULL, 0);
	CHECK(cq, "ibv_create_cq");
	struct ibv_qp *client = rc_qp(ctx, pd, cq, 0), *server = bind_qp(ctx, pd, cq);
	CHECK(client && server, "create the QPs");
	connect_qp(ctx, client, server);
	connect_qp(ctx, server, client);
	uint64_t base = (uintptr_t)target;
	unsigned rw = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

	/* Type 1: ibv_bind_mw over target[16..48). */
	uint32_t old = mw1->rkey;
	struct ibv_mw_bind b1 = { .wr_id = 11, .send_flags = IBV_SEND_SIGNALED,
				  .bind_info = { .mr = tmr, .addr = base + 16, .length = 32, .mw_access_flags = rw } };
	CHECK_EQ(ibv_bind_mw(server, mw1, &b1), 0, "ibv_bind_mw");
	CHECK(mw1->rkey == ibv_inc_rkey(old), "mw->rkey 0x%x after the bind (was 0x%x)", mw1->rkey, old);
	expect(cq, 11, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	write8(client, smr, src, 1, mw1->rkey, base + 16);
	expect(cq, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	CHECK(!memcmp(target + 16, src, 8), "the WRITE through the type-1 window landed");

	/* Type 2 by ibv_post_send: target[32..64). */
	uint32_t k2 = ibv_inc_rkey(mw2->rkey);
	struct ibv_send_wr wr = { .wr_id = 12, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED,
				  .bind_mw = { .mw = mw2, .rkey = k2,
					       .bind_info = { .mr = tmr, .addr = base + 32, .length = 32,
							      .mw_access_flags = rw } } },
			   *bad;
	CHECK_EQ(ibv_post_send(server, &wr, &bad), 0, "post IBV_WR_BIND_MW");
	expect(cq, 12, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	write8(client, smr, src + 8, 2, k2, base + 40);
	expect(cq, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	CHECK(!memcmp(target + 40, src + 8, 8), "the WRITE through the type-2 window landed");

	/* Type 2 by ibv_wr_bind_mw: all of target, then a READ through it. */
	struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(server);
	CHECK(qx, "ibv_qp_to_qp_ex");
	uint32_t k3 = ibv_inc_rkey(mw3->rkey);
	struct ibv_mw_bind_info info = { .mr = tmr, .addr = base, .length = 64, .mw_access_flags = rw };
	ibv_wr_start(qx);
	qx->wr_id = 13;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(qx, mw3, k3, &info);
	CHECK_EQ(ibv_wr_complete(qx), 0, "ibv_wr_complete of a bind");
	expect(cq, 13, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	struct ibv_sge rs = { .addr = (uintptr_t)(src + 48), .length = 16, .lkey = smr->lkey };
	struct ibv_send_wr rd = { .wr_id = 3, .sg_list = &rs, .num_sge = 1, .opcode = IBV_WR_RDMA_READ,
				  .send_flags = IBV_SEND_SIGNALED, .wr.rdma = { .remote_addr = base + 16, .rkey = k3 } };
	CHECK_EQ(ibv_post_send(client, &rd, &bad), 0, "post READ");
	expect(cq, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	CHECK(!memcmp(src + 48, target + 16, 16), "the READ through the window");

	/* LOCAL_INV of the type-2 key: the peer's next WRITE through it is refused. */
	struct ibv_send_wr inv = { .wr_id = 14, .opcode = IBV_WR_LOCAL_INV, .send_flags = IBV_SEND_SIGNALED,
				   .invalidate_rkey = k2 };
	CHECK_EQ(ibv_post_send(server, &inv, &bad), 0, "post LOCAL_INV");
	expect(cq, 14, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV);
	write8(client, smr, src, 4, k2, base + 40);
	expect(cq, 4, IBV_WC_REM_ACCESS_ERR, -1);

	CHECK_EQ(ibv_destroy_qp(client), 0, "destroy the client QP");
	CHECK_EQ(ibv_destroy_qp(server), 0, "destroy the server QP");
	CHECK_EQ(ibv_destroy_cq(cq), 0, "ibv_destroy_cq");
	CHECK_EQ(ibv_dealloc_pd(pd), EBUSY, "ibv_dealloc_pd with windows and MRs");
	CHECK_EQ(ibv_dealloc_mw(mw1), 0, "ibv_dealloc_mw 1");
	CHECK_EQ(ibv_dealloc_mw(mw2), 0, "ibv_dealloc_mw 2");
	CHECK_EQ(ibv_dealloc_mw(mw3), 0, "ibv_dealloc_mw 3");
	CHECK_EQ(ibv_dereg_mr(tmr), 0, "dereg");
	CHECK_EQ(ibv_dereg_mr(smr), 0, "dereg");
	CHECK_EQ(ibv_dealloc_pd(pd), 0, "ibv_dealloc_pd");
	CHECK_EQ(ibv_close_device(ctx), 0, "ibv_close_device");
	ibv_free_device_list(list);
	printf("PASS\n");
	return 0;
}
