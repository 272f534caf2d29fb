/* 128-byte CQEs in the ring and CQs that ignore overrun (docs/behaviour.md items 326-329).
 * A CQ made with a CQE size of 128 (mlx5dv_create_cq, MLX5_CQE_SIZE for ibv_create_cq) has a
 * ring of 128-byte entries, each with its mlx5_cqe64 in the last 64 bytes: this program reads
 * the ring from mlx5dv_init_obj as a program polling it itself does, then polls it. A CQ made
 * with IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN takes one CQE more than its capacity without a CQ
 * error, where a plain one overruns.
 * Build: cc -Wall -Werror cq128.c -libverbs -lmlx5; run with LD_LIBRARY_PATH=target/shim. */
#include <fcntl.h>
#include <sched.h>

#include "common.h"

#define CQE_OWNER_MASK 1
#define CQE_INVALID 0xf
#define INLINE_SCATTER_32 0x4
#define INLINE_SCATTER_64 0x8

static struct mlx5dv_cq dv_cq(struct ibv_cq *cq)
{
	struct mlx5dv_cq out = {};
	struct mlx5dv_obj obj = { .cq = { .in = cq, .out = &out } };
	CHECK_EQ(mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ), 0, "mlx5dv_init_obj(CQ)");
	return out;
}

/* The mlx5_cqe64 of entry `n`, once software owns it (libmlx5's get_sw_cqe); NULL if the
 * device has not written it. */
static struct mlx5_cqe64 *sw_cqe(struct mlx5dv_cq *c, uint32_t n)
{
	uint8_t *e = (uint8_t *)c->buf + (size_t)(n & (c->cqe_cnt - 1)) * c->cqe_size;
	struct mlx5_cqe64 *cqe64 = (struct mlx5_cqe64 *)(c->cqe_size == 64 ? e : e + 64);
	for (int i = 0; i < 1000000; i++) {
		uint8_t op_own = __atomic_load_n(&cqe64->op_own, __ATOMIC_ACQUIRE);
		if ((op_own >> 4) != CQE_INVALID && !((op_own & CQE_OWNER_MASK) ^ !!(n & c->cqe_cnt)))
			return cqe64;
		sched_yield();
	}
	return NULL;
}

static void post_write(struct ibv_qp *qp, void *src, uint32_t lkey, void *dst, uint32_t rkey, uint32_t n, uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)src, .length = n, .lkey = lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED }, *bad = NULL;
	wr.wr.rdma.remote_addr = (uintptr_t)dst;
	wr.wr.rdma.rkey = rkey;
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), 0, "ibv_post_send(RDMA WRITE)");
}

static void post_send(struct ibv_qp *qp, void *src, uint32_t lkey, uint32_t n, uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)src, .length = n, .lkey = lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad = NULL;
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), 0, "ibv_post_send(SEND)");
}

static void post_recv(struct ibv_qp *qp, void *dst, uint32_t lkey, uint32_t n, uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)dst, .length = n, .lkey = lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad = NULL;
	CHECK_EQ(ibv_post_recv(qp, &wr, &bad), 0, "ibv_post_recv");
}

struct rig {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	uint8_t *buf; /* [0, 4096): sources; [4096, 8192): targets */
};

static void pair(struct rig *r, struct ibv_cq *cq, struct ibv_qp **a, struct ibv_qp **b)
{
	*a = rc_qp(r->ctx, r->pd, cq, 0);
	*b = rc_qp(r->ctx, r->pd, cq, 0);
	CHECK(*a && *b, "ibv_create_qp_ex: %s", strerror(errno));
	connect_qp(r->ctx, *a, *b);
	connect_qp(r->ctx, *b, *a);
}

/* A SEND of 48 bytes and a WRITE on a CQ of 128-byte entries: the ring read by hand, then
 * ibv_poll_cq, which copies the scattered SEND to the receive buffer. */
static void ring_and_poll(struct rig *r, struct ibv_cq *cq, const char *what)
{
	struct mlx5dv_cq c = dv_cq(cq);
	CHECK_EQ(c.cqe_size, 128, "mlx5dv_init_obj's cqe_size");
	CHECK_EQ(c.cqe_cnt, (uint32_t)cq->cqe + 1, "mlx5dv_init_obj's cqe_cnt");
	struct ibv_qp *a, *b;
	pair(r, cq, &a, &b);
	uint8_t *src = r->buf, *dst = r->buf + 4096;
	for (int i = 0; i < 64; i++)
		src[i] = (uint8_t)(0xa0 + i);
	memset(dst, 0, 128);
	post_recv(b, dst, r->mr->lkey, 64, 7);
	post_send(a, src, r->mr->lkey, 48, 8);
	/* Requester and responder CQEs, in either order, in entries 0 and 1. */
	int seen_req = 0, seen_resp = 0;
	for (uint32_t n = 0; n < 2; n++) {
		struct mlx5_cqe64 *e = sw_cqe(&c, n);
		CHECK(e, "%s: entry %u of the ring is never software's", what, n);
		uint8_t op = e->op_own >> 4;
		uint32_t qpn = be32toh(e->sop_drop_qpn) & 0xffffff;
		if (op == MLX5_CQE_REQ) {
			CHECK_EQ(qpn, a->qp_num, "the requester CQE's QP");
			seen_req = 1;
		} else {
			CHECK_EQ(op, MLX5_CQE_RESP_SEND, "the responder CQE's opcode");
			CHECK_EQ(qpn, b->qp_num, "the responder CQE's QP");
			CHECK_EQ(be32toh(e->byte_cnt), 48, "the responder CQE's byte_cnt");
			/* Scattered to the CQE: the 64 bytes before the mlx5_cqe64 hold it. */
			if (e->op_own & INLINE_SCATTER_64)
				CHECK(memcmp((uint8_t *)e - 64, src, 48) == 0, "the SEND in the entry's first half");
			seen_resp = 1;
		}
	}
	CHECK(seen_req && seen_resp, "%s: a requester and a responder CQE", what);
	struct ibv_wc wc[2];
	int got = 0;
	for (int i = 0; i < 1000000 && got < 2; i++)
		got += ibv_poll_cq(cq, 2 - got, wc + got);
	CHECK_EQ(got, 2, "ibv_poll_cq of the two completions");
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(wc[i].status, IBV_WC_SUCCESS, "status");
		if (wc[i].opcode == IBV_WC_RECV)
			CHECK(wc[i].wr_id == 7 && wc[i].byte_len == 48, "the receive's completion");
	}
	CHECK(memcmp(dst, src, 48) == 0, "%s: the SEND's bytes in the receive buffer", what);

	/* Round the ring a few times: entry n's ownership bit is n's lap parity. */
	uint32_t next = 2;
	for (uint32_t i = 0; i < 3 * c.cqe_cnt; i++, next++) {
		post_write(a, src, r->mr->lkey, dst, r->mr->rkey, 16, 100 + i);
		struct mlx5_cqe64 *e = sw_cqe(&c, next);
		CHECK(e, "%s: entry %u never software's", what, next);
		CHECK_EQ(e->op_own >> 4, MLX5_CQE_REQ, "a WRITE's CQE");
		struct ibv_wc w = poll_one(cq);
		CHECK(w.status == IBV_WC_SUCCESS && w.wr_id == 100 + i, "the WRITE's completion");
	}

	/* Resize with two completions unread: the entries stay 128 bytes and both survive. */
	post_write(a, src, r->mr->lkey, dst, r->mr->rkey, 16, 200);
	post_write(a, src, r->mr->lkey, dst, r->mr->rkey, 16, 201);
	CHECK_EQ(ibv_resize_cq(cq, 2 * cq->cqe + 1), 0, "ibv_resize_cq");
	c = dv_cq(cq);
	CHECK_EQ(c.cqe_size, 128, "cqe_size after ibv_resize_cq");
	CHECK_EQ(c.cqe_cnt, (uint32_t)cq->cqe + 1, "cqe_cnt after ibv_resize_cq");
	CHECK_EQ(poll_one(cq).wr_id, 200, "the first completion across the resize");
	CHECK_EQ(poll_one(cq).wr_id, 201, "the second completion across the resize");

	/* A QP destroyed with a completion unread: mlx5_cq_clean takes its 128-byte entry out. */
	post_write(a, src, r->mr->lkey, dst, r->mr->rkey, 16, 300);
	post_write(b, src, r->mr->lkey, dst, r->mr->rkey, 16, 301);
	for (int i = 0; i < 100000; i++)
		sched_yield();
	CHECK_EQ(ibv_destroy_qp(a), 0, "ibv_destroy_qp(a)");
	struct ibv_wc w = poll_one(cq);
	CHECK(w.wr_id == 301 && w.qp_num == b->qp_num, "only the live QP's completion is left");
	CHECK_EQ(ibv_poll_cq(cq, 1, &w), 0, "nothing else");
	CHECK_EQ(ibv_destroy_qp(b), 0, "ibv_destroy_qp(b)");
	printf("ok: %s\n", what);
}

/* Extended polling of a 128-byte CQ. */
static void ex_poll(struct rig *r)
{
	struct ibv_cq_init_attr_ex a = { .cqe = 8, .wc_flags = IBV_WC_STANDARD_FLAGS };
	struct mlx5dv_cq_init_attr dv = { .comp_mask = MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE, .cqe_size = 128 };
	struct ibv_cq_ex *cq = mlx5dv_create_cq(r->ctx, &a, &dv);
	CHECK(cq, "mlx5dv_create_cq(128): %s", strerror(errno));
	struct ibv_qp *x, *y;
	pair(r, ibv_cq_ex_to_cq(cq), &x, &y);
	post_write(x, r->buf, r->mr->lkey, r->buf + 4096, r->mr->rkey, 32, 42);
	struct ibv_poll_cq_attr pa = {};
	int rc = ENOENT;
	for (int i = 0; i < 1000000 && rc == ENOENT; i++)
		rc = ibv_start_poll(cq, &pa);
	CHECK_EQ(rc, 0, "ibv_start_poll");
	CHECK(cq->wr_id == 42 && cq->status == IBV_WC_SUCCESS, "the extended poll's completion");
	CHECK_EQ(ibv_wc_read_opcode(cq), IBV_WC_RDMA_WRITE, "ibv_wc_read_opcode");
	CHECK_EQ(ibv_wc_read_qp_num(cq), x->qp_num, "ibv_wc_read_qp_num");
	ibv_end_poll(cq);
	CHECK_EQ(ibv_destroy_qp(x), 0, "ibv_destroy_qp");
	CHECK_EQ(ibv_destroy_qp(y), 0, "ibv_destroy_qp");
	CHECK_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0, "ibv_destroy_cq");
	printf("ok: ibv_start_poll on a 128-byte CQ\n");
}

/* `cap + 1` WRITEs with nothing polled on a CQ of `cap` entries: with IGNORE_OVERRUN all
 * complete and no CQ error comes; without it the CQ overruns (IBV_EVENT_CQ_ERR). */
static void overrun(struct rig *r, int ignore)
{
	struct ibv_cq_init_attr_ex a = { .cqe = 3, .wc_flags = IBV_WC_STANDARD_FLAGS };
	if (ignore) {
		a.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
		a.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
	}
	struct ibv_cq_ex *cq = ibv_create_cq_ex(r->ctx, &a);
	if (!cq && ignore && errno == EINVAL)
		SKIP("the device has no cq_oi (IGNORE_OVERRUN is EINVAL)");
	CHECK(cq, "ibv_create_cq_ex%s: %s", ignore ? "(IGNORE_OVERRUN)" : "", strerror(errno));
	struct ibv_cq *c = ibv_cq_ex_to_cq(cq);
	CHECK_EQ(c->cqe, 3, "the capacity of a CQ of 3");
	struct ibv_qp *x, *y;
	pair(r, c, &x, &y);
	for (int i = 0; i <= c->cqe; i++)
		post_write(x, r->buf, r->mr->lkey, r->buf + 4096, r->mr->rkey, 8, 500 + i);
	for (int i = 0; i < 100000; i++)
		sched_yield();
	struct ibv_async_event ev;
	int got_event = ibv_get_async_event(r->ctx, &ev) == 0;
	if (got_event) {
		CHECK(ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == c, "the event is the CQ's error");
		ibv_ack_async_event(&ev);
	}
	if (ignore) {
		CHECK(!got_event, "no async event on a CQ that ignores overrun");
		for (int i = 0; i <= c->cqe; i++) {
			struct ibv_wc w = poll_one(c);
			CHECK(w.status == IBV_WC_SUCCESS && w.wr_id == (uint64_t)(500 + i),
			      "completion %d of %d on the full CQ", i, c->cqe + 1);
		}
	} else {
		CHECK(got_event, "IBV_EVENT_CQ_ERR on the overrun");
	}
	CHECK_EQ(ibv_destroy_qp(x), 0, "ibv_destroy_qp");
	CHECK_EQ(ibv_destroy_qp(y), 0, "ibv_destroy_qp");
	CHECK_EQ(ibv_destroy_cq(c), 0, "ibv_destroy_cq");
	printf("ok: %d WRITEs on a CQ of %d %s\n", a.cqe + 1, a.cqe,
	       ignore ? "that ignores overrun: all complete, no event" : "overrun: IBV_EVENT_CQ_ERR");
}

int main(void)
{
	struct ibv_device **list;
	struct rig r = {};
	r.ctx = ibv_open_device(first_mlx5(&list));
	CHECK(r.ctx, "ibv_open_device");
	r.pd = ibv_alloc_pd(r.ctx);
	r.buf = aligned_alloc(4096, 8192);
	CHECK(r.pd && r.buf, "ibv_alloc_pd");
	int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	r.mr = ibv_reg_mr(r.pd, r.buf, 8192, rw);
	CHECK(r.mr, "ibv_reg_mr");
	int fl = fcntl(r.ctx->async_fd, F_GETFL);
	CHECK(fcntl(r.ctx->async_fd, F_SETFL, fl | O_NONBLOCK) == 0, "O_NONBLOCK on the async fd");

	struct ibv_cq_init_attr_ex a = { .cqe = 6, .wc_flags = IBV_WC_STANDARD_FLAGS };
	struct mlx5dv_cq_init_attr dv = { .comp_mask = MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE, .cqe_size = 128 };
	struct ibv_cq_ex *cq = mlx5dv_create_cq(r.ctx, &a, &dv);
	CHECK(cq, "mlx5dv_create_cq(cqe_size 128): %s", strerror(errno));
	ring_and_poll(&r, ibv_cq_ex_to_cq(cq), "mlx5dv_create_cq with cqe_size 128");
	CHECK_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0, "ibv_destroy_cq");

	/* Padded 128-byte CQEs where offered: the same ring. */
	struct mlx5dv_context dctx = {};
	CHECK_EQ(mlx5dv_query_device(r.ctx, &dctx), 0, "mlx5dv_query_device");
	if (dctx.flags & MLX5DV_CONTEXT_FLAGS_CQE_128B_PAD) {
		dv.comp_mask |= MLX5DV_CQ_INIT_ATTR_MASK_FLAGS;
		dv.flags = MLX5DV_CQ_INIT_ATTR_FLAGS_CQE_PAD;
		cq = mlx5dv_create_cq(r.ctx, &a, &dv);
		CHECK(cq, "mlx5dv_create_cq(128, CQE_PAD): %s", strerror(errno));
		ring_and_poll(&r, ibv_cq_ex_to_cq(cq), "a padded 128-byte CQ");
		CHECK_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0, "ibv_destroy_cq");
	}

	/* libmlx5 reads MLX5_CQE_SIZE for ibv_create_cq too. */
	setenv("MLX5_CQE_SIZE", "128", 1);
	struct ibv_cq *plain = ibv_create_cq(r.ctx, 6, NULL, NULL, 0);
	unsetenv("MLX5_CQE_SIZE");
	CHECK(plain, "ibv_create_cq with MLX5_CQE_SIZE=128: %s", strerror(errno));
	ring_and_poll(&r, plain, "ibv_create_cq with MLX5_CQE_SIZE=128");
	CHECK_EQ(ibv_destroy_cq(plain), 0, "ibv_destroy_cq");
	plain = ibv_create_cq(r.ctx, 6, NULL, NULL, 0);
	CHECK(plain, "ibv_create_cq");
	CHECK_EQ(dv_cq(plain).cqe_size, 64, "cqe_size without MLX5_CQE_SIZE");
	CHECK_EQ(ibv_destroy_cq(plain), 0, "ibv_destroy_cq");

	ex_poll(&r);
	overrun(&r, 0);
	overrun(&r, 1);

	CHECK_EQ(ibv_dereg_mr(r.mr), 0, "ibv_dereg_mr");
	CHECK_EQ(ibv_dealloc_pd(r.pd), 0, "ibv_dealloc_pd");
	CHECK_EQ(ibv_close_device(r.ctx), 0, "ibv_close_device");
	ibv_free_device_list(list);
	free(r.buf);
	printf("PASS: 128-byte CQEs in the ring (read by hand and polled, resize, cleanup) and IGNORE_OVERRUN\n");
	return 0;
}
