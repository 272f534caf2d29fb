/* A program that drives the rings itself, as UCX's rc_mlx5 and SPDK do: mlx5dv_init_obj hands
 * out the queues, doorbell records, CQ rings and BlueFlame register; the program writes WQEs
 * with mlx5dv_set_* , moves the doorbell record, stores the doorbell, and polls cq.buf, with no
 * library call between the doorbell and the CQE. An RDMA WRITE, a SEND into a receive WQE the
 * program wrote itself, an RDMA READ; then a WQE of the program's own followed by
 * ibv_post_send on the same QP. Skips without a card on the real libraries. */
#include <stdatomic.h>
#include <time.h>

#include "common.h"

struct ring {
	struct mlx5dv_qp qp;
	struct mlx5dv_cq cq;
	uint32_t qpn;
	uint16_t sq_pi;
	uint16_t rq_pi;
	uint32_t cq_ci;
	unsigned bf_offset;
};

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* Wait for the next CQE of the ring's CQ, by its owner bit; return it and move the consumer
 * index (and its doorbell record) past it. */
static struct mlx5_cqe64 next_cqe(struct ring *r, const char *what)
{
	double end = now() + 10.0;
	for (;;) {
		uint32_t i = r->cq_ci & (r->cq.cqe_cnt - 1);
		volatile struct mlx5_cqe64 *c =
			(volatile struct mlx5_cqe64 *)((char *)r->cq.buf + i * r->cq.cqe_size + r->cq.cqe_size - 64);
		uint8_t op_own = c->op_own;
		int owner = !!(r->cq_ci & r->cq.cqe_cnt);
		if ((op_own >> 4) != MLX5_CQE_INVALID && (op_own & MLX5_CQE_OWNER_MASK) == owner) {
			atomic_thread_fence(memory_order_acquire);
			struct mlx5_cqe64 copy = *(struct mlx5_cqe64 *)c;
			r->cq_ci++;
			r->cq.dbrec[0 /* MLX5_CQ_SET_CI, not in mlx5dv.h */] = htobe32(r->cq_ci & 0xffffff);
			return copy;
		}
		CHECK(now() < end, "%s: no CQE in cq.buf after 10 s", what);
	}
}

/* Post `ds` 16-byte units already written at the send queue's producer index: the doorbell
 * record, then an 8-byte store of the control segment to the BlueFlame register. */
static void ring_send(struct ring *r, struct mlx5_wqe_ctrl_seg *ctrl, unsigned bbs)
{
	r->sq_pi += bbs;
	atomic_thread_fence(memory_order_release);
	r->qp.dbrec[MLX5_SND_DBR] = htobe32(r->sq_pi);
	atomic_thread_fence(memory_order_release);
	*(volatile uint64_t *)((char *)r->qp.bf.reg + r->bf_offset) = *(uint64_t *)ctrl;
	r->bf_offset ^= r->qp.bf.size;
}

static void *wqe_at(struct ring *r, uint16_t pi)
{
	return (char *)r->qp.sq.buf + (size_t)(pi & (r->qp.sq.wqe_cnt - 1)) * r->qp.sq.stride;
}

/* An RDMA WRITE (0x08) or READ (0x10) from `lkey:laddr` to `rkey:raddr`. */
static void post_rdma(struct ring *r, uint8_t opcode, uint64_t laddr, uint32_t lkey, uint64_t raddr, uint32_t rkey,
		      uint32_t len)
{
	struct mlx5_wqe_ctrl_seg *ctrl = wqe_at(r, r->sq_pi);
	struct mlx5_wqe_raddr_seg *rseg = (void *)(ctrl + 1);
	struct mlx5_wqe_data_seg *dseg = (void *)(rseg + 1);
	mlx5dv_set_ctrl_seg(ctrl, r->sq_pi, opcode, 0, r->qpn, MLX5_WQE_CTRL_CQ_UPDATE, 3, 0, 0);
	rseg->raddr = htobe64(raddr);
	rseg->rkey = htobe32(rkey);
	rseg->reserved = 0;
	mlx5dv_set_data_seg(dseg, len, lkey, laddr);
	ring_send(r, ctrl, 1);
}

/* A SEND (0x0a) of `len` bytes at `lkey:laddr`. */
static void post_send_raw(struct ring *r, uint64_t laddr, uint32_t lkey, uint32_t len)
{
	struct mlx5_wqe_ctrl_seg *ctrl = wqe_at(r, r->sq_pi);
	struct mlx5_wqe_data_seg *dseg = (void *)(ctrl + 1);
	mlx5dv_set_ctrl_seg(ctrl, r->sq_pi, MLX5_OPCODE_SEND, 0, r->qpn, MLX5_WQE_CTRL_CQ_UPDATE, 2, 0, 0);
	mlx5dv_set_data_seg(dseg, len, lkey, laddr);
	ring_send(r, ctrl, 1);
}

/* A receive WQE of one data segment, terminated if the stride holds more. */
static void post_recv_raw(struct ring *r, uint64_t addr, uint32_t lkey, uint32_t len)
{
	struct mlx5_wqe_data_seg *d =
		(void *)((char *)r->qp.rq.buf + (size_t)(r->rq_pi & (r->qp.rq.wqe_cnt - 1)) * r->qp.rq.stride);
	mlx5dv_set_data_seg(d, len, lkey, addr);
	if (r->qp.rq.stride > sizeof(*d)) {
		d[1].byte_count = 0;
		d[1].lkey = htobe32(MLX5_INVALID_LKEY);
		d[1].addr = 0;
	}
	r->rq_pi++;
	atomic_thread_fence(memory_order_release);
	r->qp.dbrec[MLX5_RCV_DBR] = htobe32(r->rq_pi);
}

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 2 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &a);
	CHECK(qp, "ibv_create_qp: %s", strerror(errno));
	return qp;
}

static void init(struct ring *r, struct ibv_qp *qp, struct ibv_cq *cq)
{
	memset(r, 0, sizeof(*r));
	struct mlx5dv_obj o = { .qp = { .in = qp, .out = &r->qp }, .cq = { .in = cq, .out = &r->cq } };
	CHECK_EQ(mlx5dv_init_obj(&o, MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ), 0, "mlx5dv_init_obj(QP | CQ)");
	CHECK(r->qp.sq.stride == 64 && r->qp.sq.wqe_cnt >= 16, "sq: stride %u, wqe_cnt %u", r->qp.sq.stride,
	      r->qp.sq.wqe_cnt);
	CHECK(r->qp.rq.wqe_cnt >= 16 && r->qp.rq.stride >= 16, "rq: wqe_cnt %u, stride %u", r->qp.rq.wqe_cnt,
	      r->qp.rq.stride);
	CHECK(r->qp.bf.reg && (r->qp.bf.size == 0 || r->qp.bf.size == 256), "bf.reg, bf.size %u", r->qp.bf.size);
	CHECK(r->cq.cqe_size == 64 || r->cq.cqe_size == 128, "cqe_size %u", r->cq.cqe_size);
	CHECK(r->cq.cqe_cnt >= 16 && (r->cq.cqe_cnt & (r->cq.cqe_cnt - 1)) == 0, "cqe_cnt %u", r->cq.cqe_cnt);
	r->qpn = qp->qp_num;
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_device *dev = first_mlx5(&list);
	struct ibv_context *ctx = ibv_open_device(dev);
	CHECK(ctx, "ibv_open_device: %s", strerror(errno));
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cqa = ibv_create_cq(ctx, 16, NULL, NULL, 0), *cqb = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(pd && cqa && cqb, "PD and CQs");
	struct ibv_qp *qa = make_qp(pd, cqa), *qb = make_qp(pd, cqb);
	connect_qp(ctx, qa, qb);
	connect_qp(ctx, qb, qa);
	struct ring a, b;
	init(&a, qa, cqa);
	init(&b, qb, cqb);

	enum { LEN = 256 };
	uint8_t *src = calloc(1, LEN), *dst = calloc(1, LEN), *back = calloc(1, LEN);
	for (int i = 0; i < LEN; i++)
		src[i] = (uint8_t)(i * 7 + 3);
	int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct ibv_mr *ms = ibv_reg_mr(pd, src, LEN, rw), *md = ibv_reg_mr(pd, dst, LEN, rw),
		      *mb = ibv_reg_mr(pd, back, LEN, rw);
	CHECK(ms && md && mb, "ibv_reg_mr");

	/* RDMA WRITE: the requester CQE names the QP and the WQE's first basic block. */
	post_rdma(&a, MLX5_OPCODE_RDMA_WRITE, (uintptr_t)src, ms->lkey, (uintptr_t)dst, md->rkey, LEN);
	struct mlx5_cqe64 c = next_cqe(&a, "RDMA WRITE");
	CHECK_EQ(mlx5dv_get_cqe_opcode(&c), MLX5_CQE_REQ, "WRITE: a requester CQE");
	CHECK_EQ(be32toh(c.sop_drop_qpn) & 0xffffff, a.qpn, "WRITE: the CQE's QPN");
	CHECK_EQ(be16toh(c.wqe_counter), 0, "WRITE: wqe_counter");
	CHECK(memcmp(src, dst, LEN) == 0, "WRITE: the bytes landed");
	printf("ok: an RDMA WRITE rung with a store completes in cq.buf\n");

	/* SEND into a receive WQE written by hand. */
	memset(dst, 0, LEN);
	post_recv_raw(&b, (uintptr_t)dst, md->lkey, LEN);
	post_send_raw(&a, (uintptr_t)src, ms->lkey, 100);
	c = next_cqe(&a, "SEND, requester");
	CHECK_EQ(mlx5dv_get_cqe_opcode(&c), MLX5_CQE_REQ, "SEND: a requester CQE");
	CHECK_EQ(be16toh(c.wqe_counter), 1, "SEND: wqe_counter");
	c = next_cqe(&b, "SEND, responder");
	CHECK_EQ(mlx5dv_get_cqe_opcode(&c), MLX5_CQE_RESP_SEND, "SEND: a responder CQE");
	CHECK_EQ(be32toh(c.byte_cnt), 100, "SEND: byte_cnt");
	CHECK_EQ(be32toh(c.sop_drop_qpn) & 0xffffff, b.qpn, "SEND: the receiving QP");
	CHECK(memcmp(src, dst, 100) == 0 && dst[100] == 0, "SEND: 100 bytes landed");
	printf("ok: a SEND into a hand-written receive WQE\n");

	/* RDMA READ back into a third buffer. */
	post_rdma(&a, MLX5_OPCODE_RDMA_READ, (uintptr_t)back, mb->lkey, (uintptr_t)src, ms->rkey, LEN);
	c = next_cqe(&a, "RDMA READ");
	CHECK_EQ(mlx5dv_get_cqe_opcode(&c), MLX5_CQE_REQ, "READ: a requester CQE");
	CHECK_EQ(be32toh(c.byte_cnt), LEN, "READ: byte_cnt");
	CHECK(memcmp(src, back, LEN) == 0, "READ: the bytes came back");
	printf("ok: an RDMA READ\n");

	/* Mixed: a WQE of the program's own, then ibv_post_send on the same QP, the library
	 * taking up at the producer index the doorbell record shows. */
	memset(dst, 0, LEN);
	post_rdma(&a, MLX5_OPCODE_RDMA_WRITE, (uintptr_t)src, ms->lkey, (uintptr_t)dst, md->rkey, 64);
	c = next_cqe(&a, "the program's WQE");
	CHECK_EQ(be16toh(c.wqe_counter), 3, "the program's WQE: wqe_counter");
	struct ibv_sge sge = { .addr = (uintptr_t)src + 64, .length = 64, .lkey = ms->lkey };
	struct ibv_send_wr wr = { .wr_id = 77, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED,
				  .wr.rdma = { .remote_addr = (uintptr_t)dst + 64, .rkey = md->rkey } },
			   *bad;
	CHECK_EQ(ibv_post_send(qa, &wr, &bad), 0, "ibv_post_send after the program's own WQEs");
	c = next_cqe(&a, "ibv_post_send's WQE");
	CHECK_EQ(be16toh(c.wqe_counter), 4, "ibv_post_send's WQE: wqe_counter");
	CHECK(memcmp(src, dst, 128) == 0, "both WRITEs landed");
	printf("ok: the program's WQE and ibv_post_send's on one QP\n");

	ibv_destroy_qp(qa);
	ibv_destroy_qp(qb);
	ibv_dereg_mr(ms);
	ibv_dereg_mr(md);
	ibv_dereg_mr(mb);
	ibv_destroy_cq(cqa);
	ibv_destroy_cq(cqb);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("PASS\n");
	return 0;
}
