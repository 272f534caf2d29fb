/* ibv_resize_cq as libmlx5 gives it: the rounding (cqe + 1 up to a power of two, less one),
 * EINVAL for a negative cqe, 0, a size whose CQEs pass INT_MAX and one below the completions
 * not yet polled; and the completions written before a resize are polled after it, in order,
 * with the ones that come after it. */
#include "common.h"
#include <unistd.h>

static void write_n(struct ibv_qp *qp, struct ibv_mr *mr, uint8_t *buf, uint64_t first, int n)
{
	for (int i = 0; i < n; i++) {
		uint64_t id = first + i;
		struct ibv_sge sge = { .addr = (uintptr_t)buf + 8 * id, .length = 8, .lkey = mr->lkey };
		struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
					  .send_flags = IBV_SEND_SIGNALED,
					  .wr.rdma = { .remote_addr = (uintptr_t)buf + 256 + 8 * id, .rkey = mr->rkey } },
				   *bad;
		CHECK_EQ(ibv_post_send(qp, &wr, &bad), 0, "post WRITE");
	}
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = ibv_open_device(first_mlx5(&list));
	CHECK(ctx, "ibv_open_device");
	struct ibv_cq *cq = ibv_create_cq(ctx, 3, NULL, NULL, 0);
	CHECK(cq && cq->cqe == 3, "ibv_create_cq(3)");
	int sizes[][2] = { { 1, 1 }, { 7, 7 }, { 8, 15 }, { 100, 127 }, { 2, 3 } };
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		CHECK_EQ(ibv_resize_cq(cq, sizes[i][0]), 0, "ibv_resize_cq");
		CHECK(cq->cqe == sizes[i][1], "resize to %d: cqe %d, want %d", sizes[i][0], cq->cqe, sizes[i][1]);
	}
	CHECK_EQ(ibv_resize_cq(cq, -1), EINVAL, "ibv_resize_cq(-1)");
	CHECK_EQ(ibv_resize_cq(cq, 0), EINVAL, "ibv_resize_cq(0)");
	CHECK_EQ(ibv_resize_cq(cq, 1 << 25), EINVAL, "ibv_resize_cq(2^25)");
	CHECK(cq->cqe == 3, "cqe after the refusals: %d", cq->cqe);
	printf("sizes: 3 -> 1 -> 7 -> 15 -> 127 -> 3; -1, 0 and 2^25 EINVAL\n");

	/* Six completions unread: a resize to 1 is EINVAL; to 200 keeps them. */
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd");
	CHECK_EQ(ibv_resize_cq(cq, 63), 0, "ibv_resize_cq(63)");
	struct ibv_qp *qa = rc_qp(ctx, pd, cq, 0), *qb = rc_qp(ctx, pd, cq, 0);
	CHECK(qa && qb, "rc_qp");
	connect_qp(ctx, qa, qb);
	connect_qp(ctx, qb, qa);
	static uint8_t buf[512];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr, "ibv_reg_mr");
	write_n(qa, mr, buf, 1, 6);
	usleep(100000);
	CHECK_EQ(ibv_resize_cq(cq, 1), EINVAL, "ibv_resize_cq(1) below 6 unread");
	CHECK_EQ(ibv_resize_cq(cq, 200), 0, "ibv_resize_cq(200)");
	CHECK(cq->cqe == 255, "cqe after resize to 200: %d", cq->cqe);
	write_n(qa, mr, buf, 7, 2);
	for (uint64_t id = 1; id <= 8; id++) {
		struct ibv_wc wc = poll_one(cq);
		CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == id, "completion %llu: wr_id %llu status %d",
		      (unsigned long long)id, (unsigned long long)wc.wr_id, wc.status);
	}
	printf("8 completions in order across a resize 63 -> 255 (6 written before it)\n");

	CHECK_EQ(ibv_destroy_qp(qa), 0, "destroy qa");
	CHECK_EQ(ibv_destroy_qp(qb), 0, "destroy qb");
	CHECK_EQ(ibv_destroy_cq(cq), 0, "destroy cq");
	CHECK_EQ(ibv_dereg_mr(mr), 0, "ibv_dereg_mr");
	CHECK_EQ(ibv_dealloc_pd(pd), 0, "ibv_dealloc_pd");
	CHECK_EQ(ibv_close_device(ctx), 0, "ibv_close_device");
	ibv_free_device_list(list);
	printf("PASS\n");
	return 0;
}
