/* MRs over the same bytes (docs/behaviour.md item 335): MRs that overlap in part register as
 * on a kernel, each reaches its own range, and the bytes of one stay reachable through the
 * others after it is deregistered, whatever the order.
 * Build: cc -Wall -Werror overlap_mr.c -libverbs -lmlx5; run with LD_LIBRARY_PATH=target/shim. */
#include "common.h"

#define PAGE 4096
#define LEN (3 * PAGE)

/* RDMA WRITE `n` bytes from src (lkey) to dst (rkey) on the loopback pair; the status. */
static enum ibv_wc_status rdma_write(struct ibv_qp *qp, struct ibv_cq *cq, uint32_t lkey, void *src, uint32_t rkey,
				void *dst, uint32_t n, uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)src, .length = n, .lkey = lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED }, *bad = NULL;
	wr.wr.rdma.remote_addr = (uintptr_t)dst;
	wr.wr.rdma.rkey = rkey;
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), 0, "ibv_post_send(RDMA WRITE)");
	struct ibv_wc wc = poll_one(cq);
	CHECK_EQ(wc.wr_id, id, "wr_id");
	return wc.status;
}

/* A fresh connected pair on ctx/pd. */
static void pair(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_qp **a, struct ibv_qp **b)
{
	*a = rc_qp(ctx, pd, cq, 0);
	*b = rc_qp(ctx, pd, cq, 0);
	CHECK(*a && *b, "ibv_create_qp_ex: %s", strerror(errno));
	connect_qp(ctx, *a, *b);
	connect_qp(ctx, *b, *a);
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = ibv_open_device(first_mlx5(&list));
	CHECK(ctx, "ibv_open_device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK(pd && cq, "ibv_alloc_pd / ibv_create_cq");
	struct ibv_qp *a, *b;
	pair(ctx, pd, cq, &a, &b);

	uint8_t *buf = aligned_alloc(PAGE, LEN), *src = aligned_alloc(PAGE, LEN);
	CHECK(buf && src, "aligned_alloc");
	memset(buf, 0, LEN);
	for (int i = 0; i < LEN; i++)
		src[i] = (uint8_t)(i * 7 + 1);
	int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct ibv_mr *s = ibv_reg_mr(pd, src, LEN, rw);
	/* Pages 0-1 and 1-2: they share page 1. A third inside the second, a fourth bridging
	 * the first two's halves. */
	struct ibv_mr *lo = ibv_reg_mr(pd, buf, 2 * PAGE, rw);
	struct ibv_mr *hi = ibv_reg_mr(pd, buf + PAGE, 2 * PAGE, rw);
	CHECK(s && lo && hi, "ibv_reg_mr of MRs overlapping in part: %s", strerror(errno));
	struct ibv_mr *in = ibv_reg_mr(pd, buf + 2 * PAGE, 100, rw);
	struct ibv_mr *mid = ibv_reg_mr(pd, buf + PAGE / 2, 2 * PAGE, rw);
	CHECK(in && mid, "ibv_reg_mr inside and across: %s", strerror(errno));
	CHECK(lo->rkey != hi->rkey && hi->rkey != mid->rkey, "each MR has a key of its own");

	/* Each MR reaches its own range, the shared page through both. */
	CHECK_EQ(rdma_write(a, cq, s->lkey, src, lo->rkey, buf, 2 * PAGE, 1), IBV_WC_SUCCESS, "WRITE through lo");
	CHECK_EQ(rdma_write(a, cq, s->lkey, src + 2 * PAGE, hi->rkey, buf + 2 * PAGE, PAGE, 2), IBV_WC_SUCCESS,
		 "WRITE through hi");
	CHECK(memcmp(buf, src, LEN) == 0, "the three pages hold what was written");
	memset(buf, 0, LEN);
	CHECK_EQ(rdma_write(a, cq, s->lkey, src, mid->rkey, buf + PAGE / 2, 2 * PAGE, 3), IBV_WC_SUCCESS,
		 "WRITE through the MR across lo and hi");
	CHECK(memcmp(buf + PAGE / 2, src, 2 * PAGE) == 0, "the bridging MR's bytes");
	/* A local SGE through lo's lkey reading the page lo and hi share. */
	CHECK_EQ(rdma_write(a, cq, lo->lkey, buf + PAGE, s->rkey, src, PAGE, 4), IBV_WC_SUCCESS,
		 "WRITE from lo's bytes");

	/* lo goes: its keys no longer work, the bytes stay reachable through hi and mid. */
	CHECK_EQ(ibv_dereg_mr(lo), 0, "ibv_dereg_mr(lo)");
	CHECK_EQ(rdma_write(a, cq, s->lkey, src, mid->rkey, buf + PAGE / 2, 2 * PAGE, 5), IBV_WC_SUCCESS,
		 "WRITE through mid after lo is gone");
	CHECK_EQ(rdma_write(a, cq, s->lkey, src, hi->rkey, buf + PAGE, 2 * PAGE, 6), IBV_WC_SUCCESS,
		 "WRITE through hi after lo is gone");
	CHECK(memcmp(buf + PAGE, src, 2 * PAGE) == 0, "hi's bytes");
	/* mid goes; hi and the MR inside it stay. */
	CHECK_EQ(ibv_dereg_mr(mid), 0, "ibv_dereg_mr(mid)");
	memset(buf, 0, LEN);
	CHECK_EQ(rdma_write(a, cq, s->lkey, src + 5, in->rkey, buf + 2 * PAGE, 100, 7), IBV_WC_SUCCESS, "WRITE through in");
	CHECK(memcmp(buf + 2 * PAGE, src + 5, 100) == 0, "in's bytes");
	CHECK_EQ(rdma_write(a, cq, s->lkey, src, in->rkey, buf + 2 * PAGE, 101, 8), IBV_WC_REM_ACCESS_ERR,
		 "a WRITE one byte past in's range is a remote access error");

	/* The QP is in error now: a new pair for the rest. */
	CHECK_EQ(ibv_destroy_qp(a), 0, "ibv_destroy_qp");
	CHECK_EQ(ibv_destroy_qp(b), 0, "ibv_destroy_qp");
	pair(ctx, pd, cq, &a, &b);
	CHECK_EQ(ibv_dereg_mr(hi), 0, "ibv_dereg_mr(hi)");
	CHECK_EQ(rdma_write(a, cq, s->lkey, src, in->rkey, buf + 2 * PAGE, 100, 9), IBV_WC_SUCCESS,
		 "WRITE through in after hi, which held it, is gone");
	CHECK_EQ(ibv_dereg_mr(in), 0, "ibv_dereg_mr(in)");

	/* The same range twice, and an MR over part of it registered again after both go. */
	struct ibv_mr *x = ibv_reg_mr(pd, buf, LEN, rw), *y = ibv_reg_mr(pd, buf, LEN, rw);
	CHECK(x && y, "the same range twice: %s", strerror(errno));
	CHECK_EQ(ibv_dereg_mr(x), 0, "ibv_dereg_mr(x)");
	CHECK_EQ(rdma_write(a, cq, s->lkey, src, y->rkey, buf, LEN, 10), IBV_WC_SUCCESS, "WRITE through y");
	CHECK_EQ(ibv_dereg_mr(y), 0, "ibv_dereg_mr(y)");
	struct ibv_mr *z = ibv_reg_mr(pd, buf + 100, PAGE, rw);
	CHECK(z, "ibv_reg_mr after the others: %s", strerror(errno));
	CHECK_EQ(ibv_dereg_mr(z), 0, "ibv_dereg_mr(z)");

	CHECK_EQ(ibv_destroy_qp(a), 0, "ibv_destroy_qp");
	CHECK_EQ(ibv_destroy_qp(b), 0, "ibv_destroy_qp");
	CHECK_EQ(ibv_dereg_mr(s), 0, "ibv_dereg_mr(s)");
	CHECK_EQ(ibv_destroy_cq(cq), 0, "ibv_destroy_cq");
	CHECK_EQ(ibv_dealloc_pd(pd), 0, "ibv_dealloc_pd");
	CHECK_EQ(ibv_close_device(ctx), 0, "ibv_close_device");
	ibv_free_device_list(list);
	free(buf);
	free(src);
	printf("PASS: MRs overlapping in part, inside, across and twice; each reaches its range, in any order\n");
	return 0;
}
