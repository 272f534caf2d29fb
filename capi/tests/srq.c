/* Shared receive queues through the C ABI: libmlx5's rounding written back, ibv_query_srq and
 * ibv_modify_srq's refusals, a QP on an SRQ (no receive queue of its own, ibv_post_recv
 * ENOMEM, the SRQ pinned), a receive through ibv_post_srq_recv, the limit event with the SRQ as
 * its element, and a WQE the program writes itself through mlx5dv_init_obj's pointers. */
#include <fcntl.h>
#include <unistd.h>
#include "common.h"

static void send_bytes(struct end *c, struct ibv_mr *mr, char *buf, uint32_t len, uint64_t id)
{
	struct ibv_sge s = { .addr = (uintptr_t)buf, .length = len, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	CHECK_EQ(ibv_post_send(c->qp, &wr, &bad), 0, "ibv_post_send");
	struct ibv_wc wc = poll_one(c->cq);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS, "the SEND's status");
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = ibv_open_device(first_mlx5(&list));
	CHECK(ctx, "ibv_open_device");
	struct ibv_device_attr da;
	CHECK_EQ(ibv_query_device(ctx, &da), 0, "ibv_query_device");
	if (da.max_srq == 0)
		SKIP("the device has no SRQs");
	CHECK(da.max_srq_wr > 0 && da.max_srq_sge > 0, "max_srq %d but max_srq_wr %d, max_srq_sge %d", da.max_srq,
	      da.max_srq_wr, da.max_srq_sge);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd");

	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 100, .max_sge = 2 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	CHECK(srq, "ibv_create_srq: %s", strerror(errno));
	CHECK_EQ(sa.attr.max_wr, 127, "max_wr written back");
	CHECK_EQ(sa.attr.max_sge, 3, "max_sge written back");
	struct ibv_srq_attr qa;
	CHECK_EQ(ibv_query_srq(srq, &qa), 0, "ibv_query_srq");
	CHECK_EQ(qa.max_wr, 255, "queried max_wr (the wait queue counted)");
	CHECK_EQ(qa.srq_limit, 0, "queried srq_limit");
	struct ibv_srq_attr ma = { .max_wr = 300, .srq_limit = 256 };
	CHECK_EQ(ibv_modify_srq(srq, &ma, IBV_SRQ_MAX_WR), EINVAL, "IBV_SRQ_MAX_WR");
	CHECK_EQ(ibv_modify_srq(srq, &ma, IBV_SRQ_LIMIT), EINVAL, "IBV_SRQ_LIMIT 256");
	uint32_t num = 0;
	CHECK_EQ(ibv_get_srq_num(srq, &num), 0, "ibv_get_srq_num");

	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0), *scq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK(cq && scq, "ibv_create_cq");
	struct end c = { cq, rc_qp(ctx, pd, cq, 0) };
	struct ibv_qp_init_attr qi = { .send_cq = scq, .recv_cq = scq, .srq = srq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 4, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 4 } };
	struct end s = { scq, ibv_create_qp(pd, &qi) };
	CHECK(c.qp && s.qp, "ibv_create_qp: %s", strerror(errno));
	CHECK_EQ(qi.cap.max_recv_wr, 0, "max_recv_wr of a QP on an SRQ");
	CHECK(s.qp->srq == srq, "qp->srq");
	connect_qp(ctx, c.qp, s.qp);
	connect_qp(ctx, s.qp, c.qp);

	static char sbuf[4096], rbuf[4096];
	for (int i = 0; i < 4096; i++)
		sbuf[i] = (char)(i * 7 + 1);
	struct ibv_mr *smr = ibv_reg_mr(pd, sbuf, sizeof(sbuf), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *rmr = ibv_reg_mr(pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(smr && rmr, "ibv_reg_mr");
	struct ibv_sge rs = { .addr = (uintptr_t)rbuf, .length = 64, .lkey = rmr->lkey };
	struct ibv_recv_wr rw = { .wr_id = 7, .sg_list = &rs, .num_sge = 1 }, *bad;
	CHECK_EQ(ibv_post_recv(s.qp, &rw, &bad), ENOMEM, "ibv_post_recv on a QP with an SRQ");
	CHECK_EQ(ibv_destroy_srq(srq), EBUSY, "ibv_destroy_srq while a QP uses it");

	/* A receive through ibv_post_srq_recv; the limit armed at 1 fires as it is taken. */
	CHECK_EQ(ibv_post_srq_recv(srq, &rw, &bad), 0, "ibv_post_srq_recv");
	ma.srq_limit = 1;
	CHECK_EQ(ibv_modify_srq(srq, &ma, IBV_SRQ_LIMIT), 0, "IBV_SRQ_LIMIT 1");
	send_bytes(&c, smr, sbuf, 40, 1);
	struct ibv_wc wc = poll_one(scq);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS, "receive status");
	CHECK_EQ(wc.wr_id, 7, "receive wr_id (the SRQ WQE's)");
	CHECK_EQ(wc.qp_num, s.qp->qp_num, "receive qp_num (the QP's)");
	CHECK_EQ(wc.byte_len, 40, "receive byte_len");
	CHECK(memcmp(rbuf, sbuf, 40) == 0, "the received bytes");
	int fl = fcntl(ctx->async_fd, F_GETFL);
	CHECK(fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK) == 0, "O_NONBLOCK on the async fd");
	/* Non-blocking: EAGAIN until the event is there (a stepped device queues it in the call). */
	struct ibv_async_event ev;
	int got = -1;
	for (int i = 0; i < 5000 && got != 0; i++) {
		got = ibv_get_async_event(ctx, &ev);
		CHECK(got == 0 || errno == EAGAIN, "ibv_get_async_event: %s", strerror(errno));
		if (got != 0)
			usleep(1000);
	}
	CHECK_EQ(got, 0, "an async event within 5 s");
	CHECK_EQ(ev.event_type, IBV_EVENT_SRQ_LIMIT_REACHED, "event type");
	CHECK(ev.element.srq == srq, "the event's SRQ");
	ibv_ack_async_event(&ev);
	CHECK_EQ(ibv_query_srq(srq, &qa), 0, "ibv_query_srq");
	CHECK_EQ(qa.srq_limit, 0, "srq_limit after the event (disarmed)");

	/* A WQE the program writes at libmlx5's head, posted by a store to the doorbell record. */
	struct mlx5dv_srq d = { .comp_mask = MLX5DV_SRQ_MASK_SRQN };
	struct mlx5dv_obj o = { .srq = { .in = srq, .out = &d } };
	CHECK_EQ(mlx5dv_init_obj(&o, MLX5DV_OBJ_SRQ), 0, "mlx5dv_init_obj(SRQ)");
	CHECK_EQ(d.srqn, num, "srqn");
	CHECK_EQ(d.stride, 64, "stride");
	CHECK_EQ(d.head, 1, "head after one post");
	CHECK_EQ(d.tail, 127, "tail");
	struct mlx5_wqe_data_seg *seg = (void *)((char *)d.buf + d.head * d.stride + 16);
	seg[0].byte_count = htobe32(64);
	seg[0].lkey = htobe32(rmr->lkey);
	seg[0].addr = htobe64((uintptr_t)(rbuf + 1024));
	seg[1].byte_count = 0;
	seg[1].lkey = htobe32(MLX5_INVALID_LKEY);
	seg[1].addr = 0;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	d.dbrec[0] = htobe32(2);
	send_bytes(&c, smr, sbuf + 100, 50, 2);
	wc = poll_one(scq);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS, "the program-posted receive's status");
	CHECK_EQ(wc.byte_len, 50, "its byte_len");
	CHECK(memcmp(rbuf + 1024, sbuf + 100, 50) == 0, "its bytes, where the program's WQE pointed");

	CHECK_EQ(ibv_destroy_qp(s.qp), 0, "ibv_destroy_qp");
	CHECK_EQ(ibv_destroy_srq(srq), 0, "ibv_destroy_srq");
	CHECK_EQ(ibv_destroy_qp(c.qp), 0, "ibv_destroy_qp");
	ibv_dereg_mr(smr);
	ibv_dereg_mr(rmr);
	ibv_destroy_cq(cq);
	ibv_destroy_cq(scq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("srq: ok\n");
	return 0;
}
