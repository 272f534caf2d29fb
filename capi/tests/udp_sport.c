/* mlx5dv_modify_qp_udp_sport as libmlx5 gives it: EOPNOTSUPP for a QP not in RTS (and for a
 * UD QP), 0 for a connected RC QP, after which traffic goes on. */
#include "common.h"

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = ibv_open_device(first_mlx5(&list));
	CHECK(ctx, "ibv_open_device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(pd && cq, "ibv_alloc_pd, ibv_create_cq");
	struct ibv_qp *qa = rc_qp(ctx, pd, cq, 0), *qb = rc_qp(ctx, pd, cq, 0);
	CHECK(qa && qb, "rc_qp");
	CHECK_EQ(mlx5dv_modify_qp_udp_sport(qa, 55555), EOPNOTSUPP, "in RESET");
	struct ibv_qp_init_attr ua = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
				       .cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *ud = ibv_create_qp(pd, &ua);
	CHECK(ud, "a UD QP");
	CHECK_EQ(mlx5dv_modify_qp_udp_sport(ud, 55555), EOPNOTSUPP, "a UD QP");
	connect_qp(ctx, qa, qb);
	connect_qp(ctx, qb, qa);
	int rc = mlx5dv_modify_qp_udp_sport(qb, 55555);
	if (rc == EOPNOTSUPP)
		SKIP("the device cannot set a QP's UDP source port (rts2rts_qp_udp_sport 0)");
	CHECK_EQ(rc, 0, "mlx5dv_modify_qp_udp_sport in RTS");
	static uint8_t buf[128];
	for (int i = 0; i < 64; i++)
		buf[i] = (uint8_t)(i * 3 + 1);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr, "ibv_reg_mr");
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED,
				  .wr.rdma = { .remote_addr = (uintptr_t)buf + 64, .rkey = mr->rkey } }, *bad;
	CHECK_EQ(ibv_post_send(qa, &wr, &bad), 0, "post WRITE");
	struct ibv_wc wc = poll_one(cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 7, "WRITE completion: status %d", wc.status);
	CHECK(!memcmp(buf, buf + 64, 64), "the bytes arrived");
	printf("udp_sport: EOPNOTSUPP in RESET and on UD, 0 in RTS, a WRITE after it arrives\n");
	CHECK_EQ(ibv_destroy_qp(ud), 0, "destroy ud");
	CHECK_EQ(ibv_destroy_qp(qa), 0, "destroy qa");
	CHECK_EQ(ibv_destroy_qp(qb), 0, "destroy qb");
	CHECK_EQ(ibv_dereg_mr(mr), 0, "ibv_dereg_mr");
	CHECK_EQ(ibv_destroy_cq(cq), 0, "destroy cq");
	CHECK_EQ(ibv_dealloc_pd(pd), 0, "ibv_dealloc_pd");
	CHECK_EQ(ibv_close_device(ctx), 0, "ibv_close_device");
	ibv_free_device_list(list);
	printf("PASS\n");
	return 0;
}
