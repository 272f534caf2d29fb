/* Reserved QP numbers as libmlx5 gives them: mlx5dv_reserved_qpn_alloc hands out numbers one
 * by one from RESERVED_QPN objects, always forward; no QP is created with a reserved number;
 * mlx5dv_reserved_qpn_dealloc of a number never handed out, or handed back already, is
 * EINVAL; numbers of one context are not another's to give back. */
#include "common.h"

#define N 1000

int main(void)
{
	struct ibv_device **list;
	struct ibv_device *dev = first_mlx5(&list);
	struct ibv_context *ctx = ibv_open_device(dev);
	CHECK(ctx, "ibv_open_device");
	uint32_t qpns[N];
	int rc = mlx5dv_reserved_qpn_alloc(ctx, &qpns[0]);
	if (rc == EOPNOTSUPP)
		SKIP("the device has no RESERVED_QPN objects");
	CHECK_EQ(rc, 0, "mlx5dv_reserved_qpn_alloc");
	for (int i = 1; i < N; i++) {
		CHECK_EQ(mlx5dv_reserved_qpn_alloc(ctx, &qpns[i]), 0, "mlx5dv_reserved_qpn_alloc");
		CHECK(qpns[i] > qpns[i - 1], "numbers go forward: 0x%x after 0x%x", qpns[i], qpns[i - 1]);
	}
	CHECK(qpns[N - 1] <= 0xffffff, "a 24-bit number: 0x%x", qpns[N - 1]);
	printf("reserved 0x%x .. 0x%x\n", qpns[0], qpns[N - 1]);

	/* A QP created now takes no reserved number. */
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd");
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	CHECK(cq, "ibv_create_cq");
	struct ibv_qp_init_attr qa = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp = ibv_create_qp(pd, &qa);
	CHECK(qp, "ibv_create_qp: errno %d", errno);
	for (int i = 0; i < N; i++)
		CHECK(qp->qp_num != qpns[i], "the QP took reserved number 0x%x", qp->qp_num);
	printf("QP 0x%x\n", qp->qp_num);

	/* Another context's numbers are its own. */
	struct ibv_context *other = ibv_open_device(dev);
	CHECK(other, "second ibv_open_device");
	uint32_t theirs;
	CHECK_EQ(mlx5dv_reserved_qpn_alloc(other, &theirs), 0, "alloc on the second context");
	for (int i = 0; i < N; i++)
		CHECK(theirs != qpns[i], "the second context got 0x%x again", theirs);
	CHECK_EQ(mlx5dv_reserved_qpn_dealloc(other, qpns[0]), EINVAL, "dealloc of the first context's number");
	CHECK_EQ(mlx5dv_reserved_qpn_dealloc(ctx, theirs), EINVAL, "dealloc of the second context's number");
	CHECK_EQ(mlx5dv_reserved_qpn_dealloc(other, theirs), 0, "dealloc on the second context");
	CHECK_EQ(ibv_close_device(other), 0, "close the second context");

	for (int i = 0; i < N; i++)
		CHECK_EQ(mlx5dv_reserved_qpn_dealloc(ctx, qpns[i]), 0, "mlx5dv_reserved_qpn_dealloc");
	/* Bad flows of rdma-core's test: a number never handed out, one given back twice. */
	uint32_t q;
	CHECK_EQ(mlx5dv_reserved_qpn_alloc(ctx, &q), 0, "alloc after giving all back");
	CHECK(q > qpns[N - 1], "numbers keep going forward: 0x%x", q);
	CHECK_EQ(mlx5dv_reserved_qpn_dealloc(ctx, q - 1), EINVAL, "dealloc of a number not handed out");
	CHECK_EQ(mlx5dv_reserved_qpn_dealloc(ctx, q), 0, "dealloc");
	CHECK_EQ(mlx5dv_reserved_qpn_dealloc(ctx, q), EINVAL, "second dealloc of one number");
	CHECK_EQ(mlx5dv_reserved_qpn_dealloc(ctx, 0), EINVAL, "dealloc of QP number 0");

	CHECK_EQ(ibv_destroy_qp(qp), 0, "ibv_destroy_qp");
	CHECK_EQ(ibv_destroy_cq(cq), 0, "ibv_destroy_cq");
	CHECK_EQ(ibv_dealloc_pd(pd), 0, "ibv_dealloc_pd");
	/* Numbers still out when the context closes go with it. */
	CHECK_EQ(mlx5dv_reserved_qpn_alloc(ctx, &q), 0, "alloc before close");
	CHECK_EQ(ibv_close_device(ctx), 0, "ibv_close_device");
	ibv_free_device_list(list);
	printf("PASS\n");
	return 0;
}
