/* Threads: one process-wide simulator; four threads share a context and a PD, each with its
 * own CQ, QP pair and buffers, registering and posting at the same time. */
#include <pthread.h>
#include "common.h"

enum { THREADS = 4, ROUNDS = 500, LEN = 64 };

static struct ibv_context *ctx;
static struct ibv_pd *pd;

static void *worker(void *arg)
{
	uint8_t seed = (uint8_t)(uintptr_t)arg;
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK(cq, "ibv_create_cq in thread %u", seed);
	struct ibv_qp *a = rc_qp(ctx, pd, cq, 0), *b = rc_qp(ctx, pd, cq, 0);
	CHECK(a && b, "QPs in thread %u", seed);
	connect_qp(ctx, a, b);
	connect_qp(ctx, b, a);
	uint8_t *src = malloc(LEN), *dst = malloc(LEN);
	CHECK(src && dst, "malloc");
	for (int r = 0; r < ROUNDS; r++) {
		memset(src, seed + r, LEN);
		memset(dst, 0, LEN);
		int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
		struct ibv_mr *ms = ibv_reg_mr(pd, src, LEN, rw), *md = ibv_reg_mr(pd, dst, LEN, rw);
		CHECK(ms && md, "ibv_reg_mr in thread %u: %s", seed, strerror(errno));
		struct ibv_sge sge = { .addr = (uintptr_t)src, .length = LEN, .lkey = ms->lkey };
		struct ibv_send_wr wr = { .wr_id = (uint64_t)r, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED }, *bad;
		wr.wr.rdma.remote_addr = (uintptr_t)dst;
		wr.wr.rdma.rkey = md->rkey;
		CHECK_EQ(ibv_post_send(a, &wr, &bad), 0, "ibv_post_send");
		struct ibv_wc wc = poll_one(cq);
		CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == (uint64_t)r, "thread %u round %d: status %d wr_id %llu",
		      seed, r, wc.status, (unsigned long long)wc.wr_id);
		CHECK(memcmp(src, dst, LEN) == 0, "thread %u round %d: bytes", seed, r);
		CHECK_EQ(ibv_dereg_mr(ms), 0, "ibv_dereg_mr");
		CHECK_EQ(ibv_dereg_mr(md), 0, "ibv_dereg_mr");
	}
	CHECK_EQ(ibv_destroy_qp(a), 0, "ibv_destroy_qp");
	CHECK_EQ(ibv_destroy_qp(b), 0, "ibv_destroy_qp");
	CHECK_EQ(ibv_destroy_cq(cq), 0, "ibv_destroy_cq");
	free(src);
	free(dst);
	return NULL;
}

int main(void)
{
	struct ibv_device **list;
	ctx = ibv_open_device(first_mlx5(&list));
	CHECK(ctx, "ibv_open_device");
	pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd");
	pthread_t t[THREADS];
	for (uintptr_t i = 0; i < THREADS; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, worker, (void *)(i + 1)), 0, "pthread_create");
	for (int i = 0; i < THREADS; i++)
		CHECK_EQ(pthread_join(t[i], NULL), 0, "pthread_join");
	CHECK_EQ(ibv_dealloc_pd(pd), 0, "ibv_dealloc_pd after every thread cleaned up");
	CHECK_EQ(ibv_close_device(ctx), 0, "ibv_close_device");
	ibv_free_device_list(list);
	printf("PASS: %d threads x %d rounds\n", THREADS, ROUNDS);
	return 0;
}
